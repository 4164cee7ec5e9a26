/**
 * Payments as the API (src/api) and the page read them: looked up by any of their ids or listed page by
 * page (keyset), and one payment with its history, journal and exceptions. Amounts come back as bigint
 * minor units; keyset cursors carry the sort key as text so no microsecond is lost.
 */
import { sql } from 'kysely';
import {
  isAmountText,
  LEDGER_NUMERIC,
  type Minor,
  parseAmount,
  parseLedgerMinor,
  parseMinorOrNull,
} from '../../domain/money.ts';
import type { EntityKind } from '../../domain/statuses.ts';
import type { Db } from '../schema.ts';
import { type PaymentSettlement, paymentSettlements } from './settlements.ts';

const toMinorOrNull = (v: string | null): Minor | null => parseMinorOrNull(v, LEDGER_NUMERIC);

// ---------------------------------------------------------------- payments

/** The id kinds a payment can be found by. */
export const PAYMENT_ID_KINDS = [
  'deposit_id',
  'invoice_id',
  'cashout_id',
  'external_id',
  'refund_id',
  'intent_id',
  'bank_reference',
] as const;
export type PaymentIdKind = (typeof PAYMENT_ID_KINDS)[number];

export interface PaymentRow {
  merchantAccount: string;
  kind: EntityKind;
  entityId: string;
  /** invoice id of a deposit, external id of a cashout. */
  externalRef: string | null;
  /** The provider's bank-side id of a cashout (end-to-end id of a Brazilian instant payment). */
  bankReference: string | null;
  intentId: string | null;
  status: string | null;
  statusSince: Date | null;
  statusReason: string | null;
  /** The bank's rejection of a cashout: code (800-826) and text, as the provider gave them. */
  rejectionCode: string | null;
  rejectionReason: string | null;
  currency: string | null;
  amount: Minor | null;
  feeCurrency: string | null;
  feeAmount: Minor | null;
  test: boolean;
  crypto: boolean;
  parentDepositId: string | null;
  firstSeenAt: Date | null;
  lastSeenAt: Date | null;
  knownSince: Date;
  /** Sort key of the keyset (created_at to the microsecond, as text). */
  key: string;
}

interface MirrorRow {
  merchant_account: string;
  entity_kind: EntityKind;
  entity_id: string;
  external_ref: string | null;
  bank_reference: string | null;
  intent_id: string | null;
  status: string | null;
  status_since: Date | null;
  status_reason: string | null;
  rejection_code: string | null;
  rejection_reason: string | null;
  currency: string | null;
  amount: string | null;
  fee_currency: string | null;
  fee_amount: string | null;
  test: boolean;
  crypto: boolean;
  parent_deposit_id: string | null;
  first_seen_at: Date | null;
  last_seen_at: Date | null;
  created_at: Date;
  created_key: string;
}

const MIRROR_COLUMNS = sql`m.merchant_account, m.entity_kind, m.entity_id, m.external_ref, m.bank_reference, m.intent_id, m.status,
  m.status_since, m.status_reason, m.rejection_code, m.rejection_reason, m.currency, m.amount::text AS amount, m.fee_currency, m.fee_amount::text AS fee_amount,
  m.test, m.crypto, m.parent_deposit_id, m.first_seen_at, m.last_seen_at, m.created_at,
  to_char(m.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') AS created_key`;

function paymentOf(r: MirrorRow): PaymentRow {
  return {
    merchantAccount: r.merchant_account,
    kind: r.entity_kind,
    entityId: r.entity_id,
    externalRef: r.external_ref,
    bankReference: r.bank_reference,
    intentId: r.intent_id,
    status: r.status,
    statusSince: r.status_since,
    statusReason: r.status_reason,
    rejectionCode: r.rejection_code,
    rejectionReason: r.rejection_reason,
    currency: r.currency,
    amount: toMinorOrNull(r.amount),
    feeCurrency: r.fee_currency,
    feeAmount: toMinorOrNull(r.fee_amount),
    test: r.test,
    crypto: r.crypto,
    parentDepositId: r.parent_deposit_id,
    firstSeenAt: r.first_seen_at,
    lastSeenAt: r.last_seen_at,
    knownSince: r.created_at,
    key: r.created_key,
  };
}

/** Every payment one id names, of one id kind or of any (at most 100). */
export async function lookupPayments(db: Db, id: string, idKind?: PaymentIdKind): Promise<PaymentRow[]> {
  const where = (() => {
    switch (idKind) {
      case 'deposit_id':
        return sql`m.entity_kind = 'deposit' AND m.entity_id = ${id}`;
      case 'cashout_id':
        return sql`m.entity_kind = 'cashout' AND m.entity_id = ${id}`;
      case 'refund_id':
        return sql`m.entity_kind = 'refund' AND m.entity_id = ${id}`;
      case 'invoice_id':
        return sql`m.entity_kind = 'deposit' AND m.external_ref = ${id}`;
      case 'external_id':
        return sql`m.entity_kind = 'cashout' AND m.external_ref = ${id}`;
      case 'intent_id':
        return sql`m.intent_id = ${id}`;
      case 'bank_reference':
        return sql`m.bank_reference = ${id}`;
      case undefined:
        return sql`(m.entity_id = ${id} OR m.external_ref = ${id} OR m.intent_id = ${id} OR m.bank_reference = ${id})`;
      default: {
        const never: never = idKind;
        throw new Error(`unknown id kind ${String(never)}`);
      }
    }
  })();
  const { rows } = await sql<MirrorRow>`
    SELECT ${MIRROR_COLUMNS} FROM mirrors m WHERE ${where}
     ORDER BY m.created_at, m.merchant_account, m.entity_kind, m.entity_id LIMIT 100`.execute(db);
  return rows.map(paymentOf);
}

export interface PaymentFilter {
  merchantAccount?: string;
  kind?: EntityKind;
  status?: string;
  currency?: string;
  test?: boolean;
  /** payrecon first knew of it at or after this instant. */
  from?: Date;
  /** ... and before this one. */
  to?: Date;
}

/** The keyset position after which a page continues (newest first). */
export interface PaymentCursor {
  key: string;
  merchantAccount: string;
  kind: string;
  entityId: string;
}

/** Payments newest first, `limit` a page; pass the last row's cursor for the next page. */
export async function listPayments(
  db: Db,
  filter: PaymentFilter,
  limit: number,
  after: PaymentCursor | null,
): Promise<PaymentRow[]> {
  const f = filter;
  // The status's set (`mirror_watch`): a status in one is read from
  // the set's side rows (`mirror_watches`) instead of every mirror.
  const set =
    f.status !== undefined && f.kind !== undefined
      ? ((await sql<{ set: string | null }>`SELECT mirror_watch(${f.kind}, ${f.status}) AS set`.execute(db))
          .rows[0]?.set ?? null)
      : null;
  const { rows } = await sql<MirrorRow>`
    SELECT ${MIRROR_COLUMNS} FROM mirrors m
     WHERE true
       ${f.merchantAccount !== undefined ? sql`AND m.merchant_account = ${f.merchantAccount}` : sql``}
       ${f.kind !== undefined ? sql`AND m.entity_kind = ${f.kind}` : sql``}
       ${f.status !== undefined ? sql`AND m.status = ${f.status}` : sql``}
       ${
         set !== null
           ? sql`AND EXISTS (SELECT 1 FROM mirror_watches w WHERE w.entity_id = m.entity_id
               AND w.entity_kind = m.entity_kind AND w.merchant_account = m.merchant_account AND w.watch = ${set})`
           : sql``
       }
       ${f.currency !== undefined ? sql`AND m.currency = ${f.currency}` : sql``}
       ${f.test !== undefined ? sql`AND m.test = ${f.test}` : sql``}
       ${f.from !== undefined ? sql`AND m.created_at >= ${f.from}` : sql``}
       ${f.to !== undefined ? sql`AND m.created_at < ${f.to}` : sql``}
       ${
         after
           ? sql`AND (m.created_at, m.merchant_account, m.entity_kind, m.entity_id)
                   < ((${after.key}::timestamp AT TIME ZONE 'UTC'), ${after.merchantAccount}, ${after.kind}, ${after.entityId})`
           : sql``
       }
     ORDER BY m.created_at DESC, m.merchant_account DESC, m.entity_kind DESC, m.entity_id DESC
     LIMIT ${limit}`.execute(db);
  return rows.map(paymentOf);
}

export interface HistoryRow {
  eventId: string;
  source: string;
  fromStatus: string | null;
  toStatus: string | null;
  observedAt: Date;
  recordedAt: Date;
  stale: boolean;
  illegal: boolean;
  currency: string | null;
  amount: Minor | null;
  statusReason: string | null;
  rejectionCode: string | null;
  rejectionReason: string | null;
}

export interface EntryRow {
  id: string;
  effect: string;
  direction: 1 | -1;
  book: string;
  currency: string;
  amount: Minor;
  effectiveAt: Date;
  bookedAt: Date;
  postings: { account: string; amount: Minor }[];
  /** An entry booked by an operator's decision (src/db/exceptions/decisions.ts): who, why, which exception; else null. */
  decision: {
    decision: string;
    by: string;
    /** Who proposed it, when another approved it (a decision that re-books the ledger); else null. */
    proposedBy: string | null;
    note: string;
    exceptionId: string;
  } | null;
}

export interface PaymentDetail {
  payment: PaymentRow;
  intent: {
    intentId: string;
    operation: string;
    currency: string;
    amount: Minor;
    outcome: string;
    createdAt: Date;
  } | null;
  history: HistoryRow[];
  /** A deposit's refunds, oldest first (empty for a cashout or a refund). */
  refunds: RefundRow[];
  /** What the customer paid when the provider says it differs from what was asked (AMOUNT_MISMATCH), else null. */
  paid: PaidAmount | null;
  entries: EntryRow[];
  /** The settlements the provider's transactions report puts the payment in (src/db/read-models/settlements.ts). */
  settlements: PaymentSettlement[];
  exceptions: { id: string; type: string; severity: string; state: string }[];
  alerts: {
    alertId: string;
    type: string;
    severity: string;
    raisedAt: Date;
    publishedAt: Date | null;
    /** Sinks that took it (log, slack, webhook), in delivery order. */
    deliveredTo: string[];
  }[];
}

export interface RefundRow {
  entityId: string;
  status: string | null;
  statusSince: Date | null;
  currency: string | null;
  amount: Minor | null;
}

/** An amount the customer paid, in the currency the provider reported with it. */
export interface PaidAmount {
  amount: Minor;
  currency: string | null;
}

/** The key `paidAmounts` answers under. */
export const paidKey = (merchantAccount: string, kind: string, entityId: string): string =>
  `${merchantAccount}|${kind}|${entityId}`;

/**
 * What the customer paid, per payment, where a deposit answer said it (`paid_amount` beside an
 * AMOUNT_MISMATCH, where the `amount` asked is not what arrived; kept as decimal text in the status
 * history's details): the latest reading that has it. Keyed by `paidKey`. A payment no answer said it
 * for is left out.
 */
export async function paidAmounts(
  db: Db,
  payments: readonly { merchantAccount: string; kind: string; entityId: string }[],
): Promise<Map<string, PaidAmount>> {
  const out = new Map<string, PaidAmount>();
  if (payments.length === 0) return out;
  const { rows } = await sql<{
    merchant_account: string;
    entity_kind: string;
    entity_id: string;
    paid: string | null;
    currency: string | null;
  }>`
    SELECT k.merchant_account, k.entity_kind, k.entity_id, h.paid, h.currency
      FROM unnest(${payments.map((p) => p.merchantAccount)}::text[], ${payments.map((p) => p.kind)}::text[],
                  ${payments.map((p) => p.entityId)}::text[]) AS k(merchant_account, entity_kind, entity_id)
      JOIN LATERAL (
        SELECT x.details->>'paid_amount' AS paid, x.currency FROM status_history x
         WHERE x.merchant_account = k.merchant_account AND x.entity_kind = k.entity_kind
           AND x.entity_id = k.entity_id AND x.details ? 'paid_amount'
         ORDER BY x.observed_at DESC, x.id DESC LIMIT 1) h ON true`.execute(db);
  for (const r of rows) {
    if (r.paid === null || !isAmountText(r.paid)) continue;
    out.set(paidKey(r.merchant_account, r.entity_kind, r.entity_id), {
      amount: parseAmount(r.paid),
      currency: r.currency,
    });
  }
  return out;
}

/** The operator's decision an entry's memo records (src/db/exceptions/decisions.ts), or null. */
function decisionOf(memo: Record<string, unknown> | null): EntryRow['decision'] {
  if (!memo || typeof memo.by !== 'string') return null;
  return {
    decision: String(memo.decision ?? ''),
    by: memo.by,
    proposedBy: typeof memo.proposedBy === 'string' ? memo.proposedBy : null,
    note: String(memo.note ?? ''),
    exceptionId: String(memo.exceptionId ?? ''),
  };
}

/** One payment with its status history, journal entries (with postings) and exceptions; null if unknown. */
export async function getPayment(
  db: Db,
  merchantAccount: string,
  kind: EntityKind,
  entityId: string,
): Promise<PaymentDetail | null> {
  const { rows } = await sql<MirrorRow>`
    SELECT ${MIRROR_COLUMNS} FROM mirrors m
     WHERE m.merchant_account = ${merchantAccount} AND m.entity_kind = ${kind} AND m.entity_id = ${entityId}`.execute(
    db,
  );
  const row = rows[0];
  if (!row) return null;
  const payment = paymentOf(row);
  const [intent, history, entries, postings, exceptions, refunds, paid] = await Promise.all([
    payment.intentId
      ? db
          .selectFrom('intents')
          .select(['intent_id', 'operation', 'currency', 'amount', 'outcome', 'created_at'])
          .where('intent_id', '=', payment.intentId)
          .executeTakeFirst()
      : undefined,
    db
      .selectFrom('status_history')
      .select([
        'event_id',
        'source',
        'from_status',
        'to_status',
        'observed_at',
        'recorded_at',
        'stale',
        'illegal',
        'currency',
        'amount',
        'status_reason',
        'rejection_code',
        'rejection_reason',
      ])
      .where('merchant_account', '=', merchantAccount)
      .where('entity_kind', '=', kind)
      .where('entity_id', '=', entityId)
      .orderBy('observed_at')
      .orderBy('id')
      .execute(),
    db
      .selectFrom('journal_entries')
      .select([
        'id',
        'effect',
        'direction',
        'book',
        'currency',
        'amount',
        'effective_at',
        'created_at',
        'memo',
      ])
      .where('merchant_account', '=', merchantAccount)
      .where('entity_kind', '=', kind)
      .where('entity_id', '=', entityId)
      .orderBy('id')
      .execute(),
    sql<{ entry_id: string; account: string; amount: string }>`
      SELECT p.entry_id::text AS entry_id, p.account, p.amount::text AS amount
        FROM postings p JOIN journal_entries e ON e.id = p.entry_id
       WHERE e.merchant_account = ${merchantAccount} AND e.entity_kind = ${kind} AND e.entity_id = ${entityId}
       ORDER BY p.id`.execute(db),
    db
      .selectFrom('exceptions')
      .select(['id', 'type', 'severity', 'state'])
      .where('merchant_account', '=', merchantAccount)
      .where('entity_kind', '=', kind)
      .where('entity_id', '=', entityId)
      .orderBy('id')
      .execute(),
    kind === 'deposit'
      ? sql<MirrorRow>`
          SELECT ${MIRROR_COLUMNS} FROM mirrors m
           WHERE m.merchant_account = ${merchantAccount} AND m.entity_kind = 'refund'
             AND m.parent_deposit_id = ${entityId}
           ORDER BY m.created_at, m.entity_id`.execute(db)
      : { rows: [] as MirrorRow[] },
    kind === 'deposit'
      ? paidAmounts(db, [{ merchantAccount, kind, entityId }])
      : new Map<string, PaidAmount>(),
  ]);
  const settlements = await paymentSettlements(db, merchantAccount, kind, entityId);
  const { rows: alerts } = await sql<{
    alert_id: string;
    type: string | null;
    severity: string | null;
    created_at: Date;
    published_at: Date | null;
    sinks: string[] | null;
  }>`
    SELECT o.alert_id, o.payload->>'type' AS type, o.payload->>'severity' AS severity, o.created_at, o.published_at,
           (SELECT array_agg(d.sink ORDER BY d.delivered_at, d.sink) FROM alert_deliveries d
             WHERE d.alert_id = o.alert_id) AS sinks
      FROM outbox o
     WHERE o.key = ${`${kind}:${entityId}`} AND o.payload->>'account' = ${merchantAccount}
     ORDER BY o.id`.execute(db);
  const byEntry = new Map<string, { account: string; amount: Minor }[]>();
  for (const p of postings.rows) {
    const list = byEntry.get(p.entry_id) ?? [];
    list.push({ account: p.account, amount: parseLedgerMinor(p.amount) });
    byEntry.set(p.entry_id, list);
  }
  return {
    payment,
    settlements,
    intent: intent
      ? {
          intentId: intent.intent_id,
          operation: intent.operation,
          currency: intent.currency,
          amount: parseLedgerMinor(intent.amount),
          outcome: intent.outcome,
          createdAt: intent.created_at,
        }
      : null,
    history: history.map((h) => ({
      eventId: h.event_id,
      source: h.source,
      fromStatus: h.from_status,
      toStatus: h.to_status,
      observedAt: h.observed_at,
      recordedAt: h.recorded_at,
      stale: h.stale,
      illegal: h.illegal,
      currency: h.currency,
      amount: toMinorOrNull(h.amount),
      statusReason: h.status_reason,
      rejectionCode: h.rejection_code,
      rejectionReason: h.rejection_reason,
    })),
    refunds: refunds.rows.map((r) => ({
      entityId: r.entity_id,
      status: r.status,
      statusSince: r.status_since,
      currency: r.currency,
      amount: toMinorOrNull(r.amount),
    })),
    paid: paid.get(paidKey(merchantAccount, kind, entityId)) ?? null,
    entries: entries.map((e) => ({
      id: String(e.id),
      effect: e.effect,
      direction: Number(e.direction) === -1 ? -1 : 1,
      book: e.book,
      currency: e.currency,
      amount: parseLedgerMinor(e.amount),
      effectiveAt: e.effective_at,
      bookedAt: e.created_at,
      postings: byEntry.get(String(e.id)) ?? [],
      decision: decisionOf(e.memo),
    })),
    exceptions: exceptions.map((x) => ({
      id: String(x.id),
      type: x.type,
      severity: x.severity,
      state: x.state,
    })),
    alerts: alerts.map((a) => ({
      alertId: a.alert_id,
      type: a.type ?? '',
      severity: a.severity ?? '',
      raisedAt: a.created_at,
      publishedAt: a.published_at,
      deliveredTo: a.sinks ?? [],
    })),
  };
}
