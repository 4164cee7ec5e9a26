/**
 * Real parts for the producer and fetcher tests: the embedded schema registry and broker on port 0,
 * the catalog's topics, a publisher, a kafkajs consumer that collects decoded values, and the
 * provider account of the sandbox's default merchant.
 */

import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SchemaRegistry } from '@kafkajs/confluent-schema-registry';
import type { Consumer, Kafka } from 'kafkajs';
import type { ProviderAccount } from '../../src/config.ts';
import type { EntityKind } from '../../src/domain/statuses.ts';
import { type RunningBroker, startBroker } from '../../src/embedded/kafka/broker.ts';
import { type RunningRegistry, startRegistry } from '../../src/embedded/registry/registry.ts';
import { createKafka, createPublisher, ensureTopics, type Publisher } from '../../src/events/kafka.ts';
import type { NotificationReceived } from '../../src/events/payloads.ts';
import { registerSchemas, type Serde } from '../../src/events/serde.ts';
import type { TopicName, TopicValues } from '../../src/events/topics.ts';
import { createLogger } from '../../src/logger.ts';
import { DEFAULT_ACCOUNT } from '../../src/sandbox/accounts.ts';
import { waitFor } from '../helpers/wait.ts';

export const quiet = createLogger({ level: 'silent' });

export interface Infra {
  registry: RunningRegistry;
  broker: RunningBroker;
  kafka: Kafka;
  serde: Serde;
  publisher: Publisher;
  close(): Promise<void>;
}

export async function startInfra(): Promise<Infra> {
  const dirs = [
    mkdtempSync(join(tmpdir(), 'payrecon-prod-reg-')),
    mkdtempSync(join(tmpdir(), 'payrecon-prod-kafka-')),
  ];
  const registry = await startRegistry({ host: '127.0.0.1', port: 0, dataDir: dirs[0]! });
  const serde = await registerSchemas(new SchemaRegistry({ host: registry.url }));
  const broker = await startBroker({ host: '127.0.0.1', port: 0, dataDir: dirs[1]! });
  const kafka = createKafka({
    brokers: [`127.0.0.1:${broker.port}`],
    clientId: 'producers-test',
    retries: 2,
    logger: quiet,
  });
  const admin = kafka.admin();
  await admin.connect();
  await ensureTopics(admin, quiet);
  await admin.disconnect();
  const publisher = await createPublisher(kafka, serde);
  let closed = false;
  return {
    registry,
    broker,
    kafka,
    serde,
    publisher,
    async close() {
      if (closed) return;
      closed = true;
      await publisher.disconnect().catch(() => undefined);
      await broker.close().catch(() => undefined);
      await registry.close().catch(() => undefined);
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    },
  };
}

export interface Collector<T> {
  values: T[];
  headers: Record<string, string>[];
  keys: (string | null)[];
  /** Waits until at least `n` values arrived. */
  waitFor(n: number, ms?: number): Promise<T[]>;
  /**
   * Answers every value on the topic so far, to prove nothing more came: reads each partition's high
   * watermark now and waits until the collector has read up to it. Whatever was published (and
   * acknowledged) before the call is in the answer; no clock decides.
   */
  drain(ms?: number): Promise<T[]>;
  stop(): Promise<void>;
}

/** A fresh consumer group reading `topic` from the beginning, decoding every value. */
export async function collect<T extends TopicName>(
  infra: Infra,
  topic: T,
): Promise<Collector<TopicValues[T]>> {
  const values: TopicValues[T][] = [];
  const headers: Record<string, string>[] = [];
  const keys: (string | null)[] = [];
  /** Next offset to read, per partition. */
  const readUpTo = new Map<number, bigint>();
  const consumer: Consumer = infra.kafka.consumer({
    groupId: `collect-${randomBytes(4).toString('hex')}`,
    maxWaitTimeInMs: 100,
  });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  let joined: () => void = () => {};
  const ready = new Promise<void>((r) => {
    joined = r;
  });
  consumer.on(consumer.events.GROUP_JOIN, () => joined());
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      values.push((await infra.serde.decode(topic, message.value)) as TopicValues[T]);
      readUpTo.set(partition, BigInt(message.offset) + 1n);
      keys.push(message.key?.toString('utf8') ?? null);
      const h: Record<string, string> = {};
      for (const [k, v] of Object.entries(message.headers ?? {})) if (v !== undefined) h[k] = String(v);
      headers.push(h);
    },
  });
  await ready;
  return {
    values,
    headers,
    keys,
    async waitFor(n, ms = 20_000) {
      await waitFor(
        () => `${n} message(s) on ${topic}, got ${values.length}`,
        () => values.length >= n,
        ms,
      );
      return values;
    },
    async drain(ms = 20_000) {
      const admin = infra.kafka.admin();
      await admin.connect();
      let marks: { partition: number; high: string; low: string }[];
      try {
        marks = await admin.fetchTopicOffsets(topic);
      } finally {
        await admin.disconnect();
      }
      const behind = () =>
        marks.filter(
          (m) => BigInt(m.high) > BigInt(m.low) && (readUpTo.get(m.partition) ?? 0n) < BigInt(m.high),
        );
      await waitFor(`${topic} read up to its high watermarks`, () => behind().length === 0, ms);
      return values;
    },
    stop: () => consumer.disconnect(),
  };
}

/** The provider account of the sandbox's default merchant, pointing at a running sandbox. */
export function sandboxAccount(
  urls: { url: string; ccUrl: string },
  overrides: Partial<ProviderAccount> = {},
): ProviderAccount {
  return {
    name: 'main',
    baseUrl: urls.url,
    cardBaseUrl: urls.ccUrl,
    depositLogin: DEFAULT_ACCOUNT.login,
    depositSecret: DEFAULT_ACCOUNT.depositSecret,
    cashoutLogin: DEFAULT_ACCOUNT.cashoutLogin,
    cashoutPass: DEFAULT_ACCOUNT.cashoutPass,
    cashoutSecret: DEFAULT_ACCOUNT.cashoutSecret,
    readOnlyKey: DEFAULT_ACCOUNT.readOnlyKey,
    webhookSignatureMode: 'enforce',
    xDateWindowSeconds: 300,
    ...overrides,
  };
}

/** Moves a sandbox entity through the control API (`/_sandbox/<kind>s/<id>/transition`). */
export async function move(
  sandboxUrl: string,
  kind: 'deposit' | 'cashout' | 'refund',
  id: number | string,
  to: string,
  extra: Record<string, unknown> = {},
): Promise<void> {
  const { request } = await import('undici');
  const res = await request(`${sandboxUrl}/_sandbox/${kind}s/${id}/transition`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ to, ...extra }),
  });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`move ${kind} ${id} to ${to}: HTTP ${res.statusCode} ${text}`);
}

export const PAYER = {
  document: '12345678909',
  document_type: 'CPF',
  email: 'ana@example.com',
  first_name: 'Ana',
  last_name: 'Silva',
};

let seq = 0;
export function uniqueRef(prefix: string): string {
  seq++;
  return `${prefix}-${Date.now().toString(36)}-${seq}`;
}

/** A notification as the webhook ingress publishes it: verified, received now, no fields. */
export function notificationOf(
  kind: EntityKind,
  entityId: string,
  externalId: string | null = null,
  account = 'main',
): NotificationReceived {
  return {
    notificationId: randomUUID(),
    kind,
    account,
    entityId,
    externalId,
    notificationDate: null,
    receivedAt: new Date(),
    bodySha256: '0'.repeat(64),
    sourceIp: '127.0.0.1',
    authenticity: 'verified',
    fields: {},
  };
}
