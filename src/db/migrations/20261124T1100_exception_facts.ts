/**
 * Exceptions people can trust (issue 17 points 4 and 5): each exception keeps the fact it is about
 * (`fact`: the same fact seen again never reopens a resolved exception, a new one does) and, when a new
 * fact reopened it, what changed and what it was (`reopened_at`, `reopen_reason`, `previous`: the earlier
 * fact, details, note and resolver, which stay visible). An operator's decision on an ILLEGAL_TRANSITION
 * (accept the provider's status or keep the ledger's) is recorded on the exception (`decision`), and the
 * status reading an acceptance adds to the history has the source `operator`; the journal entries it
 * books say who and why (`memo`). Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE exceptions
      ADD COLUMN fact text,
      ADD COLUMN reopened_at timestamptz,
      ADD COLUMN reopen_reason text,
      ADD COLUMN previous jsonb,
      ADD COLUMN decision jsonb;
    ALTER TABLE journal_entries ADD COLUMN memo jsonb;
    ALTER TABLE status_history DROP CONSTRAINT status_history_source_ck,
      ADD CONSTRAINT status_history_source_ck CHECK (source IN ('webhook', 'poll', 'intent', 'backfill', 'operator'));
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE status_history DROP CONSTRAINT status_history_source_ck,
      ADD CONSTRAINT status_history_source_ck CHECK (source IN ('webhook', 'poll', 'intent', 'backfill'))
      NOT VALID;
    ALTER TABLE journal_entries DROP COLUMN IF EXISTS memo;
    ALTER TABLE exceptions DROP COLUMN IF EXISTS decision, DROP COLUMN IF EXISTS previous,
      DROP COLUMN IF EXISTS reopen_reason, DROP COLUMN IF EXISTS reopened_at, DROP COLUMN IF EXISTS fact;
  `.execute(db);
}
