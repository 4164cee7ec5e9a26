/**
 * `payrecon jobs`: the job catalog in its own process. Wires what exists today: the settlement and
 * exception workbooks, their retention, ledger verification (failures are logged as critical alerts)
 * and the stuck/missed-notification/unknown-transaction sweep. Poll scheduling joins when the poller
 * exists (`schedulePolls` in the catalog's deps).
 */
import { join } from 'node:path';
import { loadConfig } from '../config.ts';
import { createDb, migrateToLatest } from '../db/connection.ts';
import { sweepExceptions } from '../db/exceptions.ts';
import { withLedgerTransaction } from '../db/ledger-service.ts';
import { verifyLedger } from '../db/verify.ts';
import { AppError } from '../domain/errors.ts';
import { logger } from '../logger.ts';
import { merchantAccounts } from '../reports/ledger-queries.ts';
import { ReportRunner } from '../reports/runs.ts';
import { ensureReportSchema } from '../reports/schema.ts';
import { buildJobCatalog } from './catalog.ts';
import { JobScheduler } from './scheduler.ts';

export interface JobsCliOptions {
  databaseUrl?: string;
  retentionDays?: string;
}

export async function runJobsCli(opts: JobsCliOptions): Promise<void> {
  const config = loadConfig();
  const url = opts.databaseUrl ?? config.database.url;
  if (!url)
    throw new AppError('CONFIG_INVALID', 'DATABASE_URL: required for `payrecon jobs` (or use `payrecon up`)');
  const log = logger.child({ module: 'jobs' });
  const db = createDb(url);
  await migrateToLatest(db);
  await ensureReportSchema(db);
  const runner = new ReportRunner({
    db,
    dir: join(config.dataDir, 'reports'),
    timeZone: config.jobs.timeZone,
    cutoff: config.jobs.settlementCutoff,
    logger: log,
  });
  const cron = config.jobs.cron;
  const jobs = buildJobCatalog({
    timeZone: config.jobs.timeZone,
    settlementCutoff: config.jobs.settlementCutoff,
    cron: {
      'stuck-sweep': cron.stuckSweep,
      settlement: cron.settlement,
      'exception-report': cron.exceptionReport,
      'ledger-verify': cron.ledgerVerify,
    },
    reports: runner,
    accounts: () => merchantAccounts(db),
    ...(opts.retentionDays ? { retentionDays: Number(opts.retentionDays) } : {}),
    sweepStuck: async (now) => {
      await withLedgerTransaction(db, (trx) => sweepExceptions(trx, now));
    },
    verifyLedger: () => verifyLedger(db),
    raiseAlert: async (alert) => {
      log.fatal({ alert }, alert.message);
    },
    logger: log,
  });
  const scheduler = new JobScheduler({ db, jobs, logger });
  const caught = await scheduler.start();
  log.info({ jobs: jobs.map((j) => `${j.name} (${j.cron})`), caughtUp: caught.ran }, 'jobs scheduled');
  const stop = async () => {
    await scheduler.stop();
    await runner.idle();
    await db.destroy();
    process.exit(0);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
