import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningBroker } from '../../../src/embedded/kafka/broker.ts';
import { broker, client, tempDir } from './helpers.ts';

const KCAT = process.env.KCAT ?? '/usr/bin/kcat';
const hasKcat = fs.existsSync(KCAT);
const required = process.env.PAYRECON_REQUIRE_TOOLS === '1';
if (!hasKcat && !required) {
  console.warn(`kcat tests skipped: ${KCAT} not found (install it with: sudo apt-get install kcat)`);
}

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

describe.skipIf(!hasKcat && !required)('embedded broker with kcat (librdkafka)', () => {
  let b: RunningBroker;
  let dir: string;
  let brokerAddr: string;

  beforeAll(async () => {
    if (!hasKcat)
      throw new Error(`PAYRECON_REQUIRE_TOOLS=1 but ${KCAT} is missing: sudo apt-get install kcat`);
    dir = tempDir('kcat');
    b = await broker(dir, { defaultPartitions: 3 });
    brokerAddr = `127.0.0.1:${b.port}`;
  });
  afterAll(async () => {
    await b?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  const keyOf = (i: number) => `key-${i % 37}`;
  const lines = Array.from({ length: 1000 }, (_, i) => `${keyOf(i)}\t${`value-${i}`}`);

  it('produces 1,000 keyed messages and consumes them back', async () => {
    const produced = await kcat(['-b', brokerAddr, '-P', '-t', 'kc', '-K', '\t'], `${lines.join('\n')}\n`);
    expect(produced.code, produced.stderr).toBe(0);

    const consumed = await kcat([
      '-b',
      brokerAddr,
      '-X',
      'check.crcs=true',
      '-C',
      '-t',
      'kc',
      '-o',
      'beginning',
      '-e',
      '-q',
      '-f',
      '%k\t%s\t%p\t%o\n',
    ]);
    expect(consumed.code, consumed.stderr).toBe(0);
    const rows = consumed.stdout
      .trim()
      .split('\n')
      .map((l) => {
        const [key, value, partition, offset] = l.split('\t');
        return { key: key!, value: value!, partition: Number(partition), offset: Number(offset) };
      });
    expect(rows).toHaveLength(1000);
    expect(rows.map((r) => `${r.key}\t${r.value}`).sort()).toEqual([...lines].sort());
    // Every key lives on exactly one partition, and offsets in each partition are 0..n-1 in produce order.
    const partitionOfKey = new Map<string, number>();
    for (const r of rows) {
      expect(partitionOfKey.get(r.key) ?? r.partition).toBe(r.partition);
      partitionOfKey.set(r.key, r.partition);
    }
    expect(new Set(rows.map((r) => r.partition)).size).toBeGreaterThan(1);
    for (const p of [0, 1, 2]) {
      const inP = rows.filter((r) => r.partition === p);
      expect(inP.map((r) => r.offset)).toEqual(inP.map((_, i) => i));
      const order = inP.map((r) => Number(r.value.slice('value-'.length)));
      expect(order).toEqual([...order].sort((x, y) => x - y));
    }

    // kafkajs reads what librdkafka wrote.
    const admin = client(b).admin();
    await admin.connect();
    const offsets = await admin.fetchTopicOffsets('kc');
    await admin.disconnect();
    expect(offsets.reduce((n, o) => n + Number(o.high), 0)).toBe(1000);
  });

  it.each(['snappy', 'lz4', 'zstd', 'gzip'])(
    'passes %s-compressed batches through verbatim',
    async (codec) => {
      const topic = `codec-${codec}`;
      const values = Array.from({ length: 300 }, (_, i) => `${codec} record ${i} ${'y'.repeat(50)}`);
      const produced = await kcat(
        ['-b', brokerAddr, '-P', '-t', topic, '-z', codec],
        `${values.join('\n')}\n`,
      );
      expect(produced.code, produced.stderr).toBe(0);
      const consumed = await kcat([
        '-b',
        brokerAddr,
        '-X',
        'check.crcs=true',
        '-C',
        '-t',
        topic,
        '-o',
        'beginning',
        '-e',
        '-q',
        '-f',
        '%s\n',
      ]);
      expect(consumed.code, consumed.stderr).toBe(0);
      expect(consumed.stdout.trim().split('\n').sort()).toEqual([...values].sort());
    },
  );

  it('consumes as a group member, commits offsets, and resumes from them', async () => {
    const group = ['-b', brokerAddr, '-G', 'kcat-group', '-X', 'auto.offset.reset=earliest', '-e', '-q'];
    const first = await kcat([...group, '-f', '%s\n', 'kc']);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout.trim().split('\n').sort()).toEqual(lines.map((l) => l.split('\t')[1]).sort());

    const admin = client(b).admin();
    await admin.connect();
    const committed = await admin.fetchOffsets({ groupId: 'kcat-group', topics: ['kc'] });
    const ends = await admin.fetchTopicOffsets('kc');
    const byPartition = new Map(ends.map((e) => [e.partition, e.high]));
    for (const p of committed[0]!.partitions) expect(p.offset).toBe(byPartition.get(p.partition));

    const producer = client(b).producer();
    await producer.connect();
    await producer.send({
      topic: 'kc',
      messages: Array.from({ length: 12 }, (_, i) => ({ key: `late-${i}`, value: `late-${i}` })),
    });
    await producer.disconnect();
    await admin.disconnect();

    const second = await kcat([...group, '-f', '%s\n', 'kc']);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout.trim().split('\n').sort()).toEqual(
      Array.from({ length: 12 }, (_, i) => `late-${i}`).sort(),
    );
  });
});
