/**
 * The balances page's services over the ledger database (src/db); no SQL here. A balance now is the
 * running balance kept by the postings' trigger, an earlier one the latest daily snapshot plus the
 * postings since (`balances`, src/db/queries.ts): nothing here sums all of history.
 */

import { balances, inFlightCounts } from '../db/read-models/balances.ts';
import {
  BALANCE_ACCOUNTS,
  balanceHistory,
  balanceMovements,
  dailyVolumes,
  openExceptionsByAge,
} from '../db/read-models/charts.ts';
import { latestBalanceChecks } from '../db/read-models/settlements.ts';
import type { Db } from '../db/schema.ts';
import { bankAccountOf, isCashLegAccount } from '../domain/cash-leg.ts';
import type { BalanceServices } from './balance-routes.ts';
import type { BalanceView, CashLegView } from './balance-views.ts';

export function ledgerBalanceServices(db: Db): BalanceServices {
  return {
    list: async (at) => {
      // Now (the page's clock within a second of the wall clock) reads the running balances; an earlier
      // instant the latest snapshot plus the postings since. Neither sums the history.
      const [rows, inflight] = await Promise.all([
        Date.now() - at.getTime() < 1_000 ? balances(db) : balances(db, { at }),
        inFlightCounts(db),
      ]);
      const views = new Map<string, BalanceView>();
      const view = (account: string, currency: string, book: string): BalanceView => {
        const key = `${account}|${currency}|${book}`;
        let v = views.get(key);
        if (!v) {
          v = {
            account,
            currency,
            book,
            available: 0n,
            reserved: 0n,
            inFlightCashouts: 0,
            inFlightRefunds: 0,
          };
          views.set(key, v);
        }
        return v;
      };
      for (const b of rows) {
        if (b.book === 'crypto') continue;
        const names = BALANCE_ACCOUNTS[b.book];
        if (b.account === names.available) view(b.merchantAccount, b.currency, b.book).available = b.balance;
        if (b.account === names.reserved) view(b.merchantAccount, b.currency, b.book).reserved = b.balance;
      }
      for (const r of inflight) {
        if (r.cashouts === 0 && r.refunds === 0) continue;
        const v = view(r.merchantAccount, r.currency, r.test ? 'test' : 'live');
        v.inFlightCashouts = r.cashouts;
        v.inFlightRefunds = r.refunds;
      }
      return [...views.values()].sort(
        (a, b) =>
          a.account.localeCompare(b.account) ||
          a.currency.localeCompare(b.currency) ||
          a.book.localeCompare(b.book),
      );
    },
    providerBalances: () => latestBalanceChecks(db),
    cashLeg: async (at) => {
      const rows = (
        Date.now() - at.getTime() < 1_000 ? await balances(db) : await balances(db, { at })
      ).filter((b) => b.book === 'live' && isCashLegAccount(b.account));
      const views = new Map<string, CashLegView & { banks: { id: string; balance: bigint }[] }>();
      for (const b of rows) {
        const key = `${b.merchantAccount}|${b.currency}`;
        let v = views.get(key);
        if (!v) {
          v = {
            account: b.merchantAccount,
            currency: b.currency,
            inTransit: 0n,
            settlementFees: 0n,
            fxConversion: 0n,
            banks: [],
            bankFees: 0n,
          };
          views.set(key, v);
        }
        const bank = bankAccountOf(b.account);
        if (bank !== null) v.banks.push({ id: bank, balance: b.balance });
        else if (b.account === 'settlements_in_transit') v.inTransit = b.balance;
        else if (b.account === 'settlement_fees') v.settlementFees = b.balance;
        else if (b.account === 'fx_conversion') v.fxConversion = b.balance;
        else if (b.account === 'bank_fees') v.bankFees = b.balance;
      }
      return [...views.values()];
    },
    // Now (as for the balances above): the open hour's movements are read whole from its hour row.
    movements: (monthStart, todayStart, at) =>
      balanceMovements(db, monthStart, todayStart, at, null, Date.now() - at.getTime() < 1_000),
    history: (from, to) => balanceHistory(db, from, to),
    volumes: (from, to, timeZone) => dailyVolumes(db, from, to, timeZone),
    exceptionAges: (now) => openExceptionsByAge(db, now),
  };
}
