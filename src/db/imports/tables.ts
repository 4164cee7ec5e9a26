/**
 * What an import records, as plain values: amounts are decimal text in major units (`'-12.30'`), so
 * nothing here depends on the parsers. The tables' types are in `src/db/schema.ts`.
 */
import type {
  BankStatementLinesTable,
  Numeric,
  ProviderSettlementRowsTable,
  ProviderTransactionRowsTable,
} from '../schema.ts';

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
/** `balance_at_cutoff` may be left out: a report that gives no balance. */
export type SettlementRowRecord = Omit<
  ProviderSettlementRowsTable,
  'import_id' | 'period_start' | 'period_end' | 'balance_at_cutoff'
> & {
  period_start: string | null;
  period_end: string | null;
  balance_at_cutoff?: Numeric | null;
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
  /** The closing balance's date (`YYYY-MM-DD`); null or absent: none known. */
  closingDate?: string | null;
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
