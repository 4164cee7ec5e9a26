/**
 * The metrics' names and units, and how the scraped gauges read their sources: cached, and a failing
 * source keeps its last figures and is counted (the live series are checked against a real Prometheus
 * in prometheus.test.ts).
 */

import { describe, expect, it } from 'vitest';
import { createMetrics, type ExceptionFigure } from '../../src/metrics.ts';
import { waitFor } from '../helpers/wait.ts';

describe('metrics', () => {
  it('names every metric payrecon_ once, counters _total, durations _seconds', async () => {
    const metrics = createMetrics({
      balances: async () => [],
      exceptions: async () => [],
      pollBacklog: async () => 0,
    });
    const all = await metrics.registry.getMetricsAsJSON();
    const names = all.map((m) => m.name);
    expect(names).toContain('payrecon_process_cpu_seconds_total');
    expect(names).toContain('payrecon_nodejs_eventloop_lag_seconds');
    for (const m of all) {
      expect(m.name).toMatch(/^payrecon_/);
      expect(m.name.slice('payrecon_'.length)).not.toMatch(/payrecon_|^process_process_/);
      if (String(m.type) === 'counter') expect(m.name).toMatch(/_total$/);
      if (String(m.type) === 'histogram') expect(m.name).toMatch(/_seconds$/);
    }
  });

  it('caches database figures and keeps the last ones when a read fails', async () => {
    let reads = 0;
    let fail = false;
    const figures: ExceptionFigure[] = [
      { type: 'STUCK', state: 'open', count: 3, oldestAgeSeconds: 7200, overdue: 2 },
      { type: 'STUCK', state: 'resolved', count: 5, oldestAgeSeconds: 0, overdue: 0 },
    ];
    const metrics = createMetrics({
      exceptions: async () => {
        reads++;
        if (fail) throw new Error('database down');
        return figures;
      },
      exceptionSlaMinutes: 60,
      cacheMs: 50,
    });
    const scrape = () => metrics.registry.metrics();
    let text = await scrape();
    expect(text).toContain('payrecon_exceptions{type="STUCK",state="open"} 3');
    expect(text).toContain('payrecon_exceptions_oldest_age_seconds{type="STUCK",state="open"} 7200');
    expect(text).not.toContain('payrecon_exceptions_oldest_age_seconds{type="STUCK",state="resolved"}');
    expect(text).toContain('payrecon_exceptions_overdue{type="STUCK"} 2');
    // Every known type is there, zero included.
    expect(text).toContain('payrecon_exceptions_overdue{type="LATE_REJECTION"} 0');
    expect(text).toContain('payrecon_exceptions_sla_seconds 3600');
    // Three gauges, one read; a second scrape within the cache reads nothing.
    expect(reads).toBe(1);
    await scrape();
    expect(reads).toBe(1);
    fail = true;
    // Scrapes within the 50 ms cache read nothing; the first one after it reads the failing source.
    text = await waitFor('a scrape past the cache to read the source', async () => {
      const t = await scrape();
      return reads > 1 ? t : undefined;
    });
    expect(reads).toBe(2);
    expect(text).toContain('payrecon_exceptions{type="STUCK",state="open"} 3');
    // The failure is counted while this scrape collects, so the next scrape shows it.
    text = await scrape();
    expect(text).toContain('payrecon_metrics_source_errors_total{source="database"} 1');
  });

  it('graphs balances in major units and counts the hooks it is given', async () => {
    const metrics = createMetrics({
      balances: async () => [
        { merchantAccount: 'main', currency: 'BRL', book: 'live', account: 'available', balance: 1234567n },
        { merchantAccount: 'main', currency: 'BRL', book: 'live', account: 'deposits', balance: -1234567n },
      ],
    });
    metrics.kafkaHooks.onPublished('provider.status.observed.v1', 3);
    metrics.kafkaHooks.onConsumed('provider.notification.received.v1', 'payrecon-status-fetcher', 2);
    metrics.providerCall({ operation: 'getDeposit', outcome: 'server_error', seconds: 0.2 });
    metrics.knownJobs(['settlement']);
    metrics.jobRun('settlement', 'failed', 1.5);
    // No verification yet: no figure (a 0 would read as a broken ledger).
    expect(await metrics.registry.metrics()).not.toContain('payrecon_ledger_verification');
    metrics.verified(false, new Date('2026-11-24T10:00:00Z'));
    metrics.alertsDispatched([{ type: 'LATE_REJECTION', severity: 'critical' }], { log: 1 });
    const text = await metrics.registry.metrics();
    expect(text).toContain(
      'payrecon_ledger_balance{merchant_account="main",currency="BRL",book="live",account="available"} 12345.67',
    );
    expect(text).toContain(
      'payrecon_ledger_balance{merchant_account="main",currency="BRL",book="live",account="deposits"} -12345.67',
    );
    expect(text).toContain('payrecon_events_published_total{topic="provider.status.observed.v1"} 3');
    expect(text).toContain(
      'payrecon_events_consumed_total{topic="provider.notification.received.v1",group="payrecon-status-fetcher"} 2',
    );
    expect(text).toContain(
      'payrecon_provider_request_duration_seconds_count{endpoint="getDeposit",outcome="server_error"} 1',
    );
    expect(text).toContain('payrecon_job_runs_total{job_name="settlement",outcome="failed"} 1');
    expect(text).toContain('payrecon_job_runs_total{job_name="settlement",outcome="succeeded"} 0');
    expect(text).toContain('payrecon_ledger_verification_ok 0');
    expect(text).toContain('payrecon_ledger_verification_timestamp_seconds 1795514400');
    expect(text).toContain('payrecon_alerts_raised_total{type="LATE_REJECTION",severity="critical"} 1');
    expect(text).toContain('payrecon_alerts_delivered_total{sink="log"} 1');
  });
});
