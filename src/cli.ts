/**
 * The one `payrecon` command. Each sub-command's action lives with its area (for example
 * `src/sandbox/main.ts`); this file only declares options and wires them. It is the only file that may
 * import both the app and `src/embedded/`.
 */
import { Command } from 'commander';

export const program = new Command('payrecon')
  .description('Reconciliation pipeline for the Payment Service API v3')
  .version('0.1.0');

// Sub-commands are registered below, one block each, in the order: up, sandbox, broker, registry, db,
// ingest, poll, fetch, reconcile, relay, alerts, jobs, web, intent, backfill, report.
program
  .command('registry')
  .description('Run the embedded Confluent-compatible schema registry (Avro, durable under --data-dir)')
  .option('--host <host>', 'address to listen on', '127.0.0.1')
  .option('--port <port>', 'port to listen on (0 picks a free one and prints it)', '8081')
  .option('--data-dir <dir>', 'directory holding the registry log', '.payrecon/registry')
  .action(async (opts) => (await import('./embedded/registry/main.ts')).runRegistryCli(opts));

program
  .command('broker')
  .description('Run the embedded Kafka-protocol broker (single node, durable under --data-dir)')
  .option('--host <host>', 'address to listen on and advertise', '127.0.0.1')
  .option('--port <port>', 'port to listen on (0 picks a free one and prints it)', '9092')
  .option('--data-dir <dir>', 'directory holding topics, logs and committed offsets', '.payrecon/broker')
  .option('--partitions <n>', 'partitions of auto-created topics', '1')
  .option('--retention-ms <ms>', 'delete segments older than this (-1 keeps all)')
  .option('--retention-bytes <bytes>', 'per-partition size limit (-1 keeps all)')
  .option('--segment-bytes <bytes>', 'segment roll size')
  .action(async (opts) => (await import('./embedded/kafka/main.ts')).runBrokerCli(opts));

// <commands>

await program.parseAsync(process.argv);
