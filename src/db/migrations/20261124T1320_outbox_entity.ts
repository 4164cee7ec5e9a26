/**
 * Alerts by entity: the outbox's Kafka key is `<kind>:<entity id>`, so an index on it finds the alerts a
 * payment raised (`/api/v1/payments/...`) without reading every alert. Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE INDEX outbox_key_ix ON outbox (key)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX IF EXISTS outbox_key_ix`.execute(db);
}
