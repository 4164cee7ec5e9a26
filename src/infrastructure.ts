/**
 * What every command runs on: PostgreSQL, Kafka and the schema registry, connected (or, for `payrecon
 * up`, started embedded), migrated, with the topics and schemas in place, and the process's metrics.
 * The embedded services are handed in by `src/cli.ts`: the app only ever talks to them over the
 * network, exactly as to real PostgreSQL, Kafka and a Confluent registry. The commands that need only
 * the database (`web`, `report`) open the smaller `DatabaseInfrastructure`.
 */
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Admin, Kafka } from 'kafkajs';
import type { Config } from './config.ts';
import { providerOptionsFrom } from './config-rules.ts';
import { createDb, migrateToLatest, migrateWhenReady, requireCurrentSchema } from './db/connection.ts';
import { balances } from './db/read-models/balances.ts';
import { exceptionFigures, pollBacklog } from './db/read-models/metrics.ts';
import type { Db } from './db/schema.ts';
import { AppError } from './domain/errors.ts';
import {
  type BrokerCredentials,
  embeddedCredentials,
  type RegistryCredentials,
} from './embedded-credentials.ts';
import { runningEndpoints } from './endpoints.ts';
import { connectAdmin } from './events/connect.ts';
import {
  createKafka,
  createPublisher,
  ensureTopics,
  instrumentKafka,
  type KafkaSecuritySettings,
  PLAINTEXT,
  type Publisher,
} from './events/kafka.ts';
import {
  createRegistryClient,
  type RegistryClientSettings,
  registerSchemas,
  type Serde,
} from './events/serde.ts';
import { dlqTopicOf, TOPIC_NAMES } from './events/topics.ts';
import { type Logger, logger as rootLogger, setLogLevel } from './logger.ts';
import { createMetrics, type MetricSources, type Metrics } from './metrics.ts';
import type { Connected } from './producers/connect.ts';

/**
 * Starters of the embedded services, given by the CLI. The broker and the registry are handed the data
 * directory's credentials (`src/embedded-credentials.ts`) as `users` (user name to password); one that
 * asks clients for them answers `secured: true`, and payrecon's clients then present them.
 */
export interface EmbeddedStarters {
  postgres(options: { dataDir: string; logger: Logger }): Promise<{ url: string; stop(): Promise<void> }>;
  /** Absent for a single-part command: Kafka and the registry come from the environment or `up`. */
  broker?(options: {
    dataDir: string;
    users: Readonly<Record<string, string>>;
    logger: Logger;
  }): Promise<{ host: string; port: number; secured?: boolean; close(): Promise<void> }>;
  registry?(options: {
    dataDir: string;
    users: Readonly<Record<string, string>>;
  }): Promise<{ url: string; secured?: boolean; close(): Promise<void> }>;
}

type Stopper = { name: string; stop: () => Promise<unknown> };

/** Things started, stopped in reverse order. */
export class Lifecycle {
  private readonly stoppers: Stopper[] = [];
  constructor(private readonly log: Logger) {}
  add(name: string, stop: () => Promise<unknown>): void {
    this.stoppers.push({ name, stop });
  }
  async stopAll(): Promise<void> {
    while (this.stoppers.length > 0) {
      const s = this.stoppers.pop()!;
      try {
        await s.stop();
        this.log.debug({ part: s.name }, 'stopped');
      } catch (err) {
        this.log.warn({ err, part: s.name }, 'stopping failed');
      }
    }
  }
}

/** The database alone, with the process's lifecycle and metrics: what `web` and `report` run on. */
export interface DatabaseInfrastructure {
  config: Config;
  logger: Logger;
  dataDir: string;
  db: Db;
  /** The report runs' own pool, so a long workbook never takes a connection the ledger waits for. */
  reportsDb?: Db;
  lifecycle: Lifecycle;
  /** The process's metrics; under `startInfrastructure`, `kafka` reports every topic and group too. */
  metrics: Metrics;
}

export interface Infrastructure extends DatabaseInfrastructure {
  databaseUrl: string;
  kafka: Kafka;
  admin: Admin;
  brokers: string[];
  registryUrl: string;
  /**
   * The credentials of the embedded broker and registry this process started and that ask for them
   * (`payrecon up` writes them into its endpoints file), each null otherwise.
   */
  embeddedAuth: { kafka: BrokerCredentials | null; registry: RegistryCredentials | null };
  serde: Serde;
  publisher: Publisher;
}

/** The metrics of a process over the ledger's database (and, given an admin, Kafka's lag and DLQs). */
function ledgerMetrics(
  db: Db,
  config: Config,
  kafka: Pick<MetricSources, 'admin' | 'dlqTopics'> = {},
): Metrics {
  return createMetrics({
    balances: () => balances(db),
    exceptions: () => exceptionFigures(db, config.exceptions.sla),
    pollBacklog: () => pollBacklog(db),
    exceptionSlaMinutes: config.metrics.exceptionSlaMinutes,
    ...kafka,
  });
}

/**
 * TLS and SASL settings are for a configured Kafka; the embedded broker (this process's or a running
 * `payrecon up`'s) is plaintext on 127.0.0.1, with the SCRAM credentials it was started with, if any.
 */
function kafkaSecurity(config: Config, embedded: BrokerCredentials | null): KafkaSecuritySettings {
  if (config.kafka.brokers) return config.kafka.security;
  return embedded ? { ...PLAINTEXT, sasl: { ...embedded } } : PLAINTEXT;
}

/** The registry's settings are for a configured registry; the embedded one has its own credentials. */
function registrySettings(
  config: Config,
  url: string,
  embedded: RegistryCredentials | null,
): RegistryClientSettings {
  return config.schemaRegistry.url
    ? { ...config.schemaRegistry, url }
    : { url, username: embedded?.username ?? null, password: embedded?.password ?? null, caFile: null };
}

/**
 * Config, an acknowledged Kafka publisher and the registered schemas, for the commands that only publish
 * (`payrecon intent record`, `payrecon backfill ...`). Each address from the environment, else from the
 * running `payrecon up`; these commands start nothing embedded, so a missing one fails with one line.
 */
export async function connectPublisher(config: Config, clientId: string): Promise<Connected> {
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
    createRegistryClient(registrySettings(config, registryUrl, running?.registryAuth ?? null)),
  );
  const security = kafkaSecurity(config, running?.kafkaSasl ?? null);
  const kafka = createKafka({
    brokers: [...brokers],
    clientId: `${config.kafka.clientId}-${clientId}`,
    security,
    logger: rootLogger,
  });
  // Credentials and certificates checked first: a refusal is one line naming the variable.
  await (await connectAdmin(kafka, brokers, security)).disconnect();
  const publisher = await createPublisher(kafka, serde);
  return {
    config,
    databaseUrl: config.database.url ?? running?.databaseUrl ?? null,
    sandbox: running?.sandbox ?? null,
    publisher,
    providerOptions: providerOptionsFrom(config),
    close: () => publisher.disconnect(),
  };
}

/** Connects (or starts) PostgreSQL, Kafka and the registry, migrates, creates topics, registers schemas. */
export async function startInfrastructure(
  config: Config,
  embedded: EmbeddedStarters | null,
  options: {
    /** `payrecon up` itself: refuses a data directory a live `up` already uses. */
    up?: boolean;
    /** Told about a stale endpoints file or lock (default: a line on stderr). */
    notice?: (line: string) => void;
  } = {},
): Promise<Infrastructure> {
  // Modules that log through the root logger follow the configured level too.
  setLogLevel(config.logLevel);
  const logger = rootLogger;
  const log = logger.child({ module: 'up' });
  const lifecycle = new Lifecycle(log);
  const dataDir = resolve(config.dataDir);
  mkdirSync(dataDir, { recursive: true });
  const notice = options.notice ?? ((line: string) => process.stderr.write(`payrecon: ${line}\n`));
  const missing = (variable: string) =>
    new AppError(
      'CONFIG_INVALID',
      `${variable}: must be set for this command (or start \`payrecon up\` first, whose endpoints it finds)`,
    );
  // Each address from the environment, then the running `payrecon up`, then (if given) embedded.
  const live = runningEndpoints(dataDir, notice);
  if (live && options.up) {
    throw new AppError(
      'CONFLICT',
      `${dataDir}: in use by a running payrecon up (pid ${live.pid}, ${live.web}); stop it first, or set PAYRECON_DATA_DIR to another directory`,
    );
  }
  const running = options.up ? null : live;
  // Every missing address is reported before anything is started.
  if (!(config.kafka.brokers ?? running?.brokers ?? embedded?.broker)) throw missing('KAFKA_BROKERS');
  if (!(config.schemaRegistry.url ?? running?.registryUrl ?? embedded?.registry)) {
    throw missing('SCHEMA_REGISTRY_URL');
  }
  try {
    let databaseUrl = config.database.url ?? running?.databaseUrl ?? null;
    if (!databaseUrl) {
      if (!embedded) throw missing('DATABASE_URL');
      const pg = await embedded.postgres({ dataDir: join(dataDir, 'pg'), logger });
      lifecycle.add('embedded postgres', () => pg.stop());
      databaseUrl = pg.url;
      log.info({ dataDir: join(dataDir, 'pg') }, 'embedded PostgreSQL started');
    }
    const db = createDb(databaseUrl, 12);
    lifecycle.add('database pool', () => db.destroy());
    const reportsDb = createDb(databaseUrl, config.reports.concurrency + 1);
    lifecycle.add('reports pool', () => reportsDb.destroy());
    const migrated = await migrateWhenReady(db, {
      onWait: (err, attempt, wait) =>
        log.warn({ err, attempt, wait }, 'database unavailable at start-up, waiting'),
    });
    for (const line of migrated) log.debug(line);
    if (migrated.length > 0) log.info({ migrations: migrated.length }, 'database migrated');

    // The credentials of a running `up` (its endpoints file), else of the embedded services started here.
    const embeddedAuth = {
      kafka: config.kafka.brokers ? null : (running?.kafkaSasl ?? null),
      registry: config.schemaRegistry.url ? null : (running?.registryAuth ?? null),
    };
    let brokers = config.kafka.brokers ? [...config.kafka.brokers] : (running?.brokers ?? null);
    if (!brokers) {
      if (!embedded?.broker) throw missing('KAFKA_BROKERS');
      const { kafka: credentials } = await embeddedCredentials(dataDir);
      const broker = await embedded.broker({
        dataDir: join(dataDir, 'kafka'),
        users: { [credentials.username]: credentials.password },
        logger: logger.child({ module: 'broker' }),
      });
      lifecycle.add('embedded broker', () => broker.close());
      brokers = [`${broker.host}:${broker.port}`];
      embeddedAuth.kafka = broker.secured ? credentials : null;
      log.info({ brokers, sasl: broker.secured === true }, 'embedded Kafka-compatible broker started');
    }
    let registryUrl = config.schemaRegistry.url ?? running?.registryUrl ?? null;
    if (!registryUrl) {
      if (!embedded?.registry) throw missing('SCHEMA_REGISTRY_URL');
      const { registry: credentials } = await embeddedCredentials(dataDir);
      const registry = await embedded.registry({
        dataDir: join(dataDir, 'registry'),
        users: { [credentials.username]: credentials.password },
      });
      lifecycle.add('embedded registry', () => registry.close());
      registryUrl = registry.url;
      embeddedAuth.registry = registry.secured ? credentials : null;
      log.info(
        { url: registryUrl, basicAuth: registry.secured === true },
        'embedded schema registry started',
      );
    }

    const security = kafkaSecurity(config, embeddedAuth.kafka);
    const bareKafka = createKafka({ brokers, clientId: config.kafka.clientId, security, logger });
    const admin = await connectAdmin(bareKafka, brokers, security);
    lifecycle.add('kafka admin', () => admin.disconnect());
    const metrics = ledgerMetrics(db, config, {
      admin,
      dlqTopics: TOPIC_NAMES.map((t) => dlqTopicOf(t)),
    });
    const kafka = instrumentKafka(bareKafka, metrics.kafkaHooks);
    const created = await ensureTopics(admin, logger, config.kafka.topics);
    if (created.length > 0) log.info({ topics: created }, 'topics created');
    const serde = await registerSchemas(
      createRegistryClient(registrySettings(config, registryUrl, embeddedAuth.registry)),
    );
    const publisher = await createPublisher(kafka, serde);
    lifecycle.add('publisher', () => publisher.disconnect());
    return {
      config,
      logger,
      dataDir,
      db,
      reportsDb,
      databaseUrl,
      kafka,
      admin,
      brokers,
      registryUrl,
      embeddedAuth,
      serde,
      publisher,
      lifecycle,
      metrics,
    };
  } catch (err) {
    await lifecycle.stopAll();
    throw err;
  }
}

/** The command's database (chosen by the CLI: option, environment, running instance, embedded). */
export type OpenDatabase = () => Promise<{ url: string; stop(): Promise<void> }>;

/**
 * The database a command chose, opened: migrated to the latest schema (`web`), or required to be at it
 * already (`report`: a report never migrates, and says which command does).
 */
export async function openDatabaseInfrastructure(
  config: Config,
  openDatabase: OpenDatabase,
  options: { schema: 'migrate' | 'require'; poolSize?: number; logger?: Logger },
): Promise<DatabaseInfrastructure> {
  setLogLevel(config.logLevel);
  const logger = options.logger ?? rootLogger;
  const lifecycle = new Lifecycle(logger);
  try {
    const database = await openDatabase();
    lifecycle.add('database', () => database.stop());
    const db = createDb(database.url, options.poolSize);
    lifecycle.add('database pool', () => db.destroy());
    const reportsDb = createDb(database.url, config.reports.concurrency + 1);
    lifecycle.add('reports pool', () => reportsDb.destroy());
    if (options.schema === 'migrate') await migrateToLatest(db);
    else await requireCurrentSchema(db);
    return {
      config,
      logger,
      dataDir: resolve(config.dataDir),
      db,
      reportsDb,
      lifecycle,
      metrics: ledgerMetrics(db, config),
    };
  } catch (err) {
    await lifecycle.stopAll();
    throw err;
  }
}
