import { describe, expect, it } from 'vitest';
import type { BalanceMovementRow } from '../db/read-models/charts.ts';
import {
  type BalanceChartsData,
  type BalancesPageData,
  type BalanceView,
  balanceChartsPage,
  balancesPage,
} from './balance-views.ts';

const ctx = { base: '', username: 'finance', csrf: 'x', timeZone: 'UTC' };
const row = (available: bigint, account = 'acme'): BalanceView => ({
  account,
  currency: 'BRL',
  book: 'live',
  available,
  reserved: 5_000n,
  inFlightCashouts: 1,
  inFlightRefunds: 0,
});
const move = (over: Partial<BalanceMovementRow>): BalanceMovementRow => ({
  merchantAccount: 'acme',
  currency: 'BRL',
  book: 'live',
  account: 'available',
  effect: 'credit',
  direction: 1,
  todayIn: 0n,
  todayOut: 0n,
  monthIn: 0n,
  monthOut: 0n,
  ...over,
});

function data(over: Partial<BalancesPageData>): BalancesPageData {
  return { at: new Date('2026-11-20T12:00:00Z'), balances: [], movements: [], ...over };
}

function chartsData(over: Partial<BalanceChartsData>): BalanceChartsData {
  return {
    at: new Date('2026-11-20T12:00:00Z'),
    balances: [],
    history: [],
    historyDays: [new Date('2026-11-19T00:00:00Z'), new Date('2026-11-20T00:00:00Z')],
    volumes: [],
    volumeDays: ['2026-11-19', '2026-11-20'],
    currency: 'BRL',
    currencies: ['BRL'],
    days: 7,
    exceptionAges: [],
    ...over,
  };
}

describe('balances page', () => {
  it('shows the cash leg per account and currency, each bank account by its id, only once it has balances', () => {
    expect(balancesPage(ctx, data({ balances: [row(100n)] })).value).not.toContain('id="cash-leg"');
    const page = balancesPage(
      ctx,
      data({
        balances: [row(100n)],
        cashLeg: [
          {
            account: 'acme',
            currency: 'EUR',
            inTransit: 99_850n,
            settlementFees: 150n,
            fxConversion: -112_635n,
            banks: [{ id: 'NL91ABNA0417164300', balance: 212_035n }],
            bankFees: 200n,
          },
        ],
      }),
    ).value;
    expect(page).toContain('<h2>Settlements and bank</h2>');
    const line = page.slice(page.indexOf('<tr data-cash-leg="acme|EUR">'));
    expect(line).toMatch(
      /^<tr data-cash-leg="acme\|EUR"><td>acme<\/td><td>EUR<\/td><td class="num">998\.50<\/td>/,
    );
    expect(line).toContain('<td class="num neg">-1,126.35</td>');
    expect(line).toContain(
      '<div data-bank="NL91ABNA0417164300">2,120.35 <span class="muted">NL91ABNA0417164300</span></div>',
    );
  });

  it("shows the provider's balance at its latest cut-off against the ledger's, and since when they differ", () => {
    expect(balancesPage(ctx, data({ balances: [row(100n)] })).value).not.toContain('id="provider-balances"');
    const check = {
      merchantAccount: 'acme',
      currency: 'BRL',
      settlementId: '7000002',
      cutoff: new Date('2026-03-04T03:00:00Z'),
      provider: 1_234_56n,
      ledger: 1_234_56n,
      checkedAt: new Date('2026-03-04T12:00:00Z'),
      differsSince: null,
    };
    const page = balancesPage(
      ctx,
      data({
        balances: [row(100n)],
        providerBalances: [
          check,
          { ...check, currency: 'MXN', ledger: 1_300_00n, differsSince: new Date('2026-03-04T11:00:00Z') },
        ],
      }),
    ).value;
    expect(page).toContain("<h2>The provider's balance</h2>");
    const line = (key: string) => {
      const tr = page.slice(page.indexOf(`<tr data-provider-balance="${key}">`));
      return tr.slice(0, tr.indexOf('</tr>'));
    };
    expect(line('acme|BRL')).toContain(
      '<td>7000002</td><td class="num">1,234.56</td><td class="num">1,234.56</td><td class="num">0.00</td>',
    );
    expect(line('acme|BRL')).toContain('<div class="muted">agrees</div>');
    expect(line('acme|MXN')).toContain('<td class="num">1,300.00</td><td class="num neg">-65.44</td>');
    expect(line('acme|MXN')).toMatch(/<div class="neg">differs since [^<]+<\/div>/);
    expect(page).toContain('/exceptions?type=PROVIDER_BALANCE_DRIFT');
  });

  it('explains in one line why an available is negative, only when one is', () => {
    const negative = balancesPage(ctx, data({ balances: [row(-1_250n)] })).value;
    expect(negative).toContain('id="negative-available"');
    expect(negative).toContain('-12.50');
    expect(balancesPage(ctx, data({ balances: [row(0n), row(10n)] })).value).not.toContain(
      'negative-available',
    );
  });

  it("shows today's and this month's net movement beside each balance, with what went in and out", () => {
    const page = balancesPage(
      ctx,
      data({
        balances: [row(100_00n)],
        movements: [
          move({ effect: 'credit', todayIn: 250_00n, monthIn: 1_000_00n }),
          move({ effect: 'reserve', todayOut: -30_00n, monthOut: -80_25n }),
          move({ effect: 'credit', direction: -1, monthOut: -20_00n }),
          move({ account: 'reserved', effect: 'reserve', todayIn: 30_00n, monthIn: 80_25n }),
          move({ account: 'reserved', effect: 'settle', monthOut: -80_25n }),
        ],
      }),
    ).value;
    const tr = page.slice(page.indexOf('<tr data-balance="acme|BRL|live">'));
    const cells = [...tr.slice(0, tr.indexOf('</tr>')).matchAll(/<td[^>]*>(.*?)<\/td>/g)].map((m) =>
      m[1]!
        .replace(/<[^>]+>/g, ' ')
        .replace(/\s+/g, ' ')
        .trim(),
    );
    expect(cells).toEqual([
      'acme',
      'BRL',
      'live',
      '100.00',
      '+220.00 in 250.00 out 30.00',
      '+899.75 in 1,000.00 out 100.25',
      '50.00',
      '+30.00 in 30.00 out 0.00',
      '0.00 in 80.25 out 80.25',
      '1',
      '0',
    ]);
    expect(page).toContain('<td>credit (reversal)</td><td class="num">0.00</td><td class="num">-20.00</td>');
  });

  it('links to the charts, and draws none itself', () => {
    const page = balancesPage(ctx, data({ balances: [row(100n)] })).value;
    expect(page).toContain('<a href="/balances/charts">Charts</a>');
    expect(page).not.toContain('<svg ');
  });

  it('draws the charts with their table fallbacks, and escapes what it is given', () => {
    const page = balanceChartsPage(
      ctx,
      chartsData({
        balances: [row(100n, '<acme>')],
        history: [
          {
            merchantAccount: '<acme>',
            currency: 'BRL',
            book: 'live',
            account: 'available',
            at: new Date('2026-11-20T00:00:00Z'),
            balance: 77n,
          },
        ],
        volumes: [
          {
            day: '2026-11-20',
            kind: 'deposit',
            status: 'COMPLETED',
            currency: 'BRL',
            test: false,
            count: 2,
            amount: 150n,
          },
          {
            day: '2026-11-20',
            kind: 'deposit',
            status: 'PENDING',
            currency: 'USD',
            test: false,
            count: 1,
            amount: 9n,
          },
          {
            day: '2026-11-20',
            kind: 'deposit',
            status: 'COMPLETED',
            currency: 'BRL',
            test: true,
            count: 5,
            amount: 5n,
          },
        ],
        exceptionAges: [{ bucket: '3to7d', severity: 'high', count: 4 }],
      }),
    ).value;
    expect(page).not.toContain('<acme>');
    expect(page.match(/<svg /g)).toHaveLength(1 + 6 + 1);
    expect(page).toContain('<title>available, 11-20: 0.77</title>');
    expect(page).toContain('<title>available, now: 1.00</title>');
    // Live only; counts of all currencies, amounts of the chosen one.
    expect(page).toContain('<title>completed, 11-20: 2</title>');
    expect(page).toContain('<title>in progress, 11-20: 1</title>');
    expect(page).toContain('<title>completed, 11-20: 1.50</title>');
    expect(page).not.toContain('<title>in progress, 11-20: 0.09</title>');
    expect(page).toContain('<title>high, 3–7 days: 4</title>');
    expect(page.match(/<details><summary>Figures as a table/g)).toHaveLength(8);
  });
});
