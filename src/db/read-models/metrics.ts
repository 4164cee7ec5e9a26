/**
 * The figures `/metrics` reads from the ledger database (src/metrics.ts caches them): exceptions by type
 * and state with the age of the oldest unresolved one and how many are past their service level, and
 * the poll backlog. Ledger balances come from `balances` in src/db/read-models/balances.ts.
 */
import { sql } from 'kysely';
import type { SlaTable } from '../../domain/exception-sla.ts';
import { overdueSql, UNRESOLVED_LITERALS } from '../exceptions/sla.ts';
import type { Db } from '../schema.ts';

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

/**
 * The mirror `m` of an unresolved exception `x` (its amount and currency choose the service level), read by
 * key: only unresolved exceptions can be overdue. A plain join (MIRROR_OF_EXCEPTION) hashed every mirror of
 * the history on each scrape (1,013,334 rows at 1,000,000 payments).
 */
const UNRESOLVED_MIRROR = sql`LEFT JOIN LATERAL (SELECT m.currency, m.amount FROM mirrors m
  WHERE x.state IN (${UNRESOLVED_LITERALS}) AND m.merchant_account = x.merchant_account AND m.entity_kind = x.entity_kind
    AND m.entity_id = x.entity_id OFFSET 0) m ON true`;

/** Exceptions per type and state; overdue ones counted against the service-level table `sla`. */
export async function exceptionFigures(
  db: Db,
  sla: SlaTable,
  now: Date = new Date(),
): Promise<ExceptionFigures[]> {
  if (!db.isTransaction) return db.transaction().execute((trx) => exceptionFigures(trx, sla, now));
  // The planner prices the per-exception probes high enough to JIT-compile the statement: about 0.4 s of
  // a scrape at 1,000,000 payments went to compiling a plan that runs in a few milliseconds.
  await sql`SET LOCAL jit = off`.execute(db);
  const { rows } = await sql<{
    type: string;
    state: string;
    n: number;
    oldest: number | null;
    overdue: number;
  }>`
    SELECT x.type, x.state, count(*)::int AS n,
           extract(epoch FROM (${now}::timestamptz - min(x.first_seen_at) FILTER (WHERE x.state IN (${UNRESOLVED_LITERALS}))))::float8
             AS oldest,
           (count(*) FILTER (WHERE ${overdueSql(sla, now)}))::int AS overdue
      FROM exceptions x ${UNRESOLVED_MIRROR} GROUP BY x.type, x.state ORDER BY x.type, x.state`.execute(db);
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
    SELECT count(*)::int AS n FROM poll_schedule
    WHERE due_from <= ${now} AND next_poll_at <= ${now}`.execute(db);
  return rows[0]?.n ?? 0;
}
