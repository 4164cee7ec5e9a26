/**
 * How the parts become running processes. `startPipeline` starts every part of payrecon in one process
 * (`payrecon up`); the production sub-commands (`ingest`, `fetch`, `reconcile`, `match-consumer`,
 * `relay`, `alerts`, `poll`, `jobs`) start one part each through the same registry. Every part takes its services from the
 * one `createServices` of the process.
 */
import type { FastifyInstance } from 'fastify';
import { API_PREFIX } from './api/app.ts';
import type { Config, ProviderAccount } from './config.ts';
import { matchingOptionsFrom } from './config-rules.ts';
import { startAlertConsumer } from './consumers/alert-dispatcher.ts';
import { startMatchConsumer } from './consumers/matcher.ts';
import { startReconciler } from './consumers/reconciler.ts';
import { runStatusFetcher } from './consumers/status-fetcher.ts';
import type { ExceptionRules } from './domain/exception-rules.ts';
import { embeddedCredentialsFile } from './embedded-credentials.ts';
import { INTENT_TOPIC } from './events/topics.ts';
import { type EmbeddedStarters, type Infrastructure, startInfrastructure } from './infrastructure.ts';
import type { Logger } from './logger.ts';
import { PART_NAMES, type PartName } from './parts.ts';
import { startOutboxRelay } from './producers/outbox-relay.ts';
import { pollingClients, type StatusPollerDeps, startStatusPoller } from './producers/status-poller.ts';
import { SANDBOX_ACCOUNT_NAME, SANDBOX_WEB_USERS, type SandboxRun } from './sandbox-part.ts';
import { buildServer, metricsBaseUrl, webhooksBaseUrl } from './server.ts';
import { createServices, type Services } from './services.ts';

/** The status poller over every account, with the configuration's concurrency and batch size. */
export function startPoller(
  infra: Infrastructure,
  services: Services,
  accounts: readonly ProviderAccount[],
  overrides: Partial<StatusPollerDeps> = {},
  loop = true,
) {
  const { config, metrics } = infra;
  // Aborted at stop: a call failing then is not retried (the round ends, nothing logged as retried).
  const stopping = new AbortController();
  const clients = pollingClients(accounts, { ...services.providerOptions, signal: stopping.signal });
  const poller = startStatusPoller(
    {
      db: infra.db,
      clientFor: clients.clientFor,
      lastRetryAfterMs: clients.lastRetryAfterMs,
      publisher: infra.publisher,
      concurrency: config.poller.concurrency,
      batchSize: config.poller.batchSize,
      leaseMs: config.poller.minIntervalSeconds * 1000,
      outcomeUnknownGraceMs: services.rules.outcomeUnknownGraceMs,
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
      stopping.abort();
      await poller.stop();
      await clients.close();
    },
  };
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

export interface RunningPipeline {
  infra: Infrastructure;
  services: Services;
  url: string;
  /** Base URL of the provider's webhook routes (`url` unless PAYRECON_WEBHOOK_LISTEN). */
  webhooksUrl: string;
  server: FastifyInstance;
  sandbox: SandboxRun | null;
  /** The page signs in the sandbox's users (SANDBOX_WEB_USERS): the sandbox runs and PAYRECON_WEB_USERS is unset. */
  sandboxUsers: boolean;
  stop(): Promise<void>;
}

/** What a part is started with: the infrastructure, the services and what the parts share. */
export interface PartContext {
  infra: Infrastructure;
  services: Services;
  accounts: readonly ProviderAccount[];
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
  /** Base URL of the provider's webhook routes: `url`, or their own listener (PAYRECON_WEBHOOK_LISTEN). */
  webhooksUrl?: string;
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
  reconcile: async ({ infra, services }) => {
    const reconciler = await startReconciler({
      ...infra,
      dlq: infra.publisher,
      onBatchApplied: (topic, seconds) => infra.metrics.reconcileBatchSeconds.observe({ topic }, seconds),
      rules: services.rules,
    });
    return { stop: () => reconciler.stop(), ready: reconciler.ready };
  },
  'match-consumer': async ({ infra, services }) => {
    const { rules, ...options } = matchingOptionsFrom(infra.config);
    const matcher = await startMatchConsumer({
      kafka: infra.kafka,
      serde: infra.serde,
      dlq: infra.publisher,
      db: infra.db,
      logger: infra.logger,
      rules,
      // The bank accounts the imports know, read at each run: configured, or the embedded sandbox's.
      options: {
        ...options,
        get bankAccounts() {
          return services.imports.bankAccounts();
        },
      },
    });
    return { stop: () => matcher.stop(), ready: matcher.ready };
  },
  fetch: async ({ infra, services, accounts }) => {
    const fetcher = await runStatusFetcher({
      kafka: infra.kafka,
      serde: infra.serde,
      accounts,
      providerOptions: services.providerOptions,
      concurrency: infra.config.fetcher.concurrency,
      logger: infra.logger,
      db: infra.db,
    });
    return { stop: () => fetcher.stop(), ready: fetcher.ready };
  },
  alerts: async ({ infra, services }) => {
    const alerts = await startAlertConsumer({
      kafka: infra.kafka,
      serde: infra.serde,
      dlq: infra.publisher,
      db: infra.db,
      logger: infra.logger,
      onDispatched: (alerts, perSink) => infra.metrics.alertsDispatched(alerts, perSink),
      sinks: services.alertSinks,
      timeoutMs: infra.config.alerts.timeoutMs,
    });
    return { stop: () => alerts.stop(), ready: alerts.ready };
  },
  relay: async ({ infra }) => {
    const relay = startOutboxRelay({ db: infra.db, publisher: infra.publisher, logger: infra.logger });
    return { stop: () => relay.stop() };
  },
  poll: async ({ infra, services, accounts, pollerOverrides }) => {
    const poller = startPoller(infra, services, accounts, pollerOverrides);
    return { stop: () => poller.stop(), pollOnce: () => poller.pollOnce() };
  },
  ingest: async ({ infra, services, accounts, defaultAccount, page, sandboxUsers }) => {
    const { config } = infra;
    const server = await buildServer(infra, services, {
      accounts,
      metrics: infra.metrics,
      page,
      webhooks: true,
      intents: true,
      defaultAccount,
      sandboxUsers,
    });
    try {
      await server.listen({ host: config.web.host, port: config.web.port });
    } catch (err) {
      // The listeners of its own (webhooks, metrics) already listen: closed with it.
      await server.close();
      throw err;
    }
    const address = server.server.address();
    const port = typeof address === 'object' && address ? address.port : config.web.port;
    const url = `http://${config.web.host}:${port}`;
    return { stop: () => server.close(), server, url, webhooksUrl: webhooksBaseUrl(server, url) };
  },
  jobs: async ({ infra, services, accounts, together, retentionDays }) => {
    // Under `up` the looping poller picks up what the jobs make due; alone, the jobs poll on their
    // schedule (and for the late-rejection watch) through a poller of their own.
    const poller = together ? null : startPoller(infra, services, accounts, {}, false);
    try {
      const scheduler = services.jobScheduler({
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

/** Everything in one process: what `payrecon up` (and `npm start`) runs. */
export async function startPipeline(config: Config, options: UpOptions): Promise<RunningPipeline> {
  const infra = await startInfrastructure(config, options.embedded, { up: true });
  const services = createServices(infra, options.rules ? { rules: options.rules } : {});
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
      // The settlement fetch reads its control API; its bank accounts are PAYRECON_BANK_ACCOUNTS' when unset.
      if (running.urls.control) await services.imports.useEmbeddedSandbox(running.urls.control);
    }
    // Every consumer group started below reports its lag (instrumentKafka tells the metrics).
    const started = new Map<PartName, RunningPart>();
    const context: PartContext = {
      infra,
      services,
      accounts,
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
      if (running.webhooksUrl && sandbox) await sandbox.deliverTo(running.webhooksUrl);
    }
    const ingest = started.get('ingest');
    if (!ingest?.server || !ingest.url) throw new Error('ingest: the server did not start');
    const url = ingest.url;
    const webhooksUrl = ingest.webhooksUrl ?? url;

    await Promise.all([...started.values()].map((p) => p.ready));
    if (sandbox) {
      await sandbox.startTraffic(async (intent) => {
        await infra.publisher.publish(INTENT_TOPIC, [{ value: intent }]);
      });
    }

    print(`payrecon is up: ${url}/ (finance page)`);
    print(`  webhooks  ${webhooksUrl}/webhooks/<account>/{deposits,refunds,cashouts}`);
    print(
      `  api       ${url}${API_PREFIX} (${url}${API_PREFIX}/openapi.json; tokens: payrecon api token create)`,
    );
    print(`  health    ${url}/healthz  ${url}/readyz`);
    print(`  metrics   ${metricsBaseUrl(ingest.server, url)}/metrics`);
    print(`  database  ${redactUrl(infra.databaseUrl)}`);
    // Where the embedded services' passwords are kept, never the passwords themselves.
    const secrets = embeddedCredentialsFile(infra.dataDir);
    const { kafka: sasl, registry: basic } = infra.embeddedAuth;
    print(
      `  kafka     ${infra.brokers.join(',')}${sasl ? ` (SASL SCRAM-SHA-256/512, user ${sasl.username}, password in ${secrets})` : ''}`,
    );
    print(
      `  registry  ${infra.registryUrl}${basic ? ` (basic auth, user ${basic.username}, password in ${secrets})` : ''}`,
    );
    const sandboxUsers = sandbox !== null && config.web.users.length === 0;
    if (sandbox) {
      for (const [name, u] of Object.entries(sandbox.urls)) print(`  sandbox   ${name} ${u}`);
      if (sandboxUsers) {
        const [operator, ...controllers] = SANDBOX_WEB_USERS;
        print(
          `  sign in as ${operator.username} / ${operator.password} (${operator.role}), or ${controllers.map((u) => `${u.username} / ${u.password}`).join(' and ')} (controllers: one prepares a month close, the other approves; sandbox only, see docs/operations.md)`,
        );
      }
    }
    return {
      infra,
      services,
      url,
      webhooksUrl,
      server: ingest.server,
      sandbox,
      sandboxUsers,
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
