/**
 * The charts of the balances page (issue 18 point 4) read a period of mirrors by the day each entity was
 * first seen (src/db/chart-queries.ts `dailyVolumes`): an index on that expression keeps the read to the
 * period's rows instead of a scan growing with history. `entitiesFirstSeenBetween` (src/db/queries.ts)
 * filters on the same expression. Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE INDEX mirrors_first_seen_ix ON mirrors ((coalesce(first_seen_at, created_at)));`.execute(
    db,
  );
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX IF EXISTS mirrors_first_seen_ix;`.execute(db);
}
