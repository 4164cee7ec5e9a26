/**
 * The job scheduler against a real database: a settlement cut-off missed while no scheduler ran is
 * caught up at start with exactly one workbook, also when two schedulers start at once, and not again
 * after a restart; cron ticks of two schedulers claim each period once.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ExcelJS from 'exceljs';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimRun, databaseCreatedAt, finishRun, listRuns } from '../../src/db/runs/job-runs.ts';
import { addDays, localDate } from '../../src/domain/zoned-time.ts';
import { buildJobCatalog } from '../../src/jobs/catalog.ts';
import {
  type CronTimer,
  cronMatches,
  fireTimesBetween,
  type JobDefinition,
  JobScheduler,
} from '../../src/jobs/scheduler.ts';
import { ReportRunner } from '../../src/reports/runs.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { seedBefore, seedPeriod } from '../reports/scenario.ts';

const TZ = 'UTC';

/** A cron clock the test moves by hand: every task whose expression matches the new instant fires, together. */
class ManualCronTimer implements CronTimer {
  private readonly tasks = new Set<{
    job: Pick<JobDefinition, 'cron' | 'timeZone'>;
    onTick(at: Date): Promise<unknown>;
  }>();

  schedule(job: Pick<JobDefinition, 'cron' | 'timeZone'>, onTick: (at: Date) => Promise<unknown>) {
    const task = { job, onTick };
    this.tasks.add(task);
    return {
      stop: async () => {
        this.tasks.delete(task);
      },
    };
  }

  async advanceTo(at: Date): Promise<void> {
    const due = [...this.tasks].filter((t) => cronMatches(t.job.cron, t.job.timeZone, at));
    await Promise.all(due.map((t) => t.onTick(at)));
  }
}
let t: TestDatabase;
let dir: string;
let runner: ReportRunner;
let today: string;

beforeAll(async () => {
  t = await createTestDatabase();
  await seedBefore(t.db);
  await seedPeriod(t.db);
  today = localDate(new Date(), TZ);
  dir = await mkdtemp(join(tmpdir(), 'payrecon-jobs-'));
  runner = new ReportRunner({ db: t.db, dir, timeZone: TZ, cutoff: '00:00' });
});

afterAll(async () => {
  await runner?.idle();
  await t?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

function catalog(): JobDefinition[] {
  return buildJobCatalog({
    timeZone: TZ,
    settlementCutoff: '00:00',
    cron: { settlement: '30 0 * * *', 'exception-report': '0 6 * * *' },
    reports: runner,
    accounts: async () => ['acme'],
  });
}

describe('catch-up at start', () => {
  // The schedulers start tomorrow at 10:00: today's business day closed at midnight and its
  // settlement tick (00:30) was missed.
  const tomorrowTen = () => new Date(`${addDays(today, 1)}T10:00:00Z`);

  it('produces exactly one settlement workbook for the missed cut-off with two schedulers starting at once', async () => {
    const options = { db: t.db, jobs: catalog(), catchUpWindowMs: 24 * 3_600_000, now: tomorrowTen };
    const a = new JobScheduler({ ...options, owner: 'instance-a' });
    const b = new JobScheduler({ ...options, owner: 'instance-b' });
    try {
      const [ra, rb] = await Promise.all([a.start(), b.start()]);
      const key = `settlement:${today}:acme`;
      expect([...ra.ran, ...rb.ran].filter((k) => k === key)).toEqual([key]);
      expect([...ra.skipped, ...rb.skipped]).toContain(key);
      expect([...ra.failed, ...rb.failed]).toEqual([]);

      const { rows } = await sql<{
        run_key: string;
        status: string;
        file_path: string;
        parameters: { from: string };
      }>`
        SELECT run_key, status, file_path, parameters FROM report_runs WHERE report = 'settlement'`.execute(
        t.db,
      );
      expect(rows).toHaveLength(1);
      expect(rows[0]!.status).toBe('succeeded');
      expect(rows[0]!.run_key.startsWith(`${key}@`)).toBe(true);
      expect(rows[0]!.parameters.from).toBe(today);
      expect(existsSync(rows[0]!.file_path)).toBe(true);
      const wb = new ExcelJS.Workbook();
      await wb.xlsx.readFile(rows[0]!.file_path);
      expect(wb.getWorksheet('Deposits')!.rowCount).toBeGreaterThan(3);

      const exceptions = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM report_runs WHERE report = 'exceptions'`.execute(t.db);
      expect(exceptions.rows[0]!.n).toBe(1);
      const claims = await listRuns(t.db, 'settlement');
      expect(claims.map((c) => [c.runKey, c.status])).toEqual([[key, 'succeeded']]);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });

  it('does nothing more after a restart', async () => {
    const c = new JobScheduler({
      db: t.db,
      jobs: catalog(),
      catchUpWindowMs: 24 * 3_600_000,
      now: tomorrowTen,
      owner: 'instance-c',
    });
    try {
      const r = await c.start();
      expect(r.ran).toEqual([]);
      const { rows } = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM report_runs WHERE report = 'settlement'`.execute(t.db);
      expect(rows[0]!.n).toBe(1);
    } finally {
      await c.stop();
    }
  });

  it('catches up each missed business day once over a longer outage', async () => {
    const d = new JobScheduler({
      db: t.db,
      jobs: catalog().filter((j) => j.name === 'settlement'),
      catchUpWindowMs: 3 * 24 * 3_600_000,
      now: tomorrowTen,
      owner: 'instance-d',
    });
    const r = await d.catchUp();
    expect(r.ran).toEqual([`settlement:${addDays(today, -2)}:acme`, `settlement:${addDays(today, -1)}:acme`]);
    await d.stop();
  });

  it('replays no fire time from before the database existed (notBefore: its creation)', async () => {
    const e = new JobScheduler({
      db: t.db,
      jobs: catalog().filter((j) => j.name === 'settlement'),
      catchUpWindowMs: 3 * 24 * 3_600_000,
      now: tomorrowTen,
      owner: 'instance-e',
      notBefore: () => databaseCreatedAt(t.db),
    });
    const r = await e.catchUp();
    const before = [addDays(today, -2), addDays(today, -1)].map((d) => `settlement:${d}:acme`);
    // Without the floor these keys would be replayed (and, claimed above, skipped).
    expect([...r.ran, ...r.skipped, ...r.failed].filter((k) => before.includes(k))).toEqual([]);
    await e.stop();
  });
});

describe('claims', () => {
  it('lets one caller win a key, and a failed run be claimed again', async () => {
    const key = `test-job:${Date.now()}`;
    const [x, y] = await Promise.all([
      claimRun(t.db, key, { job: 'test-job', owner: 'x' }),
      claimRun(t.db, key, { job: 'test-job', owner: 'y' }),
    ]);
    expect([x, y].filter(Boolean)).toHaveLength(1);
    const winner = x ? 'x' : 'y';
    expect(await claimRun(t.db, key, { job: 'test-job', owner: 'z' })).toBe(false);
    await finishRun(t.db, key, winner, 'boom');
    expect(await claimRun(t.db, key, { job: 'test-job', owner: 'z' })).toBe(true);
    await finishRun(t.db, key, 'z', null);
    expect(await claimRun(t.db, key, { job: 'test-job', owner: 'w' })).toBe(false);
  });

  it('two running schedulers run each cron period once', async () => {
    const calls: string[] = [];
    const jobs: JobDefinition[] = [
      {
        name: 'tick',
        cron: '* * * * * *',
        timeZone: TZ,
        // One period per second: both schedulers tick every second and derive the same key.
        due: (at) => [
          {
            key: `tick:${at.toISOString()}`,
            run: async () => {
              calls.push(at.toISOString());
            },
          },
        ],
      },
    ];
    // The injected clock: both schedulers' tasks fire at the same instants, as two processes would.
    const clock = new ManualCronTimer();
    const a = new JobScheduler({ db: t.db, jobs, owner: 'tick-a', timer: clock });
    const b = new JobScheduler({ db: t.db, jobs, owner: 'tick-b', timer: clock });
    await Promise.all([a.start(), b.start()]);
    const from = new Date('2026-11-21T10:00:00Z');
    for (let s = 1; s <= 4; s++) await clock.advanceTo(new Date(from.getTime() + s * 1_000));
    await Promise.all([a.stop(), b.stop()]);
    // Stopped: a later instant fires nothing.
    await clock.advanceTo(new Date(from.getTime() + 5_000));
    const claimed = await listRuns(t.db, 'tick');
    expect(calls.sort()).toEqual([1, 2, 3, 4].map((s) => new Date(from.getTime() + s * 1_000).toISOString()));
    expect(claimed.map((c) => c.runKey).sort()).toEqual(calls.map((c) => `tick:${c}`).sort());
  });
});

describe('ledger verification and retention', () => {
  it('raises one alert per failed hourly verification', async () => {
    const alerts: string[] = [];
    let verifications = 0;
    const jobs = buildJobCatalog({
      timeZone: TZ,
      settlementCutoff: '00:00',
      reports: runner,
      accounts: async () => [],
      verifyLedger: async () => {
        verifications++;
        return { failures: ['entry 7 does not balance in BRL'] };
      },
      raiseAlert: async (a) => {
        alerts.push(`${a.type} ${a.severity} ${a.message}`);
      },
    }).filter((j) => j.name === 'ledger-verify');
    const at = new Date('2026-11-21T10:00:00Z');
    const a = new JobScheduler({ db: t.db, jobs, owner: 'verify-a' });
    const b = new JobScheduler({ db: t.db, jobs, owner: 'verify-b' });
    await Promise.all([a.tick(jobs[0]!, at), b.tick(jobs[0]!, at)]);
    expect(verifications).toBe(1);
    expect(alerts).toEqual([
      'LEDGER_VERIFICATION_FAILED critical Ledger verification failed: 1 invariant(s) broken: entry 7 does not balance in BRL',
    ]);
  });

  it('removes the files of old workbooks and keeps their runs', async () => {
    const started = await runner.run({ kind: 'exceptions', from: today, to: today, account: null });
    const run = started!.run;
    expect(existsSync(run.files[0]!.path)).toBe(true);
    const jobs = buildJobCatalog({
      timeZone: TZ,
      settlementCutoff: '00:00',
      reports: runner,
      accounts: async () => [],
      retentionDays: 0,
    }).filter((j) => j.name === 'report-retention');
    const s = new JobScheduler({ db: t.db, jobs, owner: 'retention' });
    const r = await s.tick(jobs[0]!, new Date(Date.now() + 60_000));
    expect(r.ran).toHaveLength(1);
    expect(existsSync(run.files[0]!.path)).toBe(false);
    const after = await runner.get(run.id);
    expect(after?.deleted).toBe(true);
    expect(after?.files).toEqual([]);
    expect(await runner.filePath(run.id, run.files[0]!.name)).toBeNull();
  });

  it('marks runs abandoned by a stopped process as failed', async () => {
    await sql`INSERT INTO report_runs (run_key, report, status, created_at)
              VALUES ('abandoned-run', 'settlement', 'running', now() - interval '7 hours')`.execute(t.db);
    expect(await runner.failAbandoned()).toBe(1);
    const { rows } = await sql<{ status: string; error: string }>`
      SELECT status, error FROM report_runs WHERE run_key = 'abandoned-run'`.execute(t.db);
    expect(rows[0]).toEqual({ status: 'failed', error: 'abandoned: the process writing it stopped' });
  });
});

describe('fire times', () => {
  it('lists a daily cron in its time zone', () => {
    const times = fireTimesBetween(
      '30 0 * * *',
      'Europe/Berlin',
      new Date('2026-11-19T12:00:00Z'),
      new Date('2026-11-21T12:00:00Z'),
    );
    expect(times.map((d) => d.toISOString())).toEqual([
      '2026-11-19T23:30:00.000Z',
      '2026-11-20T23:30:00.000Z',
    ]);
  });
});
