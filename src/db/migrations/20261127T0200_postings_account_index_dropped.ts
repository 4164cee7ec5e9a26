/**
 * `postings` loses its account-and-time index (`postings_account_ix`, migrations 20261121T1040_ledger and
 * 20261126T1300_byte_order_keys) (issue 21 point 4, the write path): the costliest index a posting insert
 * maintained (five columns, four of them text, about 28 distinct accounts in front). No reader needs it
 * any more: an account's postings in a time range are read as the whole hours and days of
 * `ledger_movements` (migration 20261126T04516_balance_movements) inside it, plus, for what is left of an
 * hour at either end, the entries created then (`journal_entries_created_ix`) and their postings
 * (`postings_entry_ix`) (src/db/ledger-periods.ts). Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX IF EXISTS postings_account_ix`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE INDEX postings_account_ix ON postings
      (merchant_account text_pattern_ops, currency text_pattern_ops, book text_pattern_ops, account text_pattern_ops,
       created_at);
  `.execute(db);
}
