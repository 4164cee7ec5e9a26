/**
 * `payrecon broker`: runs the embedded broker in the foreground until SIGINT/SIGTERM. With `--port 0`
 * the chosen port is printed on stdout as `listening 127.0.0.1:PORT` so a parent process can read it.
 */
import { readFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { startBroker } from './broker.ts';
import { SaslUsers } from './sasl.ts';

export interface BrokerCliOptions {
  readonly host: string;
  readonly port: string;
  readonly dataDir: string;
  readonly partitions?: string;
  readonly retentionMs?: string;
  readonly retentionBytes?: string;
  readonly segmentBytes?: string;
  /** When set, logs event-loop delay and memory every this many milliseconds. */
  readonly statsMs?: string;
  /** JSON file of user name to password: SASL PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 required. */
  readonly saslUsers?: string;
  /** PEM certificate (chain) and key: the port serves TLS. */
  readonly tlsCert?: string;
  readonly tlsKey?: string;
  /** PEM CA: clients must present a certificate it signed (mutual TLS). */
  readonly tlsClientCa?: string;
}

function readOption(file: string, name: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(
      `--${name}: must name a readable file (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
    );
  }
}

/** The security options of `payrecon broker`, read and checked before the broker starts. */
export function securityOptions(
  opts: Pick<BrokerCliOptions, 'saslUsers' | 'tlsCert' | 'tlsKey' | 'tlsClientCa'>,
): {
  sasl?: SaslUsers;
  tls?: { cert: string; key: string; clientCa?: string };
} {
  const out: { sasl?: SaslUsers; tls?: { cert: string; key: string; clientCa?: string } } = {};
  if (opts.saslUsers !== undefined) {
    try {
      out.sasl = SaslUsers.parse(readOption(opts.saslUsers, 'sasl-users'));
    } catch (err) {
      const message = (err as Error).message;
      throw new Error(message.startsWith('--') ? message : `--sasl-users: ${message}`);
    }
  }
  if ((opts.tlsCert === undefined) !== (opts.tlsKey === undefined)) {
    throw new Error('--tls-cert and --tls-key: must be given together');
  }
  if (opts.tlsClientCa !== undefined && opts.tlsCert === undefined) {
    throw new Error('--tls-client-ca: needs --tls-cert and --tls-key');
  }
  if (opts.tlsCert !== undefined && opts.tlsKey !== undefined) {
    out.tls = {
      cert: readOption(opts.tlsCert, 'tls-cert'),
      key: readOption(opts.tlsKey, 'tls-key'),
      ...(opts.tlsClientCa === undefined ? {} : { clientCa: readOption(opts.tlsClientCa, 'tls-client-ca') }),
    };
  }
  return out;
}

function int(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n)) throw new Error(`--${name} must be an integer, got ${value}`);
  return n;
}

export async function runBrokerCli(opts: BrokerCliOptions): Promise<void> {
  const broker = await startBroker({
    host: opts.host,
    port: int(opts.port, 'port') ?? 9092,
    dataDir: opts.dataDir,
    defaultPartitions: int(opts.partitions, 'partitions'),
    retentionMs: int(opts.retentionMs, 'retention-ms'),
    retentionBytes: int(opts.retentionBytes, 'retention-bytes'),
    segmentBytes: int(opts.segmentBytes, 'segment-bytes'),
    ...securityOptions(opts),
    log: (level, msg, fields) => {
      process.stderr.write(`${JSON.stringify({ level, time: new Date().toISOString(), msg, ...fields })}\n`);
    },
  });
  process.stdout.write(`listening ${broker.host}:${broker.port}\n`);
  const statsMs = int(opts.statsMs, 'stats-ms');
  if (statsMs && statsMs > 0) {
    const delay = monitorEventLoopDelay({ resolution: 5 });
    delay.enable();
    setInterval(() => {
      const mem = process.memoryUsage();
      process.stderr.write(
        `${JSON.stringify({
          level: 'info',
          time: new Date().toISOString(),
          msg: 'broker stats',
          eventLoopDelayP99Ms: delay.percentile(99) / 1e6,
          eventLoopDelayMaxMs: delay.max / 1e6,
          rssBytes: mem.rss,
          heapUsedBytes: mem.heapUsed,
          externalBytes: mem.external,
        })}\n`,
      );
      delay.reset();
    }, statsMs).unref();
  }
  const stop = () => {
    broker.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
