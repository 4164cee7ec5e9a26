/**
 * Report runs: every workbook generated (on a schedule, on demand from the page, or from the CLI) is a
 * row of `report_runs` with its parameters, row counts per sheet, the workbook's SHA-256, the files
 * written and its progress. Files live in one directory per run under the reports directory; the page
 * downloads them by name through `filePath`, never by a path taken from a request.
 */
import { createHash, randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { merchantAccounts } from '../db/read-models/reports.ts';
import {
  failRunsStartedBefore,
  getRunRow,
  insertRun,
  listRunRows,
  markRunDeleted,
  markRunFailed,
  markRunSucceeded,
  type RunFile,
  type RunRow,
  runsFinishedBefore,
  setRunProgress,
} from '../db/runs/report-runs.ts';
import type { Db } from '../db/schema.ts';
import { AppError } from '../domain/errors.ts';
import type { SlaTable } from '../domain/exception-sla.ts';
import type { Logger } from '../logger.ts';
import { writeExceptionWorkbook } from './exception-workbook.ts';
import { type Period, periodOf } from './period.ts';
import { writeSettlementWorkbook } from './settlement-workbook.ts';

export const REPORT_KINDS = ['settlement', 'exceptions'] as const;
export type ReportKind = (typeof REPORT_KINDS)[number];

export interface ReportParams {
  kind: ReportKind;
  /** Business days, both inclusive (`YYYY-MM-DD`). */
  from: string;
  to: string;
  account: string | null;
}

export type ReportFile = RunFile;

export interface ReportRun {
  id: string;
  runKey: string;
  kind: ReportKind;
  account: string | null;
  from: string;
  to: string;
  status: 'running' | 'succeeded' | 'failed';
  progress: { done: number; total: number } | null;
  rowCounts: Record<string, number>;
  rowCount: number | null;
  sha256: string | null;
  files: ReportFile[];
  filePath: string | null;
  requestedBy: string | null;
  trigger: string;
  createdAt: Date;
  finishedAt: Date | null;
  error: string | null;
  deleted: boolean;
}

export interface ReportRunnerOptions {
  db: Db;
  /** Directory holding one sub-directory per run. */
  dir: string;
  timeZone: string;
  /** Settlement cut-off, local `HH:MM` (default `00:00`). */
  cutoff?: string;
  /** Write one CSV per detail sheet (default true). */
  csv?: boolean;
  /** The page's public base URL (PAYRECON_PUBLIC_URL): entity ids in workbooks link to their page. */
  publicUrl?: string | null;
  /** The exception queue's service levels (config.exceptions.sla): due times in the exception workbook. */
  exceptionSla?: SlaTable;
  /** Runs generating at once; the others wait in request order (default 2). */
  concurrency?: number;
  /** Longest period in days a report may cover (default 366). */
  maxDays?: number;
  now?: () => Date;
  logger?: Logger;
}

export interface StartOptions {
  /** Deterministic key for scheduled runs; on-demand runs get a random one. */
  runKey?: string;
  trigger?: 'schedule' | 'demand' | 'cli' | 'catch-up';
  requestedBy?: string | null;
  /** Called with (done, total) as rows are written. */
  onProgress?: (done: number, total: number) => void;
  /** Workbook path (CLI `--out`); default: a file in the run's directory under the reports directory. */
  out?: string;
  /** Directory for the CSVs when `out` is given; null: none. Default: next to the workbook. */
  csvDir?: string | null;
}

export interface RunOutcome {
  run: ReportRun;
  /** Per-currency summary of a settlement run (for the terminal). */
  lines: string[];
}

function toRun(r: RunRow): ReportRun {
  const total = Number(r.progress_total);
  return {
    id: String(r.id),
    runKey: r.run_key,
    kind: r.report as ReportKind,
    account: r.merchant_account,
    from: r.parameters.from ?? '',
    to: r.parameters.to ?? '',
    status: r.status,
    progress: total > 0 ? { done: Number(r.progress_done), total } : null,
    rowCounts: Array.isArray(r.row_counts)
      ? Object.fromEntries(r.row_counts.map((c) => [c.sheet, c.rows]))
      : (r.row_counts ?? {}),
    rowCount: r.row_count,
    sha256: r.sha256,
    files: r.deleted_at ? [] : (r.files ?? []),
    filePath: r.file_path,
    requestedBy: r.requested_by,
    trigger: r.trigger,
    createdAt: r.created_at,
    finishedAt: r.finished_at,
    error: r.error,
    deleted: r.deleted_at !== null,
  };
}

/** The start of a run's file names: kind, account and period (`settlement-all-2026-11-01_2026-11-30`). */
export function reportStem(params: Pick<ReportParams, 'kind' | 'account' | 'from' | 'to'>): string {
  return `${params.kind}-${params.account ?? 'all'}-${params.from}_${params.to}`.replace(/[^\w.-]/g, '_');
}

/**
 * The start of the CSV names beside a workbook written to a path of its own (`--out nov.xlsx`:
 * `nov-deposits.csv`), so two reports given two names never share a CSV.
 */
export function csvPrefixOf(out: string): string {
  return basename(out).replace(/\.xlsx$/i, '');
}

/** SHA-256 of a file, streamed. */
export async function sha256File(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** Generates workbooks and keeps their runs; shared by the jobs, the page and the CLI. */
export class ReportRunner {
  readonly db: Db;
  readonly dir: string;
  readonly timeZone: string;
  readonly cutoff: string;
  private readonly csv: boolean;
  private readonly publicUrl: string | null;
  private readonly exceptionSla: SlaTable | undefined;
  private readonly now: () => Date;
  private readonly logger: Logger | undefined;
  private readonly active = new Map<string, Promise<RunOutcome>>();
  readonly concurrency: number;
  readonly maxDays: number;
  private running = 0;
  private readonly waiting: (() => void)[] = [];
  private readonly starting = new Set<Promise<unknown>>();

  constructor(options: ReportRunnerOptions) {
    this.db = options.db;
    this.dir = resolve(options.dir);
    this.timeZone = options.timeZone;
    this.cutoff = options.cutoff ?? '00:00';
    this.csv = options.csv ?? true;
    this.publicUrl = options.publicUrl ?? null;
    this.exceptionSla = options.exceptionSla;
    this.now = options.now ?? (() => new Date());
    this.logger = options.logger;
    this.concurrency = options.concurrency ?? 2;
    this.maxDays = options.maxDays ?? 366;
  }

  period(params: ReportParams): Period {
    const period = periodOf(params.from, params.to, this.timeZone, this.cutoff);
    const days =
      (Date.parse(`${params.to}T00:00:00Z`) - Date.parse(`${params.from}T00:00:00Z`)) / 86_400_000 + 1;
    if (days > this.maxDays) {
      throw new AppError(
        'VALIDATION_FAILED',
        `period: at most ${this.maxDays} days (PAYRECON_REPORT_MAX_DAYS), got ${days} (${params.from} to ${params.to})`,
      );
    }
    return period;
  }

  /** Runs generating now, and runs waiting for a slot (for the metrics and tests). */
  load(): { running: number; queued: number } {
    return { running: this.running, queued: this.waiting.length };
  }

  private async acquire(): Promise<void> {
    if (this.running < this.concurrency) {
      this.running++;
      return;
    }
    // The slot is handed over by release(), so a later request never overtakes a waiting one.
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.running--;
  }

  /**
   * Waits for a slot (the runs ahead of it first), then inserts the run row (claiming `runKey`) and
   * starts generating in the background. Returns null when a run with this key already exists
   * (another instance or an earlier tick made it). A period over the limit is refused at once.
   */
  async start(
    params: ReportParams,
    options: StartOptions = {},
  ): Promise<{ id: string; done: Promise<RunOutcome> } | null> {
    const period = this.period(params);
    const runKey = options.runKey ?? `demand:${randomUUID()}`;
    // The row's statuses are running, succeeded and failed: a run waiting for a slot has no row yet, so
    // `running` on the page always means generating.
    const starting = this.claim(runKey, params, period, options);
    // Until it has a slot and a row, the run is `starting`: idle() waits for it as for a running one.
    this.starting.add(starting);
    starting.catch(() => undefined).finally(() => this.starting.delete(starting));
    return starting;
  }

  private async claim(
    runKey: string,
    params: ReportParams,
    period: Period,
    options: StartOptions,
  ): Promise<{ id: string; done: Promise<RunOutcome> } | null> {
    await this.acquire();
    let id: string | null;
    try {
      id = await insertRun(this.db, {
        runKey,
        report: params.kind,
        account: params.account,
        period,
        parameters: { ...params, timeZone: this.timeZone, cutoff: this.cutoff, csv: this.csv },
        requestedBy: options.requestedBy ?? null,
        trigger: options.trigger ?? 'demand',
      });
    } catch (err) {
      this.release();
      throw err;
    }
    if (!id) {
      this.release();
      return null;
    }
    const runId = id;
    const done = this.generate(runId, params, period, options);
    this.active.set(runId, done);
    done
      .catch(() => undefined)
      .finally(() => {
        this.active.delete(runId);
        this.release();
      });
    return { id: runId, done };
  }

  /** Starts and waits; throws when the generation fails. */
  async run(params: ReportParams, options: StartOptions = {}): Promise<RunOutcome | null> {
    const started = await this.start(params, options);
    return started ? started.done : null;
  }

  /** Waits for every run this process started or queued (for shutdown and tests). */
  async idle(): Promise<void> {
    // A waiting run starts when another ends: wait until neither kind is left.
    while (this.active.size > 0 || this.starting.size > 0) {
      await Promise.allSettled([...this.active.values(), ...this.starting]);
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  private async generate(
    id: string,
    params: ReportParams,
    period: Period,
    options: StartOptions,
  ): Promise<RunOutcome> {
    const onProgress = options.onProgress;
    const log = this.logger?.child({ report: params.kind, run: id });
    const runDir = join(this.dir, `run-${id}`);
    const out = options.out ? resolve(options.out) : join(runDir, `${reportStem(params)}.xlsx`);
    const stem = csvPrefixOf(out);
    const csvDir =
      options.csvDir !== undefined ? options.csvDir : this.csv ? (options.out ? dirname(out) : runDir) : null;
    let lastWrite = 0;
    let pending: Promise<unknown> = Promise.resolve();
    const progress = (done: number, total: number) => {
      onProgress?.(done, total);
      const t = Date.now();
      if (t - lastWrite < 500 && done < total) return;
      lastWrite = t;
      pending = pending.then(() => setRunProgress(this.db, id, done, total).catch(() => undefined));
    };
    try {
      let rowCounts: Record<string, number>;
      let files: string[];
      let lines: string[] = [];
      if (params.kind === 'settlement') {
        const r = await writeSettlementWorkbook(this.db, {
          period,
          account: params.account,
          out,
          csvDir,
          csvPrefix: stem,
          onProgress: progress,
          links: this.publicUrl,
          ...(this.exceptionSla ? { sla: this.exceptionSla } : {}),
        });
        rowCounts = r.rowCounts;
        files = r.files;
        lines = r.summaries.map(
          (s) =>
            `${s.currency}: proof available ${s.proofAvailable === 0n ? 'ok' : 'FAILED'}, reserved ${s.proofReserved === 0n ? 'ok' : 'FAILED'}`,
        );
      } else {
        const r = await writeExceptionWorkbook(this.db, {
          period,
          account: params.account,
          out,
          csvDir,
          csvPrefix: stem,
          now: this.now(),
          onProgress: progress,
          links: this.publicUrl,
          ...(this.exceptionSla ? { sla: this.exceptionSla } : {}),
        });
        rowCounts = r.rowCounts;
        files = r.files;
      }
      await pending;
      const sha256 = await sha256File(out);
      const fileList: ReportFile[] = files.map((f, i) => ({
        name: basename(f),
        label: i === 0 ? `Workbook (${basename(f)})` : `CSV: ${basename(f)}`,
        path: resolve(f),
      }));
      const rowCount = Object.values(rowCounts).reduce((a, b) => a + b, 0);
      await markRunSucceeded(this.db, id, { filePath: out, rowCount, rowCounts, sha256, files: fileList });
      log?.info({ rowCount, sha256 }, 'report written');
      const run = await this.get(id);
      return { run: run!, lines };
    } catch (err) {
      await pending;
      log?.error({ err }, 'report failed');
      await markRunFailed(this.db, id, String((err as Error).message ?? err)).catch(() => undefined);
      throw err;
    }
  }

  async get(id: string): Promise<ReportRun | null> {
    if (!/^\d{1,18}$/.test(id)) return null;
    const row = await getRunRow(this.db, id);
    return row ? toRun(row) : null;
  }

  async list(limit = 50): Promise<ReportRun[]> {
    return (await listRunRows(this.db, limit)).map(toRun);
  }

  /** Absolute path of a file of a finished run, looked up by its name in the run's file list. */
  async filePath(id: string, name: string): Promise<string | null> {
    const run = await this.get(id);
    if (run?.status !== 'succeeded') return null;
    return run.files.find((f) => f.name === name)?.path ?? null;
  }

  accounts(): Promise<string[]> {
    return merchantAccounts(this.db);
  }

  /**
   * Marks runs still `running` after `maxAgeMs` as failed: their process stopped while writing (a run
   * of a million rows takes about a minute), and the page would otherwise wait for them forever.
   */
  async failAbandoned(maxAgeMs = 6 * 3_600_000): Promise<number> {
    const before = new Date(this.now().getTime() - maxAgeMs);
    return failRunsStartedBefore(this.db, before, 'abandoned: the process writing it stopped');
  }

  /** Deletes the files of runs finished before `before`; the rows stay, marked deleted. */
  async deleteOlderThan(before: Date): Promise<number> {
    const ids = await runsFinishedBefore(this.db, before);
    for (const id of ids) {
      await rm(join(this.dir, `run-${id}`), { recursive: true, force: true });
      await markRunDeleted(this.db, id);
    }
    return ids.length;
  }
}
