/**
 * A manual sandbox clock for large runs: the same contract as `ManualClock` (src/sandbox/clock.ts) — time
 * moves only on `advance`, due timers fire in time order with a turn of the event loop between them — but
 * its timers sit in a binary heap, so 100,000 entities with several pending moves each do not make every
 * firing sort every timer.
 */
import type { CancelTimer, Clock } from '../../src/sandbox/clock.ts';

interface Timer {
  atMs: number;
  seq: number;
  fn: () => void;
  cancelled: boolean;
}

const before = (a: Timer, b: Timer) => a.atMs < b.atMs || (a.atMs === b.atMs && a.seq < b.seq);

export class HeapClock implements Clock {
  private current: number;
  private seq = 0;
  private heap: Timer[] = [];

  constructor(startMs: number) {
    this.current = startMs;
  }

  now(): number {
    return this.current;
  }

  at(atMs: number, fn: () => void): CancelTimer {
    const timer: Timer = { atMs, seq: this.seq++, fn, cancelled: false };
    this.push(timer);
    return () => {
      timer.cancelled = true;
    };
  }

  /** Moves time forward by `ms`, firing due timers in order (a turn of the event loop after each). */
  async advance(ms: number): Promise<void> {
    const target = this.current + ms;
    for (;;) {
      const top = this.heap[0];
      if (!top || top.atMs > target) break;
      this.pop();
      if (top.cancelled) continue;
      if (top.atMs > this.current) this.current = top.atMs;
      top.fn();
      await new Promise((resolve) => setImmediate(resolve));
    }
    if (target > this.current) this.current = target;
  }

  pending(): number {
    return this.heap.filter((t) => !t.cancelled).length;
  }

  stop(): void {
    this.heap = [];
  }

  private push(t: Timer): void {
    const h = this.heap;
    h.push(t);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(h[i]!, h[parent]!)) break;
      [h[i], h[parent]] = [h[parent]!, h[i]!];
      i = parent;
    }
  }

  private pop(): void {
    const h = this.heap;
    const last = h.pop()!;
    if (h.length === 0) return;
    h[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < h.length && before(h[l]!, h[m]!)) m = l;
      if (r < h.length && before(h[r]!, h[m]!)) m = r;
      if (m === i) break;
      [h[i], h[m]] = [h[m]!, h[i]!];
      i = m;
    }
  }
}
