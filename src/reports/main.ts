/**
 * `payrecon report settlement|exceptions --from DATE --to DATE [--account NAME] --out FILE.xlsx`:
 * generates a workbook now, with a progress bar on the terminal, and records it as a report run.
 * The database: `--database-url`, DATABASE_URL, the running `payrecon up`'s, else the embedded one (the
 * CLI chooses). Strict as the page: an unknown account is an error, existing files are not overwritten
 * without `--force`, the folders written into must exist, and a schema behind the code is an error (a
 * report never migrates). The CSVs beside the workbook are named after it (`--out nov.xlsx`: `nov-*.csv`).
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import cliProgress from 'cli-progress';
import { loadConfig, localUser } from '../config.ts';
import { AppError } from '../domain/errors.ts';
import { isIsoDate } from '../domain/zoned-time.ts';
import { csvPrefixOf, type ReportKind, type ReportRunner } from './runs.ts';

export interface ReportCliOptions {
  from: string;
  to: string;
  account?: string;
  out: string;
  /** Directory for the CSVs (default: next to the workbook); `--no-csv` gives false. */
  csvDir?: string;
  csv?: boolean;
  timeZone?: string;
  cutoff?: string;
  databaseUrl?: string;
  /** Overwrite an existing workbook or CSV of the same name. */
  force?: boolean;
  /** Hide the progress bar (also hidden when stderr is not a terminal). */
  quiet?: boolean;
}

/**
 * The report runner in the command's time zone and cut-off, over the database the CLI chose (option,
 * environment, running instance, embedded) and found at the current schema.
 */
export type OpenReports = (settings: {
  timeZone: string;
  cutoff: string;
}) => Promise<{ reports: ReportRunner; stop(): Promise<void> }>;

function validTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

/** A folder the command writes into: it must exist (the command creates none). */
function existingFolder(option: string, folder: string): void {
  if (!existsSync(folder)) {
    throw new AppError('VALIDATION_FAILED', `${option}: the folder ${folder} does not exist`);
  }
  if (!statSync(folder).isDirectory()) {
    throw new AppError('VALIDATION_FAILED', `${option}: ${folder} is not a folder`);
  }
}

/** Files of this report that already exist (the workbook, and the CSVs named after it). */
function existingOutputs(out: string, csvDir: string | null, stem: string): string[] {
  const found = existsSync(out) ? [out] : [];
  if (csvDir && existsSync(csvDir)) {
    for (const name of readdirSync(csvDir)) {
      if (name.startsWith(`${stem}-`) && name.endsWith('.csv')) found.push(join(csvDir, name));
    }
  }
  return found;
}

export async function runReportCli(
  kind: ReportKind,
  opts: ReportCliOptions,
  openReports: OpenReports,
): Promise<void> {
  const config = loadConfig();
  // Every argument is checked before any database is opened (or started).
  for (const [name, value] of [
    ['--from', opts.from],
    ['--to', opts.to],
  ] as const) {
    if (!isIsoDate(value))
      throw new AppError('VALIDATION_FAILED', `${name}: must be a date YYYY-MM-DD (got ${value})`);
  }
  if (opts.from > opts.to) {
    throw new AppError('VALIDATION_FAILED', `--from: ${opts.from} is after --to ${opts.to}`);
  }
  const timeZone = opts.timeZone ?? config.jobs.timeZone;
  if (!validTimeZone(timeZone)) {
    throw new AppError('VALIDATION_FAILED', `--time-zone: must be an IANA time zone (got ${timeZone})`);
  }
  const cutoff = opts.cutoff ?? config.jobs.settlementCutoff;
  if (!/^(?:[01]\d|2[0-3]):[0-5]\d$/.test(cutoff)) {
    throw new AppError(
      'VALIDATION_FAILED',
      `--cutoff: must be a time HH:MM from 00:00 to 23:59 (got ${cutoff})`,
    );
  }
  if (!opts.out.endsWith('.xlsx')) throw new AppError('VALIDATION_FAILED', '--out: must name an .xlsx file');
  const out = resolve(opts.out);
  existingFolder('--out', dirname(out));
  const csvDir = opts.csv === false ? null : resolve(opts.csvDir ?? dirname(out));
  if (csvDir !== null && opts.csvDir !== undefined) existingFolder('--csv-dir', csvDir);
  const stem = csvPrefixOf(out);
  const existing = existingOutputs(out, csvDir, stem);
  if (existing.length > 0 && !opts.force) {
    throw new AppError(
      'VALIDATION_FAILED',
      `${existing[0]}: exists${existing.length > 1 ? ` (and ${existing.length - 1} more)` : ''}; pass --force to overwrite`,
    );
  }
  const bar = new cliProgress.SingleBar(
    {
      format: `${kind} {bar} {percentage}% | {value}/{total} rows | {duration_formatted}`,
      stream: process.stderr,
      noTTYOutput: false,
      hideCursor: true,
    },
    cliProgress.Presets.shades_classic,
  );
  const showBar = !opts.quiet && process.stderr.isTTY;
  let started = false;
  const { reports: runner, stop } = await openReports({ timeZone, cutoff });
  try {
    if (opts.account !== undefined) {
      const known = await runner.accounts();
      if (!known.includes(opts.account)) {
        throw new AppError(
          'VALIDATION_FAILED',
          `--account: no merchant account ${opts.account} in the ledger (${known.length ? `known: ${known.join(', ')}` : 'it has none yet'})`,
        );
      }
    }
    const outcome = await runner.run(
      { kind, from: opts.from, to: opts.to, account: opts.account ?? null },
      {
        trigger: 'cli',
        requestedBy: localUser(),
        out,
        csvDir,
        onProgress: (done, total) => {
          if (!showBar) return;
          if (!started) {
            bar.start(total, done);
            started = true;
          } else {
            bar.setTotal(total);
            bar.update(done);
          }
        },
      },
    );
    if (started) bar.stop();
    if (!outcome) throw new AppError('CONFLICT', 'a report run with this key already exists');
    const { run } = outcome;
    const stdout = process.stdout;
    stdout.write(
      `report run ${run.id}: ${run.kind} ${run.from}..${run.to} ${run.account ?? 'all accounts'}\n`,
    );
    for (const [sheet, n] of Object.entries(run.rowCounts)) stdout.write(`  ${sheet}: ${n} rows\n`);
    for (const f of run.files) stdout.write(`  ${f.path}\n`);
    stdout.write(`  sha256 ${run.sha256}\n`);
    for (const line of outcome.lines) stdout.write(`  ${line}\n`);
  } finally {
    if (started) bar.stop();
    await stop();
  }
}
