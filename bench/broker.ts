/**
 * Broker bench (`npm run bench:broker`): the embedded broker runs in a child process (`payrecon broker`)
 * so its memory is measured alone; kafkajs produces and consumes 1 KiB messages through it.
 *
 *   1. produce BENCH_BROKER_MB (default 1024) MiB of 1 KiB messages, 1,000 per send, acks -1;
 *   2. consume them all back with one kafkajs consumer (eachBatch);
 *   3. end-to-end latency at 1,000 messages/s for BENCH_BROKER_LATENCY_S (default 10) seconds;
 *   4. broker RSS: sampled throughout, and its kernel-reported peak (VmHWM) with the whole log stored.
 *
 * Targets: >= 50,000 msg/s each way, p99 < 50 ms, broker memory < 200 MB.
 */

import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Kafka, logLevel, type Producer } from 'kafkajs';
import { noDelaySocketFactory } from '../src/events/kafka.ts';

const MESSAGE_BYTES = 1024;
const PER_SEND = 1000;
const PARTITIONS = 4;
const IN_FLIGHT = 4;
/** Produce acks (default -1: wait for the broker's fsync). */
const ACKS = Number(process.env.BENCH_BROKER_ACKS ?? -1);
/** Producer processes (default 1: one kafkajs producer in this process). */
const PRODUCERS = Number(process.env.BENCH_BROKER_PRODUCERS ?? 1);
const totalMb = Number(process.env.BENCH_BROKER_MB ?? 1024);
const latencySeconds = Number(process.env.BENCH_BROKER_LATENCY_S ?? 10);
const totalMessages = Math.floor((totalMb * 1024 * 1024) / MESSAGE_BYTES);

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dataDir =
  process.env.BENCH_BROKER_ROLE === 'producer'
    ? ''
    : fs.mkdtempSync(path.join(os.tmpdir(), 'payrecon-bench-broker-'));

function procStatus(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const text = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(text);
  return m ? Number(m[1]) * 1024 : 0;
}

/** Worst event-loop delay the broker reported (its `--stats-ms` lines) since the last reset. */
const brokerLoop = { p99: 0, max: 0 };

async function startChild(): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(
    process.execPath,
    [
      path.join(root, 'bin/payrecon.mjs'),
      'broker',
      '--port',
      '0',
      '--data-dir',
      dataDir,
      '--partitions',
      '1',
      '--stats-ms',
      '500',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let err = '';
  child.stderr!.on('data', (c: Buffer) => {
    err += c.toString();
    const lines = err.split('\n');
    err = lines.pop() ?? '';
    for (const line of lines) {
      if (!line.includes('"broker stats"')) continue;
      const stats = JSON.parse(line) as { eventLoopDelayP99Ms: number; eventLoopDelayMaxMs: number };
      brokerLoop.p99 = Math.max(brokerLoop.p99, stats.eventLoopDelayP99Ms);
      brokerLoop.max = Math.max(brokerLoop.max, stats.eventLoopDelayMaxMs);
    }
  });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /listening [^:]+:(\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.once('exit', (code) => reject(new Error(`broker exited with ${code}`)));
  });
  return { child, port };
}

/**
 * kafkajs leaves Nagle's algorithm on; with many small requests in flight on one connection that alone
 * adds tens of milliseconds. The pipeline's clients should use this factory too (BENCH_BROKER_NAGLE=1
 * measures kafkajs' default).
 */
const noDelaySocket = noDelaySocketFactory;

/** CPU seconds (user + system) the process has used. */
function cpuSeconds(pid: number): number {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/**
 * Pings the broker with ApiVersions every 10 ms on a raw socket; the round trips show how responsive the
 * broker itself is, apart from kafkajs.
 */
function startProbe(port: number): { stop(): number[] } {
  const rtts: number[] = [];
  const socket = net.connect({ host: '127.0.0.1', port });
  socket.setNoDelay(true);
  const sentAt = new Map<number, number>();
  let buffered = Buffer.alloc(0);
  socket.on('data', (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    while (buffered.length >= 8 && buffered.length >= buffered.readInt32BE(0) + 4) {
      const id = buffered.readInt32BE(4);
      const t = sentAt.get(id);
      if (t !== undefined) rtts.push(performance.now() - t);
      sentAt.delete(id);
      buffered = buffered.subarray(buffered.readInt32BE(0) + 4);
    }
  });
  socket.on('error', () => {});
  let id = 0;
  const timer = setInterval(() => {
    const frame = Buffer.alloc(14);
    frame.writeInt32BE(10, 0);
    frame.writeInt16BE(18, 4);
    frame.writeInt16BE(0, 6);
    frame.writeInt32BE(++id, 8);
    frame.writeInt16BE(-1, 12);
    sentAt.set(id, performance.now());
    socket.write(frame);
  }, 10);
  return {
    stop() {
      clearInterval(timer);
      socket.destroy();
      return rtts;
    },
  };
}

const cpuOf = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1e6;
const round = (n: number) => Number(n.toFixed(2));
const mb = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);
const pct = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? 0;

/** Sends this producer's share (every `of`-th send starting at `k`) of the 1,000-message sends. */
async function produceShare(producer: Producer, k: number, of: number): Promise<void> {
  const payload = Buffer.alloc(MESSAGE_BYTES - 16, 0x78);
  const sends = Math.ceil(totalMessages / PER_SEND);
  let nextSend = k;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (nextSend < sends) {
        const s = nextSend;
        nextSend += of;
        const count = Math.min(PER_SEND, totalMessages - s * PER_SEND);
        const messages = Array.from({ length: count }, (_, i) => ({
          key: String(s * PER_SEND + i).padStart(16, '0'),
          value: payload,
          partition: s % PARTITIONS,
        }));
        await producer.send({ topic: 'bench', acks: ACKS, messages });
      }
    }),
  );
}

async function producerChild(): Promise<void> {
  const kafka = new Kafka({
    clientId: `bench-producer-${process.env.BENCH_BROKER_K}`,
    brokers: [`127.0.0.1:${process.env.BENCH_BROKER_PORT}`],
    logLevel: logLevel.ERROR,
    socketFactory: noDelaySocket,
  });
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  const start = performance.timeOrigin + performance.now();
  await produceShare(producer, Number(process.env.BENCH_BROKER_K), PRODUCERS);
  const end = performance.timeOrigin + performance.now();
  process.stdout.write(JSON.stringify({ start, end }));
  await producer.disconnect();
}

async function main(): Promise<void> {
  const { child, port } = await startChild();
  const pid = child.pid!;
  let peakSampled = 0;
  const sampler = setInterval(() => {
    try {
      peakSampled = Math.max(peakSampled, procStatus(pid, 'VmRSS'));
    } catch {
      // The child is gone.
    }
  }, 100);

  const kafka = new Kafka({
    clientId: 'bench',
    brokers: [`127.0.0.1:${port}`],
    logLevel: logLevel.ERROR,
    ...(process.env.BENCH_BROKER_NAGLE === '1' ? {} : { socketFactory: noDelaySocket }),
  });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({
    topics: [
      { topic: 'bench', numPartitions: PARTITIONS },
      { topic: 'latency', numPartitions: 1 },
    ],
  });

  // 1. Produce.
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  const cpu0 = cpuSeconds(pid);
  const self0 = process.cpuUsage();
  const t0 = performance.now();
  let producedSpanMs = 0;
  if (PRODUCERS === 1) {
    await produceShare(producer, 0, 1);
  } else {
    // kafkajs encodes on one core; extra producer processes show what the broker takes beyond that.
    // Each child times its own sends after connecting, so process start-up is not counted.
    const spans = await Promise.all(
      Array.from({ length: PRODUCERS }, (_, k) => {
        const worker = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url)], {
          cwd: root,
          stdio: ['ignore', 'pipe', 'inherit'],
          env: {
            ...process.env,
            BENCH_BROKER_ROLE: 'producer',
            BENCH_BROKER_PORT: String(port),
            BENCH_BROKER_K: String(k),
          },
        });
        let out = '';
        worker.stdout!.on('data', (c: Buffer) => {
          out += c.toString();
        });
        return new Promise<{ start: number; end: number }>((resolve, reject) =>
          worker.once('exit', (code) =>
            code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`producer ${k} exited ${code}`)),
          ),
        );
      }),
    );
    producedSpanMs = Math.max(...spans.map((s) => s.end)) - Math.min(...spans.map((s) => s.start));
  }
  const produceS = (producedSpanMs || performance.now() - t0) / 1000;
  const produceCpu = { broker: cpuSeconds(pid) - cpu0, client: cpuOf(process.cpuUsage(self0)) };
  const storedRss = procStatus(pid, 'VmRSS');

  // 2. Consume.
  const consumer = kafka.consumer({
    groupId: 'bench-consume',
    maxBytesPerPartition: 8 * 1024 * 1024,
    maxBytes: 32 * 1024 * 1024,
    maxWaitTimeInMs: 200,
  });
  await consumer.connect();
  await consumer.subscribe({ topic: 'bench', fromBeginning: true });
  let consumed = 0;
  let t1 = 0;
  const cpu1 = cpuSeconds(pid);
  const self1 = process.cpuUsage();
  let consumeDone: () => void = () => {};
  const allConsumed = new Promise<void>((resolve) => {
    consumeDone = resolve;
  });
  await consumer.run({
    partitionsConsumedConcurrently: PARTITIONS,
    eachBatch: async ({ batch }) => {
      if (t1 === 0) t1 = performance.now();
      consumed += batch.messages.length;
      if (consumed >= totalMessages) consumeDone();
    },
  });
  const tJoin = performance.now();
  await allConsumed;
  const consumeS = (performance.now() - (t1 || tJoin)) / 1000;
  const consumeCpu = { broker: cpuSeconds(pid) - cpu1, client: cpuOf(process.cpuUsage(self1)) };
  await consumer.disconnect();

  // 3. Latency at 1,000 msg/s.
  const latConsumer = kafka.consumer({ groupId: 'bench-latency', maxWaitTimeInMs: 1000 });
  await latConsumer.connect();
  await latConsumer.subscribe({ topic: 'latency', fromBeginning: false });
  const latencies: number[] = [];
  await latConsumer.run({
    eachMessage: async ({ message }) => {
      latencies.push(performance.timeOrigin + performance.now() - Number(message.value!.readDoubleBE(0)));
    },
  });
  await new Promise((r) => setTimeout(r, 3000));
  // Stalls of this (client) process count in the latency too; measured so they can be told apart.
  const loopDelay = monitorEventLoopDelay({ resolution: 5 });
  loopDelay.enable();
  const probe = startProbe(port);
  brokerLoop.p99 = 0;
  brokerLoop.max = 0;
  const target = latencySeconds * 1000;
  let sent = 0;
  let inFlight = 0;
  const tl = performance.now();
  const latPayload = Buffer.alloc(MESSAGE_BYTES);
  await new Promise<void>((resolve) => {
    const tick = () => {
      const due = Math.min(target, Math.floor(performance.now() - tl));
      while (sent < due && inFlight < 200) {
        const value = Buffer.from(latPayload);
        value.writeDoubleBE(performance.timeOrigin + performance.now(), 0);
        inFlight++;
        sent++;
        producer
          .send({ topic: 'latency', acks: -1, messages: [{ value }] })
          .finally(() => inFlight--)
          .catch(() => {});
      }
      if (sent >= target) resolve();
      else setTimeout(tick, 1);
    };
    tick();
  });
  const deadline = Date.now() + 10_000;
  while (latencies.length < target && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  loopDelay.disable();
  const probeRtts = probe.stop().sort((a, b) => a - b);
  await latConsumer.disconnect();
  await producer.disconnect();
  await admin.disconnect();

  const peakHwm = procStatus(pid, 'VmHWM');
  clearInterval(sampler);
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
  const logBytes = fs
    .readdirSync(path.join(dataDir, 'topics', 'bench'))
    .flatMap((p) =>
      fs
        .readdirSync(path.join(dataDir, 'topics', 'bench', p))
        .map((f) => path.join(dataDir, 'topics', 'bench', p, f)),
    )
    .reduce((n, f) => n + fs.statSync(f).size, 0);
  fs.rmSync(dataDir, { recursive: true, force: true });

  const sorted = [...latencies].sort((a, b) => a - b);
  const bytes = totalMessages * MESSAGE_BYTES;
  const results = {
    messages: totalMessages,
    messageBytes: MESSAGE_BYTES,
    logStoredMiB: Number(mb(logBytes)),
    produce: {
      seconds: Number(produceS.toFixed(2)),
      msgPerS: Math.round(totalMessages / produceS),
      mibPerS: Number(mb(bytes / produceS)),
      producers: PRODUCERS,
      acks: ACKS,
      cpuSeconds: { broker: round(produceCpu.broker), kafkajsInThisProcess: round(produceCpu.client) },
    },
    consume: {
      seconds: Number(consumeS.toFixed(2)),
      msgPerS: Math.round(consumed / consumeS),
      mibPerS: Number(mb(bytes / consumeS)),
      cpuSeconds: { broker: round(consumeCpu.broker), kafkajs: round(consumeCpu.client) },
    },
    latencyAt1000PerS: {
      received: latencies.length,
      sent,
      p50Ms: Number(pct(sorted, 0.5).toFixed(2)),
      p99Ms: Number(pct(sorted, 0.99).toFixed(2)),
      maxMs: Number((sorted.at(-1) ?? 0).toFixed(2)),
      brokerPingP50Ms: Number(pct(probeRtts, 0.5).toFixed(2)),
      brokerPingP99Ms: Number(pct(probeRtts, 0.99).toFixed(2)),
      brokerEventLoopDelayWorstP99Ms: Number(brokerLoop.p99.toFixed(2)),
      brokerEventLoopDelayMaxMs: Number(brokerLoop.max.toFixed(2)),
      clientEventLoopDelayP99Ms: Number((loopDelay.percentile(99) / 1e6).toFixed(2)),
      clientEventLoopDelayMaxMs: Number((loopDelay.max / 1e6).toFixed(2)),
      loadAverage1m: Number(os.loadavg()[0]!.toFixed(2)),
    },
    brokerMemory: {
      rssWithLogStoredMiB: Number(mb(storedRss)),
      peakSampledRssMiB: Number(mb(peakSampled)),
      peakVmHwmMiB: Number(mb(peakHwm)),
    },
  };
  console.log(JSON.stringify(results, null, 2));
  const ok = (b: boolean) => (b ? 'ok' : 'MISSED');
  console.log(`
| measure | value | target |
|---|---|---|
| produce (1 KiB, ${PER_SEND}/send, acks ${ACKS}, ${PRODUCERS} kafkajs producer(s)) | ${results.produce.msgPerS} msg/s, ${results.produce.mibPerS} MiB/s | >= 50,000 msg/s ${ok(results.produce.msgPerS >= 50_000)} |
| consume (kafkajs eachBatch) | ${results.consume.msgPerS} msg/s, ${results.consume.mibPerS} MiB/s | >= 50,000 msg/s ${ok(results.consume.msgPerS >= 50_000)} |
| end-to-end latency at 1,000 msg/s | p50 ${results.latencyAt1000PerS.p50Ms} ms, p99 ${results.latencyAt1000PerS.p99Ms} ms | p99 < 50 ms ${ok(results.latencyAt1000PerS.p99Ms < 50)} |
| broker peak RSS, ${results.logStoredMiB} MiB of log stored | ${results.brokerMemory.peakVmHwmMiB} MiB | < 200 MB ${ok(results.brokerMemory.peakVmHwmMiB * 1.048576 < 200)} |
`);
}

if (process.env.BENCH_BROKER_ROLE === 'producer') {
  producerChild().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
} else {
  main().catch((err: unknown) => {
    console.error(err);
    fs.rmSync(dataDir, { recursive: true, force: true });
    process.exit(1);
  });
}
