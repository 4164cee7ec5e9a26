/**
 * `payrecon report settlement|exceptions --from DATE --to DATE [--account NAME] --out FILE.xlsx`:
 * generates a workbook now, with a progress bar on the terminal, and records it as a report run.
 * The database comes from `--database-url` or `DATABASE_URL` (through config).
 */
import { dirname, join } from 'node:path';
import cliProgress from 'cli-progress';
import { loadConfig } from '../config.ts';
import { createDb, migrateToLatest } from '../db/connection.ts';
import { AppError } from '../domain/errors.ts';
import { isIsoDate } from './period.ts';
import { type ReportKind, ReportRunner } from './runs.ts';
import { ensureReportSchema } from './schema.ts';

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
  /** Hide the progress bar (also hidden when stderr is not a terminal). */
  quiet?: boolean;
}

export async function runReportCli(kind: ReportKind, opts: ReportCliOptions): Promise<void> {
  const config = loadConfig();
  const url = opts.databaseUrl ?? config.database.url;
  if (!url) {
    throw new AppError(
      'CONFIG_INVALID',
      'DATABASE_URL: required for `payrecon report` (or pass --database-url)',
    );
  }
  for (const [name, value] of [
    ['--from', opts.from],
    ['--to', opts.to],
  ] as const) {
    if (!isIsoDate(value))
      throw new AppError('VALIDATION_FAILED', `${name}: must be a date YYYY-MM-DD (got ${value})`);
  }
  if (!opts.out.endsWith('.xlsx')) throw new AppError('VALIDATION_FAILED', '--out: must name an .xlsx file');
  const db = createDb(url, 4);
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
  try {
    await migrateToLatest(db);
    await ensureReportSchema(db);
    const runner = new ReportRunner({
      db,
      dir: join(config.dataDir, 'reports'),
      timeZone: opts.timeZone ?? config.jobs.timeZone,
      cutoff: opts.cutoff ?? config.jobs.settlementCutoff,
    });
    const csvDir = opts.csv === false ? null : (opts.csvDir ?? dirname(opts.out));
    const outcome = await runner.run(
      { kind, from: opts.from, to: opts.to, account: opts.account ?? null },
      {
        trigger: 'cli',
        requestedBy: process.env.USER ?? null,
        out: opts.out,
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
    const out = process.stdout;
    out.write(`report run ${run.id}: ${run.kind} ${run.from}..${run.to} ${run.account ?? 'all accounts'}\n`);
    for (const [sheet, n] of Object.entries(run.rowCounts)) out.write(`  ${sheet}: ${n} rows\n`);
    for (const f of run.files) out.write(`  ${f.path}\n`);
    out.write(`  sha256 ${run.sha256}\n`);
    for (const line of outcome.lines) out.write(`  ${line}\n`);
  } finally {
    if (started) bar.stop();
    await db.destroy();
  }
}
