/**
 * Runs the job catalog with node-cron. Each tick asks the job which runs are due at the tick's
 * scheduled time (one claim key per period, and per account where the job is per account), claims
 * each key in `job_runs` and runs only what it won. At start, each catch-up job's fire times within the
 * catch-up window are replayed oldest first: the runs missed while the process was down are claimed
 * and done once, and those already done (here or by another instance) are skipped by their keys.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import cron from 'node-cron';
import { claimRun, finishRun } from '../db/runs/job-runs.ts';
import type { Db } from '../db/schema.ts';
import { type Logger, logger as rootLogger } from '../logger.ts';

/** One piece of work for one period, behind its claim key. */
export interface DueRun {
  /** Deterministic: `<job>:<period>[:<account>]`. */
  key: string;
  run: () => Promise<void>;
}

/** A job of the catalog. */
export interface JobDefinition {
  name: string;
  /** node-cron expression (5 or 6 fields), evaluated in `timeZone`. */
  cron: string;
  timeZone: string;
  /** The runs due for the tick scheduled at `at`. */
  due(at: Date): DueRun[] | Promise<DueRun[]>;
  /** Replay missed ticks at start (daily workbooks, verification, retention); frequent jobs do not. */
  catchUp?: boolean;
  /** Claim lease for long runs (default 2 hours). */
  leaseMs?: number;
}

/**
 * What calls a job at its cron fire times: node-cron in production, a test's own clock in tests. `onTick`
 * gets the tick's scheduled second, from which every instance derives the same period key.
 */
export interface CronTimer {
  schedule(
    job: Pick<JobDefinition, 'name' | 'cron' | 'timeZone'>,
    onTick: (at: Date) => Promise<unknown>,
  ): { stop(): Promise<void> };
}

/** node-cron: each job's task in its time zone, never overlapping itself. */
export function nodeCronTimer(owner: string): CronTimer {
  return {
    schedule(job, onTick) {
      const task = cron.schedule(
        job.cron,
        (ctx) => onTick(new Date(Math.floor(ctx.date.getTime() / 1000) * 1000)),
        { timezone: job.timeZone, name: `payrecon:${job.name}:${owner}`, noOverlap: true },
      );
      return {
        async stop() {
          await task.destroy();
        },
      };
    },
  };
}

/** Whether a cron expression fires at `at` (second resolution) in `timeZone`. */
export function cronMatches(expression: string, timeZone: string, at: Date): boolean {
  const task = cron.createTask(expression, () => undefined, { timezone: timeZone });
  try {
    return task.match(at);
  } finally {
    void task.destroy();
  }
}

export interface SchedulerOptions {
  db: Db;
  jobs: readonly JobDefinition[];
  /** Identifies this instance in `job_runs.owner`. */
  owner?: string;
  /** How far back catch-up looks at start (default 3 days). */
  catchUpWindowMs?: number;
  /**
   * Catch-up replays no fire time before this (the wiring gives the database's creation: a fresh
   * database catches up no runs from before it existed). Default: only the window limits it.
   */
  notBefore?: () => Promise<Date | null>;
  now?: () => Date;
  /** Fires the cron ticks (default node-cron). */
  timer?: CronTimer;
  logger?: Logger;
  /** Told of every run this instance claimed and finished (metrics). */
  onRun?: (job: string, outcome: 'succeeded' | 'failed', seconds: number) => void;
}

export interface TickResult {
  ran: string[];
  skipped: string[];
  failed: string[];
}

const MINUTE = 60_000;

/** Fire times of a cron expression in (from, to], oldest first, at minute resolution. */
export function fireTimesBetween(expression: string, timeZone: string, from: Date, to: Date): Date[] {
  const task = cron.createTask(expression, () => undefined, { timezone: timeZone });
  try {
    const times: Date[] = [];
    const start = Math.floor(from.getTime() / MINUTE) * MINUTE + MINUTE;
    for (let t = start; t <= to.getTime(); t += MINUTE) {
      const d = new Date(t);
      if (task.match(d)) times.push(d);
    }
    return times;
  } finally {
    void task.destroy();
  }
}

export class JobScheduler {
  readonly owner: string;
  private readonly db: Db;
  private readonly jobs: readonly JobDefinition[];
  private readonly window: number;
  private readonly now: () => Date;
  private readonly log: Logger;
  private readonly timer: CronTimer;
  private readonly onRun: SchedulerOptions['onRun'];
  private readonly notBefore: SchedulerOptions['notBefore'];
  private tasks: { stop(): Promise<void> }[] = [];
  private readonly inFlight = new Set<Promise<unknown>>();

  constructor(options: SchedulerOptions) {
    this.db = options.db;
    this.jobs = options.jobs;
    this.owner = options.owner ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    this.window = options.catchUpWindowMs ?? 3 * 24 * 3_600_000;
    this.now = options.now ?? (() => new Date());
    this.timer = options.timer ?? nodeCronTimer(this.owner);
    this.log = (options.logger ?? rootLogger).child({ module: 'jobs', owner: this.owner });
    this.onRun = options.onRun;
    this.notBefore = options.notBefore;
    for (const job of this.jobs) {
      if (!cron.validate(job.cron)) throw new Error(`job ${job.name}: invalid cron expression ${job.cron}`);
    }
  }

  /** Claims and runs every run due for `job` at `at`. */
  async tick(job: JobDefinition, at: Date): Promise<TickResult> {
    const result: TickResult = { ran: [], skipped: [], failed: [] };
    let due: DueRun[];
    try {
      due = await job.due(at);
    } catch (err) {
      this.log.error({ err, job: job.name }, 'job could not list its runs');
      this.onRun?.(job.name, 'failed', 0);
      result.failed.push(job.name);
      return result;
    }
    for (const run of due) {
      const claimed = await claimRun(this.db, run.key, {
        job: job.name,
        owner: this.owner,
        ...(job.leaseMs ? { leaseMs: job.leaseMs } : {}),
      });
      if (!claimed) {
        result.skipped.push(run.key);
        continue;
      }
      const started = Date.now();
      try {
        await run.run();
        await finishRun(this.db, run.key, this.owner, null);
        result.ran.push(run.key);
        this.onRun?.(job.name, 'succeeded', (Date.now() - started) / 1000);
        this.log.info({ job: job.name, key: run.key, ms: Date.now() - started }, 'job run done');
      } catch (err) {
        await finishRun(this.db, run.key, this.owner, String((err as Error)?.message ?? err)).catch(
          () => undefined,
        );
        result.failed.push(run.key);
        this.onRun?.(job.name, 'failed', (Date.now() - started) / 1000);
        this.log.error({ err, job: job.name, key: run.key }, 'job run failed');
      }
    }
    return result;
  }

  /** Replays the fire times of catch-up jobs within the window (runs already claimed are skipped). */
  async catchUp(): Promise<TickResult> {
    const total: TickResult = { ran: [], skipped: [], failed: [] };
    const now = this.now();
    const floor = (await this.notBefore?.())?.getTime() ?? Number.NEGATIVE_INFINITY;
    const from = new Date(Math.max(now.getTime() - this.window, floor));
    for (const job of this.jobs) {
      if (!job.catchUp) continue;
      const times = fireTimesBetween(job.cron, job.timeZone, from, now);
      for (const at of times) {
        const r = await this.tick(job, at);
        total.ran.push(...r.ran);
        total.skipped.push(...r.skipped);
        total.failed.push(...r.failed);
      }
    }
    if (total.ran.length) this.log.info({ ran: total.ran }, 'caught up runs missed while down');
    return total;
  }

  /** Catches up, then schedules every job. */
  async start(): Promise<TickResult> {
    const caught = await this.catchUp();
    for (const job of this.jobs) {
      const task = this.timer.schedule(job, (at) => {
        const p = this.tick(job, at);
        this.inFlight.add(p);
        return p.finally(() => this.inFlight.delete(p));
      });
      this.tasks.push(task);
    }
    return caught;
  }

  /** Stops scheduling and waits for runs in progress. */
  async stop(): Promise<void> {
    for (const t of this.tasks) await t.stop();
    this.tasks = [];
    await Promise.allSettled([...this.inFlight]);
  }
}
