/**
 * `payrecon up` (the real bin, its own embedded broker and registry, the machine's PostgreSQL) against a
 * process on the same host that has no credentials:
 *
 * - a kafkajs producer without SASL, and `kcat -P` without SASL, are refused, and nothing they sent is
 *   on `provider.status.observed.v1` (read to its end with the generated credentials);
 * - a wrong SCRAM password is refused (SCRAM-SHA-256 and -512); the right one is taken by both;
 * - the registry answers 401 without basic auth and with a wrong password;
 * - the CLI still works against the running instance (`payrecon intent record`), its intent on the topic;
 * - the credentials file is 0600 and no password reaches the logs (of `up` at debug, and of the CLI),
 *   where the refusals are warnings;
 * - a restart keeps the same credentials, and closes a file made readable meanwhile again;
 * - with PAYRECON_WEBHOOK_LISTEN, the webhook routes (where the sandbox delivers) are on that listener
 *   alone, named in the banner and the endpoints file, and 404 on the web port (and PAYRECON_METRICS_LISTEN's
 *   address is the banner's metrics line).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kafka, type KafkaConfig, logLevel, type SASLOptions } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EMBEDDED_CREDENTIALS_FILE, type EmbeddedCredentials } from '../../src/embedded-credentials.ts';
import type { Endpoints } from '../../src/endpoints.ts';
import { payrecon } from '../cli/payrecon.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { waitFor } from '../helpers/wait.ts';

const ROOT = join(import.meta.dirname, '../..');
const OBSERVED = 'provider.status.observed.v1';
const INTENTS = 'merchant.intent.recorded.v1';
const KCAT = '/usr/bin/kcat';

let tdb: TestDatabase;
let dir: string;
let data: string;
let webhookPort: number;
let metricsPort: number;
let running: Up | null = null;
/** Everything every process printed: `up` (at debug) and the CLI commands. */
let logs = '';

interface Up {
  child: ChildProcess;
  exited: Promise<number | null>;
  out: () => string;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (typeof address !== 'object' || !address) throw new Error('no port');
  return address.port;
}

/** The test's environment without any address or setting of its own. */
function cleanEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined || /^(PAYRECON_|DATABASE_URL|KAFKA_|SCHEMA_REGISTRY_|LOG_LEVEL)/.test(k)) continue;
    env[k] = v;
  }
  return env;
}

async function startUp(): Promise<Up> {
  const child = spawn(process.execPath, ['bin/payrecon.mjs', 'up', '--traffic', '2'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...cleanEnv(),
      DATABASE_URL: tdb.url,
      PAYRECON_DATA_DIR: data,
      PAYRECON_WEB_PORT: '0',
      PAYRECON_WEBHOOK_LISTEN: `127.0.0.1:${webhookPort}`,
      PAYRECON_METRICS_LISTEN: `127.0.0.1:${metricsPort}`,
      LOG_LEVEL: 'debug',
    },
  });
  let out = '';
  const take = (c: Buffer) => {
    out += c;
    logs += c;
  };
  child.stdout!.on('data', take);
  child.stderr!.on('data', take);
  const exited = new Promise<number | null>((r) => child.once('close', (code) => r(code)));
  running = { child, exited, out: () => out };
  await waitFor(
    () => `payrecon up to start:\n${out.slice(-3000)}`,
    () => out.includes('  endpoints ') || child.exitCode !== null,
    { ms: 150_000, every: 200 },
  );
  if (!out.includes('  endpoints ')) throw new Error(`payrecon up did not start:\n${out.slice(-3000)}`);
  return running;
}

async function stopUp(up: Up): Promise<number | null> {
  up.child.kill('SIGTERM');
  const code = await up.exited;
  running = null;
  return code;
}

const endpoints = () => JSON.parse(readFileSync(join(data, 'endpoints.json'), 'utf8')) as Endpoints;
const credentialsPath = () => join(data, EMBEDDED_CREDENTIALS_FILE);
const credentials = () => JSON.parse(readFileSync(credentialsPath(), 'utf8')) as EmbeddedCredentials;

function kafka(brokers: readonly string[], sasl?: SASLOptions): Kafka {
  const config: KafkaConfig = {
    brokers: [...brokers],
    clientId: `up-credentials-${randomUUID().slice(0, 8)}`,
    logLevel: logLevel.NOTHING,
    connectionTimeout: 3_000,
    retry: { initialRetryTime: 100, retries: 0 },
    ...(sasl ? { sasl } : {}),
  };
  return new Kafka(config);
}

const authenticated = (mechanism: 'scram-sha-256' | 'scram-sha-512' = 'scram-sha-512') => {
  const { username, password } = credentials().kafka;
  return kafka(endpoints().brokers, { mechanism, username, password } as SASLOptions);
};

/** Every message of `topic` up to its end now, read with the generated credentials. */
async function readToEnd(topic: string): Promise<Array<{ key: string | null; value: Buffer | null }>> {
  const client = authenticated();
  const admin = client.admin();
  await admin.connect();
  const ends = await admin.fetchTopicOffsets(topic).finally(() => admin.disconnect());
  const wanted = new Map(ends.map((p) => [p.partition, Number(p.high)]));
  const messages: Array<{ key: string | null; value: Buffer | null }> = [];
  if ([...wanted.values()].every((high) => high === 0)) return messages;
  const reached = new Map<number, number>();
  const consumer = client.consumer({ groupId: `up-credentials-${randomUUID()}` });
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        messages.push({ key: message.key?.toString('utf8') ?? null, value: message.value });
        reached.set(partition, Number(message.offset) + 1);
      },
    });
    await waitFor(
      `${topic} read to its end`,
      () => [...wanted].every(([p, high]) => high === 0 || (reached.get(p) ?? 0) >= high),
      60_000,
    );
  } finally {
    await consumer.disconnect();
  }
  return messages;
}

beforeAll(async () => {
  tdb = await createTestDatabase();
  dir = mkdtempSync(join(tmpdir(), 'payrecon-up-credentials-'));
  data = join(dir, 'data');
  webhookPort = await freePort();
  metricsPort = await freePort();
  await startUp();
}, 180_000);

afterAll(async () => {
  if (running && running.child.exitCode === null) {
    running.child.kill('SIGKILL');
    await running.exited;
  }
  await tdb?.drop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('payrecon up: the embedded broker and registry ask for generated credentials', () => {
  it('keeps them in a 0600 file beside the PostgreSQL password, and in the 0600 endpoints file', () => {
    expect(statSync(credentialsPath()).mode & 0o777).toBe(0o600);
    expect(statSync(join(data, 'endpoints.json')).mode & 0o777).toBe(0o600);
    const c = credentials();
    expect(c.kafka.password.length).toBeGreaterThanOrEqual(24);
    expect(c.registry.password.length).toBeGreaterThanOrEqual(24);
    expect(c.kafka.password).not.toBe(c.registry.password);
    const e = endpoints();
    expect(e.kafkaSasl).toMatchObject({ username: c.kafka.username, password: c.kafka.password });
    expect(e.registryAuth).toEqual(c.registry);
    // The banner names the user and the file, never a password.
    expect(running!.out()).toMatch(
      / {2}kafka {5}\S+ \(SASL SCRAM-SHA-256\/512, user payrecon, password in \S+\)/,
    );
    expect(running!.out()).toContain(credentialsPath());
  });

  it('refuses a producer without SASL: nothing it sent is on the topic', async () => {
    const marker = `forged:${randomUUID()}`;
    const producer = kafka(endpoints().brokers).producer({ retry: { retries: 0 } });
    const attempt = producer
      .connect()
      .then(() => producer.send({ topic: OBSERVED, acks: -1, messages: [{ key: marker, value: 'forged' }] }));
    await expect(attempt).rejects.toThrow();
    await producer.disconnect().catch(() => undefined);

    let kcatMarker: string | null = null;
    if (existsSync(KCAT)) {
      kcatMarker = `forged-kcat:${randomUUID()}`;
      const [broker] = endpoints().brokers;
      const refused = spawnSync(
        KCAT,
        ['-P', '-b', broker!, '-t', OBSERVED, '-k', kcatMarker, '-X', 'message.timeout.ms=5000'],
        { input: 'forged\n', encoding: 'utf8', timeout: 60_000 },
      );
      expect(refused.status, refused.stderr).not.toBe(0);
      expect(refused.stderr).toMatch(/might require SASL authentication/);
      // The same kcat with the credentials gets in: the refusal was for the missing SASL.
      const { username, password } = credentials().kafka;
      const listed = spawnSync(
        KCAT,
        [
          '-L',
          '-b',
          broker!,
          '-t',
          OBSERVED,
          '-X',
          'security.protocol=SASL_PLAINTEXT',
          '-X',
          'sasl.mechanisms=SCRAM-SHA-256',
          '-X',
          `sasl.username=${username}`,
          '-X',
          `sasl.password=${password}`,
        ],
        { encoding: 'utf8', timeout: 60_000 },
      );
      expect(listed.status, listed.stderr).toBe(0);
      expect(listed.stdout).toContain(OBSERVED);
    } else if (process.env.PAYRECON_REQUIRE_TOOLS === '1') {
      throw new Error(`${KCAT} is missing (apt-get install kcat)`);
    } else {
      console.warn(`kcat part skipped: ${KCAT} is missing (apt-get install kcat)`);
    }

    const keys = (await readToEnd(OBSERVED)).map((m) => m.key);
    expect(keys).not.toContain(marker);
    if (kcatMarker) expect(keys).not.toContain(kcatMarker);
  }, 120_000);

  it('refuses a wrong SCRAM password; the right one is taken with SHA-256 and SHA-512', async () => {
    const { brokers } = endpoints();
    const { username, password } = credentials().kafka;
    for (const mechanism of ['scram-sha-256', 'scram-sha-512'] as const) {
      const wrong = kafka(brokers, { mechanism, username, password: `${password}x` } as SASLOptions).admin();
      await expect(wrong.connect(), mechanism).rejects.toThrow(/SASL|[Aa]uthentication/);
      await wrong.disconnect().catch(() => undefined);
      const right = authenticated(mechanism).admin();
      await right.connect();
      expect(await right.listTopics()).toContain(OBSERVED);
      await right.disconnect();
    }
  }, 60_000);

  it('the registry answers 401 without basic auth and with a wrong password', async () => {
    const { registryUrl } = endpoints();
    const { username, password } = credentials().registry;
    const basic = (u: string, p: string) => `Basic ${Buffer.from(`${u}:${p}`).toString('base64')}`;
    const none = await fetch(`${registryUrl}/subjects`);
    expect(none.status).toBe(401);
    expect(await none.text()).not.toContain('provider.status');
    for (const authorization of [basic(username, `${password}x`), basic('someone', password)]) {
      expect((await fetch(`${registryUrl}/subjects`, { headers: { authorization } })).status).toBe(401);
    }
    const posted = await fetch(`${registryUrl}/subjects/forged-value/versions`, {
      method: 'POST',
      headers: { 'content-type': 'application/vnd.schemaregistry.v1+json' },
      body: JSON.stringify({ schema: '"string"' }),
    });
    expect(posted.status).toBe(401);
    const ok = await fetch(`${registryUrl}/subjects`, {
      headers: { authorization: basic(username, password) },
    });
    expect(ok.status).toBe(200);
    const subjects = (await ok.json()) as string[];
    expect(subjects).toContain(`${OBSERVED}-value`);
    expect(subjects).not.toContain('forged-value');
  });

  it('a command finds the running instance and its credentials: its intent is on the topic', async () => {
    const externalRef = `INV-CRED-${randomUUID().slice(0, 8)}`;
    const file = join(dir, 'intent.json');
    writeFileSync(
      file,
      JSON.stringify({
        operation: 'deposit',
        account: 'sandbox',
        externalRef,
        entityId: '998001',
        currency: 'BRL',
        amount: '10.00',
      }),
    );
    const recorded = await payrecon(dir, ['intent', 'record', '--file', file], {
      PAYRECON_DATA_DIR: data,
      LOG_LEVEL: 'debug',
    });
    logs += recorded.stdout + recorded.stderr;
    expect(recorded.stderr).not.toMatch(/error|refused/i);
    expect(recorded.stdout).toBe('recorded 1 intent(s)\n');
    expect(recorded.code).toBe(0);
    const intents = await readToEnd(INTENTS);
    expect(intents.some((m) => m.value?.includes(Buffer.from(externalRef)))).toBe(true);
  }, 120_000);

  it('a single part started beside it connects with the credentials and stops cleanly', async () => {
    const child = spawn(process.execPath, ['bin/payrecon.mjs', 'alerts'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...cleanEnv(), PAYRECON_DATA_DIR: data, PAYRECON_METRICS_PORT: '0', LOG_LEVEL: 'debug' },
    });
    let out = '';
    child.stdout!.on('data', (c) => {
      out += c;
    });
    child.stderr!.on('data', (c) => {
      out += c;
    });
    const exited = new Promise<number | null>((r) => child.once('close', (code) => r(code)));
    try {
      await waitFor(
        () => `payrecon alerts to run:\n${out.slice(-3000)}`,
        () => /"msg":"running"/.test(out) || child.exitCode !== null,
        { ms: 60_000, every: 100 },
      );
      expect(out).toMatch(/"msg":"running"/);
    } finally {
      child.kill('SIGTERM');
      logs += out;
    }
    expect(await exited).toBe(0);
    expect(out).not.toMatch(/SASL[^\n]*fail|40101|Unauthorized/i);
  }, 90_000);

  it('serves the webhook routes on their own listener alone; the web port answers 404 for them', async () => {
    const e = endpoints();
    const hooks = `http://127.0.0.1:${webhookPort}`;
    expect(e.webhooks).toBe(hooks);
    expect(running!.out()).toContain(`  webhooks  ${hooks}/webhooks/<account>/{deposits,refunds,cashouts}`);
    const unsigned = {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"deposit_id":1}',
    };
    // On the webhook listener the route exists (and refuses an unsigned notification); on the web port, none.
    expect((await fetch(`${hooks}/webhooks/sandbox/deposits`, unsigned)).status).toBe(401);
    expect((await fetch(`${e.web}/webhooks/sandbox/deposits`, unsigned)).status).toBe(404);
    for (const path of ['/', '/signin', '/api/v1/payments', '/metrics', '/healthz', '/readyz']) {
      expect((await fetch(`${hooks}${path}`)).status, path).toBe(404);
    }
    // `/metrics` is on a listener of its own too, and the banner says where.
    const metrics = `http://127.0.0.1:${metricsPort}/metrics`;
    expect(running!.out()).toContain(`  metrics   ${metrics}\n`);
    expect((await fetch(`${e.web}/metrics`)).status).toBe(404);
    // The sandbox delivers its notifications to the webhook listener, and they are taken.
    await waitFor(
      'a sandbox notification accepted on the webhook listener',
      async () => {
        const text = await (await fetch(metrics)).text();
        return /payrecon_webhook_requests_total\{[^}]*outcome="accepted"[^}]*\} [1-9]/.test(text);
      },
      { ms: 90_000, every: 500 },
    );
  }, 120_000);

  it('keeps the credentials across a restart, and closes the file again', async () => {
    const before = readFileSync(credentialsPath(), 'utf8');
    expect(await stopUp(running!)).toBe(0);
    chmodSync(credentialsPath(), 0o644);
    await startUp();
    expect(readFileSync(credentialsPath(), 'utf8')).toBe(before);
    expect(statSync(credentialsPath()).mode & 0o777).toBe(0o600);
    expect(endpoints().kafkaSasl?.password).toBe(credentials().kafka.password);
    const admin = authenticated().admin();
    await admin.connect();
    expect(await admin.listTopics()).toContain(OBSERVED);
    await admin.disconnect();
    const unauthenticated = kafka(endpoints().brokers).admin();
    await expect(unauthenticated.connect().then(() => unauthenticated.listTopics())).rejects.toThrow();
    await unauthenticated.disconnect().catch(() => undefined);
  }, 240_000);

  it('no password reached a log', () => {
    const c = credentials();
    // The debug lines (pino's level 20) were captured: there was something to leak into.
    expect(logs).toMatch(/"level":20/);
    // The refusals are in up's log, as warnings, for whoever watches it.
    expect(logs).toMatch(/"level":40[^\n]*"module":"broker"[^\n]*request before SASL authentication/);
    expect(logs).toMatch(/"level":40[^\n]*SASL authentication failed/);
    for (const secret of [c.kafka.password, c.registry.password]) expect(logs).not.toContain(secret);
  });
});
