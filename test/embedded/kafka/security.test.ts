/**
 * The embedded broker's security: TLS on its port and SASL PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512,
 * exercised with kafkajs and with kcat (librdkafka), each produce and consume going over TLS.
 */

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { Kafka, type KafkaConfig, logLevel, type SASLOptions } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningBroker } from '../../../src/embedded/kafka/broker.ts';
import { SaslUsers } from '../../../src/embedded/kafka/sasl.ts';
import { hasOpenssl, makeTestPki, OPENSSL_HINT, type TestPki } from '../../helpers/tls.ts';
import { waitFor } from '../../helpers/wait.ts';
import { broker, tempDir } from './helpers.ts';

const required = process.env.PAYRECON_REQUIRE_TOOLS === '1';
const KCAT = process.env.KCAT ?? '/usr/bin/kcat';
const hasKcat = fs.existsSync(KCAT);
if (!hasOpenssl && !required) console.warn(`broker security tests skipped: ${OPENSSL_HINT}`);
if (!hasKcat && !required) {
  console.warn(`kcat security tests skipped: ${KCAT} not found (install it with: sudo apt-get install kcat)`);
}

const USERS = { alice: 'alice-secret-1', 'bob,=odd': 'p@ss=w,rd' };
const MECHANISMS = ['plain', 'scram-sha-256', 'scram-sha-512'] as const;

function kcat(
  args: string[],
  input?: string,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(KCAT, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(input ?? '');
  });
}

describe.skipIf(!hasOpenssl && !required)('embedded broker over TLS with SASL', () => {
  let b: RunningBroker;
  let dir: string;
  let pki: TestPki;
  let addr: string;

  beforeAll(async () => {
    if (!hasOpenssl) throw new Error(`PAYRECON_REQUIRE_TOOLS=1 but ${OPENSSL_HINT}`);
    pki = makeTestPki();
    dir = tempDir('sasl');
    b = await broker(dir, {
      defaultPartitions: 2,
      sasl: new SaslUsers(USERS),
      tls: { cert: pki.cert, key: pki.key },
    });
    addr = `127.0.0.1:${b.port}`;
  });
  afterAll(async () => {
    await b?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
    pki?.remove();
  });

  function kafka(extra: Partial<KafkaConfig>): Kafka {
    return new Kafka({
      clientId: 'security-test',
      brokers: [addr],
      logLevel: logLevel.NOTHING,
      retry: { initialRetryTime: 100, retries: 0 },
      connectionTimeout: 5_000,
      ...extra,
    });
  }
  const sasl = (mechanism: (typeof MECHANISMS)[number], username: string, password: string) =>
    ({ mechanism, username, password }) as SASLOptions;

  for (const mechanism of MECHANISMS) {
    it(`kafkajs produces and consumes over TLS with SASL ${mechanism}`, async () => {
      const k = kafka({ ssl: { ca: [pki.ca] }, sasl: sasl(mechanism, 'bob,=odd', USERS['bob,=odd']) });
      const topic = `kjs-${mechanism}`;
      const producer = k.producer();
      await producer.connect();
      await producer.send({
        topic,
        acks: -1,
        messages: Array.from({ length: 20 }, (_, i) => ({ key: `k${i}`, value: `${mechanism}-${i}` })),
      });
      await producer.disconnect();
      const seen: string[] = [];
      const consumer = k.consumer({ groupId: `g-${mechanism}`, maxWaitTimeInMs: 200 });
      await consumer.connect();
      await consumer.subscribe({ topic, fromBeginning: true });
      await consumer.run({
        eachMessage: async ({ message }) => {
          seen.push(message.value!.toString());
        },
      });
      try {
        await waitFor('the 20 messages', () => seen.length >= 20, 30_000);
      } finally {
        await consumer.disconnect();
      }
      expect(seen.sort()).toEqual(Array.from({ length: 20 }, (_, i) => `${mechanism}-${i}`).sort());
    });
  }

  it('refuses a wrong password and an unknown user (kafkajs), naming an authentication failure', async () => {
    for (const mechanism of MECHANISMS) {
      for (const [user, password] of [
        ['alice', 'not-the-password'],
        ['mallory', USERS.alice],
      ] as const) {
        const admin = kafka({ ssl: { ca: [pki.ca] }, sasl: sasl(mechanism, user, password) }).admin();
        const err = await admin.connect().then(
          () => null,
          (e: Error) => e,
        );
        await admin.disconnect();
        expect(err?.name, `${mechanism} ${user}`).toBe('KafkaJSSASLAuthenticationError');
        expect(err?.message).toMatch(/Authentication failed/);
        expect(err?.message).not.toContain(password);
      }
    }
  });

  it('refuses requests before authentication: a TLS client without SASL gets its connection closed', async () => {
    const admin = kafka({ ssl: { ca: [pki.ca] } }).admin();
    const err = await admin
      .connect()
      .then(() => admin.listTopics())
      .then(
        () => null,
        (e: Error) => e,
      );
    await admin.disconnect();
    expect(err).not.toBeNull();
  });

  it('refuses a plaintext client on the TLS listener', async () => {
    const admin = kafka({ sasl: sasl('plain', 'alice', USERS.alice) }).admin();
    const err = await admin.connect().then(
      () => null,
      (e: Error) => e,
    );
    await admin.disconnect();
    expect(err?.name).toMatch(/KafkaJS(Connection|NumberOfRetriesExceeded|RequestTimeout)/);
  });

  it('is refused by a client that does not trust its certificate', async () => {
    const admin = kafka({ ssl: { ca: [pki.otherCa] }, sasl: sasl('plain', 'alice', USERS.alice) }).admin();
    const err = await admin.connect().then(
      () => null,
      (e: Error) => e,
    );
    await admin.disconnect();
    expect(String((err as { cause?: unknown } | null)?.cause ?? err)).toMatch(/certificate/i);
  });

  describe.skipIf(!hasKcat && !required)('with kcat (librdkafka)', () => {
    const kcatSecurity = (mechanism: string, user: string, password: string) => [
      '-X',
      'security.protocol=SASL_SSL',
      '-X',
      `sasl.mechanisms=${mechanism.toUpperCase()}`,
      '-X',
      `sasl.username=${user}`,
      '-X',
      `sasl.password=${password}`,
      '-X',
      `ssl.ca.location=${pki.caFile}`,
    ];

    for (const mechanism of MECHANISMS) {
      it(`kcat produces and consumes over TLS with SASL ${mechanism}`, async () => {
        if (!hasKcat)
          throw new Error(`PAYRECON_REQUIRE_TOOLS=1 but ${KCAT} is missing: sudo apt-get install kcat`);
        const topic = `kcat-${mechanism}`;
        const security = kcatSecurity(mechanism, 'alice', USERS.alice);
        const lines = Array.from({ length: 50 }, (_, i) => `k${i}\t${mechanism}-${i}`);
        const produced = await kcat(
          ['-b', addr, ...security, '-P', '-t', topic, '-K', '\t'],
          `${lines.join('\n')}\n`,
        );
        expect(produced.code, produced.stderr).toBe(0);
        const consumed = await kcat([
          '-b',
          addr,
          ...security,
          '-C',
          '-t',
          topic,
          '-o',
          'beginning',
          '-e',
          '-q',
          '-f',
          '%k\t%s\n',
        ]);
        expect(consumed.code, consumed.stderr).toBe(0);
        expect(consumed.stdout.trim().split('\n').sort()).toEqual([...lines].sort());
      });
    }

    it('kcat is refused with a wrong password and with an unknown user', async () => {
      if (!hasKcat)
        throw new Error(`PAYRECON_REQUIRE_TOOLS=1 but ${KCAT} is missing: sudo apt-get install kcat`);
      for (const [user, password] of [
        ['alice', 'wrong-password'],
        ['mallory', USERS.alice],
      ] as const) {
        const r = await kcat(['-b', addr, ...kcatSecurity('scram-sha-256', user, password), '-L', '-m', '5']);
        expect(r.code, `${user}: ${r.stdout}`).not.toBe(0);
        expect(r.stderr).toMatch(/Authentication failed/);
      }
    });

    it('kcat without TLS is refused on the TLS listener', async () => {
      if (!hasKcat)
        throw new Error(`PAYRECON_REQUIRE_TOOLS=1 but ${KCAT} is missing: sudo apt-get install kcat`);
      const r = await kcat([
        '-b',
        addr,
        '-X',
        'security.protocol=SASL_PLAINTEXT',
        '-X',
        'sasl.mechanisms=PLAIN',
        '-X',
        'sasl.username=alice',
        '-X',
        `sasl.password=${USERS.alice}`,
        '-L',
        '-m',
        '5',
      ]);
      expect(r.code).not.toBe(0);
    });
  });
});
