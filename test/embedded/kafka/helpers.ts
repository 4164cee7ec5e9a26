import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import { type BrokerOptions, type RunningBroker, startBroker } from '../../../src/embedded/kafka/broker.ts';

export function tempDir(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), `payrecon-${prefix}-`));
}

export async function broker(dataDir: string, extra: Partial<BrokerOptions> = {}): Promise<RunningBroker> {
  return startBroker({ host: '127.0.0.1', port: 0, dataDir, ...extra });
}

export function client(b: { port: number }, clientId = 'test'): Kafka {
  return new Kafka({
    clientId,
    brokers: [`127.0.0.1:${b.port}`],
    logLevel: logLevel.NOTHING,
    retry: { initialRetryTime: 100, retries: 8 },
  });
}

/** Polls `check` until it returns true or `ms` elapses. */
export async function waitFor(
  check: () => boolean | Promise<boolean>,
  ms = 20_000,
  what = 'condition',
): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}
