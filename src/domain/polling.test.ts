import { describe, expect, it } from 'vitest';
import { backoffDelayMs, nextPollAt } from './polling.ts';

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
    ['deposit', 'CANCELLED', 0, null],
    ['cashout', 'ON_HOLD', 0, t0.getTime() + min],
    ['cashout', 'REJECTED', 0, null],
    ['cashout', 'DECLINED', 0, null],
    ['refund', 'CANCELLED', 0, null],
    ['cashout', null, 3, t0.getTime() + 8 * min],
  ] as const)('%s %s (attempts %i)', (kind, status, attempts, expected) => {
    const next = nextPollAt({ kind, status, attempts, from: t0, completedAt: null });
    expect(next?.getTime() ?? null).toBe(expected);
  });

  it('re-polls a COMPLETED cashout daily through the late-rejection window, then stops', () => {
    const day = 24 * 3_600_000;
    const inside = nextPollAt({
      kind: 'cashout',
      status: 'COMPLETED',
      attempts: 0,
      from: t0,
      completedAt: t0,
    });
    expect(inside?.getTime()).toBe(t0.getTime() + day);
    const late = new Date(t0.getTime() + 29.5 * day);
    expect(
      nextPollAt({ kind: 'refund', status: 'COMPLETED', attempts: 5, from: late, completedAt: t0 }),
    ).toBeNull();
  });
});
