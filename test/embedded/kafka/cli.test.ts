import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../helpers/wait.ts';
import { client, tempDir } from './helpers.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const children: ChildProcess[] = [];
const dataDir = tempDir('cli');
const crashDir = tempDir('cli-crash');
afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  fs.rmSync(dataDir, { recursive: true, force: true });
  fs.rmSync(crashDir, { recursive: true, force: true });
});

async function runBroker(port = 0, dir = dataDir): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(
    process.execPath,
    [
      path.join(root, 'bin/payrecon.mjs'),
      'broker',
      '--port',
      String(port),
      '--data-dir',
      dir,
      '--partitions',
      '2',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.push(child);
  let out = '';
  child.stdout!.on('data', (c: Buffer) => {
    out += c.toString();
  });
  await waitFor('the broker to print its port', () => /listening 127\.0\.0\.1:\d+\n/.test(out), 30_000);
  return { child, port: Number(/:(\d+)\n/.exec(out)![1]) };
}

const exited = (child: ChildProcess) =>
  new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));

describe('payrecon broker', () => {
  it('prints the port it chose with --port 0, serves kafkajs, stops on SIGTERM and keeps its data', async () => {
    const first = await runBroker();
    expect(first.port).toBeGreaterThan(0);
    const kafka = client(first);
    const producer = kafka.producer();
    await producer.connect();
    await producer.send({ topic: 'cli-topic', messages: [{ key: 'k', value: 'kept' }] });
    await producer.disconnect();
    const admin = kafka.admin();
    await admin.connect();
    const meta = await admin.fetchTopicMetadata({ topics: ['cli-topic'] });
    expect(meta.topics[0]?.partitions).toHaveLength(2);
    await admin.disconnect();
    const code = exited(first.child);
    first.child.kill('SIGTERM');
    expect(await code).toBe(0);

    const second = await runBroker();
    const consumer = client(second).consumer({ groupId: 'cli-group', maxWaitTimeInMs: 500 });
    await consumer.connect();
    await consumer.subscribe({ topic: 'cli-topic', fromBeginning: true });
    const got: string[] = [];
    await consumer.run({ eachMessage: async ({ message }) => void got.push(String(message.value)) });
    await waitFor('the message from before the restart', () => got.length >= 1, 20_000);
    await consumer.disconnect();
    expect(got).toEqual(['kept']);
    const code2 = exited(second.child);
    second.child.kill('SIGTERM');
    expect(await code2).toBe(0);
  }, 90_000);

  it('keeps every acknowledged message and committed offset when the broker process is killed (SIGKILL)', async () => {
    const first = await runBroker(0, crashDir);
    const kafka = client(first);
    const producer = kafka.producer({ retry: { retries: 0 } });
    await producer.connect();
    const acked: string[] = [];
    let stop = false;
    const loop = (async () => {
      for (let i = 0; !stop; i++) {
        try {
          await producer.send({
            topic: 'crash',
            acks: -1,
            messages: [{ key: String(i % 5), value: `c${i}` }],
          });
          acked.push(`c${i}`);
        } catch {
          stop = true;
        }
      }
    })();
    await waitFor('300 acknowledged messages', () => acked.length >= 300, 20_000);
    const admin = kafka.admin();
    await admin.connect();
    await admin.setOffsets({
      groupId: 'crash-group',
      topic: 'crash',
      partitions: [{ partition: 0, offset: '7' }],
    });
    await admin.disconnect();
    const code = exited(first.child);
    first.child.kill('SIGKILL');
    await code;
    stop = true;
    await loop;
    await producer.disconnect().catch(() => {});

    const second = await runBroker(0, crashDir);
    const admin2 = client(second).admin();
    await admin2.connect();
    const committed = await admin2.fetchOffsets({ groupId: 'crash-group', topics: ['crash'] });
    expect(committed[0]?.partitions.find((p) => p.partition === 0)?.offset).toBe('7');
    await admin2.disconnect();
    const consumer = client(second).consumer({ groupId: 'crash-check', maxWaitTimeInMs: 500 });
    await consumer.connect();
    await consumer.subscribe({ topic: 'crash', fromBeginning: true });
    const seen = new Set<string>();
    await consumer.run({ eachMessage: async ({ message }) => void seen.add(String(message.value)) });
    await waitFor(
      'every acknowledged message after the crash',
      () => acked.every((v) => seen.has(v)),
      20_000,
    );
    await consumer.disconnect();
    second.child.kill('SIGTERM');
    expect(acked.filter((v) => !seen.has(v))).toEqual([]);
  }, 90_000);
});
