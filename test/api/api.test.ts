/**
 * `/api/v1` through fastify's inject over a real ledger database: every endpoint, every scope, every
 * error shape. Every response the suite receives is validated against the OpenAPI document the API
 * serves (ajv, draft 2020-12), and the last test checks that every operation was exercised.
 */

import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX, buildApiApp } from '../../src/api/app.ts';
import { loadConfig } from '../../src/config.ts';
import { raiseExceptions } from '../../src/db/exceptions/raise.ts';
import { applyObservations, recordIntents } from '../../src/db/ledger/service.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import { type ApiScope, type ApiTokenEntry, createApiToken } from '../../src/domain/api-tokens.ts';
import { sha256Hex } from '../../src/domain/close.ts';
import type { Observation } from '../../src/domain/observation.ts';
import { importService, matcherFrom } from '../../src/import-service.ts';
import { writeExceptionWorkbook } from '../../src/reports/exception-workbook.ts';
import { ReportRunner } from '../../src/reports/runs.ts';
import { keepTwoBalanceChecks } from '../db/balance-check-rows.ts';
import { intent, obs } from '../db/fixtures.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { waitFor } from '../helpers/wait.ts';
import { fillDecisions } from '../reports/decision-fill.ts';
import { OpenApiValidator } from './openapi-validator.ts';

let t: TestDatabase;
let dir: string;
let app: FastifyInstance;
let runner: ReportRunner;
let validator: OpenApiValidator;
const logLines: string[] = [];
const tokens: Record<string, string> = {};
const entries: ApiTokenEntry[] = [];

async function makeToken(name: string, scopes: ApiScope[]): Promise<void> {
  const { token, entry } = await createApiToken(name, scopes);
  tokens[name] = token;
  entries.push(entry);
}

interface Call {
  token?: string | null;
  body?: unknown;
  headers?: Record<string, string>;
  raw?: string;
  /** A file as the raw body, with its content type. */
  file?: { type: string; bytes: string | Buffer };
}

/** Every call goes through here: the response is validated against the served document. */
async function call(method: 'GET' | 'POST', path: string, c: Call = {}): Promise<LightMyRequestResponse> {
  const token = c.token === undefined ? tokens.all : c.token;
  const res = await app.inject({
    method,
    url: `${API_PREFIX}${path}`,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(c.body !== undefined || c.raw !== undefined ? { 'content-type': 'application/json' } : {}),
      ...(c.file !== undefined ? { 'content-type': c.file.type } : {}),
      ...c.headers,
    },
    ...(c.body !== undefined ? { payload: JSON.stringify(c.body) } : {}),
    ...(c.raw !== undefined ? { payload: c.raw } : {}),
    ...(c.file !== undefined ? { payload: c.file.bytes } : {}),
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

const XLSX_TYPE = 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet';

const json = <T = Record<string, unknown>>(res: LightMyRequestResponse) => JSON.parse(res.body) as T;

function expectProblem(res: LightMyRequestResponse, status: number, field?: string): Record<string, unknown> {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
  const p = json(res);
  expect(p.status).toBe(status);
  expect(typeof p.title).toBe('string');
  expect(typeof p.detail).toBe('string');
  if (field) {
    const errors = p.errors as { field: string; rule: string }[];
    expect(
      errors.map((e) => e.field),
      res.body,
    ).toContain(field);
    for (const e of errors) expect(e.rule.length).toBeGreaterThan(0);
  }
  return p;
}

/** The bank accounts this suite's imports know (the fixture's IBAN). */
const IMPORT_BANK_ACCOUNTS = [
  { id: 'DE89370400440532013000', currency: 'EUR', account: 'acme', name: 'Main account' },
  { id: '0532013001', currency: 'USD', account: 'acme', name: 'Dollar account' },
];

let exceptionId = '';
let beforeAll0 = new Date();

beforeAll(async () => {
  t = await createTestDatabase();
  dir = await mkdtemp(join(tmpdir(), 'payrecon-api-'));
  runner = new ReportRunner({ db: t.db, dir, timeZone: 'UTC' });
  await makeToken('all', [
    'read',
    'exceptions:write',
    'exceptions:approve',
    'reports:write',
    'intents:write',
    'imports:write',
  ]);
  await makeToken('controller', ['read', 'exceptions:approve']);
  await makeToken('reader', ['read']);
  await makeToken('importer', ['imports:write']);
  await makeToken('intents-only', ['intents:write']);
  const logger = pino(
    { level: 'debug' },
    new Writable({
      write(chunk, _enc, done) {
        logLines.push(String(chunk));
        done();
      },
    }),
  );

  beforeAll0 = new Date();
  // Everything booked below is strictly after `beforeAll0`, to the millisecond the API reads.
  await waitFor(
    'the clock to pass the instant before the bookings',
    () => Date.now() > beforeAll0.getTime(),
    {
      every: 1,
    },
  );
  await withLedgerTransaction(t.db, async (trx) => {
    await recordIntents(trx, [
      intent('deposit', 'd1', 10_000n),
      intent('cashout', 'c1', 2_500n, { externalRef: 'ext-c1' }),
      intent('deposit', 'd2', 999_999_999_999_999_999n),
    ]);
    await applyObservations(trx, [
      obs('deposit', 'd1', 'PENDING', 1),
      obs('deposit', 'd1', 'COMPLETED', 2, { feeAmount: 300n, feeCurrency: 'BRL' }),
      obs('cashout', 'c1', 'PENDING', 3, { externalRef: 'ext-c1', bankReference: 'E2E-C1' }),
      obs('refund', 'r1', 'PENDING', 4, { parentDepositId: 'd1', amount: 1_000n }),
      obs('deposit', 'd2', 'COMPLETED', 5, { amount: 999_999_999_999_999_999n }),
    ]);
  });
  for (let i = 0; i < 7; i++) {
    await withLedgerTransaction(t.db, (trx) =>
      applyObservations(trx, [obs('deposit', `p${i}`, 'PENDING', 10 + i)]),
    );
  }
  await raiseExceptions(
    t.db,
    [
      { type: 'AMOUNT_MISMATCH', account: 'acme', kind: 'deposit', entityId: 'd1', details: { note: 'x' } },
      { type: 'STUCK', account: 'acme', kind: 'cashout', entityId: 'c1', details: {} },
      { type: 'STUCK', account: 'acme', kind: 'deposit', entityId: 'p0', details: {} },
    ],
    new Date(),
  );
  const row = await t.db
    .selectFrom('exceptions')
    .select('id')
    .where('type', '=', 'AMOUNT_MISMATCH')
    .executeTakeFirstOrThrow();
  exceptionId = String(row.id);

  app = await buildApiApp({
    db: t.db,
    reports: runner,
    tokens: entries,
    logger,
    imports: {
      run: importService(t.db, IMPORT_BANK_ACCOUNTS, [], matcherFrom(loadConfig({}))),
      maxBytes: 64 * 1024,
    },
  });
  const doc = await app.inject({ method: 'GET', url: `${API_PREFIX}/openapi.json` });
  validator = new OpenApiValidator(JSON.parse(doc.body), API_PREFIX);
});

afterAll(async () => {
  await app?.close();
  await runner?.idle();
  await t?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('the OpenAPI document', () => {
  it('is OpenAPI 3.1 with every operation, and every schema compiles', () => {
    const doc = validator.document;
    expect(doc.openapi).toBe('3.1.0');
    expect(validator.operationIds.sort()).toEqual(
      [
        'assignException',
        'changeExceptionState',
        'changeExceptionStates',
        'decideIllegalTransition',
        'decideFromWorkbook',
        'approveDecision',
        'rejectDecision',
        'commentException',
        'downloadReportFile',
        'exportExceptions',
        'getBalances',
        'getClose',
        'getException',
        'getImport',
        'getMovements',
        'getPayment',
        'getProviderBalances',
        'getReport',
        'importFile',
        'listCloses',
        'listExceptions',
        'listImports',
        'listPayments',
        'listReports',
        'lookupPayment',
        'requestReport',
        'getReconciliationDay',
        'listMatches',
        'matchByHand',
        'unmatch',
      ].sort(),
    );
    expect(validator.compileAll()).toBeGreaterThan(50);
    const op = (doc.paths as Record<string, Record<string, Record<string, unknown>>>)[
      '/exceptions/{id}/state'
    ]?.post;
    expect(op?.security).toEqual([{ bearer: ['exceptions:write'] }]);
    // Request schemas come from the same zod schemas that validate requests.
    const requestBody = op?.requestBody as
      | { content: Record<string, { schema: Record<string, unknown> }> }
      | undefined;
    const body = requestBody?.content['application/json']?.schema;
    expect(body?.properties).toHaveProperty('state');
  });
});

describe('authentication and scopes', () => {
  it('answers 401 without a token, with a malformed one and with an unknown one', async () => {
    for (const headers of [
      {} as Record<string, string>,
      { authorization: 'Basic abc' },
      { authorization: 'Bearer prk_000000000000_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' },
      { authorization: `Bearer ${tokens.all}x` },
    ]) {
      const res = await call('GET', '/balances', { token: null, headers });
      expectProblem(res, 401, 'authorization');
      expect(res.headers['www-authenticate']).toBe('Bearer');
    }
  });

  it('answers 403 when the token lacks the scope, naming the scope', async () => {
    const cases: [string, 'GET' | 'POST', string, unknown][] = [
      ['intents-only', 'GET', '/balances', undefined],
      ['intents-only', 'GET', '/payments', undefined],
      ['reader', 'POST', `/exceptions/${exceptionId}/state`, { state: 'in_review' }],
      ['reader', 'POST', `/exceptions/${exceptionId}/assignee`, { assignee: 'ana' }],
      ['reader', 'POST', `/exceptions/${exceptionId}/comments`, { note: 'hi' }],
      ['reader', 'POST', `/exceptions/${exceptionId}/decision/reject`, { note: 'no' }],
      ['reader', 'POST', '/reports', { kind: 'settlement', from: '2026-11-01', to: '2026-11-01' }],
    ];
    for (const [who, method, path, body] of cases) {
      const res = await call(method, path, { token: tokens[who] ?? null, ...(body ? { body } : {}) });
      const p = expectProblem(res, 403, 'authorization');
      expect(String(p.detail)).toMatch(/scope (read|exceptions:write|exceptions:approve|reports:write)/);
      expect(res.headers['www-authenticate']).toMatch(/insufficient_scope/);
    }
  });

  it('never writes a token to the log', async () => {
    await call('GET', '/balances', { token: tokens.reader ?? null });
    await call('GET', '/nope', { token: tokens.reader ?? null }).catch(() => undefined);
    const all = logLines.join('');
    for (const token of Object.values(tokens)) expect(all).not.toContain(token.slice(4));
  });

  it('answers an unknown route with a 404 problem', async () => {
    const res = await app.inject({ method: 'GET', url: `${API_PREFIX}/nope` });
    expect(res.statusCode).toBe(404);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
  });
});

describe('balances and movements', () => {
  it('gives balances as decimal strings, now and at an earlier instant', async () => {
    const now = json<{ at: string; balances: { account: string; currency: string; balance: string }[] }>(
      await call('GET', '/balances?account=acme&currency=BRL&book=live'),
    );
    const available = now.balances.find((b) => b.account === 'available');
    // 100.00 - 3.00 fee + the large deposit - 25.00 and 10.00 reserved for the cashout and the refund, exactly.
    expect(available?.balance).toBe('10000000000000061.99');
    expect(now.balances.find((b) => b.account === 'reserved')?.balance).toBe('35.00');
    const before = json<{ balances: { balance: string }[] }>(
      await call(
        'GET',
        `/balances?at=${encodeURIComponent(beforeAll0.toISOString().replace('Z', '+00:00'))}`,
      ),
    );
    expect(before.balances.every((b) => b.balance === '0.00')).toBe(true);
  });

  it('refuses an instant without offset, naming the field and the rule', async () => {
    const p = expectProblem(await call('GET', '/balances?at=2026-11-24T10:00:00'), 400, 'at');
    expect(String(p.detail)).toMatch(/^at: must be an ISO 8601 instant with offset/);
    expectProblem(await call('GET', '/balances?book=gold'), 400, 'book');
  });

  it("gives the provider's balance checks as the last matching run kept them, as decimal strings", async () => {
    const cutoff = new Date('2026-03-04T03:00:00Z');
    const checkedAt = new Date('2026-03-04T12:00:00Z');
    const remove = await keepTwoBalanceChecks(t.db, {
      account: 'acme',
      settlementId: '7000002',
      cutoff,
      checkedAt,
    });
    try {
      const common = {
        merchantAccount: 'acme',
        settlementId: '7000002',
        cutoff: cutoff.toISOString(),
        checkedAt: checkedAt.toISOString(),
      };
      expect(json(await call('GET', '/provider-balances'))).toEqual({
        checks: [
          {
            ...common,
            currency: 'BRL',
            provider: '1234.56',
            ledger: '1234.56',
            difference: '0.00',
            differsSince: null,
          },
          {
            ...common,
            currency: 'MXN',
            provider: '99999999999999999.99',
            ledger: '99999999999999999.98',
            difference: '0.01',
            differsSince: '2026-03-04T11:00:00.000Z',
          },
        ],
      });
      const mxn = json<{ checks: { currency: string }[] }>(
        await call('GET', '/provider-balances?account=acme&currency=MXN'),
      );
      expect(mxn.checks.map((c) => c.currency)).toEqual(['MXN']);
      expect(
        json<{ checks: unknown[] }>(await call('GET', '/provider-balances?account=other')).checks,
      ).toEqual([]);
      expectProblem(await call('GET', '/provider-balances?currency=brl'), 400, 'currency');
    } finally {
      await remove();
    }
  });

  it('groups movements between two instants by effect', async () => {
    const from = beforeAll0.toISOString();
    const to = new Date(Date.now() + 60_000).toISOString();
    const body = json<{
      movements: { effect: string; account: string; amount: string; direction: number }[];
    }>(await call('GET', `/movements?from=${from}&to=${to}&currency=BRL`));
    const credit = body.movements.filter((m) => m.effect === 'credit' && m.account === 'available');
    expect(credit.map((m) => m.amount)).toEqual(['10000000000000099.99']);
    expect(body.movements.find((m) => m.effect === 'fee' && m.account === 'fees')?.amount).toBe('3.00');
    expect(body.movements.find((m) => m.effect === 'reserve' && m.account === 'reserved')?.amount).toBe(
      '35.00',
    );
    expectProblem(await call('GET', `/movements?from=${to}&to=${from}`), 400, 'to');
    expectProblem(await call('GET', `/movements?from=${from}`), 400, 'to');
  });
});

describe('payments', () => {
  it('finds a payment by each id kind', async () => {
    const cases: [string, string, string][] = [
      ['deposit_id', 'd1', 'd1'],
      ['invoice_id', 'ref-d1', 'd1'],
      ['cashout_id', 'c1', 'c1'],
      ['external_id', 'ext-c1', 'c1'],
      ['refund_id', 'r1', 'r1'],
      ['intent_id', 'in-deposit-d1', 'd1'],
      ['bank_reference', 'E2E-C1', 'c1'],
    ];
    for (const [idKind, id, entityId] of cases) {
      const body = json<{ matches: { entityId: string; amount: string | null }[] }>(
        await call('GET', `/payments/lookup?id=${id}&idKind=${idKind}`),
      );
      expect(
        body.matches.map((m) => m.entityId),
        idKind,
      ).toEqual([entityId]);
    }
    const any = json<{ matches: { entityId: string }[] }>(await call('GET', '/payments/lookup?id=ext-c1'));
    expect(any.matches.map((m) => m.entityId)).toEqual(['c1']);
    const byBank = json<{ matches: { entityId: string; bankReference: string | null }[] }>(
      await call('GET', '/payments/lookup?id=E2E-C1'),
    );
    expect(byBank.matches.map((m) => [m.entityId, m.bankReference])).toEqual([['c1', 'E2E-C1']]);
    expectProblem(await call('GET', '/payments/lookup?id=nobody'), 404);
    expectProblem(await call('GET', '/payments/lookup?id=d1&idKind=iban'), 400, 'idKind');
    expectProblem(await call('GET', '/payments/lookup'), 400, 'id');
  });

  it('lists every payment once across keyset pages, newest first', async () => {
    const all = json<{ items: { entityId: string }[]; nextCursor: string | null }>(
      await call('GET', '/payments?limit=500'),
    );
    expect(all.nextCursor).toBeNull();
    expect(all.items.length).toBe(11);
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: { items: { entityId: string }[]; nextCursor: string | null } = json(
        await call('GET', `/payments?limit=3${cursor ? `&cursor=${cursor}` : ''}`),
      );
      seen.push(...page.items.map((i) => i.entityId));
      cursor = page.nextCursor;
      pages += 1;
    } while (cursor && pages < 10);
    expect(pages).toBe(4);
    expect(seen).toEqual(all.items.map((i) => i.entityId));
    const deposits = json<{ items: { kind: string; status: string }[] }>(
      await call('GET', '/payments?kind=deposit&status=COMPLETED&currency=BRL&test=false'),
    );
    expect(deposits.items.map((i) => i.kind)).toEqual(['deposit', 'deposit']);
    // Each kind and status filter (an open status is read through the open set: mirror_watch) lists
    // exactly the payments of the full list with that kind and status, in its order.
    const listed = json<{ items: { entityId: string; kind: string; status: string | null }[] }>(
      await call('GET', '/payments?limit=500'),
    ).items;
    const pairs = new Set(listed.filter((i) => i.status !== null).map((i) => `${i.kind} ${i.status}`));
    expect(pairs.size).toBeGreaterThan(3);
    for (const pair of pairs) {
      const [kind, status] = pair.split(' ');
      const filtered = json<{ items: { entityId: string }[] }>(
        await call('GET', `/payments?limit=500&kind=${kind}&status=${status}`),
      );
      expect(
        filtered.items.map((i) => i.entityId),
        pair,
      ).toEqual(listed.filter((i) => i.kind === kind && i.status === status).map((i) => i.entityId));
    }
    expectProblem(await call('GET', '/payments?limit=0'), 400, 'limit');
    expectProblem(await call('GET', '/payments?cursor=bm9wZQ'), 400, 'cursor');
    // A cursor of the right form with a key PostgreSQL would refuse is still the client's mistake.
    const forged = Buffer.from(JSON.stringify(['not-a-time', 'acme', 'deposit', 'd1'])).toString('base64url');
    expectProblem(await call('GET', `/payments?cursor=${forged}`), 400, 'cursor');
    const forgedId = Buffer.from(JSON.stringify(['1 OR 1=1'])).toString('base64url');
    expectProblem(await call('GET', `/exceptions?cursor=${forgedId}`), 400, 'cursor');
    expectProblem(await call('GET', '/payments?test=yes'), 400, 'test');
  });

  it('shows one payment with its history, journal entries and exceptions', async () => {
    const body = json<{
      payment: { status: string; fee: { amount: string } };
      intent: { amount: string };
      history: { toStatus: string }[];
      entries: { effect: string; postings: { account: string; amount: string }[] }[];
      exceptions: { type: string }[];
      alerts: { alertId: string; type: string; publishedAt: string | null; deliveredTo: string[] }[];
    }>(await call('GET', '/payments/acme/deposit/d1'));
    expect(body.payment.status).toBe('COMPLETED');
    expect(body.payment.fee.amount).toBe('3.00');
    expect(body.intent.amount).toBe('100.00');
    expect(body.history.map((h) => h.toStatus)).toEqual(['PENDING', 'COMPLETED']);
    const credit = body.entries.find((e) => e.effect === 'credit');
    expect(credit?.postings).toEqual(
      expect.arrayContaining([
        { account: 'available', amount: '100.00' },
        { account: 'deposits', amount: '-100.00' },
      ]),
    );
    expect(body.exceptions.map((x) => x.type)).toContain('AMOUNT_MISMATCH');
    const alert = body.alerts.find((a) => a.type === 'AMOUNT_MISMATCH');
    expect(alert).toMatchObject({ publishedAt: null, deliveredTo: [] });
    await t.db
      .insertInto('alert_deliveries')
      .values({ alert_id: alert?.alertId ?? '', sink: 'log' })
      .execute();
    const again = json<{ alerts: { alertId: string; deliveredTo: string[] }[] }>(
      await call('GET', '/payments/acme/deposit/d1'),
    );
    expect(again.alerts.find((a) => a.alertId === alert?.alertId)?.deliveredTo).toEqual(['log']);
    expectProblem(await call('GET', '/payments/acme/deposit/none'), 404);
    expectProblem(await call('GET', '/payments/acme/wire/d1'), 400, 'kind');
  });
});

describe('the exception queue', () => {
  it('lists with filters and pages', async () => {
    const all = json<{ items: { id: string; type: string; amount: string | null }[] }>(
      await call('GET', '/exceptions'),
    );
    expect(all.items.length).toBeGreaterThanOrEqual(3);
    const stuck = json<{ items: { type: string }[] }>(await call('GET', '/exceptions?type=STUCK&age=lt1d'));
    expect(stuck.items.map((i) => i.type)).toEqual(['STUCK', 'STUCK']);
    const big = json<{ items: { entityId: string }[] }>(
      await call('GET', '/exceptions?currency=BRL&minAmount=50&maxAmount=100.00&account=acme'),
    );
    expect(big.items.map((i) => i.entityId)).toEqual(['d1', 'p0']);
    const old = json<{ items: unknown[] }>(await call('GET', '/exceptions?age=gt7d'));
    expect(old.items).toEqual([]);
    const first = json<{ items: { id: string }[]; nextCursor: string }>(
      await call('GET', '/exceptions?limit=1'),
    );
    const second = json<{ items: { id: string }[] }>(
      await call('GET', `/exceptions?limit=1&cursor=${first.nextCursor}`),
    );
    expect(second.items[0]?.id).not.toBe(first.items[0]?.id);
    expectProblem(await call('GET', '/exceptions?state=closed'), 400, 'state');
    expectProblem(await call('GET', '/exceptions?minAmount=1.234'), 400, 'minAmount');
  });

  it('changes state, assigns and comments, each kept in the audit trail', async () => {
    const id = exceptionId;
    let res = await call('POST', `/exceptions/${id}/state`, {
      body: { state: 'in_review', note: 'looking' },
    });
    expect(res.statusCode).toBe(200);
    expect(json<{ exception: { state: string } }>(res).exception.state).toBe('in_review');
    expectProblem(await call('POST', `/exceptions/${id}/state`, { body: { state: 'in_review' } }), 409);
    res = await call('POST', `/exceptions/${id}/assignee`, { body: { assignee: 'ana', note: 'yours' } });
    expect(json<{ exception: { assignee: string } }>(res).exception.assignee).toBe('ana');
    expectProblem(await call('POST', `/exceptions/${id}/assignee`, { body: { assignee: 'ana' } }), 409);
    await call('POST', `/exceptions/${id}/comments`, { body: { note: 'provider says the payer paid less' } });
    res = await call('POST', `/exceptions/${id}/state`, {
      body: { state: 'resolved', note: 'refunded the rest' },
    });
    const detail = json<{
      exception: { state: string; resolvedBy: string; resolutionNote: string };
      events: {
        action: string;
        actor: string;
        fromState: string | null;
        toState: string | null;
        note: string;
      }[];
    }>(await call('GET', `/exceptions/${id}`));
    expect(detail.exception).toMatchObject({
      state: 'resolved',
      resolvedBy: 'all',
      resolutionNote: 'refunded the rest',
    });
    expect(detail.events.map((e) => [e.action, e.fromState, e.toState, e.note])).toEqual([
      ['state', 'open', 'in_review', 'looking'],
      ['assign', null, null, 'yours'],
      ['comment', null, null, 'provider says the payer paid less'],
      ['state', 'in_review', 'resolved', 'refunded the rest'],
    ]);
    expect(detail.events.every((e) => e.actor === 'all')).toBe(true);
    const mine = json<{ items: unknown[] }>(await call('GET', '/exceptions?assignee=ana&state=resolved'));
    expect(mine.items).toHaveLength(1);
    const unassigned = json<{ items: { assignee: string | null }[] }>(
      await call('GET', '/exceptions?assignee=-'),
    );
    expect(unassigned.items.every((i) => i.assignee === null)).toBe(true);
  });

  it('serves the exceptions of a bank line and a settlement under their kinds', async () => {
    await raiseExceptions(
      t.db,
      [
        {
          type: 'BANK_LINE_UNMATCHED',
          account: 'acme',
          kind: 'bank_line',
          entityId: 'f'.repeat(64),
          details: { amount: '12.30' },
          facts: { providerAmount: '12.30', providerCurrency: 'EUR' },
        },
        { type: 'SETTLEMENT_NOT_RECEIVED', account: 'acme', kind: 'settlement', entityId: 'S9', details: {} },
      ],
      new Date(),
    );
    for (const [type, kind] of [
      ['BANK_LINE_UNMATCHED', 'bank_line'],
      ['SETTLEMENT_NOT_RECEIVED', 'settlement'],
    ]) {
      const res = json<{ items: { kind: string; id: string }[] }>(
        await call('GET', `/exceptions?type=${type}`),
      );
      expect(res.items.map((i) => i.kind)).toEqual([kind]);
      const one = json<{ exception: { kind: string } }>(await call('GET', `/exceptions/${res.items[0]!.id}`));
      expect(one.exception.kind).toBe(kind);
    }
    // Out of the way of the queue's other tests.
    await t.db
      .updateTable('exceptions')
      .set({ state: 'resolved', resolved_by: 'test', resolved_at: new Date() })
      .where('type', 'in', ['BANK_LINE_UNMATCHED', 'SETTLEMENT_NOT_RECEIVED'])
      .execute();
  });

  it('moves many exceptions at once with one note, saying what happened to each', async () => {
    const open = json<{ items: { id: string }[] }>(await call('GET', '/exceptions?type=STUCK'));
    const ids = open.items.map((i) => i.id);
    expect(ids).toHaveLength(2);
    const res = json<{ results: { id: string; outcome: string }[] }>(
      await call('POST', '/exceptions/bulk-state', {
        body: { ids: [...ids, '999999'], state: 'acknowledged', note: 'known: provider outage' },
      }),
    );
    expect(res.results).toEqual([
      ...ids.map((id) => ({ id, outcome: 'changed' })),
      { id: '999999', outcome: 'not_found' },
    ]);
    const again = json<{ results: { outcome: string }[] }>(
      await call('POST', '/exceptions/bulk-state', { body: { ids, state: 'acknowledged' } }),
    );
    expect(again.results.map((r) => r.outcome)).toEqual(['unchanged', 'unchanged']);
    for (const id of ids) {
      const d = json<{ events: { note: string; toState: string }[] }>(await call('GET', `/exceptions/${id}`));
      expect(d.events).toEqual([
        expect.objectContaining({ toState: 'acknowledged', note: 'known: provider outage' }),
      ]);
    }
    expectProblem(
      await call('POST', '/exceptions/bulk-state', { body: { ids: [], state: 'resolved' } }),
      400,
      'ids',
    );
    expectProblem(
      await call('POST', '/exceptions/bulk-state', {
        token: tokens.reader ?? null,
        body: { ids, state: 'resolved' },
      }),
      403,
    );
  });

  it('rejects a proposed decision: nothing booked, the exception stays open, the trail says who', async () => {
    const a = 'illegal-reject';
    await withLedgerTransaction(t.db, (trx) =>
      applyObservations(trx, [
        { ...obs('deposit', 'y1', 'COMPLETED', 1), account: a },
        { ...obs('deposit', 'y1', 'PENDING', 2), account: a },
      ]),
    );
    const list = json<{ items: { id: string }[] }>(
      await call('GET', `/exceptions?account=${a}&type=ILLEGAL_TRANSITION`),
    );
    const id = list.items[0]?.id ?? '';
    await call('POST', `/exceptions/${id}/decision`, {
      body: { decision: 'accept-provider', note: 'looks like a chargeback' },
    });
    const controller = tokens.controller ?? null;
    expectProblem(
      await call('POST', `/exceptions/${id}/decision/reject`, { token: controller, body: {} }),
      400,
      'note',
    );
    const res = json<{
      exception: { state: string; proposal: unknown };
      events: { actor: string; action: string; note: string }[];
    }>(
      await call('POST', `/exceptions/${id}/decision/reject`, {
        token: controller,
        body: { note: 'no chargeback on the statement' },
      }),
    );
    expect(res.exception).toMatchObject({ state: 'open', proposal: null });
    expect(res.events.map((e) => [e.actor, e.action])).toEqual([
      ['all', 'propose'],
      ['controller', 'reject'],
    ]);
    expectProblem(
      await call('POST', `/exceptions/${id}/decision/approve`, { token: controller, body: {} }),
      409,
    );
    const bal = json<{ balances: { account: string; balance: string }[] }>(
      await call('GET', `/balances?account=${a}`),
    );
    expect(bal.balances.find((b) => b.account === 'available')?.balance).toBe('100.00');
    expectProblem(
      await call('POST', '/exceptions/999999/decision/reject', { token: controller, body: { note: 'n' } }),
      404,
    );
  });

  it("resolves an illegal transition by accepting the provider's status, in the ledger and the trail", async () => {
    const a = 'illegal-acct';
    await withLedgerTransaction(t.db, (trx) =>
      applyObservations(trx, [
        { ...obs('deposit', 'x1', 'COMPLETED', 1), account: a },
        { ...obs('deposit', 'x1', 'PENDING', 2), account: a },
      ]),
    );
    const list = json<{ items: { id: string; type: string }[] }>(
      await call('GET', `/exceptions?account=${a}&type=ILLEGAL_TRANSITION`),
    );
    const id = list.items[0]?.id ?? '';
    expectProblem(
      await call('POST', `/exceptions/${id}/decision`, { body: { decision: 'accept-provider' } }),
      400,
      'note',
    );
    // A plain resolve, alone or in bulk, would leave no decision: refused, the exception stays open.
    expectProblem(
      await call('POST', `/exceptions/${id}/state`, { body: { state: 'resolved', note: 'looks fine' } }),
      409,
    );
    const bulk = json<{ results: { id: string; outcome: string }[] }>(
      await call('POST', '/exceptions/bulk-state', {
        body: { ids: [id], state: 'resolved', note: 'all fine' },
      }),
    );
    expect(bulk.results).toEqual([{ id, outcome: 'needs_decision' }]);
    type Answer = {
      outcome: string;
      status: string;
      entriesBooked: number;
      exception: { state: string; decision: { decision: string; by: string; proposedBy: string } };
      events: { actor: string; action: string; toState: string }[];
    };
    // Accepting the provider re-books the ledger: proposed, nothing booked until another approves.
    const proposed = json<Answer>(
      await call('POST', `/exceptions/${id}/decision`, {
        body: { decision: 'accept-provider', note: 'the provider reopened it after a chargeback' },
      }),
    );
    expect(proposed).toMatchObject({ outcome: 'proposed', status: 'COMPLETED', entriesBooked: 0 });
    expect(proposed.exception.state).toBe('open');
    expect(proposed.events.at(-1)).toMatchObject({ actor: 'all', action: 'propose' });
    // The proposer cannot approve its own; a token without exceptions:approve cannot approve at all.
    expectProblem(await call('POST', `/exceptions/${id}/decision/approve`, { body: {} }), 403);
    expectProblem(
      await call('POST', `/exceptions/${id}/decision/approve`, { token: tokens.reader ?? null, body: {} }),
      403,
      'authorization',
    );
    const res = json<Answer>(
      await call('POST', `/exceptions/${id}/decision/approve`, {
        token: tokens.controller ?? null,
        body: { note: 'checked with the provider' },
      }),
    );
    expect(res.outcome).toBe('decided');
    expect(res.status).toBe('PENDING');
    expect(res.entriesBooked).toBeGreaterThan(0);
    expect(res.exception.state).toBe('resolved');
    expect(res.exception.decision).toMatchObject({
      decision: 'accept-provider',
      by: 'controller',
      proposedBy: 'all',
    });
    expect(res.events.slice(-3).map((e) => [e.actor, e.action])).toEqual([
      ['all', 'propose'],
      ['controller', 'approve'],
      ['controller', 'state'],
    ]);
    const bal = json<{ balances: { account: string; balance: string }[] }>(
      await call('GET', `/balances?account=${a}`),
    );
    expect(bal.balances.filter((b) => b.balance !== '0.00')).toEqual([]);
    expectProblem(
      await call('POST', `/exceptions/${id}/decision`, { body: { decision: 'keep-ledger', note: 'again' } }),
      409,
    );
    expectProblem(
      await call('POST', `/exceptions/${exceptionId}/decision`, {
        body: { decision: 'keep-ledger', note: 'n' },
      }),
      409,
    );
    expectProblem(
      await call('POST', '/exceptions/999999/decision', { body: { decision: 'keep-ledger', note: 'n' } }),
      404,
    );
  });

  it('gives each exception its due time and finds the overdue ones', async () => {
    const fresh = json<{ items: { dueAt: string; firstSeenAt: string; overdue: boolean }[] }>(
      await call('GET', '/exceptions?state=open'),
    );
    for (const x of fresh.items) {
      expect(Date.parse(x.dueAt) - Date.parse(x.firstSeenAt)).toBe(1440 * 60_000);
      expect(x.overdue).toBe(false);
    }
    expect(json<{ items: unknown[] }>(await call('GET', '/exceptions?overdue=true')).items).toEqual([]);
    // The same queue two days later: every unresolved exception is past its day.
    const later = await buildApiApp({
      db: t.db,
      reports: runner,
      tokens: entries,
      now: () => new Date(Date.now() + 2 * 86_400_000),
    });
    try {
      const res = await later.inject({
        method: 'GET',
        url: `${API_PREFIX}/exceptions?overdue=true`,
        headers: { authorization: `Bearer ${tokens.reader}` },
      });
      validator.validate(
        'GET',
        `${API_PREFIX}/exceptions`,
        res.statusCode,
        res.headers['content-type'] as string,
        res.body,
      );
      const overdue = json<{ items: { overdue: boolean; state: string }[] }>(res);
      expect(overdue.items.length).toBeGreaterThan(0);
      expect(overdue.items.every((x) => x.overdue && x.state !== 'resolved')).toBe(true);
    } finally {
      await later.close();
    }
  });

  it('exports the filtered queue as CSV', async () => {
    const res = await call('GET', '/exceptions/export?state=resolved');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-disposition']).toMatch(
      /^attachment; filename="exceptions-\d{4}-\d{2}-\d{2}\.csv"$/,
    );
    const lines = res.body.trim().split('\r\n');
    expect(lines[0]).toMatch(/^id,type,severity,state,merchant_account,kind,entity_id,currency,amount,/);
    const listed = json<{ items: { id: string }[] }>(await call('GET', '/exceptions?state=resolved'));
    expect(lines.slice(1).map((l) => l.split(',')[0])).toEqual(listed.items.map((i) => i.id));
    expect(lines.find((l) => l.startsWith(`${exceptionId},`))).toContain(',BRL,100.00,');
    expectProblem(await call('GET', '/exceptions/export?overdue=maybe'), 400, 'overdue');
  });

  it('names the field and rule of a bad body, and 404s an unknown exception', async () => {
    expectProblem(
      await call('POST', `/exceptions/${exceptionId}/state`, { body: { state: 'closed' } }),
      400,
      'state',
    );
    expectProblem(
      await call('POST', `/exceptions/${exceptionId}/state`, { body: { state: 'open', colour: 'red' } }),
      400,
      'colour',
    );
    expectProblem(await call('POST', `/exceptions/${exceptionId}/comments`, { body: {} }), 400, 'note');
    expectProblem(
      await call('POST', `/exceptions/${exceptionId}/comments`, { raw: '{"note":' }),
      400,
      'body',
    );
    expectProblem(
      await call('POST', `/exceptions/${exceptionId}/comments`, {
        raw: 'note=x',
        headers: { 'content-type': 'application/xml' },
      }),
      415,
    );
    expectProblem(await call('POST', '/exceptions/999999/comments', { body: { note: 'x' } }), 404);
    expectProblem(await call('GET', '/exceptions/999999'), 404);
    expectProblem(await call('GET', '/exceptions/abc'), 400, 'id');
  });
});

describe('reports', () => {
  it('requests a workbook, follows it and downloads its files', async () => {
    const res = await call('POST', '/reports', {
      // The exception workbook: the settlement one cannot write amounts beyond 2^53 minor units yet.
      body: { kind: 'exceptions', from: '2026-11-01', to: '2026-11-30', account: 'acme' },
    });
    expect(res.statusCode).toBe(202);
    const run = json<{ id: string; requestedBy: string }>(res);
    expect(run.requestedBy).toBe('api:all');
    await runner.idle();
    const done = json<{
      status: string;
      error: string;
      sha256: string;
      files: { name: string; href: string }[];
    }>(await call('GET', `/reports/${run.id}`));
    expect(done.error).toBeNull();
    expect(done.status).toBe('succeeded');
    expect(done.sha256).toMatch(/^[0-9a-f]{64}$/);
    const workbook = done.files.find((f) => f.name.endsWith('.xlsx'));
    expect(workbook).toBeDefined();
    const file = await call('GET', (workbook?.href ?? '').slice(API_PREFIX.length));
    expect(file.statusCode).toBe(200);
    expect(file.rawPayload.subarray(0, 2).toString()).toBe('PK');
    const list = json<{ items: { id: string }[] }>(await call('GET', '/reports?limit=5'));
    expect(list.items.map((r) => r.id)).toContain(run.id);
    expectProblem(await call('GET', `/reports/${run.id}/files/nothing.xlsx`), 404);
    // A file removed from disk (retention, an operator) is gone, not an error.
    const onDisk = await runner.filePath(run.id, workbook?.name ?? '');
    await rm(onDisk ?? '', { force: true });
    expectProblem(await call('GET', (workbook?.href ?? '').slice(API_PREFIX.length)), 410);
    expectProblem(await call('GET', '/reports/424242'), 404);
  });

  it('refuses a bad request naming the field', async () => {
    expectProblem(
      await call('POST', '/reports', { body: { kind: 'settlement', from: '2026-11-30', to: '2026-11-01' } }),
      400,
      'to',
    );
    expectProblem(
      await call('POST', '/reports', { body: { kind: 'payroll', from: '2026-11-01', to: '2026-11-01' } }),
      400,
      'kind',
    );
    expectProblem(
      await call('POST', '/reports', {
        body: { kind: 'exceptions', from: '2026-11-01', to: '2026-11-01', account: 'nobody' },
      }),
      400,
      'account',
    );
  });
});

describe('closes', () => {
  it('lists and gets month closes', async () => {
    expect(json<{ items: unknown[] }>(await call('GET', '/closes')).items).toEqual([]);
    const row = await t.db
      .insertInto('closes')
      .values({
        merchant_account: 'acme',
        currency: 'BRL',
        period: '2026-10',
        prepared_by: 'ana',
        figures: { v: 1 },
        canonical: '{"v":1}',
        sha256: sha256Hex('{"v":1}'),
        period_start: '2026-10-01T00:00Z',
        period_end: '2026-11-01T00:00Z',
        time_zone: 'UTC',
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    const list = json<{ items: { id: string; status: string }[] }>(
      await call('GET', '/closes?period=2026-10'),
    );
    expect(list.items).toHaveLength(1);
    expect(json<{ preparedBy: string }>(await call('GET', `/closes/${row.id}`)).preparedBy).toBe('ana');
    expectProblem(await call('GET', '/closes/777'), 404);
    expectProblem(await call('GET', '/closes?period=2026-13'), 400, 'period');
  });
});

describe('imports', () => {
  const statement = () => readFile(join(import.meta.dirname, '../imports/fixtures/camt053-001-08.xml'));
  const upload = (query: string, bytes: string | Buffer, c: Call = {}) =>
    call('POST', `/imports?${query}`, { file: { type: 'application/xml', bytes }, ...c });
  const importCount = async () =>
    Number(
      (
        await t.db
          .selectFrom('imports')
          .select((eb) => eb.fn.countAll().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );

  it('imports a statement sent as the body, each line once, and answers what the command prints', async () => {
    const bytes = await statement();
    const dryRes = await upload('kind=bank-statement&fileName=camt.xml&dryRun=true', bytes, {
      token: tokens.importer,
    });
    expect(dryRes.statusCode, dryRes.body).toBe(200);
    const dry = json<{
      id: string | null;
      result: { statements: { new: number | null }[]; matching: unknown };
    }>(dryRes);
    expect(dry.id).toBeNull();
    expect(dry.result.statements[0]?.new).toBeNull();
    // A dry run records nothing and matches nothing.
    expect(dry.result.matching).toBeNull();
    expect(await importCount()).toBe(0);

    const res = await upload('kind=bank-statement&fileName=camt.xml', bytes, { token: tokens.importer });
    expect(res.statusCode, res.body).toBe(200);
    const first = json<{
      id: string;
      kind: string;
      fileName: string;
      result: { statements: Record<string, unknown>[]; matching: Record<string, unknown> | null };
    }>(res);
    expect(first).toMatchObject({ kind: 'bank-statement', fileName: 'camt.xml' });
    // Beside the statements, the matching run the new lines started, in counts (validated against the
    // document as every answer): nothing to match them with here, so each line is left and raised.
    const booked0 = first.result.statements.reduce((n, x) => n + (x.booked as number), 0);
    expect(first.result.matching).toEqual({
      matched: {},
      unmatched: { bankLines: booked0, settlements: 0, reportRows: 0 },
      exceptions: { BANK_LINE_UNMATCHED: booked0 },
      resolved: 0,
    });
    expect(first.result.statements).toHaveLength(2);
    const s = first.result.statements[0] as Record<string, unknown>;
    expect(s).toMatchObject({ account: 'DE89370400440532013000', currency: 'EUR' });
    // Amounts beyond a double's precision stay exact decimal text.
    expect(s.opening).toBe('12345678901234567.89');
    expect(s.new).toBe(s.booked);
    expect(s.new as number).toBeGreaterThan(0);

    const again = json<{ id: string; result: { statements: { new: number }[]; matching: unknown } }>(
      await upload('kind=bank-statement&fileName=camt-again.xml', bytes, { token: tokens.importer }),
    );
    expect(again.result.statements[0]?.new).toBe(0);
    // No line new: no matching run.
    expect(again.result.matching).toBeNull();

    const booked = first.result.statements.reduce((n, x) => n + (x.booked as number), 0);
    const list = json<{ items: Record<string, unknown>[] }>(await call('GET', '/imports?limit=10'));
    expect(list.items.map((i) => i.id)).toEqual([again.id, first.id]);
    expect(list.items[1]).toMatchObject({
      kind: 'bank-statement',
      fileName: 'camt.xml',
      importedBy: 'api:importer',
      newLines: booked,
      lines: booked,
    });
    expect((list.items[1]!.statements as Record<string, unknown>[])[0]).toMatchObject({
      bankAccount: 'DE89370400440532013000',
      opening: '12345678901234567.89',
    });
    expect(list.items[0]).toMatchObject({ newLines: 0, matching: null });
    // The import objects carry the run's result as recorded.
    expect(list.items[1]!.matching).toEqual(first.result.matching);

    const detail = json<{
      import: { id: string; matching: unknown };
      lines: { amount: string }[];
      more: boolean;
    }>(await call('GET', `/imports/${first.id}`));
    expect(detail.import.id).toBe(first.id);
    expect(detail.import.matching).toEqual(first.result.matching);
    // The document holds the field: an import object without it, or with a count as text, does not validate.
    const listed = list.items[1]!;
    const check = (item: Record<string, unknown>) =>
      validator.validate(
        'GET',
        `${API_PREFIX}/imports`,
        200,
        'application/json',
        JSON.stringify({ items: [item] }),
      );
    expect(() => check(listed)).not.toThrow();
    const { matching: _left, ...without } = listed;
    expect(() => check(without)).toThrow(/matching/);
    const asText = { ...(listed.matching as Record<string, unknown>), resolved: '0' };
    expect(() => check({ ...listed, matching: asText })).toThrow(/resolved/);
    expect(detail.lines).toHaveLength(booked);
    for (const l of detail.lines) expect(l.amount).toMatch(/^-?\d+\.\d{2}$/);
    expectProblem(await call('GET', '/imports/999999'), 404);
    expectProblem(await call('GET', '/imports/abc'), 400, 'id');
  });

  it('refuses a file that does not balance, an unknown bank account or a broken file with a 422 and one line; nothing imported', async () => {
    const text = (await statement()).toString('utf8');
    const before = await importCount();
    const cases: [string, string, RegExp][] = [
      [
        'kind=bank-statement&fileName=bad.xml',
        text.replace('12345678901234567.89', '12345678901234568.89'),
        /bad\.xml: .*balance/,
      ],
      [
        'kind=bank-statement&fileName=other.xml',
        text.replaceAll('DE89370400440532013000', 'DE02120300000000202051'),
        /other\.xml: .*"DE02120300000000202051" is not one of PAYRECON_BANK_ACCOUNTS/,
      ],
      ['kind=bank-statement&fileName=cut.xml', text.slice(0, 400), /^cut\.xml: /],
      ['kind=provider-settlements&fileName=s.csv&profile=nope', 'a,b\n', /the profile "nope" is not one of/],
    ];
    for (const [query, body, rule] of cases) {
      const p = expectProblem(await upload(query, body), 422);
      expect(String(p.detail)).toMatch(rule);
      expect(String(p.detail)).not.toContain('\n');
    }
    expect(await importCount()).toBe(before);
  });

  it('refuses a token without imports:write (403), another content type (415) and a file too large (413)', async () => {
    const bytes = await statement();
    const p = expectProblem(await upload('kind=bank-statement', bytes, { token: tokens.reader }), 403);
    expect(String(p.detail)).toMatch(/scope imports:write/);
    expectProblem(await call('GET', '/imports', { token: tokens.importer }), 403);
    const json415 = await call('POST', '/imports?kind=bank-statement', { body: { file: 'x' } });
    expectProblem(json415, 415);
    expect(String(json(json415).detail)).toMatch(/application\/octet-stream/);
    expectProblem(
      await call('POST', '/imports?kind=bank-statement', { file: { type: 'image/png', bytes: 'x' } }),
      415,
    );
    expectProblem(await upload('kind=bank-statement', Buffer.alloc(65 * 1024, 0x20)), 413);
    expectProblem(await upload('kind=cheque', bytes), 400, 'kind');
  });
});

describe('decisions from the exception workbook', () => {
  it('takes the xlsx bytes: 200 with each row, 422 naming each refused row, 403 without exceptions:write', async () => {
    await withLedgerTransaction(t.db, (trx) =>
      applyObservations(trx, [
        { ...obs('deposit', 'wb1', 'COMPLETED', 1), account: 'api-wb' } as Observation,
        { ...obs('deposit', 'wb1', 'PENDING', 2), account: 'api-wb' } as Observation,
      ]),
    );
    const { id } = await t.db
      .selectFrom('exceptions')
      .select('id')
      .where('merchant_account', '=', 'api-wb')
      .executeTakeFirstOrThrow();
    const out = join(dir, 'decisions.xlsx');
    const now = new Date();
    const day = now.toISOString().slice(0, 10);
    await writeExceptionWorkbook(t.db, {
      period: {
        from: day,
        to: day,
        start: new Date(now.getTime() - 86_400_000),
        end: new Date(now.getTime() + 60_000),
        timeZone: 'UTC',
        cutoff: '00:00',
      },
      account: 'api-wb',
      out,
      now: new Date(now.getTime() + 1_000),
    });
    const send = async (bytes: Buffer, token = tokens.all) => {
      const res = await app.inject({
        method: 'POST',
        url: `${API_PREFIX}/exceptions/decisions`,
        headers: { authorization: `Bearer ${token}`, 'content-type': XLSX_TYPE },
        payload: bytes,
      });
      validator.validate(
        'POST',
        `${API_PREFIX}/exceptions/decisions`,
        res.statusCode,
        res.headers['content-type'] as string,
        res.body,
      );
      return res;
    };
    const noNote = await fillDecisions(await readFile(out), { [id]: { decision: 'keep-ledger' } });
    expectProblem(await send(noNote.bytes), 422, `Exceptions row ${noNote.rows[id]}`);
    expectProblem(await send(noNote.bytes, tokens.reader), 403);
    const filled = await fillDecisions(await readFile(out), {
      [id]: { decision: 'keep-ledger', note: 'kept' },
    });
    const res = await send(filled.bytes);
    expect(res.statusCode, res.body).toBe(200);
    expect(json(res)).toMatchObject({ decided: 1, proposed: 0, rows: [{ id, outcome: 'decided' }] });
  });
});

describe('reconciliation and matches', () => {
  // The full walk over a reconciled sandbox is in test/web/reconciliation.test.ts.
  it('answers an unknown bank account 404, no match an empty list, and unknown lines or matches 404', async () => {
    expectProblem(await call('GET', '/reconciliation/NL00NOPE/2026-03-02'), 404);
    expectProblem(await call('GET', '/reconciliation/NL00NOPE/2026-02-30'), 400, 'date');
    expect(json(await call('GET', '/matches?from=2026-03-01&to=2026-03-31'))).toEqual({ items: [] });
    expectProblem(await call('GET', '/matches?from=2026-03-31&to=2026-03-01'), 400, 'from');
    expectProblem(
      await call('POST', '/matches', { body: { lines: ['nope'], with: ['nope'], note: 'why' } }),
      404,
    );
    expectProblem(
      await call('POST', '/matches', { body: { lines: [], with: ['x'], note: 'why' } }),
      400,
      'lines',
    );
    expectProblem(await call('POST', '/matches/77/unmatch', { body: { note: 'why' } }), 404);
  });
});

describe('coverage', () => {
  it('validated responses of every operation, and 401 and 403 of the ones tested for them', () => {
    for (const id of validator.operationIds) expect(validator.checked.has(id), id).toBe(true);
    expect(validator.checked.get('getBalances')).toEqual(new Set([200, 400, 401, 403]));
  });
});
