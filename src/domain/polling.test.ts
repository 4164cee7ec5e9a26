import { describe, expect, it } from 'vitest';
import { backoffDelayMs, completedRecheckDelayMs, DEFAULT_POLLING_RULES, nextPollAt } from './polling.ts';

const t0 = new Date('2026-11-01T00:00:00Z');
const min = 60_000;

describe('polling schedule', () => {
  it.each([
    [0, 1 * min],
    [1, 2 * min],
    [2, 4 * min],
    [8, 256 * min],
    [9, 360 * min],
    [30, 360 * min],
  ])('after %i unchanged polls waits %i ms', (attempts, delay) => {
    expect(backoffDelayMs(attempts)).toBe(delay);
  });

  it.each([
    ['deposit', 'PENDING', 2, t0.getTime() + 4 * min],
    ['deposit', 'EXPIRED', 0, t0.getTime() + min],
    ['deposit', 'COMPLETED', 0, null],
    ['deposit', 'CANCELLED', 0, t0.getTime() + 60 * min],
    ['deposit', 'DECLINED', 0, null],
    ['cashout', 'ON_HOLD', 0, t0.getTime() + min],
    ['cashout', 'REJECTED', 0, null],
    ['cashout', 'DECLINED', 0, null],
    ['refund', 'CANCELLED', 0, null],
    ['cashout', null, 3, t0.getTime() + 8 * min],
  ] as const)('%s %s (attempts %i)', (kind, status, attempts, expected) => {
    const next = nextPollAt({ kind, status, attempts, from: t0, completedAt: null });
    expect(next?.getTime() ?? null).toBe(expected);
  });

  it('re-checks a COMPLETED cashout 1 h, 4 h, 12 h, then daily through the late-rejection window, then stops', () => {
    const day = 24 * 3_600_000;
    const H = 3_600_000;
    const after = (attempts: number) =>
      (nextPollAt({ kind: 'cashout', status: 'COMPLETED', attempts, from: t0, completedAt: t0 })?.getTime() ??
        0) - t0.getTime();
    expect([0, 1, 2, 3, 4, 10].map(after)).toEqual([H, 4 * H, 12 * H, day, day, day]);
    // Configurable: another schedule, each step capped by the daily interval.
    const rules = {
      ...DEFAULT_POLLING_RULES,
      completedRecheckMs: 3_000,
      completedRecheckScheduleMs: [1_000, 9_000],
    };
    expect([0, 1, 2].map((n) => completedRecheckDelayMs(n, rules))).toEqual([1_000, 3_000, 3_000]);
    const late = new Date(t0.getTime() + 29.5 * day);
    expect(
      nextPollAt({ kind: 'refund', status: 'COMPLETED', attempts: 5, from: late, completedAt: t0 }),
    ).toBeNull();
  });

  it('re-checks a CANCELLED deposit on the same schedule through the late-completion window, then stops', () => {
    const day = 24 * 3_600_000;
    const H = 3_600_000;
    const rules = { ...DEFAULT_POLLING_RULES, lateCompletionWindowMs: 10 * day };
    const next = (attempts: number, from = t0) =>
      nextPollAt(
        { kind: 'deposit', status: 'CANCELLED', attempts, from, completedAt: null, statusSince: t0 },
        rules,
      );
    expect([0, 1, 2, 3, 9].map((n) => (next(n)?.getTime() ?? 0) - t0.getTime())).toEqual([
      H,
      4 * H,
      12 * H,
      day,
      day,
    ]);
    // The window counts from the cancellation, not from the last reading.
    expect(next(5, new Date(t0.getTime() + 9 * day))?.getTime()).toBe(t0.getTime() + 10 * day);
    expect(next(5, new Date(t0.getTime() + 9.5 * day))).toBeNull();
  });

  it('asks about an entity the provider does not know notFoundAttempts times, on the back-off, then no more', () => {
    const rules = { ...DEFAULT_POLLING_RULES, notFoundAttempts: 3 };
    const next = (attempts: number) =>
      nextPollAt({ kind: 'cashout', status: null, attempts, from: t0, completedAt: null }, rules);
    expect([0, 1, 2].map((n) => (next(n)?.getTime() ?? 0) - t0.getTime())).toEqual([
      60_000, 120_000, 240_000,
    ]);
    expect(next(3)).toBeNull();
    expect(next(40)).toBeNull();
    // A status, even after many readings, keeps its own schedule.
    expect(
      nextPollAt({ kind: 'cashout', status: 'PENDING', attempts: 40, from: t0, completedAt: null }, rules),
    ).not.toBeNull();
  });
});
