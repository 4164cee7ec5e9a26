/**
 * The configuration read as the rules and settings the services take: the exception rules, the alert
 * sinks, the job schedule and the provider client's settings. Every command gets them from here, through `createServices`.
 */
import type { Config } from './config.ts';
import type { AlertSinkConfig } from './consumers/alert-dispatcher.ts';
import { DEFAULT_EXCEPTION_RULES, type ExceptionRules } from './domain/exception-rules.ts';
import type { JobName } from './jobs/catalog.ts';
import type { ProviderClientOptions } from './provider/client.ts';

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
      notFoundAttempts: config.poller.notFoundAttempts,
    },
  };
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

/** The jobs' cron expressions from PAYRECON_CRON_*; report retention keeps the catalog's. */
export function jobCronFrom(config: Config): Partial<Record<JobName, string>> {
  const cron = config.jobs.cron;
  return {
    poll: cron.poll,
    'stuck-sweep': cron.stuckSweep,
    'late-rejection-sweep': cron.lateRejectionSweep,
    settlement: cron.settlement,
    'exception-report': cron.exceptionReport,
    'ledger-verify': cron.ledgerVerify,
    'settlement-fetch': cron.settlementFetch,
  };
}

/** The provider client's timeout and retries (PAYRECON_PROVIDER_TIMEOUT_MS, PAYRECON_PROVIDER_RETRIES). */
export function providerOptionsFrom(config: Config): ProviderClientOptions {
  return { timeoutMs: config.provider.timeoutMs, retries: config.provider.retries };
}

/**
 * Matching's settings from the configuration: the rules (PAYRECON_MATCH_RULES), the bank accounts, the
 * settlement grace (PAYRECON_SETTLEMENT_GRACE_DAYS), the exception rules, and the merchant account the
 * transactions report's exceptions are raised under (the report names none): the one provider account,
 * else `sandbox` when none is configured (`payrecon up` runs the sandbox's), else `-`.
 */
export function matchingOptionsFrom(config: Config) {
  const accounts = config.accounts;
  return {
    rules: config.matching.rules,
    bankAccounts: config.bankAccounts,
    settlementGraceDays: config.matching.settlementGraceDays,
    ledgerWaitMs: config.matching.ledgerWaitSeconds * 1000,
    exceptionRules: exceptionRulesFrom(config),
    reportAccount: accounts.length === 1 ? accounts[0]!.name : accounts.length === 0 ? 'sandbox' : '-',
  };
}
