/**
 * Daily balance snapshots (issue 21 point 1): `ledger_balance_snapshots` holds, per ledger account and
 * UTC midnight `at`, the sum of the account's postings created before `at`. A balance at an instant is
 * the latest snapshot at or before it plus the postings since (src/db/queries.ts `balances`); the rows
 * are written by `takeBalanceSnapshots` (src/db/balance-snapshots.ts). Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE ledger_balance_snapshots (
      merchant_account text NOT NULL,
      currency text NOT NULL,
      book text NOT NULL,
      account text NOT NULL,
      at timestamptz NOT NULL,
      balance numeric NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT ledger_balance_snapshots_pk PRIMARY KEY (merchant_account, currency, book, account, at),
      CONSTRAINT ledger_balance_snapshots_account_fk FOREIGN KEY (merchant_account, currency, book, account)
        REFERENCES ledger_accounts (merchant_account, currency, book, name)
    );
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE IF EXISTS ledger_balance_snapshots;`.execute(db);
}
