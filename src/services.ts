/**
 * The one composition: every service payrecon runs, built once per process from its infrastructure and
 * its configuration, for every command alike (`up`, each part, `web`, `report`). A command takes what
 * it needs from here and builds none of these itself.
 */
import { join } from 'node:path';
import { alertSinksFrom, exceptionRulesFrom, jobCronFrom, providerOptionsFrom } from './config-rules.ts';
import type { AlertSinkConfig } from './consumers/alert-dispatcher.ts';
import { pingDatabase } from './db/connection.ts';
import type { ExceptionRules } from './domain/exception-rules.ts';
import type { DatabaseInfrastructure, Infrastructure } from './infrastructure.ts';
import { createLedgerJobScheduler } from './jobs/ledger-jobs.ts';
import type { JobScheduler } from './jobs/scheduler.ts';
import type { ProviderClientOptions } from './provider/client.ts';
import { ReportRunner } from './reports/runs.ts';
import type { WebServices } from './web/app.ts';
import type { ReadinessCheck } from './web/ops.ts';
import { ledgerWebServices } from './web/services.ts';

export interface Services {
  /** The exception and polling rules (configuration on top of the domain's defaults). */
  rules: ExceptionRules;
  /** Workbooks under `<data dir>/reports`, in the configured time zone and cut-off. */
  reports: ReportRunner;
  /** What the finance page reads and does. */
  web: WebServices;
  alertSinks: AlertSinkConfig[];
  /** What `/readyz` checks: every dependency of this process answers. */
  readiness: ReadinessCheck[];
  /** The provider client's settings: timeouts, retries, and every call counted in the metrics. */
  providerOptions: ProviderClientOptions;
  /** The scheduled jobs; `poll` when this process polls on its own, `retentionDays` from the command. */
  jobScheduler(options?: { poll?: () => Promise<unknown>; retentionDays?: number }): JobScheduler;
}

/** Exception and polling rules beyond the configuration (tests use short polling delays). */
export interface ServiceOverrides {
  rules?: Partial<ExceptionRules>;
}

export function createServices(
  infra: DatabaseInfrastructure & Partial<Pick<Infrastructure, 'admin' | 'registryUrl'>>,
  overrides: ServiceOverrides = {},
): Services {
  const { config, db, logger, metrics } = infra;
  const rules = { ...exceptionRulesFrom(config), ...overrides.rules };
  const reports = new ReportRunner({
    db: infra.reportsDb ?? db,
    concurrency: config.reports.concurrency,
    maxDays: config.reports.maxDays,
    dir: join(infra.dataDir, 'reports'),
    timeZone: config.jobs.timeZone,
    cutoff: config.jobs.settlementCutoff,
    publicUrl: config.web.publicUrl,
    exceptionSla: config.exceptions.sla,
    logger,
  });
  const readiness: ReadinessCheck[] = [{ name: 'database', check: () => pingDatabase(db) }];
  const { admin, registryUrl } = infra;
  if (admin) readiness.push({ name: 'kafka', check: async () => void (await admin.describeCluster()) });
  if (registryUrl) {
    readiness.push({
      name: 'schema_registry',
      check: async () => {
        const res = await fetch(`${registryUrl}/subjects`);
        if (!res.ok) throw new Error(`HTTP ${res.status}`);
      },
    });
  }
  return {
    rules,
    reports,
    web: ledgerWebServices(db, reports, config.exceptions.sla, config.bankAccounts),
    alertSinks: alertSinksFrom(config),
    readiness,
    providerOptions: { ...providerOptionsFrom(config), onCall: (call) => metrics.providerCall(call) },
    jobScheduler: (options = {}) =>
      createLedgerJobScheduler({
        db,
        rules,
        reports,
        metrics,
        logger,
        timeZone: config.jobs.timeZone,
        settlementCutoff: config.jobs.settlementCutoff,
        cron: jobCronFrom(config),
        ...options,
      }),
  };
}
