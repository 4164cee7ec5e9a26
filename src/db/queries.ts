/**
 * Read queries the rest of payrecon needs: balances at any instant, movements between two instants,
 * in-flight cashouts and refunds, entities due for polling, open exceptions by type and age. Amounts come
 * back as bigint minor units.
 */
import { sql } from 'kysely';
import { type Book, PAYOUT_IN_FLIGHT } from '../domain/effects.ts';
import { LEDGER_NUMERIC, type Minor, parseMinor, parseMinorOrNull } from '../domain/money.ts';
import type { Intent } from '../domain/observation.ts';
import type { PollingRules } from '../domain/polling.ts';
import type { EntityKind } from '../domain/statuses.ts';
import { UNANSWERED_INTENT } from './exceptions/sweep.ts';
import { lockMirrorRows } from './ledger/claim.ts';
import { compareRefs } from './ledger/keys.ts';
import { ensureMirrors } from './ledger/write.ts';
import { balanceAsOf, entryPostings } from './ledger-periods.ts';
import type { Db } from './schema.ts';
import { withLedgerTransaction } from './transaction.ts';

/** `PAYOUT_IN_FLIGHT` as SQL literals (constants): a partial index's predicate can be matched only by literals. */
export const IN_FLIGHT_LITERALS = sql.join(PAYOUT_IN_FLIGHT.map((s) => sql.lit(s)));

export interface BalanceRow {
  merchantAccount: string;
  currency: string;
  book: Book;
  account: string;
  balance: Minor;
}

export interface BalanceFilter {
  /** Balances as booked up to and including this instant (default: now). */
  at?: Date;
  merchantAccount?: string;
  book?: Book;
}

/** The running balance of ledger account `a` (the postings' trigger keeps it; no row: no posting yet). */
export const RUNNING_BALANCE = sql`coalesce((SELECT b.balance FROM ledger_balances b
  WHERE b.merchant_account = a.merchant_account AND b.currency = a.currency AND b.book = a.book
    AND b.account = a.name), 0)::text`;

/**
 * Balance of every ledger account (accounts with no postings yet show zero). Now (no `at`, or an instant
 * not in the past) reads the running balances, one row per account kept by the postings' trigger
 * (migration 20261124T1300_running_balances); an earlier instant is the latest daily snapshot at or
 * before it plus what moved since (`balanceAsOf`, src/db/ledger-periods.ts).
 */
export async function balances(db: Db, filter: BalanceFilter = {}): Promise<BalanceRow[]> {
  const at = filter.at !== undefined && filter.at.getTime() < Date.now() ? filter.at : null;
  const asOf = at === null ? null : balanceAsOf(at, true);
  const balance = asOf === null ? RUNNING_BALANCE : asOf.balance;
  const snapshot = asOf === null ? sql`` : asOf.join;
  const { rows } = await sql<{
    merchant_account: string;
    currency: string;
    book: Book;
    name: string;
    balance: string;
  }>`
    SELECT a.merchant_account, a.currency, a.book, a.name, ${balance} AS balance
    FROM ledger_accounts a ${snapshot}
    WHERE (${filter.merchantAccount ?? null}::text IS NULL OR a.merchant_account = ${filter.merchantAccount ?? null})
      AND (${filter.book ?? null}::text IS NULL OR a.book = ${filter.book ?? null})
    ORDER BY a.merchant_account, a.currency, a.book, a.name`.execute(db);
  return rows.map((r) => ({
    merchantAccount: r.merchant_account,
    currency: r.currency,
    book: r.book,
    account: r.name,
    balance: parseMinor(r.balance, LEDGER_NUMERIC),
  }));
}

export interface MovementRow {
  merchantAccount: string;
  currency: string;
  book: Book;
  effect: string;
  /** 1 applications, -1 reversals. */
  direction: 1 | -1;
  account: string;
  amount: Minor;
  entries: number;
}

/**
 * Postings booked in [from, to), grouped by effect, direction and account, with the number of entries:
 * the period's entries by their creation time and each one's postings by its key (`entryPostings`), so
 * the cost follows the period, not the history. (`ledger_movements` has the sums but not the entries.)
 */
export async function movements(
  db: Db,
  from: Date,
  to: Date,
  merchantAccount?: string,
): Promise<MovementRow[]> {
  const { rows } = await sql<{
    merchant_account: string;
    currency: string;
    book: Book;
    effect: string;
    direction: number;
    account: string;
    amount: string;
    entries: number;
  }>`
    SELECT x.merchant_account, x.currency, x.book, e.effect, e.direction, x.account, sum(x.amount)::text AS amount,
      count(DISTINCT e.id)::int AS entries
    FROM ${entryPostings(from, to)}
      AND (${merchantAccount ?? null}::text IS NULL OR e.merchant_account = ${merchantAccount ?? null})
    GROUP BY x.merchant_account, x.currency, x.book, e.effect, e.direction, x.account
    ORDER BY x.merchant_account, x.currency, x.book, e.effect, e.direction DESC, x.account`.execute(db);
  return rows.map((r) => ({
    merchantAccount: r.merchant_account,
    currency: r.currency,
    book: r.book,
    effect: r.effect,
    direction: r.direction === -1 ? -1 : 1,
    account: r.account,
    amount: parseMinor(r.amount, LEDGER_NUMERIC),
    entries: r.entries,
  }));
}

export interface InFlightRow {
  merchantAccount: string;
  kind: 'cashout' | 'refund';
  entityId: string;
  externalRef: string | null;
  status: string;
  statusSince: Date | null;
  currency: string | null;
  amount: Minor | null;
}

/** Cashouts and refunds holding money in `reserved` (PENDING, ON_HOLD, DELIVERED, INCORRECT_DETAILS). */
export async function inFlight(db: Db, merchantAccount?: string): Promise<InFlightRow[]> {
  const { rows } = await sql<{
    merchant_account: string;
    entity_kind: 'cashout' | 'refund';
    entity_id: string;
    external_ref: string | null;
    status: string;
    status_since: Date | null;
    currency: string | null;
    amount: string | null;
  }>`
    SELECT m.merchant_account, m.entity_kind, m.entity_id, m.external_ref, m.status, m.status_since, m.currency,
      m.amount::text
    -- The open cashouts and refunds (mirror_watches_in_flight_ix, migration 20261127T0100_mirror_watches).
    FROM mirror_watches w
    JOIN mirrors m ON m.entity_id = w.entity_id AND m.entity_kind = w.entity_kind AND m.merchant_account = w.merchant_account
    WHERE w.watch = 'open' AND w.entity_kind IN ('cashout', 'refund') AND m.status IN (${IN_FLIGHT_LITERALS})
      AND (${merchantAccount ?? null}::text IS NULL OR w.merchant_account = ${merchantAccount ?? null})
    ORDER BY m.status_since, m.entity_id`.execute(db);
  return rows.map((r) => ({
    merchantAccount: r.merchant_account,
    kind: r.entity_kind,
    entityId: r.entity_id,
    externalRef: r.external_ref,
    status: r.status,
    statusSince: r.status_since,
    currency: r.currency,
    amount: parseMinorOrNull(r.amount, LEDGER_NUMERIC),
  }));
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
 * every tick; a successful poll reschedules through `applyObservations`.
 */
export async function deferPolls(
  db: Db,
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
  await db.transaction().execute(async (trx) => {
    await lockMirrorRows(trx, sorted);
    await sql`
      UPDATE poll_schedule SET next_poll_at = ${until}
      WHERE (merchant_account, entity_kind, entity_id) IN (
        SELECT * FROM unnest(${accounts}::text[], ${kinds}::text[], ${ids}::text[]))`.execute(trx);
  });
}

/**
 * Hands entities to the poller: each one's next poll becomes `now` unless it is due sooner already, and
 * an entity the ledger does not know yet gets its mirror row (and its merchant account) with that poll.
 * The status fetcher calls it for notifications whose status the provider would not give on the batch's
 * last try: a provider that stops answering for a while is not a poison message, and the poller reads
 * the status as soon as the provider answers again, with its own back-off, instead of the notification
 * waiting in the DLQ for someone to replay it. Final entities (no poll planned) are read once more.
 */
export async function pollNow(
  db: Db,
  entities: readonly { account: string; kind: EntityKind; entityId: string; externalRef: string | null }[],
  now: Date,
): Promise<void> {
  if (entities.length === 0) return;
  const sorted = [...entities].sort(compareRefs);
  // Retried on a deadlock: a ledger batch claims (locks) the rows of the entities it knew and then inserts
  // the rows of those new to it (`writeStatement`), so it can wait for a row this transaction created while this one
  // waits for a lock the batch holds; one of the two is chosen to fail, and both run again.
  await withLedgerTransaction(db, async (trx) => {
    await ensureMirrors(
      trx,
      sorted.map((e) => ({ ...e, nextPollAt: now })),
      { withMerchantAccounts: true },
    );
    // In the ledger's lock order, as `deferPolls` does; then the schedule only (the mirror rows stay).
    await lockMirrorRows(trx, sorted);
    await sql`
      INSERT INTO poll_schedule (merchant_account, entity_kind, entity_id, next_poll_at)
      SELECT DISTINCT a, k, i, ${now}::timestamptz
      FROM unnest(${sorted.map((e) => e.account)}::text[], ${sorted.map((e) => e.kind)}::text[],
        ${sorted.map((e) => e.entityId)}::text[]) AS v(a, k, i)
      ON CONFLICT (merchant_account, entity_kind, entity_id) DO UPDATE SET next_poll_at = excluded.next_poll_at
        WHERE poll_schedule.next_poll_at > excluded.next_poll_at`.execute(trx);
  });
}
/** Open exceptions counted per type and severity. */
export async function openExceptionCounts(
  db: Db,
): Promise<{ type: string; severity: string; count: number }[]> {
  const { rows } = await sql<{ type: string; severity: string; count: number }>`
    SELECT type, severity, count(*)::int AS count FROM exceptions WHERE state <> 'resolved'
    GROUP BY type, severity ORDER BY type, severity`.execute(db);
  return rows;
}

/** Resolves an exception with a note and who did it. */
export async function resolveException(
  db: Db,
  id: string,
  note: string,
  by: string,
  now = new Date(),
): Promise<void> {
  await db
    .updateTable('exceptions')
    .set({ state: 'resolved', resolution_note: note, resolved_by: by, resolved_at: now, updated_at: now })
    .where('id', '=', id)
    .execute();
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

export interface InFlightCount {
  merchantAccount: string;
  currency: string;
  /** Refunds of test deposits carry the test flag and are in flight in the test book. */
  test: boolean;
  cashouts: number;
  refunds: number;
}

/**
 * Cashouts and refunds in flight per merchant account, currency and test flag (groups with some in flight).
 * Read from the side table's index of open cashouts and refunds alone (index-only: migration
 * 20261127T0100_mirror_watches): an open cashout or refund is one in flight, no more, no less
 * (`mirror_watch`; test/db/mirror-watch-domain.test.ts holds it to the domain's `PAYOUT_IN_FLIGHT`).
 */
export async function inFlightCounts(db: Db): Promise<InFlightCount[]> {
  const { rows } = await sql<{
    merchant_account: string;
    currency: string;
    test: boolean;
    cashouts: number;
    refunds: number;
  }>`
    SELECT merchant_account, currency, test,
           count(*) FILTER (WHERE entity_kind = 'cashout')::int AS cashouts,
           count(*) FILTER (WHERE entity_kind = 'refund')::int AS refunds
      FROM mirror_watches
     WHERE watch = 'open' AND entity_kind IN ('cashout', 'refund') AND currency IS NOT NULL
     GROUP BY 1, 2, 3`.execute(db);
  return rows.map((r) => ({
    merchantAccount: r.merchant_account,
    currency: r.currency,
    test: r.test,
    cashouts: r.cashouts,
    refunds: r.refunds,
  }));
}

/**
 * Cashouts the merchant recorded with an unknown outcome before `before` that are still unanswered (no
 * cashout id, no mirror linked or carrying the external_id), oldest first: the poller looks them up by
 * external_id. Served by `intents_unknown_outcome_ix`.
 */
export async function unsettledCashouts(db: Db, before: Date, limit: number): Promise<Intent[]> {
  const { rows } = await sql<{
    intent_id: string;
    merchant_account: string;
    external_ref: string;
    currency: string;
    amount: string;
    expected_fee: string | null;
    created_at: Date;
    request: Record<string, unknown>;
    response: Record<string, unknown> | null;
  }>`
    SELECT i.intent_id, i.merchant_account, i.external_ref, i.currency, i.amount::text AS amount,
      i.expected_fee::text AS expected_fee, i.created_at, i.request, i.response
    FROM intents i
    WHERE i.outcome = 'unknown' AND i.entity_id IS NULL AND i.created_at <= ${before} AND i.operation = 'cashout'
      AND ${UNANSWERED_INTENT}
    ORDER BY i.created_at, i.intent_id
    LIMIT ${limit}`.execute(db);
  return rows.map((r) => ({
    intentId: r.intent_id,
    operation: 'cashout',
    account: r.merchant_account,
    externalRef: r.external_ref,
    entityId: null,
    currency: r.currency,
    amount: parseMinor(r.amount),
    expectedFee: parseMinorOrNull(r.expected_fee),
    test: false,
    crypto: false,
    feeOnPayer: false,
    parentDepositId: null,
    outcome: 'unknown',
    createdAt: r.created_at,
    request: r.request,
    response: r.response,
  }));
}
