import { createServer } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProviderClient } from '../../src/provider/client.ts';
import { createProviderClient } from '../../src/provider/client.ts';
import { ProviderError } from '../../src/provider/errors.ts';
import { RealClock } from '../../src/sandbox/clock.ts';
import { startSandbox } from '../../src/sandbox/main.ts';
import { providerAccountFor } from '../../src/sandbox/traffic-client.ts';
import { waitFor } from '../helpers/wait.ts';
import { ACCOUNT, cashoutBody, cashoutCall, control, PAYER, signed, startTestSandbox } from './helpers.ts';

let sb: Awaited<ReturnType<typeof startTestSandbox>>;
let client: ProviderClient;
beforeAll(async () => {
  sb = await startTestSandbox();
  client = createProviderClient(
    providerAccountFor(ACCOUNT, { url: sb.url, ccUrl: sb.ccUrl }, 'https://merchant.example/hooks/cashout'),
    { retries: 0 },
  );
});
afterAll(async () => {
  await sb.close();
});

async function providerError(p: Promise<unknown>): Promise<ProviderError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ProviderError);
    return err as ProviderError;
  }
  throw new Error('expected the call to fail');
}

describe("every endpoint through the project's provider client", () => {
  it('deposits: create ONE_SHOT and HOSTED, read the status with lossless amounts', async () => {
    const one = await client.createDeposit({
      country: 'BR',
      currency: 'BRL',
      amount: 123456789012345678_99n,
      payment_method: 'IX',
      payer: PAYER,
    });
    expect(one.checkout_type).toBe('ONE_SHOT');
    const st = await client.getDeposit(one.deposit_id);
    expect(st.amount).toBe(123456789012345678_99n);
    expect(st.status).toBe('PENDING');
    const hosted = await client.createDeposit({ country: 'BR', currency: 'BRL', amount: '10.00' });
    expect(hosted.checkout_type).toBe('HOSTED');
    expect(hosted.redirect_url).toContain('/checkout/');
  });

  it('card deposits: success, rejection and 3DS', async () => {
    const card = (number: string) => ({
      country: 'BR',
      currency: 'BRL',
      amount: 2500n,
      client_ip: '203.0.113.9',
      payer: PAYER,
      credit_card: {
        card_number: number,
        cvv: '123',
        expiration_month: '7',
        expiration_year: '39',
        holder_name: 'Ana Silva',
      },
    });
    expect((await client.createCardDeposit(card('4111111111111111'))).payment_info.result).toBe('SUCCESS');
    const rejected = await client.createCardDeposit(card('5100000000000032'));
    expect(rejected.payment_info).toMatchObject({ result: 'REJECTED', reason_code: 'INSUFFICIENT_FUNDS' });
    const threeDs = await client.createCardDeposit(card('370000000000069'));
    expect(threeDs.payment_info.result).toBe('PENDING_AUTHENTICATION');
    expect(threeDs.authentication_url).toBeTruthy();
  });

  it('cashouts: create, status by id and external id, hold, release, cancel; 510 and 509 as typed errors', async () => {
    const created = await client.createCashout({
      external_id: 'client-ext-1',
      country: 'BR',
      amount: '75.25',
      document_id: '12345678909',
      beneficiary_name: 'Ana Silva',
      bank_code: '237',
    });
    const id = created.cashout_id;
    expect((await client.getCashoutStatus({ cashout_id: id })).cashout_status).toBe(0);
    const byExt = await client.getCashoutStatus({ external_id: 'client-ext-1' });
    expect(byExt.amount).toBe(7525n);
    expect((await client.updateCashoutStatus(id, 'ON_HOLD')).cashout_status).toBe(5);
    expect((await client.updateCashoutStatus(id, 'PENDING')).cashout_status).toBe(0);
    await control(sb.url, `/cashouts/${id}/deliver`, {});
    const e510 = await providerError(client.cancelCashout({ cashout_id: id, external_id: 'client-ext-1' }));
    expect(e510.providerCode).toBe(510);
    expect(e510.status).toBe(412);
    const e509 = await providerError(client.getCashoutStatus({ cashout_id: 1 }));
    expect(e509.providerCode).toBe(509);
    const other = await client.createCashout({
      external_id: 'client-ext-2',
      country: 'BR',
      amount: '5.00',
      document_id: '1',
      beneficiary_name: 'B',
      on_hold: true,
    });
    expect((await client.cancelCashout({ cashout_id: other.cashout_id })).cashout_status).toBe(2);
    const dup = await providerError(
      client.createCashout({
        external_id: 'client-ext-2',
        country: 'BR',
        amount: '5.00',
        document_id: '1',
        beneficiary_name: 'B',
      }),
    );
    expect(dup.providerCode).toBe(511);
  });

  it('refunds: create, status with voucher, 802 and 208 as typed errors', async () => {
    const d = await client.createDeposit({
      country: 'BR',
      currency: 'BRL',
      amount: '80.00',
      payment_method: 'IX',
      payer: PAYER,
    });
    await control(sb.url, `/deposits/${d.deposit_id}/pay`, {});
    const r = await client.createRefund({
      deposit_id: d.deposit_id,
      amount: '30.00',
      bank_account: { beneficiary: 'Ana Silva', bank_code: '341', account_number: '1' },
    });
    const view = await client.getRefund(r.refund_id, { voucher: true });
    expect(view.status).toBe('PENDING');
    expect(view.amount).toBe(3000n);
    expect(view.voucherPdf?.subarray(0, 5).toString()).toBe('%PDF-');
    const e802 = await providerError(
      client.createRefund({
        deposit_id: d.deposit_id,
        amount: '50.01',
        bank_account: { beneficiary: 'Ana Silva' },
      }),
    );
    expect(e802.providerCode).toBe(802);
    const e208 = await providerError(client.getRefund(424242));
    expect(e208.providerCode).toBe(208);
    expect(e208.status).toBe(404);
  });

  it('banks: the read-only key lists the banks of a country', async () => {
    const banks = await client.listBanks('MX');
    expect(banks.map((b) => b.name)).toContain('BANORTE');
  });

  it('bank codes: "001", "1" and 1 name the bank GET /v3/banks lists as 1; the client sends text', async () => {
    const banks = await signed(sb.url, '/v3/banks?country=BR', {
      headers: { authorization: `Bearer ${ACCOUNT.readOnlyKey}` },
      omit: ['x-date', 'x-login'],
    });
    // The bank list answers numbers, as the spec shows.
    expect(banks.text).toContain('"code":1,');
    const sent: unknown[] = [];
    for (const [i, code] of [['001'], ['1'], [1]].entries()) {
      const raw = JSON.stringify({
        login: ACCOUNT.cashoutLogin,
        pass: ACCOUNT.cashoutPass,
        ...cashoutBody({ external_id: `bank-form-${i}`, bank_code: code[0] }),
      });
      const res = await cashoutCall(sb.url, '/v3/cashout', {}, { raw });
      expect(res.status).toBe(200);
      const st = await cashoutCall(sb.url, '/v3/cashout/status', { cashout_id: Number(res.json.cashout_id) });
      expect(st.json.bank[0].name).toBe('Banco do Brasil S.A.');
      sent.push(st.json.bank[0].code);
    }
    // Stored and answered as the merchant wrote it: leading zeros kept (a JSON number comes back as its text).
    expect(sent).toEqual(['001', '1', '1']);
    const unknown = await cashoutCall(sb.url, '/v3/cashout', cashoutBody({ bank_code: '999' }));
    expect(unknown.json.code).toBe(303);

    // The provider client writes bank_code as text whatever it is given.
    const bodies: string[] = [];
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => {
        body += c;
      });
      req.on('end', () => {
        bodies.push(body);
        res.setHeader('content-type', 'application/json');
        res.end('{"cashout_id":"8405147"}');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    try {
      const capture = createProviderClient(
        providerAccountFor(ACCOUNT, { url: `http://127.0.0.1:${port}`, ccUrl: `http://127.0.0.1:${port}` }),
        { retries: 0 },
      );
      for (const code of ['001', 1] as const) {
        await capture.createCashout({
          external_id: `bank-client-${code}`,
          country: 'BR',
          amount: '10.00',
          document_id: '12345678909',
          beneficiary_name: 'Ana',
          bank_code: code,
          notification_url: 'https://merchant.example/hooks/cashout',
        });
      }
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
    expect(bodies.map((b) => JSON.parse(b).bank_code)).toEqual(['001', '1']);
  });

  it('authentication failures come back as the provider codes', async () => {
    const wrong = createProviderClient(
      {
        ...providerAccountFor(ACCOUNT, { url: sb.url, ccUrl: sb.ccUrl }),
        depositSecret: 'nope',
        cashoutPass: 'nope',
      },
      { retries: 0 },
    );
    expect((await providerError(wrong.getDeposit(3000000001))).providerCode).toBe(102);
    expect((await providerError(wrong.getCashoutStatus({ cashout_id: 1 }))).providerCode).toBe(401);
  });
});

describe('traffic through the client', () => {
  it('creates a realistic mix at the given rate and the automatic mode moves it', async () => {
    const live = await startSandbox({
      seed: 3,
      clock: new RealClock({ speed: 600 }),
      auto: { enabled: true, minDelayMs: 1000, maxDelayMs: 30_000 },
    });
    try {
      const count = () => {
        const st = live.control.traffic.status() as Record<string, number>;
        return st.deposit! + st.card! + st.cashout! + st.refund!;
      };
      // Outcomes, not a fixed window: a loaded machine creates fewer per second, never more than the rate.
      const t0 = Date.now();
      live.control.traffic.start(80);
      await waitFor('150 creations', () => count() >= 150, { ms: 30_000, every: 100 });
      live.control.traffic.stop();
      const elapsed = (Date.now() - t0) / 1000;
      const status = live.control.traffic.status() as Record<string, number>;
      expect(status.errors, String(status.lastError)).toBe(0);
      const total = count();
      expect(total).toBeGreaterThanOrEqual(150);
      expect(total / elapsed).toBeLessThan(80 * 1.25);
      expect(status.deposit!).toBeGreaterThan(status.card!);
      expect(status.cashout!).toBeGreaterThan(0);
      expect(status.refund!).toBeGreaterThan(0);
      // Every kind of outcome shows up once enough traffic has moved (random, so wait for it, bounded).
      const moved = () => {
        const { deposits, cashouts } = live.control.exportEntities();
        return (
          deposits.some((d) => d.test === true) &&
          deposits.some((d) => d.card !== null && d.status === 'DECLINED') &&
          cashouts.some((c) => (c.history as { to: string }[])[0]!.to === 'ON_HOLD') &&
          cashouts.some((c) => c.status === 'COMPLETED' || c.status === 'DELIVERED') &&
          deposits.some((d) => d.status === 'COMPLETED' && d.card === null)
        );
      };
      if (!moved()) {
        live.control.traffic.start(40);
        await waitFor('every kind of outcome', moved, { ms: 30_000, every: 100 });
        live.control.traffic.stop();
      }
      const { deposits, cashouts } = live.control.exportEntities();
      expect(deposits.some((d) => d.test === true)).toBe(true);
      expect(deposits.some((d) => d.card !== null && d.status === 'DECLINED')).toBe(true);
      expect(cashouts.some((c) => (c.history as { to: string }[])[0]!.to === 'ON_HOLD')).toBe(true);
      expect(cashouts.some((c) => c.status === 'COMPLETED' || c.status === 'DELIVERED')).toBe(true);
      expect(deposits.some((d) => d.status === 'COMPLETED' && d.card === null)).toBe(true);
      expect((await control(live.url, '/traffic')).json.running).toBe(false);
      // Refunds pick among the newest deposits through this walk: every deposit, newest id first.
      const engine = live.control.deps.engine;
      const walked = [...engine.depositsNewestFirst()].map((d) => d.id);
      expect(walked).toEqual([...engine.deposits.keys()].sort((a, b) => b - a));
      expect(walked.length).toBe(engine.deposits.size);
    } finally {
      await live.close();
    }
  });
});
