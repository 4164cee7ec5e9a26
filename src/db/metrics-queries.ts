/**
 * The figures `/metrics` reads from the ledger database (src/metrics.ts caches them): exceptions by type
 * and state with the age of the oldest unresolved one and how many are past their service level, and
 * the poll backlog. Ledger balances come from `balances` in src/db/queries.ts.
 */
import { sql } from 'kysely';
import type { SlaTable } from '../domain/exception-sla.ts';
import { MIRROR_OF_EXCEPTION, overdueSql } from './exception-sla.ts';
import type { Db } from './schema.ts';

export interface ExceptionFigures {
  type: string;
  state: string;
  /** Rows of this type in this state. */
  count: number;
  /** Seconds since the oldest unresolved one was first seen (0 for resolved rows). */
  oldestAgeSeconds: number;
  /** Unresolved rows past the due time of their service level (src/domain/exception-sla.ts). */
  overdue: number;
}

/** Exceptions per type and state; overdue ones counted against the service-level table `sla`. */
export async function exceptionFigures(
  db: Db,
  sla: SlaTable,
  now: Date = new Date(),
): Promise<ExceptionFigures[]> {
  const { rows } = await sql<{
    type: string;
    state: string;
    n: number;
    oldest: number | null;
    overdue: number;
  }>`
    SELECT x.type, x.state, count(*)::int AS n,
           extract(epoch FROM (${now}::timestamptz - min(x.first_seen_at) FILTER (WHERE x.state <> 'resolved')))::float8
             AS oldest,
           (count(*) FILTER (WHERE ${overdueSql(sla, now)}))::int AS overdue
      FROM exceptions x ${MIRROR_OF_EXCEPTION} GROUP BY x.type, x.state ORDER BY x.type, x.state`.execute(db);
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
