import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ACCOUNT,
  cashoutBody,
  cashoutCall,
  control,
  oneShotBody,
  type Res,
  signed,
  startTestSandbox,
  xDateNow,
} from './helpers.ts';

let sb: Awaited<ReturnType<typeof startTestSandbox>>;
beforeAll(async () => {
  sb = await startTestSandbox();
});
afterAll(async () => {
  await sb.close();
});

function expectCode(res: Res, http: number, code: number) {
  expect(res.status).toBe(http);
  expect(res.json.code).toBe(code);
}

/** Deposit-style endpoints: [name, base, path, body]. */
const depositStyle = () =>
  [
    ['deposit create', sb.url, '/v3/deposits', oneShotBody()],
    ['deposit status', sb.url, '/v3/deposits/3000000001', undefined],
    ['card create', sb.ccUrl, '/v3/deposits', { country: 'BR' }],
    ['refund create', sb.url, '/v3/refunds', { deposit_id: 1 }],
    ['refund status', sb.url, '/v3/refunds/1', undefined],
  ] as const;

describe('deposit-style header authentication (codes 100-105)', () => {
  it.each(['x-date', 'x-login', 'authorization'])('a missing %s answers 101 on every endpoint', async (h) => {
    for (const [, base, path, body] of depositStyle()) {
      expectCode(await signed(base, path, { body, omit: [h] }), 400, 101);
    }
  });

  it.each(['x-date', 'x-login', 'authorization'])('an empty %s answers 105', async (h) => {
    for (const [, base, path, body] of depositStyle()) {
      expectCode(await signed(base, path, { body, headers: { [h]: '' } }), 400, 105);
    }
  });

  it('an unknown X-Login answers 100 with HTTP 401', async () => {
    for (const [, base, path, body] of depositStyle()) {
      expectCode(await signed(base, path, { body, login: 'nobody' }), 401, 100);
    }
  });

  it('an X-Date outside the 5-minute window or badly formatted answers 103', async () => {
    for (const [, base, path, body] of depositStyle()) {
      expectCode(await signed(base, path, { body, xDate: xDateNow(-6 * 60_000) }), 400, 103);
      expectCode(await signed(base, path, { body, xDate: xDateNow(6 * 60_000) }), 400, 103);
      expectCode(await signed(base, path, { body, xDate: new Date().toISOString() }), 400, 103);
    }
    // Inside the window is fine (a deposit status of an unknown id then answers 404, not 103).
    const ok = await signed(sb.url, '/v3/deposits/3999999999', { xDate: xDateNow(-4 * 60_000) });
    expect(ok.status).toBe(404);
  });

  it('a wrong signature (other secret, or body changed after signing) answers 102', async () => {
    for (const [, base, path, body] of depositStyle()) {
      expectCode(await signed(base, path, { body, secret: 'wrong-secret' }), 400, 102);
    }
    const xDate = xDateNow();
    const good = await signed(sb.url, '/v3/deposits', { body: oneShotBody(), xDate });
    expect(good.status).toBe(200);
    const tampered = await signed(sb.url, '/v3/deposits', {
      body: oneShotBody({ amount: 999 }),
      xDate,
      headers: { authorization: 'D24 00' },
    });
    expectCode(tampered, 400, 102);
  });
});

describe('cashout credentials and Payload-Signature', () => {
  const paths = [
    ['POST', '/v3/cashout'],
    ['POST', '/v3/cashout/status'],
    ['PUT', '/v3/cashout/status'],
    ['DELETE', '/v3/cashout/cancel'],
  ] as const;

  it('a wrong pass or unknown login answers HTTP 401 code 401 on every cashout endpoint', async () => {
    for (const [method, path] of paths) {
      expectCode(await cashoutCall(sb.url, path, { ...cashoutBody(), pass: 'wrong' }, { method }), 401, 401);
      expectCode(
        await cashoutCall(sb.url, path, { ...cashoutBody(), login: 'nobody' }, { method }),
        401,
        401,
      );
    }
  });

  it('a missing or wrong Payload-Signature answers 302', async () => {
    for (const [method, path] of paths) {
      expectCode(await cashoutCall(sb.url, path, cashoutBody(), { method, signature: null }), 412, 302);
      expectCode(await cashoutCall(sb.url, path, cashoutBody(), { method, secret: 'other' }), 412, 302);
    }
  });

  it('the deposit secret does not sign cashouts (separate keys)', async () => {
    expectCode(
      await cashoutCall(sb.url, '/v3/cashout', cashoutBody(), { secret: ACCOUNT.depositSecret }),
      412,
      302,
    );
  });

  it('a body that is not JSON answers 502', async () => {
    expectCode(await cashoutCall(sb.url, '/v3/cashout', {}, { raw: '{"login":' }), 400, 502);
  });
});

describe('bank codes: Bearer read-only key', () => {
  it('answers the banks of a country with the read-only key', async () => {
    const { request } = await import('undici');
    const res = await request(`${sb.url}/v3/banks?country=BR`, {
      headers: { authorization: `Bearer ${ACCOUNT.readOnlyKey}` },
    });
    expect(res.statusCode).toBe(200);
    const banks = (await res.body.json()) as { code: number; name: string }[];
    expect(banks.length).toBeGreaterThan(3);
    for (const b of banks) {
      expect(typeof b.code).toBe('number');
      expect(typeof b.name).toBe('string');
    }
  });

  it('rejects a missing, wrong or non-Bearer key with 401, and the deposit signature is not accepted', async () => {
    const { request } = await import('undici');
    for (const authorization of [
      undefined,
      'Bearer nope',
      ACCOUNT.readOnlyKey,
      `Basic ${ACCOUNT.readOnlyKey}`,
    ]) {
      const res = await request(`${sb.url}/v3/banks?country=BR`, {
        headers: authorization ? { authorization } : {},
      });
      expect(res.statusCode).toBe(401);
      await res.body.dump();
    }
    expect((await signed(sb.url, '/v3/banks?country=BR')).status).toBe(401);
  });

  it('answers 400 for a missing or malformed country', async () => {
    const { request } = await import('undici');
    for (const q of ['', '?country=brazil', '?country=br']) {
      const res = await request(`${sb.url}/v3/banks${q}`, {
        headers: { authorization: `Bearer ${ACCOUNT.readOnlyKey}` },
      });
      expect(res.statusCode).toBe(400);
      await res.body.dump();
    }
  });
});

describe('idempotency keys on POST', () => {
  it('the same key and body give the first answer again and create nothing new', async () => {
    const body = oneShotBody({ invoice_id: 'idem-1' });
    const first = await signed(sb.url, '/v3/deposits', { body, idempotencyKey: 'key-1' });
    expect(first.status).toBe(200);
    const before = sb.control.deps.engine.deposits.size;
    const again = await signed(sb.url, '/v3/deposits', { body, idempotencyKey: 'key-1' });
    expect(again.status).toBe(200);
    expect(again.text).toBe(first.text);
    expect(sb.control.deps.engine.deposits.size).toBe(before);
  });

  it('the same key with another body answers 104', async () => {
    await signed(sb.url, '/v3/deposits', {
      body: oneShotBody({ invoice_id: 'idem-2' }),
      idempotencyKey: 'key-2',
    });
    const other = await signed(sb.url, '/v3/deposits', {
      body: oneShotBody({ invoice_id: 'idem-3' }),
      idempotencyKey: 'key-2',
    });
    expectCode(other, 400, 104);
    // Without a key, a repeated invoice is a new request (and a duplicate invoice_id is refused).
    const dup = await signed(sb.url, '/v3/deposits', { body: oneShotBody({ invoice_id: 'idem-2' }) });
    expect(dup.status).toBe(400);
    expect(dup.json.details).toContain('invoice_id: must be unique (already used)');
  });

  it('applies to cashout, card and refund creation too', async () => {
    const c = cashoutBody();
    const a = await cashoutCall(sb.url, '/v3/cashout', c, { idempotencyKey: 'ck' });
    const b = await cashoutCall(sb.url, '/v3/cashout', c, { idempotencyKey: 'ck' });
    expect(a.status).toBe(200);
    expect(b.text).toBe(a.text);
    expectCode(await cashoutCall(sb.url, '/v3/cashout', cashoutBody(), { idempotencyKey: 'ck' }), 400, 104);

    const card = { country: 'BR', currency: 'BRL', amount: 10, client_ip: '203.0.113.1' };
    const k1 = await signed(sb.ccUrl, '/v3/deposits', { body: card, idempotencyKey: 'cc' });
    const k2 = await signed(sb.ccUrl, '/v3/deposits', {
      body: { ...card, amount: 11 },
      idempotencyKey: 'cc',
    });
    expect(k1.status).toBe(400);
    expectCode(k2, 400, 104);
  });

  it('the control API lists accounts without their secrets', async () => {
    const res = await control(sb.url, '/accounts');
    expect(res.json[0].login).toBe(ACCOUNT.login);
    expect(JSON.stringify(res.json)).not.toContain(ACCOUNT.depositSecret);
  });
});

describe('card-data endpoint restricted to PCI-compliant accounts', () => {
  it('answers 403 to an account without PCI attestation, and its other calls work', async () => {
    const other = await startTestSandbox({
      accounts: [
        {
          name: 'nopci',
          login: 'nopci-login',
          depositSecret: 'nopci-secret',
          cashoutLogin: 'nopci-co',
          cashoutPass: 'p',
          cashoutSecret: 's',
          readOnlyKey: 'ro',
          notificationUrl: null,
          pci: false,
        },
      ],
    });
    try {
      const as = { login: 'nopci-login', secret: 'nopci-secret' };
      const card = await signed(other.ccUrl, '/v3/deposits', { ...as, body: { country: 'BR', amount: 1 } });
      expect(card.status).toBe(403);
      expect(card.json).toMatchObject({ code: 100, type: 'NOT_PCI_COMPLIANT' });
      expect((await signed(other.url, '/v3/deposits', { ...as, body: oneShotBody() })).status).toBe(200);
      // The default account's deposits are not visible to this one.
      const mine = await signed(other.url, '/v3/deposits', { body: oneShotBody() });
      expect((await signed(other.url, `/v3/deposits/${mine.json.deposit_id}`, as)).status).toBe(404);
    } finally {
      await other.close();
    }
  });
});
