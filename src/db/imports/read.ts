/**
 * What the Imports page and `GET /api/v1/imports` read: the imports newest first with their counts,
 * statements and the result of the matching run each started, and one import with its statements and
 * the lines it brought first (a line is kept under the import that first brought it; an import of lines
 * seen before shows them in no detail). Amounts stay decimal text as PostgreSQL's numeric gives them.
 */
import { sql } from 'kysely';
import type { ImportKind } from '../../domain/imports.ts';
import type { MatchSummary } from '../../domain/matching.ts';
import type { Db, Numeric } from '../schema.ts';

export interface ImportStatementView {
  position: number;
  statementId: string | null;
  format: string;
  bankAccount: string;
  currency: string;
  opening: Numeric | null;
  closing: Numeric | null;
  credits: Numeric;
  debits: Numeric;
  booked: number;
  pending: number;
  newLines: number;
}

export interface ImportView {
  id: string;
  kind: ImportKind;
  fileName: string;
  sha256: string;
  profile: string | null;
  importedBy: string;
  importedAt: Date;
  lines: number;
  newLines: number;
  skipped: number;
  statements: ImportStatementView[];
  /**
   * The matching run the import started: null when it brought no new lines (none ran) or when no run
   * finished for it (its lines are left to the next run).
   */
  matching: MatchSummary | null;
}

/** A line an import brought first, whatever its kind, in the columns the detail shows. */
export interface ImportLineView {
  identity: string;
  /** Bank line: booking date; transaction row: creation instant; settlement row: value date. */
  date: string;
  reference: string | null;
  /** deposit, cashout ... for a provider row; credit or debit for a bank line. */
  type: string;
  status: string | null;
  currency: string;
  amount: Numeric;
  fee: Numeric | null;
  net: Numeric | null;
  /** The currency of `net` when it differs from `currency` (a converted settlement). */
  netCurrency: string | null;
  settlementId: string | null;
  description: string | null;
}

export interface ImportDetail {
  import: ImportView;
  lines: ImportLineView[];
  /** More lines than the detail shows. */
  more: boolean;
}

async function statementsOf(db: Db, ids: readonly string[]): Promise<Map<string, ImportStatementView[]>> {
  const out = new Map<string, ImportStatementView[]>();
  if (ids.length === 0) return out;
  const rows = await db
    .selectFrom('import_statements')
    .selectAll()
    .where('import_id', 'in', [...ids])
    .orderBy('import_id')
    .orderBy('position')
    .execute();
  for (const r of rows) {
    const list = out.get(r.import_id) ?? [];
    list.push({
      position: r.position,
      statementId: r.statement_id,
      format: r.format,
      bankAccount: r.bank_account,
      currency: r.currency,
      opening: r.opening,
      closing: r.closing,
      credits: r.credits,
      debits: r.debits,
      booked: r.booked,
      pending: r.pending,
      newLines: r.new_lines,
    });
    out.set(r.import_id, list);
  }
  return out;
}

/** The imports newest first, at most `limit`, with their statements. */
export async function listImports(db: Db, limit: number): Promise<ImportView[]> {
  const rows = await db
    .selectFrom('imports')
    .selectAll()
    .orderBy('imported_at', 'desc')
    .orderBy('id', 'desc')
    .limit(limit)
    .execute();
  const statements = await statementsOf(
    db,
    rows.map((r) => r.id),
  );
  return rows.map((r) => ({
    id: r.id,
    kind: r.kind,
    fileName: r.file_name,
    sha256: r.sha256,
    profile: r.profile,
    importedBy: r.imported_by,
    importedAt: r.imported_at,
    lines: r.lines,
    newLines: r.new_lines,
    skipped: r.skipped,
    statements: statements.get(r.id) ?? [],
    matching: r.matching,
  }));
}

/** One import with the lines it brought first (at most `limit`), or null. */
export async function getImport(db: Db, id: string, limit = 1000): Promise<ImportDetail | null> {
  if (!/^\d{1,18}$/.test(id)) return null;
  const row = await db.selectFrom('imports').selectAll().where('id', '=', id).executeTakeFirst();
  if (!row) return null;
  const statements = (await statementsOf(db, [id])).get(id) ?? [];
  let lines: ImportLineView[];
  if (row.kind === 'bank-statement') {
    const found = await db
      .selectFrom('bank_statement_lines')
      .selectAll()
      // A date column as its text: pg would read it as a local midnight.
      .select(sql<string>`booking_date::text`.as('booking_text'))
      .where('import_id', '=', id)
      .orderBy('bank_account')
      .orderBy('booking_date')
      .orderBy('identity')
      .limit(limit + 1)
      .execute();
    lines = found.map((l) => ({
      identity: l.identity,
      date: l.booking_text,
      reference: l.reference,
      type: `${l.amount.startsWith('-') ? 'debit' : 'credit'}${l.reversal ? ' (reversal)' : ''}`,
      status: null,
      currency: l.currency,
      amount: l.amount,
      fee: null,
      net: null,
      netCurrency: null,
      settlementId: null,
      description: [l.counterparty, l.description].filter((t) => t !== null).join(' · ') || null,
    }));
  } else if (row.kind === 'provider-transactions') {
    const found = await db
      .selectFrom('provider_transaction_rows')
      .selectAll()
      .where('import_id', '=', id)
      .orderBy('created_at')
      .orderBy('identity')
      .limit(limit + 1)
      .execute();
    lines = found.map((l) => ({
      identity: l.identity,
      date: l.created_at.toISOString(),
      reference: l.transaction_id,
      type: l.type,
      status: l.status,
      currency: l.currency,
      amount: l.gross,
      fee: l.fee,
      net: l.net,
      netCurrency: null,
      settlementId: l.settlement_id,
      description: l.external_id ?? l.invoice_id,
    }));
  } else {
    const found = await db
      .selectFrom('provider_settlement_rows')
      .selectAll()
      .select(sql<string>`value_date::text`.as('value_text'))
      .where('import_id', '=', id)
      .orderBy('value_date')
      .orderBy('identity')
      .limit(limit + 1)
      .execute();
    lines = found.map((l) => ({
      identity: l.identity,
      date: l.value_text,
      reference: l.bank_reference,
      type: 'settlement',
      status: null,
      currency: l.currency,
      amount: l.gross,
      fee: l.fees,
      net: l.net,
      netCurrency: l.settlement_currency === l.currency ? null : l.settlement_currency,
      settlementId: l.settlement_id,
      description: l.account,
    }));
  }
  return {
    import: {
      id: row.id,
      kind: row.kind,
      fileName: row.file_name,
      sha256: row.sha256,
      profile: row.profile,
      importedBy: row.imported_by,
      importedAt: row.imported_at,
      lines: row.lines,
      newLines: row.new_lines,
      skipped: row.skipped,
      statements,
      matching: row.matching,
    },
    lines: lines.slice(0, limit),
    more: lines.length > limit,
  };
}

/**
 * The last day each bank account has a statement of: its statements' closing dates (for a statement
 * imported before they were kept, the last booking date of the lines its import brought). A statement of
 * day D says the bank has closed D; the settlement fetch continues from the day after, and matching
 * counts the grace of a settlement up to it.
 */
export async function lastStatementDays(db: Db): Promise<Map<string, string>> {
  const { rows } = await sql<{ bank_account: string; day: string }>`
    SELECT s.bank_account, max(coalesce(s.closing_date, d.day))::text AS day
    FROM import_statements s
    LEFT JOIN LATERAL (SELECT max(b.booking_date) AS day FROM bank_statement_lines b
      WHERE s.closing_date IS NULL AND b.import_id = s.import_id AND b.bank_account = s.bank_account) d ON true
    GROUP BY s.bank_account
    HAVING max(coalesce(s.closing_date, d.day)) IS NOT NULL`.execute(db);
  return new Map(rows.map((r) => [r.bank_account, r.day]));
}

/** Whether a file with this SHA-256 was imported before (the settlement fetch skips a download seen before). */
export async function importedBefore(db: Db, sha256: string): Promise<boolean> {
  const row = await db
    .selectFrom('imports')
    .select('id')
    .where('sha256', '=', sha256)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}
