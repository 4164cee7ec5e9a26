/**
 * Fewer and cheaper index entries per mirror row version (issue 21 point 4, the write path). A mirror
 * update that changes an indexed column (a first reading, a move between the sets of `watch`) is not HOT:
 * PostgreSQL writes a new entry into every index of `mirrors` whose predicate holds, about 1 us each, and
 * each text key compared on the way down goes through the database's collation (copies and strcoll, this
 * machine's C.UTF-8 too). Measured on the rows of a 20,000-observation bench:ledger copied four times, a
 * non-HOT update of every row cost 12.7 us a row before and 9.0 after.
 *
 * - The primary key leads with `entity_id` (entity_id, entity_kind, merchant_account), so it serves the
 *   look-ups by entity id alone (the payment search, `lookupPayments`) and `mirrors_entity_id_ix` goes.
 *   Every other reader of the key names all three columns (any order serves an equality); the full
 *   verification pages through the mirrors in the key's order (`verify.ts`, `entityPages`).
 * - `mirrors_created_ix` keys `created_at` alone: the rows a transaction creates share its `now()`, so
 *   each insertion compared the three text columns after it. Its readers (`listPayments`, newest first,
 *   keyset on created_at and the key; `lookupPayments`'s order) read it by `created_at` and sort the
 *   few rows of equal `created_at` (incremental sort); the keyset's row comparison bounds the scan by
 *   `created_at`.
 * - `mirrors_external_ref_ix` keys `external_ref` alone, byte-compared (`text_pattern_ops`), for the
 *   mirrors that have one; `mirrors_intent_ix` byte-compares `intent_id`. Their readers look them up by
 *   equality only (`=`, which these operator classes serve alike: the database's collations are
 *   deterministic), the kind and merchant account being checked on the few rows a reference names.
 *
 * Rebuilds the primary key and three indexes of `mirrors` under its lock (no table rewrite), for a time
 * that grows with the table: run it in a quiet hour. Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE mirrors DROP CONSTRAINT mirrors_pk;
    ALTER TABLE mirrors ADD CONSTRAINT mirrors_pk PRIMARY KEY (entity_id, entity_kind, merchant_account);
    DROP INDEX mirrors_entity_id_ix;
    DROP INDEX mirrors_created_ix;
    CREATE INDEX mirrors_created_ix ON mirrors (created_at);
    DROP INDEX mirrors_external_ref_ix;
    CREATE INDEX mirrors_external_ref_ix ON mirrors (external_ref text_pattern_ops) WHERE external_ref IS NOT NULL;
    DROP INDEX mirrors_intent_ix;
    CREATE INDEX mirrors_intent_ix ON mirrors (intent_id text_pattern_ops) WHERE intent_id IS NOT NULL;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX mirrors_intent_ix;
    CREATE INDEX mirrors_intent_ix ON mirrors (intent_id) WHERE intent_id IS NOT NULL;
    DROP INDEX mirrors_external_ref_ix;
    CREATE INDEX mirrors_external_ref_ix ON mirrors (external_ref, merchant_account, entity_kind);
    DROP INDEX mirrors_created_ix;
    CREATE INDEX mirrors_created_ix ON mirrors (created_at, merchant_account, entity_kind, entity_id);
    CREATE INDEX mirrors_entity_id_ix ON mirrors (entity_id);
    ALTER TABLE mirrors DROP CONSTRAINT mirrors_pk;
    ALTER TABLE mirrors ADD CONSTRAINT mirrors_pk PRIMARY KEY (merchant_account, entity_kind, entity_id);
  `.execute(db);
}
