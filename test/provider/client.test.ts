/**
 * The provider client over real HTTP: a fastify server on 127.0.0.1 (port 0) plays the provider for
 * each scenario, checking the signatures of every request it receives.
 */

import { Writable } from 'node:stream';
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { ProviderAccount } from '../../src/config.ts';
import { createLogger } from '../../src/logger.ts';
import { createProviderClient, type ProviderClientOptions } from '../../src/provider/client.ts';
import { ProviderError, ProviderValidationError } from '../../src/provider/errors.ts';
import { parseProviderJson } from '../../src/provider/json.ts';
import {
  parseXDate,
  verifyDepositAuthorization,
  verifyPayloadSignature,
} from '../../src/provider/signing.ts';

interface Seen {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}
type Handler = (req: Seen, reply: FastifyReply, raw: FastifyRequest) => unknown;

const app = Fastify({ forceCloseConnections: true });
let handlers: Record<string, Handler> = {};

/** Resolves once the client has closed the connection: it gave up waiting for the answer. */
const clientGone = (raw: FastifyRequest) =>
  new Promise<void>((resolve) => {
    if (raw.raw.socket.destroyed) resolve();
    else raw.raw.socket.once('close', () => resolve());
  });
let seen: Seen[] = [];
let account: ProviderAccount;

const DEPOSIT_SECRET = 'depositSecret';
const CASHOUT_SECRET = 'cashoutSecret';

/** Rejects requests whose signature the real provider would reject, so a signing bug fails loudly. */
function checkAuth(req: Seen, reply: FastifyReply): boolean {
  const path = req.url.replace(/\?.*$/, '');
  if (path.includes('/v3/banks')) {
    if (req.headers.authorization !== 'Bearer readOnly') {
      reply.code(401).send({ code: 100, description: 'Invalid credentials' });
      return false;
    }
    return true;
  }
  if (path.includes('/v3/cashout')) {
    if (!verifyPayloadSignature(req.body, CASHOUT_SECRET, req.headers['payload-signature'] as string)) {
      reply.code(412).send({ code: 302, message: 'Invalid control string' });
      return false;
    }
    return true;
  }
  const xDate = String(req.headers['x-date'] ?? '');
  const ok =
    parseXDate(xDate) !== null &&
    req.headers['x-login'] === 'merchantLogin' &&
    verifyDepositAuthorization({
      xDate,
      xLogin: 'merchantLogin',
      body: req.body,
      secret: DEPOSIT_SECRET,
      authorization: req.headers.authorization as string,
    });
  if (!ok) {
    reply.code(400).send({ code: 102, description: 'Invalid signature', type: 'INVALID_SIGNATURE' });
    return false;
  }
  return true;
}

beforeAll(async () => {
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => done(null, body));
  app.all('/*', async (raw, reply) => {
    const req: Seen = {
      method: raw.method,
      url: raw.url,
      headers: raw.headers,
      body: typeof raw.body === 'string' ? raw.body : '',
    };
    seen.push(req);
    if (!checkAuth(req, reply)) return reply;
    const key = `${raw.method} ${raw.url.replace(/\?.*$/, '')}`;
    const handler = handlers[key];
    if (!handler) return reply.code(599).send({ description: `no scenario for ${key}` });
    const result = await handler(req, reply, raw);
    return reply.sent ? reply : result;
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as { port: number };
  account = {
    name: 'test',
    baseUrl: `http://127.0.0.1:${port}/api/`,
    cardBaseUrl: `http://127.0.0.1:${port}/cc`,
    depositLogin: 'merchantLogin',
    depositSecret: DEPOSIT_SECRET,
    cashoutLogin: 'cashLogin',
    cashoutPass: 'cashPass',
    cashoutSecret: CASHOUT_SECRET,
    readOnlyKey: 'readOnly',
    notificationUrl: 'https://merchant.example.com/hooks',
    webhookSignatureMode: 'enforce',
    xDateWindowSeconds: 300,
  };
});

afterAll(async () => {
  await app.close();
});

beforeEach(() => {
  handlers = {};
  seen = [];
});

function captureLogger() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      lines.push(String(chunk));
      done();
    },
  });
  return { logger: createLogger({ level: 'info' }, stream), lines };
}

function client(options: ProviderClientOptions = {}) {
  return createProviderClient(account, {
    timeoutMs: 2_000,
    backoffBaseMs: 5,
    backoffMaxMs: 20,
    logger: captureLogger().logger,
    ...options,
  });
}

async function failure(promise: Promise<unknown>): Promise<ProviderError> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof ProviderError) return err;
    throw err;
  }
  throw new Error('expected a ProviderError');
}

const json = (reply: FastifyReply, status: number, text: string) =>
  reply.code(status).header('content-type', 'application/json').send(text);

const NEW_DEPOSIT = {
  invoice_id: 'inv-1',
  country: 'BR',
  currency: 'BRL',
  amount: 10050n,
  payment_method: 'PX',
  payer: { email: 'ana@example.com', first_name: 'Ana', last_name: 'Silva', document: '12345678909' },
};
const ONE_SHOT = `{"checkout_type":"ONE_SHOT","redirect_url":"https://pay.example.com/r","deposit_id":3000000001,
  "user_id":"u1","merchant_invoice_id":"inv-1","payment_info":{"type":"BANK_TRANSFER","payment_method":"PX",
  "payment_method_name":"PIX","amount":999999999999999999.99,"currency":"BRL","expiration_date":"2026-11-21 22:00:00",
  "created_at":"2026-11-21 10:00:00","metadata":{"reference":"r-1"}}}`;
const DEPOSIT_VIEW = `{"user_id":"u1","deposit_id":3000000001,"invoice_id":"inv-1","country":"BR","currency":"BRL",
  "amount":123456789012345678.90,"status":"COMPLETED","fee_amount":1.25,"fee_currency":"BRL","payer":{"email":"ana@example.com"}}`;
const NEW_CASHOUT = {
  external_id: 'ext-42',
  country: 'BR',
  currency: 'BRL',
  amount: '250.00',
  document_id: '12345678909',
  beneficiary_name: 'Ana Silva',
  bank_code: '001',
  account_type: 'C' as const,
};

describe('deposits', () => {
  it('creates a deposit: signed, amount written as 100.50, idempotency key sent, amounts exact', async () => {
    handlers['POST /api/v3/deposits'] = (_req, reply) => json(reply, 200, ONE_SHOT);
    const res = await client().createDeposit(NEW_DEPOSIT);
    expect(res.deposit_id).toBe(3000000001);
    expect(res.payment_info?.amount).toBe(99999999999999999999n);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.body).toContain('"amount":100.50');
    expect(seen[0]!.body).toContain('"notification_url":"https://merchant.example.com/hooks"');
    expect(seen[0]!.headers['x-idempotency-key']).toMatch(/^[0-9a-f-]{36}$/);
    expect(seen[0]!.headers['content-type']).toBe('application/json');
  });

  it('retries a 503 then 200 with the same idempotency key and a fresh signature', async () => {
    let calls = 0;
    handlers['POST /api/v3/deposits'] = (_req, reply) =>
      ++calls === 1 ? json(reply, 503, '{"description":"busy"}') : json(reply, 200, ONE_SHOT);
    const res = await client().createDeposit(NEW_DEPOSIT, { idempotencyKey: 'key-123' });
    expect(res.deposit_id).toBe(3000000001);
    expect(seen.map((s) => s.headers['x-idempotency-key'])).toEqual(['key-123', 'key-123']);
    expect(seen[0]!.body).toBe(seen[1]!.body);
  });

  it('validates before sending: nothing reaches the provider', async () => {
    const err = await client()
      .createDeposit({ ...NEW_DEPOSIT, payer: { email: 'not-an-email' }, amount: '1.005' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderValidationError);
    expect((err as ProviderValidationError).issues).toEqual([
      { field: 'amount', rule: 'at most 2 decimals allowed' },
      { field: 'payer.email', rule: 'must be a valid e-mail address' },
    ]);
    expect(seen).toHaveLength(0);
  });

  it('reads a deposit with a signed GET, keeping an 18-digit amount exact', async () => {
    handlers['GET /api/v3/deposits/3000000001'] = (req, reply) => {
      expect(req.body).toBe('');
      return json(reply, 200, DEPOSIT_VIEW);
    };
    const d = await client().getDeposit(3000000001);
    expect(d.status).toBe('COMPLETED');
    expect(d.amount).toBe(12345678901234567890n);
    expect(d.fee_amount).toBe(125n);
  });

  it('retries a GET after a dropped connection', async () => {
    let calls = 0;
    handlers['GET /api/v3/deposits/3000000001'] = (_req, reply, raw) => {
      if (++calls === 1) {
        reply.hijack();
        raw.raw.socket.destroy();
        return undefined;
      }
      return json(reply, 200, DEPOSIT_VIEW);
    };
    const d = await client().getDeposit('3000000001');
    expect(d.deposit_id).toBe(3000000001);
    expect(calls).toBe(2);
  });

  it('retries a GET that timed out', async () => {
    let calls = 0;
    handlers['GET /api/v3/deposits/3000000001'] = async (_req, reply, raw) => {
      if (++calls === 1) await clientGone(raw);
      return json(reply, 200, DEPOSIT_VIEW);
    };
    const d = await client({ timeoutMs: 500 }).getDeposit(3000000001);
    expect(d.deposit_id).toBe(3000000001);
    expect(calls).toBe(2);
  });

  it('tells onCall each exchange with its operation, outcome and duration (metrics)', async () => {
    let calls = 0;
    handlers['GET /api/v3/deposits/3000000001'] = async (_req, reply, raw) => {
      calls++;
      if (calls === 1) return reply.code(503).send({ description: 'maintenance' });
      if (calls === 2) return reply.code(429).send({ description: 'slow down' });
      if (calls === 3) {
        reply.hijack();
        raw.raw.socket.destroy();
        return undefined;
      }
      if (calls === 4) await clientGone(raw);
      return json(reply, 200, DEPOSIT_VIEW);
    };
    const records: { operation: string; outcome: string; seconds: number }[] = [];
    await client({ retries: 5, timeoutMs: 400, onCall: (r) => records.push(r) }).getDeposit(3000000001);
    expect(records.map((r) => `${r.operation} ${r.outcome}`)).toEqual([
      'getDeposit server_error',
      'getDeposit rate_limited',
      'getDeposit network_error',
      'getDeposit timeout',
      'getDeposit ok',
    ]);
    expect(records[3]!.seconds).toBeGreaterThanOrEqual(0.35);
  });

  it('honours Retry-After on 429', async () => {
    let calls = 0;
    handlers['GET /api/v3/deposits/3000000001'] = (_req, reply) =>
      ++calls === 1
        ? reply.code(429).header('retry-after', '1').send({ description: 'slow down' })
        : json(reply, 200, DEPOSIT_VIEW);
    const started = Date.now();
    await client().getDeposit(3000000001);
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    expect(calls).toBe(2);
  });

  it('gives up at once when Retry-After is beyond the limit', async () => {
    handlers['GET /api/v3/deposits/3000000001'] = (_req, reply) =>
      reply.code(429).header('retry-after', '3600').send({ description: 'slow down' });
    const err = await failure(client({ maxRetryAfterMs: 2_000 }).getDeposit(3000000001));
    expect(err.code).toBe('PROVIDER_RATE_LIMITED');
    expect(err.status).toBe(429);
    expect(seen).toHaveLength(1);
  });

  it('gives up after the retries with the last 5xx as a typed error', async () => {
    handlers['GET /api/v3/deposits/3000000001'] = (_req, reply) => json(reply, 500, '{"description":"boom"}');
    const err = await failure(client({ retries: 2 }).getDeposit(3000000001));
    expect(err).toMatchObject({ code: 'PROVIDER_UNAVAILABLE', status: 500, retryable: true });
    expect(seen).toHaveLength(3);
  });

  it('creates a card deposit on the card base URL', async () => {
    handlers['POST /cc/v3/deposits'] = (req, reply) => {
      const body = parseProviderJson(req.body) as Record<string, unknown>;
      expect(body.credit_card).toMatchObject({ card_number: '4111111111111111' });
      return json(
        reply,
        200,
        `{"deposit_id":3000000002,"user_id":"u1","merchant_invoice_id":"inv-2","payment_info":{"type":"CREDIT_CARD",
          "result":"REJECTED","reason":"Insufficient funds","reason_code":"INSUFFICIENT_FUNDS","amount":10.00,"currency":"BRL"}}`,
      );
    };
    const res = await client().createCardDeposit({
      country: 'BR',
      currency: 'BRL',
      amount: 1000n,
      invoice_id: 'inv-2',
      client_ip: '203.0.113.9',
      payer: { document: '12345678909', email: 'ana@example.com', first_name: 'Ana', last_name: 'Silva' },
      credit_card: {
        cvv: '123',
        card_number: '4111111111111111',
        expiration_month: '07',
        expiration_year: '30',
        holder_name: 'Ana Silva',
      },
    });
    expect(res.payment_info.result).toBe('REJECTED');
    expect(res.payment_info.amount).toBe(1000n);
    expect(seen[0]!.url).toBe('/cc/v3/deposits');
  });
});

describe('cashouts', () => {
  it('creates a cashout with body credentials and Payload-Signature', async () => {
    handlers['POST /api/v3/cashout'] = (req, reply) => {
      const body = parseProviderJson(req.body) as Record<string, unknown>;
      expect(body).toMatchObject({
        login: 'cashLogin',
        pass: 'cashPass',
        amount: '250.00',
        external_id: 'ext-42',
      });
      return json(reply, 200, '{"cashout_id":"8405147"}');
    };
    const res = await client().createCashout(NEW_CASHOUT);
    expect(res.cashout_id).toBe(8405147);
    expect(seen[0]!.body).toContain('"amount":250.00');
  });

  it('does not duplicate a cashout after a timeout: it looks the external_id up instead', async () => {
    const created: string[] = [];
    handlers['POST /api/v3/cashout'] = async (req, reply, raw) => {
      const body = parseProviderJson(req.body) as { external_id: string };
      created.push(body.external_id);
      await clientGone(raw); // created, but the answer comes too late
      return json(reply, 200, '{"cashout_id":8405147}');
    };
    handlers['POST /api/v3/cashout/status'] = (req, reply) => {
      const body = parseProviderJson(req.body) as { external_id?: string };
      expect(body.external_id).toBe('ext-42');
      return json(
        reply,
        200,
        '{"cashout_id":8405147,"external_id":"ext-42","cashout_status":0,"cashout_status_description":"Pending"}',
      );
    };
    const res = await client({ timeoutMs: 500 }).createCashout(NEW_CASHOUT);
    expect(res.cashout_id).toBe(8405147);
    expect(created).toEqual(['ext-42']);
    expect(seen.map((s) => s.url)).toEqual(['/api/v3/cashout', '/api/v3/cashout/status']);
  });

  it('sends the creation again only when the lookup says the cashout does not exist', async () => {
    let calls = 0;
    handlers['POST /api/v3/cashout'] = (_req, reply) =>
      ++calls === 1
        ? json(reply, 503, '{"code":0,"message":"unavailable"}')
        : json(reply, 200, '{"cashout_id":8405148}');
    handlers['POST /api/v3/cashout/status'] = (_req, reply) =>
      json(reply, 412, '{"code":509,"message":"Cashout not found with this ID"}');
    const res = await client().createCashout(NEW_CASHOUT);
    expect(res.cashout_id).toBe(8405148);
    expect(seen.map((s) => s.url)).toEqual(['/api/v3/cashout', '/api/v3/cashout/status', '/api/v3/cashout']);
  });

  it('resolves a 511 on a resend by looking the cashout up, never creating twice', async () => {
    let created = 0;
    let lookups = 0;
    handlers['POST /api/v3/cashout'] = (_req, reply) => {
      if (++created === 1) return json(reply, 502, '{"code":0,"message":"bad gateway"}'); // created anyway
      return json(reply, 412, '{"code":511,"message":"External ID already used"}');
    };
    handlers['POST /api/v3/cashout/status'] = (_req, reply) =>
      ++lookups === 1
        ? json(reply, 412, '{"code":509,"message":"Cashout not found with this ID"}') // not visible yet
        : json(reply, 200, '{"cashout_id":8405149,"external_id":"ext-42","cashout_status":0}');
    const res = await client().createCashout(NEW_CASHOUT);
    expect(res.cashout_id).toBe(8405149);
    expect(seen.map((s) => s.url)).toEqual([
      '/api/v3/cashout',
      '/api/v3/cashout/status',
      '/api/v3/cashout',
      '/api/v3/cashout/status',
    ]);
  });

  it('resolves a 511 on the first attempt of a resend (a replay after a lost answer) by looking it up', async () => {
    handlers['POST /api/v3/cashout'] = (_req, reply) =>
      json(reply, 412, '{"code":511,"message":"External ID already used"}');
    handlers['POST /api/v3/cashout/status'] = (_req, reply) =>
      json(reply, 200, '{"cashout_id":8405151,"external_id":"ext-42","cashout_status":0}');
    // Not a resend: the external_id is taken by another cashout, a refusal.
    const refused = await failure(client().createCashout(NEW_CASHOUT));
    expect(refused).toMatchObject({ providerCode: 511 });
    expect(seen.map((s) => s.url)).toEqual(['/api/v3/cashout']);
    seen = [];
    const res = await client().createCashout(NEW_CASHOUT, { resend: true });
    expect(res.cashout_id).toBe(8405151);
    expect(seen.map((s) => s.url)).toEqual(['/api/v3/cashout', '/api/v3/cashout/status']);
  });

  it('with no retries left still looks the cashout up instead of reporting a failure', async () => {
    handlers['POST /api/v3/cashout'] = (_req, reply) => json(reply, 503, '{"code":0,"message":"busy"}');
    handlers['POST /api/v3/cashout/status'] = (_req, reply) =>
      json(reply, 200, '{"cashout_id":8405150,"external_id":"ext-42","cashout_status":0}');
    expect((await client({ retries: 0 }).createCashout(NEW_CASHOUT)).cashout_id).toBe(8405150);
    handlers['POST /api/v3/cashout/status'] = (_req, reply) =>
      json(reply, 412, '{"code":509,"message":"Cashout not found with this ID"}');
    seen = [];
    const err = await failure(client({ retries: 0 }).createCashout(NEW_CASHOUT));
    expect(err).toMatchObject({ status: 503, code: 'PROVIDER_UNAVAILABLE' });
    expect(seen.map((s) => s.url)).toEqual(['/api/v3/cashout', '/api/v3/cashout/status']);
  });

  it('does not resend when the lookup itself fails', async () => {
    handlers['POST /api/v3/cashout'] = (_req, reply) =>
      json(reply, 502, '{"code":0,"message":"bad gateway"}');
    handlers['POST /api/v3/cashout/status'] = (_req, reply) =>
      json(reply, 401, '{"code":401,"message":"Invalid credentials."}');
    const err = await failure(client().createCashout(NEW_CASHOUT));
    expect(err).toMatchObject({ code: 'PROVIDER_UNAVAILABLE', status: 502, operation: 'createCashout' });
    expect(seen.filter((s) => s.url === '/api/v3/cashout')).toHaveLength(1);
  });

  it('reads a cashout status by cashout_id and by external_id', async () => {
    handlers['POST /api/v3/cashout/status'] = (req, reply) => {
      const body = parseProviderJson(req.body) as Record<string, unknown>;
      expect(body.login).toBe('cashLogin');
      return json(
        reply,
        200,
        `{"cashout_id":${body.cashout_id ?? 8405147},"external_id":"ext-42","cashout_status":3,"cashout_status_description":"Rejected",
          "rejection_code":800,"rejection_reason":"ERROR_ACCOUNT_INCORRECT","bank":[{"code":"001","name":"Banco","branch":"1","account":"2","beneficiary_name":"Ana"}]}`,
      );
    };
    const byId = await client().getCashoutStatus({ cashout_id: 8405147 });
    const byExt = await client().getCashoutStatus({ external_id: 'ext-42' });
    expect(byId).toMatchObject({ cashout_status: 3, rejection_code: 800 });
    expect(byExt.cashout_id).toBe(8405147);
    expect(seen.map((s) => s.body)).toEqual([
      '{"login":"cashLogin","pass":"cashPass","cashout_id":8405147}',
      '{"login":"cashLogin","pass":"cashPass","external_id":"ext-42"}',
    ]);
    // The first body is the docs/provider.md vector, so its signature is the published one.
    expect(seen[0]!.headers['payload-signature']).toBe(
      'c219e4e3db2bd8e86e376029c86ef67d2090a39a853fca0e319e1e34dda3f919',
    );
  });

  it('puts a cashout on hold, and retries a status PUT after a 503', async () => {
    let calls = 0;
    handlers['PUT /api/v3/cashout/status'] = (req, reply) => {
      expect(req.body).toBe(
        '{"login":"cashLogin","pass":"cashPass","cashout_id":8405147,"status":"ON_HOLD"}',
      );
      return ++calls === 1
        ? json(reply, 503, '{"code":0,"message":"busy"}')
        : json(reply, 200, '{"cashout_status":5,"cashout_status_description":"On hold"}');
    };
    expect((await client().updateCashoutStatus(8405147, 'ON_HOLD')).cashout_status).toBe(5);
    expect(calls).toBe(2);
  });

  it('cancels a cashout with a DELETE body and never retries it after a 5xx', async () => {
    handlers['DELETE /api/v3/cashout/cancel'] = (req, reply) => {
      expect(req.body).toBe(
        '{"login":"cashLogin","pass":"cashPass","cashout_id":8405147,"external_id":"ext-42"}',
      );
      return json(reply, 200, '{"cashout_status":2,"cashout_status_description":"Canceled"}');
    };
    expect(
      (await client().cancelCashout({ cashout_id: 8405147, external_id: 'ext-42' })).cashout_status,
    ).toBe(2);
    handlers['DELETE /api/v3/cashout/cancel'] = (_req, reply) =>
      json(reply, 503, '{"code":0,"message":"busy"}');
    seen = [];
    const err = await failure(client().cancelCashout({ cashout_id: 8405147 }));
    expect(err.status).toBe(503);
    expect(seen).toHaveLength(1);
  });
});

describe('refunds and banks', () => {
  it('creates a refund, retrying a 503 with the same idempotency key', async () => {
    let calls = 0;
    handlers['POST /api/v3/refunds'] = (_req, reply) =>
      ++calls === 1 ? json(reply, 503, '{"description":"busy"}') : json(reply, 200, '{"refund_id":168284}');
    const res = await client().createRefund({ deposit_id: 3000000001, amount: '5.00', comments: 'partial' });
    expect(res.refund_id).toBe(168284);
    expect(seen).toHaveLength(2);
    expect(seen[0]!.headers['x-idempotency-key']).toBe(seen[1]!.headers['x-idempotency-key']);
    expect(seen[0]!.body).toContain('"amount":5.00');
  });

  it('reads a refund with its voucher decoded to PDF bytes', async () => {
    const pdf = Buffer.from('%PDF-1.4\n% refund proof\n%%EOF\n');
    handlers['GET /api/v3/refunds/168284'] = (req, reply) => {
      expect(req.url).toBe('/api/v3/refunds/168284?voucher=true');
      return json(
        reply,
        200,
        `{"deposit_id":3000000001,"merchant_invoice_id":"inv-1","status":"COMPLETED","amount":5.00,"voucher":"${pdf.toString('base64')}"}`,
      );
    };
    const r = await client().getRefund(168284, { voucher: true });
    expect(r.status).toBe('COMPLETED');
    expect(r.amount).toBe(500n);
    expect(r.voucherPdf?.equals(pdf)).toBe(true);
  });

  it('lists banks with the read-only Bearer key', async () => {
    handlers['GET /api/v3/banks'] = (req, reply) => {
      expect(req.url).toBe('/api/v3/banks?country=BR');
      return json(reply, 200, '[{"code":1,"name":"Banco do Brasil"},{"code":237,"name":"Bradesco"}]');
    };
    expect(await client().listBanks('BR')).toEqual([
      { code: '1', name: 'Banco do Brasil' },
      { code: '237', name: 'Bradesco' },
    ]);
    expect(seen[0]!.headers.authorization).toBe('Bearer readOnly');
  });
});

describe('typed errors', () => {
  const cashoutBody = { ...NEW_CASHOUT };
  it.each([
    [
      'getDeposit',
      'GET /api/v3/deposits/3000000001',
      401,
      '{"code":100,"description":"Invalid credentials"}',
      'PROVIDER_ERROR',
      100,
      'INVALID_CREDENTIALS',
    ],
    [
      'createDeposit',
      'POST /api/v3/deposits',
      400,
      '{"code":101,"description":"Missing required header"}',
      'PROVIDER_ERROR',
      101,
      'MISSING_HEADER',
    ],
    [
      'createDeposit',
      'POST /api/v3/deposits',
      400,
      '{"code":102,"description":"Invalid signature","type":"INVALID_SIGNATURE"}',
      'PROVIDER_ERROR',
      102,
      'INVALID_SIGNATURE',
    ],
    [
      'createDeposit',
      'POST /api/v3/deposits',
      400,
      '{"code":103,"description":"Invalid date range"}',
      'PROVIDER_ERROR',
      103,
      'INVALID_DATE_RANGE',
    ],
    [
      'createDeposit',
      'POST /api/v3/deposits',
      400,
      '{"code":104,"description":"Idempotency key already used"}',
      'PROVIDER_ERROR',
      104,
      'IDEMPOTENCY_KEY_ALREADY_USED',
    ],
    [
      'createDeposit',
      'POST /api/v3/deposits',
      400,
      '{"code":105,"description":"Empty header value"}',
      'PROVIDER_ERROR',
      105,
      'EMPTY_HEADER_VALUE',
    ],
    [
      'getRefund',
      'GET /api/v3/refunds/168284',
      404,
      '{"code":208,"description":"Resource not found","type":"RESOURCE_NOT_FOUND"}',
      'PROVIDER_ERROR',
      208,
      'RESOURCE_NOT_FOUND',
    ],
    [
      'createRefund',
      'POST /api/v3/refunds',
      400,
      '{"code":802,"description":"Amount to refund not valid","type":"INVALID_AMOUNT_TO_REFUND"}',
      'PROVIDER_ERROR',
      802,
      'INVALID_AMOUNT_TO_REFUND',
    ],
    [
      'getCashoutStatus',
      'POST /api/v3/cashout/status',
      401,
      '{"code":401,"message":"Invalid credentials."}',
      'PROVIDER_ERROR',
      401,
      'INVALID_CREDENTIALS',
    ],
    [
      'getCashoutStatus',
      'POST /api/v3/cashout/status',
      412,
      '{"code":509,"message":"Cashout not found with this ID"}',
      'PROVIDER_ERROR',
      509,
      'CASHOUT_NOT_FOUND',
    ],
    [
      'updateCashoutStatus',
      'PUT /api/v3/cashout/status',
      412,
      '{"code":510,"message":"Invalid status transition"}',
      'PROVIDER_ERROR',
      510,
      'INVALID_STATUS_TRANSITION',
    ],
    [
      'createCashout',
      'POST /api/v3/cashout',
      412,
      '{"code":511,"message":"External ID already used"}',
      'PROVIDER_ERROR',
      511,
      'EXTERNAL_ID_ALREADY_USED',
    ],
    [
      'createCashout',
      'POST /api/v3/cashout',
      412,
      '{"code":514,"message":"Insufficient funds"}',
      'PROVIDER_ERROR',
      514,
      'INSUFFICIENT_FUNDS',
    ],
    [
      'cancelCashout',
      'DELETE /api/v3/cashout/cancel',
      412,
      '{"code":510,"message":"Invalid status transition"}',
      'PROVIDER_ERROR',
      510,
      'INVALID_STATUS_TRANSITION',
    ],
    [
      'createDeposit',
      'POST /api/v3/deposits',
      400,
      '{"description":"Invalid request","details":["payer.document invalid"],"reason":"KYC","reason_code":"K1"}',
      'PROVIDER_ERROR',
      null,
      null,
    ],
  ])(
    '%s (%s) answering HTTP %i',
    async (operation, route, status, body, code, providerCode, providerType) => {
      handlers[route] = (_req, reply) => json(reply, status as number, body as string);
      const c = client();
      const calls: Record<string, () => Promise<unknown>> = {
        getDeposit: () => c.getDeposit(3000000001),
        createDeposit: () => c.createDeposit(NEW_DEPOSIT),
        getRefund: () => c.getRefund(168284),
        createRefund: () => c.createRefund({ deposit_id: 3000000001 }),
        getCashoutStatus: () => c.getCashoutStatus({ cashout_id: 8405147 }),
        updateCashoutStatus: () => c.updateCashoutStatus(8405147, 'PENDING'),
        createCashout: () => c.createCashout(cashoutBody),
        cancelCashout: () => c.cancelCashout({ external_id: 'ext-42' }),
      };
      const err = await failure(calls[operation as string]!());
      expect(err).toMatchObject({ code, status, providerCode, providerType, operation, retryable: false });
      expect(err.httpStatus).toBe(status);
      expect(seen).toHaveLength(1); // a 4xx is never retried
      if (providerCode === null) {
        expect(err.details).toMatchObject({
          details: ['payer.document invalid'],
          reason: 'KYC',
          reasonCode: 'K1',
        });
      }
    },
  );

  it('turns an answer that breaks its schema into a typed error', async () => {
    handlers['GET /api/v3/deposits/3000000001'] = (_req, reply) =>
      json(reply, 200, DEPOSIT_VIEW.replace('"COMPLETED"', '"PAID"').replace('1.25', '1.255'));
    const err = await failure(client().getDeposit(3000000001));
    expect(err.code).toBe('PROVIDER_SCHEMA_DRIFT');
    expect(err.details?.issues).toEqual([
      { field: 'status', rule: expect.stringMatching(/^must be one of CREATED/) },
      { field: 'fee_amount', rule: 'at most 2 decimals allowed' },
    ]);
  });

  it('keeps unknown fields and logs them once as drift, without their values', async () => {
    handlers['GET /api/v3/deposits/3000000001'] = (_req, reply) =>
      json(
        reply,
        200,
        DEPOSIT_VIEW.replace('"status"', '"loyalty_points":"secret-ish-7","payer_extra":{"a":1},"status"'),
      );
    const { logger, lines } = captureLogger();
    const c = client({ logger });
    const first = await c.getDeposit(3000000001);
    await c.getDeposit(3000000001);
    expect((first as Record<string, unknown>).loyalty_points).toBe('secret-ish-7');
    const drift = lines.filter((l) => l.includes('contract does not name'));
    expect(drift).toHaveLength(1);
    expect(JSON.parse(drift[0]!).fields).toEqual(['loyalty_points', 'payer_extra']);
    expect(drift[0]).not.toContain('secret-ish-7');
  });

  it('times out and reports PROVIDER_TIMEOUT after the retries', async () => {
    handlers['GET /api/v3/banks'] = async (_req, reply, raw) => {
      await clientGone(raw);
      return json(reply, 200, '[]');
    };
    const err = await failure(client({ timeoutMs: 300, retries: 1 }).listBanks('BR'));
    expect(err).toMatchObject({ code: 'PROVIDER_TIMEOUT', status: null, retryable: true });
    expect(seen).toHaveLength(2);
  });
});
