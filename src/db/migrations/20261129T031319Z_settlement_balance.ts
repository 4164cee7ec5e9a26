/**
 * The provider's balance on a settlement report row: `balance_at_cutoff`, the merchant balance left
 * unsettled at the cut-off before the payout, in the balance currency, when the report gives one (null on
 * rows of reports without it, and on rows imported before it was kept). Matching compares it with the
 * ledger's `available` at the cut-off; the rows that give one are found by a partial index. Imports
 * nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE provider_settlement_rows ADD COLUMN balance_at_cutoff numeric`.execute(db);
  await sql`CREATE INDEX provider_settlement_rows_balance_idx ON provider_settlement_rows (account, currency, period_end)
    WHERE balance_at_cutoff IS NOT NULL`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX provider_settlement_rows_balance_idx`.execute(db);
  await sql`ALTER TABLE provider_settlement_rows DROP COLUMN balance_at_cutoff`.execute(db);
}
