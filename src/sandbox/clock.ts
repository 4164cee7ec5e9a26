/**
 * The sandbox's time. Every date the sandbox shows, every expiry, automatic move and webhook retry runs
 * on a `Clock`, so tests drive time by hand (`ManualClock.advance`) and demos run faster than real
 * time (`RealClock` with `speed` > 1: one real second is `speed` sandbox seconds).
 */

export type CancelTimer = () => void;

export interface Clock {
  /** Sandbox time, milliseconds since the epoch. */
  now(): number;
  /** Runs `fn` once sandbox time reaches `atMs`; returns a cancel function. */
  at(atMs: number, fn: () => void): CancelTimer;
  /** Cancels every pending timer (used on close). */
  stop(): void;
}

export interface RealClockOptions {
  /** Sandbox milliseconds per real millisecond; 1 is real time. */
  speed?: number;
  /** Sandbox time at start (default: now). */
  startMs?: number;
}

export class RealClock implements Clock {
  readonly speed: number;
  private readonly realStart = Date.now();
  private readonly sandboxStart: number;
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(options: RealClockOptions = {}) {
    this.speed = options.speed ?? 1;
    if (!(this.speed > 0)) throw new RangeError('clock speed must be positive');
    this.sandboxStart = options.startMs ?? this.realStart;
  }

  now(): number {
    return this.sandboxStart + Math.floor((Date.now() - this.realStart) * this.speed);
  }

  at(atMs: number, fn: () => void): CancelTimer {
    // setTimeout caps at ~24.8 days; long waits re-arm themselves.
    const MAX = 2_000_000_000;
    let handle: NodeJS.Timeout | undefined;
    const arm = () => {
      const wait = Math.max(0, (atMs - this.now()) / this.speed);
      handle = setTimeout(
        () => {
          if (handle) this.timers.delete(handle);
          if (this.now() < atMs) arm();
          else fn();
        },
        Math.min(wait, MAX),
      );
      handle.unref();
      this.timers.add(handle);
    };
    arm();
    return () => {
      if (handle) {
        clearTimeout(handle);
        this.timers.delete(handle);
      }
    };
  }

  stop(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }
}

interface ManualTimer {
  atMs: number;
  seq: number;
  fn: () => void;
  cancelled: boolean;
}

const firesBefore = (a: ManualTimer, b: ManualTimer) =>
  a.atMs < b.atMs || (a.atMs === b.atMs && a.seq < b.seq);

/**
 * A clock that moves only when told; timers fire in time order during `advance`/`set`, with a turn of the
 * event loop after each. The timers sit in a binary heap (a cancelled one is skipped when it comes up):
 * sorting every pending timer for every firing made an advance quadratic in the timers, which thousands
 * of entities with pending moves and webhook retries reach (the chaos soak had a heap clock of its own
 * for that reason; it uses this one now).
 */
export class ManualClock implements Clock {
  private current: number;
  private seq = 0;
  private heap: ManualTimer[] = [];

  constructor(startMs = Date.UTC(2026, 0, 1, 12, 0, 0)) {
    this.current = startMs;
  }

  now(): number {
    return this.current;
  }

  at(atMs: number, fn: () => void): CancelTimer {
    const timer: ManualTimer = { atMs, seq: this.seq++, fn, cancelled: false };
    this.push(timer);
    return () => {
      timer.cancelled = true;
    };
  }

  /** Moves time forward by `ms`, firing due timers in order (awaiting pending I/O between them). */
  async advance(ms: number): Promise<void> {
    await this.set(this.current + ms);
  }

  async set(targetMs: number): Promise<void> {
    for (;;) {
      const due = this.heap[0];
      if (!due || due.atMs > targetMs) break;
      this.pop();
      if (due.cancelled) continue;
      if (due.atMs > this.current) this.current = due.atMs;
      due.fn();
      // Let webhook deliveries and other promise chains started by the timer make progress.
      await new Promise((resolve) => setImmediate(resolve));
    }
    if (targetMs > this.current) this.current = targetMs;
  }

  /** Number of pending timers (tests). */
  pending(): number {
    return this.heap.filter((t) => !t.cancelled).length;
  }

  stop(): void {
    this.heap = [];
  }

  private push(t: ManualTimer): void {
    const h = this.heap;
    h.push(t);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!firesBefore(h[i]!, h[parent]!)) break;
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
      if (l < h.length && firesBefore(h[l]!, h[m]!)) m = l;
      if (r < h.length && firesBefore(h[r]!, h[m]!)) m = r;
      if (m === i) break;
      [h[i], h[m]] = [h[m]!, h[i]!];
      i = m;
    }
  }
}

/** `yyyy-MM-dd HH:mm:ss` in UTC, the provider's display format. */
export function formatProviderDateTime(ms: number): string {
  return new Date(ms).toISOString().slice(0, 19).replace('T', ' ');
}

/** `yyyy-MM-dd'T'HH:mm:ssZ` in UTC without milliseconds (X-Date). */
export function formatXDateAt(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 19)}Z`;
}
