/**
 * The incremental verification (issue 21 point 2, `verifyLedger` with `since`) finds the entities read
 * in its period by `status_history.recorded_at`: a BRIN index, a few pages for the append-only table
 * whose `recorded_at` grows with its physical order, and next to nothing to keep up on insert. Imports
 * nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE INDEX status_history_recorded_brin ON status_history USING brin (recorded_at);`.execute(
    db,
  );
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX IF EXISTS status_history_recorded_brin;`.execute(db);
}
