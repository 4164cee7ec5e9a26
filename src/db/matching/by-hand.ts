/**
 * A match by hand and an unmatch as a person does them (the page, the API, `payrecon match`): the
 * matching service's `manualMatch` / `unmatch` (src/db/matching/service.ts), then a line in the audit
 * trail of each exception the match resolved or had resolved, naming the person and their note (the
 * resolution itself is payrecon's, naming the match). The match row keeps who and why in any case.
 */
import { sql } from 'kysely';
import type { Db } from '../schema.ts';
import { type ManualMatchInput, manualMatch, unmatch } from './service.ts';

/** Comments, as `by`, on the exceptions resolved by match `matchId`. */
async function commentOnResolved(db: Db, matchId: string, by: string, note: string, at: Date) {
  await sql`
    INSERT INTO exception_events (exception_id, at, actor, action, note)
    SELECT e.id, ${at}::timestamptz, ${by}, 'comment', ${note} FROM exceptions e
    WHERE e.resolution_note LIKE ${`matched: match ${matchId} (%`}
      AND e.type IN ('BANK_LINE_UNMATCHED', 'SETTLEMENT_NOT_RECEIVED', 'PROVIDER_REPORT_UNMATCHED',
        'LEDGER_NOT_IN_REPORT')`.execute(db);
}

export async function matchByHand(db: Db, input: ManualMatchInput): Promise<string> {
  const now = input.now ?? new Date();
  const id = await manualMatch(db, { ...input, now });
  await commentOnResolved(
    db,
    id,
    input.by.trim(),
    `matched by hand (match ${id}): ${input.note.trim()}`,
    now,
  );
  return id;
}

export async function unmatchByHand(
  db: Db,
  input: { matchId: string; by: string; note: string; now?: Date },
): Promise<Awaited<ReturnType<typeof unmatch>>> {
  const now = input.now ?? new Date();
  const ended = await unmatch(db, { ...input, now });
  await commentOnResolved(
    db,
    ended.id,
    input.by.trim(),
    `match ${ended.id} (${ended.rule}) ended: ${input.note.trim()}; the next matching run raises this again`,
    now,
  );
  return ended;
}
