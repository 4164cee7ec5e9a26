/**
 * The watch's indexes move off `mirrors` into a narrow side table, so that more mirror updates are HOT
 * (issue 21 point 4, the write path). `watch` and `watch_at` (migration 20261126T1100_mirror_watch) change
 * with most status changes of a mirror (a first reading, PENDING to COMPLETED, COMPLETED to REJECTED ...),
 * and four partial indexes of `mirrors` read them (open, in flight, completed payouts, cancelled deposits):
 * each such update was not HOT and wrote a new entry into every index of `mirrors` (thirteen). Measured on a
 * 20,000-observation bench:ledger: 21,623 mirror updates, 5,162 HOT.
 *
 * `mirror_watches` holds one row per mirror whose `watch` is not null: its key, `watch`, `watch_at`, and
 * what the in-flight readers group by (`currency`, `test`), with the partial indexes the readers need. The
 * generated columns stay on `mirrors` (the one definition of the sets, unindexed now): the ledger's write
 * statement reads them before and after its update and writes a side row only where they (or the side
 * row's currency or test) changed; `payrecon db verify` checks the side table against them. `mirrors` gets
 * `fillfactor = 50`, room on the page for the HOT versions (new pages only: the table is not rewritten).
 * Backfills from `mirrors` (one scan of it). Not analyzed here: an empty side table (a new database) must
 * keep the planner's never-analyzed minimum size, or the write statement's first plans (and the generic
 * plan the server keeps after five) scan and hash it whole instead of probing its key, for good. Imports
 * nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE mirror_watches (
      entity_id text NOT NULL,
      entity_kind text NOT NULL,
      merchant_account text NOT NULL,
      watch text NOT NULL CHECK (watch IN ('open', 'completed', 'cancelled')),
      watch_at timestamptz,
      currency text,
      test boolean NOT NULL
    );
    INSERT INTO mirror_watches (entity_id, entity_kind, merchant_account, watch, watch_at, currency, test)
    SELECT entity_id, entity_kind, merchant_account, watch, watch_at, currency, test FROM mirrors
    WHERE watch IS NOT NULL;
    -- Looked up by equality only (the write statement's probes, verification's joins): bytes compared.
    CREATE UNIQUE INDEX mirror_watches_pk ON mirror_watches
      (entity_id text_pattern_ops, entity_kind text_pattern_ops, merchant_account text_pattern_ops);
    CREATE INDEX mirror_watches_open_ix ON mirror_watches (merchant_account, entity_kind) WHERE watch = 'open';
    CREATE INDEX mirror_watches_in_flight_ix ON mirror_watches (merchant_account, currency, test, entity_kind)
      WHERE watch = 'open' AND entity_kind IN ('cashout', 'refund');
    CREATE INDEX mirror_watches_completed_ix ON mirror_watches (watch_at) WHERE watch = 'completed';
    CREATE INDEX mirror_watches_cancelled_ix ON mirror_watches (watch_at) WHERE watch = 'cancelled';

    DROP INDEX mirrors_open_ix;
    DROP INDEX mirrors_in_flight_ix;
    DROP INDEX mirrors_completed_payouts_ix;
    DROP INDEX mirrors_cancelled_deposits_ix;
    ALTER TABLE mirrors SET (fillfactor = 50);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE mirrors RESET (fillfactor);
    CREATE INDEX mirrors_open_ix ON mirrors (merchant_account, entity_kind) WHERE watch = 'open';
    CREATE INDEX mirrors_completed_payouts_ix ON mirrors (watch_at) WHERE watch = 'completed';
    CREATE INDEX mirrors_cancelled_deposits_ix ON mirrors (watch_at) WHERE watch = 'cancelled';
    CREATE INDEX mirrors_in_flight_ix ON mirrors (merchant_account, currency, test, entity_kind)
      WHERE watch = 'open' AND entity_kind IN ('cashout', 'refund');
    DROP TABLE mirror_watches;
  `.execute(db);
}
