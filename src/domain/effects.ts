/**
 * The balance-effect rules of the ledger (docs/architecture.md, "The ledger"), as pure functions.
 *
 * An entity's state is a pure function of its whole observation history: sort by observed_at (ties by
 * lifecycle order, then event id), walk it, and accept an observation when its status is reachable
 * (`canReach`) from the last accepted one; anything else is illegal and not applied. The wanted effects
 * follow from that state and the amounts in use; the journal then gets the difference between wanted
 * and applied (reversals of effects no longer wanted, applications of missing ones). So any order and
 * any number of replays converge on the same ledger.
 */
import { assertNever } from './errors.ts';
import type { Minor } from './money.ts';
import type { HistorySource } from './observation.ts';
import {
  type AnyStatus,
  canReach,
  type EntityKind,
  type EntityStatus,
  isStatus,
  STATUSES,
} from './statuses.ts';

export const EFFECTS = [
  'credit',
  'fee',
  'early_release_reversal',
  'crypto_approved',
  'crypto_delivered',
  'reserve',
  'release',
  'settle',
  'late_reversal',
] as const;
export type Effect = (typeof EFFECTS)[number];

export const BOOKS = ['live', 'test', 'crypto'] as const;
export type Book = (typeof BOOKS)[number];

/** Ledger accounts of each book (refunds of test deposits use `test_reserved` and `test_refunds`). */
export const BOOK_ACCOUNTS = {
  live: ['available', 'reserved', 'deposits', 'fees', 'payouts', 'refunds'],
  test: ['test_available', 'test_deposits', 'test_fees', 'test_reserved', 'test_refunds'],
  crypto: ['crypto_payers', 'crypto_in_transit', 'crypto_customer_wallets'],
} as const satisfies Record<Book, readonly string[]>;

// ---------------------------------------------------------------- status path

/** One recorded observation, as far as the rules need it. */
export interface HistoryItem {
  eventId: string;
  /** Null when the provider answered "not found". */
  status: string | null;
  observedAt: Date;
  source: HistorySource;
  externalRef: string | null;
  currency: string | null;
  amount: Minor | null;
  feeCurrency: string | null;
  feeAmount: Minor | null;
  feeOnPayer: boolean | null;
  test: boolean;
  crypto: boolean;
  statusReason: string | null;
  payerVerification: string | null;
  rejectionCode: string | null;
  rejectionReason: string | null;
  parentDepositId: string | null;
}

export interface PathState {
  /** Last legal status; null when no observation carried a status. */
  status: AnyStatus | null;
  /** observed_at of the first observation of the current status run. */
  statusSince: Date | null;
  everCompleted: boolean;
  everEarlyReleased: boolean;
  /** observed_at of the first COMPLETED on the legal path. */
  completedAt: Date | null;
  /** Event ids not applied because their status is not reachable from the legal path. */
  illegal: ReadonlySet<string>;
  /** For each event id with a status, the legal status before it on the walk (null for the first). */
  fromStatus: ReadonlyMap<string, AnyStatus | null>;
  /** The history in walk order. */
  sorted: readonly HistoryItem[];
}

function statusRank(kind: EntityKind, status: string | null): number {
  if (status === null) return -1;
  return (STATUSES[kind] as readonly string[]).indexOf(status);
}

/** Deterministic order: observed_at, then lifecycle order of the status, then event id. */
export function compareHistory(kind: EntityKind, a: HistoryItem, b: HistoryItem): number {
  const t = a.observedAt.getTime() - b.observedAt.getTime();
  if (t !== 0) return t;
  const r = statusRank(kind, a.status) - statusRank(kind, b.status);
  if (r !== 0) return r;
  return a.eventId < b.eventId ? -1 : a.eventId > b.eventId ? 1 : 0;
}

/** Walks the whole history and returns the legal path's state. */
export function derivePath(kind: EntityKind, history: readonly HistoryItem[]): PathState {
  // Histories mostly come in order already: checked in one pass before a sort (which allocates).
  const sorted = history.slice();
  for (let i = 1; i < sorted.length; i++) {
    if (compareHistory(kind, sorted[i - 1]!, sorted[i]!) > 0) {
      sorted.sort((a, b) => compareHistory(kind, a, b));
      break;
    }
  }
  let status: AnyStatus | null = null;
  let statusSince: Date | null = null;
  let everCompleted = false;
  let everEarlyReleased = false;
  let completedAt: Date | null = null;
  // Most paths have no illegal reading: they share one empty set.
  let illegal: Set<string> | null = null;
  const fromStatus = new Map<string, AnyStatus | null>();
  for (const item of sorted) {
    if (item.status === null) continue;
    if (!isStatus(kind, item.status)) {
      illegal ??= new Set();
      illegal.add(item.eventId);
      fromStatus.set(item.eventId, status);
      continue;
    }
    const next = item.status as EntityStatus<typeof kind>;
    fromStatus.set(item.eventId, status);
    // An operator's acceptance of the provider's status applies whatever the tables say.
    if (
      item.source !== 'operator' &&
      status !== null &&
      !canReach(kind, status as EntityStatus<typeof kind>, next)
    ) {
      illegal ??= new Set();
      illegal.add(item.eventId);
      continue;
    }
    if (status !== next) statusSince = item.observedAt;
    status = next;
    if (next === 'COMPLETED' && !everCompleted) {
      everCompleted = true;
      completedAt = item.observedAt;
    }
    if (next === 'EARLY_RELEASED') everEarlyReleased = true;
  }
  return {
    status,
    statusSince,
    everCompleted,
    everEarlyReleased,
    completedAt,
    illegal: illegal ?? NO_EVENTS,
    fromStatus,
    sorted,
  };
}

/** The empty set of event ids that paths without an illegal reading share (read-only by its type). */
const NO_EVENTS: ReadonlySet<string> = new Set();

// ---------------------------------------------------------------- the effect table

/** What the effect table needs to know about an entity. */
export interface EffectState {
  kind: EntityKind;
  status: AnyStatus | null;
  everCompleted: boolean;
  everEarlyReleased: boolean;
  test: boolean;
  crypto: boolean;
}

export function bookOf(kind: EntityKind, test: boolean, crypto: boolean): Book {
  // A refund is test when its deposit is (the ledger takes the flag from the deposit); cashouts never are.
  if (kind === 'cashout') return 'live';
  if (test) return 'test';
  if (kind === 'refund') return 'live';
  return crypto ? 'crypto' : 'live';
}

const DEPOSIT_FAILED: readonly string[] = ['CANCELLED', 'DECLINED', 'EXPIRED'];
/** Statuses in which a cashout or refund holds money in `reserved` (the effect table's `reserve` only). */
export const PAYOUT_IN_FLIGHT: readonly string[] = ['PENDING', 'ON_HOLD', 'DELIVERED', 'INCORRECT_DETAILS'];

/** The effect table's rows, shared (read-only): computing a state's effects allocates nothing. */
const NO_EFFECTS: readonly Effect[] = Object.freeze([]);
const CRYPTO_APPROVED: readonly Effect[] = Object.freeze(['crypto_approved']);
const CRYPTO_DELIVERED: readonly Effect[] = Object.freeze(['crypto_approved', 'crypto_delivered']);
const CREDITED: readonly Effect[] = Object.freeze(['credit', 'fee']);
const CREDIT_REVERSED: readonly Effect[] = Object.freeze(['credit', 'fee', 'early_release_reversal']);
const RESERVED: readonly Effect[] = Object.freeze(['reserve']);
const RELEASED: readonly Effect[] = Object.freeze(['reserve', 'release']);
const SETTLED: readonly Effect[] = Object.freeze(['reserve', 'settle']);
const LATE_REVERSED: readonly Effect[] = Object.freeze(['reserve', 'settle', 'late_reversal']);

/**
 * The effect table of docs/architecture.md: the effects an entity must have, from its current status and
 * whether it ever reached COMPLETED or EARLY_RELEASED. Test deposits follow the live rules in the test
 * book; crypto deposits have their own two effects.
 */
export function wantedEffectNames(state: EffectState): readonly Effect[] {
  const { kind, status } = state;
  if (status === null) return NO_EFFECTS;
  switch (kind) {
    case 'deposit': {
      if (bookOf(kind, state.test, state.crypto) === 'crypto') {
        if (status === 'APPROVED') return CRYPTO_APPROVED;
        if (status === 'COMPLETED') return CRYPTO_DELIVERED;
        return NO_EFFECTS;
      }
      if (status === 'COMPLETED' || status === 'EARLY_RELEASED') return CREDITED;
      if (DEPOSIT_FAILED.includes(status) && state.everEarlyReleased) return CREDIT_REVERSED;
      return NO_EFFECTS;
    }
    case 'cashout':
    case 'refund': {
      if (PAYOUT_IN_FLIGHT.includes(status)) return RESERVED;
      if (status === 'CANCELLED') return RELEASED;
      if (status === 'REJECTED') return state.everCompleted ? LATE_REVERSED : RELEASED;
      if (status === 'COMPLETED') return SETTLED;
      return NO_EFFECTS;
    }
    default:
      return assertNever(kind, 'entity kind');
  }
}

/** A cashout or refund rejected after it had completed: the bank returned the money. */
export function isLateRejection(state: EffectState): boolean {
  return wantedEffectNames(state).includes('late_reversal');
}

/** A deposit released early that then failed: the credit is taken back. */
export function isEarlyReleaseReversed(state: EffectState): boolean {
  return wantedEffectNames(state).includes('early_release_reversal');
}

// ---------------------------------------------------------------- amounts and postings

/** The parameters an effect's postings are computed from; two applications are equal when these are. */
export interface EffectParams {
  book: Book;
  currency: string;
  /** Gross amount, or the fee for `fee`. */
  amount: Minor;
  /** For `early_release_reversal`: the fee reversed with the credit (null when no fee was debited). */
  feeCurrency: string | null;
  feeAmount: Minor | null;
}

export interface WantedEffect extends EffectParams {
  effect: Effect;
}

/** Amounts an entity's effects are computed from. */
export interface EffectAmounts {
  currency: string | null;
  amount: Minor | null;
  feeCurrency: string | null;
  feeAmount: Minor | null;
  feeOnPayer: boolean;
}

export interface WantedResult {
  effects: WantedEffect[];
  /** Effects wanted by the table whose amount is not known yet (they wait for the intent). */
  waiting: readonly Effect[];
}

/**
 * The wanted effects with their parameters. Zero amounts post nothing. Called for every entity of every
 * batch: the table's row is walked by index (a for-of over the frozen row allocates an iterator result
 * per effect) and, with the amount known, nothing waits and the row's own array is not copied.
 */
export function wantedEffects(state: EffectState, amounts: EffectAmounts): WantedResult {
  const names = wantedEffectNames(state);
  const book = bookOf(state.kind, state.test, state.crypto);
  const effects: WantedEffect[] = [];
  const known = amounts.amount !== null && amounts.currency !== null;
  // The fee is debited from the merchant unless the payer pays it; a zero fee posts nothing.
  const feeAmount =
    !amounts.feeOnPayer && amounts.feeAmount !== null && amounts.feeAmount > 0n ? amounts.feeAmount : null;
  const feeCurrency = feeAmount === null ? null : (amounts.feeCurrency ?? amounts.currency);
  for (let i = 0; i < names.length; i++) {
    const effect = names[i]!;
    if (effect === 'fee') {
      if (feeAmount !== null && feeCurrency) {
        effects.push({
          effect,
          book,
          currency: feeCurrency,
          amount: feeAmount,
          feeCurrency: null,
          feeAmount: null,
        });
      }
      continue;
    }
    if (!known || amounts.amount === 0n) continue;
    const withFee = effect === 'early_release_reversal' && feeAmount !== null && feeCurrency;
    effects.push({
      effect,
      book,
      currency: amounts.currency!,
      amount: amounts.amount!,
      feeCurrency: withFee ? feeCurrency : null,
      feeAmount: withFee ? feeAmount : null,
    });
  }
  // Every effect of the table but the fee waits for the amount when it is not known yet.
  return { effects, waiting: known ? NO_EFFECTS : names.filter((e) => e !== 'fee') };
}

export interface PostingLine {
  account: string;
  currency: string;
  /** Signed minor units, debit positive. */
  amount: Minor;
}

function creditLines(p: EffectParams, book: Book): PostingLine[] {
  const [avail, deposits] = book === 'test' ? ['test_available', 'test_deposits'] : ['available', 'deposits'];
  return [
    { account: avail, currency: p.currency, amount: p.amount },
    { account: deposits, currency: p.currency, amount: -p.amount },
  ];
}

function feeLines(book: Book, currency: string, fee: Minor): PostingLine[] {
  const [fees, avail] = book === 'test' ? ['test_fees', 'test_available'] : ['fees', 'available'];
  return [
    { account: fees, currency, amount: fee },
    { account: avail, currency, amount: -fee },
  ];
}

/** The accounts a cashout or refund moves money through: a refund of a test deposit stays in the test book. */
function outflowAccounts(
  kind: EntityKind,
  book: Book,
): { available: string; reserved: string; paidOut: string } {
  if (book === 'test')
    return { available: 'test_available', reserved: 'test_reserved', paidOut: 'test_refunds' };
  return { available: 'available', reserved: 'reserved', paidOut: kind === 'refund' ? 'refunds' : 'payouts' };
}

/** Sums lines per (account, currency), dropping zeros, in a stable order. */
export function mergeLines(lines: readonly PostingLine[]): PostingLine[] {
  const map = new Map<string, PostingLine>();
  for (const l of lines) {
    const k = `${l.account}\u0000${l.currency}`;
    const prev = map.get(k);
    map.set(k, prev ? { ...prev, amount: prev.amount + l.amount } : { ...l });
  }
  return [...map.values()].filter((l) => l.amount !== 0n);
}

/** The postings of one application of an effect (a reversal is their negation). */
export function effectPostings(kind: EntityKind, effect: Effect, p: EffectParams): PostingLine[] {
  const A = p.amount;
  const c = p.currency;
  switch (effect) {
    case 'credit':
      return creditLines(p, p.book);
    case 'fee':
      return feeLines(p.book, c, A);
    case 'early_release_reversal': {
      const lines = creditLines(p, p.book);
      if (p.feeAmount !== null && p.feeCurrency !== null) {
        lines.push(...feeLines(p.book, p.feeCurrency, p.feeAmount));
      }
      return mergeLines(lines.map((l) => ({ ...l, amount: -l.amount })));
    }
    case 'crypto_approved':
      return [
        { account: 'crypto_in_transit', currency: c, amount: A },
        { account: 'crypto_payers', currency: c, amount: -A },
      ];
    case 'crypto_delivered':
      return [
        { account: 'crypto_customer_wallets', currency: c, amount: A },
        { account: 'crypto_in_transit', currency: c, amount: -A },
      ];
    case 'reserve': {
      const o = outflowAccounts(kind, p.book);
      return [
        { account: o.reserved, currency: c, amount: A },
        { account: o.available, currency: c, amount: -A },
      ];
    }
    case 'release': {
      const o = outflowAccounts(kind, p.book);
      return [
        { account: o.available, currency: c, amount: A },
        { account: o.reserved, currency: c, amount: -A },
      ];
    }
    case 'settle': {
      const o = outflowAccounts(kind, p.book);
      return [
        { account: o.paidOut, currency: c, amount: A },
        { account: o.reserved, currency: c, amount: -A },
      ];
    }
    case 'late_reversal': {
      const o = outflowAccounts(kind, p.book);
      return [
        { account: o.available, currency: c, amount: A },
        { account: o.paidOut, currency: c, amount: -A },
      ];
    }
    default:
      return assertNever(effect, 'effect');
  }
}

// ---------------------------------------------------------------- wanted minus applied

/** One journal entry already booked for the entity. */
export interface AppliedEntry extends EffectParams {
  effect: Effect;
  direction: 1 | -1;
  seq: number;
}

export interface PlannedEntry extends EffectParams {
  idempotencyKey: string;
  effect: Effect;
  direction: 1 | -1;
  seq: number;
  postings: PostingLine[];
}

export function entryKey(
  kind: EntityKind,
  account: string,
  entityId: string,
  effect: Effect,
  direction: 1 | -1,
  seq: number,
): string {
  const base = `${kind}:${account}:${entityId}:${effect}`;
  if (direction === -1) return `${base}:reversal:${seq}`;
  return seq === 1 ? base : `${base}:${seq}`;
}

export function sameParams(a: EffectParams, b: EffectParams): boolean {
  return (
    a.book === b.book &&
    a.currency === b.currency &&
    a.amount === b.amount &&
    a.feeCurrency === b.feeCurrency &&
    a.feeAmount === b.feeAmount
  );
}

export interface EffectLedgerState {
  applications: number;
  reversals: number;
  /** Parameters of the live application when applications exceed reversals by one. */
  active: EffectParams | null;
}

/** Folds the applied entries into per-effect counts and the live application. */
export function appliedState(applied: readonly AppliedEntry[]): Map<Effect, EffectLedgerState> {
  const out = new Map<Effect, EffectLedgerState>();
  for (const e of applied) if (!out.has(e.effect)) out.set(e.effect, effectState(applied, e.effect)!);
  return out;
}

/**
 * One effect's fold of the applied entries (`appliedState`'s, by effect): its applications, its
 * reversals and the live application; undefined when none was booked.
 */
export function effectState(applied: readonly AppliedEntry[], effect: Effect): EffectLedgerState | undefined {
  let applications = 0;
  let reversals = 0;
  let latest: AppliedEntry | undefined;
  for (const e of applied) {
    if (e.effect !== effect) continue;
    if (e.direction === 1) {
      applications += 1;
      if (!latest || e.seq > latest.seq) latest = e;
    } else {
      reversals += 1;
    }
  }
  if (applications === 0 && reversals === 0) return undefined;
  return {
    applications,
    reversals,
    active: applications - reversals === 1 && latest ? paramsOf(latest) : null,
  };
}

function paramsOf(p: EffectParams): EffectParams {
  return {
    book: p.book,
    currency: p.currency,
    amount: p.amount,
    feeCurrency: p.feeCurrency,
    feeAmount: p.feeAmount,
  };
}

const NOT_BOOKED: EffectLedgerState = Object.freeze({ applications: 0, reversals: 0, active: null });

/** The wanted effect named `effect` (the last one, should two carry the name), or undefined. */
function wantedOf(wanted: readonly WantedEffect[], effect: Effect): WantedEffect | undefined {
  let found: WantedEffect | undefined;
  for (const w of wanted) if (w.effect === effect) found = w;
  return found;
}

/**
 * Entries to post so that the applied effects become the wanted ones: a reversal (mirror image, its own
 * key) for each live application that is no longer wanted or whose amounts changed, and an application
 * for each wanted effect not live. Effects in `waiting` are left as they are.
 */
export function planEntries(
  kind: EntityKind,
  account: string,
  entityId: string,
  wanted: readonly WantedEffect[],
  waiting: readonly Effect[],
  applied: readonly AppliedEntry[],
): PlannedEntry[] {
  const plan: PlannedEntry[] = [];
  // Nothing wanted and nothing booked (an entity still pending): nothing to post.
  if (wanted.length === 0 && applied.length === 0) return plan;
  for (const effect of EFFECTS) {
    // Folded per effect (an entity has a few entries): no map of every effect's state per plan.
    const booked = applied.length === 0 ? undefined : effectState(applied, effect);
    const w = wantedOf(wanted, effect);
    // Neither booked nor wanted: nothing to reverse or apply.
    if (booked === undefined && w === undefined) continue;
    if (waiting.includes(effect)) continue;
    const s = booked ?? NOT_BOOKED;
    let live = s.active;
    // Entries written field by field (a spread of the parameters, then more fields, cost a copy and a
    // map transition per field on every entry planned).
    if (live && (!w || !sameParams(live, w))) {
      const seq = s.reversals + 1;
      plan.push({
        book: live.book,
        currency: live.currency,
        amount: live.amount,
        feeCurrency: live.feeCurrency,
        feeAmount: live.feeAmount,
        idempotencyKey: entryKey(kind, account, entityId, effect, -1, seq),
        effect,
        direction: -1,
        seq,
        postings: effectPostings(kind, effect, live).map((l) => ({ ...l, amount: -l.amount })),
      });
      live = null;
    }
    if (w && !live) {
      const seq = s.applications + 1;
      plan.push({
        book: w.book,
        currency: w.currency,
        amount: w.amount,
        feeCurrency: w.feeCurrency,
        feeAmount: w.feeAmount,
        idempotencyKey: entryKey(kind, account, entityId, effect, 1, seq),
        effect,
        direction: 1,
        seq,
        postings: effectPostings(kind, effect, w),
      });
    }
  }
  return plan;
}

/** Net postings of a set of wanted effects (what the ledger must hold for the entity). */
export function netPostings(kind: EntityKind, wanted: readonly WantedEffect[]): PostingLine[] {
  return mergeLines(wanted.flatMap((w) => effectPostings(kind, w.effect, w)));
}

// ---------------------------------------------------------------- facts from history and intent

/** The parts of the merchant's intent the effects can use. */
export interface IntentFacts {
  currency: string;
  amount: Minor;
  feeOnPayer: boolean;
  test: boolean;
  crypto: boolean;
}

export interface EntityFacts extends EffectAmounts {
  test: boolean;
  crypto: boolean;
  /** Latest amount and currency the provider reported (null when none did). */
  providerAmount: Minor | null;
  providerCurrency: string | null;
}

/**
 * Amounts and flags in use for an entity, from the last observation that reported each (walk order, so
 * the result does not depend on arrival order) and the intent. Deposits and refunds use the provider's
 * amount first; cashout status views carry none, so cashouts use the intent's.
 */
export function entityFacts(
  kind: EntityKind,
  sorted: readonly HistoryItem[],
  intent: IntentFacts | null,
): EntityFacts {
  // One backward pass over the observations with a status: the last one, and the last value of each fact
  // that is neither null nor undefined (`??=` keeps looking past both; undefined ends as null below).
  let last: HistoryItem | undefined;
  let providerAmount: Minor | null = null;
  let providerCurrency: string | null = null;
  let feeAmount: Minor | null = null;
  let feeCurrency: string | null = null;
  let lastFeeOnPayer: boolean | null = null;
  for (let i = sorted.length - 1; i >= 0; i--) {
    const h = sorted[i]!;
    if (h.status === null) continue;
    last ??= h;
    providerAmount ??= h.amount;
    providerCurrency ??= h.currency;
    feeAmount ??= h.feeAmount;
    feeCurrency ??= h.feeCurrency;
    lastFeeOnPayer ??= h.feeOnPayer;
  }
  providerAmount ??= null;
  providerCurrency ??= null;
  feeAmount ??= null;
  feeCurrency ??= null;
  const preferIntent = kind === 'cashout';
  const amount = preferIntent
    ? (intent?.amount ?? providerAmount)
    : (providerAmount ?? intent?.amount ?? null);
  const currency = preferIntent
    ? (intent?.currency ?? providerCurrency)
    : (providerCurrency ?? intent?.currency ?? null);
  const feeOnPayer = lastFeeOnPayer ?? intent?.feeOnPayer ?? false;
  return {
    currency,
    amount,
    feeAmount,
    feeCurrency,
    feeOnPayer,
    test: last ? last.test : (intent?.test ?? false),
    crypto: last ? last.crypto : (intent?.crypto ?? false),
    providerAmount,
    providerCurrency,
  };
}
