/**
 * The close pages' services over the ledger database (src/db/closes/); no SQL here. Months are read in
 * the report time zone and cut-off, like the settlement workbook's periods.
 */

import type { BankProofSettings } from '../db/closes/bank-proof.ts';
import { closeDocument, postCloseAdjustments } from '../db/closes/document.ts';
import { closesOfPeriods, getCloseRecord } from '../db/closes/records.ts';
import { closeLedgerOf, closeLedgers } from '../db/closes/scopes.ts';
import { approveClose, prepareClose } from '../db/closes/service.ts';
import type { Db } from '../db/schema.ts';
import { previousPeriod } from '../domain/close.ts';
import { AppError } from '../domain/errors.ts';
import { closeScope } from '../reports/close.ts';
import { monthOfInstant } from '../reports/period.ts';
import type { CloseServices } from './close-routes.ts';
import type { CloseListRow } from './close-views.ts';

export function ledgerCloseServices(
  db: Db,
  timeZone: string,
  cutoff: string,
  bank?: BankProofSettings,
): CloseServices {
  const scope = (account: string, currency: string, period: string) =>
    closeScope(account, currency, period, timeZone, cutoff, bank);
  const monthOf = (instant: Date) => monthOfInstant(instant, timeZone, cutoff);
  return {
    list: async (now) => {
      const lastComplete = previousPeriod(monthOf(now));
      const ledgers = await closeLedgers(db);
      // Per ledger, its first posting's month to the last complete month, newest first.
      const monthsOf = new Map<string, string[]>();
      for (const l of ledgers) {
        const months: string[] = [];
        if (l.firstPostingAt !== null) {
          const first = monthOf(l.firstPostingAt);
          for (let m = lastComplete; m >= first; m = previousPeriod(m)) {
            months.push(m);
          }
        }
        monthsOf.set(`${l.merchantAccount}|${l.currency}`, months);
      }
      const periods = [...new Set([...monthsOf.values()].flat())];
      const closes = await closesOfPeriods(db, periods);
      const signed = new Map(closes.map((c) => [`${c.merchantAccount}|${c.currency}|${c.period}`, c]));
      const rows: CloseListRow[] = [];
      for (const period of [...periods].sort().reverse()) {
        for (const l of ledgers) {
          if (!monthsOf.get(`${l.merchantAccount}|${l.currency}`)?.includes(period)) continue;
          const c = signed.get(`${l.merchantAccount}|${l.currency}|${period}`);
          rows.push({
            merchantAccount: l.merchantAccount,
            currency: l.currency,
            period,
            status: c?.status ?? null,
            preparedBy: c?.preparedBy ?? null,
            approvedBy: c?.approvedBy ?? null,
          });
        }
      }
      const waiting = ledgers
        .filter((l) => !monthsOf.get(`${l.merchantAccount}|${l.currency}`)?.length)
        .map((l) => ({
          merchantAccount: l.merchantAccount,
          currency: l.currency,
          firstMonth: l.firstPostingAt === null ? null : monthOf(l.firstPostingAt),
        }));
      return { rows, waiting, lastComplete };
    },
    page: async (account, currency, period, now) => {
      // The one check of account and currency (src/db/closes/scopes.ts): none, the page answers 404.
      const ledger = await closeLedgerOf(db, account, currency).catch((err: unknown) => {
        if (err instanceof AppError && err.code === 'NOT_FOUND') return null;
        throw err;
      });
      if (!ledger) return null;
      const s = scope(account, currency, period);
      const [record, postClose] = await Promise.all([
        getCloseRecord(db, account, currency, period),
        postCloseAdjustments(db, s),
      ]);
      const first = ledger.firstPostingAt;
      return {
        merchantAccount: account,
        currency,
        period,
        signed: record,
        document: record ? record.document : await closeDocument(db, s),
        postClose,
        over: s.end.getTime() <= now.getTime(),
        firstMonth: first === null ? null : monthOf(first),
        beforeFirstPosting: first === null || first.getTime() >= s.end.getTime(),
      };
    },
    prepare: async (account, currency, period, by, now) => {
      await prepareClose(db, scope(account, currency, period), by, now);
    },
    approve: async (account, currency, period, by, now) => {
      await approveClose(db, { merchantAccount: account, currency, period }, by, now, bank?.noteAbove);
    },
  };
}
