/**
 * API tokens under attack, over real HTTP against a real ledger database: a token made with
 * `payrecon api token create` while the API runs works at once; a revoked one is refused within a second;
 * an expired one is refused; the database keeps only the token's hash; a configured one still works; and
 * every route of the table refuses unknown query parameters with a 400 naming them, so `?q=` on a list
 * cannot answer the unfiltered list.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX, apiRouteTable, buildApiApp } from '../../src/api/app.ts';
import {
  type OpenDatabase,
  runApiTokenCreateCli,
  runApiTokenListCli,
  runApiTokenRevokeCli,
} from '../../src/api/cli.ts';
import { type ApiTokenEntry, createApiToken, SOURCE_CACHE_MS } from '../../src/domain/api-tokens.ts';
import { ReportRunner } from '../../src/reports/runs.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { waitFor } from '../helpers/wait.ts';

let t: TestDatabase;
let dir: string;
let runner: ReportRunner;
let app: FastifyInstance;
let base: string;
let configured: { token: string; entry: ApiTokenEntry };

const open: OpenDatabase = async () => ({ url: t.url, stop: async () => undefined });

async function create(name: string, scopes: string, extra: { expires?: string } = {}): Promise<string> {
  const lines: string[] = [];
  await runApiTokenCreateCli({ name, scopes, by: 'security-test', ...extra }, open, (l) => lines.push(l));
  const token = /: (prk_\S+)$/.exec(lines[0] ?? '')?.[1];
  if (!token) throw new Error(`no token printed: ${lines.join(' | ')}`);
  return token;
}

const get = (path: string, token: string) =>
  fetch(`${base}${API_PREFIX}${path}`, { headers: { authorization: `Bearer ${token}` } });

beforeAll(async () => {
  t = await createTestDatabase();
  dir = await mkdtemp(join(tmpdir(), 'payrecon-tokens-'));
  runner = new ReportRunner({ db: t.db, dir, timeZone: 'UTC' });
  configured = await createApiToken('configured', ['read']);
  app = await buildApiApp({ db: t.db, reports: runner, tokens: [configured.entry] });
  base = await app.listen({ host: '127.0.0.1', port: 0 });
}, 60_000);

afterAll(async () => {
  await app?.close();
  await runner?.idle();
  await t?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('API tokens kept in the database', () => {
  it('a token created while the API runs works at once, and only its hash is stored', async () => {
    const unknownYet = await get('/balances', `prk_0123456789ab_${'A'.repeat(43)}`);
    expect(unknownYet.status).toBe(401);
    const token = await create('erp', 'read');
    const res = await get('/balances', token);
    expect(res.status, await res.text()).toBe(200);
    const { rows } = await sql<{ hash: string; name: string }>`SELECT hash, name FROM api_tokens`.execute(
      t.db,
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]!.hash).toMatch(/^scrypt\$/);
    expect(JSON.stringify(rows)).not.toContain(token.slice(4));
    // The environment's token is honoured beside the database's.
    expect((await get('/balances', configured.token)).status).toBe(200);
  });

  it('a revoked token is refused within a second, and the list shows its use and its revocation', async () => {
    const token = await create('to-revoke', 'read');
    expect((await get('/balances', token)).status).toBe(200);
    const id = /^prk_([0-9a-f]{12})_/.exec(token)![1]!;
    await waitFor('its last use recorded', async () => {
      const { rows } = await sql<{ last_used_at: Date | null }>`
        SELECT last_used_at FROM api_tokens WHERE id = ${id}`.execute(t.db);
      return rows[0]?.last_used_at ? true : undefined;
    });
    const lines: string[] = [];
    await runApiTokenRevokeCli(id, open, (l) => lines.push(l));
    const revokedAt = Date.now();
    expect(lines[0]).toMatch(new RegExp(`^token ${id} revoked`));
    // Refused as soon as the cache lets go of the entry: no later than a second after the revocation.
    const refusedAt = await waitFor(
      'the revoked token refused',
      async () => ((await get('/balances', token)).status === 401 ? Date.now() : undefined),
      5_000,
    );
    expect(refusedAt - revokedAt).toBeLessThanOrEqual(SOURCE_CACHE_MS + 250);
    // And stays refused.
    expect((await get('/balances', token)).status).toBe(401);
    const listed: string[] = [];
    await runApiTokenListCli(open, (l) => listed.push(l));
    const line = listed.find((l) => l.startsWith(id)) ?? '';
    expect(line).toMatch(/ revoked \d{4}-/);
    expect(line).not.toMatch(/last used never/);
    await expect(runApiTokenRevokeCli(id, open, () => undefined)).rejects.toThrow(
      /^id: token .* revoked already/,
    );
    await expect(runApiTokenRevokeCli('nothex', open, () => undefined)).rejects.toThrow(/^id: must be/);
  });

  it('an expired token is refused', async () => {
    const token = await create('short-lived', 'read', {
      expires: new Date(Date.now() + 1_500).toISOString(),
    });
    expect((await get('/balances', token)).status).toBe(200);
    await waitFor(
      'the expired token refused',
      async () => ((await get('/balances', token)).status === 401 ? true : undefined),
      5_000,
    );
    await expect(
      runApiTokenCreateCli({ name: 'x', scopes: 'read', expires: '2001-01-01' }, open, () => undefined),
    ).rejects.toThrow(/^--expires: /);
  });
});

describe('unknown query parameters', () => {
  it('every route of the table answers 400 naming each unknown parameter', async () => {
    const token = await create(
      'everything',
      'read,exceptions:write,exceptions:approve,reports:write,intents:write,imports:write',
    );
    const routes = apiRouteTable({ db: t.db, reports: runner, tokens: [] });
    expect(routes.length).toBeGreaterThan(10);
    for (const r of routes) {
      const path = r.path.replace(/\{(\w+)\}/g, (_m, name: string) => (name === 'kind' ? 'deposit' : '1'));
      const res = await fetch(`${base}${API_PREFIX}${path}?q=anything&zz_bogus=1`, {
        method: r.method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(r.method === 'POST' ? { 'content-type': 'application/json' } : {}),
        },
        ...(r.method === 'POST' ? { body: '{}' } : {}),
      });
      const problem = (await res.json()) as { detail: string; errors?: { in: string; field: string }[] };
      expect(res.status, `${r.method} ${r.path}: ${JSON.stringify(problem)}`).toBe(400);
      const named = (problem.errors ?? []).filter((e) => e.in === 'query').map((e) => e.field);
      expect(named, `${r.method} ${r.path}`).toEqual(expect.arrayContaining(['q', 'zz_bogus']));
      expect(problem.detail).toContain('q: is not a known field');
    }
  });

  it('`/payments?q=` is refused instead of answering the newest, unrelated payments', async () => {
    const token = await create('service', 'read');
    const res = await get('/payments?q=E2E-REF-123', token);
    expect(res.status).toBe(400);
    const known = await get('/payments?limit=5', token);
    expect(known.status).toBe(200);
  });
});
