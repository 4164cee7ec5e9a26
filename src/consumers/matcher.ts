/**
 * The match consumer: consumes the lines imports brought (`imports.bank-lines.v1`,
 * `imports.provider-transactions.v1`, `imports.provider-settlements.v1`) and runs matching
 * (`runMatching`) with the configured rules. The lines are already stored when their message exists (the
 * import wrote them and the message in one transaction), so a message is the signal to match, checked
 * first: one that does not fit its schema or carries an invalid line goes to the topic's DLQ with the
 * reason, like every consumer's.
 *
 * Runs coalesce: a batch that arrives while a run is in progress waits for one further run, shared by
 * every batch that arrived meanwhile, so a burst of messages costs at most two runs. Matching is
 * incremental and idempotent (a replayed message adds nothing). Offsets commit after the run that saw
 * the batch's lines committed. While PostgreSQL is unreachable the batch waits and retries.
 */
import type { Kafka } from 'kafkajs';
import { waitOutDatabaseOutages } from '../db/connection.ts';
import { type MatchingRun, type RunMatchingOptions, runMatching } from '../db/matching/service.ts';
import type { Db } from '../db/schema.ts';
import type { MatchRule } from '../domain/matching.ts';
import { type Publisher, type RunningConsumer, runBatchConsumer } from '../events/kafka.ts';
import type { Serde } from '../events/serde.ts';
import { IMPORT_TOPIC_NAMES, type ImportTopicName, type RetryPolicy } from '../events/topics.ts';
import type { Logger } from '../logger.ts';

/** One consumer group per topic, as the reconciler's. */
export const MATCH_CONSUMER_GROUPS: Readonly<Record<ImportTopicName, string>> = {
  'imports.bank-lines.v1': 'payrecon-match-bank-lines',
  'imports.provider-transactions.v1': 'payrecon-match-provider-transactions',
  'imports.provider-settlements.v1': 'payrecon-match-provider-settlements',
};

export interface MatchConsumerDeps {
  kafka: Kafka;
  serde: Serde;
  dlq: Publisher;
  db: Db;
  logger: Logger;
  /** The matching rules in priority order (PAYRECON_MATCH_RULES). */
  rules: readonly MatchRule[];
  /** Matching's other settings (bank accounts, grace, exception rules, report account). */
  options?: RunMatchingOptions;
  /** Told of each run: how many imported lines triggered it, and what it matched. */
  onRun?: (run: MatchingRun, lines: number) => void;
  /** Overrides of the topics' retry policy (tests use short back-offs). */
  retry?: Partial<RetryPolicy>;
  /** Longest wait between two tries while the database is down (default 5 s). */
  maxOutageBackoffMs?: number;
}

export interface MatchConsumer {
  consumers: RunningConsumer[];
  ready: Promise<void>;
  stop(): Promise<void>;
}

/** One run now, or a share in the next one when a run is in progress (which may predate the lines). */
export function coalescedRuns<T>(run: () => Promise<T>): () => Promise<T> {
  let running: Promise<T> | null = null;
  let queued: Promise<T> | null = null;
  const launch = (): Promise<T> => {
    const p = run().finally(() => {
      if (running === p) running = null;
    });
    running = p;
    return p;
  };
  return () => {
    if (queued) return queued;
    if (!running) return launch();
    const after = running.then(
      () => undefined,
      () => undefined,
    );
    const next = after.then(() => {
      queued = null;
      return launch();
    });
    queued = next;
    return next;
  };
}

export async function startMatchConsumer(deps: MatchConsumerDeps): Promise<MatchConsumer> {
  const log = deps.logger.child({ module: 'match-consumer' });
  let stopping = false;
  let linesSinceRun = 0;
  const match = coalescedRuns(async () => {
    const lines = linesSinceRun;
    linesSinceRun = 0;
    const run = await runMatching(deps.db, deps.rules, deps.options ?? {});
    log.info({ lines, byRule: run.byRule, unmatched: run.unmatched }, 'imported lines matched');
    deps.onRun?.(run, lines);
    return run;
  });

  const consumers: RunningConsumer[] = [];
  try {
    for (const topic of IMPORT_TOPIC_NAMES) {
      consumers.push(
        await runBatchConsumer({
          kafka: deps.kafka,
          groupId: MATCH_CONSUMER_GROUPS[topic],
          topic,
          serde: deps.serde,
          dlq: deps.dlq,
          logger: deps.logger,
          ...(deps.retry ? { retry: deps.retry } : {}),
          handleBatch: async (messages, ctx) => {
            linesSinceRun += messages.reduce((n, m) => n + m.value.lines.length, 0);
            await waitOutDatabaseOutages(match, {
              stopping: () => stopping,
              afterWait: () => ctx.heartbeat().catch(() => undefined),
              log,
              maxBackoffMs: deps.maxOutageBackoffMs ?? 5_000,
            });
          },
        }),
      );
    }
  } catch (err) {
    await Promise.all(consumers.map((c) => c.stop()));
    throw err;
  }

  return {
    consumers,
    ready: Promise.all(consumers.map((c) => c.ready)).then(() => undefined),
    async stop() {
      stopping = true;
      await Promise.all(consumers.map((c) => c.stop()));
    },
  };
}
