import type { MatchSummary } from './matching.ts';

/** The kinds of file payrecon imports: the bank's statements and the provider's two reports. */
export const IMPORT_KINDS = ['bank-statement', 'provider-transactions', 'provider-settlements'] as const;
export type ImportKind = (typeof IMPORT_KINDS)[number];

/** One statement of an imported bank statement file, as `payrecon import --json` prints it. */
export interface ImportedStatementSummary {
  account: string;
  currency: string;
  /** Decimal text in major units; null when the statement gives none. */
  opening: string | null;
  closing: string | null;
  credits: string;
  debits: string;
  /** Booked and pending entries. */
  booked: number;
  pending: number;
  /** Lines not imported before; null on a dry run. */
  new: number | null;
}

/** What an import did, as `payrecon import --json` prints it. */
export type ImportSummary =
  | { statements: ImportedStatementSummary[] }
  | { kind: 'provider-transactions' | 'provider-settlements'; rows: number; new: number | null };

export interface ImportOutcome {
  /** The recorded import; null on a dry run. */
  id: string | null;
  kind: ImportKind;
  fileName: string;
  summary: ImportSummary;
  /**
   * The matching run the new lines started (src/db/matching/), as the import keeps it; null on a dry run,
   * when no line was new (no run), or when no run finished for it (the next run takes its lines).
   */
  matching: MatchSummary | null;
  /** Why the run the new lines started did not finish; the import stays recorded. */
  matchingError?: string;
}

/** A file to import, from whoever brings it (the page, the API, the fetch job). */
export interface ImportRequest {
  kind: ImportKind;
  fileName: string;
  bytes: Uint8Array;
  /** A built-in profile's name; the kind's built-in one when absent. */
  profile?: string;
  /** The bank account of a CSV or XLSX statement without an account column. */
  account?: string;
  /** Who imports: a user name, `api:<token name>` or `job:<job>`. */
  user: string;
  /** Read and check only: nothing recorded. */
  dryRun?: boolean;
}

/** Imports a file: throws the refusal (an ImportRefusal, src/imports/refusal.ts) when the file is refused. */
export type ImportFileFn = (request: ImportRequest) => Promise<ImportOutcome>;
