/**
 * Prometheus metrics of one payrecon process, served at `/metrics`. Every name starts with `payrecon_`
 * once (the process and Node.js defaults included: `payrecon_process_cpu_seconds_total`), durations
 * are `_seconds`, counters `_total`; docs/operations.md lists them all.
 *
 * Nothing in the domain imports this module: the parts take hooks (`kafkaHooks` for every topic
 * published and consumed, `providerCall` for the provider client, `jobRun` for the scheduler, ...)
 * that the composition (`src/infrastructure.ts`, `src/services.ts`) fills from here. Gauges that
 * describe shared state are read when scraped: from
 * the ledger database (balances, exceptions, poll backlog; cached `cacheMs`, 30 s by default, so a busy
 * scraper does not sum the ledger on every scrape) and from Kafka (DLQ sizes and the lag of the consumer
 * groups this process runs, cached 5 s). A source that fails keeps its last figures and counts
 * `payrecon_metrics_source_errors_total`.
 *
 * Balances are gauges of major units: Prometheus keeps float64, so a balance beyond 2^53 minor units is
 * graphed to the nearest representable value; the exact figures are the ledger's.
 */
import type { Admin } from 'kafkajs';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { EXCEPTION_TYPES } from './domain/exception-rules.ts';
import { formatAmount, type Minor } from './domain/money.ts';

/** Outcome of a job run, as the scheduler reports it. */
export type JobOutcome = 'succeeded' | 'failed';

export interface Metrics {
  registry: Registry;
  eventsPublished: Counter<'topic'>;
  eventsConsumed: Counter<'topic' | 'group'>;
  reconcileBatchSeconds: Histogram<'topic'>;
  webhookRequests: Counter<'kind' | 'outcome'>;
  webhookRejections: Counter<'reason'>;
  pollCalls: Counter<'outcome'>;
  providerRequestSeconds: Histogram<'endpoint' | 'outcome'>;
  alertsRaised: Counter<'type' | 'severity'>;
  alertsDelivered: Counter<'sink'>;
  jobRuns: Counter<'job_name' | 'outcome'>;
  verificationOk: Gauge;
  verificationTime: Gauge;
  /** Hooks for `instrumentKafka` (src/events/kafka.ts): counts and the groups whose lag is reported. */
  kafkaHooks: {
    onPublished(topic: string, count: number): void;
    onConsumed(topic: string, groupId: string, count: number): void;
    onGroup(groupId: string, topics: readonly string[]): void;
  };
  /** Hook of the provider client (`onCall`). */
  providerCall(call: { operation: string; outcome: string; seconds: number }): void;
  /** Hook of the job scheduler (`onRun`). */
  jobRun(job: string, outcome: JobOutcome, seconds: number): void;
  /** Known jobs start at zero, so a rule sees a first failure as an increase. */
  knownJobs(jobs: readonly string[]): void;
  /** The result of a ledger verification. */
  verified(ok: boolean, at?: Date): void;
  /** Alerts consumed by the dispatcher, and its deliveries per sink. */
  alertsDispatched(
    alerts: readonly { type: string; severity: string }[],
    perSink: Readonly<Record<string, number>>,
  ): void;
  /** Reports the lag of `groupId` on `topics` (each consuming part reports its own groups). */
  watchGroup(groupId: string, topics?: readonly string[]): void;
}

/** One ledger account's balance (src/db/queries.ts `balances`). */
export interface BalanceFigure {
  merchantAccount: string;
  currency: string;
  book: string;
  account: string;
  balance: Minor;
}

/** Exceptions of one type in one state (src/db/metrics-queries.ts `exceptionFigures`). */
export interface ExceptionFigure {
  type: string;
  state: string;
  count: number;
  oldestAgeSeconds: number;
  overdue: number;
}

/** Where the scraped gauges come from; the wiring gives the database readers (SQL lives in src/db). */
export interface MetricSources {
  /** Every ledger account's balance. */
  balances?: () => Promise<readonly BalanceFigure[]>;
  /** Exceptions by type and state, overdue counted against the service-level table. */
  exceptions?: () => Promise<readonly ExceptionFigure[]>;
  /** Entities whose next poll is due. */
  pollBacklog?: () => Promise<number>;
  admin?: Pick<Admin, 'fetchTopicOffsets' | 'fetchOffsets'>;
  /** The dead-letter topics whose sizes are reported (with `admin`). */
  dlqTopics?: readonly string[];
  /** Consumer groups whose lag is reported, besides those `watchGroup` and `kafkaHooks` add. */
  groups?: readonly string[];
  /** The default service level of an unresolved exception, minutes (default 1440). */
  exceptionSlaMinutes?: number;
  /** How long figures read from the database are reused, ms (default 30 s). */
  cacheMs?: number;
  /** How long figures read from Kafka are reused, ms (default 5 s). */
  kafkaCacheMs?: number;
}

/** Buckets of provider calls and ledger batches, seconds. */
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** A reader whose result is reused for `ttlMs`; concurrent scrapes share one read; errors keep the last. */
function cached<T>(ttlMs: number, read: () => Promise<T>, onError: () => void): () => Promise<T | null> {
  let value: T | null = null;
  let at = 0;
  let inFlight: Promise<T | null> | null = null;
  return () => {
    if (value !== null && Date.now() - at < ttlMs) return Promise.resolve(value);
    inFlight ??= read()
      .then(
        (v) => {
          value = v;
          at = Date.now();
          return v;
        },
        () => {
          onError();
          return value;
        },
      )
      .finally(() => {
        inFlight = null;
      });
    return inFlight;
  };
}

export function createMetrics(sources: MetricSources = {}): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'payrecon_' });
  const registers = [registry];

  const sourceErrors = new Counter({
    name: 'payrecon_metrics_source_errors_total',
    help: 'Scrapes whose figures could not be read from a source (database, kafka); the last figures were served.',
    labelNames: ['source'],
    registers,
  });

  const eventsPublished = new Counter({
    name: 'payrecon_events_published_total',
    help: 'Messages acknowledged by Kafka, per topic (DLQ topics included).',
    labelNames: ['topic'],
    registers,
  });
  const eventsConsumed = new Counter({
    name: 'payrecon_events_consumed_total',
    help: 'Messages processed by a consumer group of this process, per topic and group.',
    labelNames: ['topic', 'group'],
    registers,
  });
  // Registered at the first verification: before it, a 0 would read as "broken" (and 1970).
  const verificationOk = new Gauge({
    name: 'payrecon_ledger_verification_ok',
    help: 'Result of the last ledger verification run by this process: 1 sound, 0 an invariant broken.',
    registers: [],
  });
  const verificationTime = new Gauge({
    name: 'payrecon_ledger_verification_timestamp_seconds',
    help: 'When the last ledger verification run by this process finished (Unix time).',
    registers: [],
  });
  const providerRequestSeconds = new Histogram({
    name: 'payrecon_provider_request_duration_seconds',
    help: 'Provider HTTP calls by endpoint (client operation) and outcome (ok, client_error, rate_limited, server_error, timeout, network_error).',
    labelNames: ['endpoint', 'outcome'],
    buckets: LATENCY_BUCKETS,
    registers,
  });
  const alertsRaised = new Counter({
    name: 'payrecon_alerts_raised_total',
    help: 'Alerts consumed from recon.alert.raised.v1, by type and severity.',
    labelNames: ['type', 'severity'],
    registers,
  });
  const alertsDelivered = new Counter({
    name: 'payrecon_alerts_delivered_total',
    help: 'Alerts delivered, per sink.',
    labelNames: ['sink'],
    registers,
  });
  const jobRuns = new Counter({
    name: 'payrecon_job_runs_total',
    help: 'Job runs this process claimed and finished, by job and outcome (succeeded, failed); `job_name`, as `job` is the scrape job.',
    labelNames: ['job_name', 'outcome'],
    registers,
  });

  const jobRunSeconds = new Histogram({
    name: 'payrecon_job_run_duration_seconds',
    help: 'Duration of the job runs this process finished, by job.',
    labelNames: ['job_name'],
    buckets: [0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600],
    registers,
  });

  const groups = new Map<string, Set<string>>();
  const watchGroup = (groupId: string, topics: readonly string[] = []) => {
    const known = groups.get(groupId) ?? new Set<string>();
    for (const t of topics) known.add(t);
    groups.set(groupId, known);
  };
  for (const g of sources.groups ?? []) watchGroup(g);

  const metrics: Metrics = {
    registry,
    eventsPublished,
    eventsConsumed,
    reconcileBatchSeconds: new Histogram({
      name: 'payrecon_reconcile_batch_duration_seconds',
      help: 'Time to apply one consumed batch to the ledger (one transaction), per topic.',
      labelNames: ['topic'],
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    webhookRequests: new Counter({
      name: 'payrecon_webhook_requests_total',
      help: 'Webhook notifications accepted and published, by kind (outcome accepted; refusals are payrecon_webhook_rejections_total).',
      labelNames: ['kind', 'outcome'],
      registers,
    }),
    webhookRejections: new Counter({
      name: 'payrecon_webhook_rejections_total',
      help: 'Webhooks refused with a 4xx, by reason.',
      labelNames: ['reason'],
      registers,
    }),
    pollCalls: new Counter({
      name: 'payrecon_poll_calls_total',
      help: 'Status reads made by the poller, by outcome (published, failed).',
      labelNames: ['outcome'],
      registers,
    }),
    providerRequestSeconds,
    alertsRaised,
    alertsDelivered,
    jobRuns,
    verificationOk,
    verificationTime,
    kafkaHooks: {
      onPublished: (topic, count) => eventsPublished.inc({ topic }, count),
      onConsumed: (topic, group, count) => eventsConsumed.inc({ topic, group }, count),
      onGroup: (groupId, topics) => watchGroup(groupId, topics),
    },
    providerCall: ({ operation, outcome, seconds }) =>
      providerRequestSeconds.observe({ endpoint: operation, outcome }, seconds),
    jobRun: (job, outcome, seconds) => {
      jobRuns.inc({ job_name: job, outcome });
      jobRunSeconds.observe({ job_name: job }, seconds);
    },
    knownJobs: (jobs) => {
      for (const job of jobs)
        for (const outcome of ['succeeded', 'failed']) jobRuns.inc({ job_name: job, outcome }, 0);
    },
    verified: (ok, at = new Date()) => {
      if (!registry.getSingleMetric('payrecon_ledger_verification_ok')) {
        registry.registerMetric(verificationOk);
        registry.registerMetric(verificationTime);
      }
      verificationOk.set(ok ? 1 : 0);
      verificationTime.set(at.getTime() / 1000);
    },
    alertsDispatched: (alerts, perSink) => {
      for (const a of alerts) alertsRaised.inc({ type: a.type, severity: a.severity });
      for (const [sink, n] of Object.entries(perSink)) alertsDelivered.inc({ sink }, n);
    },
    watchGroup,
  };

  const { admin } = sources;
  const cacheMs = sources.cacheMs ?? 30_000;
  const slaMinutes = sources.exceptionSlaMinutes ?? 1440;
  const dbError = () => sourceErrors.inc({ source: 'database' });
  if (sources.balances) {
    const ledger = cached(cacheMs, sources.balances, dbError);
    new Gauge({
      name: 'payrecon_ledger_balance',
      help: 'Balance of each ledger account in major units, by merchant account, currency, book and account (float64: for graphs; the ledger holds the exact figure).',
      labelNames: ['merchant_account', 'currency', 'book', 'account'],
      registers,
      async collect() {
        const rows = await ledger();
        if (rows === null) return;
        this.reset();
        for (const r of rows) {
          this.set(
            { merchant_account: r.merchantAccount, currency: r.currency, book: r.book, account: r.account },
            Number(formatAmount(r.balance)),
          );
        }
      },
    });
  }
  if (sources.exceptions) {
    const exceptions = cached(cacheMs, sources.exceptions, dbError);
    new Gauge({
      name: 'payrecon_exceptions',
      help: 'Exceptions by type and state (open, acknowledged, resolved, ...).',
      labelNames: ['type', 'state'],
      registers,
      async collect() {
        const rows = await exceptions();
        if (rows === null) return;
        this.reset();
        for (const r of rows) this.set({ type: r.type, state: r.state }, r.count);
      },
    });
    new Gauge({
      name: 'payrecon_exceptions_oldest_age_seconds',
      help: 'Age of the oldest unresolved exception, by type and state (since first seen).',
      labelNames: ['type', 'state'],
      registers,
      async collect() {
        const rows = await exceptions();
        if (rows === null) return;
        this.reset();
        for (const r of rows) {
          if (r.state !== 'resolved') this.set({ type: r.type, state: r.state }, r.oldestAgeSeconds);
        }
      },
    });
    new Gauge({
      name: 'payrecon_exceptions_overdue',
      help: 'Unresolved exceptions past the due time of their service level (PAYRECON_EXCEPTION_SLA rules, else PAYRECON_EXCEPTION_SLA_MINUTES), by type.',
      labelNames: ['type'],
      registers,
      async collect() {
        const rows = await exceptions();
        if (rows === null) return;
        this.reset();
        // Every known type is reported, zero included, so a rule sees the first overdue one as a change.
        const byType = new Map<string, number>(EXCEPTION_TYPES.map((t) => [t, 0]));
        for (const r of rows) byType.set(r.type, (byType.get(r.type) ?? 0) + r.overdue);
        for (const [type, n] of byType) this.set({ type }, n);
      },
    });
    new Gauge({
      name: 'payrecon_exceptions_sla_seconds',
      help: 'The default service level of an unresolved exception no PAYRECON_EXCEPTION_SLA rule matches (PAYRECON_EXCEPTION_SLA_MINUTES).',
      registers,
    }).set(slaMinutes * 60);
  }
  if (sources.pollBacklog) {
    const backlog = cached(cacheMs, sources.pollBacklog, dbError);
    new Gauge({
      name: 'payrecon_poll_backlog',
      help: 'Entities whose next poll is due now.',
      registers,
      async collect() {
        const n = await backlog();
        if (n !== null) this.set(n);
      },
    });
  }

  if (admin) {
    const kafkaCacheMs = sources.kafkaCacheMs ?? 5_000;
    const kafkaError = () => sourceErrors.inc({ source: 'kafka' });
    const dlqSizes = cached(
      kafkaCacheMs,
      async () => {
        const sizes: { topic: string; n: number }[] = [];
        for (const dlq of sources.dlqTopics ?? []) {
          try {
            const offsets = await admin.fetchTopicOffsets(dlq);
            sizes.push({ topic: dlq, n: offsets.reduce((n, p) => n + Number(p.high) - Number(p.low), 0) });
          } catch {
            // The topic may not exist yet.
          }
        }
        return sizes;
      },
      kafkaError,
    );
    const lags = cached(
      kafkaCacheMs,
      async () => {
        const out: { group: string; topic: string; partition: number; lag: number }[] = [];
        const ends = new Map<string, Awaited<ReturnType<Admin['fetchTopicOffsets']>>>();
        const endsOf = async (topic: string) => {
          let e = ends.get(topic);
          if (!e) {
            e = await admin.fetchTopicOffsets(topic);
            ends.set(topic, e);
          }
          return e;
        };
        for (const [groupId, topics] of groups) {
          const committed =
            topics.size > 0
              ? await admin.fetchOffsets({ groupId, topics: [...topics] })
              : await admin.fetchOffsets({ groupId });
          for (const t of committed) {
            const topicEnds = await endsOf(t.topic);
            for (const p of topicEnds) {
              const at = Number(t.partitions.find((c) => c.partition === p.partition)?.offset ?? -1);
              const from = at >= 0 ? at : Number(p.low);
              out.push({
                group: groupId,
                topic: t.topic,
                partition: p.partition,
                lag: Math.max(0, Number(p.high) - from),
              });
            }
          }
        }
        return out;
      },
      kafkaError,
    );
    new Gauge({
      name: 'payrecon_dlq_messages',
      help: 'Messages in each dead-letter topic (sum over partitions of end minus start offset).',
      labelNames: ['topic'],
      registers,
      async collect() {
        const sizes = await dlqSizes();
        if (sizes === null) return;
        this.reset();
        for (const s of sizes) this.set({ topic: s.topic }, s.n);
      },
    });
    new Gauge({
      name: 'payrecon_consumer_lag',
      help: 'Messages not yet committed by a consumer group of this process, per topic and partition.',
      labelNames: ['group', 'topic', 'partition'],
      registers,
      async collect() {
        const rows = await lags();
        if (rows === null) return;
        this.reset();
        for (const r of rows)
          this.set({ group: r.group, topic: r.topic, partition: String(r.partition) }, r.lag);
      },
    });
  }
  return metrics;
}
