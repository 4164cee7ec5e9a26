import Fastify, { type FastifyInstance } from 'fastify';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProviderAccount } from '../../src/config.ts';
import type { NotificationReceived } from '../../src/events/payloads.ts';
import { type WebhookRejection, webhookIngressPlugin } from '../../src/producers/webhook-ingress.ts';
import { cashoutControl, depositAuthorization, formatXDate } from '../../src/provider/signing.ts';
import { type Collector, collect, type Infra, quiet, sandboxAccount, startInfra } from './helpers.ts';

const URLS = { url: 'http://127.0.0.1:1', ccUrl: 'http://127.0.0.1:2' };
const enforce: ProviderAccount = sandboxAccount(URLS, { name: 'main', webhookSignatureMode: 'enforce' });
const warn: ProviderAccount = sandboxAccount(URLS, { name: 'lenient', webhookSignatureMode: 'warn' });
const off: ProviderAccount = sandboxAccount(URLS, { name: 'open', webhookSignatureMode: 'off' });

let infra: Infra;
let app: FastifyInstance;
let base: string;
let published: Collector<NotificationReceived>;
const rejections: WebhookRejection[] = [];
let accepted = 0;

beforeAll(async () => {
  infra = await startInfra();
  app = Fastify({ logger: false, forceCloseConnections: true });
  await app.register(
    webhookIngressPlugin({
      accounts: [enforce, warn, off],
      publisher: infra.publisher,
      defaultAccount: 'main',
      bodyLimit: 4096,
      logger: quiet,
      onRejected: (r) => rejections.push(r),
      onAccepted: () => {
        accepted++;
      },
    }),
  );
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no address');
  base = `http://127.0.0.1:${address.port}`;
  published = await collect(infra, 'provider.notification.received.v1');
}, 60_000);

afterAll(async () => {
  await published?.stop();
  await app?.close();
  await infra?.close();
});

function signed(body: string, account = enforce, at = new Date()) {
  const xDate = formatXDate(at);
  return {
    'content-type': 'application/json',
    'x-date': xDate,
    'x-login': account.depositLogin,
    authorization: depositAuthorization({
      xDate,
      xLogin: account.depositLogin,
      body,
      secret: account.depositSecret,
    }),
  };
}

function cashoutForm(externalId: string, cashoutId: string, control: string | null): string {
  const form = new URLSearchParams({
    date: '2026-11-21 10:00:00',
    bank_reference_id: 'E2E-123',
    comments: '',
    external_id: externalId,
    cashout_id: cashoutId,
    status_reason: '',
  });
  if (control !== null) form.set('control', control);
  return form.toString();
}

async function post(path: string, body: string | Buffer, headers: Record<string, string>) {
  const res = await request(`${base}${path}`, { method: 'POST', body, headers });
  const text = await res.body.text();
  return { status: res.statusCode, json: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

function lastWith(entityId: string): NotificationReceived | undefined {
  return published.values.findLast((v) => v.entityId === entityId);
}

describe('webhook ingress accepts each notification kind and publishes it once', () => {
  it('deposit JSON, signed: 200 after the event is on the topic, verified, no signature in it', async () => {
    const before = published.values.length;
    const body = '{"deposit_id": 3000000001}';
    const res = await post('/webhooks/main/deposits', body, signed(body));
    expect(res.status).toBe(200);
    expect(res.json.received).toBe(true);
    await published.waitFor(before + 1);
    const event = lastWith('3000000001')!;
    expect(event).toMatchObject({
      kind: 'deposit',
      account: 'main',
      authenticity: 'verified',
      externalId: null,
    });
    expect(event.notificationId).toBe(res.json.notification_id);
    expect(event.bodySha256).toMatch(/^[0-9a-f]{64}$/);
    const text = JSON.stringify(event);
    expect(text).not.toContain('D24');
    expect(text).not.toContain(enforce.depositSecret);
  });

  it('refund JSON: 200, kind refund', async () => {
    const before = published.values.length;
    const body = '{"refund_id":168284}';
    const res = await post('/webhooks/main/refunds', body, signed(body));
    expect(res.status).toBe(200);
    await published.waitFor(before + 1);
    expect(lastWith('168284')).toMatchObject({ kind: 'refund', authenticity: 'verified' });
  });

  it('a refund sent to the deposits URL is recognised by its body', async () => {
    const before = published.values.length;
    const body = '{"refund_id":168285}';
    expect((await post('/webhooks/main/deposits', body, signed(body))).status).toBe(200);
    await published.waitFor(before + 1);
    expect(lastWith('168285')?.kind).toBe('refund');
  });

  it('deposit form-encoded is accepted too', async () => {
    const before = published.values.length;
    const body = 'deposit_id=3000000002';
    const res = await post('/webhooks/main/deposits', body, {
      ...signed(body),
      'content-type': 'application/x-www-form-urlencoded',
    });
    expect(res.status).toBe(200);
    await published.waitFor(before + 1);
    expect(lastWith('3000000002')?.kind).toBe('deposit');
  });

  it('cashout form with a valid control: 200, external id and date kept, control left out', async () => {
    const before = published.values.length;
    const control = cashoutControl('ext-42', enforce.cashoutSecret);
    const res = await post('/webhooks/main/cashouts', cashoutForm('ext-42', '8405147', control), {
      'content-type': 'application/x-www-form-urlencoded',
    });
    expect(res.status).toBe(200);
    await published.waitFor(before + 1);
    const event = lastWith('8405147')!;
    expect(event).toMatchObject({ kind: 'cashout', externalId: 'ext-42', authenticity: 'verified' });
    expect(event.notificationDate?.toISOString()).toBe('2026-11-21T10:00:00.000Z');
    expect(event.fields).toEqual({ date: '2026-11-21 10:00:00', bank_reference_id: 'E2E-123' });
    expect(JSON.stringify(event)).not.toContain(control);
  });

  it('the default account route /webhooks/cashouts and the any-kind route /webhooks/:account', async () => {
    const before = published.values.length;
    const control = cashoutControl('ext-43', enforce.cashoutSecret);
    const a = await post('/webhooks/cashouts', cashoutForm('ext-43', '8405148', control), {
      'content-type': 'application/x-www-form-urlencoded',
    });
    expect(a.status).toBe(200);
    const body = '{"deposit_id":3000000003}';
    const b = await post('/webhooks/main', body, signed(body));
    expect(b.status).toBe(200);
    await published.waitFor(before + 2);
    expect(lastWith('8405148')?.account).toBe('main');
    expect(lastWith('3000000003')?.kind).toBe('deposit');
  });

  it('warn mode accepts a bad signature as failed; off mode does not check', async () => {
    const before = published.values.length;
    const body = '{"deposit_id":3000000004}';
    const headers = { ...signed(body, warn), authorization: `D24 ${'0'.repeat(64)}` };
    expect((await post('/webhooks/lenient/deposits', body, headers)).status).toBe(200);
    const open = '{"deposit_id":3000000005}';
    expect((await post('/webhooks/open/deposits', open, { 'content-type': 'application/json' })).status).toBe(
      200,
    );
    await published.waitFor(before + 2);
    expect(lastWith('3000000004')?.authenticity).toBe('failed');
    expect(lastWith('3000000005')?.authenticity).toBe('unchecked');
  });
});

describe('webhook ingress turns away bad input with 4xx and publishes nothing', () => {
  const json = { 'content-type': 'application/json' };
  const cases: {
    name: string;
    path: string;
    body: () => string | Buffer;
    headers: (body: string | Buffer) => Record<string, string>;
    status: number;
    reason: WebhookRejection;
    field: string;
  }[] = [
    {
      name: 'invalid JSON',
      path: '/webhooks/main/deposits',
      body: () => '{"deposit_id": ',
      headers: (b) => signed(String(b)),
      status: 400,
      reason: 'malformed',
      field: 'body',
    },
    {
      name: 'deposit_id missing',
      path: '/webhooks/main/deposits',
      body: () => '{"id": 5}',
      headers: (b) => signed(String(b)),
      status: 400,
      reason: 'malformed',
      field: 'deposit_id',
    },
    {
      name: 'deposit_id not a positive integer',
      path: '/webhooks/main/deposits',
      body: () => '{"deposit_id": -4}',
      headers: (b) => signed(String(b)),
      status: 400,
      reason: 'malformed',
      field: 'deposit_id',
    },
    {
      name: 'cashout without external_id',
      path: '/webhooks/main/cashouts',
      body: () => 'cashout_id=5&control=' + 'A'.repeat(64),
      headers: () => ({ 'content-type': 'application/x-www-form-urlencoded' }),
      status: 400,
      reason: 'malformed',
      field: 'external_id',
    },
    {
      name: 'body over the limit',
      path: '/webhooks/main/deposits',
      body: () => `{"deposit_id": 1, "pad": "${'x'.repeat(5000)}"}`,
      headers: (b) => signed(String(b)),
      status: 413,
      reason: 'too_large',
      field: 'body',
    },
    {
      name: 'text/plain',
      path: '/webhooks/main/deposits',
      body: () => '{"deposit_id":1}',
      headers: (b) => ({ ...signed(String(b)), 'content-type': 'text/plain' }),
      status: 415,
      reason: 'unsupported_media_type',
      field: 'content-type',
    },
    {
      name: 'forged signature (enforce)',
      path: '/webhooks/main/deposits',
      body: () => '{"deposit_id":3000000009}',
      headers: (b) => ({ ...signed(String(b)), authorization: `D24 ${'ab'.repeat(32)}` }),
      status: 401,
      reason: 'forged',
      field: 'authorization',
    },
    {
      name: 'body changed after signing (enforce)',
      path: '/webhooks/main/deposits',
      body: () => '{"deposit_id":3000000010}',
      headers: () => signed('{"deposit_id":3000000011}'),
      status: 401,
      reason: 'forged',
      field: 'authorization',
    },
    {
      name: 'no Authorization header (enforce)',
      path: '/webhooks/main/refunds',
      body: () => '{"refund_id":77}',
      headers: () => json,
      status: 401,
      reason: 'forged',
      field: 'x-date',
    },
    {
      name: 'replayed: X-Date ten minutes old (enforce)',
      path: '/webhooks/main/deposits',
      body: () => '{"deposit_id":3000000012}',
      headers: (b) => signed(String(b), enforce, new Date(Date.now() - 10 * 60_000)),
      status: 401,
      reason: 'replayed',
      field: 'x-date',
    },
    {
      name: 'cashout with a forged control (enforce)',
      path: '/webhooks/main/cashouts',
      body: () => cashoutForm('ext-99', '99', cashoutControl('ext-99', 'not-the-secret')),
      headers: () => ({ 'content-type': 'application/x-www-form-urlencoded' }),
      status: 401,
      reason: 'forged',
      field: 'control',
    },
    {
      name: 'cashout without control (enforce)',
      path: '/webhooks/main/cashouts',
      body: () => cashoutForm('ext-98', '98', null),
      headers: () => ({ 'content-type': 'application/x-www-form-urlencoded' }),
      status: 401,
      reason: 'forged',
      field: 'control',
    },
    {
      name: 'unknown account',
      path: '/webhooks/nobody/deposits',
      body: () => '{"deposit_id":1}',
      headers: (b) => signed(String(b)),
      status: 404,
      reason: 'unknown_account',
      field: 'account',
    },
  ];

  for (const c of cases) {
    it(`${c.name}: ${c.status} ${c.reason} naming ${c.field}`, async () => {
      const before = rejections.length;
      const body = c.body();
      const res = await post(c.path, body, c.headers(body));
      expect(res.status).toBe(c.status);
      expect(res.json).toMatchObject({ error: c.reason, field: c.field });
      expect(typeof res.json.rule).toBe('string');
      expect(rejections.slice(before)).toEqual([c.reason]);
    });
  }

  it('none of the rejected notifications reached the topic', async () => {
    const values = await published.drain();
    expect(values.length).toBe(accepted);
    const ids = new Set(values.map((v) => v.entityId));
    for (const id of ['3000000009', '3000000010', '3000000012', '99', '98', '77'])
      expect(ids.has(id)).toBe(false);
  });
});

describe('webhook ingress when Kafka is down', () => {
  it('answers 503 and counts it, so the provider retries', async () => {
    await published.stop();
    await infra.broker.close();
    const before = rejections.length;
    const body = '{"deposit_id":3000000099}';
    const res = await post('/webhooks/main/deposits', body, signed(body));
    expect(res.status).toBe(503);
    expect(res.json.error).toBe('unavailable');
    expect(rejections.slice(before)).toEqual(['unavailable']);
  }, 60_000);
});
