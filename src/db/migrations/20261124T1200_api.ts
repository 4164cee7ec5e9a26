/**
 * The exception queue people work in and the API's reads (issue 18 point 2, issue 19 point 1): the state
 * `in_review` between `open` and `acknowledged`, an assignee, and `exception_events`, the append-only
 * audit trail of every state change, assignment and comment (who, when, what changed, the note). Also a
 * minimal `closes` table (one row per month, merchant account and currency) so `/api/v1/closes` serves a
 * real table before the month close is built; and indexes for looking a payment up by any of its ids.
 * Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE exceptions DROP CONSTRAINT exceptions_state_ck;
    ALTER TABLE exceptions ADD CONSTRAINT exceptions_state_ck
      CHECK (state IN ('open', 'in_review', 'acknowledged', 'resolved'));
    ALTER TABLE exceptions
      ADD COLUMN assignee text,
      ADD COLUMN assigned_at timestamptz;
    CREATE INDEX exceptions_assignee_ix ON exceptions (assignee) WHERE assignee IS NOT NULL;
    CREATE INDEX exceptions_entity_ix ON exceptions (merchant_account, entity_kind, entity_id);

    CREATE TABLE exception_events (
      id bigserial NOT NULL,
      exception_id bigint NOT NULL,
      at timestamptz NOT NULL DEFAULT now(),
      actor text NOT NULL,
      action text NOT NULL,
      from_state text,
      to_state text,
      from_assignee text,
      to_assignee text,
      note text,
      CONSTRAINT exception_events_pk PRIMARY KEY (id),
      CONSTRAINT exception_events_exception_fk FOREIGN KEY (exception_id) REFERENCES exceptions (id),
      CONSTRAINT exception_events_action_ck CHECK (action IN ('state', 'assign', 'comment'))
    );
    CREATE INDEX exception_events_exception_ix ON exception_events (exception_id, id);
    CREATE TRIGGER exception_events_immutable_trg BEFORE UPDATE OR DELETE ON exception_events
      FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();

    CREATE TABLE closes (
      id bigserial NOT NULL,
      merchant_account text NOT NULL,
      currency text NOT NULL,
      period text NOT NULL,
      status text NOT NULL DEFAULT 'prepared',
      prepared_by text NOT NULL,
      prepared_at timestamptz NOT NULL DEFAULT now(),
      approved_by text,
      approved_at timestamptz,
      figures jsonb NOT NULL DEFAULT '{}'::jsonb,
      sha256 text,
      CONSTRAINT closes_pk PRIMARY KEY (id),
      CONSTRAINT closes_period_uq UNIQUE (merchant_account, currency, period),
      CONSTRAINT closes_period_ck CHECK (period ~ '^[0-9]{4}-(0[1-9]|1[0-2])$'),
      CONSTRAINT closes_status_ck CHECK (status IN ('prepared', 'approved')),
      CONSTRAINT closes_approver_ck CHECK (approved_by IS NULL OR approved_by <> prepared_by)
    );

    CREATE INDEX mirrors_entity_id_ix ON mirrors (entity_id);
    CREATE INDEX mirrors_external_ref_any_ix ON mirrors (external_ref) WHERE external_ref IS NOT NULL;
    CREATE INDEX mirrors_created_ix ON mirrors (created_at, merchant_account, entity_kind, entity_id);
    CREATE INDEX intents_external_ref_any_ix ON intents (external_ref);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX IF EXISTS intents_external_ref_any_ix;
    DROP INDEX IF EXISTS mirrors_created_ix;
    DROP INDEX IF EXISTS mirrors_external_ref_any_ix;
    DROP INDEX IF EXISTS mirrors_entity_id_ix;
    DROP TABLE IF EXISTS closes;
    DROP TABLE IF EXISTS exception_events;
    DROP INDEX IF EXISTS exceptions_entity_ix;
    DROP INDEX IF EXISTS exceptions_assignee_ix;
    ALTER TABLE exceptions DROP COLUMN IF EXISTS assigned_at, DROP COLUMN IF EXISTS assignee;
    UPDATE exceptions SET state = 'open' WHERE state = 'in_review';
    ALTER TABLE exceptions DROP CONSTRAINT exceptions_state_ck;
    ALTER TABLE exceptions ADD CONSTRAINT exceptions_state_ck CHECK (state IN ('open', 'acknowledged', 'resolved'));
  `.execute(db);
}
