/**
 * The stuck sweep (`sweepExceptions`, every 15 minutes) reads the mirrors not yet final, to compare each
 * one's time in its status with its deadline: with no index leading to them it read every mirror of the
 * history (a Seq Scan of 1,013,334 rows, 0.41 s, at 1,000,000 payments; `npm run bench:plans`). This
 * partial index holds only those mirrors; its predicate is the sweep's WHERE, word for word, so the planner
 * matches it (change both together). Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE INDEX mirrors_unfinished_ix ON mirrors (entity_kind, status)
      WHERE (entity_kind = 'deposit' AND status IN ('CREATED', 'PENDING', 'PENDING_AUTHENTICATION', 'FOR_REVIEW',
          'APPROVED', 'EARLY_RELEASED'))
        OR (entity_kind = 'cashout' AND status IN ('PENDING', 'ON_HOLD', 'DELIVERED'))
        OR (entity_kind = 'refund' AND status IN ('PENDING', 'INCORRECT_DETAILS', 'DELIVERED'));
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX IF EXISTS mirrors_unfinished_ix;`.execute(db);
}
