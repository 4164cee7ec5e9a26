import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SchemaRegistry } from '@kafkajs/confluent-schema-registry';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Admin, Kafka } from 'kafkajs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  type AlertSinkConfig,
  createAlertDispatcher,
  startAlertConsumer,
} from '../../src/consumers/alert-dispatcher.ts';
import { type Reconciler, startReconciler } from '../../src/consumers/reconciler.ts';
import { type RunningBroker, startBroker } from '../../src/embedded/kafka/broker.ts';
import { type RunningRegistry, startRegistry } from '../../src/embedded/registry/registry.ts';
import {
  createKafka,
  createPublisher,
  ensureTopics,
  type Publisher,
  type RunningConsumer,
} from '../../src/events/kafka.ts';
import type { AlertRaised } from '../../src/events/payloads.ts';
import { registerSchemas, type Serde } from '../../src/events/serde.ts';
import { entityTopicKey } from '../../src/events/topics.ts';
import { createLogger } from '../../src/logger.ts';
import { type OutboxRelay, startOutboxRelay } from '../../src/producers/outbox-relay.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { sampleIntent } from '../events/fixtures.ts';
import { waitFor } from '../helpers/wait.ts';
import { observation } from '../pipeline/helpers.ts';

function alert(id: string, severity: string, type = 'LATE_REJECTION'): AlertRaised {
  return {
    alertId: id,
    type,
    severity: severity as AlertRaised['severity'],
    account: 'main',
    entityKind: 'cashout',
    entityId: id,
    amount: 12345n,
    currency: 'BRL',
    message: 'COMPLETED payout turned REJECTED',
    raisedAt: new Date('2026-11-21T10:00:00Z'),
    details: { rejection_code: '800' },
  };
}

interface Sink {
  app: FastifyInstance;
  url: string;
  bodies: unknown[];
  failNext: number;
}

async function startSink(): Promise<Sink> {
  const app = Fastify();
  const sink: Sink = { app, url: '', bodies: [], failNext: 0 };
  app.post('/hook', async (req, reply) => {
    if (sink.failNext > 0) {
      sink.failNext -= 1;
      return reply.code(500).send('down');
    }
    sink.bodies.push(req.body);
    return 'ok';
  });
  sink.url = `${await app.listen({ host: '127.0.0.1', port: 0 })}/hook`;
  return sink;
}

const logger = createLogger({ level: 'silent' });

describe('alert dispatcher', () => {
  let tdb: TestDatabase;
  let slack: Sink;
  let hook: Sink;

  beforeAll(async () => {
    tdb = await createTestDatabase();
    slack = await startSink();
    hook = await startSink();
  });
  afterAll(async () => {
    await slack.app.close();
    await hook.app.close();
    await tdb.drop();
  });
  afterEach(async () => {
    slack.bodies.length = 0;
    hook.bodies.length = 0;
    await tdb.db.deleteFrom('alert_deliveries' as never).execute();
  });

  function sinks(perMinute = 100): AlertSinkConfig[] {
    return [
      { name: 'slack', type: 'slack', url: slack.url, minSeverity: 'high', perMinute },
      { name: 'hook', type: 'webhook', url: hook.url, minSeverity: 'info', perMinute },
    ];
  }

  it('delivers each alert to each sink whose severity filter admits it, with exact amounts', async () => {
    const d = createAlertDispatcher({ db: tdb.db, sinks: sinks(), logger });
    const r = await d.dispatch([alert('a1', 'critical'), alert('a2', 'low', 'MISSED_NOTIFICATION')]);
    expect(r.delivered).toBe(3);
    expect(slack.bodies).toEqual([
      { text: '[critical] LATE_REJECTION cashout main/a1: COMPLETED payout turned REJECTED (123.45 BRL)' },
    ]);
    expect(hook.bodies).toHaveLength(2);
    expect(hook.bodies[0]).toMatchObject({
      alert_id: 'a1',
      amount: '123.45',
      currency: 'BRL',
      severity: 'critical',
    });
  });

  it('delivers a replayed alert only once per sink', async () => {
    const d = createAlertDispatcher({ db: tdb.db, sinks: sinks(), logger });
    await d.dispatch([alert('b1', 'critical'), alert('b1', 'critical')]);
    await d.dispatch([alert('b1', 'critical')]);
    // A new dispatcher (a restarted process) remembers through the database.
    await createAlertDispatcher({ db: tdb.db, sinks: sinks(), logger }).dispatch([alert('b1', 'critical')]);
    expect(slack.bodies).toHaveLength(1);
    expect(hook.bodies).toHaveLength(1);
  });

  it('folds alerts over the rate limit into one digest, losing none', async () => {
    const d = createAlertDispatcher({ db: tdb.db, sinks: sinks(3), logger });
    const batch = Array.from({ length: 10 }, (_, i) => alert(`c${i}`, 'critical'));
    const r = await d.dispatch(batch);
    expect(r.delivered).toBe(20);
    // 3 tokens: two single messages and one digest of the other eight.
    expect(slack.bodies).toHaveLength(3);
    const digest = (slack.bodies[2] as { text: string }).text;
    expect(digest).toMatch(/^8 payrecon alerts:/);
    for (let i = 2; i < 10; i++) expect(digest).toContain(`main/c${i}:`);
    expect(hook.bodies).toHaveLength(3);
    expect((hook.bodies[2] as { alerts: unknown[] }).alerts).toHaveLength(8);
  });

  it('throws a retryable error when a sink fails, and the retry skips the sink already served', async () => {
    const d = createAlertDispatcher({ db: tdb.db, sinks: sinks(), logger });
    slack.failNext = 1;
    await expect(d.dispatch([alert('d1', 'critical')])).rejects.toMatchObject({
      code: 'PUBLISH_FAILED',
      retryable: true,
    });
    expect(hook.bodies).toHaveLength(1);
    await d.dispatch([alert('d1', 'critical')]);
    expect(slack.bodies).toHaveLength(1);
    expect(hook.bodies).toHaveLength(1);
  });

  it('writes alerts to the log sink', async () => {
    const chunks: string[] = [];
    const stream = { write: (s: string) => chunks.push(s) };
    const { pino } = await import('pino');
    const log = pino({ level: 'info' }, stream as never);
    const d = createAlertDispatcher({
      db: tdb.db,
      sinks: [{ name: 'log', type: 'log', minSeverity: 'info' }],
      logger: log,
    });
    await d.dispatch([alert('e1', 'high', 'AMOUNT_MISMATCH')]);
    expect(chunks.join('')).toContain('[high] AMOUNT_MISMATCH cashout main/e1');
  });
});

/**
 * The chaos soak's set-up in small: ledger -> outbox -> relay -> topic -> dispatcher -> log sink and webhook,
 * over the embedded broker (kafkajs over TCP), the registry and PostgreSQL. The soak wrote every
 * AMOUNT_MISMATCH alert twice to the log: the provider's CANCELLED (status reason AMOUNT_MISMATCH) was
 * observed once by its webhook and once by the poller, and each sighting queued an alert of its own.
 */
describe('alert dispatcher over Kafka, with the log sink', () => {
  let tdb: TestDatabase;
  let registry: RunningRegistry;
  let broker: RunningBroker;
  let kafka: Kafka;
  let admin: Admin;
  let serde: Serde;
  let publisher: Publisher;
  let reconciler: Reconciler;
  let relay: OutboxRelay;
  let consumer: RunningConsumer;
  let hook: Sink;
  const dirs: string[] = [];
  const lines: {
    sink?: string;
    msg?: string;
    alert?: { alert_id: string; type: string; entity_id: string };
  }[] = [];
  const logged = (type: string, entityId: string) =>
    lines.filter((l) => l.sink === 'log' && l.alert?.type === type && l.alert.entity_id === entityId);
  const posted = (type: string, entityId: string) =>
    (hook.bodies as { alert_id: string; type: string; entity_id: string }[]).filter(
      (b) => b.type === type && b.entity_id === entityId,
    );

  /**
   * Queues a STUCK alert for the entity behind everything already in the outbox, under the key the
   * ledger gives the entity's alerts, and waits until both sinks delivered it.
   */
  async function publishMarker(kind: 'deposit', entityId: string): Promise<void> {
    const markerId = `STUCK:${kind}:main:${entityId}:marker`;
    await tdb.db
      .insertInto('outbox')
      .values({
        alert_id: markerId,
        topic: 'recon.alert.raised.v1',
        key: entityTopicKey(kind, 'main', entityId),
        payload: JSON.stringify({
          alertId: markerId,
          type: 'STUCK',
          severity: 'high',
          account: 'main',
          kind,
          entityId,
          count: 1,
          raisedAt: new Date().toISOString(),
          details: {},
        }),
      })
      .execute();
    await relay.relayOnce();
    await waitFor('the marker in the log', async () => logged('STUCK', entityId)[0]);
    await waitFor('the marker at the webhook', async () => posted('STUCK', entityId)[0]);
  }

  beforeAll(async () => {
    const tempDir = (p: string) => {
      const d = mkdtempSync(join(tmpdir(), `payrecon-${p}-`));
      dirs.push(d);
      return d;
    };
    tdb = await createTestDatabase();
    registry = await startRegistry({ host: '127.0.0.1', port: 0, dataDir: tempDir('registry') });
    broker = await startBroker({ host: '127.0.0.1', port: 0, dataDir: tempDir('broker') });
    kafka = createKafka({ brokers: [`127.0.0.1:${broker.port}`], clientId: 'alert-test', logger });
    admin = kafka.admin();
    await admin.connect();
    await ensureTopics(admin, logger);
    serde = await registerSchemas(new SchemaRegistry({ host: registry.url }));
    publisher = await createPublisher(kafka, serde);
    hook = await startSink();
    // As in the soak: LOG_LEVEL warn, both sinks at severity high.
    const sinkLog = createLogger(
      { level: 'warn' },
      { write: (s: string) => void lines.push(JSON.parse(s) as (typeof lines)[number]) },
    );
    reconciler = await startReconciler({ kafka, serde, dlq: publisher, db: tdb.db, logger });
    relay = startOutboxRelay({ db: tdb.db, publisher, logger, idleMs: 50 });
    consumer = await startAlertConsumer({
      kafka,
      serde,
      dlq: publisher,
      db: tdb.db,
      logger: sinkLog,
      sinks: [
        { name: 'log', type: 'log', minSeverity: 'high' },
        { name: 'webhook', type: 'webhook', url: hook.url, minSeverity: 'high', perMinute: 600 },
      ],
    });
    await Promise.all([reconciler.ready, consumer.ready]);
  }, 120_000);

  afterAll(async () => {
    await consumer?.stop();
    await relay?.stop();
    await reconciler?.stop();
    await publisher?.disconnect();
    await admin?.disconnect();
    await broker?.close();
    await registry?.close();
    await hook?.app.close();
    await tdb?.drop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('writes a provider AMOUNT_MISMATCH (PROVIDER_AMOUNT_MISMATCH) seen by the webhook and again by the poller to the log once', async () => {
    const t = (s: number) => new Date(Date.UTC(2026, 10, 20, 12, 0, s));
    const intent = sampleIntent({
      intentId: randomUUID(),
      operation: 'deposit',
      externalRef: 'inv-mm',
      entityId: '7001',
      createdAt: t(0),
      request: { invoice_id: 'inv-mm' },
      response: { deposit_id: '7001' },
    });
    // The sandbox's amount mismatch: the customer paid half, the provider cancels the deposit.
    const deposit = (status: string, s: number, source: 'webhook' | 'poll') =>
      observation({
        kind: 'deposit',
        entityId: '7001',
        externalRef: 'inv-mm',
        status,
        observedAt: t(s),
        source,
        currency: 'BRL',
        amount: 10_000n,
        statusReason: status === 'CANCELLED' ? 'AMOUNT_MISMATCH' : null,
      });
    await publisher.publish('merchant.intent.recorded.v1', [{ value: intent }]);
    await publisher.publish('provider.status.observed.v1', [
      { value: deposit('PENDING', 1, 'webhook') },
      { value: deposit('CANCELLED', 2, 'webhook') },
    ]);
    await waitFor('the alert in the log', async () => logged('PROVIDER_AMOUNT_MISMATCH', '7001')[0]);
    await waitFor('the alert at the webhook', async () => posted('PROVIDER_AMOUNT_MISMATCH', '7001')[0]);

    // The poller reads the same CANCELLED a moment later: a new observation of the same condition.
    await publisher.publish('provider.status.observed.v1', [{ value: deposit('CANCELLED', 3, 'poll') }]);
    await waitFor('the ledger to take the poll', async () => {
      const row = await tdb.db
        .selectFrom('status_history')
        .select('id')
        .where('entity_id', '=', '7001')
        .where('source', '=', 'poll')
        .executeTakeFirst();
      return row ? true : undefined;
    });
    const exception = await tdb.db
      .selectFrom('exceptions')
      .select(['count', 'state'])
      .where('type', '=', 'PROVIDER_AMOUNT_MISMATCH')
      .where('entity_id', '=', '7001')
      .executeTakeFirstOrThrow();
    // The exception counts both sightings; it is one open exception, so one alert.
    expect(exception).toEqual({ count: 2, state: 'open' });
    await relay.relayOnce();
    // Anything the poll's sighting queued is on the topic now; a marker alert of the same entity
    // (same key, same partition) is delivered after it.
    await publishMarker('deposit', '7001');
    const id = 'PROVIDER_AMOUNT_MISMATCH:deposit:main:7001:1';
    expect(logged('PROVIDER_AMOUNT_MISMATCH', '7001').map((l) => l.alert?.alert_id)).toEqual([id]);
    expect(posted('PROVIDER_AMOUNT_MISMATCH', '7001').map((b) => b.alert_id)).toEqual([id]);
  });

  it("carries each exception's facts to the log and the webhook: amount, currency, ids, status, reason, rule", async () => {
    const t = (s: number) => new Date(Date.UTC(2026, 10, 20, 13, 0, s));
    // A cashout rejected by its bank after it completed (code 826), and a deposit paid short.
    await publisher.publish('merchant.intent.recorded.v1', [
      {
        value: sampleIntent({
          intentId: randomUUID(),
          operation: 'cashout',
          externalRef: 'ext-826',
          entityId: '7101',
          amount: 5_000n,
          createdAt: t(0),
        }),
      },
      {
        value: sampleIntent({
          intentId: randomUUID(),
          operation: 'deposit',
          externalRef: 'inv-short',
          entityId: '7102',
          amount: 157_954n,
          createdAt: t(0),
          request: { invoice_id: 'inv-short' },
          response: { deposit_id: '7102' },
        }),
      },
    ]);
    await publisher.publish('provider.status.observed.v1', [
      {
        value: observation({
          kind: 'cashout',
          entityId: '7101',
          externalRef: 'ext-826',
          status: 'COMPLETED',
          observedAt: t(1),
        }),
      },
      {
        value: observation({
          kind: 'cashout',
          entityId: '7101',
          externalRef: 'ext-826',
          status: 'REJECTED',
          observedAt: t(2),
          rejectionCode: '826',
          rejectionReason: 'Withdrawal reversed',
        }),
      },
      {
        value: observation({
          kind: 'deposit',
          entityId: '7102',
          externalRef: 'inv-short',
          status: 'PENDING',
          observedAt: t(1),
          currency: 'BRL',
          amount: 150_000n,
        }),
      },
    ]);
    type Sent = {
      alert_id: string;
      amount: string | null;
      currency: string | null;
      message: string;
      details: { facts?: Record<string, unknown> };
    };
    const log = await waitFor(
      'the late rejection in the log',
      async () => logged('LATE_REJECTION', '7101')[0],
    );
    const hooked = await waitFor(
      'the late rejection at the webhook',
      async () => posted('LATE_REJECTION', '7101')[0],
    );
    const mismatchLog = await waitFor(
      'the mismatch in the log',
      async () => logged('AMOUNT_MISMATCH', '7102')[0],
    );
    const mismatchHook = await waitFor(
      'the mismatch at the webhook',
      async () => posted('AMOUNT_MISMATCH', '7102')[0],
    );
    for (const sent of [log.alert, hooked] as unknown as Sent[]) {
      // A cashout's status carries no amount: the intent's is the one known, and the alert has it.
      expect(sent).toMatchObject({
        amount: '50.00',
        currency: 'BRL',
        message: expect.stringMatching(/rejected later/),
      });
      expect(sent.details.facts).toMatchObject({
        entity: 'cashout:7101',
        externalRef: 'ext-826',
        intentAmount: '50.00',
        intentCurrency: 'BRL',
        providerAmount: null,
        status: 'REJECTED',
        rejectionCode: '826',
        rejectionReason: 'Withdrawal reversed',
        rule: expect.stringMatching(/rejected later/),
      });
    }
    expect((log as { msg?: string }).msg).toBe(
      `[critical] LATE_REJECTION cashout main/7101: ${(log.alert as unknown as Sent).message} (50.00 BRL)`,
    );
    for (const sent of [mismatchLog.alert, mismatchHook] as unknown as Sent[]) {
      expect(sent).toMatchObject({
        amount: '1500.00',
        currency: 'BRL',
        message: expect.stringMatching(/differs/),
      });
      expect(sent.details.facts).toMatchObject({
        entity: 'deposit:7102',
        externalRef: 'inv-short',
        intentAmount: '1579.54',
        intentCurrency: 'BRL',
        providerAmount: '1500.00',
        providerCurrency: 'BRL',
        status: 'PENDING',
        rule: expect.stringMatching(/differs from the amount of the merchant's intent/),
      });
    }
  });

  it('writes an alert the relay published twice (at-least-once) to the log once', async () => {
    await tdb.db
      .insertInto('outbox')
      .values({
        alert_id: 'AMOUNT_MISMATCH:deposit:main:7002:1',
        topic: 'recon.alert.raised.v1',
        key: entityTopicKey('deposit', 'main', '7002'),
        payload: JSON.stringify({
          alertId: 'AMOUNT_MISMATCH:deposit:main:7002:1',
          type: 'AMOUNT_MISMATCH',
          severity: 'high',
          account: 'main',
          kind: 'deposit',
          entityId: '7002',
          count: 1,
          raisedAt: new Date().toISOString(),
          details: { statusReason: 'AMOUNT_MISMATCH' },
        }),
      })
      .execute();
    await waitFor('the alert in the log', async () => logged('AMOUNT_MISMATCH', '7002')[0]);
    // The relay marks the row after the broker took it, so the dispatcher can log the alert first: wait for
    // the mark, or it would land after the reset below and leave nothing to send again.
    const marked = await waitFor('the relay to mark the row published', () =>
      tdb.db
        .selectFrom('outbox')
        .select(['attempts'])
        .where('alert_id', '=', 'AMOUNT_MISMATCH:deposit:main:7002:1')
        .where('published_at', 'is not', null)
        .executeTakeFirst(),
    );
    // A relay that published but could not mark the row (the broker or PostgreSQL went away) sends it again.
    await tdb.db
      .updateTable('outbox')
      .set({ published_at: null })
      .where('alert_id', '=', 'AMOUNT_MISMATCH:deposit:main:7002:1')
      .execute();
    // The relay's own loop (every 50 ms) may claim the row first; relayOnce then skips it (SKIP LOCKED) and
    // the loop's mark commits a moment later. Either way the row is published once more: wait for the mark.
    await relay.relayOnce();
    const row = await waitFor('the relay to publish the row again', () =>
      tdb.db
        .selectFrom('outbox')
        .select(['attempts', 'published_at'])
        .where('alert_id', '=', 'AMOUNT_MISMATCH:deposit:main:7002:1')
        .where('published_at', 'is not', null)
        .executeTakeFirst(),
    );
    expect(row.attempts).toBe(marked.attempts + 1);
    await publishMarker('deposit', '7002');
    expect(logged('AMOUNT_MISMATCH', '7002')).toHaveLength(1);
    expect(posted('AMOUNT_MISMATCH', '7002')).toHaveLength(1);
  });
});
