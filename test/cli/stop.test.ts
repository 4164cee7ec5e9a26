/**
 * Clean stops: `npm start` (exec'd, so the signal reaches node) with the embedded PostgreSQL, broker,
 * registry and the sandbox; SIGTERM to the `npm start` process itself stops everything in order:
 * `payrecon: stopped`, exit code 0, the endpoints file removed, nothing left listening, no orphan
 * (neither node nor PostgreSQL).
 */

import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Endpoints } from '../../src/endpoints.ts';
import { waitFor } from '../helpers/wait.ts';

const ROOT = resolve(import.meta.dirname, '../..');

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function refused(host: string, port: number): Promise<boolean> {
  return new Promise((resolveCheck) => {
    const socket = connect({ host, port });
    socket.once('connect', () => {
      socket.destroy();
      resolveCheck(false);
    });
    socket.once('error', () => resolveCheck(true));
  });
}

function hostPort(url: string): [string, number] {
  const u = new URL(url.includes('://') ? url : `tcp://${url}`);
  return [u.hostname, Number(u.port)];
}

/** Runs the bin to its end. */
function run(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolveRun) => {
    const c = spawn(process.execPath, [join(ROOT, 'bin/payrecon.mjs'), ...args], { cwd: ROOT, env });
    let stdout = '';
    let stderr = '';
    c.stdout.on('data', (d) => {
      stdout += d;
    });
    c.stderr.on('data', (d) => {
      stderr += d;
    });
    c.on('close', (code) => resolveRun({ code, stdout, stderr }));
  });
}

let dir = '';
const dirs: string[] = [];
let child: ChildProcess | null = null;

afterAll(async () => {
  if (child && child.exitCode === null) child.kill('SIGKILL');
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

interface Started {
  npm: ChildProcess;
  data: string;
  env: Record<string, string>;
  output: () => { stdout: string; stderr: string };
  exited: Promise<number | null>;
}

/** `npm start` on a fresh data directory, once its banner is out; `detached` gives it its own group. */
async function npmStart(detached: boolean): Promise<Started> {
  dir = await mkdtemp(join(tmpdir(), 'payrecon-stop-'));
  // The data directory is below it: as root, the embedded PostgreSQL (run as `postgres`) must pass through.
  await chmod(dir, 0o711);
  dirs.push(dir);
  const data = join(dir, 'data');
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined || /^(PAYRECON_|DATABASE_URL|KAFKA_|SCHEMA_REGISTRY_URL|LOG_LEVEL)/.test(k)) continue;
    env[k] = v;
  }
  const npm = spawn('npm', ['start', '--', '--traffic', '1'], {
    cwd: ROOT,
    env: { ...env, PAYRECON_DATA_DIR: data, PAYRECON_WEB_PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached,
  });
  child = npm;
  let stdout = '';
  let stderr = '';
  npm.stdout?.on('data', (c) => {
    stdout += c;
  });
  npm.stderr?.on('data', (c) => {
    stderr += c;
  });
  // 'close': npm has exited and its output pipes are closed, which payrecon (node, holding the same pipes)
  // does only when it has exited too; npm itself may exit first on a signal sent to the whole group.
  const exited = new Promise<number | null>((r) => npm.once('close', (code) => r(code)));
  await waitFor(
    () => `payrecon up to start:\n${stdout.slice(-2000)}\n${stderr.slice(-2000)}`,
    () => stdout.includes('  endpoints ') || npm.exitCode !== null,
    { ms: 150_000, every: 200 },
  );
  if (!stdout.includes('  endpoints '))
    throw new Error(`payrecon up did not start:\n${stdout.slice(-2000)}\n${stderr.slice(-2000)}`);
  return { npm, data, env, output: () => ({ stdout, stderr }), exited };
}

function listeningOf(endpoints: Endpoints): Array<[string, number]> {
  return [
    hostPort(endpoints.web),
    hostPort(endpoints.databaseUrl),
    hostPort(endpoints.registryUrl),
    ...endpoints.brokers.map(hostPort),
    ...Object.values(endpoints.sandbox ?? {}).map(hostPort),
  ];
}

describe('npm start', () => {
  it('stops cleanly on SIGTERM to the npm process: stopped, exit 0, nothing listening, no orphan', async () => {
    const { npm, data, env, output, exited } = await npmStart(false);
    const file = join(data, 'endpoints.json');
    expect(readFileSync(file, 'utf8')).toContain('"databaseUrl"');
    const { statSync } = await import('node:fs');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const endpoints = JSON.parse(readFileSync(file, 'utf8')) as Endpoints;
    // node itself (exec'd by npm's shell), not a shell in between.
    expect(endpoints.pid).not.toBe(npm.pid);
    const postgresPid = Number(readFileSync(join(data, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
    expect(alive(postgresPid)).toBe(true);
    const listening = listeningOf(endpoints);
    for (const [host, port] of listening) expect(await refused(host, port)).toBe(false);

    // Other commands find the running instance (its endpoints file), with nothing in the environment.
    const intents = join(dir, 'intents.json');
    writeFileSync(
      intents,
      JSON.stringify({
        operation: 'deposit',
        account: 'sandbox',
        externalRef: 'INV-STOP-1',
        entityId: '999001',
        currency: 'BRL',
        amount: '10.00',
      }),
    );
    const commandEnv = { ...env, PAYRECON_DATA_DIR: data };
    const recorded = await run(['intent', 'record', '--file', intents], commandEnv);
    expect(recorded.stderr).toBe('');
    expect(recorded.stdout).toBe('recorded 1 intent(s)\n');
    const verified = await run(['db', 'verify'], commandEnv);
    expect(verified.stdout).toMatch(/^ledger verified: /);
    expect(verified.code).toBe(0);

    npm.kill('SIGTERM');
    const code = await exited;
    const { stdout, stderr } = output();
    expect(stdout).toContain('payrecon: SIGTERM, stopping');
    expect(stdout).toContain('payrecon: stopped');
    expect(stdout + stderr).not.toMatch(/outbox flush at stop failed|stopping failed/);
    expect(code).toBe(0);
    expect(existsSync(file)).toBe(false);
    expect(alive(endpoints.pid)).toBe(false);
    expect(alive(postgresPid)).toBe(false);
    for (const [host, port] of listening) expect(await refused(host, port)).toBe(true);
  }, 240_000);

  it('stops cleanly on Ctrl-C (SIGINT to the whole process group, as a terminal sends it)', async () => {
    const { npm, data, output, exited } = await npmStart(true);
    const endpoints = JSON.parse(readFileSync(join(data, 'endpoints.json'), 'utf8')) as Endpoints;
    const postgresPid = Number(readFileSync(join(data, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
    // PostgreSQL takes SIGINT as "fast shutdown": were it in the group, it would stop underneath
    // payrecon's orderly shutdown and the outbox flush and consumers would fail.
    process.kill(-(npm.pid as number), 'SIGINT');
    await exited;
    const { stdout, stderr } = output();
    expect(stdout).toContain('payrecon: SIGINT, stopping');
    expect(`${stdout}\n${stderr}`).toContain('payrecon: stopped');
    expect(stdout + stderr).not.toMatch(/outbox flush at stop failed|stopping failed|database unavailable/);
    expect(alive(endpoints.pid)).toBe(false);
    expect(existsSync(join(data, 'endpoints.json'))).toBe(false);
    expect(alive(postgresPid)).toBe(false);
    for (const [host, port] of listeningOf(endpoints)) expect(await refused(host, port)).toBe(true);
  }, 240_000);

  it('stops cleanly when its terminal closes (SIGHUP to the whole process group)', async () => {
    const { npm, data, exited } = await npmStart(true);
    const endpoints = JSON.parse(readFileSync(join(data, 'endpoints.json'), 'utf8')) as Endpoints;
    const postgresPid = Number(readFileSync(join(data, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
    process.kill(-(npm.pid as number), 'SIGHUP');
    await exited;
    // npm itself may die of the hang-up first; payrecon (node) finishes its orderly stop on its own.
    await waitFor('payrecon to finish its orderly stop', () => !alive(endpoints.pid), {
      ms: 60_000,
      every: 200,
    });
    expect(alive(endpoints.pid)).toBe(false);
    expect(existsSync(join(data, 'endpoints.json'))).toBe(false);
    expect(alive(postgresPid)).toBe(false);
    for (const [host, port] of listeningOf(endpoints)) expect(await refused(host, port)).toBe(true);
  }, 240_000);
});
