/**
 * Settlements in the sandbox, over HTTP: a payout per day at the account's cut-off with value date
 * T+1, gross, fee and net; a negative balance carried over; conversion into a settlement currency with
 * a spread; the settled grosses plus what is unsettled tying to `available`.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { RunningSandbox } from '../../src/sandbox/main.ts';
import { startSandbox } from '../../src/sandbox/main.ts';
import { control, startTestSandbox } from './helpers.ts';
import {
  cashout,
  cents,
  csvOf,
  groundTruth,
  NO_BANK_ANOMALIES,
  paidDeposit,
  settlementsOf,
} from './settlement-helpers.ts';

const MONDAY = Date.UTC(2026, 2, 2, 10, 0, 0);
const day = (n: number, hours = 0, minutes = 0) => Date.UTC(2026, 2, 2 + n, hours, minutes, 1);

let sb: (RunningSandbox & { clock: import('../../src/sandbox/clock.ts').ManualClock }) | undefined;
let plain: RunningSandbox | undefined;

afterEach(async () => {
  await sb?.close();
  await plain?.close();
  sb = undefined;
  plain = undefined;
});

async function start(settlement: Record<string, unknown> = {}, timeZone?: string) {
  const { ManualClock } = await import('../../src/sandbox/clock.ts');
  sb = await startTestSandbox({
    clock: new ManualClock(MONDAY),
    seed: 11,
    bank: NO_BANK_ANOMALIES,
    defaultAccountSettlement: { settlement, ...(timeZone ? { timeZone } : {}) },
  });
  return sb;
}

describe('sandbox settlements', () => {
  it('pays the balance out once a day at the cut-off, value date T+1, gross less the fee', async () => {
    const s = await start();
    // 100.50 BRL by PIX (fee 1.5% = 1.51, rounded half up): 98.99 net; a cashout of 25.50.
    await paidDeposit(s.url, 100.5);
    await cashout(s.url, 25.5);
    expect(await settlementsOf(s.url)).toEqual([]);
    await s.clock.set(day(1));
    const [first, ...none] = await settlementsOf(s.url);
    expect(none).toEqual([]);
    expect(first).toMatchObject({
      settlement_id: '7000001',
      account: 'sandbox',
      period_start: '2026-03-02T10:00:00Z',
      period_end: '2026-03-03T00:00:00Z',
      currency: 'BRL',
      available: '73.49',
      previously_settled: '0.00',
      gross: '73.49',
      settlement_currency: 'BRL',
      rate: '1.000000',
      fees: '1.00',
      net: '72.49',
      value_date: '2026-03-03',
      bank_reference: 'STL-7000001',
    });
    // Nothing moved the next day: no payout. The day after, a new deposit is paid out alone.
    await s.clock.set(day(2, 12));
    expect(await settlementsOf(s.url)).toHaveLength(1);
    await paidDeposit(s.url, 200);
    await s.clock.set(day(3));
    const second = (await settlementsOf(s.url))[1]!;
    expect(second).toMatchObject({
      settlement_id: '7000002',
      period_start: '2026-03-03T00:00:00Z',
      period_end: '2026-03-05T00:00:00Z',
      available: '270.49',
      previously_settled: '73.49',
      gross: '197.00',
      net: '196.00',
      value_date: '2026-03-05',
    });
  });

  it('cuts off in the account time zone and follows a weekly schedule', async () => {
    const s = await start(
      { cutoff: '18:00', schedule: 'weekly', weekday: 3, valueDays: 2 },
      'America/Sao_Paulo',
    );
    const accounts = await control(s.url, '/accounts');
    expect(accounts.json[0]).toMatchObject({
      time_zone: 'America/Sao_Paulo',
      settlement: {
        cutoff: '18:00',
        schedule: 'weekly',
        weekday: 3,
        valueDays: 2,
        currency: null,
        spreadBps: 150,
      },
    });
    await paidDeposit(s.url, 100.5);
    // Wednesday 2026-03-04 18:00 in São Paulo (UTC-3) is 21:00 UTC.
    await s.clock.set(Date.UTC(2026, 2, 4, 20, 59));
    expect(await settlementsOf(s.url)).toEqual([]);
    await s.clock.set(Date.UTC(2026, 2, 4, 21, 0, 1));
    const [only] = await settlementsOf(s.url);
    expect(only).toMatchObject({
      period_end: '2026-03-04T21:00:00Z',
      gross: '98.99',
      value_date: '2026-03-06',
    });
    await paidDeposit(s.url, 100.5);
    await s.clock.set(Date.UTC(2026, 2, 10, 12));
    expect(await settlementsOf(s.url)).toHaveLength(1);
    await s.clock.set(Date.UTC(2026, 2, 11, 21, 0, 1));
    expect((await settlementsOf(s.url))[1]).toMatchObject({
      period_end: '2026-03-11T21:00:00Z',
      gross: '98.99',
    });
  });

  it('carries a negative balance over and pays a move made after a settlement in the next one', async () => {
    const s = await start();
    await paidDeposit(s.url, 100.5);
    await s.clock.set(day(1));
    expect((await settlementsOf(s.url)).map((x) => x.gross)).toEqual(['98.99']);
    const out = await cashout(s.url, 50);
    await control(s.url, `/cashouts/${out}/deliver`, {});
    await control(s.url, `/cashouts/${out}/confirm`, {});
    await s.clock.set(day(2));
    // -50.00: nothing is paid, the balance carries over.
    expect(await settlementsOf(s.url)).toHaveLength(1);
    let truth = await groundTruth(s.url);
    expect(truth.carryOvers).toEqual([
      {
        account: 'sandbox',
        currency: 'BRL',
        cutoff: '2026-03-04T00:00:00Z',
        available: '48.99',
        previously_settled: '98.99',
        balance: '-50.00',
        reason: 'NEGATIVE_BALANCE',
      },
    ]);
    await paidDeposit(s.url, 100.5);
    await s.clock.set(day(3));
    expect((await settlementsOf(s.url))[1]).toMatchObject({ gross: '48.99', net: '47.99' });
    // The cashout settled in no payout yet is returned (826): its money flows into the next settlement.
    expect((await control(s.url, `/cashouts/${out}/return`, {})).status).toBe(200);
    await s.clock.set(day(4));
    expect((await settlementsOf(s.url))[2]).toMatchObject({ gross: '50.00', net: '49.00' });

    truth = await groundTruth(s.url);
    const brl = truth.balances.find((b) => b.currency === 'BRL')!;
    const settled = truth.settlements.reduce((sum, x) => sum + cents(x.gross), 0n);
    const nets = truth.settlements.reduce((sum, x) => sum + cents(x.net) + cents(x.fees), 0n);
    expect(cents(brl.settled!)).toBe(settled);
    // Not converted: nets + fees = grosses; with what is left unsettled they make `available`.
    expect(nets + cents(brl.unsettled!)).toBe(cents(brl.available!));
    expect(brl.unsettled).toBe('0.00');
    // Every settlement's gross is the available balance at its cut-off less what was settled before.
    for (const x of truth.settlements)
      expect(cents(x.available) - cents(x.previously_settled)).toBe(cents(x.gross));
  });

  it('converts into the settlement currency at the market rate less the spread, then takes the fee', async () => {
    const s = await start({ currency: 'USD', spreadBps: 200, fee: { fixed: '0.50', bps: 10 } });
    await paidDeposit(s.url, 100.5);
    await s.clock.set(day(1));
    // BRL -> USD 0.19 (catalogue) less 2% = 0.1862; 98.99 x 0.1862 = 18.431938 -> 18.43;
    // fee 0.50 + 0.1% of 18.43 (1.843 cents -> 2) = 0.52; net 17.91.
    expect(await settlementsOf(s.url)).toEqual([
      expect.objectContaining({
        currency: 'BRL',
        gross: '98.99',
        settlement_currency: 'USD',
        rate: '0.186200',
        converted: '18.43',
        fees: '0.52',
        net: '17.91',
      }),
    ]);
    // A rate given in the configuration wins over the catalogue's.
    await s.close();
    sb = undefined;
    const t = await start({
      currency: 'USD',
      spreadBps: 0,
      rates: { BRL: '0.2000000001' },
      fee: { fixed: '0.00', bps: 0 },
    });
    await paidDeposit(t.url, 100.5);
    await t.clock.set(day(1));
    expect(await settlementsOf(t.url)).toEqual([
      expect.objectContaining({ rate: '0.2000000001', converted: '19.80', net: '19.80' }),
    ]);
  });

  it('settles on the sandbox clock: a fast clock pays out within real seconds', async () => {
    // 200,000 sandbox seconds per real second: a day passes in under half a second.
    plain = await startSandbox({ port: 0, ccPort: 0, seed: 3, speed: 200_000, bank: NO_BANK_ANOMALIES });
    await paidDeposit(plain.url, 100.5);
    let found: Awaited<ReturnType<typeof settlementsOf>> = [];
    const deadline = Date.now() + 10_000;
    while (found.length === 0 && Date.now() < deadline) {
      found = await settlementsOf(plain.url);
      if (found.length === 0) await new Promise((r) => setTimeout(r, 50));
    }
    expect(found[0]).toMatchObject({
      gross: '98.99',
      net: '97.99',
      period_end: expect.stringMatching(/T00:00:00Z$/),
    });
  });
});

describe('sandbox settlements under generated traffic', () => {
  it('ties every settlement and the unsettled rest to available, per currency, through the transactions report', async () => {
    const { ManualClock } = await import('../../src/sandbox/clock.ts');
    sb = await startTestSandbox({
      clock: new ManualClock(MONDAY),
      seed: 5,
      auto: { enabled: true, minDelayMs: 1000, maxDelayMs: 6 * 3600_000 },
      faults: { lateRejection: { cashoutRate: 0.2, refundRate: 0.2, delayMs: 30 * 3600_000 } },
    });
    const s = sb;
    const created = () => {
      const st = s.control.traffic.status() as Record<string, number>;
      return st.deposit! + st.card! + st.cashout! + st.refund!;
    };
    for (let n = 0; n < 5; n++) {
      const target = created() + 60;
      s.control.traffic.start(100);
      const end = Date.now() + 20_000;
      while (created() < target && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
      s.control.traffic.stop();
      for (let h = 0; h < 4; h++) await s.clock.advance(6 * 3600_000);
    }
    await s.clock.advance(3 * 86_400_000);
    const truth = await groundTruth(s.url);
    expect(truth.settlements.length).toBeGreaterThan(5);
    const rows = await csvOf(`${s.url}/_sandbox/reports/transactions?account=sandbox`);
    // The balance's movements: every row but a settlement and its fee (`FEE-<settlement id>`); a fee row
    // under a payment's id gives back the fee of a credit undone (an early release that expired).
    const sweep = (r: Record<string, string | undefined>) =>
      r.type === 'settlement' || (r.type === 'fee' && r.transaction_id!.startsWith('FEE-'));
    const movements = rows.filter((r) => !sweep(r));
    expect(new Set(movements.filter((r) => r.type !== 'fee').map((r) => r.type))).toEqual(
      new Set(['deposit', 'cashout', 'refund']),
    );
    // Cashouts rejected or returned after their money was swept come back in a later settlement.
    const returned = movements.filter((r) => r.type === 'cashout' && cents(r.gross!) > 0n);
    expect(returned.length).toBeGreaterThan(0);
    for (const b of truth.balances) {
      const mine = movements.filter((r) => r.currency === b.currency);
      expect(
        mine.reduce((sum, r) => sum + cents(r.net!), 0n),
        b.currency,
      ).toBe(cents(b.available!));
      const unsettled = mine.filter((r) => r.settlement_id === '');
      expect(
        unsettled.reduce((sum, r) => sum + cents(r.net!), 0n),
        b.currency,
      ).toBe(cents(b.unsettled!));
      const paid = truth.settlements.filter((x) => x.currency === b.currency);
      expect(paid.reduce((sum, x) => sum + cents(x.gross), 0n)).toBe(cents(b.settled!));
    }
    for (const x of truth.settlements) {
      const swept = movements.filter((r) => r.settlement_id === x.settlement_id);
      expect(
        swept.reduce((sum, r) => sum + cents(r.net!), 0n),
        x.settlement_id,
      ).toBe(cents(x.gross));
      expect(cents(x.gross)).toBeGreaterThan(0n);
      expect(cents(x.net) + cents(x.fees)).toBe(cents(x.gross));
    }
    // Every live deposit that reached the balance has its row.
    const exported = s.control.exportEntities();
    const listed = new Set(movements.filter((r) => r.type === 'deposit').map((r) => r.transaction_id));
    for (const d of exported.deposits) {
      if (d.status === 'COMPLETED' && !d.test && d.crypto === null)
        expect(listed.has(String(d.id))).toBe(true);
    }
  }, 120_000);
});
