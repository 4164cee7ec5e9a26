/**
 * Fuzzing the webhook ingress over real HTTP with the real publisher and broker: generated malformed,
 * oversized, wrongly typed, wrongly encoded, forged and replayed notifications. Every one must be
 * answered 4xx, nothing may reach the topic, the server must stay up and its memory flat.
 * `FUZZ_REQUESTS` sets the count (CI: 2,000; `npm run fuzz`: 10,000).
 */
import { randomBytes } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import Fastify, { type FastifyInstance } from 'fastify';
import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProviderAccount } from '../../src/config.ts';
import { webhookIngressPlugin } from '../../src/producers/webhook-ingress.ts';
import { cashoutControl, depositAuthorization, formatXDate } from '../../src/provider/signing.ts';
import { type Infra, quiet, sandboxAccount, startInfra } from '../producers/helpers.ts';
import { sendInHalves } from './storm.ts';

const REQUESTS = Number(process.env.FUZZ_REQUESTS ?? 2_000);
const account: ProviderAccount = sandboxAccount(
  { url: 'http://127.0.0.1:1', ccUrl: 'http://127.0.0.1:2' },
  { name: 'main', webhookSignatureMode: 'enforce' },
);

interface FuzzRequest {
  category: string;
  path: string;
  headers: Record<string, string>;
  body: Buffer | string;
}

function signedHeaders(
  body: Buffer | string,
  at = new Date(),
  secret = account.depositSecret,
): Record<string, string> {
  const xDate = formatXDate(at);
  return {
    'x-date': xDate,
    'x-login': account.depositLogin,
    authorization: depositAuthorization({
      xDate,
      xLogin: account.depositLogin,
      body: typeof body === 'string' ? body : body.toString('utf8'),
      secret,
    }),
  };
}

const json = (v: unknown) => JSON.stringify(v);
const kindPath = fc.constantFrom(
  '/webhooks/main/deposits',
  '/webhooks/main/refunds',
  '/webhooks/main/cashouts',
);

/** Generators, one per kind of hostile input. */
const generators: fc.Arbitrary<FuzzRequest>[] = [
  // Not JSON at all, with a JSON content type, correctly signed (so only the parser can refuse it).
  fc
    .string({ minLength: 1, maxLength: 200 })
    .filter((s) => {
      try {
        JSON.parse(s);
        return false;
      } catch {
        return true;
      }
    })
    .map((body) => ({
      category: 'malformed-json',
      path: '/webhooks/main/deposits',
      headers: { 'content-type': 'application/json', ...signedHeaders(body) },
      body,
    })),
  // Valid JSON of the wrong shape or with ids that break their rule, signed.
  fc
    .oneof(
      fc.record({
        deposit_id: fc.oneof(
          fc.string(),
          fc.double(),
          fc.constant(-1),
          fc.constant(0),
          fc.boolean(),
          fc.constant(null),
        ),
      }),
      fc.record({
        refund_id: fc.oneof(fc.string(), fc.constant(-7), fc.constant('1e99'), fc.array(fc.nat())),
      }),
      fc
        .dictionary(fc.string(), fc.jsonValue(), { maxKeys: 5 })
        .filter((d) => !('deposit_id' in d) && !('refund_id' in d)),
      fc.jsonValue().filter((v) => v === null || typeof v !== 'object' || Array.isArray(v)),
    )
    .map((value) => {
      const body = json(value);
      return {
        category: 'wrong-shape',
        path: '/webhooks/main/deposits',
        headers: { 'content-type': 'application/json', ...signedHeaders(body) },
        body,
      };
    }),
  // Oversized bodies.
  fc.integer({ min: 65 * 1024, max: 300 * 1024 }).map((size) => {
    const body = `{"deposit_id":1,"pad":"${'x'.repeat(size)}"}`;
    return {
      category: 'oversized',
      path: '/webhooks/main/deposits',
      headers: { 'content-type': 'application/json' },
      body,
    };
  }),
  // Content types the routes do not take.
  fc
    .tuple(
      kindPath,
      fc.constantFrom(
        'text/plain',
        'application/xml',
        'multipart/form-data; boundary=x',
        'image/png',
        'application/octet-stream',
      ),
    )
    .map(([path, type]) => ({
      category: 'wrong-type',
      path,
      headers: { 'content-type': type },
      body: '{"deposit_id":3000000001}',
    })),
  // Wrongly encoded: invalid UTF-8, a gzip body without saying so, a body declared gzip that is not.
  fc.uint8Array({ minLength: 1, maxLength: 300 }).chain((bytes) => {
    const encoded: FuzzRequest[] = [
      {
        category: 'bad-bytes',
        path: '/webhooks/main/deposits',
        headers: { 'content-type': 'application/json' },
        body: Buffer.concat([Buffer.from('{"deposit_id":'), Buffer.from([0xff, 0xfe]), Buffer.from(bytes)]),
      },
      {
        category: 'gzip-unsaid',
        path: '/webhooks/main/deposits',
        headers: { 'content-type': 'application/json' },
        body: gzipSync('{"deposit_id":3000000001}'),
      },
      {
        category: 'gzip-lie',
        path: '/webhooks/main/deposits',
        headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
        body: Buffer.from(bytes),
      },
    ];
    return fc.constantFrom(...encoded);
  }),
  // Forged: a valid body signed with another secret, or with the signature of another body.
  fc.tuple(fc.integer({ min: 1, max: 2 ** 40 }), fc.boolean()).map(([id, otherKey]) => {
    const body = json({ deposit_id: id });
    const headers = otherKey
      ? signedHeaders(body, new Date(), randomBytes(16).toString('hex'))
      : signedHeaders(json({ deposit_id: id + 1 }));
    return {
      category: 'forged',
      path: '/webhooks/main/deposits',
      headers: { 'content-type': 'application/json', ...headers },
      body,
    };
  }),
  // Replayed: a correct signature with an X-Date outside the five-minute window.
  fc
    .tuple(fc.integer({ min: 1, max: 2 ** 40 }), fc.integer({ min: 6, max: 60 * 24 * 30 }), fc.boolean())
    .map(([id, minutes, future]) => {
      const body = json({ refund_id: id });
      const at = new Date(Date.now() + (future ? 1 : -1) * minutes * 60_000);
      return {
        category: 'replayed',
        path: '/webhooks/main/refunds',
        headers: { 'content-type': 'application/json', ...signedHeaders(body, at) },
        body,
      };
    }),
  // Cashout forms with a wrong, missing or lower-case-forged control, or without ids.
  fc
    .tuple(
      fc.string({ minLength: 1, maxLength: 40 }),
      fc.integer({ min: 1, max: 2 ** 31 }),
      fc.constantFrom('wrong', 'missing', 'other-id', 'no-ids'),
    )
    .map(([ext, id, how]) => {
      const form = new URLSearchParams({
        date: '2026-11-21 10:00:00',
        external_id: ext,
        cashout_id: String(id),
      });
      if (how === 'wrong') form.set('control', randomBytes(32).toString('hex').toUpperCase());
      if (how === 'other-id') form.set('control', cashoutControl(`${ext}x`, account.cashoutSecret));
      if (how === 'no-ids') {
        form.delete('external_id');
        form.delete('cashout_id');
        form.set('control', cashoutControl(ext, account.cashoutSecret));
      }
      return {
        category: 'cashout-control',
        path: '/webhooks/main/cashouts',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: form.toString(),
      };
    }),
  // Unknown accounts and routes.
  fc
    .tuple(
      fc.stringMatching(/^[a-z]{1,12}$/).filter((n) => n !== 'main'),
      fc.constantFrom('deposits', 'refunds', 'cashouts'),
    )
    .map(([name, kind]) => {
      const body = json({ deposit_id: 3000000001 });
      return {
        category: 'unknown-account',
        path: `/webhooks/${name}/${kind}`,
        headers: { 'content-type': 'application/json', ...signedHeaders(body) },
        body,
      };
    }),
];

describe(`webhook ingress under ${REQUESTS} hostile requests`, () => {
  let infra: Infra;
  let app: FastifyInstance;
  let http: Pool;
  let accepted = 0;

  beforeAll(async () => {
    infra = await startInfra();
    app = Fastify({ logger: false, forceCloseConnections: true });
    await app.register(
      webhookIngressPlugin({
        accounts: [account],
        publisher: infra.publisher,
        defaultAccount: 'main',
        logger: quiet,
        onAccepted: () => {
          accepted++;
        },
      }),
    );
    await app.listen({ host: '127.0.0.1', port: 0 });
    const address = app.server.address();
    if (address === null || typeof address === 'string') throw new Error('no address');
    http = new Pool(`http://127.0.0.1:${address.port}`, { connections: 16 });
  }, 120_000);

  afterAll(async () => {
    await http?.close();
    await app?.close();
    await infra?.close();
  });

  async function topicEnd(): Promise<number> {
    const admin = infra.kafka.admin();
    await admin.connect();
    try {
      const offsets = await admin.fetchTopicOffsets('provider.notification.received.v1');
      return offsets.reduce((n, p) => n + Number(p.high), 0);
    } finally {
      await admin.disconnect();
    }
  }

  it('answers every one 4xx, publishes nothing, stays up with flat memory', async () => {
    const before = await topicEnd();
    const only = process.env.FUZZ_ONLY;
    const requests = fc
      .sample(fc.oneof(...generators), { numRuns: REQUESTS, seed: 42 })
      .filter((r) => !only || only.split(',').includes(r.category))
      // Bodies as bytes up front: a generated string is a rope that V8 flattens (allocates) on first send,
      // which would count as growth of the server's heap.
      .map((r) => ({ ...r, body: Buffer.isBuffer(r.body) ? r.body : Buffer.from(r.body) }));
    const statuses = new Map<string, Map<number, number>>();
    const send = async (r: FuzzRequest) => {
      const res = await http.request({ path: r.path, method: 'POST', headers: r.headers, body: r.body });
      await res.body.dump();
      const byCategory = statuses.get(r.category) ?? new Map<number, number>();
      byCategory.set(res.statusCode, (byCategory.get(res.statusCode) ?? 0) + 1);
      statuses.set(r.category, byCategory);
      return res.statusCode;
    };
    const { heapMid, heapEnd } = await sendInHalves(requests, send);

    const summary = Object.fromEntries([...statuses].map(([c, m]) => [c, Object.fromEntries(m)]));
    const not4xx = [...statuses].flatMap(([c, m]) =>
      [...m].filter(([s]) => s < 400 || s >= 500).map(([s, n]) => `${c}: ${n} x ${s}`),
    );
    expect(not4xx, JSON.stringify(summary)).toEqual([]);
    expect(accepted).toBe(0);
    // Still alive: a good notification after the storm is accepted and published.
    const body = '{"deposit_id":3000000042}';
    const ok = await http.request({
      path: '/webhooks/main/deposits',
      method: 'POST',
      headers: { 'content-type': 'application/json', ...signedHeaders(body) },
      body,
    });
    await ok.body.dump();
    expect(ok.statusCode).toBe(200);
    expect((await topicEnd()) - before).toBe(1);
    // Flat: the second half of the storm did not grow the live heap by more than 8 MiB.
    expect(heapEnd - heapMid).toBeLessThan(8 * 1024 * 1024);
    console.info(
      `fuzz: ${requests.length} requests, ${statuses.size} categories, heap ${((heapEnd - heapMid) / 1048576).toFixed(1)} MiB over the second half; ${JSON.stringify(summary)}`,
    );
  }, 600_000);
});
