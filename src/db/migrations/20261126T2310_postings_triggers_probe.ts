/**
 * The two statement-level triggers of `postings` (latest 20261126T06552_postings_triggers_lean) read each
 * new posting's entry by its key whatever the statistics say (issue 21 point 4, the write path): the
 * balance check's join of its entry groups to `journal_entries` and the movements' join of the postings
 * become LATERAL subqueries (OFFSET 0), one `journal_entries_pk` probe per group or posting. As joins, the
 * plan a trigger cached at its first call in a session (planned with that call's row count and the
 * statistics of the moment) could hash the whole of `journal_entries` for every batch: seen in
 * bench:ledger's auto_explain, `Seq Scan on journal_entries` of 2,342 to 14,991 rows in both statements of
 * a batch, its cost growing with the table until the next re-plan. Same checks, same errors in the same
 * order, same rows written. Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE OR REPLACE FUNCTION postings_check_balanced() RETURNS trigger LANGUAGE plpgsql AS $fn$
    DECLARE
      bad record;
      unbalanced_or_mixed boolean;
      acct record;
    BEGIN
      SELECT x.entry_id, x.currency, x.total, x.book_fault INTO bad
        FROM (SELECT g.entry_id, g.currency, g.total,
                g.mixed OR e.id IS NULL OR e.book COLLATE "C" <> g.book
                  OR e.merchant_account COLLATE "C" <> g.account AS book_fault
              FROM (SELECT n.entry_id, n.currency COLLATE "C" AS currency, sum(n.amount) AS total,
                      min(n.book COLLATE "C") AS book, min(n.merchant_account COLLATE "C") AS account,
                      min(n.book COLLATE "C") <> max(n.book COLLATE "C")
                        OR min(n.merchant_account COLLATE "C") <> max(n.merchant_account COLLATE "C") AS mixed
                    FROM new_postings n GROUP BY n.entry_id, n.currency COLLATE "C") g
                LEFT JOIN LATERAL (SELECT e.id, e.book, e.merchant_account FROM journal_entries e
                  WHERE e.id = g.entry_id OFFSET 0) e ON true) x
        WHERE x.book_fault OR x.total <> 0
        ORDER BY x.book_fault DESC
        LIMIT 1;
      unbalanced_or_mixed := FOUND;
      IF unbalanced_or_mixed AND bad.book_fault THEN
        RAISE EXCEPTION 'ledger: entry % mixes books or accounts, or does not exist', bad.entry_id
          USING ERRCODE = 'check_violation', CONSTRAINT = 'postings_single_book';
      END IF;
      SELECT a.merchant_account, a.currency, a.book, a.account INTO acct
        FROM (SELECT DISTINCT merchant_account, currency, book, account FROM new_postings) a
        WHERE NOT EXISTS (SELECT 1 FROM ledger_accounts l WHERE l.merchant_account = a.merchant_account
          AND l.currency = a.currency AND l.book = a.book AND l.name = a.account)
        LIMIT 1;
      IF FOUND THEN
        RAISE EXCEPTION 'ledger: posting to unknown ledger account % % % %', acct.merchant_account, acct.currency,
          acct.book, acct.account USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'postings_account_known';
      END IF;
      IF unbalanced_or_mixed THEN
        RAISE EXCEPTION 'ledger: entry % does not balance in % (sum %)', bad.entry_id, bad.currency, bad.total
          USING ERRCODE = 'check_violation', CONSTRAINT = 'postings_balanced';
      END IF;
      RETURN NULL;
    END
    $fn$;

    CREATE OR REPLACE FUNCTION postings_running_balances() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      INSERT INTO ledger_balances AS b (merchant_account, currency, book, account, balance)
      SELECT s.merchant_account COLLATE "default", s.currency COLLATE "default", s.book COLLATE "default",
          s.account COLLATE "default", s.balance
        FROM (SELECT n.merchant_account COLLATE "C" AS merchant_account, n.currency COLLATE "C" AS currency,
                n.book COLLATE "C" AS book, n.account COLLATE "C" AS account, sum(n.amount) AS balance
              FROM new_postings n GROUP BY 1, 2, 3, 4) s
        ORDER BY 1, 2, 3, 4
      ON CONFLICT (merchant_account, currency, book, account)
        DO UPDATE SET balance = b.balance + excluded.balance, updated_at = now();
      INSERT INTO ledger_movements AS m (merchant_account, currency, book, account, hours, bucket, effect,
        direction, amount_in, amount_out)
      SELECT s.merchant_account COLLATE "default", s.currency COLLATE "default", s.book COLLATE "default",
          s.account COLLATE "default", g.hours,
          date_trunc(CASE g.hours WHEN 24 THEN 'day' ELSE 'hour' END, s.created_at, 'UTC') AS bucket,
          s.effect COLLATE "default", s.direction, sum(s.amount_in), sum(s.amount_out)
        FROM (SELECT n.merchant_account COLLATE "C" AS merchant_account, n.currency COLLATE "C" AS currency,
                n.book COLLATE "C" AS book, n.account COLLATE "C" AS account, n.created_at,
                e.effect COLLATE "C" AS effect, e.direction,
                coalesce(sum(n.amount) FILTER (WHERE n.amount > 0), 0) AS amount_in,
                coalesce(sum(n.amount) FILTER (WHERE n.amount < 0), 0) AS amount_out
              FROM new_postings n CROSS JOIN LATERAL (SELECT e.effect, e.direction FROM journal_entries e
                WHERE e.id = n.entry_id OFFSET 0) e
              GROUP BY 1, 2, 3, 4, 5, 6, 7) s
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
    CREATE OR REPLACE FUNCTION postings_check_balanced() RETURNS trigger LANGUAGE plpgsql AS $fn$
    DECLARE
      bad record;
      unbalanced_or_mixed boolean;
      acct record;
    BEGIN
      SELECT x.entry_id, x.currency, x.total, x.book_fault INTO bad
        FROM (SELECT g.entry_id, g.currency, g.total,
                g.mixed OR e.id IS NULL OR e.book COLLATE "C" <> g.book
                  OR e.merchant_account COLLATE "C" <> g.account AS book_fault
              FROM (SELECT n.entry_id, n.currency COLLATE "C" AS currency, sum(n.amount) AS total,
                      min(n.book COLLATE "C") AS book, min(n.merchant_account COLLATE "C") AS account,
                      min(n.book COLLATE "C") <> max(n.book COLLATE "C")
                        OR min(n.merchant_account COLLATE "C") <> max(n.merchant_account COLLATE "C") AS mixed
                    FROM new_postings n GROUP BY n.entry_id, n.currency COLLATE "C") g
                LEFT JOIN journal_entries e ON e.id = g.entry_id) x
        WHERE x.book_fault OR x.total <> 0
        ORDER BY x.book_fault DESC
        LIMIT 1;
      unbalanced_or_mixed := FOUND;
      IF unbalanced_or_mixed AND bad.book_fault THEN
        RAISE EXCEPTION 'ledger: entry % mixes books or accounts, or does not exist', bad.entry_id
          USING ERRCODE = 'check_violation', CONSTRAINT = 'postings_single_book';
      END IF;
      SELECT a.merchant_account, a.currency, a.book, a.account INTO acct
        FROM (SELECT DISTINCT merchant_account, currency, book, account FROM new_postings) a
        WHERE NOT EXISTS (SELECT 1 FROM ledger_accounts l WHERE l.merchant_account = a.merchant_account
          AND l.currency = a.currency AND l.book = a.book AND l.name = a.account)
        LIMIT 1;
      IF FOUND THEN
        RAISE EXCEPTION 'ledger: posting to unknown ledger account % % % %', acct.merchant_account, acct.currency,
          acct.book, acct.account USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'postings_account_known';
      END IF;
      IF unbalanced_or_mixed THEN
        RAISE EXCEPTION 'ledger: entry % does not balance in % (sum %)', bad.entry_id, bad.currency, bad.total
          USING ERRCODE = 'check_violation', CONSTRAINT = 'postings_balanced';
      END IF;
      RETURN NULL;
    END
    $fn$;

    CREATE OR REPLACE FUNCTION postings_running_balances() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      INSERT INTO ledger_balances AS b (merchant_account, currency, book, account, balance)
      SELECT s.merchant_account COLLATE "default", s.currency COLLATE "default", s.book COLLATE "default",
          s.account COLLATE "default", s.balance
        FROM (SELECT n.merchant_account COLLATE "C" AS merchant_account, n.currency COLLATE "C" AS currency,
                n.book COLLATE "C" AS book, n.account COLLATE "C" AS account, sum(n.amount) AS balance
              FROM new_postings n GROUP BY 1, 2, 3, 4) s
        ORDER BY 1, 2, 3, 4
      ON CONFLICT (merchant_account, currency, book, account)
        DO UPDATE SET balance = b.balance + excluded.balance, updated_at = now();
      INSERT INTO ledger_movements AS m (merchant_account, currency, book, account, hours, bucket, effect,
        direction, amount_in, amount_out)
      SELECT s.merchant_account COLLATE "default", s.currency COLLATE "default", s.book COLLATE "default",
          s.account COLLATE "default", g.hours,
          date_trunc(CASE g.hours WHEN 24 THEN 'day' ELSE 'hour' END, s.created_at, 'UTC') AS bucket,
          s.effect COLLATE "default", s.direction, sum(s.amount_in), sum(s.amount_out)
        FROM (SELECT n.merchant_account COLLATE "C" AS merchant_account, n.currency COLLATE "C" AS currency,
                n.book COLLATE "C" AS book, n.account COLLATE "C" AS account, n.created_at,
                e.effect COLLATE "C" AS effect, e.direction,
                coalesce(sum(n.amount) FILTER (WHERE n.amount > 0), 0) AS amount_in,
                coalesce(sum(n.amount) FILTER (WHERE n.amount < 0), 0) AS amount_out
              FROM new_postings n JOIN journal_entries e ON e.id = n.entry_id
              GROUP BY 1, 2, 3, 4, 5, 6, 7) s
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
