import { describe, expect, it } from 'vitest';
import { type BalanceView, balancesPage } from './views.ts';

const ctx = { base: '', username: 'finance', csrf: 'x', timeZone: 'UTC' };
const row = (available: bigint): BalanceView => ({
  account: 'acme',
  currency: 'BRL',
  book: 'live',
  available,
  reserved: 5_000n,
  inFlightCashouts: 1,
  inFlightRefunds: 0,
});

describe('balances page', () => {
  it('explains in one line why an available is negative, only when one is', () => {
    const negative = balancesPage(ctx, [row(-1_250n)], new Date()).value;
    expect(negative).toContain('id="negative-available"');
    expect(negative).toContain('-12.50');
    expect(balancesPage(ctx, [row(0n), row(10n)], new Date()).value).not.toContain('negative-available');
  });
});
