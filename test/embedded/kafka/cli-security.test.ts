/**
 * The real `payrecon` command with security: `payrecon broker --sasl-users --tls-cert --tls-key` and
 * `payrecon registry --users --tls-cert --tls-key` serve what they are told to; `payrecon topics
 * apply|plan` works through them from the environment; a part started with a wrong SASL password, an
 * untrusted certificate, or auto-create off and its topics missing stops with one line naming the
 * variables (exit 2) and the password nowhere in its output; a bad users file is one line too.
 */

import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../db/helpers.ts';
import { hasOpenssl, makeTestPki, OPENSSL_HINT, type TestPki } from '../../helpers/tls.ts';
import { waitFor } from '../../helpers/wait.ts';
import { tempDir } from './helpers.ts';

const required = process.env.PAYRECON_REQUIRE_TOOLS === '1';
if (!hasOpenssl && !required) console.warn(`payrecon CLI security tests skipped: ${OPENSSL_HINT}`);

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const BIN = path.join(root, 'bin/payrecon.mjs');
const PASSWORD = 'cli-kafka-secret-5e1d';

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(args: string[], env: Record<string, string>, timeoutMs = 60_000): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe.skipIf(!hasOpenssl && !required)('payrecon broker, registry and topics with security', () => {
  let pki: TestPki;
  let dir: string;
  let tdb: TestDatabase;
  const children: ChildProcess[] = [];
  let brokerAddr = '';
  let registryUrl = '';
  let env: Record<string, string>;

  async function serve(args: string[], ready: RegExp): Promise<string> {
    const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    let out = '';
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
    });
    await waitFor(`payrecon ${args[0]} to start`, () => ready.test(out), 30_000);
    return ready.exec(out)![1]!;
  }

  beforeAll(async () => {
    if (!hasOpenssl) throw new Error(`PAYRECON_REQUIRE_TOOLS=1 but ${OPENSSL_HINT}`);
    pki = makeTestPki();
    dir = tempDir('cli-security');
    tdb = await createTestDatabase();
    fs.writeFileSync(path.join(dir, 'sasl.json'), JSON.stringify({ payrecon: PASSWORD }));
    fs.writeFileSync(path.join(dir, 'registry-users.json'), JSON.stringify({ key: 'registry-secret' }));
    const tls = ['--tls-cert', pki.certFile, '--tls-key', pki.keyFile];
    const [brokerPort, url] = await Promise.all([
      serve(
        [
          'broker',
          '--port',
          '0',
          '--data-dir',
          path.join(dir, 'kafka'),
          '--sasl-users',
          path.join(dir, 'sasl.json'),
          ...tls,
        ],
        /listening 127\.0\.0\.1:(\d+)\n/,
      ),
      serve(
        [
          'registry',
          '--port',
          '0',
          '--data-dir',
          path.join(dir, 'registry'),
          '--users',
          path.join(dir, 'registry-users.json'),
          ...tls,
        ],
        /listening on (\S+) /,
      ),
    ]);
    brokerAddr = `127.0.0.1:${brokerPort}`;
    registryUrl = url;
    env = {
      KAFKA_BROKERS: brokerAddr,
      KAFKA_SSL: 'true',
      KAFKA_SSL_CA_FILE: pki.caFile,
      KAFKA_SASL_MECHANISM: 'scram-sha-512',
      KAFKA_SASL_USERNAME: 'payrecon',
      KAFKA_SASL_PASSWORD: PASSWORD,
      SCHEMA_REGISTRY_URL: registryUrl,
      SCHEMA_REGISTRY_USERNAME: 'key',
      SCHEMA_REGISTRY_PASSWORD: 'registry-secret',
      SCHEMA_REGISTRY_CA_FILE: pki.caFile,
      DATABASE_URL: tdb.url,
      PAYRECON_DATA_DIR: path.join(dir, 'data'),
      LOG_LEVEL: 'warn',
    };
  }, 120_000);

  afterAll(async () => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
    await tdb?.drop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
    pki?.remove();
  });

  it('serves the registry over HTTPS and refuses requests without basic auth', async () => {
    expect(registryUrl).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const get = (auth: string | null) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = https.get(
          `${registryUrl}/subjects`,
          {
            ca: pki.ca,
            headers: auth ? { authorization: `Basic ${Buffer.from(auth).toString('base64')}` } : {},
          },
          (res) => {
            let body = '';
            res.on('data', (c: Buffer) => {
              body += c.toString();
            });
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          },
        );
        req.on('error', reject);
      });
    expect(await get(null)).toEqual({ status: 401, body: '{"error_code":40101,"message":"Unauthorized"}' });
    expect((await get('key:wrong')).status).toBe(401);
    expect((await get('key:registry-secret')).status).toBe(200);
  });

  it('a part with KAFKA_AUTO_CREATE_TOPICS=false on a cluster without its topics names the missing ones, exit 2', async () => {
    const r = await run(['reconcile'], { ...env, KAFKA_AUTO_CREATE_TOPICS: 'false' });
    expect(r.code).toBe(2);
    const last = r.stderr.trim().split('\n').at(-1)!;
    expect(last).toMatch(
      /^payrecon: KAFKA_AUTO_CREATE_TOPICS=false: missing topic\(s\) provider\.notification\.received\.v1, /,
    );
    expect(last).toContain('imports.provider-settlements.v1.dlq (create them with payrecon topics apply)');
  });

  it('topics apply creates the plan through SASL_SSL, and plan then finds nothing to do', async () => {
    const first = await run(['topics', 'plan'], env);
    expect(first.code, first.stderr).toBe(1);
    expect(first.stdout).toContain('provider.status.observed.v1: missing, create (partitions 6');
    const applied = await run(['topics', 'apply'], env);
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toMatch(/apply: 14 created, 0 raised, 0 refused, 0 failed/);
    const again = await run(['topics', 'plan'], env);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/plan: 14 topics, 0 to change by apply, 0 difference\(s\) apply refuses/);
  });

  it('a part with a wrong SASL password stops with one line naming the variables, exit 2', async () => {
    const wrong = 'wrong-password-should-not-appear';
    const r = await run(['reconcile'], { ...env, KAFKA_SASL_PASSWORD: wrong });
    expect(r.code).toBe(2);
    const lines = r.stderr.trim().split('\n');
    expect(lines.at(-1)).toMatch(
      /^payrecon: KAFKA_SASL_USERNAME\/KAFKA_SASL_PASSWORD: the broker refused the credentials \(SCRAM-SHA-512: /,
    );
    expect(`${r.stdout}${r.stderr}`).not.toContain(wrong);
    expect(`${r.stdout}${r.stderr}`).not.toContain(PASSWORD);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it('a part that does not trust the broker certificate stops with one line naming KAFKA_SSL_CA_FILE', async () => {
    const r = await run(['reconcile'], { ...env, KAFKA_SSL_CA_FILE: pki.otherCaFile });
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n').at(-1)).toMatch(
      /^payrecon: KAFKA_SSL_CA_FILE: the certificate of broker 127\.0\.0\.1:\d+ is not trusted \(/,
    );
  });

  it('a bad --sasl-users file is one line', async () => {
    fs.writeFileSync(path.join(dir, 'bad.json'), '["not", "an object"]');
    const r = await run(
      [
        'broker',
        '--port',
        '0',
        '--data-dir',
        path.join(dir, 'bad'),
        '--sasl-users',
        path.join(dir, 'bad.json'),
      ],
      {},
    );
    expect(r.code).not.toBe(0);
    expect(r.stderr.trim()).toBe('payrecon: --sasl-users: must be a JSON object of user name to password');
  });
});
