/**
 * What the benches share to time work on a shared machine: a median of timed calls, the load average and
 * the CPU seconds of a process (wall time depends on the other load on the machine, CPU time does not).
 */
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';

/** The 1, 5 and 15 minute load averages, for the record beside a figure. */
export const loadAverage = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');

/** Median milliseconds of `repeat` timed calls of `fn`, after `warmUp` untimed ones. */
export async function medianMs(fn: () => Promise<unknown>, repeat: number, warmUp = 0): Promise<number> {
  for (let i = 0; i < warmUp; i++) await fn();
  const times: number[] = [];
  for (let i = 0; i < repeat; i++) {
    const t0 = performance.now();
    await fn();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)]!;
}

/** CPU seconds (user and system) a process has used so far, from /proc (Linux only; null elsewhere). */
export function processCpuSeconds(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return null;
  }
}
