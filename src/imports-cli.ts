/**
 * `payrecon import bank-statement|provider-transactions|provider-settlements FILE`: reads the file (a
 * camt.053 statement, or CSV or XLSX through a profile, the kind's built-in one by default), checks it,
 * then records it in one transaction (src/db/imports/service.ts), each line once. A refusal is one line
 * naming the file, the row or entry and the rule, exit code 2, and nothing is imported. `--dry-run` reads
 * and checks without a database.
 */
import { readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import { actingUser, systemIdentity } from './cli-auth.ts';
import { UsageError } from './cli-errors.ts';
import { type Config, loadConfig } from './config.ts';
import { IMPORT_KINDS, type ImportKind, type ImportOutcome } from './domain/imports.ts';
import { type ImportFileRequest, importFile, matcherFrom } from './import-service.ts';
import { type Profile, readProfileFile } from './imports/profile.ts';
import { refused } from './imports/refusal.ts';
import { type OpenDatabase, openDatabaseInfrastructure } from './infrastructure.ts';
import { logger as rootLogger } from './logger.ts';
import { printMatchRun } from './matching-cli.ts';

export interface ImportCliOptions {
  profile?: string;
  account?: string;
  dryRun?: boolean;
  json?: boolean;
  user?: string;
  passwordFile?: string;
}

/**
 * Who imports, as the import records it: the configured user `--user` names, authenticated and able to
 * import (an operator or a controller, src/cli-auth.ts); without `--user`, `cli:<system user>`.
 */
async function whoImports(config: Config, opts: ImportCliOptions): Promise<string> {
  if (opts.user === undefined) return systemIdentity();
  return (await actingUser(config, opts, 'import-files', 'import')).username;
}

/** The command's request: the profile file and the file read (a refusal when either cannot be). */
async function requestOf(
  kind: ImportKind,
  path: string,
  opts: ImportCliOptions,
  user: string,
): Promise<ImportFileRequest> {
  let profile: Profile | undefined;
  if (opts.profile !== undefined) {
    const read = await readProfileFile(opts.profile);
    if (!read.ok) throw read.refusal;
    profile = read.value;
  }
  let content: Buffer;
  try {
    content = await readFile(path);
  } catch (err) {
    const refusal = refused(path, null, `cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    throw refusal.ok ? err : refusal.refusal;
  }
  return {
    kind,
    fileName: basename(path),
    source: path,
    bytes: new Uint8Array(content.buffer, content.byteOffset, content.byteLength),
    user,
    ...(profile === undefined ? {} : { profile }),
    ...(opts.account === undefined ? {} : { account: opts.account }),
    ...(opts.dryRun ? { dryRun: true } : {}),
  };
}

function print(outcome: ImportOutcome, json: boolean): void {
  const { summary, fileName } = outcome;
  if (json) {
    // The import's summary and, beside it, the matching run its new lines started (null: none).
    process.stdout.write(`${JSON.stringify({ ...summary, matching: outcome.matching })}\n`);
    return;
  }
  const newText = (n: number | null) => (n === null ? 'not checked (dry run)' : `${n} new`);
  if ('statements' in summary) {
    for (const s of summary.statements) {
      process.stdout.write(
        `${fileName}: ${s.account} ${s.currency}: opening ${s.opening ?? 'not given'}, closing ${s.closing ?? 'not given'}, ` +
          `credits ${s.credits}, debits ${s.debits}, ${s.booked} booked, ${s.pending} pending, ${newText(s.new)}\n`,
      );
    }
    return;
  }
  process.stdout.write(`${fileName}: ${summary.rows} rows, ${newText(summary.new)}\n`);
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
  const request = await requestOf(kind as ImportKind, path, opts, await whoImports(config, opts));
  const bankAccounts = config.bankAccounts;
  if (opts.dryRun) {
    print(await importFile({ db: null, bankAccounts }, request), opts.json === true);
    return;
  }
  let infra: Awaited<ReturnType<typeof openDatabaseInfrastructure>> | null = null;
  // The database is opened once the file is read and checked: a refused file needs none.
  const open = async () => {
    const logger = rootLogger.child({ module: 'import' }, { level: 'silent' });
    infra = await openDatabaseInfrastructure(config, openDatabase, {
      schema: 'require',
      poolSize: 2,
      logger,
    });
    return infra.db;
  };
  try {
    const outcome = await importFile({ db: open, bankAccounts, match: matcherFrom(config) }, request);
    print(outcome, opts.json === true);
    // The matching run's counts are the JSON's `matching`; in text they follow the import's line.
    if (outcome.matching !== null && opts.json !== true) {
      printMatchRun(outcome.matching, false, `${outcome.fileName}: `);
    }
    if (outcome.matchingError !== undefined) {
      // The import is recorded; its lines wait for the next matching run.
      process.stderr.write(
        `payrecon: ${outcome.fileName}: imported as ${outcome.id}, but matching did not finish ` +
          `(${outcome.matchingError}): the next matching run takes its lines\n`,
      );
      process.exitCode = 1;
    }
  } finally {
    await (infra as Awaited<ReturnType<typeof openDatabaseInfrastructure>> | null)?.lifecycle.stopAll();
  }
}
