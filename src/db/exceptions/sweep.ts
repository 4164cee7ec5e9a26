/**
 * The exceptions that need time to pass, raised by a periodic sweep: STUCK, MISSED_NOTIFICATION,
 * UNKNOWN_TRANSACTION and OUTCOME_UNKNOWN (and the resolution of an OUTCOME_UNKNOWN once settled).
 */

import { sql } from 'kysely';
import {
  DEFAULT_EXCEPTION_RULES,
  type ExceptionRules,
  STUCK_STATUSES,
  stuckDeadline,
} from '../../domain/exception-rules.ts';
import type { EntityKind } from '../../domain/statuses.ts';
import { UNANSWERED_INTENT } from '../polling/unanswered-intents.ts';
import type { Db } from '../schema.ts';
import { type ExceptionToRaise, keyOf, raiseExceptions } from './raise.ts';
import { resolveAsPayrecon } from './resolve.ts';

/** The statuses of `kind` that can become STUCK, as SQL literals (literals keep the partial index usable). */
function stuckLiterals(kind: EntityKind) {
  return sql.join(STUCK_STATUSES[kind].map((s) => sql.lit(s)));
}

export interface SweepResult {
  stuck: number;
  missedNotification: number;
  unknownTransaction: number;
  /** Creations still without an answer past the grace (OUTCOME_UNKNOWN raised or still open). */
  outcomeUnknown: number;
  /** OUTCOME_UNKNOWN exceptions resolved because their entity has been observed (or refused). */
  outcomeSettled: number;
}

/**
 * How far back before the grace's end a sweep looks for changes read by polling (MISSED_NOTIFICATION) at
 * least: a day; and further, back to the grace's end as of the last sweep that succeeded (minus an hour
 * for readings committed while it ran), when the caller names it (`SweepOptions.lastSweepAt`), so a
 * sweep that did not run for days still raises what became due meanwhile. It read every mirror and probed
 * the history of each (22.7 s at 1,000,000 payments, `npm run bench:plans`).
 */
const MISSED_LOOKBACK_MS = 24 * 3_600_000;

export interface SweepOptions {
  /** When the last sweep that succeeded started (`lastSucceededStart`): the look-back reaches it. */
  lastSweepAt?: Date | null;
}

/** The exception key of a creation without a provider id: its merchant reference. */
export function outcomeUnknownEntityId(externalRef: string): string {
  return `ref:${externalRef}`;
}

/**
 * Raises the exceptions that need time to pass: STUCK (non-final past its deadline), MISSED_NOTIFICATION
 * (the entity's current status was first seen by polling, as a change, and no webhook about the entity
 * arrived after it within the grace: the first reading of an entity is not a change a webhook announces,
 * and a status left before its webhook was read is announced by the next one) and UNKNOWN_TRANSACTION
 * (observed at the provider, no intent after the grace). A condition still open is not counted again on
 * every sweep; it is re-raised (count + 1) only once it had been resolved.
 *
 * OUTCOME_UNKNOWN: a deposit, card deposit or refund the merchant recorded with an unknown outcome (no
 * provider id: the answer was lost, and the merchant's client did not settle it) that no mirror links or
 * carries its reference after `outcomeUnknownGraceMs`. The API cannot look such a creation up by the
 * merchant's reference, so a person must; the exception is keyed by the reference (`ref:<invoice id>`)
 * and carries the intent's facts. It is resolved by payrecon itself, with a note and an event in its
 * history, at the first sweep after the entity is observed (matched by the reference, or for a refund by
 * its deposit and amount) or the creation is known refused. Cashouts are looked up by the poller instead
 * (`unsettledCashouts`).
 */
export async function sweepExceptions(
  db: Db,
  now: Date,
  rules: ExceptionRules = DEFAULT_EXCEPTION_RULES,
  options: SweepOptions = {},
): Promise<SweepResult> {
  const raised: ExceptionToRaise[] = [];

  const { rows: candidates } = await sql<{
    merchant_account: string;
    entity_kind: EntityKind;
    entity_id: string;
    status: string;
    status_since: Date | null;
    expires_at: Date | null;
  }>`
    SELECT m.merchant_account, m.entity_kind, m.entity_id, m.status, m.status_since, m.expires_at
    -- The open mirrors (mirror_watches_open_ix), of them the unfinished ones.
    FROM mirror_watches w
    JOIN mirrors m ON m.entity_id = w.entity_id AND m.entity_kind = w.entity_kind AND m.merchant_account = w.merchant_account
    WHERE w.watch = 'open' AND ((m.entity_kind = 'deposit' AND m.status IN (${stuckLiterals('deposit')}))
       OR (m.entity_kind = 'cashout' AND m.status IN (${stuckLiterals('cashout')}))
       OR (m.entity_kind = 'refund' AND m.status IN (${stuckLiterals('refund')})))`.execute(db);
  let stuck = 0;
  for (const c of candidates) {
    const deadline = stuckDeadline(
      { kind: c.entity_kind, status: c.status, statusSince: c.status_since, expiresAt: c.expires_at },
      rules,
    );
    if (deadline && deadline.getTime() <= now.getTime()) {
      stuck += 1;
      raised.push({
        type: 'STUCK',
        account: c.merchant_account,
        kind: c.entity_kind,
        entityId: c.entity_id,
        details: {
          status: c.status,
          since: c.status_since?.toISOString() ?? null,
          deadline: deadline.toISOString(),
        },
      });
    }
  }

  // Only the entities with a change read by polling whose grace ended since the last sweep that succeeded
  // (at least in the last MISSED_LOOKBACK_MS) are looked at (the history's BRIN index on recorded_at), not
  // every mirror of the history: a condition becomes true when its grace ends, so each is raised by the
  // first sweep after that; an older one still open is no longer seen again (its last_seen_at stays).
  const missedBefore = new Date(now.getTime() - rules.missedNotificationGraceMs);
  const lastSweepAt = options.lastSweepAt ?? null;
  const missedSince = new Date(
    Math.min(
      missedBefore.getTime() - MISSED_LOOKBACK_MS,
      lastSweepAt === null
        ? Number.POSITIVE_INFINITY
        : lastSweepAt.getTime() - rules.missedNotificationGraceMs - 3_600_000,
    ),
  );
  const { rows: missed } = await sql<{
    merchant_account: string;
    entity_kind: EntityKind;
    entity_id: string;
    to_status: string;
    observed_at: Date;
  }>`
    SELECT m.merchant_account, m.entity_kind, m.entity_id, m.status AS to_status, f.observed_at
    FROM (SELECT DISTINCT c.merchant_account, c.entity_kind, c.entity_id FROM status_history c
      WHERE c.recorded_at > ${missedSince} AND c.recorded_at <= ${missedBefore}
        AND c.source = 'poll' AND c.from_status IS NOT NULL AND c.from_status <> c.to_status) c
    CROSS JOIN LATERAL (SELECT m.merchant_account, m.entity_kind, m.entity_id, m.status FROM mirrors m
      WHERE m.merchant_account = c.merchant_account AND m.entity_kind = c.entity_kind AND m.entity_id = c.entity_id
      OFFSET 0) m
    JOIN LATERAL (
      SELECT h.source, h.observed_at, h.recorded_at, h.from_status FROM status_history h
      WHERE h.merchant_account = m.merchant_account AND h.entity_kind = m.entity_kind
        AND h.entity_id = m.entity_id AND h.to_status = m.status AND NOT h.illegal
      ORDER BY h.observed_at, h.id LIMIT 1) f ON true
    WHERE m.status IS NOT NULL AND f.source = 'poll'
      AND f.from_status IS NOT NULL AND f.from_status <> m.status AND f.recorded_at <= ${missedBefore}
      AND NOT EXISTS (
        SELECT 1 FROM status_history w
        WHERE w.merchant_account = m.merchant_account AND w.entity_kind = m.entity_kind
          AND w.entity_id = m.entity_id AND w.source = 'webhook' AND w.observed_at >= f.observed_at)`.execute(
    db,
  );
  for (const m of missed) {
    raised.push({
      type: 'MISSED_NOTIFICATION',
      account: m.merchant_account,
      kind: m.entity_kind,
      entityId: m.entity_id,
      details: { status: m.to_status, observedAt: m.observed_at.toISOString() },
    });
  }

  const unknownBefore = new Date(now.getTime() - rules.unknownTransactionGraceMs);
  const { rows: unknown } = await sql<{
    merchant_account: string;
    entity_kind: EntityKind;
    entity_id: string;
  }>`
    SELECT merchant_account, entity_kind, entity_id FROM mirrors
    WHERE intent_id IS NULL AND status IS NOT NULL AND first_seen_at <= ${unknownBefore}`.execute(db);
  for (const u of unknown) {
    raised.push({
      type: 'UNKNOWN_TRANSACTION',
      account: u.merchant_account,
      kind: u.entity_kind,
      entityId: u.entity_id,
      details: {},
    });
  }
  const outcomeBefore = new Date(now.getTime() - rules.outcomeUnknownGraceMs);
  const { rows: unsettled } = await sql<{
    intent_id: string;
    merchant_account: string;
    entity_kind: EntityKind;
    operation: string;
    external_ref: string;
    amount: string;
    currency: string;
    created_at: Date;
  }>`
    SELECT i.intent_id, i.merchant_account, i.entity_kind, i.operation, i.external_ref, i.amount::text AS amount,
      i.currency, i.created_at
    FROM intents i
    WHERE i.outcome = 'unknown' AND i.entity_id IS NULL AND i.created_at <= ${outcomeBefore}
      AND i.operation <> 'cashout' AND ${UNANSWERED_INTENT}`.execute(db);
  const stillUnknown = new Set<string>();
  for (const u of unsettled) {
    const entityId = outcomeUnknownEntityId(u.external_ref);
    stillUnknown.add(keyOf('OUTCOME_UNKNOWN', u.merchant_account, u.entity_kind, entityId));
    raised.push({
      type: 'OUTCOME_UNKNOWN',
      account: u.merchant_account,
      kind: u.entity_kind,
      entityId,
      details: {
        intentId: u.intent_id,
        operation: u.operation,
        externalRef: u.external_ref,
        amount: u.amount,
        currency: u.currency,
        createdAt: u.created_at.toISOString(),
      },
      facts: { externalRef: u.external_ref, intentAmount: u.amount, intentCurrency: u.currency },
    });
  }
  await raiseExceptions(db, raised, now, rules, { mode: 'condition' });
  const outcomeSettled = await resolveSettledOutcomes(db, stillUnknown, now);
  return {
    stuck,
    missedNotification: missed.length,
    unknownTransaction: unknown.length,
    outcomeUnknown: unsettled.length,
    outcomeSettled,
  };
}

/**
 * Resolves the open OUTCOME_UNKNOWN exceptions whose creation is no longer unanswered (not in
 * `stillUnknown`), as payrecon, with a note naming what settled it; returns how many.
 */
async function resolveSettledOutcomes(db: Db, stillUnknown: ReadonlySet<string>, now: Date): Promise<number> {
  const { rows: open } = await sql<{
    id: string;
    merchant_account: string;
    entity_kind: EntityKind;
    entity_id: string;
    state: string;
    note: string;
  }>`
    SELECT e.id::text AS id, e.merchant_account, e.entity_kind, e.entity_id, e.state,
      CASE
        WHEN i.outcome = 'declined' THEN 'settled: the provider refused the creation or does not hold it'
        WHEN coalesce(i.entity_id, m.entity_id) IS NOT NULL
          THEN 'settled: the provider''s ' || e.entity_kind || ' ' || coalesce(i.entity_id, m.entity_id) || ' was observed'
        ELSE 'settled: the creation is no longer unanswered'
      END AS note
    FROM exceptions e
    LEFT JOIN intents i ON i.intent_id = e.details->>'intentId'
    LEFT JOIN LATERAL (
      SELECT x.entity_id FROM mirrors x
      WHERE x.intent_id = i.intent_id
        OR (x.external_ref = i.external_ref AND x.merchant_account = i.merchant_account AND x.entity_kind = i.entity_kind)
      LIMIT 1) m ON true
    WHERE e.type = 'OUTCOME_UNKNOWN' AND e.state <> 'resolved'`.execute(db);
  const settled = open.filter(
    (e) => !stillUnknown.has(keyOf('OUTCOME_UNKNOWN', e.merchant_account, e.entity_kind, e.entity_id)),
  );
  if (settled.length === 0) return 0;
  await resolveAsPayrecon(db, settled, now);
  return settled.length;
}
