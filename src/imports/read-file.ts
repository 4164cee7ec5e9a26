/**
 * One file of an import read and checked from its bytes, whoever brings it (the command, the page's
 * upload, `POST /api/v1/imports`, the fetch job): the kind's parser through the given profile (the
 * kind's built-in one by default), the bank accounts checked, each line as the database records it, and
 * the file's SHA-256. All or nothing: a refusal (one line naming the file, the row or entry and the
 * rule), or every line.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ImportKind } from '../domain/imports.ts';
import { checkBankAccounts, type KnownBankAccount } from './bank-accounts.ts';
import {
  parseBankStatementFile,
  parseProviderSettlementsFile,
  parseProviderTransactionsFile,
} from './files.ts';
import { BUILT_IN_PROFILES, builtInProfile, type Profile, parseProfile } from './profile.ts';
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

/**
 * A profile by its name (what the page and the API take): a configured one (PAYRECON_IMPORT_PROFILES_DIR)
 * or a built-in one; a refusal naming the known ones.
 */
export function namedProfile(
  source: string,
  name: string,
  configured: readonly Profile[] = [],
): ImportResult<Profile> {
  const own = configured.find((p) => p.name === name);
  if (own) return accepted(own);
  const kind = Object.hasOwn(BUILT_IN_PROFILES, name) ? BUILT_IN_PROFILES[name] : undefined;
  if (kind === undefined) {
    const known = [...configured.map((p) => p.name), ...Object.keys(BUILT_IN_PROFILES)].join(', ');
    return refused(source, null, `the profile ${quote(name)} is not one of ${known}`);
  }
  return accepted(builtInProfile(kind));
}

/** The profiles of a directory (each `*.json` file, by its `name`), checked; a refusal names the file. */
export function readProfilesDir(dir: string): ImportResult<Profile[]> {
  let names: string[];
  try {
    names = readdirSync(dir)
      .filter((n) => n.endsWith('.json'))
      .sort();
  } catch (err) {
    return refused(dir, null, `cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  const profiles: Profile[] = [];
  for (const n of names) {
    const path = join(dir, n);
    let value: unknown;
    try {
      value = JSON.parse(readFileSync(path, 'utf8'));
    } catch (err) {
      return refused(path, null, `is not JSON: ${(err as Error).message}`);
    }
    const profile = parseProfile(path, value);
    if (!profile.ok) return profile;
    if (profiles.some((p) => p.name === profile.value.name)) {
      return refused(path, null, `names the profile ${quote(profile.value.name)} a second time`);
    }
    profiles.push(profile.value);
  }
  return accepted(profiles);
}
