/**
 * `/metrics` carries every account's balance: with PAYRECON_METRICS_TOKEN it answers only to the bearer
 * token, and with PAYRECON_METRICS_LISTEN only on its own listener, never on the web port the provider's
 * webhooks reach.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { type DatabaseInfrastructure, openDatabaseInfrastructure } from '../../src/infrastructure.ts';
import { logger } from '../../src/logger.ts';
import { buildServer } from '../../src/server.ts';
import { createServices } from '../../src/services.ts';
import { bearerMatches, startOpsServer } from '../../src/web/ops.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';

const TOKEN = 'metrics-token-5f0c2a9e41b7';
const PARTS = { accounts: [], page: false, webhooks: false, intents: false } as const;

let t: TestDatabase;
let dir: string;
const opened: DatabaseInfrastructure[] = [];

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (typeof address !== 'object' || !address) throw new Error('no port');
  return address.port;
}

async function serverWith(env: Record<string, string>) {
  const config = loadConfig({ DATABASE_URL: t.url, PAYRECON_DATA_DIR: dir, ...env });
  const infra = await openDatabaseInfrastructure(config, async () => ({ url: t.url, stop: async () => {} }), {
    schema: 'require',
    logger: logger.child({}, { level: 'silent' }),
  });
  opened.push(infra);
  const services = createServices(infra);
  return { app: await buildServer(infra, services, { ...PARTS, metrics: infra.metrics }), infra };
}

beforeAll(async () => {
  t = await createTestDatabase();
  dir = await mkdtemp(join(tmpdir(), 'payrecon-metrics-auth-'));
}, 120_000);

afterAll(async () => {
  for (const infra of opened) await infra.lifecycle.stopAll();
  await t?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('/metrics with PAYRECON_METRICS_TOKEN', () => {
  it('answers 401 without the token or with another, 200 with it; health stays open', async () => {
    const { app } = await serverWith({ PAYRECON_METRICS_TOKEN: TOKEN });
    try {
      const none = await app.inject({ method: 'GET', url: '/metrics' });
      expect(none.statusCode).toBe(401);
      expect(none.body).not.toContain('payrecon_');
      for (const authorization of [
        `Bearer ${TOKEN}x`,
        `Bearer ${TOKEN.slice(0, -1)}`,
        TOKEN,
        `Basic ${TOKEN}`,
      ]) {
        const wrong = await app.inject({ method: 'GET', url: '/metrics', headers: { authorization } });
        expect(wrong.statusCode, authorization).toBe(401);
      }
      const ok = await app.inject({
        method: 'GET',
        url: '/metrics',
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      expect(ok.statusCode).toBe(200);
      expect(ok.body).toContain('payrecon_');
      expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    } finally {
      await app.close();
    }
  }, 60_000);

  it('guards the health port of a part without a web server too', async () => {
    const { infra } = await serverWith({ PAYRECON_METRICS_TOKEN: TOKEN });
    const ops = await startOpsServer({
      metrics: infra.metrics,
      checks: [],
      metricsToken: infra.config.metrics.token,
      host: '127.0.0.1',
      port: 0,
    });
    try {
      expect((await fetch(`${ops.url}/metrics`)).status).toBe(401);
      const ok = await fetch(`${ops.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(ok.status).toBe(200);
      expect(await ok.text()).toContain('payrecon_');
    } finally {
      await ops.close();
    }
  }, 60_000);

  it('compares whole tokens only', () => {
    expect(bearerMatches(`Bearer ${TOKEN}`, TOKEN)).toBe(true);
    expect(bearerMatches(undefined, TOKEN)).toBe(false);
    expect(bearerMatches('Bearer ', TOKEN)).toBe(false);
    expect(bearerMatches(`bearer ${TOKEN}`, TOKEN)).toBe(false);
    expect(bearerMatches(`Bearer ${TOKEN} `, TOKEN)).toBe(false);
  });
});

describe('/metrics with PAYRECON_METRICS_LISTEN', () => {
  it('answers on its own listener and 404 on the main one; the listener closes with the server', async () => {
    const port = await freePort();
    const { app } = await serverWith({ PAYRECON_METRICS_LISTEN: `127.0.0.1:${port}` });
    const url = `http://127.0.0.1:${port}/metrics`;
    try {
      expect((await app.inject({ method: 'GET', url: '/metrics' })).statusCode).toBe(404);
      expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
      const res = await fetch(url);
      expect(res.status).toBe(200);
      expect(await res.text()).toContain('payrecon_');
      // The listener serves nothing else.
      expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(404);
    } finally {
      await app.close();
    }
    await expect(fetch(url)).rejects.toThrow();
  }, 60_000);

  it('asks the listener for the token when both are set', async () => {
    const port = await freePort();
    const { app } = await serverWith({
      PAYRECON_METRICS_LISTEN: `127.0.0.1:${port}`,
      PAYRECON_METRICS_TOKEN: TOKEN,
    });
    const url = `http://127.0.0.1:${port}/metrics`;
    try {
      expect((await app.inject({ method: 'GET', url: '/metrics' })).statusCode).toBe(404);
      expect((await fetch(url)).status).toBe(401);
      expect((await fetch(url, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(200);
    } finally {
      await app.close();
    }
  }, 60_000);

  it('refuses a value that is not host:port, naming the variable', () => {
    expect(() => loadConfig({ PAYRECON_METRICS_LISTEN: 'localhost' })).toThrow(/PAYRECON_METRICS_LISTEN/);
  });
});
