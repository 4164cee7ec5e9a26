/**
 * The whole pipeline (`payrecon up`'s parts: ingest, poll, fetch, reconcile, relay, alerts, jobs)
 * against a secured cluster as a managed Kafka would be: the broker serves only TLS and demands SASL
 * SCRAM-SHA-256, the schema registry serves only HTTPS and demands basic auth, and every client comes
 * from payrecon's configuration (KAFKA_SSL*, KAFKA_SASL_*, SCHEMA_REGISTRY_*), the password from a
 * `_FILE`. Sandbox traffic must reach the ledger (every entity's status mirrored) and the ledger must
 * verify clean; no log line, debug included, carries the Kafka or registry password.
 */

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JOBS_OFF, loadConfig } from '../../src/config.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { type RunningBroker, startBroker } from '../../src/embedded/kafka/broker.ts';
import { SaslUsers } from '../../src/embedded/kafka/sasl.ts';
import { type RunningRegistry, startRegistry } from '../../src/embedded/registry/registry.ts';
import { logger as rootLogger } from '../../src/logger.ts';
import { type SandboxRun, startSandboxForUp } from '../../src/sandbox-part.ts';
import { type RunningPipeline, startPipeline } from '../../src/wiring.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { hasOpenssl, makeTestPki, OPENSSL_HINT, type TestPki } from '../helpers/tls.ts';
import { waitFor } from '../helpers/wait.ts';
import { TEST_EMBEDDED } from './helpers.ts';

const required = process.env.PAYRECON_REQUIRE_TOOLS === '1';
if (!hasOpenssl && !required) console.warn(`secured pipeline test skipped: ${OPENSSL_HINT}`);

const ENTITIES = 40;
const KAFKA_PASSWORD = 'managed-kafka-secret-9f3a';
const REGISTRY_PASSWORD = 'registry-api-secret-77c1';

/** Every line any part logs through the root logger (children share its stream), debug included. */
const captured: string[] = [];
const stream = (rootLogger as unknown as Record<symbol, { write(s: string): boolean }>)[
  pino.symbols.streamSym
]!;
const originalWrite = stream.write;

interface SbEntity {
  id: number;
  status: string;
}

describe.skipIf(!hasOpenssl && !required)('the pipeline over SASL_SSL with registry basic auth', () => {
  let pki: TestPki;
  let dir: string;
  let tdb: TestDatabase;
  let broker: RunningBroker;
  let registry: RunningRegistry;
  let pipeline: RunningPipeline;
  let sandboxRun: SandboxRun;
  const brokerLog: string[] = [];

  beforeAll(async () => {
    if (!hasOpenssl) throw new Error(`PAYRECON_REQUIRE_TOOLS=1 but ${OPENSSL_HINT}`);
    stream.write = (line: string) => {
      captured.push(line);
      return true;
    };
    pki = makeTestPki();
    dir = mkdtempSync(join(tmpdir(), 'payrecon-secured-'));
    tdb = await createTestDatabase();
    broker = await startBroker({
      host: '127.0.0.1',
      port: 0,
      dataDir: join(dir, 'kafka'),
      // A managed cluster: topics come from payrecon's plan, not from the broker's auto-creation.
      autoCreateTopics: false,
      sasl: new SaslUsers({ payrecon: KAFKA_PASSWORD }),
      tls: { cert: pki.cert, key: pki.key },
      log: (level, msg, fields) => brokerLog.push(`${level} ${msg} ${JSON.stringify(fields ?? {})}`),
    });
    registry = await startRegistry({
      host: '127.0.0.1',
      port: 0,
      dataDir: join(dir, 'registry'),
      users: { 'api-key': REGISTRY_PASSWORD },
      tls: { cert: pki.cert, key: pki.key },
    });
    writeFileSync(join(dir, 'kafka-password'), KAFKA_PASSWORD);
    const config = loadConfig({
      DATABASE_URL: tdb.url,
      PAYRECON_DATA_DIR: join(dir, 'data'),
      PAYRECON_WEB_PORT: '0',
      LOG_LEVEL: 'debug',
      KAFKA_BROKERS: `127.0.0.1:${broker.port}`,
      KAFKA_SSL: 'true',
      KAFKA_SSL_CA_FILE: pki.caFile,
      KAFKA_SASL_MECHANISM: 'scram-sha-256',
      KAFKA_SASL_USERNAME: 'payrecon',
      KAFKA_SASL_PASSWORD_FILE: join(dir, 'kafka-password'),
      SCHEMA_REGISTRY_URL: registry.url,
      SCHEMA_REGISTRY_USERNAME: 'api-key',
      SCHEMA_REGISTRY_PASSWORD: REGISTRY_PASSWORD,
      SCHEMA_REGISTRY_CA_FILE: pki.caFile,
      KAFKA_TOPIC_PARTITIONS: '2',
      PAYRECON_POLL_MIN_INTERVAL_SECONDS: '2',
      PAYRECON_SANDBOX_TRAFFIC: 'true',
      ...JOBS_OFF,
    });
    pipeline = await startPipeline(config, {
      embedded: TEST_EMBEDDED,
      sandbox: async ({ webBaseUrl, logger }) => {
        sandboxRun = await startSandboxForUp({ webBaseUrl, logger, trafficRate: 0, clientRetries: 3 });
        return sandboxRun;
      },
      print: () => undefined,
    });
  }, 180_000);

  afterAll(async () => {
    await pipeline?.stop();
    stream.write = originalWrite;
    await broker?.close();
    await registry?.close();
    await tdb?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
    pki?.remove();
  });

  it('reconciles sandbox traffic end to end, with every client authenticated over TLS', async () => {
    const api = sandboxRun.urls.api!;
    const all = async () => {
      const e = (await (await fetch(`${api}/_sandbox/export`)).json()) as Record<string, SbEntity[]>;
      return [
        ...e.deposits!.map((x) => ({ kind: 'deposit', ...x })),
        ...e.cashouts!.map((x) => ({ kind: 'cashout', ...x })),
        ...e.refunds!.map((x) => ({ kind: 'refund', ...x })),
      ];
    };
    const started = await fetch(`${api}/_sandbox/traffic`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ rate: 20 }),
    });
    expect(started.status).toBeLessThan(300);
    await waitFor('the entities', async () => ((await all()).length >= ENTITIES ? true : undefined), 60_000);
    await fetch(`${api}/_sandbox/traffic`, { method: 'DELETE' });

    await waitFor(
      'every sandbox status in the ledger',
      async () => {
        const truth = await all();
        const rows = await tdb.db
          .selectFrom('mirrors')
          .select(['entity_kind', 'entity_id', 'status'])
          .execute();
        const seen = new Map(rows.map((r) => [`${r.entity_kind}:${r.entity_id}`, r.status]));
        return truth.every((e) => seen.get(`${e.kind}:${e.id}`) === e.status) ? truth.length : undefined;
      },
      120_000,
    );
    const intents = await tdb.db
      .selectFrom('intents')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirst();
    expect(Number(intents?.n)).toBeGreaterThanOrEqual(ENTITIES);
    expect((await verifyLedger(tdb.db)).failures).toEqual([]);

    // Every connection authenticated, with SCRAM-SHA-256; the topics follow the plan.
    expect(brokerLog.some((l) => l.includes('SASL authenticated') && l.includes('SCRAM-SHA-256'))).toBe(true);
    expect(brokerLog.filter((l) => l.includes('SASL authentication failed'))).toEqual([]);
    // No secret of the secured services in any log line, debug included.
    expect(captured.length).toBeGreaterThan(100);
    const basic = Buffer.from(`api-key:${REGISTRY_PASSWORD}`).toString('base64');
    for (const secret of [KAFKA_PASSWORD, REGISTRY_PASSWORD, basic]) {
      expect(captured.filter((line) => line.includes(secret))).toEqual([]);
    }
    const admin = pipeline.infra.admin;
    const meta = await admin.fetchTopicMetadata({ topics: ['provider.status.observed.v1'] });
    expect(meta.topics[0]!.partitions).toHaveLength(2);
  }, 240_000);
});
