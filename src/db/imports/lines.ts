/**
 * The import tables' statements: an import's record, a statement's balances and counts, and the lines,
 * each inserted once under its identity (a line already stored is left as it is: the import that first
 * brought it keeps it). Plain functions over a database or a transaction; the service owns the transaction.
 */
import { sql } from 'kysely';
import type { ImportKind } from '../../domain/imports.ts';
import type { Db } from '../schema.ts';
import type { BankLineRecord, SettlementRowRecord, StatementRecord, TransactionRowRecord } from './tables.ts';

/** Rows per INSERT, sent as one JSON parameter. */
const CHUNK = 10_000;

function chunks<T>(rows: readonly T[]): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < rows.length; i += CHUNK) out.push(rows.slice(i, i + CHUNK));
  return out;
}

export async function insertImport(
  db: Db,
  values: {
    kind: ImportKind;
    fileName: string;
    sha256: string;
    profile: string | null;
    importedBy: string;
    lines: number;
    skipped: number;
  },
): Promise<{ id: string; importedAt: Date }> {
  const row = await db
    .insertInto('imports')
    .values({
      kind: values.kind,
      file_name: values.fileName,
      sha256: values.sha256,
      profile: values.profile,
      imported_by: values.importedBy,
      lines: values.lines,
      new_lines: 0,
      skipped: values.skipped,
    })
    .returning(['id', 'imported_at'])
    .executeTakeFirstOrThrow();
  return { id: row.id, importedAt: row.imported_at };
}

export async function setImportNewLines(db: Db, importId: string, newLines: number): Promise<void> {
  await db.updateTable('imports').set({ new_lines: newLines }).where('id', '=', importId).execute();
}

export async function insertStatement(
  db: Db,
  importId: string,
  position: number,
  statement: Omit<StatementRecord, 'lines'>,
  newLines: number,
): Promise<void> {
  await db
    .insertInto('import_statements')
    .values({
      import_id: importId,
      position,
      statement_id: statement.statementId,
      format: statement.format,
      bank_account: statement.bankAccount,
      currency: statement.currency,
      opening: statement.opening,
      closing: statement.closing,
      credits: statement.credits,
      debits: statement.debits,
      booked: statement.booked,
      pending: statement.pending,
      new_lines: newLines,
      closing_date: statement.closingDate ?? null,
    })
    .execute();
}

/** The tables whose rows are stored once under their `identity`. */
type IdentityTable = 'bank_statement_lines' | 'provider_transaction_rows' | 'provider_settlement_rows';

/**
 * Inserts the rows not stored yet under their identity, in chunks; returns how many were new. Each chunk
 * is one JSON parameter read into the table's row type (`json_populate_recordset`: amounts and instants
 * from their text, a JSON array into an array column), so a chunk of thousands of rows is one short
 * statement to build, send and plan, not a VALUES list of a parameter per cell. The rows' keys are the
 * table's columns; every row names the same ones.
 */
async function insertNew(
  db: Db,
  table: IdentityTable,
  rows: readonly Record<string, unknown>[],
): Promise<number> {
  let inserted = 0;
  for (const part of chunks(rows)) {
    const columns = sql.join(Object.keys(part[0]!).map((c) => sql.ref(c)));
    const { rows: done } = await sql<{ n: number }>`
      WITH added AS (
        INSERT INTO ${sql.table(table)} (${columns})
        SELECT ${columns} FROM json_populate_recordset(NULL::${sql.table(table)}, ${JSON.stringify(part)}::json)
        ON CONFLICT (identity) DO NOTHING
        RETURNING 1)
      SELECT count(*)::int AS n FROM added`.execute(db);
    inserted += done[0]!.n;
  }
  return inserted;
}

/** Inserts the lines not stored yet; returns how many were new. */
export function insertBankLines(db: Db, importId: string, lines: readonly BankLineRecord[]): Promise<number> {
  return insertNew(
    db,
    'bank_statement_lines',
    lines.map((line) => ({ ...line, import_id: importId })),
  );
}

export function insertTransactionRows(
  db: Db,
  importId: string,
  rows: readonly TransactionRowRecord[],
): Promise<number> {
  return insertNew(
    db,
    'provider_transaction_rows',
    rows.map((row) => ({ ...row, import_id: importId })),
  );
}

export function insertSettlementRows(
  db: Db,
  importId: string,
  rows: readonly SettlementRowRecord[],
): Promise<number> {
  return insertNew(
    db,
    'provider_settlement_rows',
    rows.map((row) => ({ ...row, import_id: importId })),
  );
}
