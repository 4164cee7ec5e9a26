/**
 * What the matching run an import started found: new matches by rule, what it left unmatched (bank lines,
 * settlements, report rows), exceptions raised or still true by type, and how many it resolved, as one
 * small JSON object of counts on the import (`MatchSummary`, src/domain/matching.ts). Null when the import
 * brought no new lines (it starts no run) or when no run finished for it (the next run takes its lines).
 * Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE imports ADD COLUMN matching jsonb,
      ADD CONSTRAINT imports_matching_check CHECK (
        matching IS NULL OR (
          new_lines > 0
          AND jsonb_typeof(matching -> 'matched') = 'object'
          AND jsonb_typeof(matching -> 'unmatched') = 'object'
          AND jsonb_typeof(matching -> 'exceptions') = 'object'
          AND jsonb_typeof(matching -> 'resolved') = 'number'))`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE imports DROP CONSTRAINT imports_matching_check, DROP COLUMN matching`.execute(db);
}
