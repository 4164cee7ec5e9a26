/**
 * payrecon's own clients through its configuration (KAFKA_SSL*, KAFKA_SASL_*, SCHEMA_REGISTRY_*):
 * the kafkajs client of every part and the registry client, against the embedded broker serving TLS
 * with SASL and the embedded registry serving HTTPS with basic auth. Wrong credentials, an untrusted
 * certificate and a plaintext listener each stop start-up with one line naming the variable, and no
 * line carries a secret.
 */

import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { AppError } from '../../src/domain/errors.ts';
import { type RunningBroker, startBroker } from '../../src/embedded/kafka/broker.ts';
import { SaslUsers } from '../../src/embedded/kafka/sasl.ts';
import { type RunningRegistry, startRegistry } from '../../src/embedded/registry/registry.ts';
import { connectAdmin } from '../../src/events/connect.ts';
import { createKafka, createPublisher, ensureTopics, runBatchConsumer } from '../../src/events/kafka.ts';
import { createRegistryClient, registerSchemas } from '../../src/events/serde.ts';
import { createLogger } from '../../src/logger.ts';
import { hasOpenssl, makeTestPki, OPENSSL_HINT, type TestPki } from '../helpers/tls.ts';
import { waitFor } from '../helpers/wait.ts';
import { sampleObservation } from './fixtures.ts';

const required = process.env.PAYRECON_REQUIRE_TOOLS === '1';
if (!hasOpenssl && !required) console.warn(`security tests skipped: ${OPENSSL_HINT}`);

const KAFKA_PASSWORD = 'kafka-pa55word-never-logged';
const REGISTRY_PASSWORD = 'registry-pa55word-never-logged';
const quiet = createLogger({ level: 'silent' });

describe.skipIf(!hasOpenssl && !required)(
  'payrecon clients over TLS with SASL and registry basic auth',
  () => {
    let pki: TestPki;
    let dir: string;
    let secure: RunningBroker;
    let plain: RunningBroker;
    let registry: RunningRegistry;
    let base: Record<string, string>;

    beforeAll(async () => {
      if (!hasOpenssl) throw new Error(`PAYRECON_REQUIRE_TOOLS=1 but ${OPENSSL_HINT}`);
      pki = makeTestPki();
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'payrecon-security-'));
      secure = await startBroker({
        host: '127.0.0.1',
        port: 0,
        dataDir: path.join(dir, 'secure'),
        sasl: new SaslUsers({ payrecon: KAFKA_PASSWORD }),
        tls: { cert: pki.cert, key: pki.key },
      });
      plain = await startBroker({ host: '127.0.0.1', port: 0, dataDir: path.join(dir, 'plain') });
      registry = await startRegistry({
        host: '127.0.0.1',
        port: 0,
        dataDir: path.join(dir, 'registry'),
        users: { 'registry-key': REGISTRY_PASSWORD },
        tls: { cert: pki.cert, key: pki.key },
      });
      fs.writeFileSync(path.join(dir, 'kafka-password'), `${KAFKA_PASSWORD}\n`);
      base = {
        KAFKA_BROKERS: `127.0.0.1:${secure.port}`,
        KAFKA_SSL: 'true',
        KAFKA_SSL_CA_FILE: pki.caFile,
        KAFKA_SASL_USERNAME: 'payrecon',
        KAFKA_SASL_PASSWORD_FILE: path.join(dir, 'kafka-password'),
        SCHEMA_REGISTRY_URL: registry.url,
        SCHEMA_REGISTRY_USERNAME: 'registry-key',
        SCHEMA_REGISTRY_PASSWORD: REGISTRY_PASSWORD,
        SCHEMA_REGISTRY_CA_FILE: pki.caFile,
      };
    });
    afterAll(async () => {
      await secure?.close();
      await plain?.close();
      await registry?.close();
      if (dir) fs.rmSync(dir, { recursive: true, force: true });
      pki?.remove();
    });

    function clients(env: Record<string, string>) {
      const config = loadConfig(env);
      const brokers = [...config.kafka.brokers!];
      const kafka = createKafka({
        brokers,
        clientId: 'security-test',
        security: config.kafka.security,
        retries: 1,
        logger: quiet,
      });
      return { config, brokers, kafka };
    }

    async function failure(work: () => Promise<unknown>): Promise<AppError> {
      const err = await work().then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(AppError);
      const e = err as AppError;
      expect(e.code).toBe('CONFIG_INVALID');
      expect(e.message).not.toContain('\n');
      expect(e.message).not.toContain(KAFKA_PASSWORD);
      expect(e.message).not.toContain(REGISTRY_PASSWORD);
      return e;
    }

    for (const mechanism of ['plain', 'scram-sha-256', 'scram-sha-512'] as const) {
      it(`publishes and consumes Avro through the configuration with SASL ${mechanism} over TLS`, async () => {
        const { config, brokers, kafka } = clients({ ...base, KAFKA_SASL_MECHANISM: mechanism });
        const admin = await connectAdmin(kafka, brokers, config.kafka.security);
        try {
          await ensureTopics(admin, quiet);
          const serde = await registerSchemas(
            createRegistryClient({ ...config.schemaRegistry, url: registry.url }),
          );
          const publisher = await createPublisher(kafka, serde);
          const topic = 'provider.status.observed.v1';
          const value = sampleObservation({
            eventId: randomUUID(),
            entityId: String(3_000_000_000 + mechanism.length),
          });
          await publisher.publish(topic, [{ value }]);
          const seen: string[] = [];
          const consumer = await runBatchConsumer({
            kafka,
            groupId: `security-${mechanism}`,
            topic,
            serde,
            dlq: publisher,
            maxWaitTimeInMs: 200,
            logger: quiet,
            handleBatch: async (messages) => {
              for (const m of messages) seen.push(m.value.eventId);
            },
          });
          try {
            await waitFor('the message', () => seen.includes(value.eventId), 30_000);
            expect(seen).toContain(value.eventId);
          } finally {
            await consumer.stop();
            await publisher.disconnect();
          }
        } finally {
          await admin.disconnect();
        }
      });
    }

    it('stops with one line naming KAFKA_SASL_* for a wrong password and for an unknown user', async () => {
      const wrongs: Record<string, string>[] = [
        { KAFKA_SASL_PASSWORD_FILE: '', KAFKA_SASL_PASSWORD: 'not-the-password' },
        { KAFKA_SASL_USERNAME: 'mallory' },
      ];
      for (const wrong of wrongs) {
        const { config, brokers, kafka } = clients({
          ...base,
          KAFKA_SASL_MECHANISM: 'scram-sha-256',
          ...wrong,
        });
        const e = await failure(() => connectAdmin(kafka, brokers, config.kafka.security));
        expect(e.message).toMatch(
          /^KAFKA_SASL_USERNAME\/KAFKA_SASL_PASSWORD: the broker refused the credentials/,
        );
        expect(e.message).not.toContain('not-the-password');
      }
    });

    it('stops with one line naming KAFKA_SSL_CA_FILE when the broker certificate is not trusted', async () => {
      const { config, brokers, kafka } = clients({
        ...base,
        KAFKA_SASL_MECHANISM: 'plain',
        KAFKA_SSL_CA_FILE: pki.otherCaFile,
      });
      const started = Date.now();
      const e = await failure(() => connectAdmin(kafka, brokers, config.kafka.security));
      expect(e.message).toMatch(
        /^KAFKA_SSL_CA_FILE: the certificate of broker 127\.0\.0\.1:\d+ is not trusted \(/,
      );
      expect(Date.now() - started).toBeLessThan(5_000);
    });

    it('stops with one line naming KAFKA_SSL when the listener is plaintext', async () => {
      const { config, brokers, kafka } = clients({
        ...base,
        KAFKA_BROKERS: `127.0.0.1:${plain.port}`,
        KAFKA_SASL_MECHANISM: 'plain',
      });
      const e = await failure(() => connectAdmin(kafka, brokers, config.kafka.security));
      expect(e.message).toMatch(/^KAFKA_SSL: broker 127\.0\.0\.1:\d+ did not complete a TLS handshake/);
    });

    it('connects with a client certificate to a broker that requires one, and names KAFKA_SSL_CERT_FILE otherwise', async () => {
      const mtls = await startBroker({
        host: '127.0.0.1',
        port: 0,
        dataDir: path.join(dir, 'mtls'),
        tls: { cert: pki.cert, key: pki.key, clientCa: pki.ca },
      });
      try {
        const env = {
          KAFKA_BROKERS: `127.0.0.1:${mtls.port}`,
          KAFKA_SSL: 'true',
          KAFKA_SSL_CA_FILE: pki.caFile,
        };
        const withCert = clients({
          ...env,
          KAFKA_SSL_CERT_FILE: pki.clientCertFile,
          KAFKA_SSL_KEY_FILE: pki.clientKeyFile,
        });
        const admin = await connectAdmin(withCert.kafka, withCert.brokers, withCert.config.kafka.security);
        try {
          await admin.createTopics({ topics: [{ topic: 'mtls-check', numPartitions: 1 }] });
          expect(await admin.listTopics()).toContain('mtls-check');
        } finally {
          await admin.disconnect();
        }
        const without = clients(env);
        const e = await failure(() =>
          connectAdmin(without.kafka, without.brokers, without.config.kafka.security),
        );
        expect(e.message).toMatch(
          /^KAFKA_SSL_CERT_FILE: broker 127\.0\.0\.1:\d+ requires a client certificate \(\w+\): set KAFKA_SSL_CERT_FILE and KAFKA_SSL_KEY_FILE$/,
        );
        // Certificates the broker refuses: one its CA did not sign (the other CA's self-signed one), and
        // one it signed for servers only (extendedKeyUsage serverAuth).
        for (const [cert, key] of [
          [pki.otherCaFile, path.join(pki.dir, 'other-ca.key')],
          [pki.certFile, pki.keyFile],
        ] as const) {
          const foreign = clients({ ...env, KAFKA_SSL_CERT_FILE: cert, KAFKA_SSL_KEY_FILE: key });
          const f = await failure(() =>
            connectAdmin(foreign.kafka, foreign.brokers, foreign.config.kafka.security),
          );
          expect(f.message).toMatch(
            /^KAFKA_SSL_CERT_FILE: broker 127\.0\.0\.1:\d+ refused the client certificate \(/,
          );
        }
      } finally {
        await mtls.close();
      }
    });

    it('stops with one line naming the registry variables for wrong credentials or an untrusted certificate', async () => {
      const config = loadConfig({ ...base, KAFKA_SASL_MECHANISM: 'plain' });
      const settings = { ...config.schemaRegistry, url: registry.url };
      const denied = await failure(() =>
        registerSchemas(
          createRegistryClient({ ...settings, password: 'wrong-registry-password' }, { retries: 0 }),
        ),
      );
      expect(denied.message).toBe(
        'SCHEMA_REGISTRY_USERNAME/SCHEMA_REGISTRY_PASSWORD: the schema registry refused the credentials (HTTP 401)',
      );
      const anonymous = await failure(() =>
        registerSchemas(
          createRegistryClient({ ...settings, username: null, password: null }, { retries: 0 }),
        ),
      );
      expect(anonymous.message).toMatch(/^SCHEMA_REGISTRY_USERNAME/);
      const untrusted = await failure(() =>
        registerSchemas(createRegistryClient({ ...settings, caFile: pki.otherCaFile }, { retries: 0 })),
      );
      expect(untrusted.message).toMatch(
        /^SCHEMA_REGISTRY_CA_FILE: the certificate of the schema registry is not trusted/,
      );
    });
  },
);
