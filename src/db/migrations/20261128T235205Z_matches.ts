/**
 * Matches between imported lines and what they are matched to: a bank line and the settlements its money
 * paid, a provider report row and the ledger payment it reports. A match records its rule (a configured
 * rule's name, or `manual` with who made it and why) and, once undone, who undid it, when and why; its
 * row is never deleted and changes only by being ended once (a trigger refuses any other change). Each
 * member names its side and its line's identity; a line (any side but the ledger's payments, which
 * several report rows may name) is in at most one live match, which a partial unique index enforces.
 * Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE matches (
      id bigserial CONSTRAINT matches_pkey PRIMARY KEY,
      pair text NOT NULL CONSTRAINT matches_pair_check CHECK (pair IN ('bank-settlement', 'provider-ledger')),
      rule text NOT NULL CONSTRAINT matches_rule_check CHECK (rule <> ''),
      difference numeric NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL DEFAULT now(),
      created_by text NOT NULL CONSTRAINT matches_created_by_check CHECK (created_by <> ''),
      note text,
      ended_at timestamptz,
      ended_by text,
      end_note text,
      CONSTRAINT matches_manual_note_check CHECK (rule <> 'manual' OR coalesce(note, '') <> ''),
      CONSTRAINT matches_end_check CHECK (
        (ended_at IS NULL AND ended_by IS NULL AND end_note IS NULL)
        OR (ended_at IS NOT NULL AND coalesce(ended_by, '') <> '' AND coalesce(end_note, '') <> ''))
    )`.execute(db);
  await sql`CREATE INDEX matches_created_at_idx ON matches (created_at)`.execute(db);

  await sql`
    CREATE TABLE match_members (
      match_id bigint NOT NULL CONSTRAINT match_members_match_fkey REFERENCES matches (id),
      side text NOT NULL CONSTRAINT match_members_side_check
        CHECK (side IN ('bank_line', 'settlement', 'provider_row', 'ledger_payment')),
      identity text NOT NULL,
      live boolean NOT NULL DEFAULT true
    )`.execute(db);
  await sql`CREATE INDEX match_members_match_idx ON match_members (match_id)`.execute(db);
  await sql`
    CREATE UNIQUE INDEX match_members_live_uq ON match_members (side, identity)
    WHERE live AND side <> 'ledger_payment'`.execute(db);
  // The exceptions of a settlement name it by its id.
  await sql`CREATE INDEX provider_settlement_rows_settlement_idx ON provider_settlement_rows (settlement_id)`.execute(
    db,
  );
  // Matching pages through the report rows by transaction id.
  await sql`CREATE INDEX provider_transaction_rows_transaction_idx ON provider_transaction_rows (transaction_id)`.execute(
    db,
  );
  await sql`
    CREATE INDEX match_members_payment_idx ON match_members (identity) WHERE live AND side = 'ledger_payment'`.execute(
    db,
  );
  await sql`CREATE INDEX match_members_ended_idx ON match_members (side, identity) WHERE NOT live`.execute(
    db,
  );

  await sql`
    CREATE FUNCTION matches_end_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'matches are never deleted: unmatch ends a match' USING ERRCODE = 'integrity_constraint_violation';
      END IF;
      IF OLD.ended_at IS NOT NULL OR NEW.id <> OLD.id OR NEW.pair <> OLD.pair OR NEW.rule <> OLD.rule
        OR NEW.difference <> OLD.difference OR NEW.created_at <> OLD.created_at
        OR NEW.created_by <> OLD.created_by OR NEW.note IS DISTINCT FROM OLD.note THEN
        RAISE EXCEPTION 'a match changes only by being ended, once' USING ERRCODE = 'integrity_constraint_violation';
      END IF;
      RETURN NEW;
    END $$`.execute(db);
  await sql`
    CREATE TRIGGER matches_end_only BEFORE UPDATE OR DELETE ON matches
    FOR EACH ROW EXECUTE FUNCTION matches_end_only()`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX provider_transaction_rows_transaction_idx`.execute(db);
  await sql`DROP INDEX provider_settlement_rows_settlement_idx`.execute(db);
  await sql`DROP TABLE match_members`.execute(db);
  await sql`DROP TABLE matches`.execute(db);
  await sql`DROP FUNCTION matches_end_only()`.execute(db);
}
