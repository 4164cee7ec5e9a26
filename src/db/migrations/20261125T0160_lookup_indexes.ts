/**
 * Two indexes every write paid for without a reader of their own: `mirrors_external_ref_any_ix` and
 * `intents_external_ref_any_ix` (external_ref alone, 20261124T1200_api) duplicate the leading column of
 * `mirrors_external_ref_ix` and `intents_external_ref_ix` (external_ref, merchant_account, entity_kind),
 * which serve the same look-ups by external reference (the payment search, `mirrorsByExternalRef`,
 * `loadIntents`); each mirror and intent insert or update maintained one index for nothing. Imports
 * nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX IF EXISTS mirrors_external_ref_any_ix;
    DROP INDEX IF EXISTS intents_external_ref_any_ix;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE INDEX IF NOT EXISTS intents_external_ref_any_ix ON intents (external_ref);
    CREATE INDEX IF NOT EXISTS mirrors_external_ref_any_ix ON mirrors (external_ref) WHERE external_ref IS NOT NULL;
  `.execute(db);
}
