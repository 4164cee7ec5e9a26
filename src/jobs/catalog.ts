/**
 * The job catalog: every scheduled job declared once, with its cron expression and the claim key of
 * each period it works on. Work owned by other areas (poll scheduling, the stuck and late-rejection
 * sweeps, ledger verification, alerting) is injected as functions, so this file depends only on their
 * shape; the workbooks and their retention are done here through the report runner.
 *
 * | job | default cron | claim key | catch-up |
 * |---|---|---|---|
 * | poll | every minute | `poll:<minute>` | no |
 * | stuck-sweep | every 15 min | `stuck-sweep:<minute>` | no |
 * | late-rejection-sweep | every 6 h | `late-rejection-sweep:<minute>` | no |
 * | settlement | after the cut-off, daily | `settlement:<business day>:<account>` | yes |
 * | exception-report | 06:00 daily | `exceptions:<day>` | yes |
 * | ledger-verify | hourly | `ledger-verify:<hour>` | yes |
 * | report-retention | 04:15 daily | `report-retention:<day>` | yes |
 * | settlement-fetch | every 2 min | `settlement-fetch:<minute>` | no |
 */

import { localDate } from '../domain/zoned-time.ts';
import type { Logger } from '../logger.ts';
import { lastClosedBusinessDay } from '../reports/period.ts';
import type { ReportRunner } from '../reports/runs.ts';
import type { DueRun, JobDefinition } from './scheduler.ts';

export interface LedgerVerification {
  /** One line per failed invariant; empty when the ledger is sound. */
  failures: string[];
}

export interface JobAlert {
  type: string;
  severity: 'info' | 'warning' | 'critical';
  message: string;
  details?: Record<string, unknown>;
}

export interface JobCatalogDeps {
  timeZone: string;
  /** Local HH:MM at which a settlement business day ends. */
  settlementCutoff: string;
  cron?: Partial<Record<JobName, string>>;
  reports: ReportRunner;
  /** Merchant accounts to settle (one workbook per account and business day). */
  accounts: () => Promise<readonly string[]>;
  /** Keep workbooks this many days (default 90). */
  retentionDays?: number;
  schedulePolls?: (now: Date) => Promise<void>;
  sweepStuck?: (now: Date) => Promise<void>;
  sweepLateRejections?: (now: Date) => Promise<void>;
  verifyLedger?: () => Promise<LedgerVerification>;
  raiseAlert?: (alert: JobAlert) => Promise<void>;
  /** Downloads and imports the provider's reports and the bank statements (src/jobs/settlement-fetch.ts). */
  fetchSettlementFiles?: (now: Date) => Promise<void>;
  logger?: Logger;
}

export const JOB_NAMES = [
  'poll',
  'stuck-sweep',
  'late-rejection-sweep',
  'settlement',
  'exception-report',
  'ledger-verify',
  'report-retention',
  'settlement-fetch',
] as const;
export type JobName = (typeof JOB_NAMES)[number];

/** The settlement cron fires 30 minutes after the cut-off unless configured. */
export function settlementCron(cutoff: string): string {
  const [h = 0, m = 0] = cutoff.split(':').map(Number);
  const t = (h * 60 + m + 30) % 1440;
  return `${t % 60} ${Math.floor(t / 60)} * * *`;
}

const minuteKey = (at: Date) => at.toISOString().slice(0, 16);

/** Builds the catalog; jobs whose injected function is missing are left out. */
export function buildJobCatalog(deps: JobCatalogDeps): JobDefinition[] {
  const tz = deps.timeZone;
  const cronOf = (name: JobName, fallback: string) => deps.cron?.[name] ?? fallback;
  const jobs: JobDefinition[] = [];
  const simple = (name: JobName, fallback: string, fn: ((now: Date) => Promise<void>) | undefined) => {
    if (!fn) return;
    jobs.push({
      name,
      cron: cronOf(name, fallback),
      timeZone: tz,
      due: (at) => [{ key: `${name}:${minuteKey(at)}`, run: () => fn(at) }],
    });
  };
  simple('poll', '* * * * *', deps.schedulePolls);
  simple('stuck-sweep', '*/15 * * * *', deps.sweepStuck);
  simple('late-rejection-sweep', '0 */6 * * *', deps.sweepLateRejections);
  simple('settlement-fetch', '*/2 * * * *', deps.fetchSettlementFiles);

  jobs.push({
    name: 'settlement',
    cron: cronOf('settlement', settlementCron(deps.settlementCutoff)),
    timeZone: tz,
    catchUp: true,
    due: async (at): Promise<DueRun[]> => {
      const day = lastClosedBusinessDay(at, deps.settlementCutoff, tz);
      const accounts = await deps.accounts();
      return accounts.map((account) => {
        const key = `settlement:${day}:${account}`;
        return {
          key,
          run: async () => {
            await deps.reports.run(
              { kind: 'settlement', from: day, to: day, account },
              { runKey: `${key}@${Date.now().toString(36)}`, trigger: 'schedule' },
            );
          },
        };
      });
    },
  });

  jobs.push({
    name: 'exception-report',
    cron: cronOf('exception-report', '0 6 * * *'),
    timeZone: tz,
    catchUp: true,
    due: (at) => {
      const day = lastClosedBusinessDay(at, '00:00', tz);
      const key = `exceptions:${day}`;
      return [
        {
          key,
          run: async () => {
            await deps.reports.run(
              { kind: 'exceptions', from: day, to: day, account: null },
              { runKey: `${key}@${Date.now().toString(36)}`, trigger: 'schedule' },
            );
          },
        },
      ];
    },
  });

  if (deps.verifyLedger) {
    const verify = deps.verifyLedger;
    jobs.push({
      name: 'ledger-verify',
      cron: cronOf('ledger-verify', '0 * * * *'),
      timeZone: tz,
      catchUp: true,
      due: (at) => [
        {
          key: `ledger-verify:${at.toISOString().slice(0, 13)}`,
          run: async () => {
            const { failures } = await verify();
            if (failures.length === 0) return;
            deps.logger?.error({ failures }, 'ledger verification failed');
            await deps.raiseAlert?.({
              type: 'LEDGER_VERIFICATION_FAILED',
              severity: 'critical',
              message: `Ledger verification failed: ${failures.length} invariant(s) broken: ${failures.slice(0, 5).join('; ')}`,
              details: { failures },
            });
          },
        },
      ],
    });
  }

  const retentionDays = deps.retentionDays ?? 90;
  jobs.push({
    name: 'report-retention',
    cron: cronOf('report-retention', '15 4 * * *'),
    timeZone: tz,
    catchUp: true,
    due: (at) => [
      {
        key: `report-retention:${localDate(at, tz)}`,
        run: async () => {
          const removed = await deps.reports.deleteOlderThan(
            new Date(at.getTime() - retentionDays * 86_400_000),
          );
          if (removed) deps.logger?.info({ removed }, 'old workbooks removed');
        },
      },
    ],
  });
  return jobs;
}
