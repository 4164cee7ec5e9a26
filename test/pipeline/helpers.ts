/** Helpers shared by the pipeline tests. */
import { randomUUID } from 'node:crypto';
import { NO_FACTS, type Observation } from '../../src/domain/observation.ts';
import { startBroker } from '../../src/embedded/kafka/broker.ts';
import { startRegistry } from '../../src/embedded/registry/registry.ts';
import type { EmbeddedStarters } from '../../src/infrastructure.ts';

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
    ...NO_FACTS,
    details: {},
    ...o,
  };
}
