/**
 * A bank reconciliation, as finance makes one: why a bank statement's closing balance differs from the
 * ledger's `bank:<id>` account, item group by item group.
 *
 * The ledger's bank account holds only what payrecon booked from the bank: the credits matched to
 * settlements, since the account's first imported statement. The bank account held money before that
 * statement (its opening balance), and the bank lines no match covers (rent, own transfers, a credit not
 * matched yet, a returned credit) are on the statement but not in the ledger. So
 *
 *     statement closing balance
 *   - balance before the first imported statement (that statement's opening balance)
 *   - bank lines not in the ledger
 *   = the ledger's bank balance
 *
 * and what is left over is the unexplained difference: 0.00 when every line is accounted for; anything
 * else is a ledger entry that is off, a statement missing between two imported ones, or a balance that
 * does not follow from its lines. Settlements paid by the provider and not yet seen in the bank are in
 * `settlements_in_transit`, not in the bank account: they are no part of this difference.
 */
import type { Minor } from './money.ts';

export interface BankReconciliationFigures {
  /** The statement's closing balance; null: no statement, or one without a balance. */
  closing: Minor | null;
  /** The opening balance of the bank account's first imported statement; null: unknown. */
  openingBeforeFirst: Minor | null;
  /** The total of the bank lines on the statement that are not in the ledger (signed). */
  linesNotInLedger: Minor;
  /** The ledger's bank account balance at the same moment. */
  ledger: Minor;
}

export interface BankReconciliation {
  /** Statement closing less ledger; null without a closing balance. */
  difference: Minor | null;
  /** What the reconciling items explain of it: the opening before the first statement plus the lines. */
  explained: Minor | null;
  /** `difference - explained`: 0 when everything is accounted for; null when a balance is unknown. */
  unexplained: Minor | null;
}

/** The reconciliation of the figures (see the module's comment). */
export function reconcileBank(f: BankReconciliationFigures): BankReconciliation {
  const difference = f.closing === null ? null : f.closing - f.ledger;
  const explained = f.openingBeforeFirst === null ? null : f.openingBeforeFirst + f.linesNotInLedger;
  return {
    difference,
    explained,
    unexplained: difference === null || explained === null ? null : difference - explained,
  };
}
