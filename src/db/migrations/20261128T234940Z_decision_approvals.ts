/**
 * A decision that re-books the ledger (accepting the provider's status or facts) takes two people: one
 * proposes it, kept in `exceptions.proposal` until a controller who is not the proposer approves it (the
 * ledger books then) or rejects it. Each step is an event of the exception's audit trail (`propose`,
 * `approve`, `reject`), and the database refuses a decision whose approver is its proposer.
 *
 * Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE exceptions ADD COLUMN proposal jsonb;
    ALTER TABLE exceptions ADD CONSTRAINT exceptions_decision_approver_ck
      CHECK (decision IS NULL OR decision->>'proposedBy' IS NULL OR decision->>'proposedBy' <> decision->>'by');
    ALTER TABLE exception_events DROP CONSTRAINT exception_events_action_ck;
    ALTER TABLE exception_events ADD CONSTRAINT exception_events_action_ck
      CHECK (action IN ('state', 'assign', 'comment', 'propose', 'approve', 'reject'));
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DELETE FROM exception_events WHERE action IN ('propose', 'approve', 'reject');
    ALTER TABLE exception_events DROP CONSTRAINT exception_events_action_ck;
    ALTER TABLE exception_events ADD CONSTRAINT exception_events_action_ck
      CHECK (action IN ('state', 'assign', 'comment'));
    ALTER TABLE exceptions DROP CONSTRAINT exceptions_decision_approver_ck;
    ALTER TABLE exceptions DROP COLUMN proposal;
  `.execute(db);
}
