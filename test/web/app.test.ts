/**
 * The finance page through fastify's inject, over a real ledger database: sign-in, session expiry and
 * tampering, CSRF on every form, reports generated and downloaded, exceptions acknowledged and
 * resolved (who and when kept), balances.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fastifyCookie from '@fastify/cookie';
import Fastify, { type FastifyInstance, type LightMyRequestResponse } from 'fastify';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyObservations } from '../../src/db/ledger/service.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import { parseAmount } from '../../src/domain/money.ts';
import { localDate } from '../../src/domain/zoned-time.ts';
import { ReportRunner } from '../../src/reports/runs.ts';
import { buildWebApp, webRoutes } from '../../src/web/app.ts';
import { hashPassword } from '../../src/web/auth.ts';
import { ledgerWebServices } from '../../src/web/services.ts';
import { obs } from '../db/fixtures.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { seedBefore, seedPeriod } from '../reports/scenario.ts';

const TZ = 'UTC';
const SECRET = 'a-test-session-secret-of-enough-length-0123456789';
let t: TestDatabase;
let dir: string;
let app: FastifyInstance;
let runner: ReportRunner;
let clock = Date.now();

/** A minimal cookie jar over inject responses. */
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

async function get(jar: Jar | null, url: string, accept = 'text/html'): Promise<LightMyRequestResponse> {
  const res = await app.inject({
    method: 'GET',
    url,
    headers: { accept, ...(jar ? { cookie: jar.header() } : {}) },
  });
  jar?.take(res);
  return res;
}

async function post(
  jar: Jar | null,
  url: string,
  form: Record<string, string>,
): Promise<LightMyRequestResponse> {
  const res = await app.inject({
    method: 'POST',
    url,
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      ...(jar ? { cookie: jar.header() } : {}),
    },
    payload: new URLSearchParams(form).toString(),
  });
  jar?.take(res);
  return res;
}

async function signIn(username = 'finance', password = 'correct horse battery'): Promise<Jar> {
  const jar = new Jar();
  const page = await get(jar, '/login');
  const res = await post(jar, '/login', { _csrf: csrfOf(page.body), username, password });
  expect(res.statusCode).toBe(303);
  return jar;
}

beforeAll(async () => {
  t = await createTestDatabase();
  await seedBefore(t.db);
  await seedPeriod(t.db);
  dir = await mkdtemp(join(tmpdir(), 'payrecon-web-'));
  runner = new ReportRunner({ db: t.db, dir, timeZone: TZ });
  app = await buildWebApp({
    users: [
      { username: 'finance', passwordHash: await hashPassword('correct horse battery') },
      { username: 'ops', passwordHash: await hashPassword('another pass phrase') },
    ],
    sessionSecret: SECRET,
    sessionTtlMs: 3_600_000,
    timeZone: TZ,
    services: ledgerWebServices(t.db, runner),
    now: () => new Date(clock),
  });
});

afterAll(async () => {
  await app?.close();
  await runner?.idle();
  await t?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('without a session', () => {
  it('sends browsers to sign in and refuses everything else', async () => {
    for (const url of ['/reports', '/exceptions', '/balances', '/reports/1', '/']) {
      const res = await get(null, url);
      expect(res.statusCode, url).toBe(303);
      expect(res.headers.location).toBe('/login');
    }
    expect((await get(null, '/reports/1/download/x.xlsx', '*/*')).statusCode).toBe(401);
    expect((await post(null, '/exceptions/1', { action: 'resolve' })).statusCode).toBe(401);
    expect(
      (await post(null, '/reports', { kind: 'settlement', from: '2026-01-01', to: '2026-01-01' })).statusCode,
    ).toBe(401);
    const css = await get(null, '/static/style.css', 'text/css');
    expect(css.statusCode).toBe(200);
  });

  it('refuses a wrong password, an unknown user and a sign-in without its form token', async () => {
    const jar = new Jar();
    const page = await get(jar, '/login');
    expect(page.statusCode).toBe(200);
    const token = csrfOf(page.body);
    expect(token).not.toBe('');
    expect(
      (await post(jar, '/login', { username: 'finance', password: 'correct horse battery' })).statusCode,
    ).toBe(403);
    const wrong = await post(jar, '/login', { _csrf: token, username: 'finance', password: 'nope' });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.body).toContain('Wrong user name or password');
    expect(jar.cookies.has('payrecon_session')).toBe(false);
    const again = csrfOf(wrong.body);
    expect((await post(jar, '/login', { _csrf: again, username: 'mallory', password: 'x' })).statusCode).toBe(
      401,
    );
  });

  it('refuses a tampered or expired session cookie', async () => {
    const jar = await signIn();
    expect((await get(jar, '/balances')).statusCode).toBe(200);
    const value = jar.cookies.get('payrecon_session')!;
    const [token, sig] = [value.slice(0, value.lastIndexOf('.')), value.slice(value.lastIndexOf('.') + 1)];
    const forged = `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`;
    const tampered = new Jar();
    tampered.cookies.set('payrecon_session', `${forged}.${sig}`);
    expect((await get(tampered, '/balances', '*/*')).statusCode).toBe(401);
    // Even correctly signed, a token no session row is named by is refused.
    const unknown = new Jar();
    unknown.cookies.set('payrecon_session', fastifyCookie.signerFactory(SECRET).sign(forged));
    expect((await get(unknown, '/balances', '*/*')).statusCode).toBe(401);
    clock += 2 * 3_600_000;
    try {
      expect((await get(jar, '/balances', '*/*')).statusCode).toBe(401);
    } finally {
      clock -= 2 * 3_600_000;
    }
  });
});

describe('signed in', () => {
  it('refuses forms without the session token, or with another session token', async () => {
    const jar = await signIn();
    const other = await signIn('ops', 'another pass phrase');
    const otherToken = csrfOf((await get(other, '/reports')).body);
    const today = localDate(new Date(), TZ);
    const form = { kind: 'settlement', from: today, to: today, account: '' };
    expect((await post(jar, '/reports', form)).statusCode).toBe(403);
    expect((await post(jar, '/reports', { ...form, _csrf: otherToken })).statusCode).toBe(403);
    expect((await post(jar, '/exceptions/1', { action: 'resolve', _csrf: otherToken })).statusCode).toBe(403);
  });

  it('generates a settlement workbook, shows its run and downloads it', async () => {
    const jar = await signIn();
    const page = await get(jar, '/reports');
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('<option value="acme">acme</option>');
    const today = localDate(new Date(), TZ);
    const bad = await post(jar, '/reports', {
      _csrf: csrfOf(page.body),
      kind: 'settlement',
      from: today,
      to: '2000-01-01',
    });
    expect(bad.statusCode).toBe(400);
    const res = await post(jar, '/reports', {
      _csrf: csrfOf(page.body),
      kind: 'settlement',
      from: today,
      to: today,
      account: 'acme',
    });
    expect(res.statusCode).toBe(303);
    const location = String(res.headers.location);
    expect(location).toMatch(/^\/reports\/\d+$/);
    await runner.idle();
    const run = await get(jar, location);
    expect(run.body).toContain('succeeded');
    const links = [...run.body.matchAll(/href="(\/reports\/\d+\/download\/[^"]+)"/g)].map((m) => m[1]!);
    expect(links.some((l) => l.endsWith('.xlsx'))).toBe(true);
    expect(links.some((l) => l.endsWith('deposits.csv'))).toBe(true);
    const xlsx = links.find((l) => l.endsWith('.xlsx'))!;
    const download = await app.inject({ method: 'GET', url: xlsx, headers: { cookie: jar.header() } });
    expect(download.statusCode).toBe(200);
    expect(download.headers['content-type']).toContain('spreadsheetml');
    expect(download.headers['content-disposition']).toContain('attachment');
    const id = location.split('/').pop()!;
    const stored = await runner.get(id);
    expect(createHash('sha256').update(download.rawPayload).digest('hex')).toBe(stored?.sha256);
    expect(stored?.rowCounts.Deposits).toBeGreaterThan(0);
    expect(stored?.account).toBe('acme');
    expect(stored?.requestedBy).toBe('finance');
    expect(stored?.files.length).toBe(8);
    expect((await readFile(stored!.files[1]!.path, 'utf8')).split('\r\n')[0]).toContain('Deposit id');
    // Names outside the run's file list are not served.
    expect((await get(jar, `/reports/${id}/download/..%2F..%2Fetc%2Fpasswd`, '*/*')).statusCode).toBe(404);
    const list = await get(jar, '/reports');
    expect(list.body).toContain(`href="/reports/${id}"`);
  });

  it('acknowledges then resolves an exception with notes, keeping who and when', async () => {
    const jar = await signIn('ops', 'another pass phrase');
    const page = await get(jar, '/exceptions?type=LATE_REJECTION');
    expect(page.statusCode).toBe(200);
    const id = /data-exception="(\d+)"/.exec(page.body)?.[1];
    expect(id).toBeDefined();
    expect(page.body).not.toContain('EARLY_RELEASE_REVERSED</td>');
    const token = csrfOf(page.body);
    const ack = await post(jar, `/exceptions/${id}`, {
      _csrf: token,
      action: 'acknowledge',
      note: 'bank <asked> & checking',
    });
    expect(ack.statusCode).toBe(303);
    const after = await get(jar, '/exceptions?state=acknowledged');
    expect(after.body).toContain('bank &lt;asked&gt; &amp; checking');
    expect(after.body).not.toContain('<asked>');
    const res = await post(jar, `/exceptions/${id}`, {
      _csrf: token,
      action: 'resolve',
      note: 'returned funds booked',
    });
    expect(res.statusCode).toBe(303);
    const { rows } = await sql<{
      state: string;
      acknowledged_by: string;
      acknowledged_at: Date;
      resolved_by: string;
      resolved_at: Date;
      resolution_note: string;
    }>`SELECT state, acknowledged_by, acknowledged_at, resolved_by, resolved_at, resolution_note FROM exceptions WHERE id = ${id}`.execute(
      t.db,
    );
    expect(rows[0]).toMatchObject({
      state: 'resolved',
      acknowledged_by: 'ops',
      resolved_by: 'ops',
      resolution_note: 'returned funds booked',
    });
    expect(rows[0]!.resolved_at).toBeInstanceOf(Date);
    // The page's moves go through the queue's one state change: each leaves its audit event.
    const events = await sql<{ actor: string; action: string; from_state: string; to_state: string }>`
      SELECT actor, action, from_state, to_state FROM exception_events WHERE exception_id = ${id} ORDER BY id`.execute(
      t.db,
    );
    expect(events.rows).toEqual([
      { actor: 'ops', action: 'state', from_state: 'open', to_state: 'acknowledged' },
      { actor: 'ops', action: 'state', from_state: 'acknowledged', to_state: 'resolved' },
    ]);
    expect((await post(jar, `/exceptions/${id}`, { _csrf: token, action: 'resolve' })).statusCode).toBe(409);
    // Acknowledging applies to an exception nobody accepted yet, never to a resolved one.
    expect((await post(jar, `/exceptions/${id}`, { _csrf: token, action: 'acknowledge' })).statusCode).toBe(
      409,
    );
    const open = await get(jar, '/exceptions');
    expect(open.body).not.toContain(`data-exception="${id}"`);
    const resolved = await get(jar, '/exceptions?state=resolved');
    expect(resolved.body).toContain(`data-exception="${id}"`);
    expect(resolved.body).toContain('returned funds booked');
  });

  it('filters exceptions by age', async () => {
    await sql`UPDATE exceptions SET first_seen_at = now() - interval '4 days' WHERE type = 'EARLY_RELEASE_REVERSED'`.execute(
      t.db,
    );
    const jar = await signIn();
    expect((await get(jar, '/exceptions?age=3to7d')).body).toContain('EARLY_RELEASE_REVERSED');
    expect((await get(jar, '/exceptions?age=lt1d')).body).not.toContain('<td>EARLY_RELEASE_REVERSED</td>');
  });

  /** The cells of a balance row as text: available and its today/month, reserved and its, in flight. */
  const balanceCells = (body: string, book: string, currency = 'BRL', account = 'acme') => {
    const from = body.indexOf(`<tr data-balance="${account}|${currency}|${book}">`);
    if (from < 0) return undefined;
    const row = body.slice(from, body.indexOf('</tr>', from));
    return [...row.matchAll(/<td[^>]*>(.*?)<\/td>/g)].map((m) =>
      m[1]!
        .replace(/<[^>]+>/g, ' ')
        .replace(/\s+/g, ' ')
        .trim(),
    );
  };

  it('shows balances per account and currency with in-flight counts', async () => {
    clock = Date.now();
    const jar = await signIn();
    const res = await get(jar, '/balances');
    expect(res.statusCode).toBe(200);
    const { rows } = await sql<{ s: string }>`
      SELECT sum(amount)::text AS s FROM postings WHERE account = 'available' AND currency = 'BRL' AND book = 'live'`.execute(
      t.db,
    );
    const [int, frac] = rows[0]!.s.split('.');
    const shown = `${Number(int).toLocaleString('en-US')}.${frac}`;
    const live = balanceCells(res.body, 'live')!;
    expect(live.slice(0, 4)).toEqual(['acme', 'BRL', 'live', shown]);
    // Refund 3001 is pending: one refund in flight; no cashout is in flight at the end of the scenario.
    expect(live.slice(9)).toEqual(['0', '1']);
    expect(balanceCells(res.body, 'test')).toBeDefined();
  });

  it('shows a refund of a test deposit reserved and in flight in the test book row, not the live one', async () => {
    const jar = await signIn();
    clock = Date.now();
    const before = await get(jar, '/balances');
    await withLedgerTransaction(t.db, (trx) =>
      applyObservations(trx, [
        obs('refund', '3901', 'PENDING', 1, { parentDepositId: '1201', amount: 1_234n }),
      ]),
    );
    clock = Date.now(); // the page shows balances as of the clock
    const after = await get(jar, '/balances');
    expect(balanceCells(after.body, 'live')).toEqual(balanceCells(before.body, 'live'));
    // Test book: available 12.34 lower, reserved 12.34, no cashout and one refund in flight; today's
    // movements show the reserve on both sides.
    const was = balanceCells(before.body, 'test')!;
    const now = balanceCells(after.body, 'test')!;
    expect([was[3], was[6]]).toEqual(['770.00', '0.00']);
    expect([now[3], now[6], now[9], now[10]]).toEqual(['757.66', '12.34', '0', '1']);
    const net = (cell: string | undefined) =>
      parseAmount((cell ?? '').split(' ')[0]!.replace(/[+,]/g, ''), { allowNegative: true });
    expect(net(now[4]) - net(was[4])).toBe(-1_234n);
    expect(net(now[7]) - net(was[7])).toBe(1_234n);
  });

  it('signs out', async () => {
    const jar = await signIn();
    const page = await get(jar, '/balances');
    const res = await post(jar, '/logout', { _csrf: csrfOf(page.body) });
    expect(res.statusCode).toBe(303);
    expect(jar.cookies.has('payrecon_session')).toBe(false);
    expect((await get(jar, '/balances', '*/*')).statusCode).toBe(401);
  });
});

describe('mounted in a larger server', () => {
  it('keeps its sign-in to its own routes under a prefix', async () => {
    const server = Fastify();
    server.get('/healthz', async () => ({ ok: true }));
    await server.register(webRoutes, {
      prefix: '/finance',
      users: [{ username: 'finance', passwordHash: await hashPassword('correct horse battery') }],
      sessionSecret: SECRET,
      timeZone: TZ,
      services: ledgerWebServices(t.db, runner),
    });
    try {
      expect((await server.inject({ url: '/healthz' })).statusCode).toBe(200);
      const refused = await server.inject({ url: '/finance/balances', headers: { accept: 'text/html' } });
      expect(refused.statusCode).toBe(303);
      expect(refused.headers.location).toBe('/finance/login');
      const login = await server.inject({ url: '/finance/login' });
      expect(login.body).toContain('action="/finance/login"');
      const token = csrfOf(login.body);
      const prelogin = login.cookies.find((c) => c.name === 'payrecon_prelogin')!;
      expect(prelogin.path).toBe('/finance');
      const res = await server.inject({
        method: 'POST',
        url: '/finance/login',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          cookie: `payrecon_prelogin=${prelogin.value}`,
        },
        payload: new URLSearchParams({
          _csrf: token,
          username: 'finance',
          password: 'correct horse battery',
        }).toString(),
      });
      expect(res.statusCode).toBe(303);
      expect(res.headers.location).toBe('/finance/balances');
      const session = res.cookies.find((c) => c.name === 'payrecon_session')!;
      const page = await server.inject({
        url: '/finance/balances',
        headers: { cookie: `payrecon_session=${session.value}` },
      });
      expect(page.statusCode).toBe(200);
      expect(page.body).toContain('href="/finance/static/style.css"');
    } finally {
      await server.close();
    }
  });
});
