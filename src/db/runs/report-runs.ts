/**
 * Repository of `report_runs`: one row per workbook generated, with its parameters, progress, row counts
 * per sheet, SHA-256 and files (src/reports/runs.ts runs them).
 */
import { sql } from 'kysely';
import type { Db } from '../schema.ts';

/** A file a run wrote (its absolute path is written by the runner, never taken from a request). */
export interface RunFile {
  name: string;
  label: string;
  path: string;
}

/** A `report_runs` row as read (ids and progress counters as text). */
export interface RunRow {
  id: string;
  run_key: string;
  report: string;
  merchant_account: string | null;
  status: 'running' | 'succeeded' | 'failed';
  file_path: string | null;
  row_count: number | null;
  error: string | null;
  created_at: Date;
  finished_at: Date | null;
  parameters: { from?: string; to?: string };
  row_counts: { sheet: string; rows: number }[] | Record<string, number>;
  sha256: string | null;
  files: RunFile[];
  requested_by: string | null;
  trigger: string;
  progress_done: string;
  progress_total: string;
  deleted_at: Date | null;
}

const SELECT_RUN = sql`SELECT id::text AS id, run_key, report, merchant_account, status, file_path, row_count, error,
  created_at, finished_at, parameters, row_counts, sha256, files, requested_by, trigger,
  progress_done::text AS progress_done, progress_total::text AS progress_total, deleted_at FROM report_runs`;

export interface NewRun {
  runKey: string;
  report: string;
  account: string | null;
  period: { start: Date; end: Date };
  parameters: Record<string, unknown>;
  requestedBy: string | null;
  trigger: string;
}

/** Inserts a `running` run claiming `runKey`; null when a run with this key already exists. */
export async function insertRun(db: Db, run: NewRun): Promise<string | null> {
  const { rows } = await sql<{ id: string }>`
    INSERT INTO report_runs (run_key, report, merchant_account, period_start, period_end, status, parameters,
                             requested_by, trigger)
    VALUES (${run.runKey}, ${run.report}, ${run.account}, ${run.period.start}, ${run.period.end}, 'running',
            ${JSON.stringify(run.parameters)}::jsonb, ${run.requestedBy}, ${run.trigger})
    ON CONFLICT (run_key) DO NOTHING
    RETURNING id::text AS id`.execute(db);
  return rows[0]?.id ?? null;
}

export async function setRunProgress(db: Db, id: string, done: number, total: number): Promise<void> {
  await sql`UPDATE report_runs SET progress_done = ${done}, progress_total = ${total} WHERE id = ${id}`.execute(
    db,
  );
}

export interface RunResult {
  filePath: string;
  rowCount: number;
  rowCounts: Record<string, number>;
  sha256: string;
  files: RunFile[];
}

export async function markRunSucceeded(db: Db, id: string, r: RunResult): Promise<void> {
  const rowCounts = Object.entries(r.rowCounts).map(([sheet, rows]) => ({ sheet, rows }));
  await sql`
    UPDATE report_runs SET status = 'succeeded', file_path = ${r.filePath}, row_count = ${r.rowCount},
           row_counts = ${JSON.stringify(rowCounts)}::jsonb, sha256 = ${r.sha256},
           files = ${JSON.stringify(r.files)}::jsonb, finished_at = now(), progress_done = progress_total
     WHERE id = ${id}`.execute(db);
}

export async function markRunFailed(db: Db, id: string, error: string): Promise<void> {
  await sql`UPDATE report_runs SET status = 'failed', error = ${error.slice(0, 2000)}, finished_at = now()
    WHERE id = ${id}`.execute(db);
}

export async function getRunRow(db: Db, id: string): Promise<RunRow | null> {
  const { rows } = await sql<RunRow>`${SELECT_RUN} WHERE id = ${id}`.execute(db);
  return rows[0] ?? null;
}

/** The newest runs first. */
export async function listRunRows(db: Db, limit: number): Promise<RunRow[]> {
  const { rows } = await sql<RunRow>`${SELECT_RUN} ORDER BY created_at DESC, id DESC LIMIT ${limit}`.execute(
    db,
  );
  return rows;
}

/** Marks runs still `running` that started before `before` as failed with `error`; returns how many. */
export async function failRunsStartedBefore(db: Db, before: Date, error: string): Promise<number> {
  const result = await db
    .updateTable('report_runs')
    .set({ status: 'failed', error, finished_at: sql`now()` })
    .where('status', '=', 'running')
    .where('created_at', '<', before)
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** Ids of runs finished before `before` whose files are not deleted yet, oldest first. */
export async function runsFinishedBefore(db: Db, before: Date): Promise<string[]> {
  const rows = await db
    .selectFrom('report_runs')
    .select(sql<string>`id::text`.as('id'))
    .where('finished_at', '<', before)
    .where('deleted_at', 'is', null)
    .orderBy('id')
    .execute();
  return rows.map((r) => r.id);
}

export async function markRunDeleted(db: Db, id: string): Promise<void> {
  await db.updateTable('report_runs').set({ deleted_at: sql`now()` }).where('id', '=', id).execute();
}
