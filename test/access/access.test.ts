/**
 * Access: the one server `payrecon up` runs (`buildServer`: page, webhooks, intents, ops) over a real
 * database, the embedded broker and registry. Every page route, enumerated from fastify's own route
 * table (so a route added later is covered without editing this file), is refused without a session and
 * with a forged, tampered, foreign-secret or expired session cookie, and shows no data; every POST form of
 * the page is refused without its CSRF token and with another session's, and accepted with its own; a
 * session ends after its configured lifetime; sign-out ends the session on the server (the old cookie
 * is refused); wrong passwords are refused. Webhooks with signature enforcement refuse forged, misplaced,
 * missing and replayed signatures with 4xx and publish nothing; `POST /intents` refuses without its token.
 */

import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fastifyCookie from '@fastify/cookie';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { createApiToken } from '../../src/domain/api-tokens.ts';
import { startBroker } from '../../src/embedded/kafka/broker.ts';
import { startRegistry } from '../../src/embedded/registry/registry.ts';
import { NOTIFICATION_TOPIC } from '../../src/events/topics.ts';
import { type Infrastructure, startInfrastructure } from '../../src/infrastructure.ts';
import { cashoutControl, depositAuthorization, formatXDate } from '../../src/provider/signing.ts';
import { buildServer } from '../../src/server.ts';
import { createServices } from '../../src/services.ts';
import { hashPassword } from '../../src/web/auth.ts';
import { OpenApiValidator } from '../api/openapi-validator.ts';
import { postAt } from '../db/fixtures.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { waitFor } from '../helpers/wait.ts';

import { sandboxAccount } from '../producers/helpers.ts';
import { seedBefore, seedPeriod } from '../reports/scenario.ts';

const SESSION_SECRET = 'access-suite-session-secret-0123456789-abcdef';
const TTL_MS = 10 * 60_000;
const USERS = { finance: 'correct horse battery', ops: 'another pass phrase' } as const;
const account = sandboxAccount(
  { url: 'http://127.0.0.1:1', ccUrl: 'http://127.0.0.1:2' },
  { name: 'main', webhookSignatureMode: 'enforce' },
);

/** Paths that are not the page's, or the page's public ones: they have their own auth or none. */
const EXCLUDED = (path: string): boolean =>
  path === '/login' ||
  path.startsWith('/static/') ||
  ['/healthz', '/readyz', '/metrics', '/intents', '/favicon.ico'].includes(path) ||
  path.startsWith('/api/v1/') ||
  path === '/webhooks' ||
  path.startsWith('/webhooks/');

let tdb: TestDatabase;
let INTENTS_TOKEN = '';
let READ_TOKEN = '';
let dataDir: string;
let infra: Infrastructure;
let app: FastifyInstance;
let clock = Date.now();
const routes: { method: string; path: string }[] = [];
const pageRoutes: string[] = [];
const figures = { routes: 0, requestsRefused: 0, csrfRefused: 0, webhooksRefused: 0, intentsRefused: 0 };

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

async function send(
  method: string,
  url: string,
  options: { cookie?: string; accept?: string; form?: Record<string, string> } = {},
): Promise<LightMyRequestResponse> {
  return app.inject({
    method: method as 'GET',
    url,
    headers: {
      accept: options.accept ?? 'text/html',
      ...(options.cookie ? { cookie: options.cookie } : {}),
      ...(options.form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
    },
    ...(options.form ? { payload: new URLSearchParams(options.form).toString() } : {}),
  });
}

async function signIn(username: keyof typeof USERS = 'finance'): Promise<Jar> {
  const jar = new Jar();
  const page = await send('GET', '/login');
  jar.take(page);
  const res = await send('POST', '/login', {
    cookie: jar.header(),
    form: { _csrf: csrfOf(page.body), username, password: USERS[username] },
  });
  jar.take(res);
  expect(res.statusCode).toBe(303);
  expect(jar.cookies.has('payrecon_session')).toBe(true);
  return jar;
}

/** A URL for a route: parameters filled with values that exist in the seeded database. */
function urlOf(path: string): string {
  return path
    .replace(/:id/g, '1')
    .replace(/:name/g, 'settlement.xlsx')
    .replace(/:(\w+)/g, 'x');
}

/** Parses `printRoutes({ commonPrefix: false })` into method and full path pairs. */
function parseRouteTree(tree: string): { method: string; path: string }[] {
  const out: { method: string; path: string }[] = [];
  const stack: string[] = [];
  for (const line of tree.split('\n')) {
    const m = /^([│ ]*)[├└]── (.*?)(?: \(([A-Z, ]+)\))?$/.exec(line);
    if (!m) continue;
    const depth = m[1]!.length / 4;
    stack.length = depth;
    stack.push(m[2]!);
    if (m[3]) for (const method of m[3].split(', ')) out.push({ method, path: stack.join('') });
  }
  return out;
}

/** End offset of the notification topic, summed over partitions. */
async function topicEnd(topic = NOTIFICATION_TOPIC): Promise<bigint> {
  const offsets = await infra.admin.fetchTopicOffsets(topic);
  return offsets.reduce((n, p) => n + BigInt(p.high), 0n);
}

beforeAll(async () => {
  tdb = await createTestDatabase();
  dataDir = mkdtempSync(join(tmpdir(), 'payrecon-access-'));
  const intentsToken = await createApiToken('merchant-backend', ['intents:write']);
  const readToken = await createApiToken('erp', ['read']);
  INTENTS_TOKEN = intentsToken.token;
  READ_TOKEN = readToken.token;
  const config = loadConfig({
    DATABASE_URL: tdb.url,
    PAYRECON_DATA_DIR: dataDir,
    LOG_LEVEL: 'silent',
    PAYRECON_SESSION_SECRET: SESSION_SECRET,
    PAYRECON_API_TOKENS: JSON.stringify([intentsToken.entry, readToken.entry]),
    PAYRECON_WEB_USERS: JSON.stringify([
      // Controllers: they may also sign and approve closes, so every form of the page is theirs to send.
      { username: 'finance', passwordHash: await hashPassword(USERS.finance), role: 'controller' },
      { username: 'ops', passwordHash: await hashPassword(USERS.ops), role: 'controller' },
    ]),
  });
  infra = await startInfrastructure(config, {
    postgres: () => Promise.reject(new Error('the test uses the machine PostgreSQL')),
    broker: ({ dataDir: dir }) => startBroker({ host: '127.0.0.1', port: 0, dataDir: dir }),
    registry: ({ dataDir: dir }) => startRegistry({ host: '127.0.0.1', port: 0, dataDir: dir }),
  });
  await seedBefore(infra.db);
  await seedPeriod(infra.db);
  app = await buildServer(infra, createServices(infra), {
    accounts: [account],
    metrics: infra.metrics,
    page: true,
    webhooks: true,
    intents: true,
    pageOptions: { now: () => new Date(clock), sessionTtlMs: TTL_MS },
  });
  await app.ready();
  routes.push(...parseRouteTree(app.printRoutes({ commonPrefix: false })));
}, 120_000);

afterAll(async () => {
  await app?.close();
  await infra?.lifecycle.stopAll();
  await tdb?.drop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  process.stdout.write(`access figures: ${JSON.stringify({ ...figures, pageRoutes })}\n`);
});

describe('the route table', () => {
  it('lists the page, webhook, intents and ops routes', () => {
    const paths = new Set(routes.map((r) => `${r.method} ${r.path}`));
    for (const expected of [
      'GET /healthz',
      'POST /webhooks/:a/:b',
      'POST /intents',
      'GET /reports',
      'POST /reports',
      'POST /logout',
      'GET /reports/:id/download/:name',
      'POST /exceptions/:id',
    ]) {
      expect(paths, expected).toContain(expected);
    }
  });
});

describe('the page without a valid session', () => {
  it('refuses every route without a cookie and with forged, tampered, foreign or expired cookies', async () => {
    const page = routes.filter((r) => !EXCLUDED(r.path));
    pageRoutes.push(...new Set(page.map((r) => `${r.method} ${r.path}`)));
    figures.routes = pageRoutes.length;
    expect(page.length).toBeGreaterThanOrEqual(10);

    // A genuine session, to tamper with; its data (account `acme`) is what must not leak.
    const jar = await signIn();
    const genuine = jar.cookies.get('payrecon_session')!;
    const dot = genuine.lastIndexOf('.');
    const token = genuine.slice(0, dot);
    const signer = fastifyCookie.signerFactory(SESSION_SECRET);
    const foreign = fastifyCookie.signerFactory('another-secret-of-enough-length-0123456789abc');
    // Sessions whose rows say expired or ended, before the server has read them.
    const rowOf = (cookie: string) =>
      createHash('sha256')
        .update(cookie.slice(0, cookie.lastIndexOf('.')))
        .digest('hex');
    const expired = (await signIn()).cookies.get('payrecon_session')!;
    const ended = (await signIn()).cookies.get('payrecon_session')!;
    await sql`UPDATE web_sessions SET expires_at = ${new Date(clock - 1)} WHERE id = ${rowOf(expired)}`.execute(
      tdb.db,
    );
    await sql`UPDATE web_sessions SET ended_at = now(), ended_reason = 'signed-out' WHERE id = ${rowOf(ended)}`.execute(
      tdb.db,
    );
    const flipped = `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`;
    const cookies: Record<string, string | null> = {
      none: null,
      garbage: 'payrecon_session=not-a-session',
      unsigned: `payrecon_session=${token}`,
      'tampered token': `payrecon_session=${flipped}.${genuine.slice(dot + 1)}`,
      'tampered signature': `payrecon_session=${token}.${'A'.repeat(genuine.length - dot - 1)}`,
      'signed with another secret': `payrecon_session=${foreign.sign(token)}`,
      'unknown token (correctly signed)': `payrecon_session=${signer.sign(flipped)}`,
      'expired (correctly signed)': `payrecon_session=${expired}`,
      'ended (correctly signed)': `payrecon_session=${ended}`,
      'malformed (correctly signed)': `payrecon_session=${signer.sign('{"sid":1}')}`,
    };
    // Control: the genuine cookie passes on a data page, and that page shows the seeded account.
    const control = await send('GET', '/balances', { cookie: `payrecon_session=${genuine}` });
    expect(control.statusCode).toBe(200);
    expect(control.body).toContain('acme');

    let count = 0;
    for (const route of page) {
      for (const [name, cookie] of Object.entries(cookies)) {
        for (const accept of ['text/html', 'application/json']) {
          const what = `${route.method} ${route.path} ${name} ${accept}`;
          const res = await send(route.method, urlOf(route.path), {
            ...(cookie ? { cookie } : {}),
            accept,
            ...(route.method === 'POST' ? { form: { _csrf: 'x', action: 'resolve' } } : {}),
          });
          const browserPage = (route.method === 'GET' || route.method === 'HEAD') && accept === 'text/html';
          // HEAD answers like GET; a browser asking for a page is sent to sign in, anything else refused.
          if (browserPage && route.method === 'GET') {
            expect(res.statusCode, what).toBe(303);
            expect(res.headers.location, what).toBe('/login');
            expect(res.body, what).toBe('');
          } else if (browserPage) {
            expect([303, 401], what).toContain(res.statusCode);
          } else {
            expect(res.statusCode, what).toBe(401);
            expect(res.body, what).toBe(route.method === 'HEAD' ? '' : 'sign-in required');
          }
          expect(res.headers['set-cookie'] ?? '', what).not.toContain('payrecon_session=ey');
          expect(res.body, what).not.toContain('acme');
          count++;
        }
      }
    }
    figures.requestsRefused += count;
    // Nothing refused changed anything: no report run was started, no exception acted on.
    const runs = await sql<{ n: number }>`SELECT count(*)::int AS n FROM report_runs`.execute(infra.db);
    expect(runs.rows[0]!.n).toBe(0);
    const acted = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM exceptions WHERE state <> 'open'`.execute(infra.db);
    expect(acted.rows[0]!.n).toBe(0);
  });

  it('refuses wrong passwords and unknown users, and sets no session', async () => {
    const attempts = [
      { username: 'finance', password: 'wrong' },
      { username: 'finance', password: `${USERS.finance} ` },
      { username: 'finance', password: USERS.ops },
      { username: 'Finance', password: USERS.finance },
      { username: 'mallory', password: USERS.finance },
      { username: 'finance', password: '' },
    ];
    for (const a of attempts) {
      const jar = new Jar();
      const page = await send('GET', '/login');
      jar.take(page);
      const res = await send('POST', '/login', {
        cookie: jar.header(),
        form: { _csrf: csrfOf(page.body), ...a },
      });
      expect(res.statusCode, a.username).toBe(401);
      expect(res.body).toContain('Wrong user name or password');
      expect(res.cookies.some((c) => c.name === 'payrecon_session' && c.value !== '')).toBe(false);
      figures.requestsRefused++;
    }
    await signIn('ops');
  });
});

describe('forms', () => {
  it('refuses every POST form of the page without its token and with another session token', async () => {
    const close = '/closes/:account/:currency/:period';
    // A month is prepared before it is approved; sign-out last, as it ends the session.
    const order = [
      `${close}/prepare`,
      `${close}/approve`,
      '/exceptions/:id',
      '/exceptions/bulk',
      '/reports',
      '/imports',
      '/exceptions/decisions',
      '/reconciliation/:bankAccount/:date/match',
      '/reconciliation/:bankAccount/:date/unmatch',
    ];
    const posts = routes
      .filter((r) => r.method === 'POST' && !EXCLUDED(r.path))
      .sort((a, b) => (order.indexOf(a.path) + 1 || 99) - (order.indexOf(b.path) + 1 || 99));
    expect(posts.map((r) => r.path)).toEqual([...order, '/logout']);
    const today = new Date(clock).toISOString().slice(0, 10);
    const exception = await sql<{ id: string }>`
      SELECT id::text AS id FROM exceptions WHERE state = 'open' ORDER BY id LIMIT 2`.execute(infra.db);
    const exceptionId = exception.rows[0]!.id;
    const bulkId = exception.rows[1]!.id;
    // Last month is over, so it can be prepared: by finance, approved by ops (never one's own).
    const lastMonth = new Date(clock);
    lastMonth.setUTCDate(1);
    lastMonth.setUTCMonth(lastMonth.getUTCMonth() - 1);
    const month = lastMonth.toISOString().slice(0, 7);
    // A month is signed only with entries in it: one deposit booked in the middle of last month.
    await postAt(infra.db, 'access-last-month', 10_000n, new Date(lastMonth.getTime() + 14 * 86_400_000));
    const forms: Record<string, Record<string, string>> = {
      '/reports': { kind: 'settlement', from: today, to: today, account: '' },
      // No file: with its token the form is refused by its content (400), never by the token.
      '/imports': { kind: 'bank-statement' },
      '/exceptions/decisions': {},
      // No bank account here: with its token the form is refused by its content, never by the token.
      '/reconciliation/:bankAccount/:date/match': { note: 'checked' },
      '/reconciliation/:bankAccount/:date/unmatch': { note: 'checked' },
      '/exceptions/:id': { action: 'acknowledge', note: 'checked' },
      '/exceptions/bulk': { action: 'acknowledge', note: 'checked in bulk', ids: bulkId },
      [`${close}/prepare`]: {},
      [`${close}/approve`]: {},
      '/logout': {},
    };
    const state = async () => ({
      closes: (
        await sql<{ s: string }>`SELECT string_agg(status, ',' ORDER BY id) AS s FROM closes`.execute(
          infra.db,
        )
      ).rows[0]!.s,
      bulk: (
        await sql<{ state: string }>`SELECT state FROM exceptions WHERE id = ${bulkId}`.execute(infra.db)
      ).rows[0]!.state,
      runs: (await sql<{ n: number }>`SELECT count(*)::int AS n FROM report_runs`.execute(infra.db)).rows[0]!
        .n,
      exception: (
        await sql<{ state: string }>`SELECT state FROM exceptions WHERE id = ${exceptionId}`.execute(infra.db)
      ).rows[0]!.state,
    });
    for (const route of posts) {
      const form = forms[route.path];
      expect(form, `a form for ${route.path}`).toBeDefined();
      const url = route.path
        .replace(':id', exceptionId)
        .replace(':account/:currency/:period', `acme/BRL/${month}`)
        .replace(':bankAccount/:date', `NL00NONE/${today}`);
      const before = await state();
      const actor = route.path.endsWith('/approve') ? 'ops' : 'finance';
      const jar = await signIn(actor);
      const other = await signIn(actor === 'ops' ? 'finance' : 'ops');
      const mine = csrfOf((await send('GET', '/reports', { cookie: jar.header() })).body);
      const theirs = csrfOf((await send('GET', '/reports', { cookie: other.header() })).body);
      expect(mine).not.toBe(theirs);
      for (const [name, token] of [
        ['no token', null],
        ['empty token', ''],
        ["another session's token", theirs],
        ['a token of another sign-in page', csrfOf((await send('GET', '/login')).body)],
        ['a truncated token', mine.slice(0, -1)],
      ] as const) {
        const res = await send('POST', url, {
          cookie: jar.header(),
          form: token === null ? form! : { ...form!, _csrf: token },
        });
        expect(res.statusCode, `${route.path} ${name}`).toBe(403);
        figures.csrfRefused++;
      }
      // Nothing happened: no run, the exception untouched, the session still valid.
      expect(await state(), `${route.path}: refused forms changed nothing`).toEqual(before);
      expect((await send('GET', '/balances', { cookie: jar.header() })).statusCode).toBe(200);
      // Control: the right token is accepted.
      const ok = await send('POST', url, { cookie: jar.header(), form: { ...form!, _csrf: mine } });
      expect(ok.statusCode, `${route.path} with its own token`).toBe(
        route.path === '/imports' ||
          route.path === '/exceptions/decisions' ||
          route.path.startsWith('/reconciliation/')
          ? 400
          : 303,
      );
    }
    expect(
      (await sql<{ n: number }>`SELECT count(*)::int AS n FROM report_runs`.execute(infra.db)).rows[0]!.n,
    ).toBe(1);
    // The accepted run finishes before the server closes.
    await waitFor('the report run', async () => {
      const { rows } = await sql<{ status: string }>`SELECT status FROM report_runs`.execute(infra.db);
      return rows[0]?.status === 'succeeded' ? true : undefined;
    });
    expect(
      (await sql<{ state: string }>`SELECT state FROM exceptions WHERE id = ${exceptionId}`.execute(infra.db))
        .rows[0]!.state,
    ).toBe('acknowledged');
    expect((await state()).bulk).toBe('acknowledged');
    const signed = await sql<{ prepared_by: string; approved_by: string | null }>`
      SELECT prepared_by, approved_by FROM closes`.execute(infra.db);
    expect(signed.rows).toEqual([{ prepared_by: 'finance', approved_by: 'ops' }]);
  });

  it('refuses the sign-in form without its pre-sign-in token or with another browser token', async () => {
    const page = await send('GET', '/login');
    const jar = new Jar();
    jar.take(page);
    const otherPage = await send('GET', '/login');
    const form = { username: 'finance', password: USERS.finance };
    for (const token of [null, csrfOf(otherPage.body)]) {
      const res = await send('POST', '/login', {
        cookie: jar.header(),
        form: token === null ? form : { ...form, _csrf: token },
      });
      expect(res.statusCode).toBe(403);
      expect(res.cookies.some((c) => c.name === 'payrecon_session' && c.value !== '')).toBe(false);
      figures.csrfRefused++;
    }
    const ok = await send('POST', '/login', {
      cookie: jar.header(),
      form: { ...form, _csrf: csrfOf(page.body) },
    });
    expect(ok.statusCode).toBe(303);
  });
});

describe('sessions', () => {
  it('end after their configured lifetime', async () => {
    const jar = await signIn();
    const start = clock;
    try {
      clock = start + TTL_MS - 1_000;
      expect((await send('GET', '/balances', { cookie: jar.header() })).statusCode).toBe(200);
      clock = start + TTL_MS;
      const res = await send('GET', '/balances', { cookie: jar.header() });
      expect(res.statusCode).toBe(303);
      expect(res.headers.location).toBe('/login');
      expect((await send('GET', '/balances', { cookie: jar.header(), accept: '*/*' })).statusCode).toBe(401);
      figures.requestsRefused += 2;
    } finally {
      clock = start;
    }
    // The cookie itself also carries the lifetime, for the browser.
    const login = await send('GET', '/login');
    const res = await send('POST', '/login', {
      cookie: `payrecon_prelogin=${login.cookies.find((c) => c.name === 'payrecon_prelogin')!.value}`,
      form: { _csrf: csrfOf(login.body), username: 'finance', password: USERS.finance },
    });
    expect(res.cookies.find((c) => c.name === 'payrecon_session')?.maxAge).toBe(TTL_MS / 1000);
  });

  it('end on the server at sign-out: the old cookie is refused afterwards', async () => {
    const jar = await signIn();
    const cookie = jar.header();
    const other = await signIn();
    const page = await send('GET', '/balances', { cookie });
    expect(page.statusCode).toBe(200);
    const out = await send('POST', '/logout', { cookie, form: { _csrf: csrfOf(page.body) } });
    expect(out.statusCode).toBe(303);
    // A browser that kept (or stole) the cookie gets nothing with it.
    for (const route of ['/balances', '/reports', '/exceptions']) {
      const res = await send('GET', route, { cookie, accept: '*/*' });
      expect(res.statusCode, route).toBe(401);
      figures.requestsRefused++;
    }
    const replay = await send('POST', '/reports', {
      cookie,
      form: { _csrf: csrfOf(page.body), kind: 'exceptions', from: '2026-01-01', to: '2026-01-01' },
    });
    expect(replay.statusCode).toBe(401);
    figures.requestsRefused++;
    // Another session of the same user is not affected.
    expect((await send('GET', '/balances', { cookie: other.header() })).statusCode).toBe(200);
  });
});

describe('webhooks with signature enforcement', () => {
  const path = '/webhooks/main/deposits';
  const headersFor = (body: string, at: Date, secret = account.depositSecret, signedBody = body) => {
    const xDate = formatXDate(at);
    return {
      'content-type': 'application/json',
      'x-date': xDate,
      'x-login': account.depositLogin,
      authorization: depositAuthorization({ xDate, xLogin: account.depositLogin, body: signedBody, secret }),
    };
  };

  it('refuses forged, misplaced, missing and replayed signatures and publishes nothing', async () => {
    const before = await topicEnd();
    const body = '{"deposit_id":3001}';
    const now = new Date();
    const cases: [string, string, Record<string, string>, string][] = [
      ['forged (another secret)', path, headersFor(body, now, 'not-the-deposit-secret'), body],
      [
        'signature of another body',
        path,
        headersFor(body, now, account.depositSecret, '{"deposit_id":3002}'),
        body,
      ],
      ['body changed after signing', path, headersFor(body, now), '{"deposit_id":3002}'],
      ['missing signature', path, { ...headersFor(body, now), authorization: '' }, body],
      ['no signature headers', path, { 'content-type': 'application/json' }, body],
      ['replayed: X-Date 6 minutes past', path, headersFor(body, new Date(now.getTime() - 6 * 60_000)), body],
      ['replayed: X-Date a day past', path, headersFor(body, new Date(now.getTime() - 86_400_000)), body],
      [
        'replayed: X-Date 6 minutes ahead',
        path,
        headersFor(body, new Date(now.getTime() + 6 * 60_000)),
        body,
      ],
      ['replayed: X-Date a day ahead', path, headersFor(body, new Date(now.getTime() + 86_400_000)), body],
      ['wrong X-Login', path, { ...headersFor(body, now), 'x-login': 'someone-else' }, body],
      [
        'refund, forged',
        '/webhooks/main/refunds',
        headersFor('{"refund_id":7}', now, 'nope'),
        '{"refund_id":7}',
      ],
    ];
    const cashoutForm = (control: string | null) =>
      new URLSearchParams({
        cashout_id: '501',
        external_id: 'ext-501',
        date: '2026-01-01 00:00:00',
        ...(control === null ? {} : { control }),
      }).toString();
    const formType = { 'content-type': 'application/x-www-form-urlencoded' };
    cases.push(
      [
        'cashout, forged control',
        '/webhooks/main/cashouts',
        formType,
        cashoutForm(cashoutControl('ext-501', 'nope')),
      ],
      [
        'cashout, control of another cashout',
        '/webhooks/main/cashouts',
        formType,
        cashoutForm(cashoutControl('ext-502', account.cashoutSecret)),
      ],
      ['cashout, no control', '/webhooks/main/cashouts', formType, cashoutForm(null)],
    );
    for (const [name, url, headers, payload] of cases) {
      const res = await app.inject({ method: 'POST', url, headers, payload });
      expect(res.statusCode, name).toBeGreaterThanOrEqual(400);
      expect(res.statusCode, name).toBeLessThan(500);
      expect(res.statusCode, name).toBe(401);
      figures.webhooksRefused++;
    }
    expect(await topicEnd()).toBe(before);

    // Control: correctly signed ones are accepted and published, one each.
    const ok = await app.inject({
      method: 'POST',
      url: path,
      headers: headersFor(body, new Date()),
      payload: body,
    });
    expect(ok.statusCode).toBe(200);
    const okCashout = await app.inject({
      method: 'POST',
      url: '/webhooks/main/cashouts',
      headers: formType,
      payload: cashoutForm(cashoutControl('ext-501', account.cashoutSecret)),
    });
    expect(okCashout.statusCode).toBe(200);
    expect(await topicEnd()).toBe(before + 2n);
  });
});

describe('POST /intents', () => {
  const intent = {
    operation: 'deposit',
    account: 'main',
    externalRef: 'access-1',
    entityId: '9001',
    currency: 'BRL',
    amount: '10.00',
  };
  it('refuses without its bearer token, or with a wrong one, and publishes nothing', async () => {
    const topic = 'merchant.intent.recorded.v1';
    const before = await topicEnd(topic);
    for (const authorization of [
      undefined,
      '',
      'Bearer',
      'Bearer wrong-token-of-some-length',
      `Bearer ${INTENTS_TOKEN}x`,
      `bearer ${INTENTS_TOKEN}`,
      INTENTS_TOKEN,
      `Basic ${Buffer.from(`x:${INTENTS_TOKEN}`).toString('base64')}`,
      `Bearer ${READ_TOKEN}`,
    ]) {
      const res = await app.inject({
        method: 'POST',
        url: '/intents',
        headers: {
          'content-type': 'application/json',
          ...(authorization === undefined ? {} : { authorization }),
        },
        payload: JSON.stringify(intent),
      });
      expect(res.statusCode, String(authorization)).toBe(
        authorization === `Bearer ${READ_TOKEN}` ? 403 : 401,
      );
      figures.intentsRefused++;
    }
    expect(await topicEnd(topic)).toBe(before);
    const ok = await app.inject({
      method: 'POST',
      url: '/intents',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${INTENTS_TOKEN}` },
      payload: JSON.stringify(intent),
    });
    expect(ok.statusCode, ok.body).toBeLessThan(300);
    expect(await topicEnd(topic)).toBe(before + 1n);
  });
});

describe('/api/v1 on the one server', () => {
  it('serves its OpenAPI document, refuses every operation without a token, and answers with one', async () => {
    const doc = await app.inject({ method: 'GET', url: '/api/v1/openapi.json' });
    expect(doc.statusCode).toBe(200);
    const document = JSON.parse(doc.body) as { paths: Record<string, unknown> };
    const paths = Object.keys(document.paths);
    const validator = new OpenApiValidator(document, '/api/v1');
    const apiRoutes = routes.filter(
      (r) => r.path.startsWith('/api/v1/') && r.path !== '/api/v1/openapi.json',
    );
    expect(apiRoutes.length).toBeGreaterThan(10);
    for (const r of apiRoutes) {
      const url = r.path.replace(/:(\w+)/g, (_m, name: string) => (name === 'kind' ? 'deposit' : '1'));
      const res = await app.inject({
        method: r.method as 'GET' | 'POST',
        url,
        headers: { 'content-type': 'application/json' },
        ...(r.method === 'POST' ? { payload: '{}' } : {}),
      });
      expect(res.statusCode, `${r.method} ${r.path}`).toBe(401);
      if (r.method !== 'HEAD') {
        validator.validate(r.method, url, res.statusCode, res.headers['content-type'] as string, res.body);
      }
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(paths).toContain(r.path.slice('/api/v1'.length).replace(/:(\w+)/g, '{$1}'));
      figures.requestsRefused++;
    }
    const ok = await app.inject({
      method: 'GET',
      url: '/api/v1/balances',
      headers: { authorization: `Bearer ${READ_TOKEN}` },
    });
    expect(ok.statusCode, ok.body).toBe(200);
    validator.validate(
      'GET',
      '/api/v1/balances',
      ok.statusCode,
      ok.headers['content-type'] as string,
      ok.body,
    );
    const forbidden = await app.inject({
      method: 'GET',
      url: '/api/v1/balances',
      headers: { authorization: `Bearer ${INTENTS_TOKEN}` },
    });
    expect(forbidden.statusCode).toBe(403);
    validator.validate(
      'GET',
      '/api/v1/balances',
      forbidden.statusCode,
      forbidden.headers['content-type'] as string,
      forbidden.body,
    );
  });
});
