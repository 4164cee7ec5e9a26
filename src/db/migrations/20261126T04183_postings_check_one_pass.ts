/**
 * The balance check of `postings` (statement-level trigger `postings_balanced_trg`, migration
 * 20261121T1400_ledger_set_checks) in one pass over the statement's postings instead of two: grouped by
 * entry and currency, each group's sum, whether it mixes books or merchant accounts (min and max instead
 * of two `count(DISTINCT ...)`, which sort every group), and one index probe of its entry. The same
 * checks, the same errors in the same order (an entry that mixes books, differs from its entry or names
 * no entry; then an unknown ledger account; then an entry that does not balance). The ledger's write path
 * runs it once per batch. Imports nothing of the app.
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
                g.mixed OR (SELECT row(e.book, e.merchant_account) FROM journal_entries e WHERE e.id = g.entry_id)
                  IS DISTINCT FROM row(g.book, g.account) AS book_fault
              FROM (SELECT n.entry_id, n.currency, sum(n.amount) AS total, min(n.book) AS book,
                      min(n.merchant_account) AS account,
                      min(n.book) <> max(n.book) OR min(n.merchant_account) <> max(n.merchant_account) AS mixed
                    FROM new_postings n GROUP BY n.entry_id, n.currency) g) x
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
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE OR REPLACE FUNCTION postings_check_balanced() RETURNS trigger LANGUAGE plpgsql AS $fn$
    DECLARE
      bad record;
    BEGIN
      SELECT n.entry_id, n.books, n.accounts INTO bad
        FROM (SELECT entry_id, min(book) AS book, count(DISTINCT book) AS books, min(merchant_account) AS account,
                count(DISTINCT merchant_account) AS accounts
              FROM new_postings GROUP BY entry_id) n
        WHERE n.books > 1 OR n.accounts > 1
           OR (SELECT row(e.book, e.merchant_account) FROM journal_entries e WHERE e.id = n.entry_id)
              IS DISTINCT FROM row(n.book, n.account)
        LIMIT 1;
      IF FOUND THEN
        RAISE EXCEPTION 'ledger: entry % mixes books or accounts, or does not exist', bad.entry_id
          USING ERRCODE = 'check_violation', CONSTRAINT = 'postings_single_book';
      END IF;
      SELECT a.merchant_account, a.currency, a.book, a.account INTO bad
        FROM (SELECT DISTINCT merchant_account, currency, book, account FROM new_postings) a
        WHERE NOT EXISTS (SELECT 1 FROM ledger_accounts l WHERE l.merchant_account = a.merchant_account
          AND l.currency = a.currency AND l.book = a.book AND l.name = a.account)
        LIMIT 1;
      IF FOUND THEN
        RAISE EXCEPTION 'ledger: posting to unknown ledger account % % % %', bad.merchant_account, bad.currency,
          bad.book, bad.account USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'postings_account_known';
      END IF;
      SELECT n.entry_id, n.currency, sum(n.amount) AS total INTO bad
        FROM new_postings n GROUP BY n.entry_id, n.currency HAVING sum(n.amount) <> 0 LIMIT 1;
      IF FOUND THEN
        RAISE EXCEPTION 'ledger: entry % does not balance in % (sum %)', bad.entry_id, bad.currency, bad.total
          USING ERRCODE = 'check_violation', CONSTRAINT = 'postings_balanced';
      END IF;
      RETURN NULL;
    END
    $fn$;
  `.execute(db);
}
