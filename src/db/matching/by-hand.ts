/**
 * A match by hand and an unmatch as a person does them (the page, the API, `payrecon match`): the
 * matching service's `manualMatch` / `unmatch` (src/db/matching/service.ts), then a line in the audit
 * trail of each exception the match resolved or had resolved, naming the person and their note (the
 * resolution itself is payrecon's, naming the match). The match row keeps who and why in any case.
 *
 * Each is one ledger transaction: the match (or its end), its cash leg, the exceptions it resolves and the
 * person's note on them are written together or not at all, so a failure after the match leaves nothing.
 */
import { sql } from 'kysely';
import type { Db } from '../schema.ts';
import { withLedgerTransaction } from '../transaction.ts';
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

export function matchByHand(db: Db, input: ManualMatchInput): Promise<string> {
  const now = input.now ?? new Date();
  return withLedgerTransaction(db, async (tx) => {
    const id = await manualMatch(tx, { ...input, now });
    await commentOnResolved(
      tx,
      id,
      input.by.trim(),
      `matched by hand (match ${id}): ${input.note.trim()}`,
      now,
    );
    return id;
  });
}

export function unmatchByHand(
  db: Db,
  input: { matchId: string; by: string; note: string; now?: Date },
): Promise<Awaited<ReturnType<typeof unmatch>>> {
  const now = input.now ?? new Date();
  return withLedgerTransaction(db, async (tx) => {
    const ended = await unmatch(tx, { ...input, now });
    await commentOnResolved(
      tx,
      ended.id,
      input.by.trim(),
      `match ${ended.id} (${ended.rule}) ended: ${input.note.trim()}; the next matching run raises this again`,
      now,
    );
    return ended;
  });
}
