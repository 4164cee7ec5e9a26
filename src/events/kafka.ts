/**
 * kafkajs wiring shared by every producer and consumer: the client, an idempotent publisher whose
 * `publish` resolves only once the broker acknowledged (acks -1), topic creation from the catalog, and
 * the batch consumer runner.
 *
 * The runner (`runBatchConsumer`) decodes a batch, hands the decoded messages to `handleBatch`, and
 * only then resolves and commits the offsets. A message that fails its schema goes straight to
 * `<topic>.dlq`. A handler error marked retryable (`isRetryableAppError`) is retried with the catalog's
 * back-off; once the attempts are spent, or on a non-retryable error, the batch is replayed one
 * message at a time to isolate the offending messages, which go to the DLQ, and the consumer moves on.
 * Offsets are never committed before the handler (or the DLQ publish) has resolved, so a crash
 * replays the batch: handlers must be idempotent.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import {
  type Admin,
  type Consumer,
  type IHeaders,
  type ISocketFactory,
  Kafka,
  type KafkaMessage,
  type LogEntry,
  logLevel,
  Partitioners,
  type Producer,
  type SASLOptions,
} from 'kafkajs';
import { pino } from 'pino';
import { AppError, isRetryableAppError } from '../domain/errors.ts';
import type { Logger } from '../logger.ts';
import type { DlqEnvelope } from './payloads.ts';
import type { Serde } from './serde.ts';
import { DEFAULT_TOPIC_PLAN, ensureTopicPlan, type TopicPlanSettings } from './topic-plan.ts';
import {
  type AnyTopicName,
  backoffMs,
  dlqTopicOf,
  isDlqTopicName,
  type RetryPolicy,
  TOPICS,
  type TopicName,
  type TopicValues,
  type ValueOf,
} from './topics.ts';

/** TLS and SASL towards the brokers (payrecon's KAFKA_SSL* and KAFKA_SASL_* settings). */
export interface KafkaSecuritySettings {
  readonly ssl: boolean;
  /** PEM CA bundle replacing the system's trusted CAs; null keeps them. */
  readonly caFile: string | null;
  /** Client certificate and key (mutual TLS). */
  readonly certFile: string | null;
  readonly keyFile: string | null;
  readonly sasl: {
    readonly mechanism: 'plain' | 'scram-sha-256' | 'scram-sha-512';
    readonly username: string;
    readonly password: string;
  } | null;
}

export const PLAINTEXT: KafkaSecuritySettings = {
  ssl: false,
  caFile: null,
  certFile: null,
  keyFile: null,
  sasl: null,
};

/** The logger of callers that give none: the callers (wiring, adapters) pass theirs. */
const SILENT: Logger = pino({ level: 'silent' });

export interface KafkaConfig {
  brokers: string[];
  clientId: string;
  /** TLS and SASL (default: plaintext, no authentication). */
  security?: KafkaSecuritySettings;
  /** kafkajs connection retries (default 8). */
  retries?: number;
  logger?: Logger;
}

/** The node:tls options of the settings (files read now), or null without TLS. */
export function tlsOptionsOf(security: KafkaSecuritySettings): tls.ConnectionOptions | null {
  if (!security.ssl) return null;
  return {
    ...(security.caFile ? { ca: readFileSync(security.caFile, 'utf8') } : {}),
    ...(security.certFile ? { cert: readFileSync(security.certFile, 'utf8') } : {}),
    ...(security.keyFile ? { key: readFileSync(security.keyFile, 'utf8') } : {}),
  };
}

function saslOptionsOf(security: KafkaSecuritySettings): SASLOptions | null {
  const sasl = security.sasl;
  if (!sasl) return null;
  return { mechanism: sasl.mechanism, username: sasl.username, password: sasl.password } as SASLOptions;
}

/**
 * kafkajs' socket with TCP_NODELAY: kafkajs leaves Nagle's algorithm on, which holds small requests
 * (a webhook's single event, a heartbeat) for tens of milliseconds (measured: p99 195 ms against 44 ms
 * at 1,000 messages/s, BENCHMARKS.md). TLS connections keep kafkajs' options.
 */
export const noDelaySocketFactory: ISocketFactory = ({ host, port, ssl, onConnect }) => {
  const socket = ssl
    ? tls.connect({ host, port, servername: host, ...(typeof ssl === 'object' ? ssl : {}) }, onConnect)
    : net.connect({ host, port }, onConnect);
  socket.setNoDelay(true);
  socket.setKeepAlive(true, 60_000);
  return socket;
};

/**
 * kafkajs lines that say nothing is wrong, logged at debug instead of warn or error:
 * - "Limiting retries for the idempotent producer may invalidate EoS guarantees": the warning is about
 *   transactions (exactly-once), which payrecon does not use; its producers are idempotent with bounded
 *   retries on purpose, so that a publish fails (PUBLISH_FAILED) instead of waiting forever.
 * - a CreateTopics response with "Topic creation errors" when another process created the same topics
 *   a moment before (parts starting together): kafkajs logs the response, then treats
 *   TOPIC_ALREADY_EXISTS as success; any other creation error still fails `ensureTopics`.
 */
function expectedNoise(message: string, fields: Record<string, unknown>): boolean {
  if (message.startsWith('Limiting retries for the idempotent producer')) return true;
  return message.startsWith('Response CreateTopics') && fields.error === 'Topic creation errors';
}

/** The kafkajs client, logging through pino. */
export function createKafka(config: KafkaConfig): Kafka {
  const log = (config.logger ?? SILENT).child({ module: 'kafkajs' });
  const security = config.security ?? PLAINTEXT;
  const ssl = tlsOptionsOf(security);
  const sasl = saslOptionsOf(security);
  return new Kafka({
    clientId: config.clientId,
    brokers: config.brokers,
    ...(ssl ? { ssl } : {}),
    ...(sasl ? { sasl } : {}),
    retry: { initialRetryTime: 100, retries: config.retries ?? 8 },
    socketFactory: noDelaySocketFactory,
    logLevel: logLevel.WARN,
    logCreator: () => (entry: LogEntry) => {
      const { message, timestamp: _t, ...fields } = entry.log;
      const data = { namespace: entry.namespace, ...fields };
      if (expectedNoise(message, fields)) log.debug(data, message);
      else if (entry.level === logLevel.ERROR) log.error(data, message);
      else if (entry.level === logLevel.WARN) log.warn(data, message);
      else if (entry.level === logLevel.INFO) log.info(data, message);
      else log.debug(data, message);
    },
  });
}

/** What a process learns about its own traffic (metrics); every hook is optional. */
export interface KafkaHooks {
  /** Messages acknowledged by the broker, per topic (after each send). */
  onPublished?(topic: string, count: number): void;
  /** A batch a consumer group member processed (kafkajs END_BATCH_PROCESS). */
  onConsumed?(topic: string, groupId: string, count: number): void;
  /** A consumer group this process runs and the topics it subscribed to (per `subscribe`). */
  onGroup?(groupId: string, topics: readonly string[]): void;
}

/**
 * The same client with `hooks` told of every acknowledged send of its producers and every batch its
 * consumers process, so each topic published or consumed anywhere in the process is counted once, in
 * one place, without the producers and consumers knowing about metrics.
 */
export function instrumentKafka(kafka: Kafka, hooks: KafkaHooks): Kafka {
  const countSent = (records: { topic: string; messages: unknown[] }[]) => {
    for (const r of records) if (r.messages.length > 0) hooks.onPublished?.(r.topic, r.messages.length);
  };
  const producer: Kafka['producer'] = (config) => {
    const p = kafka.producer(config);
    const send = p.send.bind(p);
    const sendBatch = p.sendBatch.bind(p);
    p.send = async (record) => {
      const result = await send(record);
      countSent([record]);
      return result;
    };
    p.sendBatch = async (batch) => {
      const result = await sendBatch(batch);
      countSent(batch.topicMessages ?? []);
      return result;
    };
    return p;
  };
  const consumer: Kafka['consumer'] = (config) => {
    const c = kafka.consumer(config);
    const subscribe = c.subscribe.bind(c);
    c.subscribe = async (subscription) => {
      await subscribe(subscription);
      const topics = 'topics' in subscription ? subscription.topics : [subscription.topic];
      hooks.onGroup?.(
        config.groupId,
        topics.filter((t): t is string => typeof t === 'string'),
      );
    };
    c.on(c.events.END_BATCH_PROCESS, (event) => {
      const { topic, batchSize } = event.payload;
      if (batchSize > 0) hooks.onConsumed?.(topic, config.groupId, batchSize);
    });
    return c;
  };
  return new Proxy(kafka, {
    get(target, prop) {
      if (prop === 'producer') return producer;
      if (prop === 'consumer') return consumer;
      const value = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

// ---- topics

/**
 * Brings the topics to the plan at start-up (`ensureTopicPlan`): creates the missing ones (with
 * auto-create on; with it off, fails naming them) and logs how existing topics differ from the plan.
 * Answers the names created.
 */
export async function ensureTopics(
  admin: Admin,
  log: Logger = SILENT,
  plan: TopicPlanSettings = DEFAULT_TOPIC_PLAN,
): Promise<string[]> {
  const events = log.child({ module: 'events' });
  return ensureTopicPlan(admin, plan, (line) => events.warn(`topic differs from the plan: ${line}`));
}

// ---- publishing

export interface OutgoingMessage<T> {
  value: T;
  headers?: Record<string, string>;
  /** Overrides the catalog's key (the DLQ keeps the original message's key). */
  key?: string | null;
}

export interface Publisher {
  /** Encodes and sends; resolves once every message is acknowledged by all in-sync replicas. */
  publish<T extends AnyTopicName>(topic: T, messages: OutgoingMessage<ValueOf<T>>[]): Promise<void>;
  readonly producer: Producer;
  disconnect(): Promise<void>;
}

function keyOf<T extends AnyTopicName>(topic: T, message: OutgoingMessage<ValueOf<T>>): string | null {
  if (message.key !== undefined) return message.key;
  if (isDlqTopicName(topic)) return (message.value as DlqEnvelope).key;
  const spec = TOPICS[topic as TopicName] as { key(value: unknown): string };
  return spec.key(message.value);
}

interface PendingSend {
  topic: string;
  messages: { key: string | null; value: Buffer; headers?: Record<string, string> }[];
  resolve(): void;
  reject(err: unknown): void;
}

/**
 * An idempotent producer (acks -1, one request in flight, so retries never reorder or duplicate) with
 * group commit: publishes that arrive while a request is in flight wait and go out together in the next
 * `sendBatch`, so many concurrent callers (one per webhook) share one round trip instead of queueing
 * one request each. Every caller still resolves only once its own messages are acknowledged, and fails
 * with PUBLISH_FAILED when the request carrying them fails. Order per topic is the order of `publish`.
 */
export async function createPublisher(kafka: Kafka, serde: Serde): Promise<Publisher> {
  const producer = kafka.producer({
    // Chosen explicitly (kafkajs 2's default, murmur2 like the Java client), which also keeps kafkajs from
    // warning at every start that its default changed in 2.0.
    createPartitioner: Partitioners.DefaultPartitioner,
    idempotent: true,
    maxInFlightRequests: 1,
    allowAutoTopicCreation: false,
  });
  await producer.connect();
  let pending: PendingSend[] = [];
  let pumping = false;

  async function pump(): Promise<void> {
    if (pumping) return;
    pumping = true;
    try {
      while (pending.length > 0) {
        const sends = pending;
        pending = [];
        const byTopic = new Map<string, PendingSend['messages']>();
        for (const s of sends) {
          const list = byTopic.get(s.topic) ?? [];
          list.push(...s.messages);
          byTopic.set(s.topic, list);
        }
        try {
          await producer.sendBatch({
            acks: -1,
            topicMessages: [...byTopic].map(([topic, messages]) => ({ topic, messages })),
          });
          for (const s of sends) s.resolve();
        } catch (err) {
          for (const s of sends) {
            s.reject(
              new AppError(
                'PUBLISH_FAILED',
                `publishing ${s.messages.length} message(s) to ${s.topic} failed`,
                {
                  cause: err,
                  details: { topic: s.topic },
                },
              ),
            );
          }
        }
      }
    } finally {
      pumping = false;
    }
  }

  return {
    producer,
    async publish(topic, messages) {
      if (messages.length === 0) return;
      const encoded = await Promise.all(
        messages.map(async (m) => ({
          key: keyOf(topic, m),
          value: await serde.encode(topic, m.value),
          ...(m.headers ? { headers: m.headers } : {}),
        })),
      );
      await new Promise<void>((resolve, reject) => {
        pending.push({ topic, messages: encoded, resolve, reject });
        void pump();
      });
    },
    disconnect: () => producer.disconnect(),
  };
}

// ---- consuming

export interface ConsumedMessage<T> {
  topic: string;
  partition: number;
  offset: string;
  key: string | null;
  timestamp: string;
  headers: Record<string, string>;
  value: T;
}

export interface BatchContext {
  /** Call during long work so the group does not drop the member. */
  heartbeat(): Promise<void>;
  /** How many times this batch has been tried, the current try included. */
  attempt: number;
}

export interface BatchConsumerOptions<T extends TopicName> {
  kafka: Kafka;
  groupId: string;
  topic: T;
  serde: Serde;
  handleBatch(messages: ConsumedMessage<TopicValues[T]>[], context: BatchContext): Promise<void>;
  /** Where given-up messages go (`<topic>.dlq`). */
  dlq: Publisher;
  /** Overrides of the catalog's retry policy (tests use short back-offs). */
  retry?: Partial<RetryPolicy>;
  /** Start from the earliest offset when the group has none committed (default true). */
  fromBeginning?: boolean;
  sessionTimeout?: number;
  heartbeatInterval?: number;
  /** Longest a fetch waits for data (kafkajs default 5 s); a stop waits for the fetch in flight. */
  maxWaitTimeInMs?: number;
  /**
   * Batches of different partitions handled at once (default: the topic's partition count). Keys are
   * entities, so concurrent batches touch different entities; per-partition order and offsets are kept.
   */
  partitionsConsumedConcurrently?: number;
  logger?: Logger;
}

export interface RunningConsumer {
  consumer: Consumer;
  /** Resolves once the consumer has joined its group the first time. */
  ready: Promise<void>;
  stop(): Promise<void>;
}

/**
 * Largest original value a DLQ envelope carries whole. A broker refuses messages above its limit (Kafka's
 * default is about 1 MB), and a DLQ publish that fails leaves the batch uncommitted and retried for
 * ever; above this size the envelope keeps the value's start, its size and SHA-256, and where the
 * original still is (topic, partition, offset).
 */
export const DLQ_VALUE_LIMIT = 256 * 1024;

/** Header names of a DLQ message; the same facts are in the envelope. */
export const DLQ_HEADERS = {
  reason: 'x-dlq-reason',
  errorCode: 'x-dlq-error-code',
  originalTopic: 'x-dlq-original-topic',
  partition: 'x-dlq-original-partition',
  offset: 'x-dlq-original-offset',
  attempts: 'x-dlq-attempts',
  group: 'x-dlq-consumer-group',
} as const;

const MAX_REASON = 2_000;

interface Failure {
  message: KafkaMessage;
  error: unknown;
  attempts: number;
}

class Stopped extends Error {}

function headersToStrings(headers: IHeaders | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, raw] of Object.entries(headers ?? {})) {
    const value = Array.isArray(raw) ? raw[raw.length - 1] : raw;
    if (value !== undefined) out[name] = Buffer.isBuffer(value) ? value.toString('utf8') : String(value);
  }
  return out;
}

function errorCode(err: unknown): string {
  return err instanceof AppError ? err.code : 'INTERNAL';
}

function errorText(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).slice(0, MAX_REASON);
}

/**
 * Runs a consumer group member on `topic` with `eachBatch`, offsets resolved by hand
 * (`eachBatchAutoResolve: false`) and committed only after the batch was handled or dead-lettered.
 */
export async function runBatchConsumer<T extends TopicName>(
  options: BatchConsumerOptions<T>,
): Promise<RunningConsumer> {
  const { kafka, groupId, topic, serde, handleBatch, dlq } = options;
  const policy: RetryPolicy = { ...TOPICS[topic].retry, ...options.retry };
  const log = (options.logger ?? SILENT).child({ module: 'consumer', topic, groupId });
  const consumer = kafka.consumer({
    groupId,
    allowAutoTopicCreation: false,
    sessionTimeout: options.sessionTimeout ?? 30_000,
    heartbeatInterval: options.heartbeatInterval ?? 3_000,
    maxWaitTimeInMs: options.maxWaitTimeInMs ?? 5_000,
  });

  let joined: () => void = () => {};
  const ready = new Promise<void>((resolve) => {
    joined = resolve;
  });
  consumer.on(consumer.events.GROUP_JOIN, () => joined());
  consumer.on(consumer.events.CRASH, (event) => {
    log.error({ err: event.payload.error, restart: event.payload.restart }, 'consumer crashed');
  });

  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: options.fromBeginning ?? true });

  await consumer.run({
    partitionsConsumedConcurrently: options.partitionsConsumedConcurrently ?? TOPICS[topic].partitions,
    eachBatchAutoResolve: false,
    autoCommit: true,
    eachBatch: async ({ batch, resolveOffset, heartbeat, commitOffsetsIfNecessary, isRunning, isStale }) => {
      if (batch.messages.length === 0) return;
      const live = () => isRunning() && !isStale();
      /** Waits the back-off before try `attempt`, heartbeating, and gives up if the member stops. */
      const pause = async (attempt: number) => {
        let left = backoffMs(policy, attempt);
        while (left > 0) {
          if (!live()) throw new Stopped();
          const step = Math.min(left, 1_000);
          await new Promise((r) => setTimeout(r, step));
          left -= step;
          if (live()) await heartbeat();
        }
        if (!live()) throw new Stopped();
      };
      /** Tries `work` per the policy; answers the last error and the tries spent, or null on success. */
      const attempt = async (
        work: (n: number) => Promise<void>,
      ): Promise<{ error: unknown; tries: number } | null> => {
        for (let n = 1; ; n++) {
          try {
            await work(n);
            return null;
          } catch (error) {
            if (error instanceof Stopped) throw error;
            if (!isRetryableAppError(error) || n >= policy.attempts) return { error, tries: n };
            log.warn({ err: error, attempt: n, partition: batch.partition }, 'batch failed, retrying');
            await pause(n + 1);
          }
        }
      };

      try {
        const decoded: ConsumedMessage<TopicValues[T]>[] = [];
        const failures: Failure[] = [];
        for (const message of batch.messages) {
          let value: TopicValues[T] | undefined;
          const failed = await attempt(async () => {
            value = (await serde.decode(topic, message.value)) as TopicValues[T];
          });
          if (failed) {
            failures.push({ message, error: failed.error, attempts: failed.tries });
            continue;
          }
          decoded.push({
            topic,
            partition: batch.partition,
            offset: message.offset,
            key: message.key === null ? null : message.key.toString('utf8'),
            timestamp: message.timestamp,
            headers: headersToStrings(message.headers),
            value: value as TopicValues[T],
          });
        }

        if (decoded.length > 0) {
          const failed = await attempt((n) => handleBatch(decoded, { heartbeat, attempt: n }));
          if (failed && decoded.length === 1) {
            failures.push({
              message: original(batch.messages, decoded[0]!),
              error: failed.error,
              attempts: failed.tries,
            });
          } else if (failed) {
            log.warn(
              { err: failed.error, size: decoded.length },
              'batch failed, isolating the offending messages',
            );
            for (const one of decoded) {
              const alone = await attempt((n) => handleBatch([one], { heartbeat, attempt: n }));
              if (alone)
                failures.push({
                  message: original(batch.messages, one),
                  error: alone.error,
                  attempts: alone.tries,
                });
            }
          }
        }

        if (failures.length > 0) await sendToDlq(failures);
        const last = batch.messages[batch.messages.length - 1]!;
        resolveOffset(last.offset);
        await commitOffsetsIfNecessary();
      } catch (err) {
        if (err instanceof Stopped) {
          log.info({ partition: batch.partition }, 'member stopping or rebalanced; batch left uncommitted');
          return;
        }
        throw err;
      }

      async function sendToDlq(failures: Failure[]) {
        failures.sort((a, b) => Number(BigInt(a.message.offset) - BigInt(b.message.offset)));
        const failedAt = new Date();
        await dlq.publish(
          dlqTopicOf(topic),
          failures.map(({ message, error, attempts }) => {
            const key = message.key === null ? null : message.key.toString('utf8');
            const value = message.value;
            const truncated = value !== null && value.length > DLQ_VALUE_LIMIT;
            const envelope: DlqEnvelope = {
              originalTopic: topic,
              partition: batch.partition,
              offset: message.offset,
              key,
              value: truncated ? value.subarray(0, DLQ_VALUE_LIMIT) : value,
              valueSize: value === null ? null : value.length,
              valueSha256: value === null ? null : createHash('sha256').update(value).digest('hex'),
              valueTruncated: truncated,
              reason: errorText(error),
              errorCode: errorCode(error),
              failedAt,
              attempts,
              consumerGroup: groupId,
            };
            log.error(
              { err: error, partition: batch.partition, offset: message.offset, key, attempts },
              'message sent to the DLQ',
            );
            return {
              key,
              value: envelope,
              headers: {
                ...headersToStrings(message.headers),
                [DLQ_HEADERS.reason]: envelope.reason,
                [DLQ_HEADERS.errorCode]: envelope.errorCode,
                [DLQ_HEADERS.originalTopic]: topic,
                [DLQ_HEADERS.partition]: String(batch.partition),
                [DLQ_HEADERS.offset]: message.offset,
                [DLQ_HEADERS.attempts]: String(attempts),
                [DLQ_HEADERS.group]: groupId,
              },
            };
          }),
        );
      }
    },
  });

  return {
    consumer,
    ready,
    stop: async () => {
      await consumer.disconnect();
    },
  };
}

function original(messages: KafkaMessage[], decoded: { offset: string }): KafkaMessage {
  return messages.find((m) => m.offset === decoded.offset)!;
}
