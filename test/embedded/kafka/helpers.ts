import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Kafka, type LogEntry, logLevel } from 'kafkajs';
import { type BrokerOptions, type RunningBroker, startBroker } from '../../../src/embedded/kafka/broker.ts';

export function tempDir(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), `payrecon-${prefix}-`));
}

export async function broker(dataDir: string, extra: Partial<BrokerOptions> = {}): Promise<RunningBroker> {
  return startBroker({ host: '127.0.0.1', port: 0, dataDir, ...extra });
}

/** A kafkajs client of `b`; `onLog` sees the client's warnings and errors (none are printed). */
export function client(b: { port: number }, clientId = 'test', onLog?: (entry: LogEntry) => void): Kafka {
  return new Kafka({
    clientId,
    brokers: [`127.0.0.1:${b.port}`],
    logLevel: onLog ? logLevel.WARN : logLevel.NOTHING,
    ...(onLog ? { logCreator: () => onLog } : {}),
    retry: { initialRetryTime: 100, retries: 8 },
  });
}
