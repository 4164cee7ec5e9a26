/**
 * The job catalog over the ledger, with the bodies of this folder, run by one scheduler; claims keep two
 * instances from doubling a run.
 */

import { merchantAccounts } from '../db/read-models/reports.ts';
import { databaseCreatedAt } from '../db/runs/job-runs.ts';
import type { Db } from '../db/schema.ts';
import type { ExceptionRules } from '../domain/exception-rules.ts';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import type { ReportRunner } from '../reports/runs.ts';
import { jobAlerts } from './alerts.ts';
import { buildJobCatalog, type JobName } from './catalog.ts';
import { ledgerVerification } from './ledger-verify.ts';
import { type CronTimer, JobScheduler } from './scheduler.ts';
import { fetchSettlementFiles, type SettlementFetchDeps } from './settlement-fetch.ts';
import { lateRejectionSweep, stuckSweep } from './sweeps.ts';

export interface LedgerJobsDeps {
  db: Db;
  rules: ExceptionRules;
  reports: ReportRunner;
  metrics: Metrics;
  logger: Logger;
  timeZone: string;
  settlementCutoff: string;
  cron: Partial<Record<JobName, string>>;
  /** Keep workbooks this many days (default: the catalog's). */
  retentionDays?: number;
  /** One poll round now: given when this process polls on its own, the `poll` job runs it. */
  poll?: () => Promise<unknown>;
  /** The settlement fetch (src/jobs/settlement-fetch.ts); absent: the job is not scheduled. */
  settlementFetch?: Omit<SettlementFetchDeps, 'logger'>;
  /** What fires the cron ticks (default node-cron). */
  timer?: CronTimer;
}

export function createLedgerJobScheduler(deps: LedgerJobsDeps): JobScheduler {
  const { db, logger, metrics, poll } = deps;
  const jobs = buildJobCatalog({
    timeZone: deps.timeZone,
    settlementCutoff: deps.settlementCutoff,
    cron: deps.cron,
    reports: deps.reports,
    ...(deps.retentionDays === undefined ? {} : { retentionDays: deps.retentionDays }),
    accounts: () => merchantAccounts(db),
    ...(poll ? { schedulePolls: async () => void (await poll()) } : {}),
    sweepStuck: stuckSweep(db, deps.rules),
    sweepLateRejections: lateRejectionSweep(db, deps.rules, logger, poll),
    verifyLedger: ledgerVerification(db, metrics),
    raiseAlert: jobAlerts(db),
    ...(deps.settlementFetch
      ? {
          fetchSettlementFiles: async () => {
            const fetchDeps = { ...(deps.settlementFetch as Omit<SettlementFetchDeps, 'logger'>), logger };
            const done = await fetchSettlementFiles(fetchDeps);
            logger.debug({ ...done, refused: done.refused.length }, 'settlement fetch done');
          },
        }
      : {}),
    logger,
  });
  metrics.knownJobs(jobs.map((j) => j.name));
  return new JobScheduler({
    db,
    jobs,
    logger,
    onRun: (job, outcome, seconds) => metrics.jobRun(job, outcome, seconds),
    ...(deps.timer ? { timer: deps.timer } : {}),
    // A fresh database catches up no runs from before it existed.
    notBefore: () => databaseCreatedAt(db),
  });
}
