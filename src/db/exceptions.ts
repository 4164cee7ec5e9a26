/**
 * Writing exceptions and their alerts. One row per (type, merchant account, entity kind, entity id):
 * raising again bumps `count` and `last_seen_at` (and reopens a resolved row). An exception alerts when
 * it opens: its first raise, or a raise after it was resolved. Raising an open or acknowledged exception
 * again (the poller reading the CANCELLED its webhook already brought) counts it and alerts nobody. Alerts
 * at or above the configured severity go to the outbox in the same transaction, under a deterministic
 * alert id, so a replay or a retry never alerts twice (a late rejection is alerted exactly once).
 */
import { sql } from 'kysely';
import {
  alertId,
  DEFAULT_EXCEPTION_RULES,
  type ExceptionRules,
  type ExceptionType,
  shouldAlert,
  stuckDeadline,
} from '../domain/exception-rules.ts';
import type { EntityKind } from '../domain/statuses.ts';
import type { EntityRef } from './ledger-repository.ts';
import type { Db } from './schema.ts';

export const ALERT_TOPIC = 'recon.alert.raised.v1';

export interface ExceptionToRaise extends EntityRef {
  type: ExceptionType;
  details: Record<string, unknown>;
}

export interface RaiseOptions {
  /** `increment` (default) bumps count on every raise; `condition` bumps it only when the row was resolved. */
  mode?: 'increment' | 'condition';
}

type Written = {
  type: ExceptionType;
  merchant_account: string;
  entity_kind: EntityKind;
  entity_id: string;
  count: number;
  severity: string;
};

const keyOf = (type: string, account: string, kind: string, entityId: string) =>
  `${type}\u0000${account}\u0000${kind}\u0000${entityId}`;

/**
 * Upserts exceptions and queues the alerts of those that opened (created, or re-raised after being
 * resolved). Returns how many rows were created or raised again.
 */
export async function raiseExceptions(
  db: Db,
  raised: readonly ExceptionToRaise[],
  now: Date,
  rules: ExceptionRules = DEFAULT_EXCEPTION_RULES,
  options: RaiseOptions = {},
): Promise<number> {
  if (raised.length === 0) return 0;
  const unique = new Map<string, ExceptionToRaise>();
  for (const r of raised) unique.set(keyOf(r.type, r.account, r.kind, r.entityId), r);
  const rows = [...unique.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, r]) => r);
  const col = <T>(f: (r: ExceptionToRaise) => T, of: readonly ExceptionToRaise[] = rows) => of.map(f);
  // Inserts the new rows and reopens the resolved ones; the WHERE leaves every other existing row as it
  // was, but locked (ON CONFLICT locks each conflicting row), so what this returns is exactly what opened.
  // Counting every sighting as a new alert (the alert id carries the count) wrote each AMOUNT_MISMATCH of
  // the chaos soak twice: once for its webhook, once for the poll that read the same CANCELLED.
  const { rows: opened } = await sql<Written>`
    INSERT INTO exceptions AS e (type, merchant_account, entity_kind, entity_id, severity, first_seen_at, last_seen_at,
      details)
    SELECT v.type, v.merchant_account, v.entity_kind, v.entity_id, v.severity, ${now}::timestamptz,
      ${now}::timestamptz, v.details
    FROM unnest(${col((r) => r.type)}::text[], ${col((r) => r.account)}::text[], ${col((r) => r.kind)}::text[],
      ${col((r) => r.entityId)}::text[], ${col((r) => rules.severity[r.type])}::text[],
      ${col((r) => JSON.stringify(r.details))}::jsonb[])
      AS v(type, merchant_account, entity_kind, entity_id, severity, details)
    ON CONFLICT (type, merchant_account, entity_kind, entity_id) DO UPDATE SET
      count = e.count + 1,
      last_seen_at = excluded.last_seen_at,
      details = excluded.details,
      state = 'open',
      resolved_at = NULL,
      updated_at = now()
    WHERE e.state = 'resolved'
    RETURNING type, merchant_account, entity_kind, entity_id, count, severity`.execute(db);
  const openedKeys = new Set(
    opened.map((w) => keyOf(w.type, w.merchant_account, w.entity_kind, w.entity_id)),
  );
  // The rest are open or acknowledged and already locked: `increment` counts the sighting, `condition`
  // (a sweep finding the condition still true) only says when it was last seen. Each row is found by one
  // probe of the unique key and updated through its ctid (stable: this transaction holds the row lock), so
  // the cost does not grow with the table whatever its statistics say (as in ledger-repository.ts).
  const again = rows.filter((r) => !openedKeys.has(keyOf(r.type, r.account, r.kind, r.entityId)));
  let raisedAgain = 0;
  if (again.length > 0) {
    const updated = await sql`
      UPDATE exceptions AS e SET
        count = CASE WHEN ${options.mode === 'condition'} THEN e.count ELSE e.count + 1 END,
        last_seen_at = ${now}::timestamptz,
        details = v.details,
        updated_at = now()
      FROM unnest(${col((r) => r.type, again)}::text[], ${col((r) => r.account, again)}::text[],
        ${col((r) => r.kind, again)}::text[], ${col((r) => r.entityId, again)}::text[],
        ${col((r) => JSON.stringify(r.details), again)}::jsonb[])
        AS v(type, merchant_account, entity_kind, entity_id, details)
        CROSS JOIN LATERAL (
          SELECT ctid AS tid FROM exceptions x WHERE x.type = v.type AND x.merchant_account = v.merchant_account
            AND x.entity_kind = v.entity_kind AND x.entity_id = v.entity_id OFFSET 0) t
      WHERE e.ctid = t.tid`.execute(db);
    raisedAgain = Number(updated.numAffectedRows ?? 0n);
  }
  const alerts = opened
    .filter((w) => shouldAlert(w.type, rules))
    .map((w) => {
      const id = alertId(w.type, w.entity_kind, w.merchant_account, w.entity_id, w.count);
      const src = unique.get(keyOf(w.type, w.merchant_account, w.entity_kind, w.entity_id));
      return {
        id,
        key: `${w.entity_kind}:${w.entity_id}`,
        payload: JSON.stringify({
          alertId: id,
          type: w.type,
          severity: w.severity,
          account: w.merchant_account,
          kind: w.entity_kind,
          entityId: w.entity_id,
          count: w.count,
          raisedAt: now.toISOString(),
          details: src?.details ?? {},
        }),
      };
    });
  if (alerts.length > 0) {
    await sql`
      INSERT INTO outbox (alert_id, topic, key, payload)
      SELECT v.alert_id, ${ALERT_TOPIC}, v.key, v.payload
      FROM unnest(${alerts.map((a) => a.id)}::text[], ${alerts.map((a) => a.key)}::text[],
        ${alerts.map((a) => a.payload)}::jsonb[]) AS v(alert_id, key, payload)
      ON CONFLICT (alert_id) DO NOTHING`.execute(db);
  }
  return opened.length + raisedAgain;
}

export interface SweepResult {
  stuck: number;
  missedNotification: number;
  unknownTransaction: number;
}

/**
 * Raises the exceptions that need time to pass: STUCK (non-final past its deadline), MISSED_NOTIFICATION
 * (the entity's current status was first seen by polling, as a change, and no webhook about the entity
 * arrived after it within the grace: the first reading of an entity is not a change a webhook announces,
 * and a status left before its webhook was read is announced by the next one) and UNKNOWN_TRANSACTION
 * (observed at the provider, no intent after the grace). A condition still open is not counted again on
 * every sweep; it is re-raised (count + 1) only once it had been resolved.
 */
export async function sweepExceptions(
  db: Db,
  now: Date,
  rules: ExceptionRules = DEFAULT_EXCEPTION_RULES,
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
    SELECT merchant_account, entity_kind, entity_id, status, status_since, expires_at FROM mirrors
    WHERE (entity_kind = 'deposit' AND status IN ('CREATED', 'PENDING', 'PENDING_AUTHENTICATION', 'FOR_REVIEW',
        'APPROVED', 'EARLY_RELEASED'))
       OR (entity_kind = 'cashout' AND status IN ('PENDING', 'ON_HOLD', 'DELIVERED'))
       OR (entity_kind = 'refund' AND status IN ('PENDING', 'INCORRECT_DETAILS', 'DELIVERED'))`.execute(db);
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

  const missedBefore = new Date(now.getTime() - rules.missedNotificationGraceMs);
  const { rows: missed } = await sql<{
    merchant_account: string;
    entity_kind: EntityKind;
    entity_id: string;
    to_status: string;
    observed_at: Date;
  }>`
    SELECT m.merchant_account, m.entity_kind, m.entity_id, m.status AS to_status, f.observed_at
    FROM mirrors m
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
  await raiseExceptions(db, raised, now, rules, { mode: 'condition' });
  return { stuck, missedNotification: missed.length, unknownTransaction: unknown.length };
}
