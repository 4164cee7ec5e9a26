/**
 * The import tables' statements: an import's record, a statement's balances and counts, and the lines,
 * each inserted once under its identity (a line already stored is left as it is: the import that first
 * brought it keeps it). Plain functions over a database or a transaction; the service owns the transaction.
 */
import { type InsertObject, sql } from 'kysely';
import type { ImportKind } from '../../domain/imports.ts';
import type { Database, Db } from '../schema.ts';
import type { BankLineRecord, SettlementRowRecord, StatementRecord, TransactionRowRecord } from './tables.ts';

/** Rows per INSERT: far under PostgreSQL's 65,535 parameters at 15 columns a row. */
const CHUNK = 1000;

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
    })
    .execute();
}

/** The tables whose rows are stored once under their `identity`. */
type IdentityTable = 'bank_statement_lines' | 'provider_transaction_rows' | 'provider_settlement_rows';

/** Inserts the rows not stored yet under their identity, in chunks; returns how many were new. */
async function insertNew<T extends IdentityTable>(
  db: Db,
  table: T,
  rows: readonly InsertObject<Database, T>[],
): Promise<number> {
  let inserted = 0;
  for (const part of chunks(rows)) {
    const done = await db
      .insertInto(table as IdentityTable)
      .values(part as InsertObject<Database, IdentityTable>[])
      .onConflict((oc) => oc.column('identity').doNothing())
      .returning('identity')
      .execute();
    inserted += done.length;
  }
  return inserted;
}

/** Inserts the lines not stored yet; returns how many were new. */
export function insertBankLines(db: Db, importId: string, lines: readonly BankLineRecord[]): Promise<number> {
  return insertNew(
    db,
    'bank_statement_lines',
    lines.map((line) => ({
      ...line,
      import_id: importId,
      end_to_end_ids: sql<string[]>`${line.end_to_end_ids}::text[]`,
      transactions: JSON.stringify(line.transactions),
    })),
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
