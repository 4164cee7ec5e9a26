/**
 * Kysely types of the import tables (migration `..._imports`) and what an import records, as plain
 * values: amounts are decimal text in major units (`'-12.30'`), so nothing here depends on the parsers.
 * `importTables` widens a database handle to these tables.
 */
import type { Generated, Kysely, Transaction } from 'kysely';
import type { Database, Json, Numeric, Timestamp } from '../schema.ts';

export const IMPORT_KINDS = ['bank-statement', 'provider-transactions', 'provider-settlements'] as const;
export type ImportKind = (typeof IMPORT_KINDS)[number];

export interface ImportsTable {
  id: Generated<string>;
  kind: ImportKind;
  file_name: string;
  sha256: string;
  profile: string | null;
  imported_by: string;
  imported_at: Generated<Date>;
  lines: number;
  new_lines: number;
  skipped: Generated<number>;
}

export interface ImportStatementsTable {
  import_id: string;
  position: number;
  statement_id: string | null;
  format: string;
  bank_account: string;
  currency: string;
  opening: Numeric | null;
  closing: Numeric | null;
  credits: Numeric;
  debits: Numeric;
  booked: number;
  pending: number;
  new_lines: number;
}

export interface BankStatementLinesTable {
  identity: string;
  import_id: string;
  content_hash: string;
  bank_account: string;
  currency: string;
  reference: string | null;
  booking_date: string;
  value_date: string | null;
  amount: Numeric;
  reversal: boolean;
  end_to_end_ids: string[];
  counterparty: string | null;
  description: string | null;
  transactions: Json;
}

export interface ProviderTransactionRowsTable {
  identity: string;
  import_id: string;
  content_hash: string;
  transaction_id: string;
  type: string;
  status: string;
  external_id: string | null;
  invoice_id: string | null;
  currency: string;
  gross: Numeric;
  fee: Numeric;
  net: Numeric;
  created_at: Timestamp;
  updated_at: Timestamp | null;
  settlement_id: string | null;
}

export interface ProviderSettlementRowsTable {
  identity: string;
  import_id: string;
  content_hash: string;
  settlement_id: string;
  account: string | null;
  period_start: Timestamp | null;
  period_end: Timestamp | null;
  currency: string;
  gross: Numeric;
  fees: Numeric;
  settlement_currency: string;
  rate: Numeric;
  net: Numeric;
  value_date: string;
  bank_reference: string | null;
}

export type ImportTables = {
  imports: ImportsTable;
  import_statements: ImportStatementsTable;
  bank_statement_lines: BankStatementLinesTable;
  provider_transaction_rows: ProviderTransactionRowsTable;
  provider_settlement_rows: ProviderSettlementRowsTable;
};

export type ImportsDb = Kysely<Database & ImportTables>;

/** The handle (a database or a transaction) with the import tables in its type. */
export function importTables(db: Kysely<Database> | Transaction<Database>): ImportsDb {
  return db.withTables<ImportTables>();
}

/** A line as recorded: its identity and content hash, and the values of its table's other columns. */
export type BankLineRecord = Omit<BankStatementLinesTable, 'import_id' | 'transactions'> & {
  transactions: Record<string, unknown>[];
};
/** Instants as ISO 8601 text. */
export type TransactionRowRecord = Omit<
  ProviderTransactionRowsTable,
  'import_id' | 'created_at' | 'updated_at'
> & {
  created_at: string;
  updated_at: string | null;
};
export type SettlementRowRecord = Omit<
  ProviderSettlementRowsTable,
  'import_id' | 'period_start' | 'period_end'
> & {
  period_start: string | null;
  period_end: string | null;
};

export interface StatementRecord {
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
  lines: BankLineRecord[];
}

/** One file to record: what it is and who imports it, and its lines by kind. */
export type ImportFile = {
  fileName: string;
  sha256: string;
  profile: string | null;
  importedBy: string;
} & (
  | { kind: 'bank-statement'; statements: StatementRecord[] }
  | { kind: 'provider-transactions'; rows: TransactionRowRecord[] }
  | { kind: 'provider-settlements'; rows: SettlementRowRecord[] }
);
