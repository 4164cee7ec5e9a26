import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { client, tempDir, waitFor } from './helpers.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const children: ChildProcess[] = [];
const dataDir = tempDir('cli');
afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  fs.rmSync(dataDir, { recursive: true, force: true });
});

async function runBroker(): Promise<{ child: ChildProcess; port: number }> {
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
      '2',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.push(child);
  let out = '';
  child.stdout!.on('data', (c: Buffer) => {
    out += c.toString();
  });
  await waitFor(() => /listening 127\.0\.0\.1:\d+\n/.test(out), 30_000, 'the broker to print its port');
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
    await waitFor(() => got.length >= 1, 20_000, 'the message from before the restart');
    await consumer.disconnect();
    expect(got).toEqual(['kept']);
    const code2 = exited(second.child);
    second.child.kill('SIGTERM');
    expect(await code2).toBe(0);
  }, 90_000);
});
