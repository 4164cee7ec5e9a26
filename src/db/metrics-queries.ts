/**
 * The figures `/metrics` reads from the ledger database (src/metrics.ts caches them): exceptions by type
 * and state with the age of the oldest unresolved one and how many are past their service level, and
 * the poll backlog. Ledger balances come from `balances` in src/db/queries.ts.
 */
import { sql } from 'kysely';
import type { Db } from './schema.ts';

export interface ExceptionFigures {
  type: string;
  state: string;
  /** Rows of this type in this state. */
  count: number;
  /** Seconds since the oldest unresolved one was first seen (0 for resolved rows). */
  oldestAgeSeconds: number;
  /** Unresolved rows first seen more than the service level ago. */
  overdue: number;
}

/** Exceptions per type and state; `slaMinutes` is the service level an unresolved exception is held to. */
export async function exceptionFigures(
  db: Db,
  slaMinutes: number,
  now: Date = new Date(),
): Promise<ExceptionFigures[]> {
  const { rows } = await sql<{
    type: string;
    state: string;
    n: number;
    oldest: number | null;
    overdue: number;
  }>`
    SELECT type, state, count(*)::int AS n,
           extract(epoch FROM (${now}::timestamptz - min(first_seen_at) FILTER (WHERE state <> 'resolved')))::float8
             AS oldest,
           (count(*) FILTER (WHERE state <> 'resolved'
             AND first_seen_at < ${now}::timestamptz - make_interval(mins => ${slaMinutes}::int)))::int AS overdue
      FROM exceptions GROUP BY type, state ORDER BY type, state`.execute(db);
  return rows.map((r) => ({
    type: r.type,
    state: r.state,
    count: r.n,
    oldestAgeSeconds: Math.max(0, r.oldest ?? 0),
    overdue: r.overdue,
  }));
}

/** Entities whose next poll is due now. */
export async function pollBacklog(db: Db, now: Date = new Date()): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM mirrors WHERE next_poll_at IS NOT NULL AND next_poll_at <= ${now}`.execute(
    db,
  );
  return rows[0]?.n ?? 0;
}
