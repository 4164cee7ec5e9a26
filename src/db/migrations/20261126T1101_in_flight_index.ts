/**
 * The in-flight reads (the balances page's counts, the in-flight list, verification's reserved, the month
 * close) get back an index of their own, as before 20261126T1100_mirror_watch, on the open set's cashouts and
 * refunds: read through `mirrors_open_ix` (every open mirror, deposits included, keyed by merchant account),
 * their kinds were a condition on the index's second column, an array the scan could not mark dead entries
 * by: after 20,000 readings at a year's size the balances page's count read 103 buffers for 4 rows on every
 * request (the old index: 682 the first time, then 58). Keyed as the old one was, so `inFlightCounts` reads
 * it by `currency IS NOT NULL`; its predicate is the readers' `watch = 'open' AND entity_kind IN ('cashout',
 * 'refund')`, word for word, so a status change inside the open set stays HOT. Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE INDEX mirrors_in_flight_ix ON mirrors (merchant_account, currency, test, entity_kind)
      WHERE watch = 'open' AND entity_kind IN ('cashout', 'refund');
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX mirrors_in_flight_ix;`.execute(db);
}
