import { createHmac } from 'node:crypto';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { SandboxAccount } from '../../src/sandbox/accounts.ts';
import { waitFor } from '../helpers/wait.ts';
import {
  ACCOUNT,
  cardBody,
  cashoutBody,
  cashoutCall,
  control,
  oneShotBody,
  signed,
  startReceiver,
  startTestSandbox,
} from './helpers.ts';

const MIN = 60_000;
const hmac = (key: string, msg: string) => createHmac('sha256', key).update(msg).digest('hex');

let receiver: Awaited<ReturnType<typeof startReceiver>>;
let answer: (n: number) => number = () => 200;
let sb: Awaited<ReturnType<typeof startTestSandbox>>;

beforeAll(async () => {
  receiver = await startReceiver((n) => answer(n));
});
afterAll(async () => {
  await receiver.close();
});
beforeEach(async () => {
  answer = () => 200;
  receiver.received.length = 0;
  sb = await startTestSandbox({
    notificationBaseUrl: receiver.url,
    defaultNotificationUrl: 'http://merchant.local/default',
  });
});
afterEach(async () => {
  await sb.close();
});

/** Waits until no notification attempt is due: each one due by the sandbox clock has been made. */
const settle = () =>
  waitFor('every due notification attempt to be made', () => {
    const now = sb.clock.now();
    return ![...sb.control.deps.webhooks.pending.values()].some((d) => d.dueAt <= now);
  });

describe('notifications (docs/provider.md)', () => {
  it('deposit: {"deposit_id"} to notification_url mapped onto the local base, signed like a request', async () => {
    const c = await signed(sb.url, '/v3/deposits', {
      body: oneShotBody({ notification_url: 'https://merchant.example/hooks/deposit?src=psp' }),
    });
    await control(sb.url, `/deposits/${c.json.deposit_id}/pay`, {});
    await settle();
    expect(receiver.received).toHaveLength(1);
    const hook = receiver.received[0]!;
    expect(hook.path).toBe('/hooks/deposit?src=psp');
    expect(hook.body).toBe(`{"deposit_id":${c.json.deposit_id}}`);
    expect(hook.headers['x-login']).toBe(ACCOUNT.login);
    const xDate = String(hook.headers['x-date']);
    expect(xDate).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
    expect(hook.headers.authorization).toBe(
      `D24 ${hmac(ACCOUNT.depositSecret, xDate + ACCOUNT.login + hook.body)}`,
    );
    const log = (await control(sb.url, `/webhooks?entity_id=${c.json.deposit_id}`)).json;
    expect(log.at(-1)).toMatchObject({
      outcome: 'delivered',
      httpStatus: 200,
      status: 'COMPLETED',
      attempt: 1,
    });
  });

  it("goes to the account's default URL (http) when the request had none; 3DS sends one", async () => {
    const c = await signed(sb.ccUrl, '/v3/deposits', { body: cardBody('5100000000000065') });
    await settle();
    expect(receiver.received.map((r) => r.path)).toEqual(['/default']);
    await control(sb.url, `/deposits/${c.json.deposit_id}/authenticate`, {});
    await settle();
    expect(receiver.received).toHaveLength(2);
  });

  it('cashout: a form with control = UPPER hex HMAC(Be4 + external_id + Bo7), no status', async () => {
    const body = cashoutBody({ comments: 'payout 1' });
    const id = Number((await cashoutCall(sb.url, '/v3/cashout', body)).json.cashout_id);
    await control(sb.url, `/cashouts/${id}/deliver`, {});
    await settle();
    const hook = receiver.received[0]!;
    expect(hook.path).toBe('/hooks/cashout');
    expect(hook.headers['content-type']).toBe('application/x-www-form-urlencoded');
    const form = Object.fromEntries(new URLSearchParams(hook.body));
    expect(form).toMatchObject({
      external_id: body.external_id,
      cashout_id: String(id),
      comments: 'payout 1',
    });
    expect(form.control).toBe(hmac(ACCOUNT.cashoutSecret, `Be4${body.external_id}Bo7`).toUpperCase());
    expect(form.date).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/);
    expect(form.bank_reference_id).toBeTruthy();
    expect(form.status).toBeUndefined();
  });

  it('refund: {"refund_id"} on every change', async () => {
    const d = (await signed(sb.ccUrl, '/v3/deposits', { body: cardBody() })).json.deposit_id;
    const r = await signed(sb.url, '/v3/refunds', {
      body: { deposit_id: d, amount: 5, notification_url: 'https://merchant.example/hooks/refund' },
    });
    for (const a of ['deliver', 'confirm']) await control(sb.url, `/refunds/${r.json.refund_id}/${a}`, {});
    await settle();
    const bodies = receiver.received.filter((h) => h.path === '/hooks/refund').map((h) => h.body);
    expect(bodies).toEqual([`{"refund_id":${r.json.refund_id}}`, `{"refund_id":${r.json.refund_id}}`]);
  });

  it('the control API resends a notification on demand', async () => {
    const c = await signed(sb.url, '/v3/deposits', {
      body: oneShotBody({ notification_url: 'https://m.example/r' }),
    });
    const res = await control(sb.url, `/webhooks/deposits/${c.json.deposit_id}/resend`, {});
    expect(res.status).toBe(202);
    await settle();
    expect(receiver.received.map((r) => r.body)).toEqual([`{"deposit_id":${c.json.deposit_id}}`]);
    expect((await control(sb.url, '/webhooks/deposits/1/resend', {})).status).toBe(404);
  });

  it('retries a non-2xx after 5, 25, 125, 625 and 3125 minutes of sandbox time, then gives up', async () => {
    answer = () => 500;
    const c = await signed(sb.url, '/v3/deposits', {
      body: oneShotBody({ notification_url: 'https://m.example/h' }),
    });
    await control(sb.url, `/deposits/${c.json.deposit_id}/pay`, {});
    await settle();
    expect(receiver.received).toHaveLength(1);
    await sb.clock.advance(4 * MIN);
    await settle();
    expect(receiver.received).toHaveLength(1);
    let expected = 1;
    for (const minutes of [1, 25, 125, 625, 3125]) {
      await sb.clock.advance(minutes * MIN);
      await settle();
      expected++;
      expect(receiver.received).toHaveLength(expected);
    }
    await sb.clock.advance(100_000 * MIN);
    await settle();
    expect(receiver.received).toHaveLength(6);
    const log = sb.control.deps.webhooks.log.filter((l) => l.entityId === c.json.deposit_id);
    expect(log.map((l) => l.outcome)).toEqual([...Array(5).fill('scheduled_retry'), 'gave_up']);
  });

  it('stops retrying once the receiver answers 2xx', async () => {
    answer = (n) => (n <= 2 ? 503 : 204);
    const c = await signed(sb.url, '/v3/deposits', {
      body: oneShotBody({ notification_url: 'https://m.example/h' }),
    });
    await control(sb.url, `/deposits/${c.json.deposit_id}/pay`, {});
    await settle();
    await sb.clock.advance(5 * MIN);
    await settle();
    await sb.clock.advance(25 * MIN);
    await settle();
    await sb.clock.advance(10_000 * MIN);
    await settle();
    expect(receiver.received).toHaveLength(3);
    const outcomes = sb.control.deps.webhooks.log
      .filter((l) => l.entityId === c.json.deposit_id)
      .map((l) => l.outcome);
    expect(outcomes).toEqual(['scheduled_retry', 'scheduled_retry', 'delivered']);
  });
});

describe('webhook faults', () => {
  const payOne = async () => {
    const c = await signed(sb.url, '/v3/deposits', {
      body: oneShotBody({ notification_url: 'https://m.example/h' }),
    });
    await control(sb.url, `/deposits/${c.json.deposit_id}/pay`, {});
    await settle();
    return c.json.deposit_id as number;
  };

  it('drop: nothing is sent and the log says dropped', async () => {
    await control(sb.url, '/faults', { webhooks: { dropRate: 1 } }, 'PUT');
    const id = await payOne();
    expect(receiver.received).toHaveLength(0);
    expect(sb.control.deps.webhooks.log.find((l) => l.entityId === id)?.outcome).toBe('dropped');
  });

  it('duplicate: the same notification arrives twice', async () => {
    await control(sb.url, '/faults', { webhooks: { duplicateRate: 1 } }, 'PUT');
    await payOne();
    expect(receiver.received).toHaveLength(2);
    expect(receiver.received[0]!.body).toBe(receiver.received[1]!.body);
  });

  it('delay: nothing arrives until the sandbox clock passes the delay', async () => {
    await control(sb.url, '/faults', { webhooks: { delayMs: 10 * MIN } }, 'PUT');
    await payOne();
    expect(receiver.received).toHaveLength(0);
    await sb.clock.advance(10 * MIN);
    await settle();
    expect(receiver.received).toHaveLength(1);
  });

  it('reorder: a held-back notification arrives after a later one', async () => {
    await control(sb.url, '/faults', { webhooks: { reorderRate: 1, reorderDelayMs: MIN } }, 'PUT');
    const first = await payOne();
    await control(sb.url, '/faults', {}, 'PUT');
    const second = await payOne();
    await sb.clock.advance(MIN);
    await settle();
    expect(receiver.received.map((r) => JSON.parse(r.body).deposit_id)).toEqual([second, first]);
  });
});

describe('endpoint faults', () => {
  it('5xx, 429 with Retry-After, latency and hanging connections, per endpoint with * as fallback', async () => {
    const c = await signed(sb.url, '/v3/deposits', { body: oneShotBody() });
    const path = `/v3/deposits/${c.json.deposit_id}`;
    await control(
      sb.url,
      '/faults',
      { endpoints: { 'deposit.status': { errorRate: 1, errorStatus: 502 } } },
      'PUT',
    );
    expect((await signed(sb.url, path)).status).toBe(502);
    expect((await cashoutCall(sb.url, '/v3/cashout/status', { cashout_id: 1 })).json.code).toBe(509);

    await control(
      sb.url,
      '/faults',
      { endpoints: { '*': { rateLimitRate: 1, retryAfterSeconds: 7 } } },
      'PUT',
    );
    const limited = await signed(sb.url, path);
    expect(limited.status).toBe(429);
    expect(limited.headers['retry-after']).toBe('7');
    expect((await cashoutCall(sb.url, '/v3/cashout/status', { cashout_id: 1 })).status).toBe(429);

    await control(sb.url, '/faults', { endpoints: { 'deposit.status': { latencyMs: 150 } } }, 'PUT');
    const t0 = Date.now();
    expect((await signed(sb.url, path)).status).toBe(200);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(140);

    await control(sb.url, '/faults', { endpoints: { 'deposit.status': { hangRate: 1 } } }, 'PUT');
    await expect(
      request(sb.url + path, { headersTimeout: 300, headers: { 'x-date': 'x' } }).then((r) => r.statusCode),
    ).rejects.toThrow(/timeout/i);

    await control(sb.url, '/faults', {}, 'PUT');
    expect((await signed(sb.url, path)).status).toBe(200);
    expect((await control(sb.url, '/faults', { endpoints: { x: { errorRate: 2 } } }, 'PUT')).status).toBe(
      400,
    );
  });

  it('late rejection turns COMPLETED cashouts and refunds REJECTED after the configured delay', async () => {
    await control(
      sb.url,
      '/faults',
      { lateRejection: { cashoutRate: 1, refundRate: 1, delayMs: 24 * 60 * MIN } },
      'PUT',
    );
    const id = Number((await cashoutCall(sb.url, '/v3/cashout', cashoutBody())).json.cashout_id);
    await control(sb.url, `/cashouts/${id}/deliver`, {});
    await control(sb.url, `/cashouts/${id}/confirm`, {});
    const d = (await signed(sb.ccUrl, '/v3/deposits', { body: cardBody() })).json.deposit_id;
    const r = (await signed(sb.url, '/v3/refunds', { body: { deposit_id: d } })).json.refund_id;
    await control(sb.url, `/refunds/${r}/deliver`, {});
    await control(sb.url, `/refunds/${r}/confirm`, {});
    await sb.clock.advance(23 * 60 * MIN);
    expect((await control(sb.url, `/cashouts/${id}`)).json.status).toBe('COMPLETED');
    await sb.clock.advance(60 * MIN);
    const cashout = (await control(sb.url, `/cashouts/${id}`)).json;
    expect(cashout.status).toBe('REJECTED');
    expect(cashout.history.at(-1)).toMatchObject({
      from: 'COMPLETED',
      to: 'REJECTED',
      trigger: 'late_rejection',
    });
    // A completed cashout returned by the bank: code 826, "Withdrawal reversed" (docs/provider.md).
    const status = await cashoutCall(sb.url, '/v3/cashout/status', { cashout_id: id });
    expect(status.json).toMatchObject({ rejection_code: 826, rejection_reason: 'Withdrawal reversed' });
    expect((await signed(sb.url, `/v3/refunds/${r}`)).json.status).toBe('REJECTED');
  });
});

describe('the clock', () => {
  it('expires an unpaid deposit at its expiration_date and cancels it 7 days later', async () => {
    const c = await signed(sb.url, '/v3/deposits', { body: oneShotBody({ expiration: 30 }) });
    const id = c.json.deposit_id;
    await sb.clock.advance(29 * MIN);
    expect((await signed(sb.url, `/v3/deposits/${id}`)).json.status).toBe('PENDING');
    await sb.clock.advance(1 * MIN);
    expect((await signed(sb.url, `/v3/deposits/${id}`)).json.status).toBe('EXPIRED');
    await sb.clock.advance(7 * 24 * 60 * MIN);
    const st = await signed(sb.url, `/v3/deposits/${id}`);
    expect(st.json.status).toBe('CANCELLED');
    const history = (await control(sb.url, `/deposits/${id}`)).json.history;
    expect(history.map((h: { trigger: string }) => h.trigger)).toEqual(['api', 'clock', 'clock']);
  });

  it('does not expire a paid deposit', async () => {
    const c = await signed(sb.url, '/v3/deposits', { body: oneShotBody({ expiration: 30 }) });
    await control(sb.url, `/deposits/${c.json.deposit_id}/pay`, {});
    await sb.clock.advance(24 * 60 * MIN);
    expect((await signed(sb.url, `/v3/deposits/${c.json.deposit_id}`)).json.status).toBe('COMPLETED');
  });

  it('the control API advances a manual clock', async () => {
    const before = Date.parse((await control(sb.url, '/clock')).json.now);
    const after = Date.parse((await control(sb.url, '/clock/advance', { ms: 3_600_000 })).json.now);
    expect(after - before).toBe(3_600_000);
  });
});

describe('automatic mode', () => {
  it('moves every entity along realistic paths to a final status on the clock', async () => {
    await control(sb.url, '/auto', { enabled: true, minDelayMs: 1000, maxDelayMs: 60_000 }, 'PUT');
    const cashouts: number[] = [];
    const deposits: number[] = [];
    for (let i = 0; i < 12; i++) {
      cashouts.push(Number((await cashoutCall(sb.url, '/v3/cashout', cashoutBody())).json.cashout_id));
      deposits.push((await signed(sb.url, '/v3/deposits', { body: oneShotBody() })).json.deposit_id);
    }
    for (let i = 0; i < 20; i++) await sb.clock.advance(60_000);
    for (const id of cashouts) {
      expect(['COMPLETED', 'REJECTED']).toContain((await control(sb.url, `/cashouts/${id}`)).json.status);
    }
    await sb.clock.advance(2 * 24 * 60 * MIN);
    for (const id of deposits) {
      const d = (await control(sb.url, `/deposits/${id}`)).json;
      expect(['COMPLETED', 'DECLINED', 'CANCELLED', 'EXPIRED']).toContain(d.status);
      expect(
        d.history.slice(1).every((h: { trigger: string }) => ['auto', 'clock'].includes(h.trigger)),
      ).toBe(true);
    }
  });
});

describe('automatic mode switched on later', () => {
  it('plans the entities that were already waiting', async () => {
    const id = Number((await cashoutCall(sb.url, '/v3/cashout', cashoutBody())).json.cashout_id);
    await sb.clock.advance(24 * 60 * MIN);
    expect((await control(sb.url, `/cashouts/${id}`)).json.status).toBe('PENDING');
    await control(sb.url, '/auto', { enabled: true, minDelayMs: 1000, maxDelayMs: 5000 }, 'PUT');
    for (let i = 0; i < 5; i++) await sb.clock.advance(5000);
    expect(['COMPLETED', 'REJECTED']).toContain((await control(sb.url, `/cashouts/${id}`)).json.status);
  });
});

describe('ground truth', () => {
  const GT: SandboxAccount = {
    name: 'gt',
    login: 'gt-login',
    depositSecret: 'gt-deposit-secret',
    cashoutLogin: 'gt-cashout',
    cashoutPass: 'gt-pass',
    cashoutSecret: 'gt-cashout-secret',
    readOnlyKey: 'gt-ro',
    notificationUrl: null,
    pci: true,
  };

  it('computes balances per account and currency from entity states with the effect table', async () => {
    await sb.close();
    sb = await startTestSandbox({ accounts: [GT] });
    const as = { login: GT.login, secret: GT.depositSecret };
    const dep = async (extra: Record<string, unknown>) =>
      (await signed(sb.url, '/v3/deposits', { ...as, body: oneShotBody(extra) })).json.deposit_id as number;
    const co = async (amount: number) => {
      const raw = JSON.stringify({
        login: GT.cashoutLogin,
        pass: GT.cashoutPass,
        ...cashoutBody({ amount }),
      });
      return Number(
        (await cashoutCall(sb.url, '/v3/cashout', {}, { raw, secret: GT.cashoutSecret })).json.cashout_id,
      );
    };
    const a = await dep({ amount: 100.5 });
    await control(sb.url, `/deposits/${a}/pay`, {});
    await control(sb.url, `/deposits/${await dep({ amount: 200, fee_on_payer: true })}/pay`, {});
    await control(sb.url, `/deposits/${await dep({ amount: 50, test: true })}/pay`, {});
    const early = await dep({ amount: 10, early_release: true });
    await control(sb.url, `/deposits/${early}/pay`, {});
    await control(sb.url, `/deposits/${early}/cancel`, {});
    await control(
      sb.url,
      `/deposits/${await dep({ amount: 30, crypto: { currency: 'USDT', wallet: 'w', network: 'RSK' } })}/pay`,
      {},
    );
    await dep({ amount: 999 }); // unpaid
    await co(25.5); // PENDING
    const g = await co(40);
    await control(sb.url, `/cashouts/${g}/deliver`, {});
    await control(sb.url, `/cashouts/${g}/confirm`, {});
    const h = await co(10);
    for (const x of ['deliver', 'confirm', 'return']) await control(sb.url, `/cashouts/${h}/${x}`, {});
    await control(sb.url, `/cashouts/${await co(5)}/cancel`, {});
    const testDeposit = await dep({ amount: 8, test: true });
    await control(sb.url, `/deposits/${testDeposit}/pay`, {});
    const testRefund = await signed(sb.url, '/v3/refunds', {
      ...as,
      body: {
        deposit_id: testDeposit,
        amount: 3,
        bank_account: { beneficiary: 'Ana Silva', account_number: '1' },
      },
    });
    expect(testRefund.status).toBe(200);
    const refund = await signed(sb.url, '/v3/refunds', {
      ...as,
      body: { deposit_id: a, amount: 20, bank_account: { beneficiary: 'Ana Silva', account_number: '1' } },
    });
    expect(refund.status).toBe(200);

    const rows = (await control(sb.url, '/balances?account=gt')).json;
    expect(rows).toEqual([
      {
        account: 'gt',
        currency: 'BRL',
        // 100.50 - fee 1.51 (1.5% rounded) + 200.00 (fee on payer) - 25.50 - 40.00 - 20.00
        available: '213.49',
        reserved: '45.50',
        deposits: '300.50',
        fees: '1.51',
        payouts: '40.00',
        refunds: '0.00',
        // 50.00 - 0.75 and 8.00 - 0.12, less the 3.00 refund of the test deposit
        test_available: '54.13',
        crypto_in_transit: '30.00',
        crypto_wallets: '0.00',
      },
    ]);
    expect((await control(sb.url, '/balances?account=sandbox')).json).toEqual([]);

    const exported = (await control(sb.url, '/export?account=gt')).json;
    expect(exported.deposits).toHaveLength(7);
    expect(exported.cashouts).toHaveLength(4);
    expect(exported.refunds).toHaveLength(2);
    const returned = exported.cashouts.find((c: { id: number }) => c.id === h);
    expect(returned.history.map((x: { to: string }) => x.to)).toEqual([
      'PENDING',
      'DELIVERED',
      'COMPLETED',
      'REJECTED',
    ]);
    expect(returned.amount).toBe('10.00');
    expect(JSON.stringify(exported)).not.toContain('cachedBody');
  });
});

describe('seeds', () => {
  it('the same seed repeats every random choice; another seed does not', async () => {
    const run = async (seed: number) => {
      const s = await startTestSandbox({ seed });
      try {
        const out: unknown[] = [];
        for (let i = 0; i < 3; i++) {
          const r = await signed(s.url, '/v3/deposits', {
            body: { country: 'BR', currency: 'BRL', amount: 10 },
          });
          out.push(
            r.json.merchant_invoice_id,
            r.json.user_id,
            new URL(r.json.redirect_url).pathname,
            r.json.deposit_id,
          );
        }
        return out;
      } finally {
        await s.close();
      }
    };
    const a = await run(42);
    expect(await run(42)).toEqual(a);
    expect(await run(43)).not.toEqual(a);
  });
});

describe('notification URL mapping', () => {
  it('without a base URL the notification goes to the URL as given', async () => {
    sb.control.deps.webhooks.notificationBaseUrl = null;
    const c = await signed(sb.url, '/v3/deposits', {
      body: oneShotBody({ notification_url: 'https://127.0.0.1:1/x' }),
    });
    await control(sb.url, `/deposits/${c.json.deposit_id}/pay`, {});
    await waitFor('the notification in the delivery log', () =>
      sb.control.deps.webhooks.log.some((l) => l.entityId === c.json.deposit_id),
    );
    const entry = sb.control.deps.webhooks.log.find((l) => l.entityId === c.json.deposit_id)!;
    expect(entry.url).toBe('https://127.0.0.1:1/x');
    expect(entry.outcome).toBe('scheduled_retry');
  });
});
