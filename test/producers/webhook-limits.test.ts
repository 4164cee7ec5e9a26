/**
 * The webhook routes' limits, on the plugin with a clock the test moves: a token bucket per sender
 * (remote address) and one overall, answered 429 with Retry-After and counted; the same notification
 * again within the dedupe window acknowledged without a second event; and an account whose signatures
 * are not enforced said once at start.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import type { ProviderAccount } from '../../src/config.ts';
import { createLogger } from '../../src/logger.ts';
import {
  FOLD_SETTLE_MS,
  type WebhookRejection,
  webhookIngressPlugin,
} from '../../src/producers/webhook-ingress.ts';
import { waitFor } from '../helpers/wait.ts';
import { quiet, sandboxAccount } from './helpers.ts';

const URLS = { url: 'http://127.0.0.1:1', ccUrl: 'http://127.0.0.1:2' };
const open: ProviderAccount = sandboxAccount(URLS, { name: 'open', webhookSignatureMode: 'off' });

let app: FastifyInstance | null = null;
afterEach(async () => {
  await app?.close();
  app = null;
});

async function start(limits: { perSenderPerSecond: number; totalPerSecond: number; dedupeSeconds: number }) {
  let t = 1_000_000;
  const published: unknown[] = [];
  const rejected: WebhookRejection[] = [];
  const folded: string[] = [];
  app = Fastify({ logger: false });
  await app.register(
    webhookIngressPlugin({
      accounts: [open],
      publisher: { publish: async (_topic, messages) => void published.push(...messages) },
      logger: quiet,
      limits,
      clock: () => t,
      onRejected: (r) => rejected.push(r),
      onFolded: (k) => folded.push(k),
    }),
  );
  const server = app;
  const send = (id: number, sender = '10.0.0.1') =>
    server.inject({
      method: 'POST',
      url: '/webhooks/open/deposits',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ deposit_id: id }),
      remoteAddress: sender,
    });
  return { send, published, rejected, folded, advance: (ms: number) => (t += ms) };
}

describe('webhook limits', () => {
  it('refuse a sender over its rate with 429 and Retry-After, others keep their share until the overall rate', async () => {
    const w = await start({ perSenderPerSecond: 5, totalPerSecond: 8, dedupeSeconds: 60 });
    for (let i = 0; i < 10; i++) expect((await w.send(100 + i)).statusCode).toBe(200);
    const over = await w.send(200);
    expect(over.statusCode).toBe(429);
    expect(over.headers['retry-after']).toBe('1');
    expect(over.json()).toMatchObject({ error: 'rate_limited', field: 'sender' });
    // Another sender: its own bucket, until the overall one (16) is spent.
    for (let i = 0; i < 6; i++) expect((await w.send(300 + i, '10.0.0.2')).statusCode).toBe(200);
    expect((await w.send(400, '10.0.0.2')).statusCode).toBe(429);
    expect(w.published).toHaveLength(16);
    expect(w.rejected).toEqual(['rate_limited', 'rate_limited']);
    // A second later the first sender has five more.
    w.advance(1_000);
    for (let i = 0; i < 5; i++) expect((await w.send(500 + i)).statusCode).toBe(200);
    expect((await w.send(600)).statusCode).toBe(429);
  });

  it('fold the same notification within the window into one event, and publish it again after', async () => {
    const w = await start({ perSenderPerSecond: 100, totalPerSecond: 100, dedupeSeconds: 60 });
    const first = await w.send(42);
    const again = await w.send(42);
    expect(first.json()).toMatchObject({ received: true });
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual({ received: true, duplicate: true });
    expect(w.published).toHaveLength(1);
    expect(w.folded).toEqual(['deposit']);
    expect((await w.send(43)).statusCode).toBe(200);
    expect(w.published).toHaveLength(2);
    w.advance(60_001);
    expect((await w.send(42)).json()).toMatchObject({ received: true, notification_id: expect.any(String) });
    expect(w.published).toHaveLength(3);
  });

  it('a duplicate within the settle time makes one trailing event; a later one (a replay) none', async () => {
    const w = await start({ perSenderPerSecond: 100, totalPerSecond: 100, dedupeSeconds: 60 });
    // 77: replayed after the settle time: folded into nothing.
    expect((await w.send(77)).statusCode).toBe(200);
    w.advance(FOLD_SETTLE_MS + 1);
    for (let i = 0; i < 5; i++) expect((await w.send(77)).json()).toMatchObject({ duplicate: true });
    // 78: the same bytes again at once, as two changes in one second are notified: one more event.
    expect((await w.send(78)).statusCode).toBe(200);
    for (let i = 0; i < 5; i++) expect((await w.send(78)).json()).toMatchObject({ duplicate: true });
    expect(w.published).toHaveLength(2);
    await waitFor('the trailing event', () => w.published.length === 3);
    const ids = w.published.map((m) => (m as { value: { entityId: string } }).value.entityId);
    expect(ids).toEqual(['77', '78', '78']);
  });

  it('say once at start which accounts do not enforce signatures', async () => {
    const lines: string[] = [];
    const logger = createLogger({ level: 'warn' }, { write: (l: string) => void lines.push(l) });
    const warn = sandboxAccount(URLS, { name: 'lenient', webhookSignatureMode: 'warn' });
    const enforce = sandboxAccount(URLS, { name: 'main' });
    app = Fastify({ logger: false });
    await app.register(
      webhookIngressPlugin({
        accounts: [enforce, warn, open],
        publisher: { publish: async () => undefined },
        logger,
      }),
    );
    await app.ready();
    const said = lines.filter((l) => l.includes('not enforced'));
    expect(said).toHaveLength(1);
    expect(said[0]).toContain('lenient=warn');
    expect(said[0]).toContain('open=off');
    expect(said[0]).not.toContain('main=');
  });
});
