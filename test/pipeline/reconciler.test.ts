/**
 * Reconciler, outbox relay and alert dispatcher over the real embedded broker (kafkajs over TCP), the
 * real registry (HTTP) and a real PostgreSQL database.
 */

import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SchemaRegistry } from '@kafkajs/confluent-schema-registry';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Admin, Kafka, Producer } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAlertConsumer } from '../../src/consumers/alert-dispatcher.ts';
import { type Reconciler, startReconciler } from '../../src/consumers/reconciler.ts';
import { balances } from '../../src/db/read-models/balances.ts';
import type { Intent } from '../../src/domain/observation.ts';
import { type RunningBroker, startBroker } from '../../src/embedded/kafka/broker.ts';
import { type RunningRegistry, startRegistry } from '../../src/embedded/registry/registry.ts';
import {
  createKafka,
  createPublisher,
  ensureTopics,
  type Publisher,
  type RunningConsumer,
} from '../../src/events/kafka.ts';
import { registerSchemas, type Serde } from '../../src/events/serde.ts';
import { createLogger } from '../../src/logger.ts';
import { type OutboxRelay, startOutboxRelay } from '../../src/producers/outbox-relay.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { waitFor } from '../helpers/wait.ts';
import { observation } from './helpers.ts';

const logger = createLogger({ level: 'silent' });
const dirs: string[] = [];
const tempDir = (p: string) => {
  const d = mkdtempSync(join(tmpdir(), `payrecon-${p}-`));
  dirs.push(d);
  return d;
};

describe('reconciler, outbox relay and alert dispatcher over Kafka', () => {
  let tdb: TestDatabase;
  let registry: RunningRegistry;
  let broker: RunningBroker;
  let kafka: Kafka;
  let admin: Admin;
  let serde: Serde;
  let publisher: Publisher;
  let raw: Producer;
  let reconciler: Reconciler;
  let relay: OutboxRelay;
  let alerts: RunningConsumer;
  let sink: FastifyInstance;
  const received: { alert_id: string; type: string; amount: string | null }[] = [];

  beforeAll(async () => {
    tdb = await createTestDatabase();
    registry = await startRegistry({ host: '127.0.0.1', port: 0, dataDir: tempDir('registry') });
    broker = await startBroker({ host: '127.0.0.1', port: 0, dataDir: tempDir('broker') });
    kafka = createKafka({ brokers: [`127.0.0.1:${broker.port}`], clientId: 'reconciler-test', logger });
    admin = kafka.admin();
    await admin.connect();
    await ensureTopics(admin, logger);
    serde = await registerSchemas(new SchemaRegistry({ host: registry.url }));
    publisher = await createPublisher(kafka, serde);
    raw = kafka.producer();
    await raw.connect();
    sink = Fastify();
    sink.post('/alerts', async (req) => {
      received.push(req.body as (typeof received)[number]);
      return 'ok';
    });
    const sinkUrl = `${await sink.listen({ host: '127.0.0.1', port: 0 })}/alerts`;
    reconciler = await startReconciler({ kafka, serde, dlq: publisher, db: tdb.db, logger });
    relay = startOutboxRelay({ db: tdb.db, publisher, logger, idleMs: 50 });
    alerts = await startAlertConsumer({
      kafka,
      serde,
      dlq: publisher,
      db: tdb.db,
      logger,
      sinks: [{ name: 'ops', type: 'webhook', url: sinkUrl, minSeverity: 'high', perMinute: 600 }],
    });
    await Promise.all([reconciler.ready, alerts.ready]);
  }, 120_000);

  afterAll(async () => {
    await alerts?.stop();
    await relay?.stop();
    await reconciler?.stop();
    await raw?.disconnect();
    await publisher?.disconnect();
    await admin?.disconnect();
    await broker?.close();
    await registry?.close();
    await sink?.close();
    await tdb?.drop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('books deposits and cashouts, absorbs duplicates, and alerts a late rejection once', async () => {
    const t = (s: number) => new Date(Date.UTC(2026, 10, 20, 12, 0, s));
    const intent: Intent = {
      intentId: randomUUID(),
      operation: 'cashout',
      account: 'main',
      externalRef: 'ext-1',
      entityId: '9001',
      currency: 'BRL',
      amount: 10_000n,
      expectedFee: null,
      test: false,
      crypto: false,
      feeOnPayer: false,
      parentDepositId: null,
      outcome: 'created',
      createdAt: t(0),
      request: { external_id: 'ext-1' },
      response: { cashout_id: '9001' },
    };
    const cashout = (status: string, s: number) =>
      observation({ kind: 'cashout', entityId: '9001', externalRef: 'ext-1', status, observedAt: t(s) });
    const deposit = observation({
      kind: 'deposit',
      entityId: '5001',
      externalRef: 'inv-1',
      status: 'COMPLETED',
      observedAt: t(5),
      currency: 'BRL',
      amount: 5_000n,
      feeAmount: 100n,
      feeCurrency: 'BRL',
      feeOnPayer: false,
    });
    const stream = [
      cashout('PENDING', 1),
      cashout('DELIVERED', 2),
      cashout('COMPLETED', 3),
      cashout('REJECTED', 9),
      deposit,
    ];
    await publisher.publish('merchant.intent.recorded.v1', [{ value: intent }]);
    // Every observation twice, in reverse order the second time.
    await publisher.publish(
      'provider.status.observed.v1',
      [...stream, ...[...stream].reverse()].map((value) => ({ value })),
    );

    const live = await waitFor('the ledger to settle', async () => {
      const rows = await balances(tdb.db, { merchantAccount: 'main', book: 'live' });
      const of = (name: string) => rows.find((r) => r.account === name && r.currency === 'BRL')?.balance;
      return of('payouts') === 0n && of('available') === 4_900n ? rows : undefined;
    });
    const of = (name: string) => live.find((r) => r.account === name)?.balance;
    expect(of('reserved')).toBe(0n);
    expect(of('fees')).toBe(100n);
    expect(of('deposits')).toBe(-5_000n);

    const late = await waitFor('the late-rejection alert', async () =>
      received.find((a) => a.type === 'LATE_REJECTION'),
    );
    expect(late.alert_id).toContain('9001');
    // Replaying the stream changes nothing and alerts nobody again.
    await publisher.publish(
      'provider.status.observed.v1',
      stream.map((value) => ({ value })),
    );
    // The marker: a later reading of the same cashout (same key, so the same partition of the observed
    // topic, the outbox order and the same partition of the alert topic) whose amount differs from the
    // intent. Its AMOUNT_MISMATCH alert arrives after anything the replay could have raised.
    await publisher.publish('provider.status.observed.v1', [
      {
        value: observation({
          kind: 'cashout',
          entityId: '9001',
          externalRef: 'ext-1',
          status: 'REJECTED',
          observedAt: t(10),
          currency: 'BRL',
          amount: 9_000n,
        }),
      },
    ]);
    await waitFor('the marker alert', async () =>
      received.find((a) => a.type === 'AMOUNT_MISMATCH' && a.alert_id.includes('9001')),
    );
    expect(received.filter((a) => a.type === 'LATE_REJECTION')).toHaveLength(1);
    const entries = await tdb.db.selectFrom('journal_entries').select(['idempotency_key']).execute();
    expect(new Set(entries.map((e) => e.idempotency_key)).size).toBe(entries.length);
  });

  it('sends a message that fails its schema to the DLQ with the reason, and keeps consuming', async () => {
    await raw.send({
      topic: 'provider.status.observed.v1',
      messages: [{ key: 'deposit:main:7', value: Buffer.from('not avro at all') }],
    });
    const dlq = kafka.consumer({ groupId: `dlq-reader-${randomUUID()}` });
    await dlq.connect();
    await dlq.subscribe({ topics: ['provider.status.observed.v1.dlq'], fromBeginning: true });
    const seen: Record<string, string>[] = [];
    await dlq.run({
      eachMessage: async ({ message }) => {
        const h: Record<string, string> = {};
        for (const [k, v] of Object.entries(message.headers ?? {})) h[k] = String(v);
        seen.push(h);
      },
    });
    const headers = await waitFor('the DLQ message', async () => seen[0]);
    await dlq.disconnect();
    expect(headers['x-dlq-error-code']).toBe('SCHEMA_INVALID');
    expect(headers['x-dlq-reason']).toBeTruthy();
    // The member is still consuming: a good observation after the bad one is booked.
    await publisher.publish('provider.status.observed.v1', [
      {
        value: observation({
          kind: 'deposit',
          entityId: '5002',
          status: 'COMPLETED',
          currency: 'USD',
          amount: 1_000n,
          feeAmount: 0n,
          feeCurrency: 'USD',
        }),
      },
    ]);
    await waitFor('the good message after the bad one', async () => {
      const rows = await balances(tdb.db, { merchantAccount: 'main', book: 'live' });
      return rows.find((r) => r.currency === 'USD' && r.account === 'available')?.balance === 1_000n
        ? true
        : undefined;
    });
  });
});
