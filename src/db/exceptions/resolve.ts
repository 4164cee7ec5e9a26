/**
 * Resolving exceptions as payrecon: each named exception, still in the state it was read in, is resolved
 * with its note, and the change goes to its audit trail in the same statement. What the sweeps and the
 * matching's checks call once the condition an exception stood for no longer holds.
 */
import { sql } from 'kysely';
import type { Db } from '../schema.ts';

export interface PayreconResolution {
  id: string;
  /** The state it was read in: an exception moved on since is left alone. */
  state: string;
  note: string;
}

/** Resolves the exceptions as payrecon with their notes; returns how many were resolved. */
export async function resolveAsPayrecon(
  db: Db,
  resolutions: readonly PayreconResolution[],
  now: Date,
): Promise<number> {
  if (resolutions.length === 0) return 0;
  const { rows } = await sql<{ id: string }>`
    WITH v AS (
      SELECT * FROM unnest(${resolutions.map((r) => r.id)}::text[], ${resolutions.map((r) => r.note)}::text[],
        ${resolutions.map((r) => r.state)}::text[]) AS v(id, note, state)),
    done AS (
      UPDATE exceptions e SET state = 'resolved', resolved_by = 'payrecon', resolved_at = ${now}::timestamptz,
        resolution_note = v.note, updated_at = now()
      FROM v WHERE e.id = v.id::bigint AND e.state = v.state
      RETURNING e.id, v.state, v.note),
    events AS (
      INSERT INTO exception_events (exception_id, at, actor, action, from_state, to_state, note)
      SELECT id, ${now}::timestamptz, 'payrecon', 'state', state, 'resolved', note FROM done)
    SELECT id::text AS id FROM done`.execute(db);
  return rows.length;
}
