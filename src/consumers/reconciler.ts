/**
 * The reconciler: consumes observations and intents in batches and applies each batch to the ledger in
 * one database transaction (`applyObservations` / `recordIntents`). The batch runner commits offsets
 * only after that transaction committed, so a crash replays the batch, which the ledger absorbs
 * (idempotent by event id, intent id and entry key).
 *
 * While PostgreSQL is unreachable the batch waits and retries for as long as it takes, heartbeating:
 * an outage is not a reason to dead-letter good messages. Other failures follow the topic's retry
 * policy and end in the DLQ.
 */
import type { Kafka } from 'kafkajs';
import { waitOutDatabaseOutages } from '../db/connection.ts';
import { EntityStateCache } from '../db/ledger/entity-cache.ts';
import { applyObservations, recordIntents } from '../db/ledger/service.ts';
import type { Db } from '../db/schema.ts';
import { withLedgerTransaction } from '../db/transaction.ts';
import type { ExceptionRules } from '../domain/exception-rules.ts';
import type { BatchContext, Publisher, RunningConsumer } from '../events/kafka.ts';
import { runBatchConsumer } from '../events/kafka.ts';
import type { Serde } from '../events/serde.ts';
import { INTENT_TOPIC, OBSERVATION_TOPIC, type TopicName } from '../events/topics.ts';
import type { Logger } from '../logger.ts';

export const RECONCILER_GROUPS = {
  observations: 'payrecon-reconciler-observations',
  intents: 'payrecon-reconciler-intents',
} as const;

export interface ReconcilerDeps {
  kafka: Kafka;
  serde: Serde;
  dlq: Publisher;
  db: Db;
  logger: Logger;
  /** Told of each batch applied to the ledger and how long its transaction took (metrics). */
  onBatchApplied?: (topic: TopicName, seconds: number) => void;
  rules?: ExceptionRules;
  /** Longest wait between two tries while the database is down (default 5 s). */
  maxOutageBackoffMs?: number;
}

export interface Reconciler {
  consumers: RunningConsumer[];
  ready: Promise<void>;
  stop(): Promise<void>;
}

export async function startReconciler(deps: ReconcilerDeps): Promise<Reconciler> {
  const log = deps.logger.child({ module: 'reconciler' });
  const maxBackoff = deps.maxOutageBackoffMs ?? 5_000;
  let stopping = false;
  // The states of the entities this reconciler wrote last: a reading of an entity it wrote before, whose
  // mirror row nobody changed since, does not read its history and entries again.
  const known = new EntityStateCache();

  /** Runs one ledger transaction, waiting out database outages until it commits or we stop. */
  async function inLedger<T>(topic: TopicName, ctx: BatchContext, work: () => Promise<T>): Promise<T> {
    return waitOutDatabaseOutages(
      async () => {
        const started = performance.now();
        const result = await work();
        deps.onBatchApplied?.(topic, (performance.now() - started) / 1000);
        return result;
      },
      {
        // While stopping, the runner sees the member stopping and leaves the batch uncommitted.
        stopping: () => stopping,
        afterWait: () => ctx.heartbeat().catch(() => undefined),
        log,
        maxBackoffMs: maxBackoff,
      },
    );
  }

  const observations = await runBatchConsumer({
    kafka: deps.kafka,
    groupId: RECONCILER_GROUPS.observations,
    topic: OBSERVATION_TOPIC,
    serde: deps.serde,
    dlq: deps.dlq,
    logger: deps.logger,
    handleBatch: async (messages, ctx) => {
      const values = messages.map((m) => m.value);
      await inLedger(OBSERVATION_TOPIC, ctx, () =>
        withLedgerTransaction(
          deps.db,
          (trx) => applyObservations(trx, values, { rules: deps.rules, logger: deps.logger, known }),
          { logger: deps.logger },
        ),
      );
    },
  });

  const intents = await runBatchConsumer({
    kafka: deps.kafka,
    groupId: RECONCILER_GROUPS.intents,
    topic: INTENT_TOPIC,
    serde: deps.serde,
    dlq: deps.dlq,
    logger: deps.logger,
    handleBatch: async (messages, ctx) => {
      const values = messages.map((m) => m.value);
      await inLedger(INTENT_TOPIC, ctx, () =>
        withLedgerTransaction(
          deps.db,
          (trx) => recordIntents(trx, values, { rules: deps.rules, logger: deps.logger, known }),
          { logger: deps.logger },
        ),
      );
    },
  });

  return {
    consumers: [observations, intents],
    ready: Promise.all([observations.ready, intents.ready]).then(() => undefined),
    async stop() {
      stopping = true;
      await Promise.all([observations.stop(), intents.stop()]);
    },
  };
}
