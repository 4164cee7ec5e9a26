import { describe, expect, it } from 'vitest';
import { formatProviderDateTime, formatXDateAt, ManualClock, RealClock } from './clock.ts';

describe('ManualClock', () => {
  it('fires due timers in time order, then insertion order, and only when advanced past them', async () => {
    const clock = new ManualClock(1_000);
    const fired: string[] = [];
    clock.at(3_000, () => fired.push('c'));
    clock.at(2_000, () => fired.push('a'));
    clock.at(2_000, () => fired.push('b'));
    const cancel = clock.at(2_500, () => fired.push('x'));
    cancel();
    await clock.advance(999);
    expect(fired).toEqual([]);
    await clock.advance(1);
    expect(fired).toEqual(['a', 'b']);
    await clock.advance(10_000);
    expect(fired).toEqual(['a', 'b', 'c']);
    expect(clock.now()).toBe(12_000);
  });

  it('runs timers scheduled by timers when they fall inside the advance', async () => {
    const clock = new ManualClock(0);
    const at: number[] = [];
    clock.at(10, () => {
      at.push(clock.now());
      clock.at(clock.now() + 10, () => at.push(clock.now()));
    });
    await clock.advance(100);
    expect(at).toEqual([10, 20]);
  });
});

describe('RealClock', () => {
  it('runs faster than real time by its speed', async () => {
    const clock = new RealClock({ speed: 1000, startMs: 0 });
    const fired = await new Promise<number>((resolve) => {
      const t0 = Date.now();
      clock.at(clock.now() + 50_000, () => resolve(Date.now() - t0));
    });
    expect(fired).toBeGreaterThanOrEqual(40);
    expect(fired).toBeLessThan(1000);
    clock.stop();
  });
});

describe('formats', () => {
  it('writes the provider date-time and X-Date formats in UTC', () => {
    const ms = Date.UTC(2020, 5, 21, 12, 33, 20, 999);
    expect(formatProviderDateTime(ms)).toBe('2020-06-21 12:33:20');
    expect(formatXDateAt(ms)).toBe('2020-06-21T12:33:20Z');
  });
});
