/** The request storm both HTTP fuzz suites run: two halves over 16 connections, live heap read between. */
import v8 from 'node:v8';
import vm from 'node:vm';

// A real collection before each heap reading, so the figure is live memory, not uncollected garbage.
v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

export function liveHeap(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

/**
 * Sends every request, 16 at a time, in two halves; the live heap after each half tells whether memory
 * stays flat once the process has warmed up (the suites assert the second half's growth).
 */
export async function sendInHalves<R>(
  requests: readonly R[],
  send: (r: R) => Promise<unknown>,
): Promise<{ heapMid: number; heapEnd: number }> {
  const run = async (list: readonly R[]) => {
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < list.length) await send(list[next++]!);
      }),
    );
  };
  const half = Math.floor(requests.length / 2);
  await run(requests.slice(0, half));
  const heapMid = liveHeap();
  await run(requests.slice(half));
  return { heapMid, heapEnd: liveHeap() };
}
