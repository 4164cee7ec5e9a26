/**
 * Repository of `outbox`: alerts written in the ledger's transaction (or by a job), and a row per import
 * that brought new lines (written in the import's transaction, src/db/imports/events.ts), published by
 * the outbox relay (src/producers/outbox-relay.ts), at least once, in id order. The column `alert_id`
 * holds each row's unique event id (an alert's id, or `<topic>:<import id>`).
 */
import { type RawBuilder, sql } from 'kysely';
import type { Db } from '../schema.ts';

/** The alerts' topic (the same name as the catalog's ALERT_TOPIC, src/events/topics.ts). */
const OUTBOX_TOPIC = 'recon.alert.raised.v1';

/** What an outbox row's `payload` holds: the alert, amounts in `details` as decimal text. */
export interface OutboxPayload {
  alertId: string;
  type: string;
  severity: string;
  account: string;
  kind?: string;
  entityId?: string;
  count?: number;
  raisedAt: string;
  details?: Record<string, unknown>;
}

export interface OutboxAlert {
  /**
   * The row's key (`<kind>:<entity id>`, or `alert:<id>` for an alert about no entity), for reading the
   * table; the relay keys each message by the topic catalog (`<kind>:<account>:<id>`).
   */
  key: string;
  payload: OutboxPayload;
}

/**
 * The outbox insert of `enqueueAlerts` fed by a query of `(alert_id, key, payload)` rows, in its order, for
 * a statement that computes its alerts itself (`raiseExceptions`, a data-modifying CTE); an alert id
 * already there stays as it was.
 */
export function insertAlertsFrom(rows: RawBuilder<unknown>): RawBuilder<unknown> {
  return sql`
    INSERT INTO outbox (alert_id, topic, key, payload)
    SELECT a.alert_id, ${OUTBOX_TOPIC}, a.key, a.payload FROM (${rows}) AS a
    ON CONFLICT (alert_id) DO NOTHING`;
}

/** Adds alerts to the outbox in one statement; an alert id already there stays as it was. */
export async function enqueueAlerts(db: Db, alerts: readonly OutboxAlert[]): Promise<void> {
  if (alerts.length === 0) return;
  await sql`
    INSERT INTO outbox (alert_id, topic, key, payload)
    SELECT v.alert_id, ${OUTBOX_TOPIC}, v.key, v.payload
    FROM unnest(${alerts.map((a) => a.payload.alertId)}::text[], ${alerts.map((a) => a.key)}::text[],
      ${alerts.map((a) => JSON.stringify(a.payload))}::jsonb[]) AS v(alert_id, key, payload)
    ON CONFLICT (alert_id) DO NOTHING`.execute(db);
}

/** A row other than an alert: its topic, unique id, key and what the relay publishes from (JSON). */
export interface OutboxEvent {
  eventId: string;
  topic: string;
  key: string;
  payload: Record<string, unknown>;
}

/** Adds events to the outbox in one statement; an event id already there stays as it was. */
export async function enqueueEvents(db: Db, events: readonly OutboxEvent[]): Promise<void> {
  if (events.length === 0) return;
  await sql`
    INSERT INTO outbox (alert_id, topic, key, payload)
    SELECT v.alert_id, v.topic, v.key, v.payload
    FROM unnest(${events.map((e) => e.eventId)}::text[], ${events.map((e) => e.topic)}::text[],
      ${events.map((e) => e.key)}::text[], ${events.map((e) => JSON.stringify(e.payload))}::jsonb[])
      AS v(alert_id, topic, key, payload)
    ON CONFLICT (alert_id) DO NOTHING`.execute(db);
}

export interface PendingAlert {
  id: string;
  alertId: string;
  payload: OutboxPayload;
}

export interface PendingEvent {
  id: string;
  topic: string;
  key: string;
  payload: Record<string, unknown>;
}

/**
 * Up to `limit` unpublished alert rows in id order, locked for this transaction (`SKIP LOCKED`:
 * concurrent relays take different rows).
 */
export async function claimUnpublished(trx: Db, limit: number): Promise<PendingAlert[]> {
  const rows = await trx
    .selectFrom('outbox')
    .select(['id', 'alert_id', 'payload'])
    .where('published_at', 'is', null)
    .where('topic', '=', OUTBOX_TOPIC)
    .orderBy('id')
    .limit(limit)
    .forUpdate()
    .skipLocked()
    .execute();
  return rows.map((r) => ({ id: r.id, alertId: r.alert_id, payload: r.payload as unknown as OutboxPayload }));
}

/** Up to `limit` unpublished rows of the other topics (import batches) in id order, locked likewise. */
export async function claimUnpublishedEvents(trx: Db, limit: number): Promise<PendingEvent[]> {
  const rows = await trx
    .selectFrom('outbox')
    .select(['id', 'topic', 'key', 'payload'])
    .where('published_at', 'is', null)
    .where('topic', '<>', OUTBOX_TOPIC)
    .orderBy('id')
    .limit(limit)
    .forUpdate()
    .skipLocked()
    .execute();
  return rows.map((r) => ({
    id: r.id,
    topic: r.topic,
    key: r.key,
    payload: r.payload as unknown as Record<string, unknown>,
  }));
}

/** Marks rows published (one attempt more, error cleared). */
export async function markPublished(trx: Db, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  await trx
    .updateTable('outbox')
    .set((eb) => ({ published_at: sql`now()`, attempts: eb('attempts', '+', 1), last_error: null }))
    .where('id', 'in', [...ids])
    .execute();
}

/** Records a failed publishing attempt on rows (the error's message, cut to 500 characters). */
export async function markFailed(trx: Db, ids: readonly string[], error: string): Promise<void> {
  if (ids.length === 0) return;
  await trx
    .updateTable('outbox')
    .set((eb) => ({ attempts: eb('attempts', '+', 1), last_error: error.slice(0, 500) }))
    .where('id', 'in', [...ids])
    .execute();
}
