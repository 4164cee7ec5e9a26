/**
 * The creations recorded with an unknown outcome and no provider id, by creation time: the exception
 * sweep's OUTCOME_UNKNOWN look-up and the poller's cashout look-up by external_id read only these (a few
 * rows among every intent ever recorded). Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE INDEX IF NOT EXISTS intents_unknown_outcome_ix ON intents (created_at)
      WHERE outcome = 'unknown' AND entity_id IS NULL;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX IF EXISTS intents_unknown_outcome_ix;`.execute(db);
}
