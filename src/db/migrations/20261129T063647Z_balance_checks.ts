/**
 * The provider's balance checks: one row per merchant account and currency, the latest check made and since
 * when its figures have differed without a break (`differs_since`, null while they agree). A difference
 * raises PROVIDER_BALANCE_DRIFT only once it has lasted the ledger's wait (src/db/matching/balance-drift.ts).
 * Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE provider_balance_checks (
      merchant_account text NOT NULL,
      currency text NOT NULL,
      settlement_id text NOT NULL,
      cutoff timestamptz NOT NULL,
      provider numeric NOT NULL,
      ledger numeric NOT NULL,
      checked_at timestamptz NOT NULL,
      differs_since timestamptz,
      PRIMARY KEY (merchant_account, currency),
      CONSTRAINT provider_balance_checks_differs_ck CHECK ((provider = ledger) = (differs_since IS NULL))
    )`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE provider_balance_checks`.execute(db);
}
