import type { AppliedEntry, HistoryItem, PlannedEntry } from '../domain/effects.ts';
import { DEFAULT_EXCEPTION_RULES, type ExceptionRules } from '../domain/exception-rules.ts';
import { refundWriteAheadRef } from '../domain/intent.ts';
import { formatAmount } from '../domain/money.ts';
import { type Intent, intentKind, type LedgerObservation } from '../domain/observation.ts';
import { planEntity } from '../domain/plan.ts';
import { nextPollAt } from '../domain/polling.ts';
import type { AnyStatus, EntityKind } from '../domain/statuses.ts';
import type { Logger } from '../logger.ts';
import { type ExceptionToRaise, raiseExceptions } from './exceptions.ts';
import {
  type CrossEntityRows,
  crossEntityRows,
  type EntityRef,
  EntityStateCache,
  type EntryToBook,
  ensureMerchantAccounts,
  ensureMirrors,
  type HeldMirror,
  type HistoryRow,
  insertIntents,
  type LinkedIntent,
  loadBatch,
  loadIntents,
  loadRefundDeposits,
  type MirrorState,
  type MirrorUpdate,
  mirrorsByExternalRef,
  type RefundDeposits,
  refKey,
  settledIntent,
  type WriteResult,
  writeBatch,
} from './ledger-repository.ts';
import type { Db } from './schema.ts';

export { EntityStateCache };

export interface LedgerOptions {
  rules?: ExceptionRules;
  /** Clock for exception timestamps and intent-only poll schedules (tests pass a fixed one). */
  now?: Date;
  /** When given, milliseconds spent per step are added to it (the bench reports them). */
  timings?: Record<string, number>;
  /** Who and why, recorded on every journal entry this call books (an operator's decision). */
  memo?: Record<string, unknown>;
  /** Where each batch that booked or raised something is summed up (debug); none: not logged. */
  logger?: Pick<Logger, 'debug'>;
  /**
   * The entity states this process wrote last, for a long-running writer of one database (the reconciler,
   * the bench): an entity whose mirror row is still the version written with them is not read again.
   */
  known?: EntityStateCache;
}

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

interface Incoming {
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

/**
 * Records a batch of observations and brings the ledger of every entity they touch to the wanted state.
 * An entity seen for the first time gets its mirror row from the batch's write, whole.
 * Replaying the same observations, in any order and any number of times, leaves the same ledger.
 */
export async function applyObservations(
  trx: Db,
  observations: readonly LedgerObservation[],
  options: LedgerOptions = {},
): Promise<ApplyResult> {
  const incoming = new Map<string, Incoming>();
  const refs = new Map<string, EntityRef & { externalRef: string | null }>();
  const seen = new Set<string>();
  for (const o of observations) {
    if (seen.has(o.eventId)) continue;
    seen.add(o.eventId);
    const k = refKey(o);
    if (o.externalRef || !refs.has(k))
      refs.set(k, { account: o.account, kind: o.kind, entityId: o.entityId, externalRef: o.externalRef });
    const entry = incoming.get(k);
    if (entry) entry.observations.push(o);
    else incoming.set(k, { observations: [o] });
  }
  // New entities get their mirror row (and their merchant account) from `writeStatement`, written once.
  return reconcile(trx, refs, incoming, new Set(), options);
}

export interface RecordIntentsResult extends ApplyResult {
  intentsRecorded: number;
}

/** A record written ahead of its creation call (recordingClient): no answer yet. */
function isPending(i: Intent): boolean {
  return i.outcome === 'unknown' && i.entityId === null && i.response === null;
}

/**
 * Records the merchant's intents (idempotent by intent id; a pending one completed by a later record) and recomputes the entities they name, so
 * effects that waited for an amount (cashouts) are booked and mismatches are raised.
 */
export async function recordIntents(
  trx: Db,
  intents: readonly Intent[],
  options: LedgerOptions = {},
): Promise<RecordIntentsResult> {
  const rules = options.rules ?? DEFAULT_EXCEPTION_RULES;
  // One record per intent id; of a pending record and its completion, the completion (whatever the order).
  const byId = new Map<string, Intent>();
  for (const i of intents) {
    if (!byId.has(i.intentId) || !isPending(i)) byId.set(i.intentId, i);
  }
  const unique = [...byId.values()].sort((a, b) => (a.intentId < b.intentId ? -1 : 1));
  const empty = { recorded: 0, entities: 0, entriesBooked: 0, exceptionsRaised: 0, waiting: 0 };
  if (unique.length === 0) return { ...empty, intentsRecorded: 0 };
  await ensureMerchantAccounts(
    trx,
    unique.map((i) => i.account),
  );
  const fresh = await insertIntents(trx, unique);
  const freshIntents = unique.filter((i) => fresh.has(i.intentId));
  const refs = new Map<string, EntityRef & { externalRef: string | null }>();
  const toCreate: {
    account: string;
    kind: EntityKind;
    entityId: string;
    externalRef: string;
    nextPollAt: Date;
  }[] = [];
  for (const i of freshIntents) {
    if (i.entityId === null || i.outcome === 'declined') continue;
    const ref = { account: i.account, kind: intentKind(i.operation), entityId: i.entityId };
    refs.set(refKey(ref), { ...ref, externalRef: i.externalRef });
    toCreate.push({
      ...ref,
      externalRef: i.externalRef,
      nextPollAt: new Date(i.createdAt.getTime() + rules.polling.firstDelayMs),
    });
  }
  const byRef = freshIntents.filter((i) => i.entityId === null);
  if (byRef.length > 0) {
    const matched = await mirrorsByExternalRef(
      trx,
      byRef.map((i) => ({ account: i.account, kind: intentKind(i.operation), externalRef: i.externalRef })),
    );
    for (const m of matched) refs.set(refKey(m), m);
  }
  await ensureMirrors(trx, toCreate);
  const keys = new Set(refs.keys());
  const result = await reconcile(trx, refs, new Map(), keys, options);
  return { ...result, intentsRecorded: fresh.size };
}

/** What `reconcile` reads for a batch before planning: mirror rows, histories, bookings, intents, refunds' deposits. */
interface LoadedBatch {
  /** The mirror rows read, by entity key. */
  mirrors: Map<string, MirrorState>;
  /** Read-only: the arrays may be `known`'s own. */
  histories: Map<string, readonly HistoryItem[]>;
  applied: Map<string, readonly AppliedEntry[]>;
  intents: Map<string, LinkedIntent>;
  refunds: RefundDeposits;
}

async function loadForReconcile(
  trx: Db,
  refs: readonly (EntityRef & { externalRef: string | null })[],
  keys: readonly string[],
  incoming: ReadonlyMap<string, Incoming>,
  intentTouched: ReadonlySet<string>,
  step: (name: string) => void,
  known: EntityStateCache | undefined,
): Promise<LoadedBatch> {
  const { mirrors, histories, applied } = await loadBatch(trx, refs, known, keys);
  step('load');
  // The intent linked last time stays right unless a new intent arrived for the entity (recordIntents
  // marks those), so only unlinked or intent-touched entities search the intents table.
  const externalRefs: (EntityRef & { externalRefs: string[] })[] = [];
  for (let i = 0; i < refs.length; i++) {
    const k = keys[i]!;
    if (mirrors.get(k)?.intent && !intentTouched.has(k)) continue;
    const r = refs[i]!;
    const set = new Set<string>();
    const add = (x: string | null | undefined) => {
      if (x) set.add(x);
    };
    add(r.externalRef);
    add(mirrors.get(k)?.externalRef);
    // A refund's reading names no merchant reference: its deposit and amount find the intent written
    // ahead of its creation (`refundWriteAheadRef`) when the completed record never came.
    const refundRef = (x: { parentDepositId: string | null; amount: bigint | null }) =>
      r.kind === 'refund' && x.parentDepositId !== null && x.amount !== null
        ? refundWriteAheadRef(x.parentDepositId, x.amount)
        : null;
    for (const h of histories.get(k) ?? []) {
      add(h.externalRef);
      add(refundRef(h));
    }
    for (const o of incoming.get(k)?.observations ?? []) {
      add(o.externalRef);
      add(refundRef(o));
    }
    externalRefs.push({ ...r, externalRefs: [...set] });
  }
  const intents = await loadIntents(trx, externalRefs);
  // A refund of a test deposit is booked in the test book: the deposits of the batch's refunds that the
  // ledger knows as test. A deposit of this batch is seen below before its refunds (refs sort deposits
  // first) and its flag from this batch counts. Should a refund be booked live before its deposit is known
  // as test, a later reading of the refund moves its entries to the test book (reversal and re-posting).
  const refunds = await loadRefundDeposits(trx, refs, (k) => {
    const arriving = incoming.get(k)?.observations;
    const recorded = histories.get(k);
    if (arriving === undefined) return recorded ?? [];
    return recorded === undefined ? arriving : [...arriving, ...recorded];
  });
  step('load intents');
  return { mirrors, histories, applied, intents, refunds };
}

/** The rows a batch writes: history, entries, mirrors, exceptions, and the keys of cross-entity checks. */
interface BatchWrites {
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

/**
 * Brings the entities of `byKey` (by `refKey`) to their wanted state, in key order: `refKey`'s separator
 * sorts before any character a field holds, so key order is `compareRefs` order (account, kind, id).
 */
async function reconcile(
  trx: Db,
  byKey: ReadonlyMap<string, EntityRef & { externalRef: string | null }>,
  incoming: ReadonlyMap<string, Incoming>,
  intentTouched: ReadonlySet<string>,
  options: LedgerOptions,
): Promise<ApplyResult> {
  const rules = options.rules ?? DEFAULT_EXCEPTION_RULES;
  const now = options.now ?? new Date();
  const keys = [...byKey.keys()].sort();
  const refs = keys.map((k) => byKey.get(k)!);
  const result: ApplyResult = {
    recorded: 0,
    entities: refs.length,
    entriesBooked: 0,
    exceptionsRaised: 0,
    waiting: 0,
  };
  if (refs.length === 0) return result;

  const timings = options.timings;
  let mark = performance.now();
  const step = (name: string) => {
    if (!timings) return;
    const t = performance.now();
    timings[name] = (timings[name] ?? 0) + t - mark;
    mark = t;
  };
  const memo = options.memo ? JSON.stringify(options.memo) : null;
  const known = options.known;
  const loaded = await loadForReconcile(trx, refs, keys, incoming, intentTouched, step, known);
  const out: BatchWrites = {
    history: [],
    entries: [],
    mirrors: [],
    raised: [],
    frozen: [],
    newDeposits: [],
    touchedRefunds: [],
    recorded: new Array(refs.length),
    booked: new Array(refs.length),
    linked: new Array(refs.length),
    mirrorAt: new Array(refs.length),
  };
  for (let r = 0; r < refs.length; r++) {
    const ref = refs[r]!;
    const k = keys[r]!;
    const mirror = loaded.mirrors.get(k) ?? newMirror(ref);
    const written = out.mirrors.length;
    planAndCollect(ref, k, r, mirror, loaded, incoming, intentTouched, rules, now, result, out, memo);
    // A new entity whose plan writes no mirror (frozen, or nothing to record) still gets its row, as
    // known so far: its reference and no status.
    if (mirror.version === null && out.mirrors.length === written) {
      out.mirrors.push(bareMirror(mirror));
      out.linked[r] = null;
    }
    if (out.mirrors.length > written) out.mirrorAt[r] = written;
  }
  step('compute');
  const sent = { history: out.history.length, entries: out.entries.length };
  // A frozen entity's row keeps its facts: it is claimed by a new version only, as the written rows are
  // by their update.
  const held: HeldMirror[] = [];
  for (const ref of out.frozen) {
    const m = loaded.mirrors.get(refKey(ref));
    if (m?.version) held.push({ account: m.account, kind: m.kind, entityId: m.entityId, version: m.version });
  }
  const written = await writeBatch(trx, {
    history: out.history,
    entries: out.entries,
    mirrors: out.mirrors,
    held,
  });
  result.entriesBooked = written.booked;
  // The cross-entity checks read the mirrors as written, and their exceptions (types no plan raises) are
  // raised with the plans' in one statement, whose rows are locked in key order.
  const cross = await crossEntityChecks(trx, out.newDeposits, out.touchedRefunds);
  if (known) remember(known, keys, loaded, out, written, sent);
  step('write');
  result.exceptionsRaised = await raiseExceptions(trx, [...out.raised, ...cross], now, rules);
  step('exceptions');
  if (result.entriesBooked > 0 || result.exceptionsRaised > 0) {
    options.logger?.debug({ module: 'ledger', ...result }, 'ledger batch applied');
  }
  return result;
}

/** The state of an entity without a mirror row yet (seen for the first time): inserted by `writeStatement`. */
function newMirror(ref: EntityRef & { externalRef: string | null }): MirrorState {
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
function bareMirror(m: MirrorState): MirrorUpdate {
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

/**
 * Keeps what the batch wrote of each entity in `known`, under the version of the mirror row written with
 * it: the history and entries read plus those written (an entity the batch did not write: those read,
 * under the version read). Every other entity of the batch is forgotten; none is
 * kept when the tables skipped a row the batch sent (an event id or entry key recorded already), since
 * then the tables hold something else than the batch's rows; nor frozen ones (their row changes again).
 */
function remember(
  known: EntityStateCache,
  keys: readonly string[],
  loaded: LoadedBatch,
  out: BatchWrites,
  written: WriteResult,
  sent: { history: number; entries: number },
): void {
  if (written.recorded !== sent.history || written.booked !== sent.entries) {
    for (const k of keys) known.delete(k);
    return;
  }
  const frozen = out.frozen.length === 0 ? null : new Set(out.frozen.map(refKey));
  // Each entity is set (which puts it last) or forgotten: one operation on the cache per entity.
  for (let r = 0; r < keys.length; r++) {
    const k = keys[r]!;
    if (frozen?.has(k)) {
      known.delete(k);
      continue;
    }
    const at = out.mirrorAt[r];
    const version = at === undefined ? undefined : written.versions[at];
    if (version !== undefined) {
      const linked = out.linked[r];
      known.set(k, {
        version,
        history: withAdded(loaded.histories.get(k), out.recorded[r]),
        applied: withAdded(loaded.applied.get(k), out.booked[r]?.map(appliedOf)),
        intent: linked === undefined ? undefined : settledIntent(linked),
      });
      continue;
    }
    // Nothing written (a replay): the row is still the version read, and so are its history, entries and
    // intent.
    const read = loaded.mirrors.get(k);
    if (read?.version)
      known.set(k, {
        version: read.version,
        history: loaded.histories.get(k) ?? [],
        applied: loaded.applied.get(k) ?? [],
        intent: settledIntent(read.intent),
      });
    else known.delete(k);
  }
}

/**
 * `read` followed by `added`. The cache's arrays are never changed in place (a batch is given them as
 * they are), so `read` is kept as it is when nothing was added.
 */
function withAdded<T>(read: readonly T[] | undefined, added: readonly T[] | undefined): readonly T[] {
  if (read === undefined) return added ?? [];
  return added === undefined || added.length === 0 ? read : read.concat(added);
}

/** An entry as `loadBatch` reads it back (the planned entry less its key and postings). */
function appliedOf(e: PlannedEntry): AppliedEntry {
  return {
    effect: e.effect,
    direction: e.direction,
    seq: e.seq,
    book: e.book,
    currency: e.currency,
    amount: e.amount,
    feeCurrency: e.feeCurrency,
    feeAmount: e.feeAmount,
  };
}

/** Plans one entity of the batch (`planEntity`) and adds the rows that record the plan to `out`. */
function planAndCollect(
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
  out: BatchWrites,
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

/**
 * DUPLICATE_INVOICE (a new deposit reuses an invoice id) and OVER_REFUNDED (refunds holding or paid out
 * more than their deposit), read after the batch's write (`crossEntityRows`). One index probe per key
 * (LATERAL), so the cost does not grow with the table.
 */
async function crossEntityChecks(
  trx: Db,
  newDeposits: readonly (EntityRef & { externalRef: string })[],
  refunds: readonly (EntityRef & { parentDepositId: string })[],
): Promise<ExceptionToRaise[]> {
  const parents = [...new Map(refunds.map((r) => [`${r.account}\u0000${r.parentDepositId}`, r])).values()];
  const read = await crossEntityRows(
    trx,
    newDeposits,
    parents.map((p) => ({ account: p.account, depositId: p.parentDepositId })),
  );
  return crossEntityExceptions(newDeposits, read);
}

/** The exceptions of `crossEntityChecks`' read. */
function crossEntityExceptions(
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
