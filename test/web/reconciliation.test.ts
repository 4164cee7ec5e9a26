/**
 * The Reconciliation read model, page and API over a reconciled sandbox (test/web/reconciliation-fixture.ts):
 * each day's statement balances, the ledger's `bank:<id>` at the day's end, the matched share and the
 * unmatched lines equal what the files and the ground truth say; every statement day is explained
 * (closing - opening before the first statement - unmatched lines to date = ledger: nothing unexplained),
 * still after a match by hand and its unmatch, and not once a ledger entry is off; an operator matches a planted unrelated
 * line by hand with a note (the exception is resolved, the match records who and why) and unmatches it; a
 * viewer reads but is refused (403), a post without its form token too; the API does the same with its
 * scopes, and a line matched twice is a conflict.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX, buildApiApp } from '../../src/api/app.ts';
import {
  type ReconciliationDay,
  reconciliationAccounts,
  reconciliationDay,
} from '../../src/db/read-models/reconciliation.ts';
import { createApiToken } from '../../src/domain/api-tokens.ts';
import { formatAmount } from '../../src/domain/money.ts';
import { ReportRunner } from '../../src/reports/runs.ts';
import { buildWebApp } from '../../src/web/app.ts';
import { hashPassword } from '../../src/web/auth.ts';
import { formatMoney } from '../../src/web/html.ts';
import { ledgerWebServices } from '../../src/web/services.ts';
import { OpenApiValidator } from '../api/openapi-validator.ts';
import { keepTwoBalanceChecks } from '../db/balance-check-rows.ts';
import { cents } from '../sandbox/settlement-helpers.ts';
import { DAYS, dateOf, NOW, type Reconciled, reconciledSandbox } from './reconciliation-fixture.ts';

const PASSWORD = 'reconciliation pass phrase';
let r: Reconciled;
let dir: string;
let runner: ReportRunner;
let web: FastifyInstance;
let api: FastifyInstance;
let validator: OpenApiValidator;
const tokens: Record<string, string> = {};

class Jar {
  cookies = new Map<string, string>();
  take(res: LightMyRequestResponse): void {
    for (const c of res.cookies) {
      if (c.value === '' || (c.expires && c.expires.getTime() < Date.now())) this.cookies.delete(c.name);
      else this.cookies.set(c.name, c.value);
    }
  }
  header(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }
}
const csrfOf = (body: string): string => /name="_csrf" value="([^"]+)"/.exec(body)?.[1] ?? '';

async function get(jar: Jar, url: string): Promise<LightMyRequestResponse> {
  const res = await web.inject({
    method: 'GET',
    url,
    headers: { accept: 'text/html', cookie: jar.header() },
  });
  jar.take(res);
  return res;
}
async function post(jar: Jar, url: string, form: [string, string][]): Promise<LightMyRequestResponse> {
  const res = await web.inject({
    method: 'POST',
    url,
    headers: {
      accept: 'text/html',
      'content-type': 'application/x-www-form-urlencoded',
      cookie: jar.header(),
    },
    payload: new URLSearchParams(form).toString(),
  });
  jar.take(res);
  return res;
}
async function signIn(username: string): Promise<Jar> {
  const jar = new Jar();
  const page = await get(jar, '/login');
  const res = await post(jar, '/login', [
    ['_csrf', csrfOf(page.body)],
    ['username', username],
    ['password', PASSWORD],
  ]);
  expect(res.statusCode).toBe(303);
  return jar;
}

async function call(method: 'GET' | 'POST', path: string, token: string, body?: unknown) {
  const res = await api.inject({
    method,
    url: `${API_PREFIX}${path}`,
    headers: {
      authorization: `Bearer ${tokens[token]}`,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
  });
  validator.validate(
    method,
    `${API_PREFIX}${path}`,
    res.statusCode,
    res.headers['content-type'] as string,
    res.body,
  );
  return res;
}

beforeAll(async () => {
  r = await reconciledSandbox();
  dir = await mkdtemp(join(tmpdir(), 'payrecon-recon-'));
  runner = new ReportRunner({ db: r.t.db, dir, timeZone: 'UTC' });
  const passwordHash = await hashPassword(PASSWORD);
  web = await buildWebApp({
    users: [
      { username: 'olga', passwordHash, role: 'operator' },
      { username: 'vera', passwordHash, role: 'viewer' },
    ],
    sessionSecret: 'reconciliation-secret-0123456789-abcdefghijk',
    timeZone: 'UTC',
    services: ledgerWebServices(r.t.db, runner, undefined, { accounts: () => r.banks }),
    now: () => NOW,
  });
  const entries = [];
  for (const [name, scopes] of [
    ['reader', ['read']],
    ['worker', ['read', 'exceptions:write']],
  ] as const) {
    const made = await createApiToken(name, [...scopes]);
    tokens[name] = made.token;
    entries.push(made.entry);
  }
  api = await buildApiApp({
    db: r.t.db,
    reports: runner,
    tokens: entries,
    bankAccounts: () => r.banks,
    timeZone: 'UTC',
    now: () => NOW,
  });
  const doc = await api.inject({ method: 'GET', url: `${API_PREFIX}/openapi.json` });
  validator = new OpenApiValidator(JSON.parse(doc.body), API_PREFIX);
}, 240_000);

afterAll(async () => {
  await web?.close();
  await api?.close();
  await runner?.idle();
  await r?.t.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** The planted lines no rule may match (unrelated, returned), by reference. */
const plantedLines = () =>
  new Set(
    r.truth.bankAnomalies
      .filter((a) => a.kind === 'UNRELATED_LINE' || a.kind === 'RETURNED_CREDIT')
      .map((a) => a.bankRef!),
  );

async function days(): Promise<ReconciliationDay[]> {
  const out: ReconciliationDay[] = [];
  for (const bank of r.banks) {
    for (let n = 0; n < DAYS; n++) out.push(await reconciliationDay(r.t.db, bank, dateOf(n), 'UTC', NOW));
  }
  return out;
}

/** A planted unrelated credit line (BANK_LINE_UNMATCHED) and an open settlement of its bank account. */
async function aPlantedLine() {
  const all = await days();
  for (const day of [...all].reverse()) {
    const line = day.unmatched.find((l) => plantedLines().has(l.reference ?? ''));
    if (line && day.openSettlements.length > 0) return { day, line, settlement: day.openSettlements[0]! };
  }
  throw new Error('no planted line with an open settlement');
}

describe('the reconciliation read model', () => {
  it("holds each day's statement, the ledger's bank account, the matched share and the planted lines", async () => {
    const planted = plantedLines();
    const all = await days();
    let matchedSoFar = new Map<string, bigint>();
    let withStatement = 0;
    for (const day of all) {
      // The statement's opening plus the day's lines is its closing.
      const moved = day.lines.reduce((sum, l) => sum + l.amount, 0n);
      if (day.statement.opening !== null && day.statement.closing !== null) {
        withStatement++;
        expect(day.statement.opening + moved, day.date).toBe(day.statement.closing);
      }
      // The ledger's bank account holds the matched credits booked up to the day's end.
      const bank = day.bank.id;
      const before = matchedSoFar.get(bank) ?? 0n;
      const today = day.lines.filter((l) => l.match !== null).reduce((sum, l) => sum + l.amount, 0n);
      matchedSoFar = new Map(matchedSoFar).set(bank, before + today);
      expect(day.ledger, `${bank} ${day.date}`).toBe(before + today);
      expect(day.ledger - day.ledgerOpening).toBe(today);
      expect(day.difference).toBe(day.statement.closing === null ? null : day.statement.closing - day.ledger);
      // The difference is the first statement's opening balance and the lines not matched up to the day.
      if (day.difference !== null) {
        expect(day.proof.unexplained, `${bank} ${day.date} unexplained`).toBe(0n);
      }
      // Share and unmatched: what no live match covers is exactly the planted lines of the day.
      expect(day.share.lines).toBe(day.lines.length);
      expect(day.share.matchedLines + day.unmatched.length).toBe(day.lines.length);
      for (const l of day.unmatched) expect(planted, l.reference ?? l.identity).toContain(l.reference);
      for (const l of day.lines) {
        if (planted.has(l.reference ?? '')) expect(l.match).toBeNull();
        expect(l.ageDays).toBe(
          Math.round((Date.parse(dateOf(DAYS)) - Date.parse(l.bookingDate)) / 86_400_000),
        );
      }
    }
    expect(withStatement).toBeGreaterThan(DAYS / 2);
    // A day whose statement has no line still shows its balances, from the statement of that date.
    const quiet = all.filter((d) => d.lines.length === 0 && d.statement.closing !== null);
    expect(quiet.length).toBeGreaterThan(0);
    for (const d of quiet) expect(d.statement.opening, `${d.bank.id} ${d.date}`).toBe(d.statement.closing);
    // Another time zone: the day ends at its midnight; a line's match still counts on its booking date.
    for (const d of all.filter((x) => x.lines.length > 0).slice(0, 3)) {
      const there = await reconciliationDay(r.t.db, d.bank, d.date, 'America/Sao_Paulo', NOW);
      expect(there.dayEnd.toISOString()).toBe(`${dateOf(Number(d.date.slice(8)) - 1)}T03:00:00.000Z`);
      expect([there.ledger, there.ledgerOpening]).toEqual([d.ledger, d.ledgerOpening]);
    }
    const unmatched = all.flatMap((d) => d.unmatched.map((l) => l.reference)).sort();
    const expected = r.truth.bankAnomalies
      .filter((a) => planted.has(a.bankRef ?? '') && a.date <= dateOf(DAYS - 1))
      .map((a) => a.bankRef)
      .sort();
    expect(unmatched).toEqual(expected);
    expect(unmatched.length).toBeGreaterThan(0);
    // The credits that never arrived are in transit, not matched, on the last day.
    const last = all.filter((d) => d.date === dateOf(DAYS - 1));
    const open = new Set(last.flatMap((d) => d.openSettlements.map((s) => s.settlementId)));
    const missing = r.truth.bankAnomalies
      .filter((a) => a.kind === 'MISSING_CREDIT' && a.date <= dateOf(DAYS - 1))
      .flatMap((a) => a.settlementIds);
    expect(missing.length).toBeGreaterThan(0);
    for (const id of missing) expect(open).toContain(id);
    const net = new Map(r.truth.settlements.map((s) => [s.settlement_id, cents(s.net)]));
    for (const s of last.flatMap((d) => d.openSettlements)) expect(s.net).toBe(net.get(s.settlementId));
    // Day to day.
    for (const bank of r.banks) {
      const mine = all.filter((d) => d.bank.id === bank.id);
      const withLines = mine.filter((d) => d.lines.length > 0).map((d) => d.date);
      expect(withLines.length).toBeGreaterThan(2);
      for (const d of mine) {
        expect(d.previous).toBe(withLines.filter((x) => x < d.date).at(-1) ?? null);
        expect(d.next).toBe(withLines.find((x) => x > d.date) ?? null);
      }
    }

    const accounts = await reconciliationAccounts(r.t.db, r.banks);
    expect(accounts.map((a) => a.latestDay)).toEqual(r.banks.map(() => dateOf(DAYS - 1)));
    expect(accounts.reduce((n, a) => n + a.unmatchedLines, 0)).toBe(unmatched.length);
  });

  it('explains every statement day: closing - opening before the first statement - unmatched lines = ledger', async () => {
    const explained = await expectExplained();
    expect(explained).toBeGreaterThan(DAYS / 2);
  });
});

/**
 * On every day with a statement closing: the statement's closing balance, less the opening balance of
 * the account's first statement (the earliest day's), less the lines not in the ledger, is the ledger's
 * bank account at the day's end, and the proof says so (nothing unexplained). With `unmatchedNow`, the
 * lines not in the ledger are exactly the unmatched lines booked to date (no match was ever ended). The
 * days explained.
 */
async function expectExplained(unmatchedNow = true): Promise<number> {
  const all = await days();
  let explained = 0;
  for (const bank of r.banks) {
    const mine = all.filter((d) => d.bank.id === bank.id);
    const firstDay = mine.find((d) => d.lines.length > 0)!;
    const opening = firstDay.statement.opening!;
    expect(opening, bank.id).not.toBe(0n);
    for (const day of mine) {
      const toDate = mine.filter((d) => d.date <= day.date).flatMap((d) => d.unmatched);
      const { proof } = day;
      const unmatched = unmatchedNow
        ? toDate.reduce((sum, l) => sum + l.amount, 0n)
        : proof.notInLedger.lines.reduce((sum, l) => sum + l.missing, 0n);
      expect(proof.firstStatement?.date, day.date).toBe(firstDay.date);
      expect(proof.firstStatement?.opening).toBe(opening);
      expect(proof.notInLedger.total, `${bank.id} ${day.date}`).toBe(unmatched);
      if (unmatchedNow) {
        expect(proof.notInLedger.count).toBe(toDate.length);
        expect(proof.notInLedger.lines.map((l) => l.identity).sort()).toEqual(
          toDate.map((l) => l.identity).sort(),
        );
      }
      if (day.statement.closing === null) {
        expect(proof.unexplained).toBeNull();
        continue;
      }
      expect(day.statement.closing - opening - unmatched, `${bank.id} ${day.date}`).toBe(day.ledger);
      expect(proof).toMatchObject({
        difference: day.statement.closing - day.ledger,
        explained: opening + unmatched,
        unexplained: 0n,
      });
      explained++;
    }
  }
  return explained;
}

describe('the Reconciliation page', () => {
  it('lists the bank accounts and shows a day; a viewer reads it but may not match', async () => {
    const { day, line, settlement } = await aPlantedLine();
    const path = `/reconciliation/${encodeURIComponent(day.bank.id)}/${day.date}`;
    const vera = await signIn('vera');
    const list = await get(vera, '/reconciliation');
    expect(list.statusCode).toBe(200);
    expect(list.body).toContain(`href="${path}"`);
    const page = await get(vera, path);
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain(line.reference!);
    // The reconciliation of the day: the difference, what explains it, nothing unexplained (green).
    const money = (m: bigint) => formatMoney(m);
    expect(page.body).toContain(`id="proof-difference">${money(day.difference!)}<`);
    expect(page.body).toContain(`id="proof-opening-before">${money(day.proof.firstStatement!.opening!)}<`);
    expect(page.body).toContain(`id="proof-lines">${money(day.proof.notInLedger.total)}<`);
    expect(page.body).toMatch(/<td class="num even" id="proof-unexplained">0\.00</);
    expect(page.body).toMatch(/<dd id="unexplained" class="even">0\.00</);
    expect(page.body).toContain(`<tr data-line="${line.identity}"><td class="when">`);
    expect(page.body).not.toContain('Match by hand');
    const refused = await post(vera, `${path}/match`, [
      ['_csrf', csrfOf(page.body)],
      ['lines', line.identity],
      ['with', settlement.identity],
      ['note', 'viewer tries'],
    ]);
    expect(refused.statusCode).toBe(403);
    expect(await get(vera, '/reconciliation/NOPE/2026-03-03')).toMatchObject({ statusCode: 404 });
    expect(await get(vera, `/reconciliation/${encodeURIComponent(day.bank.id)}/March`)).toMatchObject({
      statusCode: 404,
    });
  });

  it('matches a planted line by hand with a note, resolves its exception, and unmatches it', async () => {
    const { day, line, settlement } = await aPlantedLine();
    const path = `/reconciliation/${encodeURIComponent(day.bank.id)}/${day.date}`;
    const exception = await r.t.db
      .selectFrom('exceptions')
      .select(['id', 'state'])
      .where('type', '=', 'BANK_LINE_UNMATCHED')
      .where('entity_id', '=', line.identity)
      .executeTakeFirstOrThrow();
    expect(exception.state).toBe('open');
    const olga = await signIn('olga');
    // The exception's page leads to the line's day.
    const exceptionPage = await get(olga, `/exceptions/${exception.id}`);
    const link = `/reconciliation/for/bank_line/${encodeURIComponent(line.identity)}`;
    expect(exceptionPage.body).toContain(link);
    expect((await get(olga, link)).headers.location).toBe(path);

    const page = await get(olga, path);
    expect(page.body).toContain('Match by hand');
    const form = (note: string, csrf = csrfOf(page.body)): [string, string][] => [
      ['_csrf', csrf],
      ['lines', line.identity],
      ['with', settlement.identity],
      ['note', note],
    ];
    expect((await post(olga, `${path}/match`, form('no token', ''))).statusCode).toBe(403);
    expect((await post(olga, `${path}/match`, form(' '))).statusCode).toBe(400);
    const made = await post(olga, `${path}/match`, form('rent paid from the settlement account'));
    expect(made.statusCode, made.body).toBe(303);
    const id = /match=(\d+)/.exec(made.headers.location as string)![1]!;
    const match = await r.t.db
      .selectFrom('matches')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    expect(match).toMatchObject({
      rule: 'manual',
      created_by: 'olga',
      note: 'rent paid from the settlement account',
      ended_at: null,
    });
    const resolved = await r.t.db
      .selectFrom('exceptions')
      .select(['state', 'resolution_note'])
      .where('id', '=', exception.id)
      .executeTakeFirstOrThrow();
    expect(resolved).toEqual({ state: 'resolved', resolution_note: `matched: match ${id} (manual)` });
    const after = await get(olga, made.headers.location as string);
    expect(after.body).toContain(`Match ${id} made by hand`);
    expect(after.body).toContain(`data-match="${id}"`);
    expect(after.body).not.toContain(`data-line="${line.identity}"`);
    // Matched twice: a conflict, on a page leading back to the day.
    const twice = await post(olga, `${path}/match`, form('again'));
    expect(twice.statusCode).toBe(409);
    expect(twice.body).toContain('already matched');

    expect(
      (
        await post(olga, `${path}/unmatch`, [
          ['_csrf', csrfOf(page.body)],
          ['match', id],
          ['note', ''],
        ])
      ).statusCode,
    ).toBe(400);
    const ended = await post(olga, `${path}/unmatch`, [
      ['_csrf', csrfOf(page.body)],
      ['match', id],
      ['note', 'the rent was paid twice: not the settlement'],
    ]);
    expect(ended.statusCode).toBe(303);
    expect(
      await r.t.db.selectFrom('matches').selectAll().where('id', '=', id).executeTakeFirstOrThrow(),
    ).toMatchObject({
      ended_by: 'olga',
      end_note: 'the rent was paid twice: not the settlement',
    });
    const back = await get(olga, ended.headers.location as string);
    expect(back.body).toContain(`data-line="${line.identity}"`);
    // The exception's trail: resolved by payrecon naming the match, with olga's notes beside.
    const trail = await r.t.db
      .selectFrom('exception_events')
      .select(['actor', 'action', 'to_state', 'note'])
      .where('exception_id', '=', exception.id)
      .orderBy('id')
      .execute();
    expect(trail).toEqual([
      { actor: 'payrecon', action: 'state', to_state: 'resolved', note: `matched: match ${id} (manual)` },
      {
        actor: 'olga',
        action: 'comment',
        to_state: null,
        note: `matched by hand (match ${id}): rent paid from the settlement account`,
      },
      {
        actor: 'olga',
        action: 'comment',
        to_state: null,
        note: `match ${id} (manual) ended: the rent was paid twice: not the settlement; the next matching run raises this again`,
      },
    ]);
  });

  it("leads from a SETTLEMENT_NOT_RECEIVED exception to its bank account's value date", async () => {
    const exception = await r.t.db
      .selectFrom('exceptions')
      .select(['id', 'entity_id'])
      .where('type', '=', 'SETTLEMENT_NOT_RECEIVED')
      .orderBy('id')
      .executeTakeFirstOrThrow();
    const settlement = r.truth.settlements.find((s) => s.settlement_id === exception.entity_id)!;
    const vera = await signIn('vera');
    const page = await get(vera, `/exceptions/${exception.id}`);
    const link = `/reconciliation/for/settlement/${exception.entity_id}`;
    expect(page.body).toContain(link);
    const to = await get(vera, link);
    expect(to.statusCode).toBe(303);
    expect(to.headers.location).toBe(
      `/reconciliation/${encodeURIComponent(r.banks[0]!.id)}/${settlement.value_date}`,
    );
    expect((await get(vera, '/reconciliation/for/settlement/nope')).statusCode).toBe(404);
  });
});

describe("the provider's balance", () => {
  it('is shown on the balances page as the last matching run kept it', async () => {
    // This sandbox's ledger holds no payments, so no run checks a balance here (test/db/balance-drift.test.ts
    // makes the checks): two are kept as a run keeps them, one agreeing, one differing for an hour.
    const settlement = r.truth.settlements[0]!;
    const remove = await keepTwoBalanceChecks(r.t.db, {
      account: 'sandbox',
      settlementId: settlement.settlement_id,
      cutoff: new Date(settlement.period_end),
      checkedAt: NOW,
    });
    try {
      const page = await get(await signIn('vera'), '/balances');
      expect(page.statusCode).toBe(200);
      const row = (key: string) => {
        const tr = page.body.slice(page.body.indexOf(`<tr data-provider-balance="${key}">`));
        return tr.slice(0, tr.indexOf('</tr>'));
      };
      expect(row('sandbox|BRL')).toContain(
        '<td class="num">1,234.56</td><td class="num">1,234.56</td><td class="num">0.00</td>',
      );
      expect(row('sandbox|BRL')).toContain('<div class="muted">agrees</div>');
      expect(row('sandbox|MXN')).toContain(
        '<td class="num">99,999,999,999,999,999.99</td><td class="num">99,999,999,999,999,999.98</td><td class="num">0.01</td>',
      );
      expect(row('sandbox|MXN')).toContain('<div class="neg">differs since');
    } finally {
      await remove();
    }
  });
});

describe('the reconciliation API', () => {
  it('reads a day and the matches, matches by hand and unmatches with the scopes', async () => {
    const { day, line, settlement } = await aPlantedLine();
    const dayPath = `/reconciliation/${encodeURIComponent(day.bank.id)}/${day.date}`;
    const read = await call('GET', dayPath, 'reader');
    expect(read.statusCode, read.body).toBe(200);
    const body = JSON.parse(read.body);
    expect(body).toMatchObject({ bankAccount: day.bank.id, date: day.date });
    expect(typeof body.ledger).toBe('string');
    expect(body.proof).toMatchObject({
      openingBeforeFirst: formatAmount(day.proof.firstStatement!.opening!),
      notInLedger: { count: day.proof.notInLedger.count, total: formatAmount(day.proof.notInLedger.total) },
      explained: formatAmount(day.proof.explained!),
      unexplained: '0.00',
    });
    expect(body.proof.firstStatement).toMatchObject({ date: day.proof.firstStatement!.date });
    // (the line was matched by hand and unmatched on the page above: its ledger entry counts on its
    // booking date, the reversal from the day it was made, so on its own day the ledger still holds it)
    expect(body.proof.notInLedger.lines.map((l: { identity: string }) => l.identity)).toEqual(
      day.proof.notInLedger.lines.map((l) => l.identity),
    );
    expect(body.proof.notInLedger.lines.map((l: { identity: string }) => l.identity)).not.toContain(
      line.identity,
    );
    expect(body.lines.find((l: { identity: string }) => l.identity === line.identity)).toMatchObject({
      match: null,
    });
    expect((await call('GET', `/reconciliation/NOPE/${day.date}`, 'reader')).statusCode).toBe(404);
    expect((await call('GET', `/reconciliation/${day.bank.id}/2026-13-40`, 'reader')).statusCode).toBe(400);
    expect((await call('GET', `/matches?bankAccount=${day.bank.id}&color=red`, 'reader')).statusCode).toBe(
      400,
    );

    const ask = { lines: [line.identity], with: [settlement.identity], note: 'checked with the bank' };
    expect((await call('POST', '/matches', 'reader', ask)).statusCode).toBe(403);
    expect((await call('POST', '/matches', 'worker', { ...ask, note: '' })).statusCode).toBe(400);
    expect((await call('POST', '/matches', 'worker', { ...ask, lines: ['no-such-line'] })).statusCode).toBe(
      404,
    );
    const made = await call('POST', '/matches', 'worker', ask);
    expect(made.statusCode, made.body).toBe(201);
    const match = JSON.parse(made.body);
    expect(match).toMatchObject({
      rule: 'manual',
      createdBy: 'api:worker',
      note: 'checked with the bank',
      endedAt: null,
    });
    expect(match.members.map((m: { side: string }) => m.side).sort()).toEqual(['bank_line', 'settlement']);
    const conflict = await call('POST', '/matches', 'worker', ask);
    expect(conflict.statusCode).toBe(409);
    expect(JSON.parse(conflict.body).detail).toMatch(/already matched/);

    const listed = await call(
      'GET',
      `/matches?bankAccount=${day.bank.id}&from=${day.date}&to=${day.date}`,
      'reader',
    );
    const items = JSON.parse(listed.body).items as { id: string; endedBy: string | null }[];
    expect(items.map((m) => m.id)).toContain(match.id);
    expect(items.some((m) => m.endedBy === 'olga')).toBe(true);

    expect((await call('POST', `/matches/${match.id}/unmatch`, 'reader', { note: 'x' })).statusCode).toBe(
      403,
    );
    expect((await call('POST', `/matches/${match.id}/unmatch`, 'worker', {})).statusCode).toBe(400);
    const ended = await call('POST', `/matches/${match.id}/unmatch`, 'worker', { note: 'wrong settlement' });
    expect(ended.statusCode, ended.body).toBe(200);
    expect(JSON.parse(ended.body)).toMatchObject({ endedBy: 'api:worker', endNote: 'wrong settlement' });
    expect((await call('POST', `/matches/${match.id}/unmatch`, 'worker', { note: 'again' })).statusCode).toBe(
      404,
    );
  });
});

describe('the reconciliation proof after matches by hand, and with a ledger entry off', () => {
  it('stays explained after a match by hand and its unmatch (the reversal counts from the day it was made)', async () => {
    // The page's and the API's matches by hand above were each unmatched again, today: their entries
    // count on the line's booking date, their reversals from today, so on the days of March the ledger
    // holds the line though no match covers it now; the proof follows the ledger and stays explained.
    const ended = await r.t.db
      .selectFrom('matches')
      .innerJoin('match_members', 'match_members.match_id', 'matches.id')
      .select('match_members.identity')
      .where('matches.ended_at', 'is not', null)
      .where('match_members.side', '=', 'bank_line')
      .execute();
    expect(ended.length).toBeGreaterThanOrEqual(2);
    expect(await expectExplained(false)).toBeGreaterThan(DAYS / 2);
    // The line matched by hand twice (page, then API) and unmatched twice: on the days of March both
    // matches count and neither reversal does, so the ledger holds it twice and lacks minus its amount.
    const { day: its, line } = await aPlantedLine();
    expect(ended.filter((e) => e.identity === line.identity)).toHaveLength(2);
    const after = (await days()).filter((d) => d.bank.id === its.bank.id && d.date >= line.bookingDate);
    expect(after.length).toBeGreaterThan(0);
    for (const day of after) {
      expect(
        day.proof.notInLedger.lines.find((l) => l.identity === line.identity),
        day.date,
      ).toMatchObject({
        counted: 2,
        missing: -line.amount,
        matchedNow: false,
      });
    }
  });

  it('shows a ledger entry that is off as the unexplained difference, from its day on', async () => {
    const bank = r.banks[0]!;
    const all = (await days()).filter((d) => d.bank.id === bank.id && d.statement.closing !== null);
    const on = all[Math.floor(all.length / 2)]!;
    // 12.34 put into the bank account on that day by an entry that no bank line carries.
    const { rows } = await sql<{ id: string }>`
      INSERT INTO journal_entries (idempotency_key, merchant_account, entity_kind, entity_id, effect, direction, seq,
        book, currency, amount, effective_at)
      VALUES (${`bank_match:${bank.account}:off-1:bank_match`}, ${bank.account}, 'bank_match', 'off-1', 'bank_match',
        1, 1, 'live', ${bank.currency}, 12.34, ${`${on.date}T00:00:00Z`}::timestamptz) RETURNING id::text AS id`.execute(
      r.t.db,
    );
    await sql`INSERT INTO postings (entry_id, merchant_account, currency, book, account, amount)
      VALUES (${rows[0]!.id}::bigint, ${bank.account}, ${bank.currency}, 'live', ${`bank:${bank.id}`}, 12.34),
        (${rows[0]!.id}::bigint, ${bank.account}, ${bank.currency}, 'live', 'settlements_in_transit', -12.34)`.execute(
      r.t.db,
    );
    for (const d of all) {
      const now = await reconciliationDay(r.t.db, bank, d.date, 'UTC', NOW);
      expect(now.proof.unexplained, d.date).toBe(d.date < on.date ? 0n : -1234n);
    }
    const vera = await signIn('vera');
    const page = await get(vera, `/reconciliation/${encodeURIComponent(bank.id)}/${on.date}`);
    expect(page.body).toMatch(/<td class="num off" id="proof-unexplained">-12\.34</);
    expect(page.body).toMatch(/<dd id="unexplained" class="off">-12\.34</);
  });
});
