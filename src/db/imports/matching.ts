/**
 * The matching run an import started, kept on the import (`imports.matching`): new matches by rule, what
 * the run left unmatched, exceptions raised or still true by type, and how many it resolved. Written by
 * the run itself, in its transaction (src/db/matching/service.ts), so a run that did not finish leaves the
 * import without a result, its lines to the next run.
 */
import type { MatchSummary } from '../../domain/matching.ts';
import type { Db } from '../schema.ts';

export async function recordImportMatching(db: Db, importId: string, summary: MatchSummary): Promise<void> {
  const { matched, unmatched, exceptions, resolved } = summary;
  await db
    .updateTable('imports')
    .set({ matching: JSON.stringify({ matched, unmatched, exceptions, resolved }) })
    .where('id', '=', importId)
    .execute();
}
