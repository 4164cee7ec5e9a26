/**
 * The one way a test waits: poll a condition against a deadline. A fixed sleep guesses how long the system
 * needs and, when it guesses short, fails on a slow machine or passes without the thing having happened;
 * a polled condition waits exactly as long as needed and, on timeout, says what it waited for.
 */

export interface WaitOptions {
  /** Milliseconds before giving up (default 20 s). */
  ms?: number;
  /** Milliseconds between two probes (default 50). */
  every?: number;
}

type Ready<T> = Exclude<T, undefined | false>;

/**
 * Polls `probe` until it answers something other than `undefined` or `false`, and answers that. A probe
 * that throws counts as "not yet"; its last error is in the timeout's message. `what` may be a function,
 * to say on timeout how far the condition got.
 */
export async function waitFor<T>(
  what: string | (() => string),
  probe: () => T | Promise<T>,
  options: number | WaitOptions = {},
): Promise<Ready<T>> {
  const { ms = 20_000, every = 50 } = typeof options === 'number' ? { ms: options } : options;
  const end = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== false) return v as Ready<T>;
    } catch (err) {
      last = err;
    }
    if (Date.now() > end)
      throw new Error(
        `timed out after ${ms} ms waiting for ${typeof what === 'string' ? what : what()}${last ? `: ${String(last)}` : ''}`,
      );
    await new Promise((r) => setTimeout(r, every));
  }
}
