/**
 * The ledger service: `applyObservations` and `recordIntents`, batch-oriented, idempotent and
 * convergent. For each batch it reads the entities' mirror rows, whole histories and booked entries in one
 * statement without a lock (plus the intents of entities not yet linked), recomputes each entity's state
 * from its whole history (src/domain/effects.ts), and writes through `writeBatch`: it claims the mirror rows
 * it read by the versions it read (a row another transaction wrote since fails the batch, `MirrorMoved`),
 * then writes history, entries and postings; then exceptions and alert outbox rows, in the same
 * transaction. The caller owns the transaction; `withLedgerTransaction` (src/db/transaction.ts) runs one
 * with retries on serialization failures (a failed claim among them) and deadlocks.
 */
import type { AppliedEntry, PlannedEntry } from '../../domain/effects.ts';
import { DEFAULT_EXCEPTION_RULES, type ExceptionRules } from '../../domain/exception-rules.ts';
import { refundWriteAheadRef } from '../../domain/intent.ts';
import { type Intent, intentKind, type LedgerObservation } from '../../domain/observation.ts';
import type { EntityKind } from '../../domain/statuses.ts';
import type { Logger } from '../../logger.ts';
import { type ExceptionToRaise, raiseExceptions } from '../exceptions/raise.ts';
import type { Db } from '../schema.ts';
import {
  type ApplyResult,
  bareMirror,
  crossEntityExceptions,
  type Incoming,
  type LoadedBatch,
  newMirror,
  type PlannedWrites,
  planAndCollect,
} from './batch-plan.ts';
import type { HeldMirror } from './claim.ts';
import { type EntityStateCache, settledIntent } from './entity-cache.ts';
import { insertIntents, loadIntents, mirrorsByExternalRef } from './intents.ts';
import { type EntityRef, refKey } from './keys.ts';
import { crossEntityRows, loadBatch, loadRefundDeposits } from './read.ts';
import { ensureMerchantAccounts, ensureMirrors, type WriteResult, writeBatch } from './write.ts';

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
  // New entities get their mirror row (and their merchant account) from `writeBatch`, written once.
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
  const out: PlannedWrites = {
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
  out: PlannedWrites,
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
