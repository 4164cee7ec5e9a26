/**
 * How the parts become running processes. `startPipeline` starts every part of payrecon in one process
 * (`payrecon up`); the production sub-commands (`ingest`, `fetch`, `reconcile`, `relay`, `alerts`,
 * `jobs`, `web`) start one part each through the same functions. The embedded PostgreSQL, broker and
 * registry are handed in by `src/cli.ts` (the app never imports `src/embedded/`): the pipeline only
 * ever talks to them over the network, exactly as to real PostgreSQL, Kafka and a Confluent registry.
 */
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Admin, Kafka } from 'kafkajs';
import { API_PREFIX, apiRoutes } from './api/app.ts';
import type { Config, ProviderAccount } from './config.ts';
import { type AlertSinkConfig, startAlertConsumer } from './consumers/alert-dispatcher.ts';
import { startReconciler } from './consumers/reconciler.ts';
import { runStatusFetcher } from './consumers/status-fetcher.ts';
import { takeBalanceSnapshots } from './db/balance-snapshots.ts';
import { createDb, migrateWhenReady, pingDatabase } from './db/connection.ts';
import { sweepExceptions } from './db/exceptions/sweep.ts';
import { databaseCreatedAt, lastSucceededStart } from './db/job-runs.ts';
import { exceptionFigures, pollBacklog } from './db/metrics-queries.ts';
import { enqueueAlerts } from './db/outbox.ts';
import { balances, scheduleLateRejectionChecks } from './db/queries.ts';
import { merchantAccounts } from './db/report-queries.ts';
import type { Db } from './db/schema.ts';
import { withLedgerTransaction } from './db/transaction.ts';
import { verifyLedger } from './db/verify.ts';
import { TokenVerifier } from './domain/api-tokens.ts';
import { AppError } from './domain/errors.ts';
import { DEFAULT_EXCEPTION_RULES, type ExceptionRules } from './domain/exception-rules.ts';
import { removeEndpoints, runningEndpoints, writeEndpoints } from './endpoints.ts';
import { connectAdmin } from './events/connect.ts';
import {
  createKafka,
  createPublisher,
  ensureTopics,
  instrumentKafka,
  PLAINTEXT,
  type Publisher,
} from './events/kafka.ts';
import { createRegistryClient, registerSchemas, type Serde } from './events/serde.ts';
import { dlqTopicOf, INTENT_TOPIC, TOPIC_NAMES } from './events/topics.ts';
import { buildJobCatalog } from './jobs/catalog.ts';
import { JobScheduler } from './jobs/scheduler.ts';
import { type Logger, logger as rootLogger, setLogLevel, useReadableLogs } from './logger.ts';
import { createMetrics, type Metrics } from './metrics.ts';
import { PART_INFO, PART_NAMES, type PartName } from './parts.ts';
import { intentsPlugin } from './producers/intent/http.ts';
import { startOutboxRelay } from './producers/outbox-relay.ts';
import { pollingClients, type StatusPollerDeps, startStatusPoller } from './producers/status-poller.ts';
import { webhookIngressPlugin } from './producers/webhook-ingress.ts';
import { ReportRunner } from './reports/runs.ts';
import { webRoutes } from './web/app.ts';
import { hashPassword } from './web/auth.ts';
import { opsRoutes, type ReadinessCheck, startOpsServer } from './web/ops.ts';
import { ledgerWebServices } from './web/services.ts';
import { resolveSessionSecret } from './web/session-secret.ts';

/** Starters of the embedded services, given by the CLI. */
export interface EmbeddedStarters {
  postgres(options: { dataDir: string; logger: Logger }): Promise<{ url: string; stop(): Promise<void> }>;
  /** Absent for a single-part command: Kafka and the registry come from the environment or `up`. */
  broker?(options: { dataDir: string }): Promise<{ host: string; port: number; close(): Promise<void> }>;
  registry?(options: { dataDir: string }): Promise<{ url: string; close(): Promise<void> }>;
}

/** The sandbox as `payrecon up` runs it when no provider account is configured. */
export const SANDBOX_ACCOUNT_NAME = 'sandbox';
/**
 * Web sign-ins when payrecon runs against the sandbox and no users are configured (documented): an
 * operator who works the exception queue, and two controllers, so a month close can be prepared by one
 * and approved by the other.
 */
export const SANDBOX_WEB_USERS = [
  { username: 'finance', password: 'sandbox', role: 'operator' },
  { username: 'ana', password: 'sandbox', role: 'controller' },
  { username: 'bob', password: 'sandbox', role: 'controller' },
] as const;

type Stopper = { name: string; stop: () => Promise<unknown> };

/** Things started, stopped in reverse order. */
class Lifecycle {
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

export interface Infrastructure {
  config: Config;
  logger: Logger;
  dataDir: string;
  db: Db;
  databaseUrl: string;
  kafka: Kafka;
  admin: Admin;
  brokers: string[];
  registryUrl: string;
  serde: Serde;
  publisher: Publisher;
  rules: ExceptionRules;
  lifecycle: Lifecycle;
  /** The process's metrics; `kafka` reports every topic published and consumed, and its groups' lag. */
  metrics: Metrics;
}

/**
 * Exception rules from the configuration (every deadline of PAYRECON_EXCEPTION_DEADLINES, the severities of
 * PAYRECON_EXCEPTION_SEVERITIES), on top of the defaults.
 */
export function exceptionRulesFrom(config: Config): ExceptionRules {
  const d = config.exceptions.deadlines;
  const hour = 3_600_000;
  return {
    ...DEFAULT_EXCEPTION_RULES,
    severity: { ...DEFAULT_EXCEPTION_RULES.severity, ...config.exceptions.severities },
    unknownTransactionGraceMs: d.unknownTransactionGraceMinutes * 60_000,
    missedNotificationGraceMs: d.missedNotificationGraceMinutes * 60_000,
    outcomeUnknownGraceMs: d.outcomeUnknownGraceMinutes * 60_000,
    stuck: {
      ...DEFAULT_EXCEPTION_RULES.stuck,
      depositAfterExpiryMs: d.depositExpiryGraceMinutes * 60_000,
      depositNoExpiryMs: d.depositNoExpiryHours * hour,
      cashoutPendingMs: d.cashoutPendingHours * hour,
      cashoutOnHoldMs: d.cashoutOnHoldHours * hour,
      cashoutDeliveredMs: d.cashoutDeliveredHours * hour,
      refundPendingMs: d.refundPendingHours * hour,
      refundIncorrectDetailsMs: d.refundIncorrectDetailsHours * hour,
      refundDeliveredMs: d.refundDeliveredHours * hour,
    },
    polling: {
      ...DEFAULT_EXCEPTION_RULES.polling,
      firstDelayMs: config.poller.firstDelaySeconds * 1000,
      maxDelayMs: config.poller.maxDelaySeconds * 1000,
      completedRecheckMs: config.poller.completedRecheckSeconds * 1000,
      completedRecheckScheduleMs: config.poller.completedRecheckScheduleSeconds.map((s) => s * 1000),
      lateRejectionWindowMs: d.lateRejectionWatchDays * 24 * hour,
      lateCompletionWindowMs: d.lateCompletionWatchDays * 24 * hour,
    },
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
    const migrated = await migrateWhenReady(db, {
      onWait: (err, attempt, wait) =>
        log.warn({ err, attempt, wait }, 'database unavailable at start-up, waiting'),
    });
    for (const line of migrated) log.debug(line);
    if (migrated.length > 0) log.info({ migrations: migrated.length }, 'database migrated');

    let brokers = config.kafka.brokers ? [...config.kafka.brokers] : (running?.brokers ?? null);
    if (!brokers) {
      if (!embedded?.broker) throw missing('KAFKA_BROKERS');
      const broker = await embedded.broker({ dataDir: join(dataDir, 'kafka') });
      lifecycle.add('embedded broker', () => broker.close());
      brokers = [`${broker.host}:${broker.port}`];
      log.info({ brokers }, 'embedded Kafka-compatible broker started');
    }
    let registryUrl = config.schemaRegistry.url ?? running?.registryUrl ?? null;
    if (!registryUrl) {
      if (!embedded?.registry) throw missing('SCHEMA_REGISTRY_URL');
      const registry = await embedded.registry({
        dataDir: join(dataDir, 'registry'),
      });
      lifecycle.add('embedded registry', () => registry.close());
      registryUrl = registry.url;
      log.info({ url: registryUrl }, 'embedded schema registry started');
    }

    // TLS, SASL and registry credentials are for configured services; the embedded ones are plaintext.
    const security = config.kafka.brokers ? config.kafka.security : PLAINTEXT;
    const bareKafka = createKafka({ brokers, clientId: config.kafka.clientId, security, logger });
    const admin = await connectAdmin(bareKafka, brokers, security);
    lifecycle.add('kafka admin', () => admin.disconnect());
    const sla = config.metrics.exceptionSlaMinutes;
    const metrics = createMetrics({
      balances: () => balances(db),
      exceptions: () => exceptionFigures(db, config.exceptions.sla),
      pollBacklog: () => pollBacklog(db),
      exceptionSlaMinutes: sla,
      admin,
      dlqTopics: TOPIC_NAMES.map((t) => dlqTopicOf(t)),
    });
    const kafka = instrumentKafka(bareKafka, metrics.kafkaHooks);
    const created = await ensureTopics(admin, logger, config.kafka.topics);
    if (created.length > 0) log.info({ topics: created }, 'topics created');
    const registrySettings = config.schemaRegistry.url
      ? { ...config.schemaRegistry, url: registryUrl }
      : { url: registryUrl, username: null, password: null, caFile: null };
    const serde = await registerSchemas(createRegistryClient(registrySettings));
    const publisher = await createPublisher(kafka, serde);
    lifecycle.add('publisher', () => publisher.disconnect());
    return {
      config,
      logger,
      dataDir,
      db,
      databaseUrl,
      kafka,
      admin,
      brokers,
      registryUrl,
      serde,
      publisher,
      rules: exceptionRulesFrom(config),
      lifecycle,
      metrics,
    };
  } catch (err) {
    await lifecycle.stopAll();
    throw err;
  }
}

/** Alert sinks from the configuration; the log sink is always there. */
export function alertSinksFrom(config: Config): AlertSinkConfig[] {
  const min = config.alerts.minSeverity;
  const sinks: AlertSinkConfig[] = [{ name: 'log', type: 'log', minSeverity: min }];
  if (config.alerts.webhookUrl) {
    const url = config.alerts.webhookUrl;
    // Slack incoming webhooks take {text}; anything else gets the alert as JSON.
    const type = /hooks\.slack\.com|\/slack\b/i.test(url) ? 'slack' : 'webhook';
    sinks.push({ name: type, type, url, minSeverity: min, perMinute: 30 });
  }
  return sinks;
}

export interface WebServerParts {
  accounts: readonly ProviderAccount[];
  metrics: Metrics;
  /** Mount the finance page (needs users). */
  page: boolean;
  /** Mount the webhook routes. */
  webhooks: boolean;
  /** Mount POST /intents. */
  intents: boolean;
  defaultAccount?: string | null;
  sandboxUsers?: boolean;
  /** The page's clock and session lifetime (default: the wall clock and 8 hours). */
  pageOptions?: { now?: () => Date; sessionTtlMs?: number };
}

/** Workbooks under `<data dir>/reports`, in the configured time zone and cut-off. */
export function reportRunner(infra: Infrastructure): ReportRunner {
  const { config } = infra;
  return new ReportRunner({
    db: infra.db,
    dir: join(infra.dataDir, 'reports'),
    timeZone: config.jobs.timeZone,
    cutoff: config.jobs.settlementCutoff,
    publicUrl: config.web.publicUrl,
    exceptionSla: config.exceptions.sla,
    logger: infra.logger,
  });
}

/** What `/readyz` checks: every dependency answers. */
export function readinessChecks(infra: Infrastructure): ReadinessCheck[] {
  return [
    { name: 'database', check: () => pingDatabase(infra.db) },
    { name: 'kafka', check: async () => void (await infra.admin.describeCluster()) },
    {
      name: 'schema_registry',
      check: async () => {
        const res = await fetch(`${infra.registryUrl}/subjects`);
        if (!res.ok) throw new Error(`HTTP ${res.status}`);
      },
    },
  ];
}

/** The one HTTP server: page, webhooks, health and metrics. */
export async function buildServer(infra: Infrastructure, parts: WebServerParts): Promise<FastifyInstance> {
  const { config, db, logger } = infra;
  const app = Fastify({ logger: false, trustProxy: false });
  await app.register(opsRoutes, { metrics: parts.metrics, checks: readinessChecks(infra) });
  if (parts.webhooks) {
    await app.register(
      webhookIngressPlugin({
        accounts: parts.accounts,
        publisher: infra.publisher,
        defaultAccount: parts.defaultAccount ?? null,
        logger,
        onRejected: (reason) => parts.metrics.webhookRejections.inc({ reason }),
        onAccepted: (kind) => parts.metrics.webhookRequests.inc({ kind, outcome: 'accepted' }),
      }),
    );
  }
  if (parts.intents) {
    await app.register(
      intentsPlugin({
        publisher: infra.publisher,
        tokens: new TokenVerifier(config.web.apiTokens),
        // Outside the sandbox POST /intents always needs a token with the scope intents:write.
        open: parts.sandboxUsers === true && config.web.apiTokens.length === 0,
        accounts: parts.accounts.map((a) => a.name),
        logger,
      }),
    );
  }
  if (parts.page) {
    const reports = reportRunner(infra);
    // The JSON API beside the page: it has its own bearer tokens and refuses everything without one.
    await app.register(apiRoutes, {
      prefix: API_PREFIX,
      db,
      reports,
      tokens: config.web.apiTokens,
      exceptionSla: config.exceptions.sla,
      logger: logger.child({ module: 'api' }),
    });
    let users = config.web.users.map((u) => ({
      username: u.username,
      passwordHash: u.passwordHash,
      ...(u.role ? { role: u.role } : {}),
    }));
    if (users.length === 0 && parts.sandboxUsers) {
      users = await Promise.all(
        SANDBOX_WEB_USERS.map(async (u) => ({
          username: u.username,
          passwordHash: await hashPassword(u.password),
          role: u.role,
        })),
      );
    }
    if (users.length === 0) {
      logger.warn('PAYRECON_WEB_USERS is empty: the finance page is not served');
    } else {
      await app.register(webRoutes, {
        prefix: '/',
        users,
        sessionSecret: await resolveSessionSecret(config.web.sessionSecret, infra.dataDir),
        timeZone: config.jobs.timeZone,
        services: ledgerWebServices(db, reports, config.exceptions.sla),
        logger,
        ...parts.pageOptions,
      });
    }
  }
  return app;
}

/** The status poller over every account, with the configuration's concurrency and batch size. */
export function startPoller(
  infra: Infrastructure,
  accounts: readonly ProviderAccount[],
  metrics: Metrics,
  overrides: Partial<StatusPollerDeps> = {},
  loop = true,
) {
  const { config } = infra;
  const clients = pollingClients(accounts, {
    timeoutMs: config.provider.timeoutMs,
    retries: config.provider.retries,
    onCall: (call) => metrics.providerCall(call),
  });
  const poller = startStatusPoller(
    {
      db: infra.db,
      clientFor: clients.clientFor,
      lastRetryAfterMs: clients.lastRetryAfterMs,
      publisher: infra.publisher,
      concurrency: config.poller.concurrency,
      batchSize: config.poller.batchSize,
      leaseMs: config.poller.minIntervalSeconds * 1000,
      outcomeUnknownGraceMs: infra.rules.outcomeUnknownGraceMs,
      logger: infra.logger,
      onRound: (r) => {
        if (r.published > 0) metrics.pollCalls.inc({ outcome: 'published' }, r.published);
        if (r.failed > 0) metrics.pollCalls.inc({ outcome: 'failed' }, r.failed);
      },
      ...overrides,
    },
    { loop },
  );
  return {
    pollOnce: () => poller.pollOnce(),
    async stop() {
      await poller.stop();
      await clients.close();
    },
  };
}

/** The jobs of the catalog, run by one scheduler; claims keep two instances from doubling a run. */
export function startJobs(
  infra: Infrastructure,
  options: { poll?: () => Promise<unknown>; retentionDays?: number } = {},
) {
  const { config, db, logger, rules } = infra;
  const reports = reportRunner(infra);
  const poll = options.poll;
  const jobs = buildJobCatalog({
    timeZone: config.jobs.timeZone,
    settlementCutoff: config.jobs.settlementCutoff,
    cron: {
      poll: config.jobs.cron.poll,
      'stuck-sweep': config.jobs.cron.stuckSweep,
      'late-rejection-sweep': config.jobs.cron.lateRejectionSweep,
      settlement: config.jobs.cron.settlement,
      'exception-report': config.jobs.cron.exceptionReport,
      'ledger-verify': config.jobs.cron.ledgerVerify,
    },
    reports,
    ...(options.retentionDays === undefined ? {} : { retentionDays: options.retentionDays }),
    accounts: () => merchantAccounts(db),
    ...(poll ? { schedulePolls: async () => void (await poll()) } : {}),
    sweepStuck: async (now) => {
      const lastSweepAt = await lastSucceededStart(db, 'stuck-sweep');
      await withLedgerTransaction(db, (trx) => sweepExceptions(trx, now, rules, { lastSweepAt }));
    },
    sweepLateRejections: async (now) => {
      const due = await scheduleLateRejectionChecks(db, now, rules.polling);
      if (due > 0) {
        logger.info(
          { due },
          'completed payouts and refunds, cancelled deposits made due for a late-move check',
        );
      }
      if (poll) await poll();
    },
    verifyLedger: async () => {
      // The daily balance snapshots are written first (a no-op until a new midnight is old enough); then
      // the incremental verification of the last day (the full one is `payrecon db verify`).
      await takeBalanceSnapshots(db);
      const result = await verifyLedger(db, { since: new Date(Date.now() - 25 * 3_600_000) });
      infra.metrics.verified(result.failures.length === 0);
      return { failures: result.failures };
    },
    raiseAlert: async (alert) => {
      const id = `${alert.type}:${new Date().toISOString().slice(0, 13)}`;
      await enqueueAlerts(db, [
        {
          key: `alert:${id}`,
          payload: {
            alertId: id,
            type: alert.type,
            severity: alert.severity === 'warning' ? 'medium' : alert.severity,
            account: '*',
            raisedAt: new Date().toISOString(),
            details: { message: alert.message, ...(alert.details ?? {}) },
          },
        },
      ]);
    },
    logger,
  });
  infra.metrics.knownJobs(jobs.map((j) => j.name));
  const scheduler = new JobScheduler({
    db,
    jobs,
    logger,
    onRun: (job, outcome, seconds) => infra.metrics.jobRun(job, outcome, seconds),
    // A fresh database catches up no runs from before it existed.
    notBefore: () => databaseCreatedAt(db),
  });
  return scheduler;
}

export interface UpOptions {
  embedded: EmbeddedStarters;
  /** Starts the sandbox when no provider account is configured (returns its accounts and a stop). */
  sandbox?: (options: { webBaseUrl: string; logger: Logger }) => Promise<SandboxRun>;
  /** Print a line for a person (URLs). */
  print?: (line: string) => void;
  /** Poller settings beyond the configuration (tests use short idle waits). */
  pollerOverrides?: Partial<StatusPollerDeps>;
  /** Exception and polling rules beyond the configuration (tests use short polling delays). */
  rules?: Partial<ExceptionRules>;
}

/** The sandbox as `payrecon up` runs it. */
export interface SandboxRun {
  accounts: ProviderAccount[];
  urls: Record<string, string>;
  /** Delivers notifications to the pipeline listening at `baseUrl` (known once it listens). */
  deliverTo(baseUrl: string): Promise<void>;
  /** Starts traffic once the pipeline is ready; intents go through `recordIntent`. */
  startTraffic(
    recordIntent: (intent: import('./domain/observation.ts').Intent) => Promise<void>,
  ): Promise<void>;
  stop(): Promise<void>;
}

export interface RunningPipeline {
  infra: Infrastructure;
  url: string;
  server: FastifyInstance;
  sandbox: SandboxRun | null;
  stop(): Promise<void>;
}

/** What a part is started with: the infrastructure and what the parts share. */
export interface PartContext {
  infra: Infrastructure;
  accounts: readonly ProviderAccount[];
  metrics: Metrics;
  /** True under `payrecon up` (every part in this process), false for a single-part command. */
  together: boolean;
  /** Parts started before this one, by name. */
  started: ReadonlyMap<PartName, RunningPart>;
  /** The account webhooks default to (the sandbox's under `up`). */
  defaultAccount: string | null;
  /** Mount the finance page on the ingest server (sign-in with the sandbox user when none configured). */
  page: boolean;
  sandboxUsers: boolean;
  pollerOverrides?: Partial<StatusPollerDeps>;
  retentionDays?: number;
}

/** A started part: how to stop it, and (for consumers) when it has joined its group. */
export interface RunningPart {
  stop(): Promise<unknown>;
  ready?: Promise<unknown>;
  /** The HTTP server, for the part that listens. */
  server?: FastifyInstance;
  url?: string;
  /** One poll round now (the poller). */
  pollOnce?: () => Promise<unknown>;
}

export interface PartDefinition {
  readonly name: PartName;
  start(context: PartContext): Promise<RunningPart>;
}

/**
 * Every part of payrecon, declared once, in the order `payrecon up` starts them: the consumers first,
 * then the producers and the server, the jobs last. Each single-part command starts one entry.
 */
const PART_STARTS: Record<PartName, PartDefinition['start']> = {
  reconcile: async ({ infra, metrics }) => {
    const reconciler = await startReconciler({
      ...infra,
      dlq: infra.publisher,
      onBatchApplied: (topic, seconds) => metrics.reconcileBatchSeconds.observe({ topic }, seconds),
      rules: infra.rules,
    });
    return { stop: () => reconciler.stop(), ready: reconciler.ready };
  },
  fetch: async ({ infra, accounts, metrics }) => {
    const { config } = infra;
    const fetcher = await runStatusFetcher({
      kafka: infra.kafka,
      serde: infra.serde,
      accounts,
      providerOptions: {
        timeoutMs: config.provider.timeoutMs,
        retries: config.provider.retries,
        onCall: (call) => metrics.providerCall(call),
      },
      concurrency: config.fetcher.concurrency,
      logger: infra.logger,
      db: infra.db,
    });
    return { stop: () => fetcher.stop(), ready: fetcher.ready };
  },
  alerts: async ({ infra, metrics }) => {
    const alerts = await startAlertConsumer({
      kafka: infra.kafka,
      serde: infra.serde,
      dlq: infra.publisher,
      db: infra.db,
      logger: infra.logger,
      onDispatched: (alerts, perSink) => metrics.alertsDispatched(alerts, perSink),
      sinks: alertSinksFrom(infra.config),
      timeoutMs: infra.config.alerts.timeoutMs,
    });
    return { stop: () => alerts.stop(), ready: alerts.ready };
  },
  relay: async ({ infra }) => {
    const relay = startOutboxRelay({ db: infra.db, publisher: infra.publisher, logger: infra.logger });
    return { stop: () => relay.stop() };
  },
  poll: async ({ infra, accounts, metrics, pollerOverrides }) => {
    const poller = startPoller(infra, accounts, metrics, pollerOverrides);
    return { stop: () => poller.stop(), pollOnce: () => poller.pollOnce() };
  },
  ingest: async ({ infra, accounts, metrics, defaultAccount, page, sandboxUsers }) => {
    const { config } = infra;
    const server = await buildServer(infra, {
      accounts,
      metrics,
      page,
      webhooks: true,
      intents: true,
      defaultAccount,
      sandboxUsers,
    });
    await server.listen({ host: config.web.host, port: config.web.port });
    const address = server.server.address();
    const port = typeof address === 'object' && address ? address.port : config.web.port;
    return { stop: () => server.close(), server, url: `http://${config.web.host}:${port}` };
  },
  jobs: async ({ infra, accounts, metrics, together, retentionDays }) => {
    // Under `up` the looping poller picks up what the jobs make due; alone, the jobs poll on their
    // schedule (and for the late-rejection watch) through a poller of their own.
    const poller = together ? null : startPoller(infra, accounts, metrics, {}, false);
    try {
      const scheduler = startJobs(infra, {
        ...(poller ? { poll: () => poller.pollOnce() } : {}),
        ...(retentionDays === undefined ? {} : { retentionDays }),
      });
      await scheduler.start();
      return {
        async stop() {
          await scheduler.stop();
          await poller?.stop();
        },
      };
    } catch (err) {
      await poller?.stop();
      throw err;
    }
  },
};

export const PART_REGISTRY: readonly PartDefinition[] = PART_NAMES.map((name) => ({
  name,
  start: PART_STARTS[name],
}));

export const PARTS = PART_NAMES;
export type Part = PartName;

/** Everything in one process: what `payrecon up` (and `npm start`) runs. */
export async function startPipeline(config: Config, options: UpOptions): Promise<RunningPipeline> {
  const infra = await startInfrastructure(config, options.embedded, { up: true });
  if (options.rules) infra.rules = { ...infra.rules, ...options.rules };
  const { logger, lifecycle } = infra;
  const log = logger.child({ module: 'up' });
  const print = options.print ?? ((line: string) => log.info(line));
  try {
    const webBaseUrl = `http://${config.web.host}:${config.web.port}`;
    let sandbox: SandboxRun | null = null;
    let accounts: readonly ProviderAccount[] = config.accounts;
    if (accounts.length === 0) {
      if (!options.sandbox) throw new Error('PAYRECON_ACCOUNTS: must list at least one provider account');
      sandbox = await options.sandbox({ webBaseUrl, logger });
      const running = sandbox;
      lifecycle.add('sandbox', () => running.stop());
      accounts = running.accounts;
    }
    // Every consumer group started below reports its lag (instrumentKafka tells the metrics).
    const metrics = infra.metrics;
    const started = new Map<PartName, RunningPart>();
    const context: PartContext = {
      infra,
      accounts,
      metrics,
      together: true,
      started,
      defaultAccount: sandbox
        ? SANDBOX_ACCOUNT_NAME
        : accounts.length === 1
          ? (accounts[0]?.name ?? null)
          : null,
      page: true,
      sandboxUsers: sandbox !== null,
      ...(options.pollerOverrides ? { pollerOverrides: options.pollerOverrides } : {}),
    };
    for (const part of PART_REGISTRY) {
      const running = await part.start(context);
      started.set(part.name, running);
      lifecycle.add(part.name, () => running.stop());
      // Notifications go to the pipeline's own webhook routes once they listen.
      if (running.url && sandbox) await sandbox.deliverTo(running.url);
    }
    const ingest = started.get('ingest');
    if (!ingest?.server || !ingest.url) throw new Error('ingest: the server did not start');
    const url = ingest.url;

    await Promise.all([...started.values()].map((p) => p.ready));
    if (sandbox) {
      await sandbox.startTraffic(async (intent) => {
        await infra.publisher.publish(INTENT_TOPIC, [{ value: intent }]);
      });
    }

    print(`payrecon is up: ${url}/ (finance page)`);
    print(`  webhooks  ${url}/webhooks/<account>/{deposits,refunds,cashouts}`);
    print(
      `  api       ${url}${API_PREFIX} (${url}${API_PREFIX}/openapi.json; tokens: payrecon api token create)`,
    );
    print(`  health    ${url}/healthz  ${url}/readyz`);
    print(`  metrics   ${url}/metrics`);
    print(`  database  ${redactUrl(infra.databaseUrl)}`);
    print(`  kafka     ${infra.brokers.join(',')}`);
    print(`  registry  ${infra.registryUrl}`);
    if (sandbox) {
      for (const [name, u] of Object.entries(sandbox.urls)) print(`  sandbox   ${name} ${u}`);
      if (config.web.users.length === 0) {
        const [operator, ...controllers] = SANDBOX_WEB_USERS;
        print(
          `  sign in as ${operator.username} / ${operator.password} (${operator.role}), or ${controllers.map((u) => `${u.username} / ${u.password}`).join(' and ')} (controllers: one prepares a month close, the other approves; sandbox only, see README)`,
        );
      }
    }
    return {
      infra,
      url,
      server: ingest.server,
      sandbox,
      stop: () => lifecycle.stopAll(),
    };
  } catch (err) {
    await lifecycle.stopAll();
    throw err;
  }
}

/** A database URL without its password, for printing. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable URL)';
  }
}

export interface SandboxForUpOptions {
  webBaseUrl: string;
  logger: Logger;
  /** Traffic client retries (default 1: traffic must not retry into the sandbox's own faults forever). */
  clientRetries?: number;
  /** Window in which a creation with an unknown outcome is sent again (default: recordingClient's). */
  settleWindowMs?: number;
  /** Sandbox seconds per real second (default 60: a minute of provider time per second). */
  speed?: number;
  /** Creations per second (default 2). */
  trafficRate?: number;
  seed?: number;
  /** Fault settings of the sandbox (see src/sandbox/faults.ts). */
  faults?: unknown;
  /** Automatic-mode settings (see src/sandbox/automatic.ts); enabled unless said otherwise. */
  auto?: Record<string, unknown>;
  /** The sandbox's clock (tests pass a manual one); default: real time times `speed`. */
  clock?: import('./sandbox/clock.ts').Clock;
  /** Keep the sandbox's state here across restarts (`payrecon up`: `<PAYRECON_DATA_DIR>/sandbox`). */
  dataDir?: string;
}

/**
 * The sandbox as `payrecon up` runs it: the default account (`sandbox`), notifications delivered to the
 * pipeline's own webhook routes, the automatic mode on a fast clock, and traffic sent through the
 * project's provider client wrapped so that every creation records its intent.
 */
export async function startSandboxForUp(options: SandboxForUpOptions): Promise<SandboxRun> {
  const { startSandbox } = await import('./sandbox/main.ts');
  const { providerAccountFor } = await import('./sandbox/traffic-client.ts');
  const { DEFAULT_ACCOUNT } = await import('./sandbox/accounts.ts');
  const { createProviderClient } = await import('./provider/client.ts');
  const { recordingClient } = await import('./producers/intent/recording-client.ts');
  const sandbox = await startSandbox({
    host: '127.0.0.1',
    port: 0,
    ccPort: 0,
    seed: options.seed ?? 1,
    speed: options.speed ?? 60,
    auto: { enabled: true, ...(options.auto ?? {}) },
    notificationBaseUrl: options.webBaseUrl,
    defaultNotificationUrl: `${options.webBaseUrl}/webhooks/${DEFAULT_ACCOUNT.name}`,
    ...(options.faults === undefined ? {} : { faults: options.faults }),
    ...(options.clock === undefined ? {} : { clock: options.clock }),
    // Traffic starts below, once its client records intents: a stored "running" must not start it first.
    ...(options.dataDir === undefined ? {} : { dataDir: options.dataDir, restoreTraffic: false }),
  });
  const restored = sandbox.control.restored;
  if (restored) {
    options.logger
      .child({ module: 'sandbox' })
      .info(
        { dataDir: options.dataDir, ...restored },
        `sandbox state restored: ${restored.deposits} deposits, ${restored.cashouts} cashouts, ${restored.refunds} refunds`,
      );
  }
  const account = {
    ...providerAccountFor(DEFAULT_ACCOUNT, { url: sandbox.url, ccUrl: sandbox.ccUrl }),
    // The sandbox signs its notifications like a request; check them as production would.
    webhookSignatureMode: 'enforce' as const,
  };
  const control = `${sandbox.url}/_sandbox`;
  const put = async (path: string, body: unknown, method = 'PUT') => {
    const res = await fetch(`${control}${path}`, {
      method,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`sandbox: ${method} ${path}: HTTP ${res.status} ${await res.text()}`);
  };
  return {
    accounts: [account],
    urls: { api: sandbox.url, 'card api': sandbox.ccUrl, control: `${control}/` },
    // Notification URLs keep their path (/webhooks/<account>/...): only the base moves.
    deliverTo: (baseUrl) => put('/webhooks/base-url', { url: baseUrl }),
    async startTraffic(recordIntent) {
      // Traffic goes through payrecon's own provider client, wrapped to record each creation's intent.
      const client = createProviderClient(account, {
        retries: options.clientRetries ?? 1,
        logger: options.logger,
      });
      sandbox.control.traffic.useClient(
        recordingClient(client, recordIntent, {
          account: account.name,
          logger: options.logger.child({ module: 'merchant' }),
          ...(options.settleWindowMs === undefined ? {} : { settle: { windowMs: options.settleWindowMs } }),
        }),
      );
      const rate = options.trafficRate ?? 2;
      if (rate > 0) await put('/traffic', { rate }, 'POST');
    },
    stop: () => sandbox.close(),
  };
}

/**
 * Resolves on the first SIGINT, SIGTERM or SIGHUP (the terminal closed: the embedded PostgreSQL runs in
 * its own process group and does not see it, so payrecon must stop it).
 */
export function untilSignal(): Promise<string> {
  // The listeners stay for the whole life of the process: with none left, a second signal (npm passes
  // the terminal's Ctrl-C on to its child, which has already had its own) would take the default action
  // and end the process in the middle of its orderly stop.
  return new Promise((resolveSignal) => {
    let first: string | null = null;
    const on = (signal: string) => () => {
      if (first !== null) {
        process.stdout.write('payrecon: stopping, please wait\n');
        return;
      }
      first = signal;
      resolveSignal(signal);
    };
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, on(signal));
  });
}

/** Loads the configuration or ends the process with one line naming the variable and the rule. */
export async function configOrExit(): Promise<Config> {
  const { loadConfig, ConfigError } = await import('./config.ts');
  try {
    return loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`payrecon: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
}

/** `payrecon up`: everything in one process until Ctrl-C or SIGTERM. */
export async function runUp(
  opts: { traffic?: string; speed?: string },
  embedded: EmbeddedStarters,
): Promise<void> {
  const config = await configOrExit();
  // A person at a terminal reads lines; anything else (a file, a collector) gets JSON lines.
  if (process.stdout.isTTY) await useReadableLogs();
  const traffic = Number(opts.traffic ?? '2');
  const speed = Number(opts.speed ?? '60');
  if (!(traffic >= 0)) throw new AppError('VALIDATION_FAILED', '--traffic: must be a non-negative number');
  if (!(speed > 0)) throw new AppError('VALIDATION_FAILED', '--speed: must be a positive number');
  // Signals are caught from the start: a Ctrl-C while starting stops what has started, in order.
  const signalled = untilSignal();
  const pipeline = await startPipeline(config, {
    embedded,
    sandbox: ({ webBaseUrl, logger }) =>
      startSandboxForUp({
        webBaseUrl,
        logger,
        trafficRate: config.sandbox.traffic ? traffic : 0,
        settleWindowMs: config.provider.intentSettleWindowSeconds * 1000,
        speed,
        dataDir: join(resolve(config.dataDir), 'sandbox'),
        // The provider's documented late payments, now that the ledger books them (LATE_COMPLETION).
        auto: { lateCompletionRate: 0.02 },
      }),
    print: (line) => process.stdout.write(`${line}\n`),
  });
  const { infra } = pipeline;
  const file = writeEndpoints(infra.dataDir, {
    pid: process.pid,
    startedAt: new Date().toISOString(),
    databaseUrl: infra.databaseUrl,
    brokers: infra.brokers,
    registryUrl: infra.registryUrl,
    web: pipeline.url,
    ...(pipeline.sandbox ? { sandbox: pipeline.sandbox.urls } : {}),
  });
  process.stdout.write(
    `  endpoints ${file} (every payrecon command finds this instance there; database password included, mode 0600)\n`,
  );
  const signal = await signalled;
  process.stdout.write(`payrecon: ${signal}, stopping\n`);
  // A second signal while stopping does not cut the orderly stop short (PostgreSQL stops last).
  // After SIGHUP the terminal is gone: a failed write must not end the orderly stop.
  process.stdout.on('error', () => undefined);
  try {
    await pipeline.stop();
  } finally {
    removeEndpoints(infra.dataDir);
  }
  process.stdout.write('payrecon: stopped\n');
}

/**
 * One part of the pipeline as its own process. Each address from the environment (production:
 * DATABASE_URL, KAFKA_BROKERS, SCHEMA_REGISTRY_URL), else the running `payrecon up`'s endpoints, else
 * (the database only) the embedded PostgreSQL `embedded` starts.
 */
export async function runPart(
  name: PartName,
  options: { retentionDays?: string } = {},
  embedded: EmbeddedStarters | null = null,
): Promise<void> {
  const config = await configOrExit();
  const part = PART_REGISTRY.find((p) => p.name === name);
  if (!part) throw new AppError('VALIDATION_FAILED', `${name}: not a part (one of ${PARTS.join(', ')})`);
  if (config.accounts.length === 0 && PART_INFO[name].needsAccounts) {
    throw new AppError('CONFIG_INVALID', 'PAYRECON_ACCOUNTS: must list at least one provider account');
  }
  const infra = await startInfrastructure(config, embedded);
  const { lifecycle, logger } = infra;
  try {
    const running = await part.start({
      infra,
      accounts: config.accounts,
      metrics: infra.metrics,
      together: false,
      started: new Map(),
      defaultAccount: config.accounts.length === 1 ? (config.accounts[0]?.name ?? null) : null,
      page: false,
      sandboxUsers: false,
      ...(options.retentionDays ? { retentionDays: Number(options.retentionDays) } : {}),
    });
    lifecycle.add(name, () => running.stop());
    if (!running.server) {
      // A part without a web server answers /healthz, /readyz and /metrics on PAYRECON_METRICS_PORT.
      const ops = await startOpsServer({
        metrics: infra.metrics,
        checks: readinessChecks(infra),
        host: config.metrics.host,
        port: config.metrics.port,
      });
      lifecycle.add('ops server', () => ops.close());
      logger.info({ part: name, url: ops.url }, 'health and metrics listening');
    }
    logger.info({ part: name }, 'running');
    const signal = await untilSignal();
    process.stdout.write(`payrecon: ${signal}, stopping\n`);
  } finally {
    await lifecycle.stopAll();
  }
  process.stdout.write('payrecon: stopped\n');
}
