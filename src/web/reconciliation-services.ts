/**
 * The Reconciliation pages' services over the read model (src/db/read-models/reconciliation.ts) and the
 * matching service (manualMatch, unmatch: src/db/matching/service.ts); no SQL here.
 */
import { matchByHand, unmatchByHand } from '../db/matching/by-hand.ts';
import {
  type ReconciliationBankAccount,
  reconciliationAccounts,
  reconciliationDay,
  reconciliationDayOf,
} from '../db/read-models/reconciliation.ts';
import type { Db } from '../db/schema.ts';
import type { ReconciliationServices } from './reconciliation-routes.ts';
import type { BankFeed } from './reconciliation-views.ts';

export function ledgerReconciliationServices(
  db: Db,
  /** The bank accounts reconciled, read at each use (configured, or the embedded sandbox's). */
  banks: () => readonly ReconciliationBankAccount[],
  timeZone: string,
  /** Where the bank accounts and statements come from (src/services.ts). */
  feed?: () => Promise<BankFeed>,
): ReconciliationServices {
  return {
    accounts: () => reconciliationAccounts(db, banks()),
    ...(feed ? { feed } : {}),
    day: async (bankAccount, date, now) => {
      const bank = banks().find((b) => b.id === bankAccount);
      return bank ? reconciliationDay(db, bank, date, timeZone, now) : null;
    },
    locate: (kind, entityId) => reconciliationDayOf(db, banks(), kind, entityId),
    match: (lines, settlements, note, by, now) =>
      matchByHand(db, {
        pair: 'bank-settlement',
        left: lines,
        right: settlements,
        note,
        by,
        now,
        bankAccounts: banks(),
      }),
    unmatch: async (matchId, note, by, now) => {
      const ended = await unmatchByHand(db, { matchId, note, by, now });
      return { id: ended.id, rule: ended.rule };
    },
  };
}
