/** Helpers shared by the pipeline tests. */
import { randomUUID } from 'node:crypto';
import type { Observation } from '../../src/domain/observation.ts';

/** An observation with neutral defaults (account `main`, source `webhook`). */
export function observation(
  o: Partial<Observation> & Pick<Observation, 'kind' | 'entityId' | 'status'>,
): Observation {
  return {
    eventId: randomUUID(),
    account: 'main',
    externalRef: null,
    observedAt: new Date(),
    source: 'webhook',
    currency: null,
    amount: null,
    feeAmount: null,
    feeCurrency: null,
    feeOnPayer: null,
    test: false,
    crypto: false,
    statusReason: null,
    payerVerification: null,
    rejectionCode: null,
    rejectionReason: null,
    parentDepositId: null,
    details: {},
    ...o,
  };
}

/** Polls `probe` until it answers something other than undefined; errors count as "not yet". */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
