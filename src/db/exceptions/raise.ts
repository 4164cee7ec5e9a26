/**
 * Writing exceptions and their alerts. One row per (type, merchant account, entity kind, entity id):
 * raising again bumps `count` and `last_seen_at`. Each raise names the fact it is about (`fact`, without
 * sighting-specific parts): a resolved exception raised again with the same fact (a re-poll, a backfill,
 * a redelivered webhook) stays resolved; a new fact (another amount, a new status) reopens it, saying
 * what changed and keeping what it was, the note and who resolved it (`previous`). An exception alerts
 * when it opens: its first raise, or a reopening. Raising an open or acknowledged exception again (the
 * poller reading the CANCELLED its webhook already brought) counts it and alerts nobody. Alerts at or above
 * the configured severity go to the outbox in the same transaction, under a deterministic alert id, so a
 * replay or a retry never alerts twice (a late rejection is alerted exactly once). Every raise carries
 * the entity's facts (`details.facts`: ids, intent and provider amounts and currencies, status and reason,
 * the rule in one sentence), read here in one statement, so the page, the workbook and the alert show them.
 */
import { sql } from 'kysely';
import {
  alertIdStem,
  DEFAULT_EXCEPTION_RULES,
  EXCEPTION_RULE_TEXT,
  type ExceptionEntityKind,
  type ExceptionRules,
  type ExceptionType,
  shouldAlert,
} from '../../domain/exception-rules.ts';
import { binaryColumns } from '../ledger/binary-array.ts';
import type { EntityRef } from '../ledger/keys.ts';
import { prepared } from '../ledger/statements.ts';
import { insertAlertsFrom } from '../runs/outbox.ts';
import type { Db } from '../schema.ts';

export interface ExceptionToRaise extends Omit<EntityRef, 'kind'> {
  kind: ExceptionEntityKind;
  type: ExceptionType;
  details: Record<string, unknown>;
  /** Facts known to the raiser that no mirror holds (OUTCOME_UNKNOWN: the intent's, no entity yet). */
  facts?: Partial<ExceptionFacts>;
  /** The fact the exception is about (see RaisedException.fact); default: the details as canonical JSON. */
  fact?: string;
}

/** The facts every exception carries (page, exception workbook, alert). Amounts are decimal text. */
export interface ExceptionFacts {
  entity: string;
  /** Invoice id (deposits), external id (cashouts), or the refund's own reference. */
  externalRef: string | null;
  intentAmount: string | null;
  intentCurrency: string | null;
  providerAmount: string | null;
  providerCurrency: string | null;
  status: string | null;
  statusReason: string | null;
  rejectionCode: string | null;
  rejectionReason: string | null;
  rule: string;
}

/** JSON with object keys sorted, so equal details give equal text. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .filter((k) => o[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

export function factOf(r: ExceptionToRaise): string {
  return r.fact ?? canonical(r.details);
}

/**
 * The facts of each exception being raised (`ExceptionFacts`, as JSON), computed in the raising statement
 * itself from `d`'s row (`entity_kind`, `entity_id`, `merchant_account`, `rule`, `extra`, `drop_keys`):
 * the mirror, its linked intent, and the latest amount and currency the provider reported (one index
 * probe each, LATERAL with OFFSET 0 as in the ledger's reads: a plain join hashed the whole mirrors
 * table while it looked small). `extra` (the raiser's own facts) overrides; `drop_keys` are the raiser's
 * facts given as undefined (left out, as `JSON.stringify` leaves them out).
 */
const FACTS_OF_ROW = sql`(jsonb_build_object(
    'entity', v.entity_kind || ':' || v.entity_id,
    'externalRef', coalesce(m.external_ref, i.external_ref),
    'intentAmount', i.amount::text, 'intentCurrency', i.currency,
    'providerAmount', h.amount::text, 'providerCurrency', h.currency,
    'status', m.status, 'statusReason', m.status_reason,
    'rejectionCode', m.rejection_code, 'rejectionReason', m.rejection_reason,
    'rule', v.rule) || coalesce(v.extra, '{}'::jsonb)) - coalesce(string_to_array(v.drop_keys, ','), '{}'::text[])`;

const FACTS_SOURCES = sql`
    LEFT JOIN LATERAL (
      SELECT x.external_ref, x.intent_id, x.status, x.status_reason, x.rejection_code, x.rejection_reason
      FROM mirrors x WHERE x.merchant_account = v.merchant_account AND x.entity_kind = v.entity_kind
        AND x.entity_id = v.entity_id OFFSET 0) m ON true
    LEFT JOIN LATERAL (
      SELECT y.external_ref, y.amount, y.currency FROM intents y WHERE y.intent_id = m.intent_id OFFSET 0) i ON true
    LEFT JOIN LATERAL (
      SELECT x.amount, x.currency FROM status_history x
      WHERE x.merchant_account = v.merchant_account AND x.entity_kind = v.entity_kind AND x.entity_id = v.entity_id
        AND x.amount IS NOT NULL AND x.to_status IS NOT NULL AND NOT x.illegal
      ORDER BY x.observed_at DESC, x.id DESC LIMIT 1) h ON true`;

export interface RaiseOptions {
  /** `increment` (default) bumps count on every raise; `condition` bumps it only when the row was resolved. */
  mode?: 'increment' | 'condition';
}

type Written = {
  type: ExceptionType;
  merchant_account: string;
  entity_kind: ExceptionEntityKind;
  entity_id: string;
  /** The row's id when this raise opened it (inserted or reopened), else null. */
  id: string | null;
  reopen_reason: string | null;
  /** True when this raise reopened a resolved row. */
  reopened: boolean;
  /** True when this raise opened the row (inserted, or reopened). */
  opened: boolean;
  /** True when the statement counted this raise on a row that stayed as it was (`upd`). */
  counted: boolean;
  /** The details (facts included) of a row neither opened nor counted by the statement, as JSON text; else null. */
  details: string | null;
};

export const keyOf = (type: string, account: string, kind: string, entityId: string) =>
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
  for (const r of raised) {
    unique.set(keyOf(r.type, r.account, r.kind, r.entityId), { ...r, fact: factOf(r) });
  }
  const rows = [...unique.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, r]) => r);
  const extra = (r: ExceptionToRaise) => (r.facts ? JSON.stringify(r.facts) : null);
  const dropKeys = (r: ExceptionToRaise) => {
    if (!r.facts) return null;
    const keys = Object.keys(r.facts).filter((k) => r.facts![k as keyof ExceptionFacts] === undefined);
    return keys.length > 0 ? keys.join(',') : null;
  };
  // Each column as a binary array (`binaryColumns`): no array literal to build here or to parse at Bind.
  const c = binaryColumns(rows, [
    ['text', (r) => r.type],
    ['text', (r) => r.account],
    ['text', (r) => r.kind],
    ['text', (r) => r.entityId],
    ['text', (r) => rules.severity[r.type]],
    ['jsonb', (r) => JSON.stringify(r.details)],
    ['text', (r) => r.fact],
    ['jsonb', extra],
    ['text', dropKeys],
    ['text', (r) => EXCEPTION_RULE_TEXT[r.type]],
    ['boolean', (r) => shouldAlert(r.type, rules)],
    ['text', (r) => alertIdStem(r.type, r.kind, r.account, r.entityId).stem],
    ['boolean', (r) => alertIdStem(r.type, r.kind, r.account, r.entityId).counted],
  ]);
  // One statement: each row's details get the entity's facts (`FACTS_OF_ROW`), then it inserts the new
  // rows and reopens the resolved ones whose fact changed; the WHERE leaves every other existing row as
  // it was, but locked (ON CONFLICT locks each conflicting row), so what it returns as opened is exactly
  // what opened; and it queues the alerts of the opened rows (`insertAlertsFrom`, in row order; alert id
  // as `alertId`: its `alertIdStem`, then the count it opened with where the type counts).
  // The rest are open or acknowledged, or resolved and seen again with the same fact (they stay resolved),
  // and already locked: `increment` counts the sighting, `condition` (a sweep finding the condition still
  // true) only says when it was last seen. The same statement (`upd`) updates those it sees: each row found
  // by one probe of the unique key and updated through its ctid, so the cost does not grow with the table
  // whatever its statistics say (as in the ledger's statements), once `ins` has run to its end (the one-time
  // count) and not the rows `ins` wrote. A row it cannot see or whose version moved on (one another
  // transaction committed after this statement's snapshot, which ON CONFLICT sees) it leaves alone: those
  // come back with their details and the update below counts them.
  // Counting every sighting as a new alert (the alert id carries the count) wrote each AMOUNT_MISMATCH of
  // the chaos soak twice: once for its webhook, once for the poll that read the same CANCELLED.
  const { rows: written } = await prepared(sql<Written>`
    WITH v AS (
      SELECT * FROM unnest(${c[0]}::text[], ${c[1]}::text[], ${c[2]}::text[], ${c[3]}::text[], ${c[4]}::text[],
        ${c[5]}::jsonb[], ${c[6]}::text[], ${c[7]}::jsonb[], ${c[8]}::text[], ${c[9]}::text[], ${c[10]}::boolean[],
        ${c[11]}::text[], ${c[12]}::boolean[])
        WITH ORDINALITY AS v(type, merchant_account, entity_kind, entity_id, severity, details, fact, extra,
          drop_keys, rule, alert, stem, counted, n)),
    d AS (
      SELECT v.type, v.merchant_account, v.entity_kind, v.entity_id, v.severity, v.fact, v.alert, v.stem, v.counted, v.n,
        v.details || jsonb_build_object('facts', ${FACTS_OF_ROW}) AS details
      FROM v ${FACTS_SOURCES}),
    ins AS (
      INSERT INTO exceptions AS e (type, merchant_account, entity_kind, entity_id, severity, first_seen_at,
        last_seen_at, details, fact)
      SELECT d.type, d.merchant_account, d.entity_kind, d.entity_id, d.severity, ${now}::timestamptz,
        ${now}::timestamptz, d.details, d.fact
      FROM d ORDER BY d.n
      ON CONFLICT (type, merchant_account, entity_kind, entity_id) DO UPDATE SET
        count = e.count + 1,
        last_seen_at = excluded.last_seen_at,
        details = excluded.details,
        fact = excluded.fact,
        state = 'open',
        reopened_at = excluded.last_seen_at,
        reopen_reason = 'was: ' || coalesce(e.fact, 'not recorded') || '; now: ' || excluded.fact,
        previous = jsonb_build_object('fact', e.fact, 'details', e.details, 'resolvedBy', e.resolved_by,
          'resolutionNote', e.resolution_note, 'resolvedAt', e.resolved_at, 'decision', e.decision),
        resolved_at = NULL,
        updated_at = now()
      WHERE e.state = 'resolved' AND e.fact IS DISTINCT FROM excluded.fact
      RETURNING type, merchant_account, entity_kind, entity_id, count, severity, id, reopen_reason,
        (xmax <> 0) AS reopened),
    opened AS (
      SELECT ins.*, d.details, d.alert, d.n,
        d.stem || CASE WHEN d.counted THEN ':' || ins.count ELSE '' END AS alert_id
      FROM ins JOIN d ON d.type = ins.type AND d.merchant_account = ins.merchant_account
        AND d.entity_kind = ins.entity_kind AND d.entity_id = ins.entity_id),
    alerted AS (${insertAlertsFrom(sql`
      SELECT o.alert_id, o.entity_kind || ':' || o.entity_id AS key,
        jsonb_build_object('alertId', o.alert_id, 'type', o.type, 'severity', o.severity,
          'account', o.merchant_account, 'kind', o.entity_kind, 'entityId', o.entity_id, 'count', o.count,
          'raisedAt', ${now.toISOString()}::text, 'details', o.details) AS payload
      FROM opened o WHERE o.alert ORDER BY o.n`)}),
    upd AS (
      UPDATE exceptions AS e SET
        count = CASE WHEN ${options.mode === 'condition'}::boolean THEN e.count ELSE e.count + 1 END,
        last_seen_at = ${now}::timestamptz,
        details = d.details,
        fact = d.fact,
        updated_at = now()
      FROM d CROSS JOIN LATERAL (
        SELECT ctid AS tid FROM exceptions x WHERE x.type = d.type AND x.merchant_account = d.merchant_account
          AND x.entity_kind = d.entity_kind AND x.entity_id = d.entity_id OFFSET 0) t
      WHERE e.ctid = t.tid AND (SELECT count(*) FROM ins) >= 0
        AND NOT EXISTS (SELECT 1 FROM ins WHERE ins.type = d.type AND ins.merchant_account = d.merchant_account
          AND ins.entity_kind = d.entity_kind AND ins.entity_id = d.entity_id)
      RETURNING d.n)
    SELECT d.type, d.merchant_account, d.entity_kind, d.entity_id, o.id::text AS id, o.reopen_reason,
      coalesce(o.reopened, false) AS reopened, o.id IS NOT NULL AS opened, u.n IS NOT NULL AS counted,
      CASE WHEN o.id IS NULL AND u.n IS NULL THEN d.details::text END AS details
    FROM d LEFT JOIN opened o ON o.n = d.n LEFT JOIN upd u ON u.n = d.n
    ORDER BY d.n`).execute(db);
  return finishRaise(db, written, rows, now, options);
}

/** What completes a raise from its statement's rows: the reopenings' events and the rows counted again. */
async function finishRaise(
  db: Db,
  written: readonly Written[],
  rows: readonly ExceptionToRaise[],
  now: Date,
  options: RaiseOptions,
): Promise<number> {
  // A reopening is a state change of the exception's history, made by the ledger on a new fact.
  const reopened = written.filter((w) => w.reopened);
  if (reopened.length > 0) {
    await sql`
      INSERT INTO exception_events (exception_id, at, actor, action, from_state, to_state, note)
      SELECT v.id::bigint, ${now}::timestamptz, 'payrecon', 'state', 'resolved', 'open', v.note
      FROM unnest(${reopened.map((w) => w.id)}::text[], ${reopened.map((w) => `reopened on a new fact: ${w.reopen_reason ?? ''}`)}::text[])
        AS v(id, note)`.execute(db);
  }
  // Rows the statement could not count (see above): found again by key, now seen, and counted alike.
  const again = written.filter((w) => !w.opened && !w.counted);
  let raisedAgain = written.filter((w) => w.counted).length;
  if (again.length > 0) {
    const fact = new Map(rows.map((r) => [keyOf(r.type, r.account, r.kind, r.entityId), r.fact ?? null]));
    const updated = await prepared(sql`
      UPDATE exceptions AS e SET
        count = CASE WHEN ${options.mode === 'condition'} THEN e.count ELSE e.count + 1 END,
        last_seen_at = ${now}::timestamptz,
        details = v.details,
        fact = v.fact,
        updated_at = now()
      FROM unnest(${again.map((w) => w.type)}::text[], ${again.map((w) => w.merchant_account)}::text[],
        ${again.map((w) => w.entity_kind)}::text[], ${again.map((w) => w.entity_id)}::text[],
        ${again.map((w) => w.details)}::jsonb[],
        ${again.map((w) => fact.get(keyOf(w.type, w.merchant_account, w.entity_kind, w.entity_id)) ?? null)}::text[])
        AS v(type, merchant_account, entity_kind, entity_id, details, fact)
        CROSS JOIN LATERAL (
          SELECT ctid AS tid FROM exceptions x WHERE x.type = v.type AND x.merchant_account = v.merchant_account
            AND x.entity_kind = v.entity_kind AND x.entity_id = v.entity_id OFFSET 0) t
      WHERE e.ctid = t.tid`).execute(db);
    raisedAgain += Number(updated.numAffectedRows ?? 0n);
  }
  return written.filter((w) => w.opened).length + raisedAgain;
}

/**
 * Every exception type that has a row: one index probe per type on the unique key, which leads with the
 * type (a skip scan), instead of reading every exception ever raised.
 */
export async function exceptionTypes(db: Db): Promise<string[]> {
  const { rows } = await sql<{ type: string }>`
    WITH RECURSIVE t AS (
      SELECT min(type) AS type FROM exceptions
      UNION ALL
      SELECT (SELECT min(e.type) FROM exceptions e WHERE e.type > t.type) FROM t WHERE t.type IS NOT NULL)
    SELECT type FROM t WHERE type IS NOT NULL`.execute(db);
  return rows.map((r) => r.type);
}
