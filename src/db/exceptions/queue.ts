/**
 * The exception queue people work in, read and written by the page (src/web) and the
 * API (src/api) alike: the list with its filters (type, state, assignee, account, currency, age bucket,
 * amount range, overdue), a page at a time by exception id (keyset), counts per age bucket, one
 * exception with its audit trail, and the queue's one write (`changeQueueItem`: a state change, an
 * assignment or a comment, each with its audit event in the same transaction) and its bulk form. Due
 * times come from the service-level table (src/db/exceptions/sla.ts). Amounts are bigint minor units.
 */
import { type RawBuilder, sql, type Transaction } from 'kysely';
import { AGE_BUCKETS, type AgeBucketKey, type ExceptionState } from '../../domain/exception-queue.ts';
import { DECIDED_TYPES, type ExceptionEntityKind } from '../../domain/exception-rules.ts';
import type { SlaTable } from '../../domain/exception-sla.ts';
import { formatAmount, LEDGER_NUMERIC, type Minor, parseMinorOrNull } from '../../domain/money.ts';
import type { Database, Db, ExceptionEventAction } from '../schema.ts';
import {
  dueAtSql,
  EXCEPTION_AMOUNT,
  EXCEPTION_CURRENCY,
  MIRROR_OF_EXCEPTION,
  overdueSql,
  UNRESOLVED_LITERALS,
} from './sla.ts';

const DAY_MS = 86_400_000;
const toMinorOrNull = (v: string | null): Minor | null => parseMinorOrNull(v, LEDGER_NUMERIC);

export interface QueueFilter {
  type?: string;
  /** Default: every state but resolved. */
  state?: ExceptionState;
  /** A user name, or null for unassigned ones. */
  assignee?: string | null;
  merchantAccount?: string;
  /** The entity's currency. */
  currency?: string;
  age?: AgeBucketKey;
  /** The entity's amount, inclusive bounds. */
  minAmount?: Minor;
  maxAmount?: Minor;
  /** true: unresolved and past the due time of its service level; false: the others. */
  overdue?: boolean;
}

/** The latest note of an exception's audit trail (a comment, or the note of a state change or assignment). */
export interface QueueNote {
  at: Date;
  actor: string;
  note: string;
}

export interface QueueRow {
  id: string;
  type: string;
  severity: string;
  state: ExceptionState;
  merchantAccount: string;
  kind: ExceptionEntityKind;
  entityId: string;
  count: number;
  firstSeenAt: Date;
  lastSeenAt: Date;
  /** First seen plus its service level (src/domain/exception-sla.ts). */
  dueAt: Date;
  /** Unresolved and past `dueAt` at the instant of the read. */
  overdue: boolean;
  assignee: string | null;
  assignedAt: Date | null;
  currency: string | null;
  amount: Minor | null;
  details: Record<string, unknown>;
  acknowledgedBy: string | null;
  acknowledgedAt: Date | null;
  acknowledgementNote: string | null;
  resolvedBy: string | null;
  resolvedAt: Date | null;
  resolutionNote: string | null;
  /** When a new fact reopened it, what changed, and what it was before. */
  reopenedAt: Date | null;
  reopenReason: string | null;
  previous: Record<string, unknown> | null;
  /** An operator's decision on an ILLEGAL_TRANSITION. */
  decision: Record<string, unknown> | null;
  /** A decision that re-books the ledger, waiting for a controller's approval (src/db/exceptions/decisions.ts). */
  proposal: Record<string, unknown> | null;
  lastNote: QueueNote | null;
  updatedAt: Date;
}

interface QueueDbRow {
  id: string;
  type: string;
  severity: string;
  state: ExceptionState;
  merchant_account: string;
  entity_kind: ExceptionEntityKind;
  entity_id: string;
  count: number;
  first_seen_at: Date;
  last_seen_at: Date;
  due_at: Date;
  overdue: boolean;
  assignee: string | null;
  assigned_at: Date | null;
  currency: string | null;
  amount: string | null;
  details: Record<string, unknown>;
  acknowledged_by: string | null;
  acknowledged_at: Date | null;
  acknowledgement_note: string | null;
  resolved_by: string | null;
  resolved_at: Date | null;
  resolution_note: string | null;
  reopened_at: Date | null;
  reopen_reason: string | null;
  previous: Record<string, unknown> | null;
  decision: Record<string, unknown> | null;
  proposal: Record<string, unknown> | null;
  note_at: Date | null;
  note_actor: string | null;
  note: string | null;
  updated_at: Date;
}

function queueSelect(sla: SlaTable, at: Date): RawBuilder<QueueDbRow> {
  return sql<QueueDbRow>`
  SELECT x.id::text AS id, x.type, x.severity, x.state, x.merchant_account, x.entity_kind, x.entity_id, x.count,
         x.first_seen_at, x.last_seen_at, ${dueAtSql(sla)} AS due_at, ${overdueSql(sla, at)} AS overdue,
         x.assignee, x.assigned_at, ${EXCEPTION_CURRENCY} AS currency, ${EXCEPTION_AMOUNT}::text AS amount, x.details,
         x.acknowledged_by, x.acknowledged_at, x.acknowledgement_note,
         x.resolved_by, x.resolved_at, x.resolution_note, x.reopened_at, x.reopen_reason, x.previous, x.decision, x.proposal,
         n.at AS note_at, n.actor AS note_actor, n.note, x.updated_at
    FROM exceptions x
    ${MIRROR_OF_EXCEPTION}
    LEFT JOIN LATERAL (
      SELECT v.at, v.actor, v.note FROM exception_events v
       WHERE v.exception_id = x.id AND v.note IS NOT NULL ORDER BY v.id DESC LIMIT 1) n ON true`;
}

function queueRowOf(r: QueueDbRow): QueueRow {
  return {
    id: r.id,
    type: r.type,
    severity: r.severity,
    state: r.state,
    merchantAccount: r.merchant_account,
    kind: r.entity_kind,
    entityId: r.entity_id,
    count: r.count,
    firstSeenAt: r.first_seen_at,
    lastSeenAt: r.last_seen_at,
    dueAt: r.due_at,
    overdue: r.overdue,
    assignee: r.assignee,
    assignedAt: r.assigned_at,
    currency: r.currency,
    amount: toMinorOrNull(r.amount),
    details: r.details,
    acknowledgedBy: r.acknowledged_by,
    acknowledgedAt: r.acknowledged_at,
    acknowledgementNote: r.acknowledgement_note,
    resolvedBy: r.resolved_by,
    resolvedAt: r.resolved_at,
    resolutionNote: r.resolution_note,
    reopenedAt: r.reopened_at,
    reopenReason: r.reopen_reason,
    previous: r.previous,
    decision: r.decision,
    proposal: r.proposal,
    lastNote:
      r.note !== null && r.note_at !== null
        ? { at: r.note_at, actor: r.note_actor ?? '', note: r.note }
        : null,
    updatedAt: r.updated_at,
  };
}

/** The WHERE conditions of a filter (over `x` and its mirror `m`), the age bucket left out when `withAge` is false. */
function queueWhere(f: QueueFilter, now: Date, sla: SlaTable, withAge = true): RawBuilder<unknown> {
  const bucket = withAge && f.age ? AGE_BUCKETS.find((b) => b.key === f.age) : undefined;
  // The unresolved states as literals (constants): the planner matches them to the partial index of
  // unresolved exceptions (`exceptions_unresolved_ix`) instead of walking every resolved one.
  const states = f.state ? sql.join([f.state]) : UNRESOLVED_LITERALS;
  return sql`x.state IN (${states})
       ${f.type !== undefined ? sql`AND x.type = ${f.type}` : sql``}
       ${f.assignee === null ? sql`AND x.assignee IS NULL` : f.assignee !== undefined ? sql`AND x.assignee = ${f.assignee}` : sql``}
       ${f.merchantAccount !== undefined ? sql`AND x.merchant_account = ${f.merchantAccount}` : sql``}
       ${f.currency !== undefined ? sql`AND ${EXCEPTION_CURRENCY} = ${f.currency}` : sql``}
       ${f.minAmount !== undefined ? sql`AND ${EXCEPTION_AMOUNT} >= ${formatAmount(f.minAmount)}::numeric` : sql``}
       ${f.maxAmount !== undefined ? sql`AND ${EXCEPTION_AMOUNT} <= ${formatAmount(f.maxAmount)}::numeric` : sql``}
       ${bucket ? sql`AND x.first_seen_at <= ${new Date(now.getTime() - bucket.minDays * DAY_MS)}` : sql``}
       ${
         bucket && Number.isFinite(bucket.maxDays)
           ? sql`AND x.first_seen_at > ${new Date(now.getTime() - bucket.maxDays * DAY_MS)}`
           : sql``
       }
       ${f.overdue === undefined ? sql`` : f.overdue ? sql`AND ${overdueSql(sla, now)}` : sql`AND NOT ${overdueSql(sla, now)}`}`;
}

/** The queue, oldest id first, `limit` a page after the exception id `afterId`. */
export async function listQueue(
  db: Db,
  filter: QueueFilter,
  now: Date,
  sla: SlaTable,
  limit: number,
  afterId: string | null,
): Promise<QueueRow[]> {
  const { rows } = await sql<QueueDbRow>`${queueSelect(sla, now)}
     WHERE ${queueWhere(filter, now, sla)}
       ${afterId !== null ? sql`AND x.id > ${afterId}::bigint` : sql``}
     ORDER BY x.id
     LIMIT ${limit}`.execute(db);
  return rows.map(queueRowOf);
}

/** How many exceptions match the filter in each age bucket (the filter's own age bucket ignored). */
export async function queueAgeCounts(
  db: Db,
  filter: QueueFilter,
  now: Date,
  sla: SlaTable,
): Promise<Record<AgeBucketKey, number>> {
  const ages = AGE_BUCKETS.map(
    (b) =>
      sql`(count(*) FILTER (WHERE x.first_seen_at <= ${new Date(now.getTime() - b.minDays * DAY_MS)}${
        Number.isFinite(b.maxDays)
          ? sql` AND x.first_seen_at > ${new Date(now.getTime() - b.maxDays * DAY_MS)}`
          : sql``
      }))::int`,
  );
  const { rows } = await sql<{ counts: number[] }>`
    SELECT ARRAY[${sql.join(ages)}] AS counts FROM exceptions x ${MIRROR_OF_EXCEPTION}
     WHERE ${queueWhere(filter, now, sla, false)}`.execute(db);
  const counts = rows[0]?.counts ?? [];
  return Object.fromEntries(AGE_BUCKETS.map((b, i) => [b.key, counts[i] ?? 0])) as Record<
    AgeBucketKey,
    number
  >;
}

export interface QueueEvent {
  id: string;
  at: Date;
  actor: string;
  action: ExceptionEventAction;
  fromState: string | null;
  toState: string | null;
  fromAssignee: string | null;
  toAssignee: string | null;
  note: string | null;
}

/** One exception with its audit trail (oldest event first); null when there is none with this id. */
export async function getQueueItem(
  db: Db,
  id: string,
  now: Date,
  sla: SlaTable,
): Promise<{ exception: QueueRow; events: QueueEvent[] } | null> {
  if (!/^\d{1,18}$/.test(id)) return null;
  const { rows } = await sql<QueueDbRow>`${queueSelect(sla, now)} WHERE x.id = ${id}::bigint`.execute(db);
  const row = rows[0];
  if (!row) return null;
  const events = await db
    .selectFrom('exception_events')
    .selectAll()
    .where('exception_id', '=', id)
    .orderBy('id')
    .execute();
  return {
    exception: queueRowOf(row),
    events: events.map((e) => ({
      id: String(e.id),
      at: e.at,
      actor: e.actor,
      action: e.action,
      fromState: e.from_state,
      toState: e.to_state,
      fromAssignee: e.from_assignee,
      toAssignee: e.to_assignee,
      note: e.note,
    })),
  };
}

export type QueueChange =
  | {
      kind: 'state';
      state: ExceptionState;
      note: string | null;
      /** Only from these states (anything else is `unchanged`); default: from any other state. */
      from?: readonly ExceptionState[];
    }
  | { kind: 'assign'; assignee: string | null; note: string | null }
  | { kind: 'comment'; note: string };

/** `unchanged`: the exception already is in that state or has that assignee (nothing written). */
/** `needs_decision`: resolving an ILLEGAL_TRANSITION or FACTS_CHANGED takes a decision (DECIDED_TYPES). */
export type QueueChangeResult = 'changed' | 'not_found' | 'unchanged' | 'needs_decision';

/** One change inside the caller's transaction (the row locked first). */
export async function applyChange(
  trx: Transaction<Database>,
  id: string,
  change: QueueChange,
  actor: string,
  now: Date,
): Promise<QueueChangeResult> {
  const current = await trx
    .selectFrom('exceptions')
    .select(['state', 'assignee', 'type'])
    .where('id', '=', id)
    .forUpdate()
    .executeTakeFirst();
  if (!current) return 'not_found';
  if (
    change.kind === 'state' &&
    change.state === 'resolved' &&
    current.state !== 'resolved' &&
    (DECIDED_TYPES as readonly string[]).includes(current.type)
  ) {
    return 'needs_decision';
  }
  const event = {
    exception_id: id,
    at: now,
    actor,
    from_state: null as string | null,
    to_state: null as string | null,
    from_assignee: null as string | null,
    to_assignee: null as string | null,
    note: change.note,
  };
  if (change.kind === 'state') {
    if (current.state === change.state) return 'unchanged';
    if (change.from && !change.from.includes(current.state as ExceptionState)) return 'unchanged';
    const set: Record<string, unknown> = { state: change.state, updated_at: now };
    if (change.state === 'acknowledged') {
      Object.assign(set, {
        acknowledged_by: actor,
        acknowledged_at: now,
        acknowledgement_note: change.note,
      });
    } else if (change.state === 'resolved') {
      Object.assign(set, { resolved_by: actor, resolved_at: now, resolution_note: change.note });
    } else if (current.state === 'resolved') {
      Object.assign(set, { resolved_at: null });
    }
    await trx.updateTable('exceptions').set(set).where('id', '=', id).execute();
    await trx
      .insertInto('exception_events')
      .values({ ...event, action: 'state', from_state: current.state, to_state: change.state })
      .execute();
  } else if (change.kind === 'assign') {
    if (current.assignee === change.assignee) return 'unchanged';
    await trx
      .updateTable('exceptions')
      .set({ assignee: change.assignee, assigned_at: change.assignee ? now : null, updated_at: now })
      .where('id', '=', id)
      .execute();
    await trx
      .insertInto('exception_events')
      .values({ ...event, action: 'assign', from_assignee: current.assignee, to_assignee: change.assignee })
      .execute();
  } else {
    await trx.updateTable('exceptions').set({ updated_at: now }).where('id', '=', id).execute();
    await trx
      .insertInto('exception_events')
      .values({ ...event, action: 'comment' })
      .execute();
  }
  return 'changed';
}

export interface BulkResult {
  changed: string[];
  /**
   * Already in the state, not in a state it may move from, or an ILLEGAL_TRANSITION or FACTS_CHANGED to
   * resolve (it takes a decision).
   */
  unchanged: string[];
  notFound: string[];
}
