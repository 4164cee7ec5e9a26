/**
 * Running balances (issue 21 point 1): one `ledger_balances` row per ledger account holding the sum of
 * its postings, kept by a statement-level trigger on `postings` in the transaction that inserts them, so
 * no write path can post without moving the balance. The trigger adds each account's total of the
 * statement's new postings with one `INSERT ... ON CONFLICT DO UPDATE` whose rows are ordered by account
 * key: a batch locks its balance rows once and in key order, so concurrent reconcilers queue on the
 * busiest account instead of deadlocking. Backfilled from the existing postings (tables locked against
 * writers meanwhile). Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    LOCK TABLE ledger_accounts, postings IN SHARE ROW EXCLUSIVE MODE;

    CREATE TABLE ledger_balances (
      merchant_account text NOT NULL,
      currency text NOT NULL,
      book text NOT NULL,
      account text NOT NULL,
      balance numeric NOT NULL DEFAULT 0,
      updated_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT ledger_balances_pk PRIMARY KEY (merchant_account, currency, book, account),
      CONSTRAINT ledger_balances_account_fk FOREIGN KEY (merchant_account, currency, book, account)
        REFERENCES ledger_accounts (merchant_account, currency, book, name)
    );

    INSERT INTO ledger_balances (merchant_account, currency, book, account, balance)
    SELECT a.merchant_account, a.currency, a.book, a.name,
      coalesce((SELECT sum(p.amount) FROM postings p WHERE p.merchant_account = a.merchant_account
        AND p.currency = a.currency AND p.book = a.book AND p.account = a.name), 0)
    FROM ledger_accounts a;

    CREATE FUNCTION postings_running_balances() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      INSERT INTO ledger_balances AS b (merchant_account, currency, book, account, balance)
      SELECT n.merchant_account, n.currency, n.book, n.account, sum(n.amount)
        FROM new_postings n
        GROUP BY n.merchant_account, n.currency, n.book, n.account
        ORDER BY n.merchant_account, n.currency, n.book, n.account
      ON CONFLICT (merchant_account, currency, book, account)
        DO UPDATE SET balance = b.balance + excluded.balance, updated_at = now();
      RETURN NULL;
    END
    $fn$;
    CREATE TRIGGER postings_running_balances_trg AFTER INSERT ON postings
      REFERENCING NEW TABLE AS new_postings FOR EACH STATEMENT EXECUTE FUNCTION postings_running_balances();
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TRIGGER IF EXISTS postings_running_balances_trg ON postings;
    DROP FUNCTION IF EXISTS postings_running_balances();
    DROP TABLE IF EXISTS ledger_balances;
  `.execute(db);
}
