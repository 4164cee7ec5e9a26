/**
 * The poll schedule leaves the mirror row (issue 21 point 4). `mirrors.next_poll_at` changed on nearly
 * every reading and was indexed (`mirrors_next_poll_ix`), so no update of a mirror could be HOT: a poll
 * that read the same status again wrote a new entry into every index of `mirrors` (14 besides the
 * schedule's). The schedule now lives in `poll_schedule`, one row per entity while it is scheduled
 * (none once it is not: `next_poll_at` NOT NULL), with its own index on the next poll; a reading that
 * changes no indexed column of the mirror updates it HOT. `poll_attempts` (not indexed) stays on the
 * mirror. No foreign key to `mirrors`: its check is a query per inserted row (about 25,000 per
 * bench:ledger run), and every writer of the schedule writes it with the mirror row, locked or created in
 * the same statement. `fillfactor = 85` on `mirrors` leaves room in each page for the HOT versions; it applies to
 * pages written from now on (new rows, a table rewrite), not to the pages already full.
 * Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE poll_schedule (
      merchant_account text NOT NULL,
      entity_kind text NOT NULL,
      entity_id text NOT NULL,
      next_poll_at timestamptz NOT NULL,
      CONSTRAINT poll_schedule_pk PRIMARY KEY (merchant_account, entity_kind, entity_id)
    );
    INSERT INTO poll_schedule (merchant_account, entity_kind, entity_id, next_poll_at)
    SELECT merchant_account, entity_kind, entity_id, next_poll_at FROM mirrors WHERE next_poll_at IS NOT NULL
    ORDER BY merchant_account, entity_kind, entity_id;
    CREATE INDEX poll_schedule_next_ix ON poll_schedule (next_poll_at);
    DROP INDEX mirrors_next_poll_ix;
    ALTER TABLE mirrors DROP COLUMN next_poll_at;
    ALTER TABLE mirrors SET (fillfactor = 85);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE mirrors RESET (fillfactor);
    ALTER TABLE mirrors ADD COLUMN next_poll_at timestamptz;
    UPDATE mirrors m SET next_poll_at = s.next_poll_at FROM poll_schedule s
    WHERE s.merchant_account = m.merchant_account AND s.entity_kind = m.entity_kind AND s.entity_id = m.entity_id;
    CREATE INDEX mirrors_next_poll_ix ON mirrors (next_poll_at) WHERE next_poll_at IS NOT NULL;
    DROP TABLE poll_schedule;
  `.execute(db);
}
