/**
 * Changes to the exception queue, each in one transaction with its audit events: one exception's state,
 * assignee or comment, or the same state change on many.
 */
import type { Db } from '../schema.ts';
import { applyChange, type BulkResult, type QueueChange, type QueueChangeResult } from './queue.ts';

/**
 * Changes an exception's state or assignee, or comments on it, and appends the audit event in the same
 * transaction (the row is locked, so two people changing it at once are ordered). Moving to
 * `acknowledged` or `resolved` also records who, when and the note in the row's own columns (the page
 * and the workbooks read them); leaving `resolved` clears the resolution time as a reopen by a raise does.
 */
export async function changeQueueItem(
  db: Db,
  id: string,
  change: QueueChange,
  actor: string,
  now: Date,
): Promise<QueueChangeResult> {
  if (!/^\d{1,18}$/.test(id)) return 'not_found';
  return db.transaction().execute((trx) => applyChange(trx, id, change, actor, now));
}

/**
 * The same state change with one note on many exceptions, all or nothing in one transaction (rows locked
 * in id order, so two bulk changes never deadlock); each changed exception gets its own audit event.
 * An ILLEGAL_TRANSITION or FACTS_CHANGED to resolve (it takes a decision) is left as it is and counted
 * unchanged.
 */
export async function bulkChangeState(
  db: Db,
  ids: readonly string[],
  change: Extract<QueueChange, { kind: 'state' }>,
  actor: string,
  now: Date,
): Promise<BulkResult> {
  const result: BulkResult = { changed: [], unchanged: [], notFound: [] };
  const valid = [...new Set(ids)].filter((id) => {
    if (/^\d{1,18}$/.test(id)) return true;
    result.notFound.push(id);
    return false;
  });
  valid.sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1));
  await db.transaction().execute(async (trx) => {
    for (const id of valid) {
      const r = await applyChange(trx, id, change, actor, now);
      (r === 'changed' ? result.changed : r === 'not_found' ? result.notFound : result.unchanged).push(id);
    }
  });
  return result;
}
