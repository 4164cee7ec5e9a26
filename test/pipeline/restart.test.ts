/**
 * Restarts: the reconciler runs as its own process (`payrecon reconcile`) and is killed with SIGKILL twice
 * while batches are in flight, the broker is stopped and started again on its data, and PostgreSQL (an
 * embedded server, so the machine's is left alone) is stopped and started again. Afterwards every
 * observation is booked exactly once: balances equal a model computed from the stream, no idempotency key
 * twice, every event in the history once, and the ledger verifies.
 */

import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SchemaRegistry } from '@kafkajs/confluent-schema-registry';
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, migrateToLatest } from '../../src/db/connection.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { balances } from '../../src/db/read-models/balances.ts';
import type { Database } from '../../src/db/schema.ts';
import type { Intent, Observation } from '../../src/domain/observation.ts';
import { type RunningBroker, startBroker } from '../../src/embedded/kafka/broker.ts';
import { type EmbeddedPostgres, startEmbeddedPostgres } from '../../src/embedded/postgres.ts';
import { type RunningRegistry, startRegistry } from '../../src/embedded/registry/registry.ts';
import { createKafka, createPublisher, ensureTopics, type Publisher } from '../../src/events/kafka.ts';
import { registerSchemas } from '../../src/events/serde.ts';
import { createLogger } from '../../src/logger.ts';
import { sampleIntent } from '../events/fixtures.ts';
import { waitFor } from '../helpers/wait.ts';
import { observation } from './helpers.ts';

const logger = createLogger({ level: 'silent' });
const DEPOSITS = 1_200;
const CASHOUTS = 300;
const CHUNKS = 20;

describe('restarts: reconciler killed, broker restarted, PostgreSQL restarted', () => {
  const dirs: string[] = [];
  const tempDir = (p: string) => {
    const d = mkdtempSync(join(tmpdir(), `payrecon-restart-${p}-`));
    dirs.push(d);
    return d;
  };
  let pg: EmbeddedPostgres;
  let db: Kysely<Database>;
  let registry: RunningRegistry;
  let broker: RunningBroker;
  let brokerDir: string;
  let publisher: Publisher;
  let child: ChildProcess | null = null;
  let pgDir: string;
  let pgPort: number;
  let childLog = '';
  /** Batches the reconciler logged as waiting out a PostgreSQL outage (a warning). */
  let outageWaits = 0;
  const exits: string[] = [];

  function startReconciler(): ChildProcess {
    const proc = spawn(process.execPath, ['bin/payrecon.mjs', 'reconcile'], {
      cwd: join(import.meta.dirname, '../..'),
      env: {
        PATH: process.env.PATH,
        DATABASE_URL: pg.url,
        KAFKA_BROKERS: `127.0.0.1:${broker.port}`,
        SCHEMA_REGISTRY_URL: registry.url,
        PAYRECON_DATA_DIR: tempDir('data'),
        PAYRECON_METRICS_PORT: '0',
        // Warnings at least: the outage's warning is what the test waits for.
        LOG_LEVEL: process.env.RESTART_LOG_LEVEL ?? 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    proc.stdout?.on('data', (chunk: Buffer) => {
      childLog = (childLog + chunk.toString('utf8')).slice(-12_000);
    });
    proc.stderr?.on('data', (chunk: Buffer) => {
      childLog = (childLog + chunk.toString('utf8')).slice(-12_000);
    });
    for (const stream of [proc.stdout, proc.stderr])
      stream?.on('data', (chunk: Buffer) => {
        for (const line of chunk.toString('utf8').split('\n'))
          if (line.includes('database unavailable, batch waits')) outageWaits += 1;
      });
    proc.on('exit', (code, signal) => {
      exits.push(`${code ?? signal}`);
    });
    return proc;
  }

  beforeAll(async () => {
    pgDir = join(tempDir('pg'), 'data');
    pg = await startEmbeddedPostgres({ dataDir: pgDir });
    pgPort = pg.port;
    db = createDb(pg.url, 4);
    await migrateToLatest(db);
    registry = await startRegistry({ host: '127.0.0.1', port: 0, dataDir: tempDir('registry') });
    brokerDir = tempDir('broker');
    broker = await startBroker({ host: '127.0.0.1', port: 0, dataDir: brokerDir, defaultPartitions: 3 });
    const kafka = createKafka({ brokers: [`127.0.0.1:${broker.port}`], clientId: 'restart-test', logger });
    const admin = kafka.admin();
    await admin.connect();
    await ensureTopics(admin, logger);
    await admin.disconnect();
    publisher = await createPublisher(
      kafka,
      await registerSchemas(new SchemaRegistry({ host: registry.url })),
    );
  }, 180_000);

  afterAll(async () => {
    child?.kill('SIGKILL');
    await publisher?.disconnect().catch(() => undefined);
    await broker?.close();
    await registry?.close();
    await db?.destroy();
    await pg?.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('books every observation exactly once through two SIGKILLs, a broker restart and a PostgreSQL restart', async () => {
    const t0 = Date.UTC(2026, 10, 21, 9, 0, 0);
    const at = (s: number) => new Date(t0 + s * 1000);
    // The stream: deposits PENDING then COMPLETED (amount, fee); cashouts with intents, PENDING, DELIVERED,
    // COMPLETED, and every tenth one REJECTED later (a late rejection).
    const intents: Intent[] = [];
    const stream: Observation[] = [];
    let expectedAvailable = 0n;
    for (let i = 0; i < DEPOSITS; i++) {
      const amount = 1_000n + BigInt(i);
      const fee = 25n + BigInt(i % 7);
      const id = String(3_000_000_000 + i);
      const base = {
        kind: 'deposit' as const,
        entityId: id,
        externalRef: `inv-${i}`,
        currency: 'BRL',
        amount,
      };
      stream.push(observation({ ...base, status: 'PENDING', observedAt: at(i) }));
      stream.push(
        observation({
          ...base,
          status: 'COMPLETED',
          observedAt: at(i + 60),
          feeAmount: fee,
          feeCurrency: 'BRL',
          feeOnPayer: false,
        }),
      );
      expectedAvailable += amount - fee;
    }
    for (let i = 0; i < CASHOUTS; i++) {
      const amount = 500n + BigInt(i);
      const id = String(8_000_000 + i);
      intents.push(
        sampleIntent({
          intentId: `cashout-${i}`,
          externalRef: `ext-${i}`,
          entityId: id,
          amount,
          createdAt: at(i),
          request: {},
          response: {},
        }),
      );
      const base = { kind: 'cashout' as const, entityId: id, externalRef: `ext-${i}` };
      stream.push(observation({ ...base, status: 'PENDING', observedAt: at(i + 1) }));
      stream.push(observation({ ...base, status: 'DELIVERED', observedAt: at(i + 30) }));
      stream.push(observation({ ...base, status: 'COMPLETED', observedAt: at(i + 90) }));
      if (i % 10 === 0) stream.push(observation({ ...base, status: 'REJECTED', observedAt: at(i + 9_000) }));
      else expectedAvailable -= amount;
    }
    await publisher.publish(
      'merchant.intent.recorded.v1',
      intents.map((value) => ({ value })),
    );

    child = startReconciler();
    const size = Math.ceil(stream.length / CHUNKS);
    let kills = 0;
    const booked = async () => {
      const [row] = await db
        .selectFrom('status_history')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .execute();
      return Number(row?.n);
    };
    for (let c = 0; c < CHUNKS; c++) {
      const chunk = stream.slice(c * size, (c + 1) * size);
      const bookedBefore = await waitFor('PostgreSQL to answer', booked, 60_000);
      // Every chunk twice: redelivery on top of the replays the kills cause.
      await waitFor(
        'the publish',
        async () => {
          await publisher.publish(
            'provider.status.observed.v1',
            [...chunk, ...chunk].map((value) => ({ value })),
          );
          return true;
        },
        60_000,
      );
      if (c === 15) {
        // Stopped while the reconciler has the chunk to book: it waits the outage out and books it once
        // PostgreSQL is back.
        const waitsBefore = outageWaits;
        await pg.stop();
        await waitFor(
          'the reconciler to wait out the stopped PostgreSQL',
          () => outageWaits > waitsBefore,
          60_000,
        );
        pg = await startEmbeddedPostgres({ dataDir: pgDir, port: pgPort });
        continue;
      }
      // The faults land while the reconciler books: some of the stream is in the history, more is in flight.
      await waitFor(
        'the reconciler to book more of the stream',
        async () => (await booked()) > bookedBefore,
        120_000,
      );
      if (c === 4 || c === 11) {
        const exitsBefore = exits.length;
        child.kill('SIGKILL');
        kills += 1;
        await waitFor('the killed reconciler to exit', () => exits.length > exitsBefore, 30_000);
        child = startReconciler();
      }
      if (c === 7) {
        const port = broker.port;
        await broker.close();
        broker = await startBroker({ host: '127.0.0.1', port, dataDir: brokerDir, defaultPartitions: 3 });
      }
    }
    expect(kills).toBe(2);

    const distinct = new Set(stream.map((o) => o.eventId)).size;
    // Both inputs in: the observations and the intents (their own consumer group, which can wait out the
    // killed member's session before it reads the rest; without its intent a cashout books nothing yet).
    await waitFor(
      'every observation in the history and every intent recorded',
      async () => {
        const [row] = await db
          .selectFrom('status_history')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .execute();
        const [recorded] = await db
          .selectFrom('intents')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .execute();
        return Number(row?.n) === distinct && Number(recorded?.n) === intents.length ? true : undefined;
      },
      90_000,
    ).catch(async (err) => {
      const [row] = await db
        .selectFrom('status_history')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .execute();
      console.error(
        `history ${row?.n} of ${distinct}; reconciler exits ${exits.join(',')}; log tail:\n${childLog}`,
      );
      throw err;
    });
    const history = await db.selectFrom('status_history').select('event_id').execute();
    expect(new Set(history.map((h) => h.event_id)).size).toBe(history.length);
    const keys = await db.selectFrom('journal_entries').select('idempotency_key').execute();
    expect(new Set(keys.map((k) => k.idempotency_key)).size).toBe(keys.length);

    const live = await balances(db, { merchantAccount: 'main', book: 'live' });
    const of = (name: string) => live.find((r) => r.account === name && r.currency === 'BRL')?.balance ?? 0n;
    expect({ available: of('available'), reserved: of('reserved') }).toEqual({
      available: expectedAvailable,
      reserved: 0n,
    });
    const late = await db
      .selectFrom('exceptions')
      .select('entity_id')
      .where('type', '=', 'LATE_REJECTION')
      .execute();
    expect(late).toHaveLength(CASHOUTS / 10);
    const verified = await verifyLedger(db);
    expect(verified.failures).toEqual([]);
  }, 600_000);
});
