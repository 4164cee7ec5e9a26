/**
 * When the poller should next ask the provider about an entity: back-off from one minute, doubling up
 * to every six hours, while the status is not final; COMPLETED cashouts and refunds are re-polled daily
 * through the late-rejection window (their bank may still return the money); final statuses never.
 */
import { type EntityKind, type EntityStatus, isFinal, isStatus } from './statuses.ts';

export interface PollingRules {
  firstDelayMs: number;
  maxDelayMs: number;
  /** Re-poll interval of COMPLETED cashouts and refunds. */
  completedRecheckMs: number;
  /** How long after completion a cashout or refund may still be rejected. */
  lateRejectionWindowMs: number;
}

export const DEFAULT_POLLING_RULES: PollingRules = {
  firstDelayMs: 60_000,
  maxDelayMs: 6 * 3_600_000,
  completedRecheckMs: 24 * 3_600_000,
  lateRejectionWindowMs: 30 * 24 * 3_600_000,
};

/** Delay before the next poll after `attempts` polls that saw no change (0: the status just changed). */
export function backoffDelayMs(attempts: number, rules: PollingRules = DEFAULT_POLLING_RULES): number {
  const exp = Math.min(Math.max(attempts, 0), 40);
  return Math.min(rules.firstDelayMs * 2 ** exp, rules.maxDelayMs);
}

export interface PollInput {
  kind: EntityKind;
  /** Null: known only from an intent, or not found yet. */
  status: string | null;
  attempts: number;
  /** Time the schedule counts from (the latest observation). */
  from: Date;
  completedAt: Date | null;
}

/** Next poll time, or null when the entity needs no more polling. */
export function nextPollAt(input: PollInput, rules: PollingRules = DEFAULT_POLLING_RULES): Date | null {
  const { kind, status, from } = input;
  if (status !== null && isStatus(kind, status)) {
    if (kind !== 'deposit' && status === 'COMPLETED') {
      const end = (input.completedAt ?? from).getTime() + rules.lateRejectionWindowMs;
      const next = from.getTime() + rules.completedRecheckMs;
      return next <= end ? new Date(next) : null;
    }
    if (isFinal(kind, status as EntityStatus<typeof kind>)) return null;
  }
  return new Date(from.getTime() + backoffDelayMs(input.attempts, rules));
}
