/**
 * `payrecon import bank-statement|provider-transactions|provider-settlements FILE`: reads the file (a
 * camt.053 statement, or CSV or XLSX through a profile, the kind's built-in one by default), checks it,
 * then records it in one transaction (src/db/imports/service.ts), each line once. A refusal is one line
 * naming the file, the row or entry and the rule, exit code 2, and nothing is imported. `--dry-run` reads
 * and checks without a database. The import records who made it: an authenticated `--user`, else
 * `cli:<system user>`.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import { actingUser, systemIdentity } from './cli-auth.ts';
import { UsageError } from './cli-errors.ts';
import { type Config, loadConfig } from './config.ts';
import { recordImport } from './db/imports/service.ts';
import type { ImportFile } from './db/imports/tables.ts';
import { IMPORT_KINDS, type ImportKind } from './domain/imports.ts';
import { checkBankAccounts, type KnownBankAccount } from './imports/bank-accounts.ts';
import {
  parseBankStatementFile,
  parseProviderSettlementsFile,
  parseProviderTransactionsFile,
} from './imports/files.ts';
import { type Profile, readProfileFile } from './imports/profile.ts';
import { settlementRowRecord, statementRecord, transactionRowRecord } from './imports/records.ts';
import { type ImportResult, refused } from './imports/refusal.ts';
import { type OpenDatabase, openDatabaseInfrastructure } from './infrastructure.ts';
import { logger as rootLogger } from './logger.ts';
import { matchWithConfig, printMatchRun } from './matching-cli.ts';

export interface ImportCliOptions {
  profile?: string;
  account?: string;
  dryRun?: boolean;
  json?: boolean;
  user?: string;
  passwordFile?: string;
}

function unwrap<T>(result: ImportResult<T>): T {
  if (!result.ok) throw result.refusal;
  return result.value;
}

/**
 * Who imports, as the import records it: the configured user `--user` names, authenticated and able to
 * work the queue (an operator or a controller, src/cli-auth.ts); without `--user`, `cli:<system user>`.
 */
async function whoImports(config: Config, opts: ImportCliOptions): Promise<string> {
  if (opts.user === undefined) return systemIdentity();
  return (await actingUser(config, opts, 'work-exceptions', 'import')).username;
}

/** The file read and checked, as the database records it (without who imports it). */
async function readImport(
  kind: ImportKind,
  path: string,
  opts: ImportCliOptions,
  importedBy: string,
  bankAccounts: readonly KnownBankAccount[],
): Promise<ImportFile> {
  let profile: Profile | undefined;
  if (opts.profile !== undefined) profile = unwrap(await readProfileFile(opts.profile));
  let content: Buffer;
  try {
    content = await readFile(path);
  } catch (err) {
    unwrap(refused(path, null, `cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`));
    throw err;
  }
  const bytes = new Uint8Array(content.buffer, content.byteOffset, content.byteLength);
  const common = {
    fileName: basename(path),
    sha256: createHash('sha256').update(content).digest('hex'),
    profile: profile?.name ?? null,
    importedBy,
  };
  if (kind === 'bank-statement') {
    const options = {
      ...(profile === undefined ? {} : { profile }),
      ...(opts.account === undefined ? {} : { account: opts.account }),
    };
    const statements = unwrap(await parseBankStatementFile(path, bytes, options));
    unwrap(checkBankAccounts(path, statements, bankAccounts));
    return { ...common, kind, statements: statements.map(statementRecord) };
  }
  const options = profile === undefined ? {} : { profile };
  if (kind === 'provider-transactions') {
    const rows = unwrap(await parseProviderTransactionsFile(path, bytes, options));
    return { ...common, kind, rows: rows.map(transactionRowRecord) };
  }
  const rows = unwrap(await parseProviderSettlementsFile(path, bytes, options));
  return { ...common, kind, rows: rows.map(settlementRowRecord) };
}

function print(
  file: ImportFile,
  fresh: { lines: number | null; statements: (number | null)[] },
  json: boolean,
): void {
  const newText = (n: number | null) => (n === null ? 'not checked (dry run)' : `${n} new`);
  if (file.kind === 'bank-statement') {
    const statements = file.statements.map((s, i) => ({
      account: s.bankAccount,
      currency: s.currency,
      opening: s.opening,
      closing: s.closing,
      credits: s.credits,
      debits: s.debits,
      booked: s.booked,
      pending: s.pending,
      new: fresh.statements[i] ?? null,
    }));
    if (json) {
      process.stdout.write(`${JSON.stringify({ statements })}\n`);
      return;
    }
    for (const s of statements) {
      process.stdout.write(
        `${file.fileName}: ${s.account} ${s.currency}: opening ${s.opening ?? 'not given'}, closing ${s.closing ?? 'not given'}, ` +
          `credits ${s.credits}, debits ${s.debits}, ${s.booked} booked, ${s.pending} pending, ${newText(s.new)}\n`,
      );
    }
    return;
  }
  if (json) {
    process.stdout.write(
      `${JSON.stringify({ kind: file.kind, rows: file.rows.length, new: fresh.lines })}\n`,
    );
    return;
  }
  process.stdout.write(`${file.fileName}: ${file.rows.length} rows, ${newText(fresh.lines)}\n`);
}

export async function runImportCli(
  kind: string,
  path: string,
  opts: ImportCliOptions,
  openDatabase: OpenDatabase,
): Promise<void> {
  if (!(IMPORT_KINDS as readonly string[]).includes(kind)) {
    throw new UsageError('kind', `must be one of ${IMPORT_KINDS.join(', ')}`);
  }
  // A bad setting is named before the file is read.
  const config = loadConfig();
  const importedBy = await whoImports(config, opts);
  const file = await readImport(kind as ImportKind, path, opts, importedBy, config.bankAccounts);
  if (opts.dryRun) {
    const statements = file.kind === 'bank-statement' ? file.statements.map(() => null) : [];
    print(file, { lines: null, statements }, opts.json === true);
    return;
  }
  const logger = rootLogger.child({ module: 'import' }, { level: 'silent' });
  const infra = await openDatabaseInfrastructure(config, openDatabase, {
    schema: 'require',
    poolSize: 2,
    logger,
  });
  try {
    const recorded = await recordImport(infra.db, file);
    // New lines are matched at once (the JSON output stays the import's alone).
    const matched = recorded.new > 0 ? await matchWithConfig(infra.db, config) : null;
    print(
      file,
      { lines: recorded.new, statements: recorded.statements.map((s) => s.new) },
      opts.json === true,
    );
    if (matched !== null && opts.json !== true) printMatchRun(matched, false, `${file.fileName}: `);
  } finally {
    await infra.lifecycle.stopAll();
  }
}
