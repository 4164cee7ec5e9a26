import fs from 'node:fs';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningBroker } from '../../../src/embedded/kafka/broker.ts';
import { waitFor } from '../../helpers/wait.ts';
import { broker, client, tempDir } from './helpers.ts';

/** One raw connection: sends hand-built frames and reads length-prefixed responses in order. */
class RawConnection {
  private buffered = Buffer.alloc(0);
  private waiting: ((b: Buffer) => void)[] = [];
  closed = false;

  private constructor(private readonly socket: net.Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.buffered = Buffer.concat([this.buffered, chunk]);
      while (this.buffered.length >= 4 && this.buffered.length >= this.buffered.readInt32BE(0) + 4) {
        const size = this.buffered.readInt32BE(0);
        const frame = this.buffered.subarray(4, size + 4);
        this.buffered = this.buffered.subarray(size + 4);
        this.waiting.shift()?.(frame);
      }
    });
    socket.on('close', () => {
      this.closed = true;
    });
  }

  static open(port: number): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      const s = net.connect(port, '127.0.0.1', () => resolve(new RawConnection(s)));
      s.on('error', reject);
    });
  }

  /** Sends `header + body` and resolves with the response frame (correlation id first). */
  request(header: Buffer, body: Buffer = Buffer.alloc(0)): Promise<Buffer> {
    const size = Buffer.alloc(4);
    size.writeInt32BE(header.length + body.length);
    const answer = new Promise<Buffer>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no response within 5 s')), 5000);
      this.waiting.push((b) => {
        clearTimeout(timer);
        resolve(b);
      });
    });
    this.socket.write(Buffer.concat([size, header, body]));
    return answer;
  }

  close(): void {
    this.socket.destroy();
  }
}

function header(apiKey: number, version: number, correlationId: number, flexible = false): Buffer {
  const clientId = Buffer.from('raw-test');
  const h = Buffer.alloc(10 + clientId.length + (flexible ? 1 : 0));
  h.writeInt16BE(apiKey, 0);
  h.writeInt16BE(version, 2);
  h.writeInt32BE(correlationId, 4);
  h.writeInt16BE(clientId.length, 8);
  clientId.copy(h, 10);
  return h; // a flexible header ends with an empty tagged-field section (one 0 byte, already zero)
}

function parseApiVersionsV0(frame: Buffer): {
  correlationId: number;
  errorCode: number;
  keys: Map<number, number[]>;
} {
  const keys = new Map<number, number[]>();
  const n = frame.readInt32BE(6);
  for (let i = 0; i < n; i++) {
    const at = 10 + i * 6;
    keys.set(frame.readInt16BE(at), [frame.readInt16BE(at + 2), frame.readInt16BE(at + 4)]);
  }
  return { correlationId: frame.readInt32BE(0), errorCode: frame.readInt16BE(4), keys };
}

describe('embedded broker wire protocol', () => {
  let b: RunningBroker;
  let dir: string;
  beforeAll(async () => {
    dir = tempDir('proto');
    b = await broker(dir);
  });
  afterAll(async () => {
    await b.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('advertises the versions kafkajs and librdkafka need', async () => {
    const conn = await RawConnection.open(b.port);
    const res = parseApiVersionsV0(await conn.request(header(18, 0, 7)));
    conn.close();
    expect(res.correlationId).toBe(7);
    expect(res.errorCode).toBe(0);
    const expected: Record<number, [number, number]> = {
      0: [3, 7],
      1: [4, 11],
      2: [1, 3],
      3: [0, 6],
      8: [0, 5],
      9: [1, 4],
      10: [0, 2],
      11: [0, 5],
      12: [0, 3],
      13: [0, 3],
      14: [0, 3],
      15: [0, 2],
      16: [0, 2],
      17: [0, 1],
      18: [0, 2],
      19: [0, 3],
      20: [0, 1],
      22: [0, 1],
      32: [0, 2],
      36: [0, 1],
      37: [0, 1],
    };
    expect(Object.fromEntries(res.keys)).toEqual(expected);
  });

  it('answers a flexible ApiVersions v3 with UNSUPPORTED_VERSION in a v0 body listing key 18', async () => {
    const conn = await RawConnection.open(b.port);
    // v3 body: compact strings client_software_name and client_software_version, then tagged fields.
    const body = Buffer.from([4, ...Buffer.from('abc'), 2, ...Buffer.from('1'), 0]);
    const res = parseApiVersionsV0(await conn.request(header(18, 3, 42, true), body));
    expect(res.correlationId).toBe(42);
    expect(res.errorCode).toBe(35);
    expect(res.keys.get(18)).toEqual([0, 2]);
    // The connection stays usable for the retry.
    const retry = parseApiVersionsV0(await conn.request(header(18, 2, 43)));
    expect(retry.errorCode).toBe(0);
    conn.close();
  });

  it('answers unknown APIs, unsupported versions and malformed bodies with an error, keeping the connection', async () => {
    const conn = await RawConnection.open(b.port);
    const unknown = await conn.request(header(60, 0, 100));
    expect(unknown.readInt32BE(0)).toBe(100);
    expect(unknown.readInt16BE(4)).toBe(35);

    const oldProduce = await conn.request(header(0, 2, 101), Buffer.alloc(20));
    expect(oldProduce.readInt32BE(0)).toBe(101);
    expect(oldProduce.readInt16BE(4)).toBe(35);

    // Metadata v1 claiming 5 topics but carrying none.
    const truncated = Buffer.alloc(4);
    truncated.writeInt32BE(5);
    const bad = await conn.request(header(3, 1, 102), truncated);
    expect(bad.readInt32BE(0)).toBe(102);

    const after = parseApiVersionsV0(await conn.request(header(18, 0, 103)));
    expect(after).toMatchObject({ correlationId: 103, errorCode: 0 });
    expect(conn.closed).toBe(false);
    conn.close();
  });

  it('wakes a parked fetch as soon as a record is appended', async () => {
    const kafka = client(b);
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic: 'wake', numPartitions: 1 }] });
    await admin.disconnect();
    const consumer = kafka.consumer({ groupId: 'wake-group', maxWaitTimeInMs: 3000 });
    await consumer.connect();
    await consumer.subscribe({ topic: 'wake', fromBeginning: true });
    const latencies: number[] = [];
    let fetchStarts = 0;
    consumer.on(consumer.events.FETCH_START, () => {
      fetchStarts += 1;
    });
    await consumer.run({
      eachMessage: async ({ message }) => void latencies.push(Date.now() - Number(String(message.value))),
    });
    const producer = kafka.producer();
    await producer.connect();
    // Each record goes out once the consumer has parked a fetch (it has joined and started fetching), and
    // the next once that record arrived, so every record lands on a parked fetch.
    for (let i = 0; i < 5; i++) {
      await waitFor('the consumer to park a fetch', () => fetchStarts > i);
      await producer.send({ topic: 'wake', messages: [{ value: String(Date.now()) }] });
      await waitFor(`record ${i + 1} to arrive`, () => latencies.length > i, 5000);
    }
    await producer.disconnect();
    await consumer.disconnect();
    expect(latencies).toHaveLength(5);
    // Far below the 3 s maxWait: the append answered the parked fetch.
    expect(Math.max(...latencies)).toBeLessThan(1000);
  });
});
