/** How the match consumer's runs coalesce: a burst of requests costs at most two runs, none is lost. */
import { describe, expect, it } from 'vitest';
import { coalescedRuns } from '../../src/consumers/matcher.ts';

function deferred() {
  let resolve: () => void = () => {};
  let reject: (err: Error) => void = () => {};
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('coalesced matching runs', () => {
  it('runs at once when idle, and shares one further run among the requests made during a run', async () => {
    const gates: ReturnType<typeof deferred>[] = [];
    let started = 0;
    const request = coalescedRuns(async () => {
      started += 1;
      const gate = deferred();
      gates.push(gate);
      await gate.promise;
      return started;
    });
    const first = request();
    expect(started).toBe(1);
    // Three requests while the first run is in progress: it may predate their lines, so one more run.
    const during = [request(), request(), request()];
    expect(during[0]).toBe(during[1]);
    expect(during[1]).toBe(during[2]);
    expect(started).toBe(1);
    gates[0]!.resolve();
    expect(await first).toBe(1);
    await Promise.resolve();
    await new Promise<void>((r) => setImmediate(r));
    expect(started).toBe(2);
    gates[1]!.resolve();
    expect(await Promise.all(during)).toEqual([2, 2, 2]);
    // Idle again: the next request runs at once.
    const later = request();
    expect(started).toBe(3);
    gates[2]!.resolve();
    expect(await later).toBe(3);
  });

  it('runs again after a failed run, and the failure reaches only the requests it served', async () => {
    let calls = 0;
    const gate = deferred();
    const request = coalescedRuns(async () => {
      calls += 1;
      if (calls === 1) {
        await gate.promise;
        return 'never';
      }
      return 'second';
    });
    const first = request();
    const next = request();
    gate.reject(new Error('database gone'));
    await expect(first).rejects.toThrow('database gone');
    expect(await next).toBe('second');
    expect(calls).toBe(2);
  });
});
