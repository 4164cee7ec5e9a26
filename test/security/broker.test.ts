/**
 * The embedded broker under attack, over TCP, running in a process of its own whose memory is measured
 * (`broker-process.ts`): a 100 MiB frame announced before authentication, a thousand idle connections,
 * and a client that pipelines large fetches without reading the answers. Each is refused or held back
 * while the broker stays under 200 MB, and kafkajs (SCRAM) still produces and consumes afterwards.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { Kafka, logLevel, type SASLOptions } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encode, Writer } from '../../src/embedded/kafka/codec.ts';
import { API, APIS } from '../../src/embedded/kafka/messages.ts';
import { tempDir } from '../embedded/kafka/helpers.ts';
import { waitFor } from '../helpers/wait.ts';

const MiB = 1024 * 1024;
const MEMORY_LIMIT = 200 * 1000 * 1000;
const PRE_AUTH_LIMIT = 64 * 1024;
const USERS = { app: 'app-secret-1' };

interface Memory {
  rss: number;
  heapUsed: number;
  peakRss: number;
}

type LogLine = { level: string; msg: string } & Record<string, unknown>;

/** The broker in its own process (see broker-process.ts). */
class BrokerProcess {
  readonly logs: LogLine[] = [];
  port = 0;
  private readonly waiting: ((m: Memory) => void)[] = [];

  private constructor(private readonly child: ChildProcess) {}

  static start(options: Record<string, unknown>): Promise<BrokerProcess> {
    const script = join(import.meta.dirname, 'broker-process.ts');
    const child = spawn(process.execPath, ['--import', 'tsx', script, JSON.stringify(options)], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const b = new BrokerProcess(child);
    return new Promise((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`broker process exited (${code})`)));
      child.on('message', (m: { port?: number; log?: LogLine; memory?: Memory }) => {
        if (m.log) b.logs.push(m.log);
        if (m.memory) b.waiting.shift()?.(m.memory);
        if (m.port) {
          b.port = m.port;
          resolve(b);
        }
      });
    });
  }

  memory(): Promise<Memory> {
    return new Promise((resolve) => {
      this.waiting.push(resolve);
      this.child.send('memory');
    });
  }

  logged(msg: string): LogLine[] {
    return this.logs.filter((l) => l.msg === msg);
  }

  async close(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((r) => this.child.once('exit', r));
    this.child.send('close');
    await exited;
  }
}

/** A connected socket and the instant it closed (from either side). */
interface Tracked {
  socket: net.Socket;
  openedAt: number;
  closed: Promise<number>;
}

function connect(port: number): Promise<Tracked> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const closed = new Promise<number>((r) => socket.once('close', () => r(Date.now())));
    socket.once('connect', () => {
      socket.off('error', reject);
      socket.on('error', () => {});
      resolve({ socket, openedAt: Date.now(), closed });
    });
    socket.once('error', reject);
  });
}

/** A request frame: size, header (api key, version, correlation id, client id), body. */
function frame(
  apiKey: number,
  version: number,
  correlationId: number,
  body: Buffer = Buffer.alloc(0),
): Buffer {
  const w = new Writer().int32(0).int16(apiKey).int16(version).int32(correlationId).nstring('attacker');
  const head = w.done();
  const out = Buffer.concat([head, body]);
  out.writeInt32BE(out.length - 4, 0);
  return out;
}

/** Reads length-prefixed responses off a socket, in order, keeping each one's first bytes. */
function responses(socket: net.Socket): { frames: Buffer[]; bytes: () => number } {
  const frames: Buffer[] = [];
  const chunks: Buffer[] = [];
  let buffered = 0;
  let bytes = 0;
  socket.on('data', (chunk: Buffer) => {
    bytes += chunk.length;
    chunks.push(chunk);
    buffered += chunk.length;
    for (;;) {
      if (buffered < 4) return;
      if (chunks[0]!.length < 4) chunks.splice(0, chunks.length, Buffer.concat(chunks));
      const size = chunks[0]!.readInt32BE(0);
      if (buffered < size + 4) return;
      const all = Buffer.concat(chunks, buffered);
      frames.push(Buffer.from(all.subarray(4, Math.min(size + 4, 260))));
      chunks.length = 0;
      if (all.length > size + 4) chunks.push(all.subarray(size + 4));
      buffered -= size + 4;
    }
  });
  return { frames, bytes: () => bytes };
}

/**
 * Announces a frame of `size` bytes and keeps sending its body, 1 MiB at a time, until the broker closes
 * the connection or the whole body is sent. Answers the body bytes the socket took.
 */
async function announce(t: Tracked, size: number): Promise<{ sent: number; closed: boolean }> {
  const { socket } = t;
  let closed = false;
  void t.closed.then(() => {
    closed = true;
  });
  const head = Buffer.alloc(4);
  head.writeInt32BE(size);
  socket.write(head);
  const chunk = Buffer.alloc(MiB, 0x41);
  let sent = 0;
  while (!closed && sent < size) {
    const more = socket.write(chunk);
    sent += chunk.length;
    if (!more) await Promise.race([new Promise((r) => socket.once('drain', r)), t.closed]);
  }
  await t.closed;
  return { sent, closed: true };
}

function kafka(port: number, mechanism: 'scram-sha-256' | 'scram-sha-512' | null): Kafka {
  const sasl: SASLOptions | undefined = mechanism
    ? ({ mechanism, username: 'app', password: USERS.app } as SASLOptions)
    : undefined;
  return new Kafka({
    clientId: 'after-attack',
    brokers: [`127.0.0.1:${port}`],
    logLevel: logLevel.NOTHING,
    retry: { initialRetryTime: 100, retries: 8 },
    ...(sasl ? { sasl } : {}),
  });
}

/** Produces `n` messages to `topic` and consumes them back with a new group. */
async function roundTrip(k: Kafka, topic: string, n: number): Promise<string[]> {
  const producer = k.producer();
  await producer.connect();
  const sent = Array.from({ length: n }, (_, i) => `${topic}-${i}`);
  await producer.send({ topic, acks: -1, messages: sent.map((value) => ({ value })) });
  await producer.disconnect();
  const consumer = k.consumer({ groupId: `${topic}-group`, sessionTimeout: 10_000, heartbeatInterval: 500 });
  const got: string[] = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ message }) => {
        got.push(message.value?.toString() ?? '');
      },
    });
    await waitFor(`${n} messages consumed from ${topic}`, () => got.length >= n, 30_000);
  } finally {
    await consumer.disconnect();
  }
  return got;
}

describe('embedded broker with SASL/SCRAM under attack', () => {
  const AUTH_TIMEOUT = 5_000;
  const CAP = 300;
  let b: BrokerProcess;
  let dir: string;

  beforeAll(async () => {
    dir = tempDir('broker-attack-sasl');
    b = await BrokerProcess.start({
      dataDir: dir,
      users: USERS,
      maxConnections: CAP,
      authTimeoutMs: AUTH_TIMEOUT,
    });
  });
  afterAll(async () => {
    await b?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a 100 MiB frame announced before authentication closes the connection, nothing of it kept', async () => {
    const before = await b.memory();
    // Twenty at once, and one that first asks ApiVersions (allowed before authenticating).
    const plain = await Promise.all(Array.from({ length: 20 }, () => connect(b.port)));
    const polite = await connect(b.port);
    const answers = responses(polite.socket);
    polite.socket.write(frame(API.ApiVersions, 0, 1));
    await waitFor('ApiVersions answer', () => answers.frames.length === 1, 5_000);
    const results = await Promise.all([...plain, polite].map((t) => announce(t, 100 * MiB)));
    for (const r of results) {
      expect(r.closed).toBe(true);
      // Closed at the header: far less than the announced body went out before the close.
      expect(r.sent).toBeLessThan(50 * MiB);
    }
    const after = await b.memory();
    const refused = b.logged('bad frame size, closing connection');
    expect(refused).toHaveLength(21);
    for (const l of refused)
      expect(l).toMatchObject({ size: 100 * MiB, limit: PRE_AUTH_LIMIT, authenticated: false });
    console.info(
      `100 MiB pre-authentication frames x21: broker rss ${(before.rss / MiB).toFixed(1)} -> ${(after.rss / MiB).toFixed(1)} MiB, peak ${(after.peakRss / MiB).toFixed(1)} MiB`,
    );
    expect(after.rss - before.rss).toBeLessThan(32 * MiB);
    expect(after.peakRss).toBeLessThan(MEMORY_LIMIT);
  }, 60_000);

  it('1,000 idle connections: the cap refuses the excess, the rest are closed unauthenticated', async () => {
    const before = await b.memory();
    const conns: Tracked[] = [];
    // In batches, so that the listen backlog never drops a SYN (a late retry would blur the counts).
    for (let i = 0; i < 10; i++)
      conns.push(...(await Promise.all(Array.from({ length: 100 }, () => connect(b.port)))));
    const during = await b.memory();
    let timer: NodeJS.Timeout | undefined;
    const closedAt = await Promise.race([
      Promise.all(conns.map((c) => c.closed)),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error('connections still open 3 authentication timeouts later')),
          AUTH_TIMEOUT * 3,
        );
      }),
    ]).finally(() => clearTimeout(timer));
    for (const c of conns) c.socket.destroy();
    const after = await b.memory();
    const lived = conns.map((c, i) => closedAt[i]! - c.openedAt);
    const refused = lived.filter((ms) => ms < AUTH_TIMEOUT / 2).length;
    const timedOut = lived.filter((ms) => ms >= AUTH_TIMEOUT * 0.9).length;
    expect(refused).toBe(1000 - CAP);
    expect(timedOut).toBe(CAP);
    expect(b.logged('no SASL authentication in time, closing connection')).toHaveLength(CAP);
    expect(b.logged('connection limit reached, refusing connections').length).toBeGreaterThan(0);
    console.info(
      `1,000 idle connections (cap ${CAP}): broker rss ${(before.rss / MiB).toFixed(1)} -> ${(during.rss / MiB).toFixed(1)} MiB while open, peak ${(after.peakRss / MiB).toFixed(1)} MiB`,
    );
    expect(after.peakRss).toBeLessThan(MEMORY_LIMIT);
  }, 60_000);

  it('kafkajs still authenticates (SCRAM-SHA-256 and -512), produces and consumes afterwards', async () => {
    for (const mechanism of ['scram-sha-256', 'scram-sha-512'] as const) {
      const topic = `after-${mechanism}`;
      const got = await roundTrip(kafka(b.port, mechanism), topic, 50);
      expect(got.sort()).toEqual(Array.from({ length: 50 }, (_, i) => `${topic}-${i}`).sort());
    }
    expect(b.logged('SASL authenticated').length).toBeGreaterThan(0);
    expect((await b.memory()).peakRss).toBeLessThan(MEMORY_LIMIT);
  }, 120_000);
});

describe('embedded broker without SASL under attack', () => {
  const AUTH_TIMEOUT = 2_000;
  const IDLE_TIMEOUT = 2_000;
  let b: BrokerProcess;
  let dir: string;

  beforeAll(async () => {
    dir = tempDir('broker-attack-plain');
    b = await BrokerProcess.start({ dataDir: dir, authTimeoutMs: AUTH_TIMEOUT, idleTimeoutMs: IDLE_TIMEOUT });
  });
  afterAll(async () => {
    await b?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a 100 MiB first frame closes the connection; after a first request the full limit applies', async () => {
    const before = await b.memory();
    const r = await announce(await connect(b.port), 100 * MiB);
    expect(r.sent).toBeLessThan(50 * MiB);
    // The broker's answer comes after the log lines it sent before it (one channel, in order).
    const after = await b.memory();
    expect(b.logged('bad frame size, closing connection').at(-1)).toMatchObject({
      size: 100 * MiB,
      limit: PRE_AUTH_LIMIT,
      authenticated: false,
    });
    expect(after.rss - before.rss).toBeLessThan(32 * MiB);

    // A client that opened with ApiVersions may send a frame above the first-frame limit (ApiVersions v0
    // has no body: the padding is read past, the request answered).
    const t = await connect(b.port);
    const answers = responses(t.socket);
    t.socket.write(frame(API.ApiVersions, 0, 1));
    await waitFor('first answer', () => answers.frames.length === 1, 5_000);
    t.socket.write(frame(API.ApiVersions, 0, 2, Buffer.alloc(4 * PRE_AUTH_LIMIT)));
    await waitFor('answer to the large frame', () => answers.frames.length === 2, 5_000);
    expect(answers.frames[1]!.readInt32BE(0)).toBe(2);
    // Then idle: closed by the idle timeout.
    const lastAnswer = Date.now();
    const closedAt = await t.closed;
    expect(closedAt - lastAnswer).toBeGreaterThanOrEqual(IDLE_TIMEOUT * 0.9);
  }, 30_000);

  it('a connection that never sends a request is closed after the time allowed', async () => {
    const t = await connect(b.port);
    const closedAt = await t.closed;
    expect(closedAt - t.openedAt).toBeGreaterThanOrEqual(AUTH_TIMEOUT * 0.9);
    await b.memory();
    expect(b.logged('no request in time, closing connection').length).toBeGreaterThan(0);
  }, 30_000);

  it('a fetch parked longer than the idle timeout keeps its connection; idle after it, it is closed', async () => {
    const k = kafka(b.port, null);
    const admin = k.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic: 'quiet', numPartitions: 1 }] });
    await admin.disconnect();
    const body = encode(APIS.get(API.Fetch)!.request, new Writer(), 4, {
      replicaId: -1,
      maxWaitMs: IDLE_TIMEOUT * 2,
      minBytes: 1,
      maxBytes: MiB,
      isolationLevel: 0,
      topics: [{ topic: 'quiet', partitions: [{ partition: 0, fetchOffset: 0n, partitionMaxBytes: MiB }] }],
    }).done();
    const t = await connect(b.port);
    const answers = responses(t.socket);
    const asked = Date.now();
    t.socket.write(frame(API.Fetch, 4, 7, body));
    await waitFor(
      'the parked fetch',
      () => answers.frames.length === 1 || t.socket.destroyed,
      IDLE_TIMEOUT * 4,
    );
    const answered = Date.now();
    expect(answers.frames).toHaveLength(1);
    expect(answers.frames[0]!.readInt32BE(0)).toBe(7);
    expect(answered - asked).toBeGreaterThanOrEqual(IDLE_TIMEOUT * 2 * 0.9);
    const closedAt = await t.closed;
    expect(closedAt - answered).toBeGreaterThanOrEqual(IDLE_TIMEOUT * 0.9);
  }, 30_000);

  it('a client that pipelines 400 fetches of 1 MiB without reading is not read further: memory stays flat', async () => {
    // 1 MiB of records in one partition.
    const k = kafka(b.port, null);
    const admin = k.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic: 'bulk', numPartitions: 1 }] });
    await admin.disconnect();
    const producer = k.producer();
    await producer.connect();
    for (let i = 0; i < 16; i++) {
      await producer.send({ topic: 'bulk', acks: -1, messages: [{ value: Buffer.alloc(64 * 1024, i) }] });
    }
    await producer.disconnect();

    const spec = APIS.get(API.Fetch)!;
    const fetch = (correlationId: number) => {
      const body = encode(spec.request, new Writer(), 4, {
        replicaId: -1,
        maxWaitMs: 0,
        minBytes: 0,
        maxBytes: MiB,
        isolationLevel: 0,
        topics: [{ topic: 'bulk', partitions: [{ partition: 0, fetchOffset: 0n, partitionMaxBytes: MiB }] }],
      }).done();
      return frame(API.Fetch, 4, correlationId, body);
    };
    const before = await b.memory();
    const t = await connect(b.port);
    const answers = responses(t.socket);
    // Not reading: what the broker writes stays in its buffers unless it holds back.
    t.socket.pause();
    const N = 400;
    const requests = Buffer.concat(Array.from({ length: N }, (_, i) => fetch(i + 1)));
    await new Promise<void>((resolve) => t.socket.write(requests, () => resolve()));
    // Everything handed to the kernel: the broker has had every request it chose to read, and what it
    // answered waits in its buffers (the kernel's are full) unless it held back.
    const held = await b.memory();
    expect(held.rss - before.rss).toBeLessThan(64 * MiB);
    expect(held.peakRss).toBeLessThan(MEMORY_LIMIT);
    t.socket.resume();
    await waitFor(`${N} fetch answers`, () => answers.frames.length === N, 60_000);
    expect(answers.frames.map((f) => f.readInt32BE(0))).toEqual(Array.from({ length: N }, (_, i) => i + 1));
    // Each answer carried the megabyte: 400 MiB went through, never more than a few in the broker.
    expect(answers.bytes()).toBeGreaterThan(N * MiB * 0.9);
    const after = await b.memory();
    console.info(
      `${N} pipelined 1 MiB fetches, unread then read: broker rss ${(before.rss / MiB).toFixed(1)} -> ${(held.rss / MiB).toFixed(1)} MiB while unread (peak ${(held.peakRss / MiB).toFixed(1)}), peak ${(after.peakRss / MiB).toFixed(1)} MiB once read`,
    );
    // Reading 400 MiB leaves garbage until the collector runs; what was held stays far below the
    // 400 MiB a broker without back-pressure buffers for a client that does not read.
    expect(after.peakRss - before.rss).toBeLessThan(256 * MiB);
    t.socket.destroy();
  }, 120_000);

  it('kafkajs produces and consumes normally afterwards', async () => {
    const got = await roundTrip(kafka(b.port, null), 'after-plain', 50);
    expect(got).toHaveLength(50);
  }, 60_000);
});
