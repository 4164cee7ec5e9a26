/**
 * Writing matches: a list of new matches inserted at once (ids drawn from the sequence first, then one
 * INSERT of the matches and one of their members, each from arrays), and the ending of a match (unmatch).
 */
import { sql } from 'kysely';
import type { MatchPair, MatchSide } from '../../domain/matching.ts';
import { binaryColumns } from '../ledger/binary-array.ts';
import type { Db } from '../schema.ts';

export interface MatchToWrite {
  pair: MatchPair;
  rule: string;
  difference: bigint;
  createdBy: string;
  note: string | null;
  members: { side: MatchSide; identity: string }[];
}

/** Inserts the matches; returns their ids in the order given. */
export async function insertMatches(db: Db, matches: readonly MatchToWrite[], now: Date): Promise<string[]> {
  if (matches.length === 0) return [];
  const { rows: ids } = await sql<{ id: string }>`
    SELECT nextval('matches_id_seq')::text AS id FROM generate_series(1, ${matches.length})`.execute(db);
  const id = ids.map((r) => r.id);
  const CHUNK = 50_000;
  for (let i = 0; i < matches.length; i += CHUNK) {
    const rows = matches.slice(i, i + CHUNK).map((m, k) => ({ ...m, id: id[i + k]! }));
    // Column arrays in binary (src/db/ledger/binary-array.ts): no text to escape, nor for the server to parse.
    const [ids, pairs, rules, differences, createdBy, notes] = binaryColumns(rows, [
      ['text', (m) => m.id],
      ['text', (m) => m.pair],
      ['text', (m) => m.rule],
      ['numeric', (m) => m.difference],
      ['text', (m) => m.createdBy],
      ['text', (m) => m.note],
    ]);
    await sql`
      INSERT INTO matches (id, pair, rule, difference, created_at, created_by, note)
      SELECT v.id::bigint, v.pair, v.rule, v.difference, ${now}::timestamptz, v.created_by, v.note
      FROM unnest(${ids}::text[], ${pairs}::text[], ${rules}::text[], ${differences}::numeric[],
        ${createdBy}::text[], ${notes}::text[]) AS v(id, pair, rule, difference, created_by, note)`.execute(
      db,
    );
    const members = rows.flatMap((m) => m.members.map((member) => ({ id: m.id, ...member })));
    const [matchIds, sides, identities] = binaryColumns(members, [
      ['text', (x) => x.id],
      ['text', (x) => x.side],
      ['text', (x) => x.identity],
    ]);
    await sql`
      INSERT INTO match_members (match_id, side, identity)
      SELECT v.match_id::bigint, v.side, v.identity
      FROM unnest(${matchIds}::text[], ${sides}::text[], ${identities}::text[]) AS v(match_id, side, identity)`.execute(
      db,
    );
  }
  return id;
}

export interface EndedMatch {
  id: string;
  pair: MatchPair;
  rule: string;
  members: { side: MatchSide; identity: string }[];
}

/** Ends a live match (unmatch): who, when, why; its members leave it. Null when no live match has the id. */
export async function endMatch(
  db: Db,
  id: string,
  by: string,
  note: string,
  now: Date,
): Promise<EndedMatch | null> {
  const ended = await db
    .updateTable('matches')
    .set({ ended_at: now, ended_by: by, end_note: note })
    .where('id', '=', id)
    .where('ended_at', 'is', null)
    .returning(['id', 'pair', 'rule'])
    .executeTakeFirst();
  if (!ended) return null;
  const members = await db
    .updateTable('match_members')
    .set({ live: false })
    .where('match_id', '=', id)
    .returning(['side', 'identity'])
    .execute();
  return { id: ended.id, pair: ended.pair, rule: ended.rule, members };
}
