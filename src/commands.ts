/**
 * The commands that run the app: `payrecon up`, one part (`reconcile`, `jobs`, ...), `web`, and the
 * services `report` runs on. Each builds its infrastructure, then its services through the one
 * `createServices`, and stops what it started, in reverse order, on Ctrl-C or SIGTERM.
 */
import { join, resolve } from 'node:path';
import { type Config, loadConfig } from './config.ts';
import { AppError } from './domain/errors.ts';
import { removeEndpoints, writeEndpoints } from './endpoints.ts';
import {
  type EmbeddedStarters,
  type OpenDatabase,
  openDatabaseInfrastructure,
  startInfrastructure,
} from './infrastructure.ts';
import { logger as rootLogger, useReadableLogs } from './logger.ts';
import { PART_INFO, PART_NAMES, type PartName } from './parts.ts';
import type { ReportRunner } from './reports/runs.ts';
import { startSandboxForUp, upSandboxStart } from './sandbox-part.ts';
import { buildServer } from './server.ts';
import { createServices } from './services.ts';
import { startOpsServer } from './web/ops.ts';
import { PART_REGISTRY, startPipeline } from './wiring.ts';

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
        // The first settlement about two minutes after a first start (docs/operations.md).
        startMs: upSandboxStart(Date.now(), speed),
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
    ...(infra.embeddedAuth.kafka ? { kafkaSasl: infra.embeddedAuth.kafka } : {}),
    registryUrl: infra.registryUrl,
    ...(infra.embeddedAuth.registry ? { registryAuth: infra.embeddedAuth.registry } : {}),
    web: pipeline.url,
    webhooks: pipeline.webhooksUrl,
    ...(pipeline.sandbox ? { sandbox: pipeline.sandbox.urls } : {}),
    ...(pipeline.sandboxUsers ? { sandboxUsers: true } : {}),
  });
  process.stdout.write(
    `  endpoints ${file} (every payrecon command finds this instance there; passwords included, mode 0600)\n`,
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
  if (!part) throw new AppError('VALIDATION_FAILED', `${name}: not a part (one of ${PART_NAMES.join(', ')})`);
  if (config.accounts.length === 0 && PART_INFO[name].needsAccounts) {
    throw new AppError('CONFIG_INVALID', 'PAYRECON_ACCOUNTS: must list at least one provider account');
  }
  const infra = await startInfrastructure(config, embedded);
  const services = createServices(infra);
  const { lifecycle, logger } = infra;
  try {
    const running = await part.start({
      infra,
      services,
      accounts: config.accounts,
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
        checks: services.readiness,
        metricsToken: config.metrics.token,
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

/**
 * `payrecon web`: the finance page and the JSON API on their own, over the database alone (health and
 * the ledger's metrics beside them), until Ctrl-C or SIGTERM.
 */
export async function runWeb(
  opts: { host?: string; port?: string },
  openDatabase: OpenDatabase,
): Promise<void> {
  const config = loadConfig();
  if (config.web.users.length === 0) {
    throw new AppError(
      'CONFIG_INVALID',
      'PAYRECON_WEB_USERS: no users (create a hash with `payrecon web hash-password`)',
    );
  }
  const infra = await openDatabaseInfrastructure(config, openDatabase, {
    schema: 'migrate',
    logger: rootLogger.child({ module: 'web' }),
  });
  const { lifecycle, logger } = infra;
  try {
    const services = createServices(infra);
    lifecycle.add('report runs', () => services.reports.idle());
    await services.reports.failAbandoned();
    const app = await buildServer(infra, services, {
      accounts: [],
      metrics: infra.metrics,
      page: true,
      webhooks: false,
      intents: false,
    });
    lifecycle.add('web server', () => app.close());
    const address = await app.listen({
      host: opts.host ?? config.web.host,
      port: Number(opts.port ?? config.web.port),
    });
    logger.info({ address }, 'finance page listening');
    const signal = await untilSignal();
    process.stdout.write(`payrecon: ${signal}, stopping\n`);
  } finally {
    await lifecycle.stopAll();
  }
  process.stdout.write('payrecon: stopped\n');
}

/**
 * The report runner of `payrecon report`, in the time zone and cut-off the command was given, over the
 * database it chose: a report never migrates, so a schema behind the code is an error.
 */
export async function openReportServices(
  openDatabase: OpenDatabase,
  settings: { timeZone: string; cutoff: string },
): Promise<{ reports: ReportRunner; stop(): Promise<void> }> {
  const base = loadConfig();
  const config: Config = {
    ...base,
    jobs: { ...base.jobs, timeZone: settings.timeZone, settlementCutoff: settings.cutoff },
  };
  // The command prints its summary, and a failure through the CLI's one error path: the runner logs nothing.
  const logger = rootLogger.child({ module: 'report' }, { level: 'silent' });
  const infra = await openDatabaseInfrastructure(config, openDatabase, {
    schema: 'require',
    poolSize: 4,
    logger,
  });
  return { reports: createServices(infra).reports, stop: () => infra.lifecycle.stopAll() };
}
