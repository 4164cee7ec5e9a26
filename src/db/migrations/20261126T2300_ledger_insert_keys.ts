/**
 * Less index work per row the ledger's write inserts (issue 21 point 4, the write path): every batch inserts
 * about 440 history rows, 230 entries and 460 postings, and each row is a descent into every index of its
 * table.
 * - `status_history_pk` and `postings_pk` (on `id`) are dropped: no statement looks either table up by `id`
 *   (history rows are found by entity, event id or `recorded_at`; postings by entry or account), and nothing
 *   references them. The `id` columns stay, filled from their sequences as before, for the readers that
 *   order an entity's history or an entry's postings by them. The event id (`status_history_event_uq`)
 *   remains the history's unique key.
 * - `status_history_entity_ix` and `journal_entries_entity_ix` lead with `entity_id` instead of
 *   `merchant_account, entity_kind`: every reader looks them up by equality on all three (`keyOf`, LATERAL
 *   probes, the look-up page and API), which either order serves alike, and the history index's trailing
 *   `observed_at` still orders an entity's rows. An insert compares its key with some twenty index keys on
 *   the way down; the two leading columns are the same for nearly every key (a few merchant accounts, three
 *   kinds), so each comparison went through three text columns, and now mostly stops at the first.
 * Builds the two entity indexes again (a time that grows with the tables, under a lock that blocks their
 * writers: run it in a quiet hour). Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE status_history DROP CONSTRAINT status_history_pk;
    ALTER TABLE postings DROP CONSTRAINT postings_pk;
    DROP INDEX status_history_entity_ix;
    CREATE INDEX status_history_entity_ix ON status_history
      (entity_id text_pattern_ops, entity_kind text_pattern_ops, merchant_account text_pattern_ops, observed_at);
    DROP INDEX journal_entries_entity_ix;
    CREATE INDEX journal_entries_entity_ix ON journal_entries
      (entity_id text_pattern_ops, entity_kind text_pattern_ops, merchant_account text_pattern_ops);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX journal_entries_entity_ix;
    CREATE INDEX journal_entries_entity_ix ON journal_entries
      (merchant_account text_pattern_ops, entity_kind text_pattern_ops, entity_id text_pattern_ops);
    DROP INDEX status_history_entity_ix;
    CREATE INDEX status_history_entity_ix ON status_history
      (merchant_account text_pattern_ops, entity_kind text_pattern_ops, entity_id text_pattern_ops, observed_at);
    ALTER TABLE postings ADD CONSTRAINT postings_pk PRIMARY KEY (id);
    ALTER TABLE status_history ADD CONSTRAINT status_history_pk PRIMARY KEY (id);
  `.execute(db);
}
