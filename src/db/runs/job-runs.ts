/**
 * Job-run claims: before doing a period's work an instance inserts the period's deterministic key
 * (`settlement:2026-11-21:acct`) into `job_runs`; the insert that wins runs the job, every other
 * instance (or a later catch-up) sees the key taken and skips. A claim whose run failed, or whose owner
 * stopped answering past the lease, can be taken again.
 */
import { sql } from 'kysely';
import type { Db } from '../schema.ts';

export interface ClaimOptions {
  job: string;
  owner: string;
  /** A `running` claim older than this is considered abandoned (default 2 hours). */
  leaseMs?: number;
}

/** True when this caller now holds `runKey`. */
export async function claimRun(db: Db, runKey: string, options: ClaimOptions): Promise<boolean> {
  const lease = new Date(Date.now() - (options.leaseMs ?? 2 * 3_600_000));
  const { rows } = await sql<{ run_key: string }>`
    INSERT INTO job_runs AS j (run_key, job, owner, status)
    VALUES (${runKey}, ${options.job}, ${options.owner}, 'running')
    ON CONFLICT (run_key) DO UPDATE
      SET owner = EXCLUDED.owner, status = 'running', started_at = now(), finished_at = NULL, error = NULL
      WHERE j.status = 'failed' OR (j.status = 'running' AND j.started_at < ${lease})
    RETURNING run_key`.execute(db);
  return rows.length === 1;
}

/** When the database was set up (its first migration), or null before any migration. */
export async function databaseCreatedAt(db: Db): Promise<Date | null> {
  // Kysely records each migration's time as ISO 8601 text, which sorts as time does.
  const { rows } = await sql<{ at: string | null }>`
    SELECT min("timestamp") AS at FROM kysely_migration`.execute(db);
  const at = rows[0]?.at ?? null;
  return at === null ? null : new Date(at);
}

export async function finishRun(db: Db, runKey: string, owner: string, error: string | null): Promise<void> {
  await sql`
    UPDATE job_runs SET status = ${error === null ? 'succeeded' : 'failed'}, finished_at = now(),
           error = ${error === null ? null : error.slice(0, 2000)}
     WHERE run_key = ${runKey} AND owner = ${owner}`.execute(db);
}

/**
 * When the last run of `job` that succeeded started, or null when none did. Its keys start with the job's
 * name and a colon (`stuck-sweep:<minute>`), so the primary key's range is read, not every run.
 */
export async function lastSucceededStart(db: Db, job: string): Promise<Date | null> {
  const { rows } = await sql<{ at: Date | null }>`
    SELECT max(started_at) AS at FROM job_runs
     WHERE run_key >= ${`${job}:`} AND run_key < ${`${job};`} AND job = ${job} AND status = 'succeeded'`.execute(
    db,
  );
  return rows[0]?.at ?? null;
}

/** The last run of `job` that finished (succeeded or failed), or null when none has. */
export async function lastFinishedRun(
  db: Db,
  job: string,
): Promise<{ finishedAt: Date; error: string | null } | null> {
  const { rows } = await sql<{ finished_at: Date; error: string | null }>`
    SELECT finished_at, error FROM job_runs
     WHERE run_key >= ${`${job}:`} AND run_key < ${`${job};`} AND job = ${job} AND finished_at IS NOT NULL
     ORDER BY finished_at DESC LIMIT 1`.execute(db);
  const r = rows[0];
  return r ? { finishedAt: r.finished_at, error: r.error } : null;
}

export interface JobRunRow {
  runKey: string;
  job: string;
  owner: string | null;
  status: string;
  error: string | null;
}

export async function listRuns(db: Db, job?: string): Promise<JobRunRow[]> {
  const { rows } = await sql<{
    run_key: string;
    job: string;
    owner: string | null;
    status: string;
    error: string | null;
  }>`
    SELECT run_key, job, owner, status, error FROM job_runs
     ${job ? sql`WHERE job = ${job}` : sql``} ORDER BY started_at, run_key`.execute(db);
  return rows.map((r) => ({
    runKey: r.run_key,
    job: r.job,
    owner: r.owner,
    status: r.status,
    error: r.error,
  }));
}
