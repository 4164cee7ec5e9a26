/**
 * Exception rules of docs/architecture.md ("Exceptions"), pure. The service raises the immediate ones while
 * applying observations (they depend only on what was just seen); the ones that need time to pass
 * (STUCK, MISSED_NOTIFICATION, UNKNOWN_TRANSACTION, OUTCOME_UNKNOWN) are raised by `sweepExceptions`, which
 * the jobs call.
 * Deadlines, severities, grace periods and the fee schedule are configuration: `DEFAULT_EXCEPTION_RULES`
 * holds the defaults that config overrides.
 */
import {
  type EffectState,
  type HistoryItem,
  isEarlyReleaseReversed,
  isLateRejection,
  type PathState,
} from './effects.ts';
import type { Minor } from './money.ts';
import { DEFAULT_POLLING_RULES, type PollingRules } from './polling.ts';
import {
  type AnyStatus,
  DEPOSIT_FINAL,
  DEPOSIT_LATE_COMPLETION_FROM,
  DEPOSIT_STATUSES,
  ENTITY_KINDS,
  type EntityKind,
} from './statuses.ts';

export const EXCEPTION_TYPES = [
  'AMOUNT_MISMATCH',
  'CURRENCY_MISMATCH',
  'UNKNOWN_TRANSACTION',
  'MISSING_AT_PROVIDER',
  'ILLEGAL_TRANSITION',
  'LATE_REJECTION',
  'LATE_COMPLETION',
  'EARLY_RELEASE_REVERSED',
  'FACTS_CHANGED',
  'STUCK',
  'MISSED_NOTIFICATION',
  'THIRD_PARTY_PAYER',
  'PROVIDER_AMOUNT_MISMATCH',
  'PAYER_UNMATCH',
  'OVER_REFUNDED',
  'DUPLICATE_INVOICE',
  'FEE_MISMATCH',
  'OUTCOME_UNKNOWN',
  'BANK_LINE_UNMATCHED',
  'SETTLEMENT_NOT_RECEIVED',
  'PROVIDER_REPORT_UNMATCHED',
  'LEDGER_NOT_IN_REPORT',
  'PROVIDER_REPORT_MISMATCH',
  'PROVIDER_BALANCE_DRIFT',
] as const;
export type ExceptionType = (typeof EXCEPTION_TYPES)[number];

/**
 * What an exception is about: a payment (its kind), or for the cash leg's exceptions a bank statement
 * line (entity id: the line's identity) or a provider settlement (entity id: the settlement id).
 */
export const EXCEPTION_ENTITY_KINDS = [...ENTITY_KINDS, 'bank_line', 'settlement'] as const;
export type ExceptionEntityKind = (typeof EXCEPTION_ENTITY_KINDS)[number];

export const SEVERITIES = ['info', 'low', 'medium', 'high', 'critical'] as const;
export type Severity = (typeof SEVERITIES)[number];

/** The queue's states live with the queue's vocabulary. */
export { EXCEPTION_STATES, type ExceptionState } from './exception-queue.ts';

/** Fee the provider should charge for a deposit: `fixed + amount * percentBps / 10000`, rounded half up. */
export interface FeeRule {
  /** Applies to this currency only; null for any. */
  currency: string | null;
  percentBps: number;
  fixed: Minor;
}

export interface StuckRules {
  /** A deposit still not final this long after its expiration_date. */
  depositAfterExpiryMs: number;
  /** A non-final deposit with no expiration_date, counted from the current status. */
  depositNoExpiryMs: number;
  cashoutOnHoldMs: number;
  cashoutDeliveredMs: number;
  cashoutPendingMs: number;
  refundIncorrectDetailsMs: number;
  refundPendingMs: number;
  refundDeliveredMs: number;
}

export interface ExceptionRules {
  severity: Record<ExceptionType, Severity>;
  /** Exceptions at or above this severity also go to the alert outbox. */
  alertMinSeverity: Severity;
  /** How long an observed entity may lack an intent before UNKNOWN_TRANSACTION. */
  unknownTransactionGraceMs: number;
  /** How long a change seen by polling may wait for its webhook before MISSED_NOTIFICATION. */
  missedNotificationGraceMs: number;
  /**
   * How long a creation the merchant recorded with an unknown outcome may stay unanswered (no provider id,
   * no entity observed under its reference) before OUTCOME_UNKNOWN (deposits, card deposits, refunds) or
   * a look-up by external_id (cashouts, by the poller). Longer than the merchant client's settle window.
   */
  outcomeUnknownGraceMs: number;
  stuck: StuckRules;
  polling: PollingRules;
  /** Per-currency fee schedule of deposits; empty: only the intent's expected fee is checked. */
  feeSchedule: FeeRule[];
  /** Difference tolerated between expected and charged fee, minor units. */
  feeToleranceMinor: Minor;
}

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

export const DEFAULT_EXCEPTION_RULES: ExceptionRules = {
  severity: {
    AMOUNT_MISMATCH: 'high',
    CURRENCY_MISMATCH: 'high',
    UNKNOWN_TRANSACTION: 'high',
    MISSING_AT_PROVIDER: 'high',
    ILLEGAL_TRANSITION: 'medium',
    LATE_REJECTION: 'critical',
    LATE_COMPLETION: 'high',
    EARLY_RELEASE_REVERSED: 'high',
    FACTS_CHANGED: 'critical',
    STUCK: 'medium',
    MISSED_NOTIFICATION: 'low',
    THIRD_PARTY_PAYER: 'medium',
    PROVIDER_AMOUNT_MISMATCH: 'high',
    PAYER_UNMATCH: 'medium',
    OVER_REFUNDED: 'critical',
    DUPLICATE_INVOICE: 'medium',
    FEE_MISMATCH: 'low',
    OUTCOME_UNKNOWN: 'high',
    BANK_LINE_UNMATCHED: 'medium',
    SETTLEMENT_NOT_RECEIVED: 'high',
    PROVIDER_REPORT_UNMATCHED: 'high',
    LEDGER_NOT_IN_REPORT: 'medium',
    PROVIDER_REPORT_MISMATCH: 'high',
    PROVIDER_BALANCE_DRIFT: 'high',
  },
  alertMinSeverity: 'high',
  unknownTransactionGraceMs: 15 * 60_000,
  missedNotificationGraceMs: 30 * 60_000,
  outcomeUnknownGraceMs: 30 * 60_000,
  stuck: {
    depositAfterExpiryMs: HOUR,
    depositNoExpiryMs: 2 * DAY,
    cashoutOnHoldMs: 3 * DAY,
    cashoutDeliveredMs: 3 * DAY,
    cashoutPendingMs: 2 * DAY,
    refundIncorrectDetailsMs: 7 * DAY,
    refundPendingMs: 3 * DAY,
    refundDeliveredMs: 5 * DAY,
  },
  polling: DEFAULT_POLLING_RULES,
  feeSchedule: [],
  feeToleranceMinor: 0n,
};

/**
 * Types an operator resolves only by a decision (src/db/decisions.ts: accept the provider's status or
 * facts, or keep the ledger's), never by a plain state change: the page, the API and their bulk forms
 * refuse to resolve them otherwise.
 */
export const DECIDED_TYPES: readonly ExceptionType[] = ['ILLEGAL_TRANSITION', 'FACTS_CHANGED'];

/** One sentence per type naming the rule that raised it (page, exception workbook and alert carry it). */
export const EXCEPTION_RULE_TEXT: Readonly<Record<ExceptionType, string>> = {
  AMOUNT_MISMATCH: "The amount the provider reports differs from the amount of the merchant's intent.",
  CURRENCY_MISMATCH: "The currency the provider reports differs from the currency of the merchant's intent.",
  UNKNOWN_TRANSACTION:
    'The provider knows this payment but no merchant intent names it after the grace period.',
  MISSING_AT_PROVIDER:
    'The merchant recorded an intent but the provider answers that the payment does not exist.',
  ILLEGAL_TRANSITION:
    'The provider reported a status change that no document allows; the ledger did not apply it until an operator decides.',
  LATE_REJECTION:
    "A completed payout was rejected later by the beneficiary's bank; the ledger reversed the payout.",
  LATE_COMPLETION:
    "A deposit completed after it had expired or been cancelled (the provider's manual matching of a late payment); the ledger booked the credit.",
  EARLY_RELEASE_REVERSED: 'A deposit released early failed afterwards; the ledger took the credit back.',
  FACTS_CHANGED:
    "A fact that cannot change (test flag, crypto, currency, the amount of a completed payment, a refund's deposit) changed between readings; the ledger keeps its last consistent bookings.",
  STUCK: 'The payment has stayed in a non-final status past its configured deadline.',
  MISSED_NOTIFICATION: 'A status change was seen only by polling; its notification never arrived.',
  THIRD_PARTY_PAYER: 'The provider cancelled the deposit because a third party, not the customer, paid it.',
  PROVIDER_AMOUNT_MISMATCH:
    'The provider cancelled the deposit because the payer paid a different amount than requested (status reason AMOUNT_MISMATCH).',
  PAYER_UNMATCH: "The provider could not match the payer's identity to the customer's.",
  OVER_REFUNDED: 'The refunds of a deposit hold or paid out more than the deposit.',
  DUPLICATE_INVOICE: 'Another deposit uses the same invoice id.',
  FEE_MISMATCH: 'The fee the provider charged differs from the expected fee.',
  OUTCOME_UNKNOWN:
    "The merchant's creation got no answer from the provider and the provider has reported nothing under its reference since; the provider may hold this payment: look it up in its back office.",
  BANK_LINE_UNMATCHED:
    'A bank statement line matches no settlement under any match rule; match it by hand or explain it.',
  SETTLEMENT_NOT_RECEIVED:
    'A settlement the provider reported has no matching bank credit past its value date plus the grace.',
  PROVIDER_REPORT_UNMATCHED:
    "A row of the provider's transactions report names a payment the ledger does not hold.",
  LEDGER_NOT_IN_REPORT:
    "A payment that moved the ledger's balance is missing from the provider's transactions report for the period it covers.",
  PROVIDER_REPORT_MISMATCH:
    "The provider's transactions report gives this payment another amount or fee than the ledger holds, or a status that cannot lead to the ledger's nor follow from it.",
  PROVIDER_BALANCE_DRIFT:
    "The balance the provider's settlement report gives at a cut-off differs from the ledger's available at that cut-off.",
};

/**
 * What the provider said that the ledger did not take, for the exceptions an operator decides, in words:
 * the refused move of an ILLEGAL_TRANSITION (`COMPLETED → PENDING (not applied)`; the facts' status is the
 * ledger's), the changed facts of a FACTS_CHANGED with both versions (`currency BRL → MXN`). Null for the
 * other types. The page and the exception workbook show it.
 */
export function refusedReading(type: string, details: Record<string, unknown> | null): string | null {
  const d = details ?? {};
  if (type === 'ILLEGAL_TRANSITION' && Array.isArray(d.moves)) {
    const moves = (d.moves as { from?: unknown; to?: unknown }[]).map(
      (m) => `${String(m.from ?? 'none')} → ${String(m.to ?? 'none')}`,
    );
    return moves.length ? `${[...new Set(moves)].join(', ')} (not applied)` : null;
  }
  if (type === 'FACTS_CHANGED' && Array.isArray(d.changes)) {
    const changes = (
      d.changes as { fact?: unknown; before?: { value?: unknown }; after?: { value?: unknown } }[]
    ).map((c) => `${String(c.fact)} ${String(c.before?.value ?? '?')} → ${String(c.after?.value ?? '?')}`);
    return changes.length ? changes.join('; ') : null;
  }
  return null;
}

export function severityRank(s: Severity): number {
  return SEVERITIES.indexOf(s);
}

export function shouldAlert(type: ExceptionType, rules: ExceptionRules): boolean {
  return severityRank(rules.severity[type]) >= severityRank(rules.alertMinSeverity);
}

/** Exceptions that stay true once raised and alert exactly once (their alert id has no counter). */
export const ONCE_PER_ENTITY: readonly ExceptionType[] = [
  'LATE_REJECTION',
  'LATE_COMPLETION',
  'EARLY_RELEASE_REVERSED',
];

/**
 * Deterministic alert id: once per entity for ONCE_PER_ENTITY types, else once per opening, `count` being
 * the exception's count when it opened (first raised, or raised again after it was resolved).
 */
export function alertId(
  type: ExceptionType,
  kind: EntityKind,
  account: string,
  entityId: string,
  count: number,
): string {
  const { stem, counted } = alertIdStem(type, kind, account, entityId);
  return counted ? `${stem}:${count}` : stem;
}

/**
 * `alertId` less its counter, and whether the counter follows (`:<count>`): for a statement that learns
 * the count only as it writes the exception (`raiseExceptions`).
 */
export function alertIdStem(
  type: ExceptionType,
  kind: ExceptionEntityKind,
  account: string,
  entityId: string,
): { stem: string; counted: boolean } {
  return { stem: `${type}:${kind}:${account}:${entityId}`, counted: !ONCE_PER_ENTITY.includes(type) };
}

export function expectedFee(rules: ExceptionRules, currency: string, amount: Minor): Minor | null {
  const rule =
    rules.feeSchedule.find((r) => r.currency === currency) ??
    rules.feeSchedule.find((r) => r.currency === null);
  if (!rule) return null;
  const scaled = amount * BigInt(Math.round(rule.percentBps));
  return rule.fixed + (scaled + 5_000n) / 10_000n;
}

export interface RaisedException {
  type: ExceptionType;
  details: Record<string, unknown>;
  /**
   * What the exception is about, without sighting-specific parts (event ids, times): a resolved exception
   * raised again with the same fact stays resolved; a different fact reopens it.
   */
  fact: string;
}

export interface IntentForRules {
  intentId: string;
  currency: string;
  amount: Minor;
  expectedFee: Minor | null;
}

export interface ObservationRuleInput {
  kind: EntityKind;
  /** Observations recorded in this batch (already in the history). */
  fresh: readonly HistoryItem[];
  path: PathState;
  providerAmount: Minor | null;
  providerCurrency: string | null;
  feeAmount: Minor | null;
  feeOnPayer: boolean;
  intent: IntentForRules | null;
  /** True when the intent was linked to the entity in this batch. */
  intentNew: boolean;
}

/** Exceptions raised by what was just observed (or by the intent just linked). */
export function observationExceptions(input: ObservationRuleInput, rules: ExceptionRules): RaisedException[] {
  const out: RaisedException[] = [];
  const { fresh, path, intent } = input;
  const illegal = path.illegal.size === 0 ? [] : fresh.filter((h) => path.illegal.has(h.eventId));
  if (illegal.length > 0) {
    const moves = illegal.map((h) => ({
      eventId: h.eventId,
      from: path.fromStatus.get(h.eventId) ?? null,
      to: h.status,
    }));
    out.push({
      type: 'ILLEGAL_TRANSITION',
      details: { moves },
      fact: [...new Set(moves.map((m) => `${m.from ?? 'none'}->${m.to}`))].sort().join(','),
    });
  }
  const checkIntent = intent !== null && (fresh.length > 0 || input.intentNew);
  // Intent against provider: only when both amounts are known and they differ.
  if (checkIntent && input.providerAmount !== null && input.providerAmount !== intent.amount) {
    const details = { intent: intent.amount.toString(), provider: input.providerAmount.toString() };
    out.push({
      type: 'AMOUNT_MISMATCH',
      details,
      fact: `intent ${details.intent} provider ${details.provider}`,
    });
  }
  if (checkIntent && input.providerCurrency !== null && input.providerCurrency !== intent.currency) {
    const details = { intent: intent.currency, provider: input.providerCurrency };
    out.push({
      type: 'CURRENCY_MISMATCH',
      details,
      fact: `intent ${details.intent} provider ${details.provider}`,
    });
  }
  // The provider's own status reasons are their own types, whatever the amounts say.
  const thirdParty = withReason(fresh, 'THIRD_PARTY_PAYER');
  if (thirdParty) {
    out.push({
      type: 'THIRD_PARTY_PAYER',
      details: { status: thirdParty.status, statusReason: 'THIRD_PARTY_PAYER' },
      fact: `${thirdParty.status} THIRD_PARTY_PAYER`,
    });
  }
  const paidOther = withReason(fresh, 'AMOUNT_MISMATCH');
  if (paidOther) {
    out.push({
      type: 'PROVIDER_AMOUNT_MISMATCH',
      details: { status: paidOther.status, statusReason: 'AMOUNT_MISMATCH' },
      fact: `${paidOther.status} AMOUNT_MISMATCH`,
    });
  }
  if (fresh.some((h) => h.payerVerification === 'UNMATCH')) {
    out.push({ type: 'PAYER_UNMATCH', details: { payerVerification: 'UNMATCH' }, fact: 'UNMATCH' });
  }
  if (intent !== null && path.status === null && fresh.some((h) => h.status === null)) {
    out.push({ type: 'MISSING_AT_PROVIDER', details: { intentId: intent.intentId }, fact: 'not found' });
  }
  const late = lateCompletion(input.kind, path);
  if (late !== null && fresh.length > 0) {
    out.push({
      type: 'LATE_COMPLETION',
      details: { from: late.from, completedAt: late.completedAt.toISOString() },
      fact: `${late.from}->COMPLETED`,
    });
  }
  if (
    input.kind === 'deposit' &&
    (fresh.length > 0 || input.intentNew) &&
    input.feeAmount !== null &&
    !input.feeOnPayer &&
    input.providerAmount !== null
  ) {
    const expected =
      intent?.expectedFee ??
      expectedFee(rules, input.providerCurrency ?? intent?.currency ?? '', input.providerAmount);
    if (expected !== null) {
      const diff = input.feeAmount - expected;
      if ((diff < 0n ? -diff : diff) > rules.feeToleranceMinor) {
        const details = { expected: expected.toString(), charged: input.feeAmount.toString() };
        out.push({
          type: 'FEE_MISMATCH',
          details,
          fact: `expected ${details.expected} charged ${details.charged}`,
        });
      }
    }
  }
  return out;
}

/** The first of the observations that carries the status reason. */
function withReason(fresh: readonly HistoryItem[], reason: string): HistoryItem | undefined {
  for (const h of fresh) if (h.statusReason === reason) return h;
  return undefined;
}

/** Exceptions raised when the entity's state crosses into a condition (late rejection, early release reversed). */
export function stateExceptions(before: EffectState | null, after: EffectState): RaisedException[] {
  const out: RaisedException[] = [];
  if (isLateRejection(after) && !(before && isLateRejection(before))) {
    out.push({
      type: 'LATE_REJECTION',
      details: { status: after.status },
      fact: `COMPLETED->${after.status}`,
    });
  }
  if (isEarlyReleaseReversed(after) && !(before && isEarlyReleaseReversed(before))) {
    out.push({
      type: 'EARLY_RELEASE_REVERSED',
      details: { status: after.status },
      fact: `EARLY_RELEASED->${after.status}`,
    });
  }
  return out;
}

/**
 * A deposit whose legal path went from EXPIRED or CANCELLED to COMPLETED (the provider completed it by
 * hand after a late payment): the status it completed from and when; null otherwise.
 */
export function lateCompletion(
  kind: EntityKind,
  path: PathState,
): { from: string; completedAt: Date } | null {
  if (kind !== 'deposit' || !path.everCompleted) return null;
  let prev: string | null = null;
  for (const h of path.sorted) {
    if (h.status === null || path.illegal.has(h.eventId)) continue;
    if (h.status === 'COMPLETED') {
      return prev !== null && (DEPOSIT_LATE_COMPLETION_FROM as readonly string[]).includes(prev)
        ? { from: prev, completedAt: h.observedAt }
        : null;
    }
    prev = h.status;
  }
  return null;
}

export interface StuckInput {
  kind: EntityKind;
  status: string | null;
  statusSince: Date | null;
  expiresAt: Date | null;
}

/**
 * The statuses in which an entity can become STUCK: a deposit not yet final (EXPIRED excepted: it becomes
 * CANCELLED by itself seven days later), a cashout or refund waiting on the provider or the bank.
 */
export const STUCK_STATUSES: { readonly [K in EntityKind]: readonly AnyStatus[] } = {
  deposit: DEPOSIT_STATUSES.filter((s) => !DEPOSIT_FINAL.includes(s) && s !== 'EXPIRED'),
  cashout: ['PENDING', 'ON_HOLD', 'DELIVERED'],
  refund: ['PENDING', 'INCORRECT_DETAILS', 'DELIVERED'],
};

/** When a non-final entity becomes STUCK; null when its status cannot be stuck. */
export function stuckDeadline(input: StuckInput, rules: ExceptionRules): Date | null {
  const { kind, status, statusSince } = input;
  if (status === null || statusSince === null) return null;
  if (!(STUCK_STATUSES[kind] as readonly string[]).includes(status)) return null;
  const s = rules.stuck;
  const after = (ms: number) => new Date(statusSince.getTime() + ms);
  if (kind === 'deposit') {
    if (input.expiresAt) return new Date(input.expiresAt.getTime() + s.depositAfterExpiryMs);
    return after(s.depositNoExpiryMs);
  }
  if (kind === 'cashout') {
    if (status === 'ON_HOLD') return after(s.cashoutOnHoldMs);
    if (status === 'DELIVERED') return after(s.cashoutDeliveredMs);
    if (status === 'PENDING') return after(s.cashoutPendingMs);
    return null;
  }
  if (status === 'INCORRECT_DETAILS') return after(s.refundIncorrectDetailsMs);
  if (status === 'PENDING') return after(s.refundPendingMs);
  if (status === 'DELIVERED') return after(s.refundDeliveredMs);
  return null;
}
