/**
 * The poll schedule's writes that stand alone, each in its own transaction: the status fetcher hands
 * entities to the poller, and the poller pushes back the polls that failed.
 */
import type { EntityKind } from '../../domain/statuses.ts';
import type { Db } from '../schema.ts';
import { withLedgerTransaction } from '../transaction.ts';
import { type PollNowEntity, postponePolls, schedulePollsNow } from './schedule.ts';

/** Pushes the next poll of entities whose poll failed to `until` (`postponePolls`). */
export async function deferPolls(
  db: Db,
  entities: readonly { merchantAccount: string; kind: EntityKind; entityId: string }[],
  until: Date,
): Promise<void> {
  if (entities.length === 0) return;
  await db.transaction().execute((trx) => postponePolls(trx, entities, until));
}

/**
 * Hands entities to the poller (`schedulePollsNow`). The status fetcher calls it for notifications whose
 * status the provider would not give on the batch's last try: a provider that stops answering for a
 * while is not a poison message, and the poller reads the status as soon as the provider answers again,
 * with its own back-off, instead of the notification waiting in the DLQ for someone to replay it. Final
 * entities (no poll planned) are read once more.
 */
export async function pollNow(db: Db, entities: readonly PollNowEntity[], now: Date): Promise<void> {
  if (entities.length === 0) return;
  // Retried on a deadlock: a ledger batch claims (locks) the rows of the entities it knew and then inserts
  // the rows of those new to it, so it can wait for a row this transaction created while this one waits
  // for a lock the batch holds; one of the two is chosen to fail, and both run again.
  await withLedgerTransaction(db, (trx) => schedulePollsNow(trx, entities, now));
}
