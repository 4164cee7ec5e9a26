/**
 * The cash leg of the ledger: the live book gains `settlements_in_transit`, `settlement_fees`,
 * `fx_conversion`, `bank_fees` and one `bank:<bank account id>` account per bank account; journal entries
 * gain the kinds `settlement` and `bank_match`, their effects, and the rate a converted settlement was
 * booked at (on both of its entries), and an index of the bank matches. Settlement rows are looked up by settlement id, transaction rows by
 * the provider's transaction id (a payment's settlement). The widened checks are added NOT VALID and then
 * validated, which scans the entries without blocking the writers. Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

const LIVE = `'available', 'reserved', 'deposits', 'fees', 'payouts', 'refunds'`;
const TEST = `'test_available', 'test_deposits', 'test_fees', 'test_reserved', 'test_refunds'`;
const CRYPTO = `'crypto_payers', 'crypto_in_transit', 'crypto_customer_wallets'`;
const CASH = `'settlements_in_transit', 'settlement_fees', 'fx_conversion', 'bank_fees'`;
const KINDS = `'deposit', 'cashout', 'refund'`;
const EFFECTS = `'credit', 'fee', 'early_release_reversal', 'crypto_approved', 'crypto_delivered', 'reserve',
  'release', 'settle', 'late_reversal'`;
const CASH_KINDS = `'settlement', 'bank_match'`;
const CASH_EFFECTS = `'settlement', 'settlement_fx_source', 'settlement_fx_target', 'bank_match'`;

function bookNames(withCash: boolean): string {
  const live = withCash ? `(name IN (${LIVE}, ${CASH}) OR name LIKE 'bank:_%')` : `name IN (${LIVE})`;
  return `(book = 'live' AND ${live})
    OR (book = 'test' AND name IN (${TEST}))
    OR (book = 'crypto' AND name IN (${CRYPTO}))`;
}

async function checks(db: Kysely<unknown>, withCash: boolean): Promise<void> {
  await sql
    .raw(`
    ALTER TABLE ledger_accounts DROP CONSTRAINT ledger_accounts_book_name_ck;
    ALTER TABLE ledger_accounts ADD CONSTRAINT ledger_accounts_book_name_ck CHECK (${bookNames(withCash)}) NOT VALID;
    ALTER TABLE journal_entries DROP CONSTRAINT journal_entries_kind_ck;
    ALTER TABLE journal_entries ADD CONSTRAINT journal_entries_kind_ck
      CHECK (entity_kind IN (${KINDS}${withCash ? `, ${CASH_KINDS}` : ''})) NOT VALID;
    ALTER TABLE journal_entries DROP CONSTRAINT journal_entries_effect_ck;
    ALTER TABLE journal_entries ADD CONSTRAINT journal_entries_effect_ck
      CHECK (effect IN (${EFFECTS}${withCash ? `, ${CASH_EFFECTS}` : ''})) NOT VALID;
  `)
    .execute(db);
  await sql
    .raw(`
    ALTER TABLE ledger_accounts VALIDATE CONSTRAINT ledger_accounts_book_name_ck;
    ALTER TABLE journal_entries VALIDATE CONSTRAINT journal_entries_kind_ck;
    ALTER TABLE journal_entries VALIDATE CONSTRAINT journal_entries_effect_ck;
  `)
    .execute(db);
}

export async function up(db: Kysely<unknown>): Promise<void> {
  await checks(db, true);
  await sql`
    ALTER TABLE journal_entries ADD COLUMN rate numeric
      CONSTRAINT journal_entries_rate_ck CHECK (rate IS NULL OR rate > 0)`.execute(db);
  // The bank matches' applications by merchant account (a few a day): what matched a settlement is read
  // from them, never from the whole journal.
  await sql`CREATE INDEX journal_entries_bank_match_ix ON journal_entries (merchant_account)
    WHERE entity_kind = 'bank_match' AND direction = 1`.execute(db);
  await sql`CREATE INDEX IF NOT EXISTS provider_settlement_rows_settlement_id_idx
    ON provider_settlement_rows (settlement_id)`.execute(db);
  await sql`CREATE INDEX IF NOT EXISTS provider_transaction_rows_transaction_id_idx
    ON provider_transaction_rows (transaction_id)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX IF EXISTS provider_transaction_rows_transaction_id_idx`.execute(db);
  await sql`DROP INDEX IF EXISTS provider_settlement_rows_settlement_id_idx`.execute(db);
  await sql`DROP INDEX journal_entries_bank_match_ix`.execute(db);
  await sql`ALTER TABLE journal_entries DROP COLUMN rate`.execute(db);
  await checks(db, false);
}
