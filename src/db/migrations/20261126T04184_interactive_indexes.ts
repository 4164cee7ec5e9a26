/**
 * Reads of the page, the API and the jobs that walked rows of every past year (issue 21 point 2, found by
 * `npm run bench:plans` on a year of 1,000,000 payments), each now a range of a partial index holding only
 * what can still be read:
 *
 * - the exception queue (page and API) lists unresolved exceptions by id and counts them by age: it
 *   walked the primary key past every resolved one (19,800 rows for a page of 500);
 *   `exceptions_unresolved_ix` holds the unresolved ones only (`UNRESOLVED_STATES`, as literals);
 * - the late-move watch (`scheduleLateRejectionChecks`, every 6 hours) read every COMPLETED cashout and
 *   refund and every CANCELLED deposit ever (no index led to them: a Seq Scan of every mirror), then
 *   kept the last 30 days':
 *   `mirrors_completed_payouts_ix` and `mirrors_cancelled_deposits_ix` are ordered by the instant it
 *   filters on;
 * - the stuck sweep's UNKNOWN_TRANSACTION check (every 15 minutes) read every mirror for those with no
 *   intent: `mirrors_no_intent_ix` holds only those.
 *
 * Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE INDEX exceptions_unresolved_ix ON exceptions (id)
      WHERE state IN ('open', 'in_review', 'acknowledged');
    CREATE INDEX mirrors_completed_payouts_ix ON mirrors (completed_at)
      WHERE entity_kind IN ('cashout', 'refund') AND status = 'COMPLETED';
    CREATE INDEX mirrors_cancelled_deposits_ix ON mirrors (status_since)
      WHERE entity_kind = 'deposit' AND status = 'CANCELLED';
    CREATE INDEX mirrors_no_intent_ix ON mirrors (first_seen_at)
      WHERE intent_id IS NULL AND status IS NOT NULL;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX IF EXISTS mirrors_no_intent_ix;
    DROP INDEX IF EXISTS mirrors_cancelled_deposits_ix;
    DROP INDEX IF EXISTS mirrors_completed_payouts_ix;
    DROP INDEX IF EXISTS exceptions_unresolved_ix;
  `.execute(db);
}
