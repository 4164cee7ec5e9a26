/**
 * Interactive reads that scanned every mirror at a year's size (issue 21 point 2, found by
 * `npm run bench:scale`): a payment looked up by its intent id (`lookupPayments`, the page's search and
 * the API's `idKind=intent_id`), and the balances page's count of cashouts and refunds in flight
 * (`inFlightCounts`), now read from a partial index holding only the in-flight rows, so its cost follows
 * what is in flight, not the history. Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE INDEX mirrors_intent_ix ON mirrors (intent_id) WHERE intent_id IS NOT NULL;
    CREATE INDEX mirrors_in_flight_ix ON mirrors (merchant_account, currency, test, entity_kind)
      WHERE entity_kind IN ('cashout', 'refund') AND status IN ('PENDING', 'ON_HOLD', 'DELIVERED', 'INCORRECT_DETAILS');
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX IF EXISTS mirrors_in_flight_ix;
    DROP INDEX IF EXISTS mirrors_intent_ix;
  `.execute(db);
}
