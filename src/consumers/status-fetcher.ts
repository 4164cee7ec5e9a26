/**
 * The status fetcher: a notification says only "something happened to deposit N"; this consumer asks
 * the provider's status endpoint what, and publishes the answer as an observation (source `webhook`) on
 * `provider.status.observed.v1`.
 *
 * `handleNotifications(messages)` is the `handleBatch` of `runBatchConsumer` on
 * `provider.notification.received.v1`. It reads the batch's statuses with bounded concurrency (one
 * read per distinct entity: a duplicated notification in one batch costs one call), maps them through
 * `src/provider/to-observation.ts`, and publishes the whole batch's observations in one acknowledged
 * send before it resolves, so the runner commits offsets only after they are safe.
 *
 * - A notification is only a hint: the entity to read is its kind, account and id, nothing else. Its
 *   `external_id` and `bank_reference_id` are not used: anyone may send a notification (forged ones
 *   too, where signatures are not enforced, and the cashout `control` signs only the external id), so
 *   the reference, the bank reference and the link to an intent come from the provider's answer alone.
 * - "Not found" (404, code 208, code 509) becomes an observation with `status: null`: the ledger raises
 *   MISSING_AT_PROVIDER where an intent names the entity, and polls it a bounded number of times
 *   (`PollingRules.notFoundAttempts`) before it stops.
 * - Transient provider errors (timeouts, network, 5xx, 429) are thrown retryable: the runner retries
 *   the batch with back-off. On the batch's last try (`lastAttempt`, the topic's retry attempts) the
 *   entities the provider still would not answer for are handed to the poller (`handOver`: their next
 *   poll becomes now, `pollNow` in src/db/queries.ts) and the rest is published, so a provider that stops
 *   answering for a while does not fill the DLQ with good notifications (the chaos soak, under load with
 *   a 1 s provider timeout, dead-lettered six that way). Anything else (schema drift, an unknown account)
 *   is thrown non-retryable: the runner isolates the message and dead-letters it.
 */
import type { ProviderAccount } from '../config.ts';
import { pollNow } from '../db/polling/service.ts';
import type { Db } from '../db/schema.ts';
import { mapBounded } from '../domain/concurrency.ts';
import { AppError, isRetryableAppError } from '../domain/errors.ts';
import type { Observation } from '../domain/observation.ts';
import { type ConsumedMessage, createPublisher, type Publisher, runBatchConsumer } from '../events/kafka.ts';
import type { NotificationReceived } from '../events/payloads.ts';
import { NOTIFICATION_TOPIC, OBSERVATION_TOPIC, TOPICS } from '../events/topics.ts';
import { type Logger, logger as rootLogger } from '../logger.ts';
import { clientsFor, type ProviderClientOptions } from '../provider/client.ts';
import { type EntityToRead, readStatus, type StatusReader } from '../provider/to-observation.ts';

export interface StatusFetcherDeps {
  /** The provider client of an account; undefined when the account is not configured. */
  clientFor(account: string): StatusReader | undefined;
  publisher: Pick<Publisher, 'publish'>;
  /** Status calls in flight at once (default 8). */
  concurrency?: number;
  now?: () => Date;
  /** Called per observation published (metrics). */
  onObserved?: (observation: Observation) => void;
  logger?: Logger;
  /**
   * Entities whose status the provider would not give (a retryable error) on try `lastAttempt` of a
   * batch: handed to the poller instead of failing the batch towards the DLQ. Without it, such a batch
   * fails retryable on every try.
   */
  handOver?: (entities: readonly EntityToRead[]) => Promise<void>;
  /** The try of a batch on which `handOver` takes over (the topic's retry attempts; default 1). */
  lastAttempt?: number;
}

export interface StatusFetcher {
  /** `context.attempt`: which try of this batch this is (the runner's count; 1 when called directly). */
  handleNotifications(
    messages: readonly ConsumedMessage<NotificationReceived>[],
    context?: { attempt: number },
  ): Promise<void>;
}

export function createStatusFetcher(deps: StatusFetcherDeps): StatusFetcher {
  const concurrency = deps.concurrency ?? 32; // PAYRECON_FETCH_CONCURRENCY's default (src/config.ts)
  const now = deps.now ?? (() => new Date());
  const log = (deps.logger ?? rootLogger).child({ module: 'status-fetcher' });

  return {
    async handleNotifications(messages, context) {
      const handOver = deps.handOver;
      const last = handOver !== undefined && (context?.attempt ?? 1) >= (deps.lastAttempt ?? 1);
      // One read per entity per batch: duplicates and bursts collapse.
      const entities = new Map<string, EntityToRead>();
      for (const m of messages) {
        const n = m.value;
        const key = `${n.kind}:${n.account}:${n.entityId}`;
        if (!entities.has(key)) {
          entities.set(key, { kind: n.kind, account: n.account, entityId: n.entityId, externalRef: null });
        }
      }
      const unanswered: EntityToRead[] = [];
      const read = await mapBounded([...entities.values()], concurrency, async (entity) => {
        const client = deps.clientFor(entity.account);
        if (!client) {
          throw new AppError(
            'NOT_FOUND',
            `notification for account ${entity.account}, which is not configured`,
            {
              retryable: false,
              details: { account: entity.account },
            },
          );
        }
        try {
          return await readStatus(client, entity, 'webhook', now);
        } catch (err) {
          if (!last || !isRetryableAppError(err)) throw err;
          unanswered.push(entity);
          return null;
        }
      });
      const observations = read.filter((o): o is Observation => o !== null);
      if (unanswered.length > 0) {
        await handOver!(unanswered);
        log.warn(
          { entities: unanswered.length, attempt: context?.attempt ?? 1 },
          'the provider would not answer for these statuses; handed to the poller',
        );
      }
      await deps.publisher.publish(
        OBSERVATION_TOPIC,
        observations.map((value) => ({ value })),
      );
      for (const o of observations) deps.onObserved?.(o);
      log.debug({ notifications: messages.length, observations: observations.length }, 'statuses fetched');
    },
  };
}

export interface RunStatusFetcherOptions {
  kafka: Parameters<typeof runBatchConsumer>[0]['kafka'];
  serde: Parameters<typeof runBatchConsumer>[0]['serde'];
  accounts: readonly ProviderAccount[];
  providerOptions?: ProviderClientOptions;
  groupId?: string;
  concurrency?: number;
  logger?: Logger;
  /** The ledger's database: with it, statuses the provider would not give are handed to the poller. */
  db?: Db;
}

/**
 * The fetcher as a running consumer group member (`payrecon fetch`, and `payrecon up`): its own
 * publisher for observations and DLQ messages. `stop()` leaves the group and disconnects.
 */
export async function runStatusFetcher(options: RunStatusFetcherOptions) {
  const publisher = await createPublisher(options.kafka, options.serde);
  // Aborted at stop: a status read failing then is not retried (nor logged as retried).
  const stopping = new AbortController();
  const fetcher = createStatusFetcher({
    clientFor: clientsFor(options.accounts, {
      logger: options.logger ?? rootLogger,
      ...options.providerOptions,
      signal: stopping.signal,
    }),
    publisher,
    ...(options.concurrency === undefined ? {} : { concurrency: options.concurrency }),
    ...(options.logger === undefined ? {} : { logger: options.logger }),
    ...(options.db === undefined
      ? {}
      : {
          handOver: (entities: readonly EntityToRead[]) => pollNow(options.db!, entities, new Date()),
          lastAttempt: TOPICS[NOTIFICATION_TOPIC].retry.attempts,
        }),
  });
  const consumer = await runBatchConsumer({
    kafka: options.kafka,
    groupId: options.groupId ?? 'payrecon-status-fetcher',
    topic: NOTIFICATION_TOPIC,
    serde: options.serde,
    dlq: publisher,
    handleBatch: (messages, context) => fetcher.handleNotifications(messages, context),
    logger: options.logger ?? rootLogger,
  });
  return {
    ready: consumer.ready,
    consumer: consumer.consumer,
    async stop() {
      stopping.abort();
      await consumer.stop();
      await publisher.disconnect();
    },
  };
}
