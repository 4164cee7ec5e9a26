/**
 * The text keys of the indexes that every batch of the ledger writes into (issue 21 point 4, the write
 * path) compare bytes (`text_pattern_ops`) instead of going through the database's collation: the
 * history's entity and event-id indexes, the entries' entity and idempotency-key indexes and the postings'
 * account index. Inserting a key into a btree compares it with some twenty keys on the way down; under a
 * collation other than "C" (this machine's C.UTF-8 too) each text comparison that is not an exact match
 * copies both strings and calls strcoll, under `text_pattern_ops` it is a memcmp.
 *
 * Every reader of these indexes looks their text columns up by equality (`=`, `= ANY`, row equality,
 * LATERAL key probes) and orders or ranges only on the trailing timestamp (`observed_at`, `created_at`),
 * which an index of these operator classes serves alike: equality is the same under both (the database's
 * collations are deterministic: equal means the same bytes), so the uniqueness of the event ids and of
 * the idempotency keys is unchanged, and `ON CONFLICT (event_id)` / `(idempotency_key)` still infer these
 * indexes as their arbiters. Same index names, so a duplicate still fails naming
 * `status_history_event_uq` / `journal_entries_idempotency_key_uq` (23505); the two unique constraints
 * become unique indexes (a constraint cannot name an operator class). What these indexes no longer serve
 * is an ORDER BY or a range on their text columns under the database's collation; no query has one.
 * Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE status_history DROP CONSTRAINT status_history_event_uq;
    CREATE UNIQUE INDEX status_history_event_uq ON status_history (event_id text_pattern_ops);
    DROP INDEX status_history_entity_ix;
    CREATE INDEX status_history_entity_ix ON status_history
      (merchant_account text_pattern_ops, entity_kind text_pattern_ops, entity_id text_pattern_ops, observed_at);
    ALTER TABLE journal_entries DROP CONSTRAINT journal_entries_idempotency_key_uq;
    CREATE UNIQUE INDEX journal_entries_idempotency_key_uq ON journal_entries (idempotency_key text_pattern_ops);
    DROP INDEX journal_entries_entity_ix;
    CREATE INDEX journal_entries_entity_ix ON journal_entries
      (merchant_account text_pattern_ops, entity_kind text_pattern_ops, entity_id text_pattern_ops);
    DROP INDEX postings_account_ix;
    CREATE INDEX postings_account_ix ON postings
      (merchant_account text_pattern_ops, currency text_pattern_ops, book text_pattern_ops, account text_pattern_ops,
       created_at);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX postings_account_ix;
    CREATE INDEX postings_account_ix ON postings (merchant_account, currency, book, account, created_at);
    DROP INDEX journal_entries_entity_ix;
    CREATE INDEX journal_entries_entity_ix ON journal_entries (merchant_account, entity_kind, entity_id);
    DROP INDEX journal_entries_idempotency_key_uq;
    ALTER TABLE journal_entries ADD CONSTRAINT journal_entries_idempotency_key_uq UNIQUE (idempotency_key);
    DROP INDEX status_history_entity_ix;
    CREATE INDEX status_history_entity_ix ON status_history (merchant_account, entity_kind, entity_id, observed_at);
    DROP INDEX status_history_event_uq;
    ALTER TABLE status_history ADD CONSTRAINT status_history_event_uq UNIQUE (event_id);
  `.execute(db);
}
