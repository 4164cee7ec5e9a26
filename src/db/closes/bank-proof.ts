/**
 * The month close's bank proof (src/domain/close.ts `CloseBankProofLine`): per configured bank account
 * of the close's merchant account and currency, the last imported statement at the period's last day
 * against the ledger's `bank:<id>` balance at the cut-off, what explains their difference
 * (src/domain/bank-reconciliation.ts: the opening balance of the account's first imported statement,
 * src/db/read-models/statements.ts, and the bank lines unmatched at the cut-off booked on or before the
 * statement's date), and the items unmatched at the cut-off: bank lines, and settlements in transit
 * (no part of the bank difference).
 *
 * - A statement's date is its closing balance's date (camt.053's CLBD date; a CSV or XLSX statement's
 *   latest booking date); for one imported before that date was kept, the latest booking date of the
 *   lines its import brought (none: not a candidate). The last statement is the one with the latest date
 *   on or before the period's last day, then the latest import and position.
 * - A bank line is unmatched at the cut-off when booked on or before the period's last day and in no
 *   match created before the cut-off and not ended by it; a settlement (positive net, value date on or
 *   before the last day) likewise. Settlements belong to the first configured bank account of their
 *   merchant account and settlement currency.
 * - The ledger at the cut-off holds a bank line exactly when a match standing at the cut-off covers it:
 *   a match books its bank entry in its transaction and an unmatch reverses it in its own, and the
 *   ledger's balance at the cut-off counts entries by when they were booked.
 * - An item has a note when its BANK_LINE_UNMATCHED or SETTLEMENT_NOT_RECEIVED exception carries a
 *   resolution or acknowledgement note, or any of its audit events a note (a comment).
 */
import { sql } from 'kysely';
import { reconcileBank } from '../../domain/bank-reconciliation.ts';
import { bankLedgerAccount } from '../../domain/cash-leg.ts';
import type { CloseBankProofLine, CloseUnmatchedItem } from '../../domain/close.ts';
import { afterStatement, nextPeriod } from '../../domain/close.ts';
import { formatAmount, type Minor, parseLedgerMinor } from '../../domain/money.ts';
import { firstStatement } from '../read-models/statements.ts';
import type { Db } from '../schema.ts';

/** A configured bank account (PAYRECON_BANK_ACCOUNTS). */
export interface CloseBankAccount {
  id: string;
  currency: string;
  account: string;
  name?: string;
}

/** The bank accounts configured and the amount above which an unmatched item needs a note. */
export interface BankProofSettings {
  accounts: readonly CloseBankAccount[];
  noteAbove: Minor;
}

export interface BankProofScope {
  merchantAccount: string;
  currency: string;
  period: string;
  /** The cut-off instant. */
  end: Date;
}

/** The period's last day, `YYYY-MM-DD`. */
export function lastDayOf(period: string): string {
  const next = new Date(`${nextPeriod(period)}-01T00:00:00Z`);
  return new Date(next.getTime() - 86_400_000).toISOString().slice(0, 10);
}

/** The accounts of the scope's merchant account and currency, in configuration order. */
export function bankAccountsOf(
  all: readonly CloseBankAccount[],
  s: { merchantAccount: string; currency: string },
): CloseBankAccount[] {
  return all.filter((b) => b.account === s.merchantAccount && b.currency === s.currency);
}

const NOTED = (x: string) =>
  sql.raw(`(coalesce(${x}.resolution_note, '') <> '' OR coalesce(${x}.acknowledgement_note, '') <> ''
    OR EXISTS (SELECT 1 FROM exception_events ev WHERE ev.exception_id = ${x}.id AND coalesce(ev.note, '') <> ''))`);

/** A match standing at the cut-off: created before it and not ended by it. */
const standingAt = (side: 'bank_line' | 'settlement', identity: ReturnType<typeof sql.raw>, end: Date) => sql`
  EXISTS (SELECT 1 FROM match_members m JOIN matches mt ON mt.id = m.match_id
    WHERE m.side = ${side} AND m.identity = ${identity}
      AND mt.created_at < ${end} AND (mt.ended_at IS NULL OR mt.ended_at >= ${end}))`;

interface ItemRow {
  id: string;
  reference: string | null;
  day: string;
  amount: string;
  age: number;
  exception_id: string | null;
  noted: boolean | null;
}

function itemOf(kind: CloseUnmatchedItem['kind'], r: ItemRow): CloseUnmatchedItem {
  return {
    kind,
    id: r.id,
    reference: r.reference,
    amount: formatAmount(parseLedgerMinor(r.amount)),
    date: r.day,
    ageDays: r.age,
    exceptionId: r.exception_id,
    noted: r.noted === true,
  };
}

async function lastStatement(db: Db, bankAccount: string, currency: string, lastDay: string) {
  const { rows } = await sql<{
    import_id: string;
    position: number;
    statement_id: string | null;
    closing: string | null;
    day: string;
  }>`
    SELECT import_id, position, statement_id, closing, day::text AS day FROM (
      SELECT s.import_id::text AS import_id, s.import_id AS import_order, s.position, s.statement_id,
        s.closing::text AS closing, coalesce(s.closing_date, d.day) AS day
      FROM import_statements s
      -- a statement imported before its closing date was kept: the lines its import brought
      LEFT JOIN LATERAL (SELECT max(b.booking_date) AS day FROM bank_statement_lines b
        WHERE s.closing_date IS NULL AND b.import_id = s.import_id AND b.bank_account = s.bank_account
          AND b.currency = s.currency) d ON true
      WHERE s.bank_account = ${bankAccount} AND s.currency = ${currency}) c
    WHERE day IS NOT NULL AND day <= ${lastDay}::date
    ORDER BY day DESC, import_order DESC, position DESC
    LIMIT 1`.execute(db);
  return rows[0] ?? null;
}

async function unmatchedLines(db: Db, bankAccount: string, currency: string, lastDay: string, end: Date) {
  const { rows } = await sql<ItemRow>`
    SELECT b.identity AS id, b.reference, b.booking_date::text AS day, b.amount::text AS amount,
      (${lastDay}::date - b.booking_date)::int AS age, x.id AS exception_id, x.noted
    FROM bank_statement_lines b
    LEFT JOIN LATERAL (SELECT x.id::text AS id, ${NOTED('x')} AS noted FROM exceptions x
      WHERE x.type = 'BANK_LINE_UNMATCHED' AND x.entity_kind = 'bank_line' AND x.entity_id = b.identity
      ORDER BY x.id DESC LIMIT 1) x ON true
    WHERE b.bank_account = ${bankAccount} AND b.currency = ${currency} AND b.booking_date <= ${lastDay}::date
      AND NOT ${standingAt('bank_line', sql.raw('b.identity'), end)}
    ORDER BY b.booking_date, b.identity`.execute(db);
  return rows.map((r) => itemOf('bank_line', r));
}

async function unmatchedSettlements(
  db: Db,
  merchantAccount: string,
  currency: string,
  lastDay: string,
  end: Date,
) {
  const { rows } = await sql<ItemRow>`
    SELECT s.settlement_id AS id, s.bank_reference AS reference, s.value_date::text AS day, s.net::text AS amount,
      (${lastDay}::date - s.value_date)::int AS age, x.id AS exception_id, x.noted
    FROM (SELECT DISTINCT ON (r.settlement_id) r.* FROM provider_settlement_rows r
      WHERE r.account = ${merchantAccount} AND r.settlement_currency = ${currency}
        AND r.value_date <= ${lastDay}::date AND r.net > 0
      ORDER BY r.settlement_id, r.identity) s
    LEFT JOIN LATERAL (SELECT x.id::text AS id, ${NOTED('x')} AS noted FROM exceptions x
      WHERE x.type = 'SETTLEMENT_NOT_RECEIVED' AND x.entity_kind = 'settlement' AND x.entity_id = s.settlement_id
      ORDER BY x.id DESC LIMIT 1) x ON true
    WHERE NOT EXISTS (SELECT 1 FROM provider_settlement_rows o WHERE o.settlement_id = s.settlement_id
      AND ${standingAt('settlement', sql.raw('o.identity'), end)})
    ORDER BY s.value_date, s.settlement_id`.execute(db);
  return rows.map((r) => itemOf('settlement', r));
}

/**
 * The bank proof of the scope. `ledgerBalance` gives the ledger's balance of an account name at the
 * cut-off (from the close's own account balances, so both read the same snapshot).
 */
export async function bankProof(
  db: Db,
  s: BankProofScope,
  accounts: readonly CloseBankAccount[],
  ledgerBalance: (account: string) => Minor,
): Promise<CloseBankProofLine[]> {
  const lastDay = lastDayOf(s.period);
  const out: CloseBankProofLine[] = [];
  for (const [i, b] of accounts.entries()) {
    const [statement, first, lines, settlements] = await Promise.all([
      lastStatement(db, b.id, s.currency, lastDay),
      firstStatement(db, b.id, s.currency),
      unmatchedLines(db, b.id, s.currency, lastDay, s.end),
      i === 0 ? unmatchedSettlements(db, s.merchantAccount, s.currency, lastDay, s.end) : [],
    ]);
    const ledger = ledgerBalance(bankLedgerAccount(b.id));
    const closing = statement?.closing == null ? null : parseLedgerMinor(statement.closing);
    const ref = statement
      ? {
          importId: statement.import_id,
          position: statement.position,
          statementId: statement.statement_id,
          date: statement.day,
        }
      : null;
    const sum = (items: readonly CloseUnmatchedItem[]) =>
      items.reduce((t, u) => t + parseLedgerMinor(u.amount), 0n);
    const line = { statement: ref };
    const later = lines.filter((u) => afterStatement(line, u));
    const notInLedger = sum(lines) - sum(later);
    // A first statement after the last one reconciled opens nothing of it.
    const opening = first && ref && first.date <= ref.date ? first : null;
    const proof = reconcileBank({
      closing,
      openingBeforeFirst: opening?.opening ?? null,
      linesNotInLedger: notInLedger,
      ledger,
    });
    out.push({
      bankAccount: b.id,
      name: b.name ?? null,
      statement: ref,
      statementClosing: closing === null ? null : formatAmount(closing),
      ledger: formatAmount(ledger),
      difference: proof.difference === null ? null : formatAmount(proof.difference),
      unmatched: [...lines, ...settlements],
      firstStatement: opening && {
        importId: opening.importId,
        position: opening.position,
        statementId: opening.statementId,
        date: opening.date,
      },
      openingBeforeFirst: opening?.opening == null ? null : formatAmount(opening.opening),
      linesNotInLedger: formatAmount(notInLedger),
      linesAfterStatement: formatAmount(sum(later)),
      inTransit: formatAmount(sum(settlements)),
      unexplained: proof.unexplained === null ? null : formatAmount(proof.unexplained),
    });
  }
  return out;
}

/** Of the given items, those whose exception carries a note now (by kind and id). */
export async function notedNow(db: Db, items: readonly CloseUnmatchedItem[]): Promise<Set<string>> {
  if (items.length === 0) return new Set();
  const { rows } = await sql<{ kind: string; id: string }>`
    SELECT x.entity_kind AS kind, x.entity_id AS id FROM exceptions x
    WHERE x.type IN ('BANK_LINE_UNMATCHED', 'SETTLEMENT_NOT_RECEIVED')
      AND (x.entity_kind, x.entity_id) IN (SELECT * FROM unnest(${items.map((i) => i.kind)}::text[], ${items.map((i) => i.id)}::text[]))
      AND ${NOTED('x')}`.execute(db);
  return new Set(rows.map((r) => `${r.kind}|${r.id}`));
}
