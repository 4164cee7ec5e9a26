/**
 * Bootstrap of the CLI commands that publish (`payrecon intent record`, `payrecon backfill ...`):
 * config, an acknowledged Kafka publisher and the registered schemas; one line on stderr for an error.
 */
import { describeFailure } from '../cli-errors.ts';
import { type Config, loadConfig } from '../config.ts';
import { AppError } from '../domain/errors.ts';
import { createKafka, createPublisher, type Publisher } from '../events/kafka.ts';
import { createRegistryClient, registerSchemas } from '../events/serde.ts';
import { logger } from '../logger.ts';

export interface Connected {
  config: Config;
  publisher: Publisher;
  close(): Promise<void>;
}

/**
 * Config, an acknowledged Kafka publisher and the registered schemas, for the CLI commands that
 * publish. KAFKA_BROKERS and SCHEMA_REGISTRY_URL must be set (these commands do not start the
 * embedded ones); a missing one fails with one line.
 */
export async function connectFromConfig(clientId = 'payrecon-cli'): Promise<Connected> {
  const config = loadConfig();
  if (config.kafka.brokers === null) {
    throw new AppError('CONFIG_INVALID', 'KAFKA_BROKERS: must be set for this command (host:port,...)');
  }
  if (config.schemaRegistry.url === null) {
    throw new AppError(
      'CONFIG_INVALID',
      'SCHEMA_REGISTRY_URL: must be set for this command (http://host:port)',
    );
  }
  const serde = await registerSchemas(
    createRegistryClient({ ...config.schemaRegistry, url: config.schemaRegistry.url }),
  );
  const kafka = createKafka({
    brokers: [...config.kafka.brokers],
    clientId: `${config.kafka.clientId}-${clientId}`,
    security: config.kafka.security,
    logger,
  });
  const publisher = await createPublisher(kafka, serde);
  return { config, publisher, close: () => publisher.disconnect() };
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
