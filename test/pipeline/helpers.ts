/** Helpers shared by the pipeline tests. */
import { randomUUID } from 'node:crypto';
import type { Observation } from '../../src/domain/observation.ts';
import { startBroker } from '../../src/embedded/kafka/broker.ts';
import { startRegistry } from '../../src/embedded/registry/registry.ts';
import type { EmbeddedStarters } from '../../src/wiring.ts';

/** Settings that keep every scheduled job of the catalog out of a test's way (they are tested on their own). */
export const JOBS_OFF = {
  PAYRECON_CRON_POLL: '0 0 1 1 *',
  PAYRECON_CRON_STUCK_SWEEP: '0 0 1 1 *',
  PAYRECON_CRON_LATE_REJECTION_SWEEP: '0 0 1 1 *',
  PAYRECON_CRON_SETTLEMENT: '0 0 1 1 *',
  PAYRECON_CRON_EXCEPTION_REPORT: '0 0 1 1 *',
  PAYRECON_CRON_LEDGER_VERIFY: '0 0 1 1 *',
} as const;

/** `startPipeline`'s embedded parts for tests: broker and registry on free ports, the machine's PostgreSQL. */
export const TEST_EMBEDDED: EmbeddedStarters = {
  postgres: () => Promise.reject(new Error('the test uses the machine PostgreSQL')),
  broker: ({ dataDir }) => startBroker({ host: '127.0.0.1', port: 0, dataDir, defaultPartitions: 3 }),
  registry: ({ dataDir }) => startRegistry({ host: '127.0.0.1', port: 0, dataDir }),
};

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
