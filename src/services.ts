/**
 * The one composition: every service payrecon runs, built once per process from its infrastructure and
 * its configuration, for every command alike (`up`, each part, `web`, `report`). A command takes what
 * it needs from here and builds none of these itself.
 */
import { join } from 'node:path';
import { ConfigError } from './config.ts';
import { alertSinksFrom, exceptionRulesFrom, jobCronFrom, providerOptionsFrom } from './config-rules.ts';
import type { AlertSinkConfig } from './consumers/alert-dispatcher.ts';
import { pingDatabase } from './db/connection.ts';
import { importedBefore, lastStatementDays } from './db/imports/read.ts';
import { lastFinishedRun } from './db/runs/job-runs.ts';
import type { ExceptionRules } from './domain/exception-rules.ts';
import type { ImportFileFn, ImportKind } from './domain/imports.ts';
import { importFile, matcherFrom } from './import-service.ts';
import type { KnownBankAccount } from './imports/bank-accounts.ts';
import type { Profile } from './imports/profile.ts';
import { readProfilesDir } from './imports/read-file.ts';
import type { DatabaseInfrastructure, Infrastructure } from './infrastructure.ts';
import { createLedgerJobScheduler } from './jobs/ledger-jobs.ts';
import { type CronTimer, fireTimesBetween, type JobScheduler } from './jobs/scheduler.ts';
import type { SandboxBankAccount } from './jobs/settlement-fetch.ts';
import type { ProviderClientOptions } from './provider/client.ts';
import { ReportRunner } from './reports/runs.ts';
import type { WebServices } from './web/app.ts';
import { ledgerImportServices } from './web/import-services.ts';
import type { ReadinessCheck } from './web/ops.ts';
import type { BankFeed } from './web/reconciliation-views.ts';
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
  /** The one import of a file, as the page, the API and the settlement fetch take it. */
  imports: ImportServices;
  /**
   * The scheduled jobs; `poll` when this process polls on its own, `retentionDays` from the command,
   * `timer` what fires the cron ticks (default node-cron on real time; a test drives them from its clock).
   */
  jobScheduler(options?: {
    poll?: () => Promise<unknown>;
    retentionDays?: number;
    timer?: CronTimer;
  }): JobScheduler;
}

export interface ImportServices {
  run: ImportFileFn;
  /** The largest upload (PAYRECON_IMPORT_MAX_BYTES). */
  maxBytes: number;
  /** The configured profiles (PAYRECON_IMPORT_PROFILES_DIR) the page and the API may name. */
  profiles: readonly { name: string; kind: ImportKind }[];
  /** The bank accounts statements may name: PAYRECON_BANK_ACCOUNTS, or the embedded sandbox's. */
  bankAccounts(): readonly KnownBankAccount[];
  /**
   * The sandbox runs in this process (`payrecon up`): the settlement fetch reads its control API unless
   * PAYRECON_SETTLEMENT_FETCH_URL names another, and with PAYRECON_BANK_ACCOUNTS unset its bank accounts
   * (`GET /_sandbox/bank-accounts`, read again at every fetch) are the ones statements may name.
   */
  useEmbeddedSandbox(controlUrl: string): Promise<void>;
}

/** The profiles of PAYRECON_IMPORT_PROFILES_DIR; a bad one is a configuration error naming its file. */
function configuredProfiles(dir: string | null): Profile[] {
  if (dir === null) return [];
  const read = readProfilesDir(dir);
  if (!read.ok) throw new ConfigError('PAYRECON_IMPORT_PROFILES_DIR', read.refusal.message);
  return read.value;
}

/** The sandbox's bank accounts as PAYRECON_BANK_ACCOUNTS would list them. */
export function sandboxBankAccounts(listed: readonly SandboxBankAccount[]): KnownBankAccount[] {
  return listed.map((b) => ({
    id: b.id,
    currency: b.currency,
    account: b.account,
    name: `${b.account} settlement account (${b.currency})`,
  }));
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
  // The settlement fetch's control API, and the bank accounts derived from the embedded sandbox.
  let controlUrl = config.imports.fetchUrl;
  let derived: KnownBankAccount[] | null = null;
  const deriving = () => derived !== null;
  const bankAccounts = () => derived ?? config.bankAccounts;
  const onBankAccounts = (listed: readonly SandboxBankAccount[]) => {
    if (deriving()) derived = sandboxBankAccounts(listed);
  };
  // Where the bank accounts and statements come from, as the Reconciliation list says it.
  const fetchCron = jobCronFrom(config)['settlement-fetch'] ?? null;
  const feed = async (): Promise<BankFeed> => {
    const now = new Date();
    const schedule = controlUrl === null ? null : fetchCron;
    let sandbox: BankFeed['sandbox'] = null;
    if (controlUrl !== null) {
      try {
        const get = async <T>(path: string) => {
          const res = await fetch(`${controlUrl}${path}`, { signal: AbortSignal.timeout(2_000) });
          if (!res.ok) throw new Error(`HTTP ${res.status}`);
          return (await res.json()) as T;
        };
        const clock = await get<{ now: string; speed?: number | null }>('/clock');
        const listed = await get<{ name: string; time_zone: string }[]>('/accounts');
        const name = bankAccounts()[0]?.account ?? config.accounts[0]?.name;
        const account = listed.find((a) => a.name === name) ?? listed[0];
        sandbox = {
          now: new Date(clock.now),
          speed: clock.speed ?? null,
          timeZone: account?.time_zone ?? 'UTC',
        };
      } catch (err) {
        logger.debug({ err }, 'sandbox clock not read for the Reconciliation page');
      }
    }
    return {
      source: deriving() ? 'sandbox' : 'configured',
      schedule,
      nextRun:
        schedule === null
          ? null
          : (fireTimesBetween(schedule, config.jobs.timeZone, now, new Date(now.getTime() + 86_400_000))[0] ??
            null),
      lastRun: schedule === null ? null : await lastFinishedRun(db, 'settlement-fetch'),
      sandbox,
    };
  };
  const profiles = configuredProfiles(config.imports.profilesDir);
  const match = matcherFrom(config);
  const run: ImportFileFn = async (request) => {
    const outcome = await importFile({ db, bankAccounts: bankAccounts(), profiles, match }, request);
    if (outcome.matchingError !== undefined) {
      logger.warn(
        { importId: outcome.id, fileName: outcome.fileName, reason: outcome.matchingError },
        'matching after the import did not finish; the next matching run takes its lines',
      );
    }
    return outcome;
  };
  const imports: ImportServices = {
    run,
    maxBytes: config.imports.maxBytes,
    profiles: profiles.map((p) => ({ name: p.name, kind: p.kind })),
    bankAccounts,
    async useEmbeddedSandbox(url) {
      const control = url.replace(/\/+$/, '');
      controlUrl ??= control;
      if (config.bankAccounts.length > 0) return;
      derived = [];
      try {
        const res = await fetch(`${control}/bank-accounts`);
        if (res.ok) onBankAccounts((await res.json()) as SandboxBankAccount[]);
      } catch (err) {
        logger.warn({ err }, 'sandbox bank accounts not read; the settlement fetch reads them again');
      }
    },
  };
  return {
    rules,
    reports,
    imports,
    web: {
      ...ledgerWebServices(db, reports, config.exceptions.sla, {
        // The bank accounts the imports know (configured, or the embedded sandbox's), read at each use.
        accounts: imports.bankAccounts,
        noteAbove: config.closeNoteAbove,
        feed,
      }),
      imports: ledgerImportServices(db, imports),
    },
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
        ...(controlUrl === null
          ? {}
          : {
              settlementFetch: {
                controlUrl: () => controlUrl,
                accounts: () => config.accounts.map((a) => a.name),
                importFile: run,
                onBankAccounts,
                lastStatementDays: () => lastStatementDays(db),
                importedBefore: (sha256) => importedBefore(db, sha256),
                match: () => match(db, bankAccounts()),
              },
            }),
        ...options,
      }),
  };
}
