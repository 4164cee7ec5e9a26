/**
 * The poll schedule (`poll_schedule`): which entities are due, pushing polls back after a failure,
 * making polls due now, the late-move watch, and the entities a backfill reads again. Every writer
 * locks the mirror rows first, in the ledger's order, so it queues behind a batch that reschedules the
 * same entity. Plain functions: the caller owns the transaction (src/db/polling/service.ts).
 */
import { sql, type Transaction } from 'kysely';
import type { PollingRules } from '../../domain/polling.ts';
import type { EntityKind } from '../../domain/statuses.ts';
import { lockMirrorRows } from '../ledger/claim.ts';
import { compareRefs } from '../ledger/keys.ts';
import { ensureMirrors } from '../ledger/write.ts';
import type { Database, Db } from '../schema.ts';

/** An entity handed to the poller (`schedulePollsNow`). */
export interface PollNowEntity {
  account: string;
  kind: EntityKind;
  entityId: string;
  externalRef: string | null;
}

export interface DueEntity {
  merchantAccount: string;
  kind: EntityKind;
  entityId: string;
  externalRef: string | null;
  status: string | null;
  nextPollAt: Date;
  pollAttempts: number;
}

/**
 * Entities whose next poll is due at `now` (`poll_schedule`), most overdue first: the first `limit` due
 * rows by the schedule's index (on the hour of the next poll, `due_from`, never later than it: the index
 * bounds the scan to the hours up to `now`, and ordering by the hour first is the order by `next_poll_at`),
 * then each one's mirror by its key (LATERAL ... OFFSET 0, so a large due set never turns into a hash
 * join over every mirror).
 */
export async function entitiesDueForPolling(db: Db, now: Date, limit: number): Promise<DueEntity[]> {
  const { rows } = await sql<{
    merchant_account: string;
    entity_kind: EntityKind;
    entity_id: string;
    external_ref: string | null;
    status: string | null;
    next_poll_at: Date;
    poll_attempts: number;
  }>`
    SELECT s.merchant_account, s.entity_kind, s.entity_id, m.external_ref, m.status, s.next_poll_at, m.poll_attempts
    FROM (SELECT * FROM poll_schedule WHERE due_from <= ${now} AND next_poll_at <= ${now}
      ORDER BY due_from, next_poll_at, entity_id LIMIT ${limit}) s
    CROSS JOIN LATERAL (
      SELECT m.external_ref, m.status, m.poll_attempts FROM mirrors m
      WHERE m.merchant_account = s.merchant_account AND m.entity_kind = s.entity_kind AND m.entity_id = s.entity_id
      OFFSET 0) m
    ORDER BY s.next_poll_at, s.entity_id`.execute(db);
  return rows.map((r) => ({
    merchantAccount: r.merchant_account,
    kind: r.entity_kind,
    entityId: r.entity_id,
    externalRef: r.external_ref,
    status: r.status,
    nextPollAt: r.next_poll_at,
    pollAttempts: r.poll_attempts,
  }));
}

/**
 * Pushes the next poll of entities whose poll failed (provider unreachable) so they are not retried on
 * every tick; a successful poll reschedules through `applyObservations`. Inside the caller's transaction
 * (`deferPolls`, src/db/polling/service.ts).
 */
export async function postponePolls(
  trx: Transaction<Database>,
  entities: readonly { merchantAccount: string; kind: EntityKind; entityId: string }[],
  until: Date,
): Promise<void> {
  if (entities.length === 0) return;
  // Rows locked one at a time in the ledger's order (`compareRefs`), as a batch's claim locks them, before the
  // update: a plain multi-row UPDATE locks in scan order and deadlocked with the reconciler's batches (found
  // by the chaos soak).
  const sorted = entities
    .map((e) => ({ account: e.merchantAccount, kind: e.kind, entityId: e.entityId }))
    .sort(compareRefs);
  const accounts = sorted.map((e) => e.account);
  const kinds = sorted.map((e) => e.kind);
  const ids = sorted.map((e) => e.entityId);
  // The mirror rows stay as they are (their lock only orders this against the ledger, which keeps the
  // schedule under the same lock); an entity no longer scheduled (no `poll_schedule` row) stays so.
  await lockMirrorRows(trx, sorted);
  await sql`
    UPDATE poll_schedule SET next_poll_at = ${until}
    WHERE (merchant_account, entity_kind, entity_id) IN (
      SELECT * FROM unnest(${accounts}::text[], ${kinds}::text[], ${ids}::text[]))`.execute(trx);
}

/**
 * Makes each entity's next poll `now` unless it is due sooner already, and gives an entity the ledger
 * does not know yet its mirror row (and its merchant account) with that poll. Inside the caller's
 * transaction (`pollNow`, src/db/polling/service.ts, which says why).
 */
export async function schedulePollsNow(
  trx: Transaction<Database>,
  entities: readonly PollNowEntity[],
  now: Date,
): Promise<void> {
  if (entities.length === 0) return;
  const sorted = [...entities].sort(compareRefs);
  await ensureMirrors(
    trx,
    sorted.map((e) => ({ ...e, nextPollAt: now })),
    { withMerchantAccounts: true },
  );
  // In the ledger's lock order, as `postponePolls` does; then the schedule only (the mirror rows stay).
  await lockMirrorRows(trx, sorted);
  await sql`
    INSERT INTO poll_schedule (merchant_account, entity_kind, entity_id, next_poll_at)
    SELECT DISTINCT a, k, i, ${now}::timestamptz
    FROM unnest(${sorted.map((e) => e.account)}::text[], ${sorted.map((e) => e.kind)}::text[],
      ${sorted.map((e) => e.entityId)}::text[]) AS v(a, k, i)
    ON CONFLICT (merchant_account, entity_kind, entity_id) DO UPDATE SET next_poll_at = excluded.next_poll_at
      WHERE poll_schedule.next_poll_at > excluded.next_poll_at`.execute(trx);
}

/**
 * The late-move watch: every COMPLETED cashout and refund still inside the late-rejection window, and
 * every CANCELLED deposit still inside the late-completion window (the provider may complete it by hand),
 * whose next poll is further away than `completedRecheckMs` (or unset) is made due now, so the poller
 * reads it again and a late rejection or completion whose notification was lost is seen. Returns how
 * many were made due.
 */
export async function scheduleLateRejectionChecks(
  db: Db,
  now: Date,
  rules: Pick<PollingRules, 'lateRejectionWindowMs' | 'lateCompletionWindowMs' | 'completedRecheckMs'>,
): Promise<number> {
  const payoutsSince = new Date(now.getTime() - rules.lateRejectionWindowMs);
  const depositsSince = new Date(now.getTime() - rules.lateCompletionWindowMs);
  const later = new Date(now.getTime() + rules.completedRecheckMs);
  // Only the schedule is written; the mirror rows are locked first, in key order (as the ledger locks
  // them), so that this queues behind a batch that reschedules the same entity instead of racing it.
  // `watch` and `watch_at` are generated from the status (migration 20261126T1100_mirror_watch): a
  // completed cashout or refund and its completed_at, a cancelled deposit and its status_since; looked up
  // in `mirror_watches` (migration 20261127T0100_mirror_watches), sorted by key, and each mirror row then
  // found by one key probe and locked (a LATERAL subquery, OFFSET 0: joined directly, the planner hashed a
  // scan of every mirror, 0.7 s at 200,000 payments), its set checked again on the locked version.
  const result = await sql`
    WITH due AS (
      SELECT m.merchant_account, m.entity_kind, m.entity_id FROM (
        SELECT w.merchant_account, w.entity_kind, w.entity_id, w.watch FROM mirror_watches w
        WHERE ((w.watch = 'completed' AND w.watch_at >= ${payoutsSince})
            OR (w.watch = 'cancelled' AND w.watch_at >= ${depositsSince}))
          AND NOT EXISTS (SELECT 1 FROM poll_schedule s WHERE s.merchant_account = w.merchant_account
            AND s.entity_kind = w.entity_kind AND s.entity_id = w.entity_id AND s.next_poll_at <= ${later})
        ORDER BY w.merchant_account COLLATE "C", w.entity_kind COLLATE "C", w.entity_id COLLATE "C") w
      CROSS JOIN LATERAL (
        SELECT x.merchant_account, x.entity_kind, x.entity_id FROM mirrors x
        WHERE x.entity_id = w.entity_id AND x.entity_kind = w.entity_kind AND x.merchant_account = w.merchant_account
          AND x.watch = w.watch
        OFFSET 0
        FOR UPDATE OF x) m
    )
    INSERT INTO poll_schedule (merchant_account, entity_kind, entity_id, next_poll_at)
    SELECT merchant_account, entity_kind, entity_id, ${now}::timestamptz FROM due
    ON CONFLICT (merchant_account, entity_kind, entity_id) DO UPDATE SET next_poll_at = excluded.next_poll_at
      WHERE poll_schedule.next_poll_at > ${later}::timestamptz`.execute(db);
  return Number(result.numAffectedRows ?? 0n);
}

export interface SeenEntity {
  account: string;
  kind: EntityKind;
  entityId: string;
  externalRef: string | null;
}

/**
 * Entities first seen in [from, to) (by `first_seen_at`, else the mirror's creation), oldest first.
 */
export async function entitiesFirstSeenBetween(
  db: Db,
  from: Date,
  to: Date,
  account?: string,
): Promise<SeenEntity[]> {
  const { rows } = await sql<{
    merchant_account: string;
    entity_kind: EntityKind;
    entity_id: string;
    external_ref: string | null;
  }>`
    SELECT merchant_account, entity_kind, entity_id, external_ref FROM mirrors
    WHERE coalesce(first_seen_at, created_at) >= ${from} AND coalesce(first_seen_at, created_at) < ${to}
      AND (${account ?? null}::text IS NULL OR merchant_account = ${account ?? null})
    ORDER BY coalesce(first_seen_at, created_at), entity_kind, entity_id`.execute(db);
  return rows.map((r) => ({
    account: r.merchant_account,
    kind: r.entity_kind,
    entityId: r.entity_id,
    externalRef: r.external_ref,
  }));
}
