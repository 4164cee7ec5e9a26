/**
 * Sandbox status-call throughput: `npm run bench:sandbox` (tsx bench/sandbox.ts).
 *
 * The sandbox runs in this process; the load comes from a child process (undici Pool, many
 * connections), so the two share the machine's cores as the pipeline and the sandbox would. Each
 * request is a fully signed GET /v3/deposits/{id} (X-Date, X-Login, D24 Authorization checked by the
 * sandbox) over a set of deposits; then POST /v3/cashout/status (body credentials + Payload-Signature).
 *
 * Then POST /v3/cashout (creation: a write) with a new external_id per request.
 *
 * Each mode runs side by side: `memory` (no data directory) and `durable` (`--data-dir` on a temporary
 * directory: every answer waits for its journal line to be fsync'ed, group commit).
 *
 * Options (env): BENCH_SECONDS (default 10), BENCH_CONNECTIONS (default 64), BENCH_ENTITIES (default 1000),
 * BENCH_MODES (default memory,durable).
 */
import { fork } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { DEFAULT_ACCOUNT } from '../src/sandbox/accounts.ts';

interface Job {
  url: string;
  kind: 'deposit' | 'cashout' | 'create';
  ids: number[];
  seconds: number;
  connections: number;
}

interface Result {
  kind: string;
  /** Sandbox (this process) CPU microseconds spent during the run. */
  serverCpuUs?: number;
  requests: number;
  ok: number;
  errors: number;
  seconds: number;
  p50: number;
  p99: number;
}

const A = DEFAULT_ACCOUNT;
const hmac = (key: string, msg: string) => createHmac('sha256', key).update(msg).digest('hex');

async function client(job: Job): Promise<Result> {
  const pool = new Pool(job.url, { connections: job.connections, pipelining: 1 });
  let xDate = '';
  let xDateAt = 0;
  const deadline = Date.now() + job.seconds * 1000;
  const latencies: number[] = [];
  let ok = 0;
  let errors = 0;
  let i = 0;
  const one = async () => {
    const id = job.ids[i++ % job.ids.length]!;
    const now = Date.now();
    if (now - xDateAt >= 1000) {
      xDate = `${new Date(now).toISOString().slice(0, 19)}Z`;
      xDateAt = now;
    }
    const t0 = performance.now();
    try {
      let res: Awaited<ReturnType<Pool['request']>>;
      if (job.kind === 'create') {
        const body = `{"login":"${A.cashoutLogin}","pass":"${A.cashoutPass}","external_id":"bench-c-${process.pid}-${i}","country":"BR","amount":${5 + (i % 1000)},"document_id":"1","beneficiary_name":"Ana","notification_url":"https://m.example/h"}`;
        res = await pool.request({
          path: '/v3/cashout',
          method: 'POST',
          body,
          headers: { 'content-type': 'application/json', 'payload-signature': hmac(A.cashoutSecret, body) },
        });
      } else if (job.kind === 'deposit') {
        res = await pool.request({
          path: `/v3/deposits/${id}`,
          method: 'GET',
          headers: {
            'content-type': 'application/json',
            'x-date': xDate,
            'x-login': A.login,
            authorization: `D24 ${hmac(A.depositSecret, xDate + A.login)}`,
          },
        });
      } else {
        const body = `{"login":"${A.cashoutLogin}","pass":"${A.cashoutPass}","cashout_id":${id}}`;
        res = await pool.request({
          path: '/v3/cashout/status',
          method: 'POST',
          body,
          headers: { 'content-type': 'application/json', 'payload-signature': hmac(A.cashoutSecret, body) },
        });
      }
      await res.body.text();
      if (res.statusCode === 200) ok++;
      else errors++;
    } catch {
      errors++;
    }
    latencies.push(performance.now() - t0);
  };
  const worker = async () => {
    while (Date.now() < deadline) await one();
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: job.connections * 2 }, worker));
  const seconds = (performance.now() - started) / 1000;
  await pool.close();
  latencies.sort((a, b) => a - b);
  const q = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))] ?? 0;
  return { kind: job.kind, requests: latencies.length, ok, errors, seconds, p50: q(0.5), p99: q(0.99) };
}

function runChild(job: Job): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = fork(fileURLToPath(import.meta.url), ['--client'], { execArgv: ['--import', 'tsx'] });
    child.once('message', (m) => resolve(m as Result));
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code !== 0) reject(new Error(`bench client exited with ${code}`));
    });
    child.send(job);
  });
}

const LABELS: Record<Job['kind'], string> = {
  deposit: 'GET /v3/deposits/{id}    ',
  cashout: 'POST /v3/cashout/status  ',
  create: 'POST /v3/cashout (create)',
};

async function runMode(mode: 'memory' | 'durable'): Promise<boolean> {
  const { startSandbox } = await import('../src/sandbox/main.ts');
  const { mkdtempSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const seconds = Number(process.env.BENCH_SECONDS ?? 10);
  const connections = Number(process.env.BENCH_CONNECTIONS ?? 64);
  const entities = Number(process.env.BENCH_ENTITIES ?? 1000);
  const dataDir = mode === 'durable' ? mkdtempSync(join(tmpdir(), 'payrecon-bench-sandbox-')) : undefined;
  const sb = await startSandbox({ seed: 1, auto: { enabled: false }, ...(dataDir ? { dataDir } : {}) });
  try {
    const { signed, cashouts } = await seed(sb.url, entities);
    const out: Result[] = [];
    // Warm-up (JIT, connection set-up), not reported.
    await runChild({ url: sb.url, kind: 'deposit', ids: signed, seconds: 2, connections });
    const journal = sb.control.journal;
    let writes = { fsyncs: 0, lines: 0, bytes: 0 };
    for (const [kind, ids] of [
      ['deposit', signed],
      ['cashout', cashouts],
      ['create', [] as number[]],
    ] as const) {
      const before = journal ? { ...journal.stats } : null;
      const cpu0 = process.cpuUsage();
      const r = await runChild({ url: sb.url, kind, ids, seconds, connections });
      const cpu = process.cpuUsage(cpu0);
      out.push({ ...r, serverCpuUs: cpu.user + cpu.system });
      if (journal && before && kind === 'create') {
        writes = {
          fsyncs: journal.stats.fsyncs - before.fsyncs,
          lines: journal.stats.lines - before.lines,
          bytes: journal.stats.bytes - before.bytes,
        };
      }
    }
    console.log(`-- ${mode}${dataDir ? ` (data directory ${dataDir})` : ''}`);
    for (const r of out) {
      const rate = r.ok / r.seconds;
      console.log(
        `${LABELS[r.kind as Job['kind']]} ${rate.toFixed(0).padStart(6)} req/s  ` +
          `(${r.ok} ok, ${r.errors} errors in ${r.seconds.toFixed(1)} s, ${connections} connections)  ` +
          `p50 ${r.p50.toFixed(2)} ms  p99 ${r.p99.toFixed(2)} ms`,
      );
      // CPU the sandbox spent per answered request: the rate one core sustains, whatever else runs.
      const perRequest = (r.serverCpuUs ?? 0) / Math.max(1, r.requests);
      console.log(
        `    sandbox CPU ${perRequest.toFixed(1)} us/request -> ${(1e6 / perRequest).toFixed(0)} req/s per fully available core`,
      );
    }
    if (journal) {
      const created = out.find((r) => r.kind === 'create')?.ok ?? 0;
      console.log(
        `    creations: ${writes.fsyncs} fsyncs for ${created} answers (${(created / Math.max(1, writes.fsyncs)).toFixed(1)} per fsync), ` +
          `${writes.lines} journal lines, ${(writes.bytes / Math.max(1, created)).toFixed(0)} bytes per creation`,
      );
    }
    if (dataDir) {
      // A clean stop writes a snapshot; a start reads it back.
      let t = performance.now();
      await sb.close();
      const closeMs = performance.now() - t;
      t = performance.now();
      const again = await startSandbox({ seed: 1, auto: { enabled: false }, dataDir });
      const openMs = performance.now() - t;
      const r = again.control.restored;
      await again.close();
      console.log(
        `    stop (snapshot) ${closeMs.toFixed(0)} ms, start on the directory ${openMs.toFixed(0)} ms: ` +
          `${r?.deposits} deposits, ${r?.cashouts} cashouts, ${r?.idempotencyKeys} idempotency keys restored`,
      );
    }
    return !out.some((r) => r.errors > 0);
  } finally {
    await sb.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const modes = (process.env.BENCH_MODES ?? 'memory,durable').split(',') as ('memory' | 'durable')[];
  let ok = true;
  for (const mode of modes) ok = (await runMode(mode)) && ok;
  const os = await import('node:os');
  console.log(
    `node ${process.version}, ${os.cpus().length} CPUs, ${process.env.BENCH_ENTITIES ?? 1000} deposits and cashouts seeded, load average ${os.loadavg()[0]!.toFixed(1)}`,
  );
  if (!ok) process.exitCode = 1;
}

/** Creates the entities to query through the sandbox's own API. */
async function seed(url: string, n: number): Promise<{ signed: number[]; cashouts: number[] }> {
  const pool = new Pool(url, { connections: 8 });
  const ids: number[] = [];
  const cashouts: number[] = [];
  for (let i = 0; i < n; i++) {
    const xDate = `${new Date().toISOString().slice(0, 19)}Z`;
    const body = `{"country":"BR","currency":"BRL","amount":${10 + i}.25,"payment_method":"SJ","payer":{"document":"12345678909","email":"b${i}@example.com","first_name":"Ana","last_name":"Silva"},"reported_info":{"bank_beneficiary":"Ana Silva"}}`;
    const res = await pool.request({
      path: '/v3/deposits',
      method: 'POST',
      body,
      headers: {
        'content-type': 'application/json',
        'x-date': xDate,
        'x-login': A.login,
        authorization: `D24 ${hmac(A.depositSecret, xDate + A.login + body)}`,
      },
    });
    ids.push(((await res.body.json()) as { deposit_id: number }).deposit_id);
    const cbody = `{"login":"${A.cashoutLogin}","pass":"${A.cashoutPass}","external_id":"bench-${i}","country":"BR","amount":${5 + i},"document_id":"1","beneficiary_name":"Ana","notification_url":"https://m.example/h"}`;
    const cres = await pool.request({
      path: '/v3/cashout',
      method: 'POST',
      body: cbody,
      headers: { 'content-type': 'application/json', 'payload-signature': hmac(A.cashoutSecret, cbody) },
    });
    cashouts.push(Number(((await cres.body.json()) as { cashout_id: string }).cashout_id));
  }
  await pool.close();
  return { signed: ids, cashouts };
}

if (process.argv.includes('--client')) {
  process.once('message', async (job) => {
    const result = await client(job as Job);
    process.send!(result, () => process.exit(0));
  });
} else {
  await main();
}
