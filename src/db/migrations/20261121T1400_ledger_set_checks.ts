/**
 * Ledger checks made set-based. The row-level foreign keys of `postings` (one RI lookup per posting row)
 * become part of the statement-level trigger, which now checks, once per INSERT statement: every posting
 * names an existing entry of its own book and merchant account and an existing ledger account; the
 * statement's postings of each entry sum to zero per currency. Since every entry balanced before the
 * statement, an entry balances after it exactly when the statement's postings of it sum to zero, so the
 * trigger reads only the transition table and one index lookup per distinct entry and account. Ledger
 * accounts become undeletable, as entries and postings are.
 *
 * Secondary indexes of mirrors and intents are reordered to lead with their own column: sharing the
 * (merchant_account, entity_kind) prefix of the primary key let the planner, with missing or stale
 * statistics, probe them for key lookups and scan a whole account per probe. The status index of mirrors
 * goes: every batch rewrites the status, and its readers (sweeps, verification) scan anyway. Imports
 * nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE postings DROP CONSTRAINT postings_entry_fk, DROP CONSTRAINT postings_account_fk;

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

    CREATE TRIGGER ledger_accounts_immutable_trg BEFORE UPDATE OR DELETE ON ledger_accounts
      FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();

    DROP INDEX mirrors_external_ref_ix;
    DROP INDEX mirrors_parent_ix;
    DROP INDEX mirrors_status_ix;
    DROP INDEX intents_entity_ix;
    DROP INDEX intents_external_ref_ix;
    CREATE INDEX mirrors_external_ref_ix ON mirrors (external_ref, merchant_account, entity_kind);
    CREATE INDEX mirrors_parent_ix ON mirrors (parent_deposit_id, merchant_account) WHERE parent_deposit_id IS NOT NULL;
    CREATE INDEX intents_entity_ix ON intents (entity_id, merchant_account, entity_kind);
    CREATE INDEX intents_external_ref_ix ON intents (external_ref, merchant_account, entity_kind);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX mirrors_external_ref_ix;
    DROP INDEX mirrors_parent_ix;
    DROP INDEX intents_entity_ix;
    DROP INDEX intents_external_ref_ix;
    CREATE INDEX mirrors_external_ref_ix ON mirrors (merchant_account, entity_kind, external_ref);
    CREATE INDEX mirrors_parent_ix ON mirrors (merchant_account, parent_deposit_id) WHERE parent_deposit_id IS NOT NULL;
    CREATE INDEX mirrors_status_ix ON mirrors (entity_kind, status);
    CREATE INDEX intents_entity_ix ON intents (merchant_account, entity_kind, entity_id);
    CREATE INDEX intents_external_ref_ix ON intents (merchant_account, entity_kind, external_ref);
    DROP TRIGGER IF EXISTS ledger_accounts_immutable_trg ON ledger_accounts;
    CREATE OR REPLACE FUNCTION postings_check_balanced() RETURNS trigger LANGUAGE plpgsql AS $fn$
    DECLARE
      bad record;
    BEGIN
      SELECT n.entry_id, n.book AS posting_book, e.book AS entry_book INTO bad
        FROM new_postings n JOIN journal_entries e ON e.id = n.entry_id
        WHERE n.book <> e.book OR n.merchant_account <> e.merchant_account
        LIMIT 1;
      IF FOUND THEN
        RAISE EXCEPTION 'ledger: entry % mixes books or accounts (posting book %, entry book %)',
          bad.entry_id, bad.posting_book, bad.entry_book
          USING ERRCODE = 'check_violation', CONSTRAINT = 'postings_single_book';
      END IF;
      SELECT p.entry_id, p.currency, sum(p.amount) AS total INTO bad
        FROM postings p
        WHERE p.entry_id IN (SELECT DISTINCT entry_id FROM new_postings)
        GROUP BY p.entry_id, p.currency
        HAVING sum(p.amount) <> 0
        LIMIT 1;
      IF FOUND THEN
        RAISE EXCEPTION 'ledger: entry % does not balance in % (sum %)', bad.entry_id, bad.currency, bad.total
          USING ERRCODE = 'check_violation', CONSTRAINT = 'postings_balanced';
      END IF;
      RETURN NULL;
    END
    $fn$;
    ALTER TABLE postings
      ADD CONSTRAINT postings_entry_fk FOREIGN KEY (entry_id) REFERENCES journal_entries (id),
      ADD CONSTRAINT postings_account_fk FOREIGN KEY (merchant_account, currency, book, account)
        REFERENCES ledger_accounts (merchant_account, currency, book, name);
  `.execute(db);
}
