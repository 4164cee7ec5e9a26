/**
 * The poll schedule's writes made cheaper (issue 21 point 4, the write path). Every batch moves the next
 * poll of most entities it reads; that update was never HOT, because `next_poll_at` itself was indexed
 * (`poll_schedule_next_ix`), so each one wrote a new entry into both indexes of the table.
 *
 * - `due_from`, the hour the next poll falls in (`date_bin`, a stored generated column, never later than
 *   `next_poll_at`), is what the poller's index now holds (`poll_schedule_due_ix`); `next_poll_at` is no
 *   longer indexed. A reschedule inside the same hour changes no indexed column and is HOT (`fillfactor
 *   = 50` leaves each page room for the new versions). The poller asks for `due_from <= now AND
 *   next_poll_at <= now` in the order `due_from, next_poll_at, entity_id` (the same order as by
 *   `next_poll_at, entity_id`, since `due_from` never decreases with `next_poll_at`): the index bounds
 *   the scan to the hours up to now, an incremental sort orders each hour, and the rows of the current
 *   hour not due yet are read and passed over (at most an hour of schedule).
 * - `poll_schedule_pk` becomes a unique index of `text_pattern_ops` (same name, so a duplicate still fails
 *   naming it), as 20261126T1300 did for the ledger's other keys: every reschedule probes it, and under
 *   the database's collation each comparison on the way down copies both strings and calls strcoll,
 *   under `text_pattern_ops` it is a memcmp. Every reader looks the key up by equality (LATERAL key probes,
 *   `ON CONFLICT (merchant_account, entity_kind, entity_id)`), which both serve alike.
 *
 * Rewrites `poll_schedule` (the generated column) and builds its two indexes, under its lock; the table
 * holds only the entities still scheduled. Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE poll_schedule DROP CONSTRAINT poll_schedule_pk;
    DROP INDEX poll_schedule_next_ix;
    ALTER TABLE poll_schedule
      ADD COLUMN due_from timestamptz NOT NULL
        GENERATED ALWAYS AS (date_bin('1 hour', next_poll_at, timestamptz '2000-01-01 00:00:00+00')) STORED,
      SET (fillfactor = 50);
    CREATE UNIQUE INDEX poll_schedule_pk ON poll_schedule
      (merchant_account text_pattern_ops, entity_kind text_pattern_ops, entity_id text_pattern_ops);
    CREATE INDEX poll_schedule_due_ix ON poll_schedule (due_from);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX poll_schedule_due_ix;
    DROP INDEX poll_schedule_pk;
    ALTER TABLE poll_schedule DROP COLUMN due_from, RESET (fillfactor);
    ALTER TABLE poll_schedule ADD CONSTRAINT poll_schedule_pk PRIMARY KEY (merchant_account, entity_kind, entity_id);
    CREATE INDEX poll_schedule_next_ix ON poll_schedule (next_poll_at);
  `.execute(db);
}
