/**
 * Status sets and transition tables of the spec's section 3, as data. The sandbox moves entities only
 * along `*_TRANSITIONS` (direct edges); the ledger accepts an observed change when the new status is
 * reachable from the current one (`canReach`), because polling can miss intermediate states
 * (PENDING then COMPLETED, skipping DELIVERED, is a legal path, not an illegal move).
 */
import { AppError } from './errors.ts';

export const ENTITY_KINDS = ['deposit', 'cashout', 'refund'] as const;
export type EntityKind = (typeof ENTITY_KINDS)[number];

// ---------------------------------------------------------------- deposits (3.1)

export const DEPOSIT_STATUSES = [
  'CREATED',
  'PENDING',
  'PENDING_AUTHENTICATION',
  'FOR_REVIEW',
  'APPROVED',
  'EARLY_RELEASED',
  'COMPLETED',
  'DECLINED',
  'CANCELLED',
  'EXPIRED',
] as const;
export type DepositStatus = (typeof DEPOSIT_STATUSES)[number];

/**
 * Direct deposit moves. The spec shows only the 3DS, crypto and expiry rows; the rest follow the
 * provider's documented lifecycle: a created deposit waits for payment (PENDING), may go to manual
 * review, may be released early for trusted payers, and ends COMPLETED, DECLINED, CANCELLED or
 * EXPIRED. An EXPIRED deposit becomes CANCELLED seven days later (docs/provider.md). An early
 * released deposit can still fail (the reversal case of the effect table). An EXPIRED or CANCELLED
 * deposit can still turn COMPLETED by the provider's manual action, a payment that arrived late and was
 * matched by hand (docs/provider.md): a legal move, booked like any completion (LATE_COMPLETION).
 */
export const DEPOSIT_TRANSITIONS: Readonly<Record<DepositStatus, readonly DepositStatus[]>> = {
  CREATED: [
    'PENDING',
    'FOR_REVIEW',
    'APPROVED',
    'EARLY_RELEASED',
    'COMPLETED',
    'DECLINED',
    'CANCELLED',
    'EXPIRED',
  ],
  PENDING: ['FOR_REVIEW', 'APPROVED', 'EARLY_RELEASED', 'COMPLETED', 'DECLINED', 'CANCELLED', 'EXPIRED'],
  PENDING_AUTHENTICATION: ['PENDING', 'COMPLETED', 'DECLINED', 'CANCELLED', 'EXPIRED'],
  FOR_REVIEW: ['EARLY_RELEASED', 'COMPLETED', 'DECLINED', 'CANCELLED'],
  APPROVED: ['COMPLETED'],
  EARLY_RELEASED: ['COMPLETED', 'DECLINED', 'CANCELLED', 'EXPIRED'],
  COMPLETED: [],
  DECLINED: [],
  CANCELLED: ['COMPLETED'],
  EXPIRED: ['CANCELLED', 'COMPLETED'],
};

/** Statuses a deposit can leave only for a late COMPLETED (the provider's manual completion). */
export const DEPOSIT_LATE_COMPLETION_FROM: readonly DepositStatus[] = ['EXPIRED', 'CANCELLED'];

/** Statuses a new deposit can start in (the card endpoint answers synchronously). */
export const DEPOSIT_INITIAL: readonly DepositStatus[] = [
  'CREATED',
  'PENDING',
  'PENDING_AUTHENTICATION',
  'COMPLETED',
  'DECLINED',
];

/**
 * Final for polling: CANCELLED is final although the provider may still complete it by hand; that late
 * completion arrives as a notification (or a backfill), not by polling every cancelled deposit forever.
 */
export const DEPOSIT_FINAL: readonly DepositStatus[] = ['COMPLETED', 'DECLINED', 'CANCELLED'];

// ---------------------------------------------------------------- cashouts (3.2)

export const CASHOUT_STATUSES = [
  'PENDING',
  'ON_HOLD',
  'DELIVERED',
  'COMPLETED',
  'CANCELLED',
  'REJECTED',
  'DECLINED',
] as const;
export type CashoutStatus = (typeof CASHOUT_STATUSES)[number];

export const CASHOUT_TRANSITIONS: Readonly<Record<CashoutStatus, readonly CashoutStatus[]>> = {
  PENDING: ['ON_HOLD', 'CANCELLED', 'DELIVERED'],
  ON_HOLD: ['PENDING', 'CANCELLED'],
  DELIVERED: ['COMPLETED', 'REJECTED'],
  // The one legal backwards move: the beneficiary's bank returns the payout days later.
  COMPLETED: ['REJECTED'],
  CANCELLED: [],
  REJECTED: [],
  DECLINED: [],
};

export const CASHOUT_INITIAL: readonly CashoutStatus[] = ['PENDING', 'ON_HOLD', 'DECLINED'];
/** COMPLETED is final except for the late-rejection corner case, which the poller watches. */
export const CASHOUT_FINAL: readonly CashoutStatus[] = ['CANCELLED', 'REJECTED', 'DECLINED'];

/** Numeric `cashout_status` codes (spec 2.9 and docs/provider.md). DECLINED is never stored. */
export const CASHOUT_STATUS_CODES = {
  PENDING: 0,
  COMPLETED: 1,
  CANCELLED: 2,
  REJECTED: 3,
  DELIVERED: 4,
  ON_HOLD: 5,
} as const satisfies Partial<Record<CashoutStatus, number>>;

export const CASHOUT_STATUS_DESCRIPTIONS: Readonly<Record<keyof typeof CASHOUT_STATUS_CODES, string>> = {
  PENDING: 'Pending',
  COMPLETED: 'Completed',
  CANCELLED: 'Canceled',
  REJECTED: 'Rejected',
  DELIVERED: 'Delivered',
  ON_HOLD: 'On hold',
};

export type StoredCashoutStatus = keyof typeof CASHOUT_STATUS_CODES;

export function cashoutStatusFromCode(code: number): StoredCashoutStatus {
  for (const [status, value] of Object.entries(CASHOUT_STATUS_CODES)) {
    if (value === code) return status as StoredCashoutStatus;
  }
  throw new AppError('VALIDATION_FAILED', `cashout_status: unknown numeric code ${code}`, {
    details: { field: 'cashout_status', rule: 'one of 0-5' },
  });
}

export function cashoutStatusCode(status: StoredCashoutStatus): number {
  return CASHOUT_STATUS_CODES[status];
}

// ---------------------------------------------------------------- refunds (3.3)

export const REFUND_STATUSES = [
  'PENDING',
  'INCORRECT_DETAILS',
  'DELIVERED',
  'COMPLETED',
  'CANCELLED',
  'REJECTED',
  'DECLINED',
] as const;
export type RefundStatus = (typeof REFUND_STATUSES)[number];

export const REFUND_TRANSITIONS: Readonly<Record<RefundStatus, readonly RefundStatus[]>> = {
  PENDING: ['INCORRECT_DETAILS', 'CANCELLED', 'DELIVERED'],
  INCORRECT_DETAILS: ['PENDING', 'CANCELLED'],
  DELIVERED: ['COMPLETED', 'REJECTED'],
  COMPLETED: ['REJECTED'],
  CANCELLED: [],
  REJECTED: [],
  DECLINED: [],
};

export const REFUND_INITIAL: readonly RefundStatus[] = ['PENDING', 'DECLINED'];
export const REFUND_FINAL: readonly RefundStatus[] = ['CANCELLED', 'REJECTED', 'DECLINED'];

// ---------------------------------------------------------------- common

export type EntityStatus<K extends EntityKind> = K extends 'deposit'
  ? DepositStatus
  : K extends 'cashout'
    ? CashoutStatus
    : RefundStatus;

export type AnyStatus = DepositStatus | CashoutStatus | RefundStatus;

export const STATUSES: { readonly [K in EntityKind]: readonly EntityStatus<K>[] } = {
  deposit: DEPOSIT_STATUSES,
  cashout: CASHOUT_STATUSES,
  refund: REFUND_STATUSES,
};

export const TRANSITIONS: {
  readonly [K in EntityKind]: Readonly<Record<EntityStatus<K>, readonly EntityStatus<K>[]>>;
} = {
  deposit: DEPOSIT_TRANSITIONS,
  cashout: CASHOUT_TRANSITIONS,
  refund: REFUND_TRANSITIONS,
};

export const INITIAL: { readonly [K in EntityKind]: readonly EntityStatus<K>[] } = {
  deposit: DEPOSIT_INITIAL,
  cashout: CASHOUT_INITIAL,
  refund: REFUND_INITIAL,
};

export const FINAL: { readonly [K in EntityKind]: readonly EntityStatus<K>[] } = {
  deposit: DEPOSIT_FINAL,
  cashout: CASHOUT_FINAL,
  refund: REFUND_FINAL,
};

export function isStatus<K extends EntityKind>(kind: K, value: string): value is EntityStatus<K> {
  return (STATUSES[kind] as readonly string[]).includes(value);
}

export function parseStatus<K extends EntityKind>(kind: K, value: string, field = 'status'): EntityStatus<K> {
  if (isStatus(kind, value)) return value;
  throw new AppError('VALIDATION_FAILED', `${field}: unknown ${kind} status ${JSON.stringify(value)}`, {
    details: { field, rule: `one of ${STATUSES[kind].join(', ')}` },
  });
}

/** True when `to` is one direct move from `from` in the spec's tables. */
export function isDirectTransition<K extends EntityKind>(
  kind: K,
  from: EntityStatus<K>,
  to: EntityStatus<K>,
): boolean {
  const table = TRANSITIONS[kind] as Readonly<Record<string, readonly string[]>>;
  return (table[from] ?? []).includes(to);
}

/** By kind, then by status: no key string is built per call (the ledger asks for every reading walked). */
const reachCache = new Map<string, Map<string, ReadonlySet<string>>>();

/** Every status reachable from `from` in one or more direct moves. */
export function reachableFrom<K extends EntityKind>(
  kind: K,
  from: EntityStatus<K>,
): ReadonlySet<EntityStatus<K>> {
  let byStatus = reachCache.get(kind);
  if (!byStatus) {
    byStatus = new Map();
    reachCache.set(kind, byStatus);
  }
  let cached = byStatus.get(from);
  if (!cached) {
    const table = TRANSITIONS[kind] as Readonly<Record<string, readonly string[]>>;
    const seen = new Set<string>();
    const queue = [...(table[from] ?? [])];
    while (queue.length > 0) {
      const next = queue.shift()!;
      if (seen.has(next)) continue;
      seen.add(next);
      queue.push(...(table[next] ?? []));
    }
    cached = seen;
    byStatus.set(from, cached);
  }
  return cached as ReadonlySet<EntityStatus<K>>;
}

/**
 * True when an entity observed in `from` can legally later be observed in `to`: the same status, or
 * a status reachable through the spec's moves (intermediate statuses may have gone unobserved).
 */
export function canReach<K extends EntityKind>(kind: K, from: EntityStatus<K>, to: EntityStatus<K>): boolean {
  return from === to || reachableFrom(kind, from).has(to);
}

/** Throws ILLEGAL_TRANSITION unless `to` is a direct move from `from` (the sandbox's rule). */
export function transition<K extends EntityKind>(
  kind: K,
  from: EntityStatus<K>,
  to: EntityStatus<K>,
): EntityStatus<K> {
  if (!isDirectTransition(kind, from, to)) {
    throw new AppError('ILLEGAL_TRANSITION', `${kind}: ${from} -> ${to} is not a transition of the spec`, {
      details: { kind, from, to },
    });
  }
  return to;
}

export function isFinal<K extends EntityKind>(kind: K, status: EntityStatus<K>): boolean {
  return (FINAL[kind] as readonly string[]).includes(status);
}
