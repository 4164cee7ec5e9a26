/**
 * Drops the second index on the same column of two import tables: the settlement rows by settlement id and
 * the transaction rows by transaction id were each indexed twice, under two names, so every imported row
 * was written into both. The index kept serves every look-up the other did. Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX IF EXISTS provider_settlement_rows_settlement_idx`.execute(db);
  await sql`DROP INDEX IF EXISTS provider_transaction_rows_transaction_idx`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE INDEX provider_transaction_rows_transaction_idx ON provider_transaction_rows (transaction_id)`.execute(
    db,
  );
  await sql`CREATE INDEX provider_settlement_rows_settlement_idx ON provider_settlement_rows (settlement_id)`.execute(
    db,
  );
}
