/**
 * An exception's version, as the exception workbook keys its rows and its upload checks them: the id of
 * its last audit event (state changes, assignments, comments, proposals, approvals, reopenings) and a
 * digest of its fact. A sighting of the same fact again (the poller reading the same refused status)
 * counts the exception but leaves its version, so a downloaded workbook stays good while nothing a
 * decision depends on moves.
 */
import { type RawBuilder, sql } from 'kysely';

/** The version of the exceptions row aliased `alias` (text: `<event id>.<8 hex digits>`). */
export function exceptionVersionSql(alias: string): RawBuilder<string> {
  const x = sql.table(alias);
  return sql<string>`(coalesce((SELECT max(v.id) FROM exception_events v WHERE v.exception_id = ${x}.id), 0)::text
    || '.' || left(md5(coalesce(${x}.fact, '')), 8))`;
}
