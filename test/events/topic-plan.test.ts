/**
 * `payrecon topics plan|apply` against the embedded broker (over TLS with SASL SCRAM-SHA-512, through
 * payrecon's configuration): creation with the planned partitions and configs, raising partitions, the
 * refusal to shrink, a replication factor the cluster cannot give, and start-up with auto-create off.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { AppError } from '../../src/domain/errors.ts';
import { type RunningBroker, startBroker } from '../../src/embedded/kafka/broker.ts';
import { SaslUsers } from '../../src/embedded/kafka/sasl.ts';
import { runTopicsCli } from '../../src/events/cli.ts';
import { ensureTopicPlan, plannedTopics } from '../../src/events/topic-plan.ts';
import { dlqTopicOf, TOPIC_NAMES, TOPICS } from '../../src/events/topics.ts';
import { hasOpenssl, makeTestPki, OPENSSL_HINT, type TestPki } from '../helpers/tls.ts';

const required = process.env.PAYRECON_REQUIRE_TOOLS === '1';
if (!hasOpenssl && !required) console.warn(`topic plan tests skipped: ${OPENSSL_HINT}`);

const NOTIFICATION = 'provider.notification.received.v1';
const OBSERVED = 'provider.status.observed.v1';

describe.skipIf(!hasOpenssl && !required)('payrecon topics plan and apply', () => {
  let pki: TestPki;
  let dir: string;
  let broker: RunningBroker;
  let env: Record<string, string>;
  let kafka: Kafka;

  beforeAll(async () => {
    if (!hasOpenssl) throw new Error(`PAYRECON_REQUIRE_TOOLS=1 but ${OPENSSL_HINT}`);
    pki = makeTestPki();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'payrecon-topics-'));
    broker = await startBroker({
      host: '127.0.0.1',
      port: 0,
      dataDir: dir,
      autoCreateTopics: false,
      sasl: new SaslUsers({ ops: 'ops-password' }),
      tls: { cert: pki.cert, key: pki.key },
    });
    env = {
      KAFKA_BROKERS: `127.0.0.1:${broker.port}`,
      KAFKA_SSL: 'true',
      KAFKA_SSL_CA_FILE: pki.caFile,
      KAFKA_SASL_MECHANISM: 'scram-sha-512',
      KAFKA_SASL_USERNAME: 'ops',
      KAFKA_SASL_PASSWORD: 'ops-password',
      LOG_LEVEL: 'silent',
    };
    kafka = new Kafka({
      clientId: 'topics-test',
      brokers: [env.KAFKA_BROKERS!],
      ssl: { ca: [pki.ca] },
      sasl: { mechanism: 'scram-sha-512', username: 'ops', password: 'ops-password' },
      logLevel: logLevel.NOTHING,
    });
  });
  afterAll(async () => {
    await broker?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
    pki?.remove();
  });

  async function run(command: 'plan' | 'apply', extra: Record<string, string> = {}) {
    const lines: string[] = [];
    const code = await runTopicsCli(command, { out: (l) => lines.push(l) }, { ...env, ...extra });
    return { code, lines, text: lines.join('\n') };
  }

  async function partitions(): Promise<Map<string, number>> {
    const admin = kafka.admin();
    await admin.connect();
    try {
      const names = TOPIC_NAMES.flatMap((t) => [t, dlqTopicOf(t)]);
      const existing = new Set(await admin.listTopics());
      const meta = await admin.fetchTopicMetadata({ topics: names.filter((n) => existing.has(n)) });
      return new Map(meta.topics.map((t) => [t.name, t.partitions.length]));
    } finally {
      await admin.disconnect();
    }
  }

  it('with auto-create off, start-up names every missing topic', async () => {
    const config = loadConfig({ ...env, KAFKA_AUTO_CREATE_TOPICS: 'false' });
    const admin = kafka.admin();
    await admin.connect();
    try {
      const err = await ensureTopicPlan(admin, config.kafka.topics).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(AppError);
      const message = (err as AppError).message;
      expect(message).toMatch(/^KAFKA_AUTO_CREATE_TOPICS=false: missing topic\(s\) /);
      for (const t of TOPIC_NAMES) {
        expect(message).toContain(t);
        expect(message).toContain(dlqTopicOf(t));
      }
      expect(await admin.listTopics()).toEqual([]);
    } finally {
      await admin.disconnect();
    }
  });

  it('plan lists every missing topic and changes nothing; apply creates them with the planned settings', async () => {
    const overrides = JSON.stringify({ [OBSERVED]: { partitions: 8, retentionMs: 86_400_000 } });
    const planned = await run('plan', { KAFKA_TOPIC_OVERRIDES: overrides, KAFKA_MIN_INSYNC_REPLICAS: '1' });
    expect(planned.code).toBe(1);
    expect(planned.lines.filter((l) => / missing, create /.test(l))).toHaveLength(TOPIC_NAMES.length * 2);
    expect(planned.text).toContain(
      `${OBSERVED}: missing, create (partitions 8, replication factor cluster default, min.insync.replicas 1, retention.ms 86400000)`,
    );
    expect((await partitions()).size).toBe(0);

    const applied = await run('apply', { KAFKA_TOPIC_OVERRIDES: overrides, KAFKA_MIN_INSYNC_REPLICAS: '1' });
    expect(applied.text).toContain(`apply: ${TOPIC_NAMES.length * 2} created, 0 raised, 0 refused, 0 failed`);
    expect(applied.code).toBe(0);
    const now = await partitions();
    expect(now.get(OBSERVED)).toBe(8);
    expect(now.get(dlqTopicOf(OBSERVED))).toBe(8);
    expect(now.get(NOTIFICATION)).toBe(TOPICS[NOTIFICATION].partitions);

    const admin = kafka.admin();
    await admin.connect();
    const described = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [{ type: 2, name: OBSERVED, configNames: ['retention.ms', 'min.insync.replicas'] }],
    });
    await admin.disconnect();
    const values = Object.fromEntries(
      described.resources[0]!.configEntries.map((e) => [e.configName, e.configValue]),
    );
    expect(values).toEqual({ 'retention.ms': '86400000', 'min.insync.replicas': '1' });

    const again = await run('plan', { KAFKA_TOPIC_OVERRIDES: overrides, KAFKA_MIN_INSYNC_REPLICAS: '1' });
    expect(again.code).toBe(0);
    expect(again.lines.filter((l) => / as planned /.test(l))).toHaveLength(TOPIC_NAMES.length * 2);
  });

  it('apply raises partition counts and keeps the messages already written', async () => {
    const producer = kafka.producer();
    await producer.connect();
    await producer.send({ topic: NOTIFICATION, messages: [{ key: 'k', value: 'before the raise' }] });
    await producer.disconnect();

    const overrides = JSON.stringify({ [OBSERVED]: { partitions: 8, retentionMs: 86_400_000 } });
    const extra = {
      KAFKA_TOPIC_OVERRIDES: overrides,
      KAFKA_MIN_INSYNC_REPLICAS: '1',
      KAFKA_TOPIC_PARTITIONS: '5',
    };
    const planned = await run('plan', extra);
    expect(planned.text).toContain(`${NOTIFICATION}: raise partitions 3 -> 5`);
    const applied = await run('apply', extra);
    expect(applied.text).toContain(`${NOTIFICATION}: partitions raised 3 -> 5`);
    expect(applied.code).toBe(0);
    const now = await partitions();
    expect(now.get(NOTIFICATION)).toBe(5);
    expect(now.get(OBSERVED)).toBe(8);

    const admin = kafka.admin();
    await admin.connect();
    const offsets = await admin.fetchTopicOffsets(NOTIFICATION);
    await admin.disconnect();
    expect(offsets).toHaveLength(5);
    expect(offsets.reduce((n, o) => n + Number(o.high), 0)).toBe(1);
  });

  it('refuses to shrink, to change a replication factor or configs of existing topics, and says why', async () => {
    const shrink = await run('plan', { KAFKA_TOPIC_PARTITIONS: '2' });
    expect(shrink.code).toBe(1);
    expect(shrink.text).toContain(
      `${OBSERVED}: refused: has 8 partitions, the plan 2: partitions are never reduced (keys would move to other partitions); set the plan to 8`,
    );
    const applied = await run('apply', {
      KAFKA_TOPIC_PARTITIONS: '2',
      KAFKA_REPLICATION_FACTOR: '3',
      KAFKA_RETENTION_MS: '1000',
    });
    expect(applied.code).toBe(1);
    expect(applied.text).toMatch(
      /refused: has replication factor 1, the plan 3: changing it needs a partition reassignment/,
    );
    expect(applied.text).toMatch(
      /refused: has retention\.ms=\S+, the plan 1000: configs of existing topics are not changed/,
    );
    expect(applied.text).toMatch(/apply: 0 created, 0 raised, \d+ refused, 0 failed/);
    const now = await partitions();
    expect(now.get(OBSERVED)).toBe(8);
    expect(now.get(NOTIFICATION)).toBe(5);
  });

  it('reports the cluster refusing a topic it cannot create (replication factor above its brokers)', async () => {
    const admin = kafka.admin();
    await admin.connect();
    await admin.deleteTopics({ topics: [dlqTopicOf(NOTIFICATION)] });
    await admin.disconnect();
    const applied = await run('apply', { KAFKA_REPLICATION_FACTOR: '3', KAFKA_TOPIC_PARTITIONS: '8' });
    expect(applied.code).toBe(1);
    expect(applied.text).toContain(`${dlqTopicOf(NOTIFICATION)}: failed: Replication-factor is invalid`);
    expect((await partitions()).has(dlqTopicOf(NOTIFICATION))).toBe(false);
  });

  it('rejects an override for a topic payrecon does not have, and needs KAFKA_BROKERS', async () => {
    expect(() =>
      plannedTopics({ ...loadConfig(env).kafka.topics, overrides: { 'no.such.topic': {} } }),
    ).toThrow('KAFKA_TOPIC_OVERRIDES.no.such.topic: is not a topic of payrecon');
    await expect(runTopicsCli('plan', { out: () => undefined }, { LOG_LEVEL: 'silent' })).rejects.toThrow(
      'KAFKA_BROKERS: must be set (the topic plan is for a running cluster)',
    );
  });
});
