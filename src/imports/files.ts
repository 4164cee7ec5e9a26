/**
 * The three kinds of file an import reads, each from its bytes: a bank statement (camt.053 XML, or a
 * bank's CSV or XLSX through a profile), a provider's transactions report and a provider's settlement
 * report (CSV or XLSX through a profile). Without a profile, the kind's built-in one (the sandbox's
 * layout) applies. All or nothing: a refusal, or every line of the file.
 *
 * MT940 is not read: the parsers of it on the npm registry (mt940js, mt940-js) turn amounts into floats
 * (parseFloat) and have few releases and users; an amount that went through a float is not to be trusted.
 */
import type { ImportKind } from '../domain/imports.ts';
import { parseCamt053 } from './camt053.ts';
import {
  type BankProfile,
  builtInProfile,
  type Profile,
  type SettlementsProfile,
  type TransactionsProfile,
} from './profile.ts';
import {
  type ProviderSettlement,
  type ProviderTransaction,
  readBankRows,
  readSettlementRows,
  readTransactionRows,
} from './profile-rows.ts';
import { type ImportResult, refused } from './refusal.ts';
import type { BankStatement } from './statement.ts';
import { isZip, readTable, type Table } from './table.ts';

/** An XML document starts, after a byte order mark and white space, with `<`. */
function isXml(content: string | Uint8Array): boolean {
  if (isZip(content)) return false;
  const head =
    typeof content === 'string' ? content.slice(0, 64) : new TextDecoder().decode(content.slice(0, 64));
  return head
    .replace(/^\uFEFF/, '')
    .trimStart()
    .startsWith('<');
}

/**
 * An MT940 message: its first tag, `:20:` (transaction reference), after an optional SWIFT block header
 * (`{1:...}`) and white space.
 */
function isMt940(content: string | Uint8Array): boolean {
  if (isZip(content)) return false;
  const head =
    typeof content === 'string' ? content.slice(0, 256) : new TextDecoder().decode(content.slice(0, 256));
  return /^(?:\{1:[^}]*\}.*?\{4:)?\s*:20:/s.test(head.replace(/^\uFEFF/, '').trimStart());
}

async function tableFor<P extends Profile>(
  file: string,
  content: string | Uint8Array,
  kind: ImportKind,
  profile: Profile | undefined,
): Promise<ImportResult<{ table: Table; profile: P }>> {
  const chosen = profile ?? builtInProfile(kind);
  if (chosen.kind !== kind) {
    return refused(file, null, `the profile ${chosen.name} reads ${chosen.kind} files, not ${kind}`);
  }
  const table = await readTable(file, content, {
    delimiter: chosen.csv?.delimiter,
    quote: chosen.csv?.quote,
    sheet: chosen.sheet,
  });
  if (!table.ok) return table;
  return { ok: true, value: { table: table.value, profile: chosen as P } };
}

export interface BankStatementOptions {
  /** For a CSV or XLSX file; the built-in bank profile when absent. */
  profile?: Profile;
  /** The bank account of a CSV or XLSX file whose profile names no account column. */
  account?: string;
}

export async function parseBankStatementFile(
  file: string,
  content: string | Uint8Array,
  options: BankStatementOptions = {},
): Promise<ImportResult<BankStatement[]>> {
  if (isXml(content)) {
    if (options.profile !== undefined) {
      return refused(
        file,
        null,
        `is camt.053 XML: the profile ${options.profile.name} reads CSV or XLSX files`,
      );
    }
    return parseCamt053(file, content);
  }
  if (isMt940(content)) {
    return refused(
      file,
      null,
      'is MT940, which is not read: import the camt.053 or CSV statement of the same account',
    );
  }
  const read = await tableFor<BankProfile>(file, content, 'bank-statement', options.profile);
  if (!read.ok) return read;
  return readBankRows(file, read.value.table, read.value.profile, options.account ?? null);
}

export async function parseProviderTransactionsFile(
  file: string,
  content: string | Uint8Array,
  options: { profile?: Profile } = {},
): Promise<ImportResult<ProviderTransaction[]>> {
  const read = await tableFor<TransactionsProfile>(file, content, 'provider-transactions', options.profile);
  if (!read.ok) return read;
  return readTransactionRows(file, read.value.table, read.value.profile);
}

export async function parseProviderSettlementsFile(
  file: string,
  content: string | Uint8Array,
  options: { profile?: Profile } = {},
): Promise<ImportResult<ProviderSettlement[]>> {
  const read = await tableFor<SettlementsProfile>(file, content, 'provider-settlements', options.profile);
  if (!read.ok) return read;
  return readSettlementRows(file, read.value.table, read.value.profile);
}
