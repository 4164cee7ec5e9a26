/**
 * Movements per ledger account, currency, effect, direction and period (issue 21, the balances page at
 * any history): `ledger_movements` holds, per account, effect and direction, the sums of the postings
 * into (`amount_in`, positive) and out of (`amount_out`, negative) the account created in each UTC day
 * (`hours` 24, `bucket` its midnight) and in each UTC hour (`hours` 1, `bucket` its start). A month's and
 * today's movements then read about 31 day rows and at most 47 hour rows per account and effect instead of
 * the period's postings. Kept by the running balances' statement-level trigger on `postings`
 * (`postings_running_balances`, migration 20261124T1300_running_balances) in the transaction that posts,
 * after the balance rows: one `INSERT ... ON CONFLICT DO UPDATE` ordered by the primary key, so a batch
 * locks its movement rows once and in key order, and concurrent batches take the tables in the same order
 * and cannot deadlock. Backfilled from the existing postings (tables locked against writers meanwhile).
 * Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    LOCK TABLE ledger_accounts, postings IN SHARE ROW EXCLUSIVE MODE;

    CREATE TABLE ledger_movements (
      merchant_account text NOT NULL,
      currency text NOT NULL,
      book text NOT NULL,
      account text NOT NULL,
      hours smallint NOT NULL,
      bucket timestamptz NOT NULL,
      effect text NOT NULL,
      direction smallint NOT NULL,
      amount_in numeric NOT NULL,
      amount_out numeric NOT NULL,
      CONSTRAINT ledger_movements_pk
        PRIMARY KEY (merchant_account, currency, book, account, hours, bucket, effect, direction),
      CONSTRAINT ledger_movements_hours_ck CHECK (hours IN (1, 24)),
      CONSTRAINT ledger_movements_account_fk FOREIGN KEY (merchant_account, currency, book, account)
        REFERENCES ledger_accounts (merchant_account, currency, book, name)
    );

    INSERT INTO ledger_movements AS m (merchant_account, currency, book, account, hours, bucket, effect,
      direction, amount_in, amount_out)
    SELECT p.merchant_account, p.currency, p.book, p.account, g.hours,
      date_trunc(CASE g.hours WHEN 24 THEN 'day' ELSE 'hour' END, p.created_at, 'UTC'), e.effect, e.direction,
      coalesce(sum(p.amount) FILTER (WHERE p.amount > 0), 0), coalesce(sum(p.amount) FILTER (WHERE p.amount < 0), 0)
    FROM postings p JOIN journal_entries e ON e.id = p.entry_id
      CROSS JOIN (VALUES (1::smallint), (24::smallint)) AS g(hours)
    GROUP BY 1, 2, 3, 4, 5, 6, 7, 8;

    CREATE OR REPLACE FUNCTION postings_running_balances() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      INSERT INTO ledger_balances AS b (merchant_account, currency, book, account, balance)
      SELECT n.merchant_account, n.currency, n.book, n.account, sum(n.amount)
        FROM new_postings n
        GROUP BY n.merchant_account, n.currency, n.book, n.account
        ORDER BY n.merchant_account, n.currency, n.book, n.account
      ON CONFLICT (merchant_account, currency, book, account)
        DO UPDATE SET balance = b.balance + excluded.balance, updated_at = now();
      INSERT INTO ledger_movements AS m (merchant_account, currency, book, account, hours, bucket, effect,
        direction, amount_in, amount_out)
      SELECT n.merchant_account, n.currency, n.book, n.account, g.hours,
          date_trunc(CASE g.hours WHEN 24 THEN 'day' ELSE 'hour' END, n.created_at, 'UTC') AS bucket,
          e.effect, e.direction,
          coalesce(sum(n.amount) FILTER (WHERE n.amount > 0), 0), coalesce(sum(n.amount) FILTER (WHERE n.amount < 0), 0)
        FROM new_postings n JOIN journal_entries e ON e.id = n.entry_id
          CROSS JOIN (VALUES (1::smallint), (24::smallint)) AS g(hours)
        GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
        ORDER BY 1, 2, 3, 4, 5, 6, 7, 8
      ON CONFLICT (merchant_account, currency, book, account, hours, bucket, effect, direction)
        DO UPDATE SET amount_in = m.amount_in + excluded.amount_in, amount_out = m.amount_out + excluded.amount_out;
      RETURN NULL;
    END
    $fn$;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE OR REPLACE FUNCTION postings_running_balances() RETURNS trigger LANGUAGE plpgsql AS $fn$
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
    DROP TABLE IF EXISTS ledger_movements;
  `.execute(db);
}
