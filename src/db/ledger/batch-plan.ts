/**
 * One batch's plan turned into rows: each entity planned from its whole history (`planEntity`,
 * src/domain/plan.ts) and the history, entries, mirror rows and exceptions that record the plan collected
 * for the batch's write; and the exceptions of the cross-entity checks.
 */
import type { AppliedEntry, HistoryItem, PlannedEntry } from '../../domain/effects.ts';
import type { ExceptionRules } from '../../domain/exception-rules.ts';
import { formatAmount } from '../../domain/money.ts';
import type { LedgerObservation } from '../../domain/observation.ts';
import { planEntity } from '../../domain/plan.ts';
import { nextPollAt } from '../../domain/polling.ts';
import type { AnyStatus } from '../../domain/statuses.ts';
import type { ExceptionToRaise } from '../exceptions/raise.ts';
import type { MirrorUpdate } from './claim.ts';
import type { LinkedIntent } from './intents.ts';
import type { EntityRef } from './keys.ts';
import type { CrossEntityRows, MirrorState, RefundDeposits } from './read.ts';
import type { EntryToBook, HistoryRow } from './write.ts';

export interface ApplyResult {
  /** Observations recorded in the history (replays excluded). */
  recorded: number;
  entities: number;
  entriesBooked: number;
  exceptionsRaised: number;
  /** Entities with effects waiting for an amount (no intent yet). */
  waiting: number;
}

function toItem(o: LedgerObservation): HistoryItem {
  return {
    eventId: o.eventId,
    status: o.status,
    observedAt: o.observedAt,
    source: o.source,
    externalRef: o.externalRef,
    currency: o.currency,
    amount: o.amount,
    feeCurrency: o.feeCurrency,
    feeAmount: o.feeAmount,
    feeOnPayer: o.feeOnPayer,
    test: o.test,
    crypto: o.crypto,
    statusReason: o.statusReason,
    payerVerification: o.payerVerification,
    rejectionCode: o.rejectionCode,
    rejectionReason: o.rejectionReason,
    parentDepositId: o.parentDepositId,
  };
}

function expiresAtOf(details: Record<string, unknown>): Date | null {
  const v = details.expiration_date ?? details.expirationDate;
  if (typeof v !== 'string' && !(v instanceof Date)) return null;
  const d = new Date(v);
  return Number.isNaN(d.getTime()) ? null : d;
}

/**
 * The last non-null value of each text fact the mirror keeps, in walk order: one backward pass. The status
 * reason belongs to its status (the provider gives it with CANCELLED only): only applied readings of the
 * current `status` count, so a deposit cancelled for THIRD_PARTY_PAYER and completed later by hand does
 * not show COMPLETED (THIRD_PARTY_PAYER).
 */
function latestTexts(sorted: readonly HistoryItem[], status: string | null, illegal: ReadonlySet<string>) {
  let externalRef: string | null = null;
  let statusReason: string | null = null;
  let payerVerification: string | null = null;
  let rejectionCode: string | null = null;
  let rejectionReason: string | null = null;
  let parentDepositId: string | null = null;
  for (let i = sorted.length - 1; i >= 0; i--) {
    const h = sorted[i]!;
    if (externalRef === null) externalRef = h.externalRef;
    if (statusReason === null && h.status === status && !illegal.has(h.eventId))
      statusReason = h.statusReason;
    if (payerVerification === null) payerVerification = h.payerVerification;
    if (rejectionCode === null) rejectionCode = h.rejectionCode;
    if (rejectionReason === null) rejectionReason = h.rejectionReason;
    if (parentDepositId === null) parentDepositId = h.parentDepositId;
  }
  return { externalRef, statusReason, payerVerification, rejectionCode, rejectionReason, parentDepositId };
}

export interface Incoming {
  observations: LedgerObservation[];
}

const NO_HISTORY: readonly HistoryItem[] = [];

const NO_OBSERVATIONS: readonly LedgerObservation[] = [];

/**
 * The arriving observations whose event id the history does not hold (arriving ones are unique by event
 * id). A short history is scanned; a long one is put in a set once.
 */
function freshObservations(
  existing: readonly HistoryItem[],
  arriving: readonly LedgerObservation[] | undefined,
): readonly LedgerObservation[] {
  if (arriving === undefined || arriving.length === 0) return NO_OBSERVATIONS;
  if (existing.length === 0) return arriving;
  if (existing.length * arriving.length > 64) {
    const ids = new Set<string>();
    for (const h of existing) ids.add(h.eventId);
    return arriving.filter((o) => !ids.has(o.eventId));
  }
  const fresh: LedgerObservation[] = [];
  outer: for (const o of arriving) {
    for (const h of existing) if (h.eventId === o.eventId) continue outer;
    fresh.push(o);
  }
  return fresh;
}

/** What `reconcile` reads for a batch before planning: mirror rows, histories, bookings, intents, refunds' deposits. */
export interface LoadedBatch {
  /** The mirror rows read, by entity key. */
  mirrors: Map<string, MirrorState>;
  /** Read-only: the arrays may be `known`'s own. */
  histories: Map<string, readonly HistoryItem[]>;
  applied: Map<string, readonly AppliedEntry[]>;
  intents: Map<string, LinkedIntent>;
  refunds: RefundDeposits;
}

/** The rows a batch writes: history, entries, mirrors, exceptions, and the keys of cross-entity checks. */
export interface PlannedWrites {
  history: HistoryRow[];
  entries: EntryToBook[];
  mirrors: MirrorUpdate[];
  raised: ExceptionToRaise[];
  /** Entities whose immutable facts changed: their mirrors only stop being polled. */
  frozen: EntityRef[];
  newDeposits: (EntityRef & { externalRef: string })[];
  touchedRefunds: (EntityRef & { parentDepositId: string })[];
  /** By the entity's index in the batch: the history items and the entries it sent (for `remember`). */
  recorded: (readonly HistoryItem[] | undefined)[];
  booked: (readonly PlannedEntry[] | undefined)[];
  /** By the entity's index in the batch: the intent its mirror row links, when the batch writes the row. */
  linked: (LinkedIntent | null | undefined)[];
  /** By the entity's index in the batch: the position of its row in `mirrors`, when the batch writes one. */
  mirrorAt: (number | undefined)[];
}

/** The state of an entity without a mirror row yet (seen for the first time): inserted by `writeBatch`. */
export function newMirror(ref: EntityRef & { externalRef: string | null }): MirrorState {
  return {
    account: ref.account,
    kind: ref.kind,
    entityId: ref.entityId,
    version: null,
    status: null,
    everCompleted: false,
    everEarlyReleased: false,
    test: false,
    crypto: false,
    pollAttempts: 0,
    intentId: null,
    firstSeenAt: null,
    externalRef: ref.externalRef,
    intent: null,
  };
}

/** The row of a new entity whose plan wrote none: its key and reference, as `ensureMirrors` creates one. */
export function bareMirror(m: MirrorState): MirrorUpdate {
  return {
    account: m.account,
    kind: m.kind,
    entityId: m.entityId,
    version: null,
    externalRef: m.externalRef,
    status: null,
    statusSince: null,
    everCompleted: false,
    everEarlyReleased: false,
    currency: null,
    amount: null,
    feeCurrency: null,
    feeAmount: null,
    feeOnPayer: false,
    test: false,
    crypto: false,
    statusReason: null,
    payerVerification: null,
    rejectionCode: null,
    rejectionReason: null,
    parentDepositId: null,
    expiresAt: null,
    bankReference: null,
    details: null,
    intentId: null,
    firstSeenAt: null,
    lastSeenAt: null,
    completedAt: null,
    nextPollAt: null,
    rescheduled: false,
    pollAttempts: 0,
  };
}

/** Plans one entity of the batch (`planEntity`) and adds the rows that record the plan to `out`. */
export function planAndCollect(
  ref: EntityRef,
  k: string,
  index: number,
  mirror: MirrorState,
  loaded: LoadedBatch,
  incoming: ReadonlyMap<string, Incoming>,
  intentTouched: ReadonlySet<string>,
  rules: ExceptionRules,
  now: Date,
  result: ApplyResult,
  out: PlannedWrites,
  memo: string | null,
): void {
  const existing = loaded.histories.get(k) ?? NO_HISTORY;
  const freshObs = freshObservations(existing, incoming.get(k)?.observations);
  const freshItems = freshObs.length === 0 ? NO_HISTORY : freshObs.map(toItem);
  const intent = loaded.intents.get(k) ?? (intentTouched.has(k) ? null : mirror.intent);
  const intentNew = intentTouched.has(k) || (intent !== null && mirror.intentId !== intent.intentId);
  const plan = planEntity({
    kind: ref.kind,
    account: ref.account,
    entityId: ref.entityId,
    history: freshItems.length === 0 ? existing : existing.concat(freshItems),
    fresh: freshItems,
    intent,
    intentNew,
    applied: loaded.applied.get(k) ?? [],
    refundOfTestDeposit: ref.kind === 'refund' ? loaded.refunds.isTest(ref) : false,
    before:
      mirror.status === null
        ? null
        : {
            kind: ref.kind,
            status: mirror.status as AnyStatus,
            everCompleted: mirror.everCompleted,
            everEarlyReleased: mirror.everEarlyReleased,
            test: mirror.test,
            crypto: mirror.crypto,
          },
    rules,
  });
  const { path, facts, lastSeen } = plan;
  const frozen = plan.factsChanged.length > 0;
  // A deposit of this batch counts for the refunds that follow it (refs sort deposits first); a frozen
  // deposit keeps the flag its bookings were made with (its mirror's).
  if (ref.kind === 'deposit') {
    if (frozen ? mirror.test : facts.test) loaded.refunds.testDeposits.add(k);
    else loaded.refunds.testDeposits.delete(k);
  }
  if (plan.wanted.waiting.length > 0) result.waiting += 1;
  const effectiveAt = plan.effectiveAt ?? now;
  const { account, kind, entityId } = ref;
  for (const entry of plan.entries) out.entries.push({ account, kind, entityId, entry, effectiveAt, memo });
  if (plan.entries.length > 0) out.booked[index] = plan.entries;
  if (!plan.changed) return;

  let newest = Number.NEGATIVE_INFINITY;
  for (const h of existing) {
    const t = h.observedAt.getTime();
    if (t > newest) newest = t;
  }
  for (let i = 0; i < freshItems.length; i++) {
    const item = freshItems[i]!;
    const t = item.observedAt.getTime();
    out.history.push({
      account,
      kind,
      entityId,
      item,
      fromStatus: path.fromStatus.get(item.eventId) ?? null,
      stale: t < newest,
      illegal: path.illegal.has(item.eventId),
      details: freshObs[i]!.details,
    });
    if (t > newest) newest = t;
  }
  if (freshItems.length > 0) out.recorded[index] = freshItems;
  result.recorded += freshItems.length;
  for (const f of plan.exceptions)
    out.raised.push({ ...ref, type: f.type, details: f.details, fact: f.fact });
  // Frozen (facts that cannot change did): the mirror keeps the facts its bookings were made with, so
  // every invariant stays true; polling it again would change nothing.
  if (frozen) {
    out.frozen.push(ref);
    return;
  }

  // A fresh reading reschedules the entity's next poll; without one the schedule stays as it is.
  let pollAttempts = mirror.pollAttempts;
  let next: Date | null = null;
  const rescheduled = freshItems.length > 0 && lastSeen !== null;
  if (rescheduled) {
    pollAttempts = mirror.status !== path.status ? 0 : mirror.pollAttempts + 1;
    next = nextPollAt(
      {
        kind: ref.kind,
        status: path.status,
        attempts: pollAttempts,
        from: lastSeen,
        completedAt: path.completedAt,
        statusSince: path.statusSince,
      },
      rules.polling,
    );
  }
  // The fresh observation observed last (the later one in arrival order on a tie) gives the details.
  let latestFresh: LedgerObservation | undefined;
  let freshExpiry: Date | null = null;
  // ... and the one observed last that names a bank reference gives it (null keeps the stored one).
  let bankRef: LedgerObservation | undefined;
  for (const o of freshObs) {
    if (!latestFresh || o.observedAt.getTime() >= latestFresh.observedAt.getTime()) latestFresh = o;
    freshExpiry ??= expiresAtOf(o.details);
    if (o.bankReference && (!bankRef || o.observedAt.getTime() >= bankRef.observedAt.getTime())) bankRef = o;
  }
  const texts = latestTexts(path.sorted, path.status, path.illegal);
  const parentDepositId = texts.parentDepositId;
  // A new row has no stored reference for the update's coalesce to keep: the batch's own. A row read's
  // stored reference is not sent again (null keeps it).
  const externalRef =
    texts.externalRef ?? intent?.externalRef ?? (mirror.version === null ? mirror.externalRef : null);
  out.linked[index] = intent;
  out.mirrors.push({
    account: ref.account,
    kind: ref.kind,
    entityId: ref.entityId,
    version: mirror.version,
    externalRef: mirror.version !== null && externalRef === mirror.externalRef ? null : externalRef,
    status: path.status,
    statusSince: path.statusSince,
    everCompleted: path.everCompleted,
    everEarlyReleased: path.everEarlyReleased,
    currency: facts.currency,
    amount: facts.amount,
    feeCurrency: facts.feeCurrency,
    feeAmount: facts.feeAmount,
    feeOnPayer: facts.feeOnPayer,
    test: facts.test,
    crypto: facts.crypto,
    statusReason: texts.statusReason,
    payerVerification: texts.payerVerification,
    rejectionCode: texts.rejectionCode,
    rejectionReason: texts.rejectionReason,
    parentDepositId,
    expiresAt: freshExpiry,
    bankReference: bankRef?.bankReference ?? null,
    details: latestFresh ? latestFresh.details : null,
    intentId: intent?.intentId ?? null,
    firstSeenAt: path.sorted[0]?.observedAt ?? null,
    lastSeenAt: lastSeen,
    completedAt: path.completedAt,
    nextPollAt: next,
    rescheduled,
    pollAttempts,
  });
  const invoice = texts.externalRef;
  if (ref.kind === 'deposit' && mirror.firstSeenAt === null && freshItems.length > 0 && invoice !== null) {
    out.newDeposits.push({ ...ref, externalRef: invoice });
  }
  if (ref.kind === 'refund' && parentDepositId !== null && (freshItems.length > 0 || intentNew)) {
    out.touchedRefunds.push({ ...ref, parentDepositId });
  }
}

/** The exceptions of `crossEntityChecks`' read. */
export function crossEntityExceptions(
  newDeposits: readonly (EntityRef & { externalRef: string })[],
  read: CrossEntityRows,
): ExceptionToRaise[] {
  const out: ExceptionToRaise[] = [];
  if (newDeposits.length > 0) {
    const byInvoice = new Map<string, string[]>();
    for (const r of read.byInvoice) {
      const k = `${r.merchant_account}\u0000${r.external_ref}`;
      byInvoice.set(k, [...(byInvoice.get(k) ?? []), r.entity_id]);
    }
    for (const d of newDeposits) {
      const others = (byInvoice.get(`${d.account}\u0000${d.externalRef}`) ?? []).filter(
        (id) => id !== d.entityId,
      );
      if (others.length > 0) {
        out.push({
          type: 'DUPLICATE_INVOICE',
          account: d.account,
          kind: 'deposit',
          entityId: d.entityId,
          details: { invoiceId: d.externalRef, otherDeposits: others.sort() },
        });
      }
    }
  }
  for (const d of read.refunded) {
    if (d.refunded > d.amount) {
      out.push({
        type: 'OVER_REFUNDED',
        account: d.account,
        kind: 'deposit',
        entityId: d.depositId,
        details: { depositAmount: formatAmount(d.amount), refunded: formatAmount(d.refunded) },
      });
    }
  }
  return out;
}
