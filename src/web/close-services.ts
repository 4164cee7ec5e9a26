/**
 * The close pages' services over the ledger database (src/db/closes.ts); no SQL here. Months are read
 * in the report time zone and cut-off, like the settlement workbook's periods.
 */

import { closeDocument, postCloseAdjustments } from '../db/closes/document.ts';
import {
  approveClose,
  closeScopes,
  closesOfPeriods,
  getCloseRecord,
  prepareClose,
} from '../db/closes/records.ts';
import type { Db } from '../db/schema.ts';
import { previousPeriod } from '../domain/close.ts';
import { closeScope } from '../reports/close.ts';
import { monthOfInstant, monthPeriod } from '../reports/period.ts';
import type { CloseServices } from './close-routes.ts';
import type { CloseListRow } from './close-views.ts';

/** How many months the list shows per account and currency (the current one and the ones before). */
const LIST_MONTHS = 6;

export function ledgerCloseServices(db: Db, timeZone: string, cutoff: string): CloseServices {
  const scope = (account: string, currency: string, period: string) =>
    closeScope(account, currency, period, timeZone, cutoff);
  return {
    list: async (now) => {
      const months = [monthOfInstant(now, timeZone, cutoff)];
      while (months.length < LIST_MONTHS) months.push(previousPeriod(months[months.length - 1]!));
      const [scopes, closes] = await Promise.all([closeScopes(db), closesOfPeriods(db, months)]);
      const signed = new Map(closes.map((c) => [`${c.merchantAccount}|${c.currency}|${c.period}`, c]));
      const rows: CloseListRow[] = [];
      for (const period of months) {
        const over = monthPeriod(period, timeZone, cutoff).end.getTime() <= now.getTime();
        for (const s of scopes) {
          const c = signed.get(`${s.merchantAccount}|${s.currency}|${period}`);
          rows.push({
            merchantAccount: s.merchantAccount,
            currency: s.currency,
            period,
            status: c?.status ?? null,
            preparedBy: c?.preparedBy ?? null,
            approvedBy: c?.approvedBy ?? null,
            over,
          });
        }
      }
      return rows;
    },
    page: async (account, currency, period, now) => {
      const known = (await closeScopes(db)).some(
        (s) => s.merchantAccount === account && s.currency === currency,
      );
      if (!known) return null;
      const s = scope(account, currency, period);
      const [record, postClose] = await Promise.all([
        getCloseRecord(db, account, currency, period),
        postCloseAdjustments(db, s),
      ]);
      return {
        merchantAccount: account,
        currency,
        period,
        signed: record,
        document: record ? record.document : await closeDocument(db, s),
        postClose,
        over: s.end.getTime() <= now.getTime(),
      };
    },
    prepare: async (account, currency, period, by, now) => {
      await prepareClose(db, scope(account, currency, period), by, now);
    },
    approve: async (account, currency, period, by, now) => {
      await approveClose(db, { merchantAccount: account, currency, period }, by, now);
    },
  };
}
