/**
 * bench:pipeline — webhooks into the running pipeline (`startPipeline`: ingress, Kafka, status fetcher,
 * sandbox status calls, reconciler, ledger), measured from the webhook's POST to the ledger commit of
 * its observation (`status_history.recorded_at`, the reconciling transaction's start).
 *
 *   1. sustained: EVENTS signed deposit webhooks (distinct COMPLETED card deposits, with intents) sent as
 *      fast as 64 connections carry them; events/s = EVENTS / (first POST to last history row).
 *   2. latency: LATENCY_SECONDS of webhooks paced at 1,000/s; p50/p99 of POST-to-history.
 *   3. the machine's limit in the same run: a bare multi-row INSERT of the same postings (two per
 *      deposit credit), as in bench:ledger, as the ratio's denominator.
 *
 * Layouts (BENCH_LAYOUT):
 *   parts (default)  as deployed in production: the provider (`payrecon sandbox`), Kafka (`payrecon broker`),
 *                    the registry (`payrecon registry`) and each part of the pipeline (`payrecon ingest`,
 *                    `payrecon fetch`, `payrecon reconcile`) in its own process; this process only sends the
 *                    webhooks, records the intents and reads the ledger.
 *   up               the pipeline in this process as `payrecon up` runs it (ingress, fetcher, reconciler,
 *                    relay, registry), the sandbox and broker in their own processes; the webhook sender
 *                    shares the pipeline's process.
 *   one-process      everything in this process.
 * PAYRECON_* variables set for the bench reach the parts (layout parts).
 * BENCH_CPU_PROF_DIR=<dir> starts every child process with `--cpu-prof` into that directory (profile this
 * process with `node --cpu-prof --import tsx bench/pipeline.ts`).
 *
 *   npm run bench:pipeline            EVENTS=20000 LATENCY_SECONDS=10
 *   BENCH_DATABASE_URL=postgres://... (default postgres://postgres@127.0.0.1:5432/postgres)
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import { Pool } from 'undici';
import { JOBS_OFF, loadConfig } from '../src/config.ts';
import { createDb } from '../src/db/connection.ts';
import { startBroker } from '../src/embedded/kafka/broker.ts';
import { startRegistry } from '../src/embedded/registry/registry.ts';
import { type Infrastructure, startInfrastructure } from '../src/infrastructure.ts';
import { recordingClient } from '../src/producers/intent/recording-client.ts';
import { createProviderClient } from '../src/provider/client.ts';
import { stringifyProviderJson } from '../src/provider/json.ts';
import { depositAuthorization, formatXDate } from '../src/provider/signing.ts';
import { DEFAULT_ACCOUNT } from '../src/sandbox/accounts.ts';
import { startSandbox } from '../src/sandbox/main.ts';
import { providerAccountFor } from '../src/sandbox/traffic-client.ts';
import { startPipeline } from '../src/wiring.ts';

const EVENTS = Number(process.env.EVENTS ?? 20_000);
const LATENCY_SECONDS = Number(process.env.LATENCY_SECONDS ?? 10);
const ADMIN_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

const LAYOUT = process.env.BENCH_LAYOUT ?? 'parts';
/** The sandbox sends every webhook from one address, above the ingress's default rate limits: lifted, so the
 * bench measures the pipeline, not the limiter (`PAYRECON_WEBHOOK_RATE_*` given to the bench still win). */
const BENCH_WEBHOOK_LIMITS = {
  PAYRECON_WEBHOOK_RATE_PER_SENDER: process.env.PAYRECON_WEBHOOK_RATE_PER_SENDER ?? '100000',
  PAYRECON_WEBHOOK_RATE_TOTAL: process.env.PAYRECON_WEBHOOK_RATE_TOTAL ?? '1000000',
};
if (!['parts', 'up', 'one-process'].includes(LAYOUT)) {
  process.stderr.write('BENCH_LAYOUT: must be one of parts, up, one-process\n');
  process.exit(2);
}
const SPLIT = LAYOUT !== 'one-process';
const LAYOUT_TEXT: Record<string, string> = {
  parts: 'sandbox, broker, registry, ingest, fetch and reconcile each in its own process',
  up: 'pipeline in this process as payrecon up, sandbox and broker in their own processes',
  'one-process': 'one process',
};
const ROOT = join(import.meta.dirname, '..');

/** Starts `payrecon <args>` as its own process and resolves with the lines it printed once `ready` matched. */
function spawnPart(
  args: string[],
  ready: RegExp,
  env: Record<string, string> = { LOG_LEVEL: 'error' },
): Promise<{ child: ChildProcess; output: string }> {
  const prof = process.env.BENCH_CPU_PROF_DIR;
  const flags = prof ? ['--cpu-prof', `--cpu-prof-dir=${prof}`, `--cpu-prof-name=${args[0]}.cpuprofile`] : [];
  const child = spawn(process.execPath, [...flags, 'bin/payrecon.mjs', ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    let output = '';
    let done = false;
    child.stdout!.on('data', (chunk: Buffer) => {
      if (done) return; // read and dropped: a part's later log lines must not block it
      output += chunk.toString('utf8');
      if (ready.test(output)) {
        done = true;
        resolve({ child, output });
      }
    });
    child.once('exit', (code) =>
      reject(new Error(`payrecon ${args[0]} exited (${code}) before it was ready`)),
    );
  });
}

async function stopPart(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
}

/** A port free on 127.0.0.1 now (the part that gets it binds it a moment later). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

async function main(): Promise<void> {
  const name = `payrecon_bench_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  const dataDir = mkdtempSync(join(tmpdir(), 'payrecon-bench-pipeline-'));

  // The sandbox without automatic moves or notifications of its own: the bench sends the webhooks.
  const parts: ChildProcess[] = [];
  let sandbox: { url: string; ccUrl: string; close: () => Promise<void> };
  let brokers: string | undefined;
  if (SPLIT) {
    const sb = await spawnPart(
      ['sandbox', '--port', '0', '--cc-port', '0', '--seed', '7'],
      /sandbox card api (\S+)\n/,
    );
    parts.push(sb.child);
    sandbox = {
      url: /sandbox api (\S+)\n/.exec(sb.output)![1]!,
      ccUrl: /sandbox card api (\S+)\n/.exec(sb.output)![1]!,
      close: () => stopPart(sb.child),
    };
    const bk = await spawnPart(
      ['broker', '--port', '0', '--partitions', '3', '--data-dir', join(dataDir, 'broker')],
      /listening (\S+)\n/,
    );
    parts.push(bk.child);
    brokers = /listening (\S+)\n/.exec(bk.output)![1]!;
  } else {
    const sb = await startSandbox({ host: '127.0.0.1', port: 0, ccPort: 0, seed: 7 });
    sandbox = { url: sb.url, ccUrl: sb.ccUrl, close: () => sb.close() };
  }
  const account = {
    ...providerAccountFor(DEFAULT_ACCOUNT, { url: sandbox.url, ccUrl: sandbox.ccUrl }),
    webhookSignatureMode: 'enforce' as const,
  };
  const config = loadConfig({
    DATABASE_URL: url.toString(),
    PAYRECON_DATA_DIR: dataDir,
    ...(brokers ? { KAFKA_BROKERS: brokers } : {}),
    PAYRECON_WEB_PORT: '0',
    LOG_LEVEL: 'error',
    ...BENCH_WEBHOOK_LIMITS,
    ...JOBS_OFF,
  });
  let running: { url: string; infra: Infrastructure; stop: () => Promise<void> };
  if (LAYOUT === 'parts') {
    const rg = await spawnPart(
      ['registry', '--port', '0', '--data-dir', join(dataDir, 'registry')],
      /schema registry listening on (\S+) /,
    );
    parts.push(rg.child);
    const registryUrl = /schema registry listening on (\S+) /.exec(rg.output)![1]!;
    // This process's own connections: topics and schemas are made here, intents published, the ledger read.
    const infra = await startInfrastructure(
      loadConfig({
        DATABASE_URL: url.toString(),
        PAYRECON_DATA_DIR: dataDir,
        KAFKA_BROKERS: brokers!,
        SCHEMA_REGISTRY_URL: registryUrl,
        LOG_LEVEL: 'error',
      }),
      null,
    );
    const webPort = await freePort();
    const partEnv = {
      // Settings given to the bench (PAYRECON_FETCH_CONCURRENCY=32 ...) reach the parts.
      ...Object.fromEntries(
        Object.entries(process.env).filter(
          (e): e is [string, string] => e[0].startsWith('PAYRECON_') && e[1] !== undefined,
        ),
      ),
      DATABASE_URL: url.toString(),
      KAFKA_BROKERS: brokers!,
      SCHEMA_REGISTRY_URL: registryUrl,
      PAYRECON_ACCOUNTS: JSON.stringify([account]),
      PAYRECON_WEB_PORT: String(webPort),
      PAYRECON_METRICS_PORT: '0',
      LOG_LEVEL: 'info',
      ...BENCH_WEBHOOK_LIMITS,
    };
    for (const part of ['reconcile', 'fetch', 'ingest']) {
      const p = await spawnPart([part], /"msg":"running"/, {
        ...partEnv,
        PAYRECON_DATA_DIR: join(dataDir, part),
      });
      parts.push(p.child);
    }
    running = {
      url: `http://127.0.0.1:${webPort}`,
      infra,
      stop: async () => {
        await infra.lifecycle.stopAll();
        await sandbox.close();
      },
    };
  } else {
    const pipeline = await startPipeline(config, {
      embedded: {
        postgres: () => Promise.reject(new Error('the bench uses BENCH_DATABASE_URL')),
        broker: ({ dataDir: dir }) =>
          startBroker({ host: '127.0.0.1', port: 0, dataDir: dir, defaultPartitions: 3 }),
        registry: ({ dataDir: dir }) => startRegistry({ host: '127.0.0.1', port: 0, dataDir: dir }),
      },
      sandbox: async () => ({
        accounts: [account],
        urls: { api: sandbox.url },
        deliverTo: async () => undefined,
        startTraffic: async () => undefined,
        stop: () => sandbox.close(),
      }),
      print: () => undefined,
    });
    running = { url: pipeline.url, infra: pipeline.infra, stop: () => pipeline.stop() };
  }
  const db = running.infra.db;

  // Card deposits with a valid card are COMPLETED at once and notify nothing: the bench notifies them.
  const total = EVENTS + LATENCY_SECONDS * 1_000;
  const client = recordingClient(
    createProviderClient(account),
    async (intent) => {
      await running.infra.publisher.publish('merchant.intent.recorded.v1', [{ value: intent }]);
    },
    { account: account.name },
  );
  const ids: number[] = [];
  const t0 = performance.now();
  for (let i = 0; i < total; i += 64) {
    const made = await Promise.all(
      Array.from({ length: Math.min(64, total - i) }, (_, k) =>
        client.createCardDeposit({
          invoice_id: `bench-${i + k}`,
          country: 'BR',
          currency: 'BRL',
          amount: BigInt(1_000 + ((i + k) % 5_000)),
          client_ip: '203.0.113.7',
          payer: {
            document: '12345678909',
            email: `p${i + k}@example.com`,
            first_name: 'Ana',
            last_name: 'Silva',
          },
          credit_card: {
            card_number: '4111111111111111',
            cvv: '123',
            expiration_month: '12',
            expiration_year: String((new Date().getUTCFullYear() + 3) % 100).padStart(2, '0'),
            holder_name: 'Ana Silva',
          },
        }),
      ),
    );
    for (const m of made) ids.push(Number(m.deposit_id));
  }
  process.stdout.write(
    `created ${ids.length} card deposits (with intents) in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`,
  );

  const http = new Pool(running.url, { connections: 64, pipelining: 1 });
  const sent = new Map<string, number>();
  async function notify(id: number): Promise<void> {
    const body = stringifyProviderJson({ deposit_id: id });
    const xDate = formatXDate(new Date());
    const res = await http.request({
      path: `/webhooks/${account.name}/deposits`,
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-date': xDate,
        'x-login': account.depositLogin,
        authorization: depositAuthorization({
          xDate,
          xLogin: account.depositLogin,
          body,
          secret: account.depositSecret,
        }),
      },
      body,
    });
    await res.body.dump();
    if (res.statusCode !== 200) throw new Error(`webhook answered ${res.statusCode}`);
  }
  const historyCount = async () =>
    Number(
      (
        await sql<{
          n: string;
        }>`SELECT count(*)::text AS n FROM status_history WHERE source = 'webhook'`.execute(db)
      ).rows[0]?.n,
    );
  async function until(n: number): Promise<number> {
    for (;;) {
      const c = await historyCount();
      if (c >= n) return performance.now();
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  // 1. Sustained.
  const sustained = ids.slice(0, EVENTS);
  const s0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (next < sustained.length) await notify(sustained[next++]!);
    }),
  );
  const acked = performance.now();
  const s1 = await until(EVENTS);
  const rate = EVENTS / ((s1 - s0) / 1000);
  const ingressRate = EVENTS / ((acked - s0) / 1000);

  // 2. Latency at 1,000 events/s.
  const paced = ids.slice(EVENTS);
  const l0 = performance.now();
  const inflight: Promise<void>[] = [];
  for (let i = 0; i < paced.length; i++) {
    const due = l0 + i;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    sent.set(String(paced[i]), Date.now());
    inflight.push(notify(paced[i]!));
  }
  await Promise.all(inflight);
  await until(EVENTS + paced.length);
  const { rows } = await sql<{ entity_id: string; at: Date; observed: Date }>`
    SELECT entity_id, min(recorded_at) AS at, min(observed_at) AS observed FROM status_history
    WHERE source = 'webhook' AND entity_id = ANY(${paced.map(String)}::text[]) GROUP BY entity_id`.execute(
    db,
  );
  const latencies = rows.map((r) => r.at.getTime() - sent.get(r.entity_id)!).sort((a, b) => a - b);
  // Where the time goes: POST to the fetcher's provider status call (ingress, Kafka, fetcher), and that
  // call to the ledger transaction (Kafka, reconciler).
  const toObserved = rows.map((r) => r.observed.getTime() - sent.get(r.entity_id)!).sort((a, b) => a - b);
  const toCommit = rows.map((r) => r.at.getTime() - r.observed.getTime()).sort((a, b) => a - b);

  // 3. The bare INSERT of the same postings (two per deposit credit), in the same run.
  const bare = createDb(url.toString(), 1);
  await sql`CREATE TABLE bare_postings (entry_id bigint, merchant_account text, currency text, book text,
    account text, amount numeric, created_at timestamptz DEFAULT now())`.execute(bare);
  const b0 = performance.now();
  for (let i = 0; i < EVENTS; i += 500) {
    const n = Math.min(500, EVENTS - i);
    const values = Array.from({ length: n }, (_, k) => [
      {
        entry_id: String(i + k),
        merchant_account: 'sandbox',
        currency: 'BRL',
        book: 'live',
        account: 'available',
        amount: '10.00',
      },
      {
        entry_id: String(i + k),
        merchant_account: 'sandbox',
        currency: 'BRL',
        book: 'live',
        account: 'deposits',
        amount: '-10.00',
      },
    ]).flat();
    await bare
      .insertInto('bare_postings' as never)
      .values(values as never)
      .execute();
  }
  const bareRate = EVENTS / ((performance.now() - b0) / 1000);
  await bare.destroy();

  const load = (await import('node:os'))
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');
  process.stdout.write(
    [
      `bench:pipeline  ${EVENTS} webhooks sustained, ${paced.length} paced at 1,000/s, node ${process.version}, ${LAYOUT_TEXT[LAYOUT]}`,
      `sustained webhook -> ledger:  ${rate.toFixed(0)} events/s (webhooks acknowledged at ${ingressRate.toFixed(0)}/s)`,
      `latency at 1,000 events/s:    p50 ${quantile(latencies, 0.5)} ms, p99 ${quantile(latencies, 0.99)} ms, max ${latencies.at(-1)} ms (${latencies.length} events)`,
      `  POST -> status call:         p50 ${quantile(toObserved, 0.5)} ms, p99 ${quantile(toObserved, 0.99)} ms`,
      `  status call -> ledger:       p50 ${quantile(toCommit, 0.5)} ms, p99 ${quantile(toCommit, 0.99)} ms`,
      `bare INSERT of the postings:  ${bareRate.toFixed(0)} events/s equivalent; ratio ${(rate / bareRate).toFixed(3)}`,
      `targets: >= 5,000 events/s ${rate >= 5_000 ? 'met' : 'NOT met'}; p99 < 500 ms ${quantile(latencies, 0.99) < 500 ? 'met' : 'NOT met'}`,
      `load average at the end: ${load}`,
      '',
    ].join('\n'),
  );

  await http.close();
  await running.stop();
  // Consumers and ingress first, Kafka and the provider last.
  for (const child of parts.reverse()) await stopPart(child);
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.end();
  rmSync(dataDir, { recursive: true, force: true });
}

await main();
