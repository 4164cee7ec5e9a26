import fs from 'node:fs';
import { CompressionTypes, type Consumer, type EachMessagePayload, Partitioners } from 'kafkajs';
import { afterAll, describe, expect, it } from 'vitest';
import type { RunningBroker } from '../../../src/embedded/kafka/broker.ts';
import { waitFor } from '../../helpers/wait.ts';
import { broker, client, tempDir } from './helpers.ts';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

function dir(name: string): string {
  const d = tempDir(name);
  dirs.push(d);
  return d;
}

describe('embedded broker with kafkajs', () => {
  it('produces and consumes keyed messages with headers on the partition the client chose', async () => {
    const b = await broker(dir('keys'));
    const kafka = client(b);
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic: 'keyed', numPartitions: 4 }] });
    const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
    await producer.connect();
    const messages = Array.from({ length: 40 }, (_, i) => ({
      key: `acct-${i % 7}`,
      value: `payload-${i}`,
      headers: { 'event-id': `ev-${i}`, source: 'test' },
    }));
    const acks = await producer.send({ topic: 'keyed', acks: -1, messages });
    expect(acks.every((a) => a.errorCode === 0)).toBe(true);
    await producer.send({ topic: 'keyed', messages: [{ key: 'pinned', value: 'on-3', partition: 3 }] });

    const partitioner = Partitioners.DefaultPartitioner();
    const partitionMetadata = [0, 1, 2, 3].map((partitionId) => ({
      partitionId,
      leader: 1,
      partitionErrorCode: 0,
      replicas: [1],
      isr: [1],
    }));
    const expectedPartition = (key: string) =>
      partitioner({ topic: 'keyed', partitionMetadata, message: { key, value: null } });

    const consumer = kafka.consumer({ groupId: 'keys-group', maxWaitTimeInMs: 500 });
    await consumer.connect();
    await consumer.subscribe({ topic: 'keyed', fromBeginning: true });
    const got: { key: string; value: string; partition: number; headers: Record<string, string> }[] = [];
    await consumer.run({
      eachMessage: async ({ message, partition }) => {
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(message.headers ?? {})) headers[k] = String(v);
        got.push({ key: String(message.key), value: String(message.value), partition, headers });
      },
    });
    await waitFor('41 messages', () => got.length >= 41, 20_000);
    await consumer.disconnect();
    await producer.disconnect();
    await admin.disconnect();
    await b.close();

    expect(got).toHaveLength(41);
    const pinned = got.find((m) => m.key === 'pinned');
    expect(pinned).toMatchObject({ value: 'on-3', partition: 3 });
    for (const [i, m] of messages.entries()) {
      const seen = got.find((g) => g.value === m.value);
      expect(seen, `payload-${i}`).toBeDefined();
      expect(seen?.key).toBe(m.key);
      expect(seen?.partition).toBe(expectedPartition(m.key));
      expect(seen?.headers).toEqual({ 'event-id': `ev-${i}`, source: 'test' });
    }
    // Order within a partition is the produce order.
    for (const p of [0, 1, 2, 3]) {
      const inPartition = got.filter((g) => g.partition === p && g.key !== 'pinned').map((g) => g.value);
      const produced = messages.filter((m) => expectedPartition(m.key) === p).map((m) => m.value);
      expect(inPartition).toEqual(produced);
    }
  });

  it('round-trips gzip-compressed batches', async () => {
    const b = await broker(dir('gzip'));
    const kafka = client(b);
    const producer = kafka.producer();
    await producer.connect();
    const values = Array.from({ length: 200 }, (_, i) => `compressible ${'x'.repeat(100)} ${i}`);
    await producer.send({
      topic: 'zipped',
      compression: CompressionTypes.GZIP,
      messages: values.map((value, i) => ({ key: String(i), value })),
    });
    const consumer = kafka.consumer({ groupId: 'gzip-group', maxWaitTimeInMs: 500 });
    await consumer.connect();
    await consumer.subscribe({ topic: 'zipped', fromBeginning: true });
    const got: string[] = [];
    await consumer.run({ eachMessage: async ({ message }) => void got.push(String(message.value)) });
    await waitFor('gzip messages', () => got.length >= values.length, 20_000);
    await consumer.disconnect();
    await producer.disconnect();
    await b.close();
    expect(got).toEqual(values);
    // Stored verbatim: the segment holds the compressed batch, far smaller than the raw values.
    const seg = fs.readdirSync(`${dirs[dirs.length - 1]}/topics/zipped/0`).find((f) => f.endsWith('.log'))!;
    const size = fs.statSync(`${dirs[dirs.length - 1]}/topics/zipped/0/${seg}`).size;
    expect(size).toBeLessThan(values.join('').length / 4);
  });

  it('admin creates, lists, describes and deletes topics and reports groups', async () => {
    const b = await broker(dir('admin'), { defaultPartitions: 2 });
    const kafka = client(b);
    const admin = kafka.admin();
    await admin.connect();
    expect(
      await admin.createTopics({
        topics: [
          { topic: 'a-topic', numPartitions: 3, configEntries: [{ name: 'retention.ms', value: '60000' }] },
          { topic: 'b-topic', numPartitions: 1 },
        ],
      }),
    ).toBe(true);
    expect(await admin.createTopics({ topics: [{ topic: 'a-topic', numPartitions: 3 }] })).toBe(false);
    expect((await admin.listTopics()).sort()).toEqual(['a-topic', 'b-topic']);
    const meta = await admin.fetchTopicMetadata({ topics: ['a-topic'] });
    expect(meta.topics[0]?.partitions.map((p) => p.partitionId).sort()).toEqual([0, 1, 2]);
    expect(meta.topics[0]?.partitions.every((p) => p.leader === 1)).toBe(true);

    const configs = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [{ type: 2, name: 'a-topic', configNames: ['retention.ms', 'cleanup.policy'] }],
    });
    const entries = configs.resources[0]?.configEntries ?? [];
    expect(entries.find((e) => e.configName === 'retention.ms')?.configValue).toBe('60000');
    expect(entries.find((e) => e.configName === 'cleanup.policy')?.configValue).toBe('delete');

    const producer = kafka.producer();
    await producer.connect();
    await producer.send({ topic: 'b-topic', messages: [{ value: '1' }, { value: '2' }, { value: '3' }] });
    await producer.disconnect();
    expect(await admin.fetchTopicOffsets('b-topic')).toEqual([
      { partition: 0, offset: '3', high: '3', low: '0' },
    ]);
    await admin.setOffsets({
      groupId: 'admin-group',
      topic: 'b-topic',
      partitions: [{ partition: 0, offset: '2' }],
    });
    expect(await admin.fetchOffsets({ groupId: 'admin-group', topics: ['b-topic'] })).toEqual([
      { topic: 'b-topic', partitions: [{ partition: 0, offset: '2', metadata: null }] },
    ]);
    expect((await admin.listGroups()).groups.map((g) => g.groupId)).toContain('admin-group');
    const described = await admin.describeGroups(['admin-group', 'nobody']);
    expect(described.groups.map((g) => g.state)).toEqual(['Empty', 'Dead']);

    await admin.deleteTopics({ topics: ['b-topic'] });
    expect(await admin.listTopics()).toEqual(['a-topic']);
    await admin.disconnect();
    await b.close();

    // Topic metadata and configs survive a restart.
    const again = await broker(dirs[dirs.length - 1]!);
    const admin2 = client(again).admin();
    await admin2.connect();
    expect(await admin2.listTopics()).toEqual(['a-topic']);
    const meta2 = await admin2.fetchTopicMetadata({ topics: ['a-topic'] });
    expect(meta2.topics[0]?.partitions).toHaveLength(3);
    await admin2.disconnect();
    await again.close();
  });

  it('a restarted consumer resumes from its committed offset, also across a broker restart', async () => {
    const d = dir('resume');
    let b = await broker(d);
    let kafka = client(b);
    const producer = kafka.producer();
    await producer.connect();
    await producer.send({
      topic: 'resume',
      messages: Array.from({ length: 50 }, (_, i) => ({ value: `m${i}` })),
    });
    await producer.disconnect();

    const consumeUntil = async (n: number): Promise<{ offset: string; value: string }[]> => {
      const consumer = kafka.consumer({
        groupId: 'resume-group',
        heartbeatInterval: 500,
        maxWaitTimeInMs: 500,
      });
      await consumer.connect();
      await consumer.subscribe({ topic: 'resume', fromBeginning: true });
      const got: { offset: string; value: string }[] = [];
      let fetchStarts = 0;
      consumer.on(consumer.events.FETCH_START, () => {
        fetchStarts += 1;
      });
      await consumer.run({
        autoCommitThreshold: 1,
        eachMessage: async ({ message }) =>
          void got.push({ offset: message.offset, value: String(message.value) }),
      });
      await waitFor(`${n} messages`, () => got.length >= n, 20_000);
      // Extra messages would be a resume bug. A fetch started after the n-th message would bring them,
      // and the consumer starts its next fetch only once that one's batches are processed.
      const fetched = fetchStarts;
      await waitFor('two more fetches', () => fetchStarts >= fetched + 2, 20_000);
      await consumer.disconnect();
      return got;
    };

    const first = await consumeUntil(50);
    expect(first.map((m) => m.offset)).toEqual(Array.from({ length: 50 }, (_, i) => String(i)));

    await b.close();
    b = await broker(d);
    kafka = client(b);
    const p2 = kafka.producer();
    await p2.connect();
    await p2.send({ topic: 'resume', messages: Array.from({ length: 20 }, (_, i) => ({ value: `n${i}` })) });
    await p2.disconnect();

    const second = await consumeUntil(20);
    expect(second.map((m) => m.value)).toEqual(Array.from({ length: 20 }, (_, i) => `n${i}`));
    expect(second[0]?.offset).toBe('50');
    await b.close();
  });

  it('keeps every acknowledged message when the broker stops and restarts mid-stream', async () => {
    const d = dir('restart');
    let b: RunningBroker = await broker(d);
    const port = b.port;
    /** Connections the clients found refused or closed: they met the stopped broker. */
    let refused = 0;
    const kafka = client(b, 'test', (entry) => {
      if (/ECONNREFUSED|Connection error|Closed connection|ECONNRESET/i.test(JSON.stringify(entry.log)))
        refused += 1;
    });
    // Idempotent, as the pipeline's publisher: a batch retried across the restart must not land twice.
    const producer = kafka.producer({
      idempotent: true,
      maxInFlightRequests: 1,
      retry: { initialRetryTime: 100, retries: 20 },
    });
    await producer.connect();
    const acked: string[] = [];
    let stop = false;
    const loop = (async () => {
      for (let i = 0; !stop; i++) {
        const batch = Array.from({ length: 5 }, (_, j) => ({ key: String(i), value: `v-${i}-${j}` }));
        try {
          await producer.send({ topic: 'durable', acks: -1, messages: batch });
          acked.push(...batch.map((m) => m.value));
        } catch {
          // Not acknowledged: the test makes no claim about it.
        }
      }
    })();
    await waitFor('200 acks before the stop', () => acked.length >= 200, 20_000);
    // A consumer that keeps running through the restart (its group is rebuilt by rejoining).
    const live = kafka.consumer({ groupId: 'restart-live', maxWaitTimeInMs: 500, heartbeatInterval: 500 });
    await live.connect();
    await live.subscribe({ topic: 'durable', fromBeginning: true });
    const seenLive = new Set<string>();
    await live.run({ eachMessage: async ({ message }) => void seenLive.add(String(message.value)) });
    await waitFor('the live consumer to start', () => seenLive.size > 0, 20_000);
    await b.close();
    const atStop = acked.length;
    const refusedAtStop = refused;
    await waitFor('a client to meet the stopped broker', () => refused > refusedAtStop, 20_000);
    b = await broker(d, { port });
    await waitFor('200 acks after the restart', () => acked.length >= atStop + 200, 30_000);
    stop = true;
    await loop;
    await producer.disconnect();

    const consumer = kafka.consumer({ groupId: 'restart-check', maxWaitTimeInMs: 500 });
    await consumer.connect();
    await consumer.subscribe({ topic: 'durable', fromBeginning: true });
    const seen = new Map<string, number>();
    await consumer.run({
      eachMessage: async ({ message }) => {
        const v = String(message.value);
        seen.set(v, (seen.get(v) ?? 0) + 1);
      },
    });
    await waitFor('every acknowledged message', () => acked.every((v) => seen.has(v)), 20_000);
    await waitFor('the live consumer to catch up', () => acked.every((v) => seenLive.has(v)), 30_000);
    await consumer.disconnect();
    await live.disconnect();
    await b.close();
    expect(acked.filter((v) => !seen.has(v))).toEqual([]);
    expect([...seen].filter(([, n]) => n > 1)).toEqual([]);
    expect(acked.filter((v) => !seenLive.has(v))).toEqual([]);
  });

  it('applies size retention: old segments go, consumers start at the new log start', async () => {
    const b = await broker(dir('retention'), {
      segmentBytes: 2048,
      retentionBytes: 6144,
      retentionCheckMs: 100,
    });
    const kafka = client(b);
    const producer = kafka.producer();
    await producer.connect();
    for (let i = 0; i < 60; i++) {
      await producer.send({ topic: 'short', messages: [{ value: `${i}`.padEnd(300, '.') }] });
    }
    await producer.disconnect();
    const admin = kafka.admin();
    await admin.connect();
    // Retention runs every 100 ms while the producer writes: wait for it to pass the old segments.
    await waitFor(
      'retention',
      async () => Number((await admin.fetchTopicOffsets('short'))[0]?.low) > 30,
      5000,
    );
    const [offsets] = await admin.fetchTopicOffsets('short');
    await admin.disconnect();
    expect(offsets).toMatchObject({ high: '60' });
    const low = Number(offsets?.low);
    expect(low).toBeGreaterThan(30);

    const consumer = kafka.consumer({ groupId: 'retention-group', maxWaitTimeInMs: 500 });
    await consumer.connect();
    await consumer.subscribe({ topic: 'short', fromBeginning: true });
    const got: number[] = [];
    await consumer.run({ eachMessage: async ({ message }) => void got.push(Number(message.offset)) });
    await waitFor('the retained messages', () => got.length >= 60 - low, 20_000);
    await consumer.disconnect();
    await b.close();
    expect(got).toEqual(Array.from({ length: 60 - low }, (_, i) => low + i));
  });

  it('rebalances a three-member group on leave and on join without losing or duplicating a message', async () => {
    const b = await broker(dir('group'));
    const kafka = client(b);
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic: 'grp', numPartitions: 6 }] });
    const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
    await producer.connect();

    const received = new Map<string, string[]>();
    const consumers = new Map<string, Consumer>();
    const fetchStarts = new Map<string, number>();
    const start = async (name: string) => {
      const consumer = client(b, name).consumer({
        groupId: 'three',
        sessionTimeout: 10_000,
        rebalanceTimeout: 15_000,
        heartbeatInterval: 300,
        maxWaitTimeInMs: 500,
      });
      consumer.on(consumer.events.FETCH_START, () => {
        fetchStarts.set(name, (fetchStarts.get(name) ?? 0) + 1);
      });
      await consumer.connect();
      await consumer.subscribe({ topic: 'grp', fromBeginning: true });
      await consumer.run({
        autoCommitThreshold: 1,
        eachMessage: async ({ message }: EachMessagePayload) => {
          const value = String(message.value);
          received.set(value, [...(received.get(value) ?? []), name]);
        },
      });
      consumers.set(name, consumer);
    };
    const stableWith = async (n: number) => {
      const { groups } = await admin.describeGroups(['three']);
      const g = groups[0];
      return g?.state === 'Stable' && g.members.length === n;
    };
    let next = 0;
    const produce = async (count: number) => {
      const messages = Array.from({ length: count }, (_, j) => ({
        key: `k${next + j}`,
        value: `v${next + j}`,
      }));
      await producer.send({ topic: 'grp', acks: -1, messages });
      next += count;
    };
    /** Sends batches of 30, at least ten, until `done`: messages keep arriving through the rebalance. */
    const produceUntil = (what: string, done: () => Promise<boolean>) => {
      let batches = 0;
      return waitFor(
        what,
        async () => {
          await produce(30);
          batches += 1;
          return batches >= 10 && (await done());
        },
        { ms: 30_000, every: 30 },
      );
    };
    const byMember = (name: string) =>
      [...received.values()].filter((owners) => owners.includes(name)).length;

    await start('a');
    await start('b');
    await start('c');
    await waitFor('three stable members', () => stableWith(3), 30_000);
    for (let i = 0; i < 10; i++) await produce(30);
    await waitFor('first 300', () => received.size >= 300, 20_000);
    expect(byMember('a') > 0 && byMember('b') > 0 && byMember('c') > 0).toBe(true);

    // One member leaves while messages keep arriving.
    await consumers.get('c')!.disconnect();
    const cBefore = byMember('c');
    await produceUntil('two stable members while sending', () => stableWith(2));
    await waitFor('every message sent after the leave', () => received.size >= next, 30_000);
    expect(byMember('c')).toBe(cBefore);
    await waitFor('two stable members', () => stableWith(2), 30_000);

    // One member joins while messages keep arriving.
    await start('d');
    await produceUntil('three stable members while sending', () => stableWith(3));
    await waitFor('three stable members again', () => stableWith(3), 30_000);
    await produce(300);
    await waitFor('every message', () => received.size >= next, 30_000);
    await waitFor('the joined member to receive messages', () => byMember('d') > 0, 20_000);
    expect(byMember('d')).toBeGreaterThan(0);
    // A duplicate would come with a later fetch: each member starts its next fetch only once the
    // batches of the one before are processed, so two more fetches each show whatever was still coming.
    const live = ['a', 'b', 'd'];
    const fetched = new Map(live.map((n) => [n, fetchStarts.get(n) ?? 0]));
    await waitFor(
      'two more fetches by every member',
      () => live.every((n) => (fetchStarts.get(n) ?? 0) >= fetched.get(n)! + 2),
      20_000,
    );

    for (const [name, c] of consumers) if (name !== 'c') await c.disconnect();
    await producer.disconnect();
    await admin.disconnect();
    await b.close();

    expect(received.size).toBe(next);
    const duplicated = [...received].filter(([, owners]) => owners.length > 1);
    expect(duplicated).toEqual([]);
  }, 120_000);
});
