/**
 * When the poller should next ask the provider about an entity: back-off from one minute, doubling up
 * to every six hours, while the status is not final; COMPLETED cashouts and refunds are re-checked on a
 * schedule that starts dense (1 h, 4 h, 12 h after the last reading, then daily) through the
 * late-rejection window, so a late rejection whose notification was lost is found within hours; a
 * CANCELLED deposit (the provider may still complete it by hand: a late payment, docs/provider.md) is
 * re-checked on the same schedule through the late-completion window, so a late completion whose
 * notification was lost is found too (an EXPIRED one is not final and keeps its back-off); other final
 * statuses never. An entity the provider does not know (every reading "not found") is asked again
 * `notFoundAttempts` times on the same back-off, then no more: anyone can name an id in a notification,
 * and ids nobody knows must not eat the provider's rate limit that real polling needs. A notification of
 * it later makes the status fetcher ask once more.
 */
import { type EntityKind, type EntityStatus, isFinal, isStatus } from './statuses.ts';

export interface PollingRules {
  firstDelayMs: number;
  maxDelayMs: number;
  /** Re-poll interval of COMPLETED cashouts and refunds once the schedule below is used up (and its cap). */
  completedRecheckMs: number;
  /**
   * The first re-checks of a COMPLETED cashout or refund: the n-th delay after the n-th reading that saw
   * no change (each capped at `completedRecheckMs`); after the last one, every `completedRecheckMs`.
   */
  completedRecheckScheduleMs: readonly number[];
  /** How long after completion a cashout or refund may still be rejected. */
  lateRejectionWindowMs: number;
  /**
   * How long after it turned CANCELLED a deposit may still be completed by the provider's hand. The
   * provider publishes no limit (docs/provider.md); inferred, configurable.
   */
  lateCompletionWindowMs: number;
  /** Readings that found nothing after which an entity with no status is no longer polled. */
  notFoundAttempts: number;
}

export const DEFAULT_POLLING_RULES: PollingRules = {
  firstDelayMs: 60_000,
  maxDelayMs: 6 * 3_600_000,
  completedRecheckMs: 24 * 3_600_000,
  completedRecheckScheduleMs: [3_600_000, 4 * 3_600_000, 12 * 3_600_000],
  lateRejectionWindowMs: 30 * 24 * 3_600_000,
  lateCompletionWindowMs: 30 * 24 * 3_600_000,
  notFoundAttempts: 5,
};

/** Delay before the next poll after `attempts` polls that saw no change (0: the status just changed). */
export function backoffDelayMs(attempts: number, rules: PollingRules = DEFAULT_POLLING_RULES): number {
  const exp = Math.min(Math.max(attempts, 0), 40);
  return Math.min(rules.firstDelayMs * 2 ** exp, rules.maxDelayMs);
}

/**
 * Delay before re-checking an entity the provider may still move by hand (a COMPLETED cashout or refund,
 * a CANCELLED deposit) after `attempts` readings that saw no change.
 */
export function completedRecheckDelayMs(
  attempts: number,
  rules: PollingRules = DEFAULT_POLLING_RULES,
): number {
  const schedule = rules.completedRecheckScheduleMs;
  const step = schedule[Math.max(attempts, 0)] ?? rules.completedRecheckMs;
  return Math.min(step, rules.completedRecheckMs);
}

export interface PollInput {
  kind: EntityKind;
  /** Null: known only from an intent, or not found yet. */
  status: string | null;
  /** Readings since the status last changed (with no status: readings that found nothing). */
  attempts: number;
  /** Time the schedule counts from (the latest observation). */
  from: Date;
  completedAt: Date | null;
  /** When the current status was first observed (a CANCELLED deposit's late-completion window). */
  statusSince?: Date | null;
}

/** The next poll of an entity watched through a window from `since`: dense at first, then every completedRecheckMs. */
function watched(input: PollInput, rules: PollingRules, since: Date, windowMs: number): Date | null {
  const next = input.from.getTime() + completedRecheckDelayMs(input.attempts, rules);
  return next <= since.getTime() + windowMs ? new Date(next) : null;
}

/** Next poll time, or null when the entity needs no more polling. */
export function nextPollAt(input: PollInput, rules: PollingRules = DEFAULT_POLLING_RULES): Date | null {
  const { kind, status, from } = input;
  if (status !== null && isStatus(kind, status)) {
    if (kind !== 'deposit' && status === 'COMPLETED') {
      return watched(input, rules, input.completedAt ?? from, rules.lateRejectionWindowMs);
    }
    if (kind === 'deposit' && status === 'CANCELLED') {
      return watched(input, rules, input.statusSince ?? from, rules.lateCompletionWindowMs);
    }
    if (isFinal(kind, status as EntityStatus<typeof kind>)) return null;
  } else if (status === null && input.attempts >= rules.notFoundAttempts) {
    return null;
  }
  return new Date(from.getTime() + backoffDelayMs(input.attempts, rules));
}
