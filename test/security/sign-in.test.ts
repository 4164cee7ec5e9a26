/**
 * The page's sign-in under attack, over real HTTP against the one server (`buildServer`) on a real
 * database: password guessing is answered 429 within ten tries, per user name and per address, while
 * another user signs in and reads pages; a signed-out cookie stays refused after a restart and on another
 * instance; a removed user's cookie and a session whose password changed are refused; cookies are Secure
 * exactly when the public URL is https; and the name typed in a failed sign-in reaches neither the log
 * nor the database.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { type DatabaseInfrastructure, openDatabaseInfrastructure } from '../../src/infrastructure.ts';
import { createLogger } from '../../src/logger.ts';
import { buildServer } from '../../src/server.ts';
import { createServices } from '../../src/services.ts';
import { hashPassword } from '../../src/web/auth.ts';
import { SESSION_CACHE_MS } from '../../src/web/sessions.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { waitFor } from '../helpers/wait.ts';

const PASSWORDS = { ana: 'ana pass phrase 1', bob: 'bob pass phrase 2', carl: 'carl pass phrase 3' };
type Name = keyof typeof PASSWORDS;
const ATTACKER = '127.0.0.2';
/** What an attacker (or a user who mistook the field) types as a user name: it must never be logged. */
const TYPED_NAMES = ['Tr0ub4dor&3-typed-in-the-name', 'mallory-typed-name'];

let t: TestDatabase;
let dir: string;
let hashes: Record<Name, string>;
const opened: DatabaseInfrastructure[] = [];
const running: FastifyInstance[] = [];
const logLines: string[] = [];

function usersJson(names: readonly Name[], override: Partial<Record<Name, string>> = {}): string {
  return JSON.stringify(names.map((n) => ({ username: n, passwordHash: override[n] ?? hashes[n] })));
}

/** The one server with the page, as `payrecon web` builds it, listening on 127.0.0.1. */
async function startServer(
  env: Record<string, string>,
  sandboxUsers = false,
): Promise<{ app: FastifyInstance; base: string }> {
  const config = loadConfig({ DATABASE_URL: t.url, PAYRECON_DATA_DIR: dir, ...env });
  const stream = new Writable({
    write(chunk, _enc, done) {
      logLines.push(String(chunk));
      done();
    },
  });
  const infra = await openDatabaseInfrastructure(config, async () => ({ url: t.url, stop: async () => {} }), {
    schema: 'require',
    logger: createLogger({ level: 'info' }, stream),
  });
  opened.push(infra);
  const app = await buildServer(infra, createServices(infra), {
    accounts: [],
    page: true,
    webhooks: false,
    intents: false,
    metrics: infra.metrics,
    sandboxUsers,
  });
  running.push(app);
  return { app, base: await app.listen({ host: '127.0.0.1', port: 0 }) };
}

async function stopServer(app: FastifyInstance): Promise<void> {
  await app.close();
  running.splice(running.indexOf(app), 1);
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  setCookies: string[];
}

/** One HTTP request from a chosen local address (127.0.0.x are all loopback), so addresses differ. */
function send(
  base: string,
  method: 'GET' | 'POST',
  path: string,
  options: { cookie?: string; form?: Record<string, string>; from?: string; accept?: string } = {},
): Promise<Answer> {
  const url = new URL(path, base);
  const body = options.form ? new URLSearchParams(options.form).toString() : undefined;
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname + url.search,
        method,
        localAddress: options.from ?? '127.0.0.1',
        headers: {
          accept: options.accept ?? 'text/html',
          ...(options.cookie ? { cookie: options.cookie } : {}),
          ...(body !== undefined
            ? {
                'content-type': 'application/x-www-form-urlencoded',
                'content-length': Buffer.byteLength(body),
              }
            : {}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const raw = res.headers['set-cookie'];
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString('utf8'),
            setCookies: raw ?? [],
          });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** A browser's cookie jar, enough for the page: name=value pairs, emptied values dropped. */
class Jar {
  readonly cookies = new Map<string, string>();
  take(answer: Answer): Answer {
    for (const line of answer.setCookies) {
      const [pair = ''] = line.split(';');
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq);
      const value = pair.slice(eq + 1);
      if (value === '' || /expires=Thu, 01 Jan 1970/i.test(line)) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return answer;
  }
  get header(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }
}

const csrfOf = (body: string): string => /name="_csrf" value="([^"]+)"/.exec(body)?.[1] ?? '';

/** Opens the sign-in form and posts it; answers the jar and the sign-in's answer. */
async function trySignIn(
  base: string,
  username: string,
  password: string,
  from = '127.0.0.1',
): Promise<{ jar: Jar; answer: Answer }> {
  const jar = new Jar();
  const form = jar.take(await send(base, 'GET', '/login', { from }));
  const answer = jar.take(
    await send(base, 'POST', '/login', {
      from,
      cookie: jar.header,
      form: { _csrf: csrfOf(form.body), username, password },
    }),
  );
  return { jar, answer };
}

async function signIn(base: string, name: Name): Promise<Jar> {
  const { jar, answer } = await trySignIn(base, name, PASSWORDS[name]);
  expect(answer.status, answer.body).toBe(303);
  expect(jar.cookies.has('payrecon_session')).toBe(true);
  return jar;
}

const balances = (base: string, jar: Jar) =>
  send(base, 'GET', '/balances', { cookie: jar.header, accept: '*/*' }).then((a) => a.status);

async function signOut(base: string, jar: Jar): Promise<void> {
  const page = await send(base, 'GET', '/balances', { cookie: jar.header });
  const before = jar.header;
  const out = jar.take(
    await send(base, 'POST', '/logout', { cookie: jar.header, form: { _csrf: csrfOf(page.body) } }),
  );
  expect(out.status).toBe(303);
  expect(jar.cookies.has('payrecon_session')).toBe(false);
  // The browser forgot the cookie; an attacker who copied it keeps it: `before` is what the tests replay.
  jar.cookies.clear();
  for (const pair of before.split('; ')) {
    const eq = pair.indexOf('=');
    jar.cookies.set(pair.slice(0, eq), pair.slice(eq + 1));
  }
}

async function endedReason(jar: Jar): Promise<string | null | undefined> {
  const value = jar.cookies.get('payrecon_session') ?? '';
  const token = decodeURIComponent(value).slice(0, decodeURIComponent(value).lastIndexOf('.'));
  const id = createHash('sha256').update(token).digest('hex');
  const { rows } = await sql<{ ended_reason: string | null }>`
    SELECT ended_reason FROM web_sessions WHERE id = ${id}`.execute(t.db);
  return rows[0] ? rows[0].ended_reason : undefined;
}

beforeAll(async () => {
  t = await createTestDatabase();
  dir = await mkdtemp(join(tmpdir(), 'payrecon-sign-in-'));
  hashes = {
    ana: await hashPassword(PASSWORDS.ana),
    bob: await hashPassword(PASSWORDS.bob),
    carl: await hashPassword(PASSWORDS.carl),
  };
}, 120_000);

afterAll(async () => {
  for (const app of [...running]) await app.close();
  for (const infra of opened) await infra.lifecycle.stopAll();
  await t?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('password guessing', () => {
  it('is answered 429 within ten tries, per user name, while another user signs in and reads pages', async () => {
    const { base, app } = await startServer({ PAYRECON_WEB_USERS: usersJson(['ana', 'bob']) });
    try {
      const statuses: number[] = [];
      let retryAfter: string | undefined;
      for (let i = 0; i < 10; i += 1) {
        const { answer } = await trySignIn(base, 'ana', `guess ${i}`, ATTACKER);
        statuses.push(answer.status);
        if (answer.status === 429) {
          retryAfter ??= String(answer.headers['retry-after']);
          expect(answer.body).toContain('Too many failed sign-ins');
        }
      }
      // Five failures (the default), then refused without checking the password.
      expect(statuses).toEqual([401, 401, 401, 401, 401, 429, 429, 429, 429, 429]);
      expect(Number(retryAfter)).toBeGreaterThan(0);
      expect(Number(retryAfter)).toBeLessThanOrEqual(900);
      // Even the right password waits out the window: the name is locked, whoever types it.
      expect((await trySignIn(base, 'ana', PASSWORDS.ana, ATTACKER)).answer.status).toBe(429);

      // Meanwhile another user signs in and reads pages, from another address and from the attacker's.
      const bob = await signIn(base, 'bob');
      expect(await balances(base, bob)).toBe(200);
      expect((await send(base, 'GET', '/exceptions', { cookie: bob.header })).status).toBe(200);
      expect((await trySignIn(base, 'bob', PASSWORDS.bob, ATTACKER)).answer.status).toBe(303);
    } finally {
      await stopServer(app);
    }
  }, 60_000);

  it('counts parallel guesses against each other: at most the limit reach the password check', async () => {
    const { base, app } = await startServer({
      PAYRECON_WEB_USERS: usersJson(['ana', 'bob', 'carl']),
      PAYRECON_WEB_SIGN_IN_FAILURES_PER_ADDRESS: '100',
    });
    try {
      const answers = await Promise.all(
        // A name of its own (unknown names are counted alike), so the lockout stays in this test.
        Array.from({ length: 20 }, (_, i) => trySignIn(base, 'dora', `parallel guess ${i}`, '127.0.0.4')),
      );
      const statuses = answers.map((a) => a.answer.status);
      // 503 is the password checks' queue being full: also refused before scrypt.
      expect(statuses.every((s) => s === 401 || s === 429 || s === 503)).toBe(true);
      expect(statuses.filter((s) => s === 401).length).toBeLessThanOrEqual(5);
      expect(statuses.filter((s) => s !== 401).length).toBeGreaterThanOrEqual(15);
      expect(await balances(base, await signIn(base, 'bob'))).toBe(200);
    } finally {
      await stopServer(app);
    }
  }, 60_000);

  it('is answered 429 per address too, whatever names are tried, and the typed names are never logged', async () => {
    const { base, app } = await startServer({
      PAYRECON_WEB_USERS: usersJson(['ana', 'bob']),
      PAYRECON_WEB_SIGN_IN_FAILURES_PER_ADDRESS: '4',
    });
    const from = '127.0.0.3';
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 6; i += 1) {
        const name = i < TYPED_NAMES.length ? TYPED_NAMES[i]! : `name-${i}-typed`;
        statuses.push((await trySignIn(base, name, 'whatever', from)).answer.status);
      }
      expect(statuses).toEqual([401, 401, 401, 401, 429, 429]);
      // Another address is served, and bob signs in there.
      const bob = await signIn(base, 'bob');
      expect(await balances(base, bob)).toBe(200);

      const log = logLines.join('');
      expect(log).toContain('web sign-in refused');
      expect(log).toContain(from);
      for (const typed of [...TYPED_NAMES, 'name-2-typed', 'name-5-typed']) expect(log).not.toContain(typed);
      // Nor the guessed passwords, nor anything typed, in the database: only HMACs.
      const { rows } = await sql<{ subject: string }>`SELECT subject FROM web_sign_in_failures`.execute(t.db);
      expect(rows.length).toBeGreaterThan(0);
      for (const r of rows) expect(r.subject).toMatch(/^(user|address):[0-9a-f]{64}$/);
    } finally {
      await stopServer(app);
    }
  }, 60_000);
});

describe('sessions kept server side', () => {
  it('refuses a signed-out cookie after a restart, and on another instance within a second', async () => {
    const env = { PAYRECON_WEB_USERS: usersJson(['ana', 'bob', 'carl']) };
    const first = await startServer(env);
    const kept = await signIn(first.base, 'bob');
    const out = await signIn(first.base, 'bob');
    await signOut(first.base, out);
    expect(await balances(first.base, out)).toBe(401);
    expect(await endedReason(out)).toBe('signed-out');
    await stopServer(first.app);

    const second = await startServer(env);
    try {
      expect(await balances(second.base, out)).toBe(401);
      // A session that was not signed out survives the restart.
      expect(await balances(second.base, kept)).toBe(200);

      // Two instances on one database: a sign-out on one counts on the other within a second.
      const other = await startServer(env);
      try {
        const both = await signIn(second.base, 'carl');
        expect(await balances(other.base, both)).toBe(200);
        await signOut(second.base, both);
        const at = Date.now();
        const refusedAt = await waitFor(
          'the signed-out cookie refused by the other instance',
          async () => ((await balances(other.base, both)) === 401 ? Date.now() : undefined),
          5_000,
        );
        expect(refusedAt - at).toBeLessThanOrEqual(SESSION_CACHE_MS + 500);
        expect(await balances(second.base, both)).toBe(401);
      } finally {
        await stopServer(other.app);
      }
    } finally {
      await stopServer(second.app);
    }
    // Only the token's hash is stored: no row holds the cookie's token.
    const token = decodeURIComponent(kept.cookies.get('payrecon_session') ?? '').split('.')[0] ?? '';
    expect(token.length).toBeGreaterThan(40);
    const { rows } = await sql<{
      row: string;
    }>`SELECT row_to_json(s)::text AS row FROM web_sessions s`.execute(t.db);
    for (const r of rows) expect(r.row).not.toContain(token);
  }, 60_000);

  it("refuses a removed user's cookie after a restart without the user", async () => {
    const first = await startServer({ PAYRECON_WEB_USERS: usersJson(['ana', 'bob', 'carl']) });
    const carl = await signIn(first.base, 'carl');
    const bob = await signIn(first.base, 'bob');
    expect(await balances(first.base, carl)).toBe(200);
    await stopServer(first.app);

    const second = await startServer({ PAYRECON_WEB_USERS: usersJson(['ana', 'bob']) });
    try {
      expect(await balances(second.base, carl)).toBe(401);
      expect(await endedReason(carl)).toBe('user-removed');
      expect(await balances(second.base, bob)).toBe(200);
    } finally {
      await stopServer(second.app);
    }
    // Configured again, the user's old session stays ended.
    const third = await startServer({ PAYRECON_WEB_USERS: usersJson(['ana', 'bob', 'carl']) });
    try {
      expect(await balances(third.base, carl)).toBe(401);
    } finally {
      await stopServer(third.app);
    }
  }, 60_000);

  it('ends the sessions of a user whose password changed', async () => {
    const first = await startServer({ PAYRECON_WEB_USERS: usersJson(['ana', 'bob']) });
    const bob = await signIn(first.base, 'bob');
    expect(await balances(first.base, bob)).toBe(200);
    await stopServer(first.app);

    const changed = await hashPassword('bob has a new pass phrase');
    const second = await startServer({ PAYRECON_WEB_USERS: usersJson(['ana', 'bob'], { bob: changed }) });
    try {
      expect(await balances(second.base, bob)).toBe(401);
      expect(await endedReason(bob)).toBe('password-changed');
      const { answer } = await trySignIn(second.base, 'bob', 'bob has a new pass phrase');
      expect(answer.status).toBe(303);
    } finally {
      await stopServer(second.app);
    }
  }, 60_000);
});

describe('the sandbox users', () => {
  it('keep their sessions across a restart (their hashes come out the same)', async () => {
    const first = await startServer({}, true);
    const { jar, answer } = await trySignIn(first.base, 'finance', 'sandbox');
    expect(answer.status).toBe(303);
    expect(await balances(first.base, jar)).toBe(200);
    await stopServer(first.app);
    const second = await startServer({}, true);
    try {
      expect(await balances(second.base, jar)).toBe(200);
      expect(await endedReason(jar)).toBeNull();
    } finally {
      await stopServer(second.app);
    }
  }, 60_000);
});

describe('cookie flags', () => {
  async function cookiesWith(env: Record<string, string>): Promise<string[]> {
    const { base, app } = await startServer({ PAYRECON_WEB_USERS: usersJson(['ana', 'bob']), ...env });
    try {
      const { jar, answer } = await trySignIn(base, 'bob', PASSWORDS.bob);
      expect(answer.status).toBe(303);
      const form = await send(base, 'GET', '/login');
      const lines = [...form.setCookies, ...answer.setCookies];
      expect(lines.some((l) => l.startsWith('payrecon_session='))).toBe(true);
      expect(lines.some((l) => l.startsWith('payrecon_prelogin='))).toBe(true);
      expect(jar.cookies.has('payrecon_session')).toBe(true);
      return lines;
    } finally {
      await stopServer(app);
    }
  }

  it('are Secure behind an https public URL, and not otherwise; always HttpOnly and SameSite=Lax', async () => {
    for (const line of await cookiesWith({ PAYRECON_PUBLIC_URL: 'https://recon.example.com/' })) {
      expect(line).toMatch(/; Secure/);
      expect(line).toMatch(/; HttpOnly/);
      expect(line).toMatch(/; SameSite=Lax/);
    }
    for (const env of [{ PAYRECON_PUBLIC_URL: 'http://127.0.0.1:8080/' }, {}] as Record<string, string>[]) {
      for (const line of await cookiesWith(env)) {
        expect(line).not.toMatch(/Secure/);
        expect(line).toMatch(/; HttpOnly/);
        expect(line).toMatch(/; SameSite=Lax/);
      }
    }
  }, 60_000);
});

describe('the back-off settings', () => {
  it('refuse a value out of range, naming the variable and the rule', () => {
    expect(() => loadConfig({ PAYRECON_WEB_SIGN_IN_FAILURES_PER_USER: '0' })).toThrow(
      /PAYRECON_WEB_SIGN_IN_FAILURES_PER_USER.*integer from 1 to 1000/,
    );
    expect(() => loadConfig({ PAYRECON_WEB_SIGN_IN_WINDOW_SECONDS: 'soon' })).toThrow(
      /PAYRECON_WEB_SIGN_IN_WINDOW_SECONDS/,
    );
    expect(loadConfig({}).web.signIn).toEqual({ perUser: 5, perAddress: 20, windowMs: 900_000 });
  });
});
