/**
 * Bootstrap of the CLI commands that publish (`payrecon intent record`, `payrecon backfill ...`):
 * config, an acknowledged Kafka publisher and the registered schemas; one line on stderr for an error.
 */
import { describeFailure } from '../cli-errors.ts';
import { type Config, loadConfig } from '../config.ts';
import { AppError } from '../domain/errors.ts';
import { runningEndpoints } from '../endpoints.ts';
import { connectAdmin } from '../events/connect.ts';
import { createKafka, createPublisher, PLAINTEXT, type Publisher } from '../events/kafka.ts';
import { createRegistryClient, registerSchemas } from '../events/serde.ts';
import { logger } from '../logger.ts';

export interface Connected {
  config: Config;
  /** DATABASE_URL, else the running `payrecon up`'s database, else null. */
  databaseUrl: string | null;
  /** The running `payrecon up`'s sandbox (`endpoints.json`: api, card api, control), else null. */
  sandbox: Readonly<Record<string, string>> | null;
  publisher: Publisher;
  close(): Promise<void>;
}

/**
 * Config, an acknowledged Kafka publisher and the registered schemas, for the CLI commands that
 * publish. Each address from the environment (KAFKA_BROKERS, SCHEMA_REGISTRY_URL), else from the running
 * `payrecon up` (`<data dir>/endpoints.json`); these commands start no embedded broker or registry, so
 * a missing one fails with one line.
 */
export async function connectFromConfig(clientId = 'payrecon-cli'): Promise<Connected> {
  const config = loadConfig();
  const running = runningEndpoints(config.dataDir, (line) => process.stderr.write(`payrecon: ${line}\n`));
  const brokers = config.kafka.brokers ?? running?.brokers ?? null;
  const registryUrl = config.schemaRegistry.url ?? running?.registryUrl ?? null;
  if (brokers === null) {
    throw new AppError('CONFIG_INVALID', 'KAFKA_BROKERS: must be set for this command (host:port,...)');
  }
  if (registryUrl === null) {
    throw new AppError(
      'CONFIG_INVALID',
      'SCHEMA_REGISTRY_URL: must be set for this command (http://host:port)',
    );
  }
  const serde = await registerSchemas(
    // The running instance's embedded registry and broker are plaintext on 127.0.0.1: the configured
    // security settings apply to configured services only.
    config.schemaRegistry.url === null
      ? createRegistryClient({ url: registryUrl, username: null, password: null, caFile: null })
      : createRegistryClient({ ...config.schemaRegistry, url: registryUrl }),
  );
  const security = config.kafka.brokers === null ? PLAINTEXT : config.kafka.security;
  const kafka = createKafka({
    brokers: [...brokers],
    clientId: `${config.kafka.clientId}-${clientId}`,
    security,
    logger,
  });
  // Credentials and certificates checked first: a refusal is one line naming the variable.
  await (await connectAdmin(kafka, brokers, security)).disconnect();
  const publisher = await createPublisher(kafka, serde);
  return {
    config,
    databaseUrl: config.database.url ?? running?.databaseUrl ?? null,
    sandbox: running?.sandbox ?? null,
    publisher,
    close: () => publisher.disconnect(),
  };
}

/** Runs a CLI action: an AppError prints as one line on stderr and exits 1. */
export async function runCliAction(action: () => Promise<void>): Promise<void> {
  try {
    await action();
  } catch (err) {
    // The one error path's line (src/cli-errors.ts); a bad input file is not a usage error: exit 1.
    process.stderr.write(`payrecon: ${describeFailure(err).message}\n`);
    process.exitCode = 1;
  }
}
