import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SchemaRegistry } from '@kafkajs/confluent-schema-registry';
import type { Admin, Kafka, Producer } from 'kafkajs';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AppError } from '../../src/domain/errors.ts';
import type { Observation } from '../../src/domain/observation.ts';
import { type RunningBroker, startBroker } from '../../src/embedded/kafka/broker.ts';
import { type RunningRegistry, startRegistry } from '../../src/embedded/registry/registry.ts';
import {
  type ConsumedMessage,
  createKafka,
  createPublisher,
  DLQ_HEADERS,
  ensureTopics,
  type Publisher,
  type RunningConsumer,
  runBatchConsumer,
} from '../../src/events/kafka.ts';
import type { DlqEnvelope } from '../../src/events/payloads.ts';
import { registerSchemas, type Serde } from '../../src/events/serde.ts';
import { dlqTopicOf, type RetryPolicy, TOPIC_NAMES, TOPICS } from '../../src/events/topics.ts';
import { createLogger } from '../../src/logger.ts';
import { waitFor } from '../helpers/wait.ts';
import { sampleObservation } from './fixtures.ts';

const OBSERVED = 'provider.status.observed.v1';
const quiet = createLogger({ level: 'silent' });
const FAST_RETRY = { attempts: 3, initialBackoffMs: 50, maxBackoffMs: 100 };

const dirs: string[] = [];
function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), `payrecon-${prefix}-`));
  dirs.push(dir);
  return dir;
}

let registry: RunningRegistry;
let serde: Serde;
beforeAll(async () => {
  registry = await startRegistry({ host: '127.0.0.1', port: 0, dataDir: tempDir('events-registry') });
  serde = await registerSchemas(new SchemaRegistry({ host: registry.url }));
});
afterAll(async () => {
  await registry.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

let broker: RunningBroker;
let kafka: Kafka;
let admin: Admin;
let publisher: Publisher;
let rawProducer: Producer;
const consumers: RunningConsumer[] = [];

beforeEach(async () => {
  broker = await startBroker({ host: '127.0.0.1', port: 0, dataDir: tempDir('events-broker') });
  kafka = createKafka({
    brokers: [`127.0.0.1:${broker.port}`],
    clientId: 'events-test',
    retries: 3,
    logger: quiet,
  });
  admin = kafka.admin();
  await admin.connect();
  await ensureTopics(admin);
  publisher = await createPublisher(kafka, serde);
  rawProducer = kafka.producer({ allowAutoTopicCreation: false });
  await rawProducer.connect();
});
afterEach(async () => {
  for (const c of consumers.splice(0)) await c.stop();
  await rawProducer.disconnect();
  await publisher.disconnect();
  await admin.disconnect();
  await broker.close();
});

function observation(n: number, overrides: Partial<Observation> = {}): Observation {
  return sampleObservation({
    eventId: `event-${n}`,
    entityId: String(1000 + n),
    amount: BigInt(n) * 100n,
    ...overrides,
  });
}

/** Committed offsets of a group on the observed topic, by partition. */
async function committed(groupId: string): Promise<Map<number, string>> {
  const [entry] = await admin.fetchOffsets({ groupId, topics: [OBSERVED] });
  return new Map((entry?.partitions ?? []).map((p) => [p.partition, p.offset]));
}

/** Reads every message of a DLQ topic from the start. */
async function readDlq(count: number): Promise<{ envelope: DlqEnvelope; headers: Record<string, string> }[]> {
  const out: { envelope: DlqEnvelope; headers: Record<string, string> }[] = [];
  const consumer = kafka.consumer({
    groupId: `dlq-reader-${Date.now()}`,
    heartbeatInterval: 300,
    maxWaitTimeInMs: 300,
  });
  await consumer.connect();
  await consumer.subscribe({ topics: [dlqTopicOf(OBSERVED)], fromBeginning: true });
  await consumer.run({
    eachMessage: async ({ message }) => {
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(message.headers ?? {})) headers[k] = String(v);
      out.push({ envelope: await serde.decode(dlqTopicOf(OBSERVED), message.value), headers });
    },
  });
  try {
    await waitFor(`${count} DLQ message(s)`, () => out.length >= count);
  } finally {
    await consumer.disconnect();
  }
  return out;
}

function start(
  groupId: string,
  handleBatch: (messages: ConsumedMessage<Observation>[]) => Promise<void>,
  retry: Partial<RetryPolicy> = FAST_RETRY,
): Promise<RunningConsumer> {
  return runBatchConsumer({
    kafka,
    groupId,
    topic: OBSERVED,
    serde,
    dlq: publisher,
    retry,
    logger: quiet,
    heartbeatInterval: 300,
    maxWaitTimeInMs: 300,
    sessionTimeout: 10_000,
    handleBatch,
  }).then((c) => {
    consumers.push(c);
    return c;
  });
}

describe('ensureTopics', () => {
  it('creates every catalog topic and its DLQ with the catalog partitions, once', async () => {
    const metadata = await admin.fetchTopicMetadata({
      topics: TOPIC_NAMES.flatMap((t) => [t, dlqTopicOf(t)]),
    });
    for (const t of metadata.topics) {
      const base = t.name.replace(/\.dlq$/, '') as (typeof TOPIC_NAMES)[number];
      expect(t.partitions).toHaveLength(TOPICS[base].partitions);
    }
    expect(metadata.topics).toHaveLength(TOPIC_NAMES.length * 2);
    expect(await ensureTopics(admin)).toEqual([]);
  });
});

describe('publish', () => {
  it('fails with PUBLISH_FAILED when the topic does not exist, and never creates it', async () => {
    const bare = await startBroker({ host: '127.0.0.1', port: 0, dataDir: tempDir('events-bare') });
    const k = createKafka({
      brokers: [`127.0.0.1:${bare.port}`],
      clientId: 'bare',
      retries: 1,
      logger: quiet,
    });
    const p = await createPublisher(k, serde);
    try {
      const err = await p.publish(OBSERVED, [{ value: observation(1) }]).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(AppError);
      expect((err as AppError).code).toBe('PUBLISH_FAILED');
      expect((err as AppError).retryable).toBe(true);
      const a = k.admin();
      await a.connect();
      expect(await a.listTopics()).not.toContain(OBSERVED);
      await a.disconnect();
    } finally {
      await p.disconnect();
      await bare.close();
    }
  });

  it('refuses a value that does not fit its schema before sending anything', async () => {
    const err = await publisher
      .publish(OBSERVED, [{ value: observation(1, { amount: 1.5 as unknown as bigint }) }])
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect((err as AppError).code).toBe('SCHEMA_INVALID');
    const ends = await admin.fetchTopicOffsets(OBSERVED);
    expect(ends.every((p) => p.high === '0')).toBe(true);
  });
});

describe('publish and runBatchConsumer', () => {
  it('publishes keyed Avro messages and hands decoded values to the handler, then commits', async () => {
    const values = [1, 2, 3, 4, 5].map((n) => observation(n));
    // The same entity twice: both must land on one partition, in order.
    values.push(observation(6, { entityId: '1001', status: 'CANCELLED' }));
    await publisher.publish(
      OBSERVED,
      values.map((value) => ({ value, headers: { 'x-trace': value.eventId } })),
    );

    // publish resolved: the broker has acknowledged every message.
    const ends = await admin.fetchTopicOffsets(OBSERVED);
    expect(ends.reduce((sum, p) => sum + Number(p.high), 0)).toBe(values.length);

    const seen: ConsumedMessage<Observation>[] = [];
    await start('reconciler-roundtrip', async (batch) => {
      seen.push(...batch);
    });
    await waitFor('all messages', () => seen.length === values.length);

    expect(seen.map((m) => m.value).sort((a, b) => a.eventId.localeCompare(b.eventId))).toEqual(values);
    for (const m of seen) {
      expect(m.key).toBe(`deposit:main:${m.value.entityId}`);
      expect(m.headers['x-trace']).toBe(m.value.eventId);
    }
    const sameEntity = seen.filter((m) => m.value.entityId === '1001');
    expect(new Set(sameEntity.map((m) => m.partition)).size).toBe(1);
    expect(sameEntity.map((m) => m.value.status)).toEqual(['COMPLETED', 'CANCELLED']);

    await waitFor('offsets committed', async () => {
      const offsets = await committed('reconciler-roundtrip');
      let total = 0;
      for (const o of offsets.values()) total += Math.max(0, Number(o));
      return total === values.length;
    });
  });

  it('sends a corrupted message straight to the DLQ and handles the rest', async () => {
    const partition = 0;
    const good = await serde.encode(OBSERVED, observation(1));
    const corrupted = Buffer.from(good.subarray(0, 20));
    await rawProducer.send({
      topic: OBSERVED,
      messages: [
        { partition, key: 'deposit:main:1001', value: good },
        { partition, key: 'deposit:main:bad', value: corrupted, headers: { origin: 'test' } },
        { partition, key: 'deposit:main:1001', value: good },
      ],
    });
    let calls = 0;
    const handled: string[] = [];
    await start('reconciler-corrupt', async (batch) => {
      calls++;
      handled.push(...batch.map((m) => m.offset));
    });
    await waitFor('two good messages', () => handled.length === 2);
    expect(handled).toEqual(['0', '2']);

    const [dead] = await readDlq(1);
    expect(dead!.envelope).toMatchObject({
      originalTopic: OBSERVED,
      partition,
      offset: '1',
      key: 'deposit:main:bad',
      errorCode: 'SCHEMA_INVALID',
      attempts: 1,
      consumerGroup: 'reconciler-corrupt',
    });
    expect(dead!.envelope.value).toEqual(corrupted);
    expect(dead!.envelope.reason).toMatch(/field/);
    expect(dead!.headers[DLQ_HEADERS.reason]).toBe(dead!.envelope.reason);
    expect(dead!.headers[DLQ_HEADERS.errorCode]).toBe('SCHEMA_INVALID');
    expect(dead!.headers[DLQ_HEADERS.offset]).toBe('1');
    expect(dead!.headers.origin).toBe('test');
    // A schema failure never reaches the handler and is never retried.
    expect(calls).toBeGreaterThanOrEqual(1);
    await waitFor(
      'offset 3 committed',
      async () => (await committed('reconciler-corrupt')).get(partition) === '3',
    );
  });

  it('retries a retryable failure, then isolates and dead-letters the message that keeps failing', async () => {
    const partition = 1;
    const messages = await Promise.all(
      [1, 2, 3].map(async (n) => ({
        partition,
        key: `deposit:main:${1000 + n}`,
        value: await serde.encode(OBSERVED, observation(n)),
      })),
    );
    await rawProducer.send({ topic: OBSERVED, messages });

    const tries = new Map<string, number>();
    const applied: string[] = [];
    await start('reconciler-poison', async (batch) => {
      for (const m of batch) tries.set(m.value.eventId, (tries.get(m.value.eventId) ?? 0) + 1);
      if (batch.some((m) => m.value.eventId === 'event-2')) {
        throw new AppError('DATABASE_UNAVAILABLE', 'event-2 always fails');
      }
      applied.push(...batch.map((m) => m.value.eventId));
    });

    const [dead] = await readDlq(1);
    expect(dead!.envelope).toMatchObject({
      offset: '1',
      key: 'deposit:main:1002',
      errorCode: 'DATABASE_UNAVAILABLE',
      attempts: FAST_RETRY.attempts,
      reason: 'event-2 always fails',
    });
    expect(dead!.headers[DLQ_HEADERS.attempts]).toBe(String(FAST_RETRY.attempts));
    await waitFor('the other two applied', () => applied.length === 2);
    expect(applied.sort()).toEqual(['event-1', 'event-3']);
    // The whole batch was tried `attempts` times, then event-2 alone `attempts` more times.
    expect(tries.get('event-2')).toBe(FAST_RETRY.attempts * 2);
    await waitFor(
      'offset 3 committed',
      async () => (await committed('reconciler-poison')).get(partition) === '3',
    );
  });

  it('dead-letters a non-retryable failure without retrying it', async () => {
    const partition = 2;
    await rawProducer.send({
      topic: OBSERVED,
      messages: [
        { partition, key: 'deposit:main:1007', value: await serde.encode(OBSERVED, observation(7)) },
      ],
    });
    let calls = 0;
    await start('reconciler-illegal', async () => {
      calls++;
      throw new AppError('ILLEGAL_TRANSITION', 'COMPLETED to PENDING');
    });
    const [dead] = await readDlq(1);
    expect(dead!.envelope).toMatchObject({ errorCode: 'ILLEGAL_TRANSITION', attempts: 1 });
    expect(calls).toBe(1);
  });

  it('commits nothing before the handler resolved, and redelivers after a stop mid-batch', async () => {
    const partition = 3;
    await rawProducer.send({
      topic: OBSERVED,
      messages: [
        { partition, key: 'deposit:main:1008', value: await serde.encode(OBSERVED, observation(8)) },
      ],
    });
    // The marker: a message on another partition, fetched with the first one and handled by another
    // worker. Its batch finishes (and the member commits) only once the slow handler has been entered.
    const markerPartition = 0;
    await rawProducer.send({
      topic: OBSERVED,
      messages: [
        {
          partition: markerPartition,
          key: 'deposit:main:1010',
          value: await serde.encode(OBSERVED, observation(10)),
        },
      ],
    });
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let enteredSlow: () => void = () => {};
    const slowEntered = new Promise<void>((resolve) => {
      enteredSlow = resolve;
    });
    let entered = 0;
    const first = await start('reconciler-slow', async (batch) => {
      if (batch.some((m) => m.value.eventId === 'event-10')) {
        await slowEntered;
        return;
      }
      entered++;
      enteredSlow();
      await gate;
    });
    await waitFor('handler entered', () => entered === 1);
    // The member committed the marker's partition while the slow handler was still running ...
    await waitFor(
      'the marker partition committed',
      async () => (await committed('reconciler-slow')).get(markerPartition) === '1',
    );
    // ... and nothing of the partition whose handler has not resolved.
    expect((await committed('reconciler-slow')).get(partition)).toBe('-1');

    release();
    await waitFor(
      'offset 1 committed',
      async () => (await committed('reconciler-slow')).get(partition) === '1',
    );
    await first.stop();
    consumers.splice(consumers.indexOf(first), 1);

    // A handler that is stopped before resolving leaves the message to the next member.
    await rawProducer.send({
      topic: OBSERVED,
      messages: [
        { partition, key: 'deposit:main:1009', value: await serde.encode(OBSERVED, observation(9)) },
      ],
    });
    let stuck = 0;
    // A long back-off: the member is stopped while it waits to retry, before it could give up.
    const second = await start(
      'reconciler-slow',
      async () => {
        stuck++;
        throw new AppError('DATABASE_UNAVAILABLE', 'down');
      },
      { attempts: 5, initialBackoffMs: 60_000, maxBackoffMs: 60_000 },
    );
    await waitFor('second member tried', () => stuck >= 1);
    await second.stop();
    consumers.splice(consumers.indexOf(second), 1);
    expect((await committed('reconciler-slow')).get(partition)).toBe('1');

    const redelivered: string[] = [];
    await start('reconciler-slow', async (batch) => {
      redelivered.push(...batch.map((m) => m.value.eventId));
    });
    await waitFor('redelivery', () => redelivered.length === 1);
    expect(redelivered).toEqual(['event-9']);
  });
});
