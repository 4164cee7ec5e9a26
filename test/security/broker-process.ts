/**
 * The embedded broker in a process of its own, for the attack tests to measure its memory alone.
 * Options come as JSON in the first argument (`users`: SASL users by name, password); it sends
 * `{ port }` once listening, each log line as `{ log }`, answers `memory` with its resident set now
 * and at its peak, and `close` by stopping the broker and exiting.
 */
import { startBroker } from '../../src/embedded/kafka/broker.ts';
import { SaslUsers } from '../../src/embedded/kafka/sasl.ts';

const send = (message: unknown) => process.send?.(message);
const { users, ...options } = JSON.parse(process.argv[2] ?? '{}') as {
  users?: Record<string, string>;
  dataDir: string;
};
const broker = await startBroker({
  host: '127.0.0.1',
  port: 0,
  ...options,
  ...(users ? { sasl: new SaslUsers(users) } : {}),
  log: (level, msg, fields) => send({ log: { level, msg, ...fields } }),
});
process.on('message', (message) => {
  if (message === 'memory') {
    const { rss, heapUsed } = process.memoryUsage();
    send({ memory: { rss, heapUsed, peakRss: process.resourceUsage().maxRSS * 1024 } });
  } else if (message === 'close') {
    broker.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  }
});
send({ port: broker.port });
