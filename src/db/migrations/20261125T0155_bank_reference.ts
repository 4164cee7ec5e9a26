/**
 * The provider's bank-side id of a cashout (`provider_external_reference` in the cashout status answer,
 * `bank_reference_id` in the cashout notification; for instant bank payments in Brazil the end-to-end
 * id) kept on the entity's mirror, so finance finds a payment by the reference a bank statement shows
 * (issue 18 point 1). A partial index serves the look-up (most rows have none). Mirrors written before
 * this column took the reference into their `details` only: it is copied from there. Imports nothing of
 * the app. (Named after 20261125T0150, which landed first: migrations run in name order.)
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE mirrors ADD COLUMN bank_reference text;
    UPDATE mirrors SET bank_reference = nullif(btrim(details->>'provider_external_reference'), '')
     WHERE details ? 'provider_external_reference';
    CREATE INDEX mirrors_bank_reference_ix ON mirrors (bank_reference) WHERE bank_reference IS NOT NULL;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX IF EXISTS mirrors_bank_reference_ix;
    ALTER TABLE mirrors DROP COLUMN IF EXISTS bank_reference;
  `.execute(db);
}
