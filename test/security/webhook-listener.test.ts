/**
 * PAYRECON_WEBHOOK_LISTEN: the provider-facing webhook routes on a listener of their own (the real
 * server, the embedded broker and registry, the machine's PostgreSQL). There a signed notification is
 * taken and published, and nothing else answers (page, API, intents, health, metrics: 404); the web
 * listener no longer serves the webhook routes (404) and keeps everything else. Unset: the routes are
 * on the web listener, as before.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { NOTIFICATION_TOPIC } from '../../src/events/topics.ts';
import { type Infrastructure, startInfrastructure } from '../../src/infrastructure.ts';
import { depositAuthorization, formatXDate } from '../../src/provider/signing.ts';
import { buildServer, webhooksBaseUrl } from '../../src/server.ts';
import { createServices } from '../../src/services.ts';
import { hashPassword } from '../../src/web/auth.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { TEST_EMBEDDED } from '../pipeline/helpers.ts';
import { sandboxAccount } from '../producers/helpers.ts';

const account = sandboxAccount(
  { url: 'http://127.0.0.1:1', ccUrl: 'http://127.0.0.1:2' },
  { name: 'main', webhookSignatureMode: 'enforce' },
);

let tdb: TestDatabase;
let dir: string;
const started: Array<{ app: FastifyInstance; infra: Infrastructure }> = [];

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (typeof address !== 'object' || !address) throw new Error('no port');
  return address.port;
}

/** The server as `up` builds it (page, webhooks, intents), listening on a free port. */
async function serve(env: Record<string, string>, name: string) {
  const config = loadConfig({
    DATABASE_URL: tdb.url,
    PAYRECON_DATA_DIR: join(dir, name),
    PAYRECON_WEB_PORT: '0',
    LOG_LEVEL: 'silent',
    PAYRECON_SESSION_SECRET: 'webhook-listener-session-secret-0123456789',
    PAYRECON_WEB_USERS: JSON.stringify([
      { username: 'finance', passwordHash: await hashPassword('pass phrase'), role: 'operator' },
    ]),
    ...env,
  });
  const infra = await startInfrastructure(config, TEST_EMBEDDED);
  const app = await buildServer(infra, createServices(infra), {
    accounts: [account],
    metrics: infra.metrics,
    page: true,
    webhooks: true,
    intents: true,
  });
  started.push({ app, infra });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  return { app, infra, url, webhooks: webhooksBaseUrl(app, url) };
}

function signedDeposit(id: number): RequestInit {
  const body = JSON.stringify({ deposit_id: id });
  const xDate = formatXDate(new Date());
  return {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-date': xDate,
      'x-login': account.depositLogin,
      authorization: depositAuthorization({
        xDate,
        xLogin: account.depositLogin,
        body,
        secret: account.depositSecret,
      }),
    },
    body,
  };
}

async function topicEnd(infra: Infrastructure): Promise<number> {
  const offsets = await infra.admin.fetchTopicOffsets(NOTIFICATION_TOPIC);
  return offsets.reduce((n, p) => n + Number(p.high), 0);
}

beforeAll(async () => {
  tdb = await createTestDatabase();
  dir = mkdtempSync(join(tmpdir(), 'payrecon-webhook-listener-'));
}, 60_000);

afterAll(async () => {
  for (const { app, infra } of started) {
    await app.close();
    await infra.lifecycle.stopAll();
  }
  await tdb?.drop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('PAYRECON_WEBHOOK_LISTEN', () => {
  it('serves the webhook routes there alone; the web listener answers 404 for them', async () => {
    const port = await freePort();
    const s = await serve({ PAYRECON_WEBHOOK_LISTEN: `127.0.0.1:${port}` }, 'separate');
    expect(s.webhooks).toBe(`http://127.0.0.1:${port}`);
    expect(s.webhooks).not.toBe(s.url);

    const before = await topicEnd(s.infra);
    const taken = await fetch(`${s.webhooks}/webhooks/main/deposits`, signedDeposit(7_000_001));
    expect(taken.status).toBe(200);
    expect(await topicEnd(s.infra)).toBe(before + 1);
    // Unsigned: the route's own refusal, not a missing route.
    const unsigned = await fetch(`${s.webhooks}/webhooks/main/deposits`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"deposit_id":7000002}',
    });
    expect(unsigned.status).toBe(401);

    // Nothing else on the webhook listener.
    for (const path of [
      '/',
      '/login',
      '/static/style.css',
      '/api/v1/payments',
      '/healthz',
      '/readyz',
      '/metrics',
    ]) {
      expect((await fetch(`${s.webhooks}${path}`)).status, path).toBe(404);
    }
    expect((await fetch(`${s.webhooks}/intents`, { method: 'POST', body: '{}' })).status).toBe(404);

    // The web listener: no webhook route (whatever the page's own checks on a POST), the rest as before.
    for (const kind of ['deposits', 'refunds', 'cashouts']) {
      const res = await fetch(`${s.url}/webhooks/main/${kind}`, signedDeposit(7_000_003));
      expect(res.status, kind).toBe(404);
    }
    expect((await fetch(`${s.url}/webhooks/deposits`, signedDeposit(7_000_004))).status).toBe(404);
    expect(await topicEnd(s.infra)).toBe(before + 1);
    expect((await fetch(`${s.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${s.url}/login`)).status).toBe(200);
    expect((await fetch(`${s.url}/api/v1/payments`)).status).toBe(401);

    // Closing the server closes the webhook listener.
    await s.app.close();
    await expect(fetch(`${s.webhooks}/webhooks/main/deposits`, signedDeposit(7_000_005))).rejects.toThrow();
  }, 120_000);

  it('unset: the webhook routes are on the web listener', async () => {
    const s = await serve({}, 'together');
    expect(s.webhooks).toBe(s.url);
    const before = await topicEnd(s.infra);
    expect((await fetch(`${s.url}/webhooks/main/deposits`, signedDeposit(7_000_011))).status).toBe(200);
    expect(await topicEnd(s.infra)).toBe(before + 1);
  }, 120_000);

  it('refuses a value that is not host:port, naming the variable', () => {
    expect(() => loadConfig({ PAYRECON_WEBHOOK_LISTEN: '8443' })).toThrow(/PAYRECON_WEBHOOK_LISTEN/);
  });
});
