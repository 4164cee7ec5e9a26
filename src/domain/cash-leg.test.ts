import { describe, expect, it } from 'vitest';
import {
  type BankMatchBooking,
  bankAccountOf,
  bankLedgerAccount,
  bankMatchEntry,
  type CashEntry,
  isCashLegAccount,
  reversalOf,
  type SettlementFacts,
  settlementEntries,
  settlementFactsOf,
  sumsByCurrency,
} from './cash-leg.ts';

const balanced = (e: CashEntry) => {
  for (const [currency, sum] of sumsByCurrency(e.postings))
    expect(sum, `${e.idempotencyKey} ${currency}`).toBe(0n);
  expect(new Set(e.postings.map((p) => p.currency))).toEqual(new Set([e.currency]));
};

const lines = (e: CashEntry) => Object.fromEntries(e.postings.map((p) => [p.account, p.amount]));

const same: SettlementFacts = {
  settlementId: 'STL-1',
  account: 'acme',
  currency: 'EUR',
  gross: 100_000n,
  fees: 150n,
  settlementCurrency: 'EUR',
  rate: '1',
  net: 99_850n,
};

describe('the cash-leg table', () => {
  it('books a same-currency settlement as one entry: available -gross, in transit +net, fees +fee', () => {
    const [entry, ...rest] = settlementEntries(same);
    expect(rest).toEqual([]);
    balanced(entry!);
    expect(entry!.idempotencyKey).toBe('settlement:acme:STL-1:settlement');
    expect(lines(entry!)).toEqual({
      available: -100_000n,
      settlements_in_transit: 99_850n,
      settlement_fees: 150n,
    });
    expect(entry!).toMatchObject({ amount: 100_000n, feeAmount: 150n, currency: 'EUR' });
  });

  it('books a converted settlement as two entries, one per currency, each balanced, the rate on both', () => {
    const entries = settlementEntries({
      ...same,
      currency: 'USD',
      gross: 123_456n,
      rate: '0.9123456789',
      // round(1234.56 x 0.9123456789) = 1126.35, less a fee of 2.50
      fees: 250n,
      net: 112_385n,
    });
    expect(entries.map((e) => [e.effect, e.currency, e.rate])).toEqual([
      ['settlement_fx_source', 'USD', '0.9123456789'],
      ['settlement_fx_target', 'EUR', '0.9123456789'],
    ]);
    for (const e of entries) balanced(e);
    expect(lines(entries[0]!)).toEqual({ available: -123_456n, fx_conversion: 123_456n });
    expect(lines(entries[1]!)).toEqual({
      fx_conversion: -112_635n,
      settlements_in_transit: 112_385n,
      settlement_fees: 250n,
    });
  });

  it('leaves zero lines out and books nothing for a settlement of nothing', () => {
    const [entry] = settlementEntries({ ...same, fees: 0n, net: 100_000n });
    expect(lines(entry!)).toEqual({ available: -100_000n, settlements_in_transit: 100_000n });
    expect(entry!.feeAmount).toBeNull();
    expect(settlementEntries({ ...same, gross: 0n, fees: 0n, net: 0n })).toEqual([]);
  });

  it('refuses what cannot balance or is negative, naming the settlement', () => {
    expect(() => settlementEntries({ ...same, net: 99_000n })).toThrow(
      'settlement STL-1 (acme): gross must equal net plus fees in one currency',
    );
    expect(() => settlementEntries({ ...same, gross: -1n })).toThrow(/gross must not be negative/);
    expect(() => settlementEntries({ ...same, rate: '0' })).toThrow(/rate must be a positive decimal/);
  });

  it('reads a stored report row (numeric text, major units) exactly', () => {
    expect(
      settlementFactsOf({
        settlement_id: 'S',
        account: 'acme',
        currency: 'EUR',
        gross: '1234567890123456.78',
        fees: '0.5',
        settlement_currency: 'EUR',
        rate: '1',
        net: '1234567890123456.28',
      }),
    ).toMatchObject({ gross: 123_456_789_012_345_678n, fees: 50n, net: 123_456_789_012_345_628n });
  });

  const match: BankMatchBooking = {
    matchId: 'M-1',
    bankAccount: 'NL91ABNA0417164300',
    account: 'acme',
    currency: 'EUR',
    credited: 149_700n,
    bankLineIdentity: 'line-1',
    settlements: [
      { settlementId: 'STL-1', currency: 'EUR', net: 99_850n },
      { settlementId: 'STL-2', currency: 'EUR', net: 50_000n },
    ],
  };

  it('books a bank credit matched to settlements: in transit -nets, bank +credited, bank fees +difference', () => {
    const entry = bankMatchEntry(match);
    balanced(entry);
    expect(entry.idempotencyKey).toBe('bank_match:acme:M-1:bank_match');
    expect(lines(entry)).toEqual({
      settlements_in_transit: -149_850n,
      'bank:NL91ABNA0417164300': 149_700n,
      bank_fees: 150n,
    });
    expect(bankMatchEntry(match, 2).idempotencyKey).toBe('bank_match:acme:M-1:bank_match:2');
    const exact = bankMatchEntry({ ...match, credited: 149_850n });
    expect(lines(exact)).toEqual({ settlements_in_transit: -149_850n, 'bank:NL91ABNA0417164300': 149_850n });
  });

  it('reverses a match with its mirror image under its reversal key', () => {
    const entry = bankMatchEntry(match);
    const back = reversalOf(entry, 1);
    balanced(back);
    expect(back.idempotencyKey).toBe('bank_match:acme:M-1:bank_match:reversal:1');
    expect(back.direction).toBe(-1);
    expect(back.postings.map((p) => p.amount)).toEqual(entry.postings.map((p) => -p.amount));
  });

  it('refuses a match without settlements, across currencies, or of no credit', () => {
    expect(() => bankMatchEntry({ ...match, settlements: [] })).toThrow(
      'bank match M-1: names no settlement',
    );
    expect(() =>
      bankMatchEntry({ ...match, settlements: [{ settlementId: 'X', currency: 'USD', net: 1n }] }),
    ).toThrow(/settlement X is in USD, the credit in EUR/);
    expect(() => bankMatchEntry({ ...match, credited: 0n })).toThrow(/must be positive/);
  });

  it('names a bank ledger account after its bank account', () => {
    expect(bankLedgerAccount('DE89370400440532013000')).toBe('bank:DE89370400440532013000');
    expect(bankAccountOf('bank:DE89370400440532013000')).toBe('DE89370400440532013000');
    expect(bankAccountOf('available')).toBeNull();
    expect(isCashLegAccount('bank:X')).toBe(true);
    expect(isCashLegAccount('settlements_in_transit')).toBe(true);
    expect(isCashLegAccount('available')).toBe(false);
  });
});
