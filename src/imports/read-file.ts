/**
 * One file of an import read and checked from its bytes, whoever brings it (the command, the page's
 * upload, `POST /api/v1/imports`, the fetch job): the kind's parser through the given profile (the
 * kind's built-in one by default), the bank accounts checked, each line as the database records it, and
 * the file's SHA-256. All or nothing: a refusal (one line naming the file, the row or entry and the
 * rule), or every line.
 */
import { createHash } from 'node:crypto';
import type { ImportKind } from '../domain/imports.ts';
import { checkBankAccounts, type KnownBankAccount } from './bank-accounts.ts';
import {
  parseBankStatementFile,
  parseProviderSettlementsFile,
  parseProviderTransactionsFile,
} from './files.ts';
import { BUILT_IN_PROFILES, builtInProfile, type Profile } from './profile.ts';
import { settlementRowRecord, statementRecord, transactionRowRecord } from './records.ts';
import { accepted, type ImportResult, quote, refused } from './refusal.ts';

export interface ReadImportOptions {
  /** How refusals name the file (the command: the path given); default the file name. */
  source?: string;
  /** For a CSV or XLSX file; the kind's built-in profile when absent. */
  profile?: Profile;
  /** The bank account of a CSV or XLSX statement whose profile names no account column. */
  account?: string;
  bankAccounts: readonly KnownBankAccount[];
}

/** The file as the database records it, without who imports it. */
export type ReadImport = {
  fileName: string;
  sha256: string;
  profile: string | null;
} & (
  | { kind: 'bank-statement'; statements: ReturnType<typeof statementRecord>[] }
  | { kind: 'provider-transactions'; rows: ReturnType<typeof transactionRowRecord>[] }
  | { kind: 'provider-settlements'; rows: ReturnType<typeof settlementRowRecord>[] }
);

export async function readImportFile(
  kind: ImportKind,
  fileName: string,
  bytes: Uint8Array,
  options: ReadImportOptions,
): Promise<ImportResult<ReadImport>> {
  const source = options.source ?? fileName;
  const { profile } = options;
  const common = {
    fileName,
    sha256: createHash('sha256').update(bytes).digest('hex'),
    profile: profile?.name ?? null,
  };
  if (kind === 'bank-statement') {
    const statements = await parseBankStatementFile(source, bytes, {
      ...(profile === undefined ? {} : { profile }),
      ...(options.account === undefined ? {} : { account: options.account }),
    });
    if (!statements.ok) return statements;
    const checked = checkBankAccounts(source, statements.value, options.bankAccounts);
    if (!checked.ok) return checked;
    return accepted({ ...common, kind, statements: checked.value.map(statementRecord) });
  }
  const parseOptions = profile === undefined ? {} : { profile };
  if (kind === 'provider-transactions') {
    const rows = await parseProviderTransactionsFile(source, bytes, parseOptions);
    if (!rows.ok) return rows;
    return accepted({ ...common, kind, rows: rows.value.map(transactionRowRecord) });
  }
  const rows = await parseProviderSettlementsFile(source, bytes, parseOptions);
  if (!rows.ok) return rows;
  return accepted({ ...common, kind, rows: rows.value.map(settlementRowRecord) });
}

/** A built-in profile by its name (what the page and the API take); a refusal naming the known ones. */
export function namedProfile(source: string, name: string): ImportResult<Profile> {
  const kind = Object.hasOwn(BUILT_IN_PROFILES, name) ? BUILT_IN_PROFILES[name] : undefined;
  if (kind === undefined) {
    const known = Object.keys(BUILT_IN_PROFILES).join(', ');
    return refused(source, null, `the profile ${quote(name)} is not one of ${known}`);
  }
  return accepted(builtInProfile(kind));
}
