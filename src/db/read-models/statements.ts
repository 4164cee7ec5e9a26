/**
 * A bank account's first imported statement, shared by the Reconciliation page and the month close's bank
 * proof: its opening balance is what the bank account held before payrecon's first statement, the
 * first reconciling item between a statement's closing balance and the ledger's `bank:<id>` account
 * (src/domain/bank-reconciliation.ts).
 *
 * The first statement is the one whose lines start earliest: a statement's lines are those its import
 * recorded first (`import_id`; a line seen before stays with the import that brought it), so of two
 * overlapping statements the one reaching further back is first, and a statement that brought no new
 * line is never first. Ties (several statements of the account in one file, or the same first day): the
 * earlier closing date, then the earlier import and position.
 */
import { sql } from 'kysely';
import { type Minor, parseLedgerMinor } from '../../domain/money.ts';
import type { Db } from '../schema.ts';

export interface FirstStatement {
  importId: string;
  position: number;
  /** camt.053's Stmt/Id; null for a CSV or XLSX statement. */
  statementId: string | null;
  /** The booking date of its first line (`YYYY-MM-DD`). */
  date: string;
  /** Its opening balance; null: its file gives none (a CSV or XLSX profile without a balance column). */
  opening: Minor | null;
}

/** The first imported statement of the bank account in the currency, or null when none brought a line. */
export async function firstStatement(
  db: Db,
  bankAccount: string,
  currency: string,
): Promise<FirstStatement | null> {
  const { rows } = await sql<{
    import_id: string;
    position: number;
    statement_id: string | null;
    opening: string | null;
    first_day: string;
  }>`
    SELECT s.import_id::text AS import_id, s.position, s.statement_id, s.opening::text AS opening,
      d.first_day::text AS first_day
    FROM import_statements s
    JOIN LATERAL (SELECT min(b.booking_date) AS first_day FROM bank_statement_lines b
      WHERE b.import_id = s.import_id AND b.bank_account = s.bank_account AND b.currency = s.currency) d
      ON d.first_day IS NOT NULL
    WHERE s.bank_account = ${bankAccount} AND s.currency = ${currency}
    ORDER BY d.first_day, s.closing_date NULLS LAST, s.import_id, s.position
    LIMIT 1`.execute(db);
  const r = rows[0];
  if (!r) return null;
  return {
    importId: r.import_id,
    position: r.position,
    statementId: r.statement_id,
    date: r.first_day,
    opening: r.opening === null ? null : parseLedgerMinor(r.opening),
  };
}
