/**
 * Refunds of test deposits stay in the test book: the test book gains `test_reserved` and
 * `test_refunds`, the counterparts of the live `reserved` and `refunds`, so such a refund reserves,
 * settles, releases and reverses in the test book and never touches live money (the chaos soak found
 * them booked against the live `available`). `down` restores the old list and fails while a test refund
 * account exists (ledger accounts cannot be deleted). Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

const check = (test: readonly string[]) =>
  sql.raw(
    Object.entries({
      live: ['available', 'reserved', 'deposits', 'fees', 'payouts', 'refunds'],
      test,
      crypto: ['crypto_payers', 'crypto_in_transit', 'crypto_customer_wallets'],
    })
      .map(([book, names]) => `(book = '${book}' AND name IN (${names.map((n) => `'${n}'`).join(', ')}))`)
      .join(' OR '),
  );

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE ledger_accounts DROP CONSTRAINT ledger_accounts_book_name_ck,
      ADD CONSTRAINT ledger_accounts_book_name_ck
      CHECK (${check(['test_available', 'test_deposits', 'test_fees', 'test_reserved', 'test_refunds'])})`.execute(
    db,
  );
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE ledger_accounts DROP CONSTRAINT ledger_accounts_book_name_ck,
      ADD CONSTRAINT ledger_accounts_book_name_ck
      CHECK (${check(['test_available', 'test_deposits', 'test_fees'])})`.execute(db);
}
