/**
 * Prometheus metrics of one payrecon process, served at `/metrics`. Counters and histograms are
 * updated by the adapters as they work; gauges that describe shared state (consumer lag, DLQ sizes,
 * open exceptions, poll backlog) are read when scraped, from Kafka and the ledger, so every process
 * reports the same truth.
 */
import type { Admin } from 'kafkajs';
import { type Kysely, sql } from 'kysely';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { Database } from './db/schema.ts';
import { dlqTopicOf, TOPIC_NAMES } from './events/topics.ts';

export interface Metrics {
  registry: Registry;
  eventsPublished: Counter<'topic'>;
  eventsConsumed: Counter<'topic'>;
  reconcileBatchSeconds: Histogram<'topic'>;
  webhookRequests: Counter<'kind' | 'outcome'>;
  webhookRejections: Counter<'reason'>;
  pollCalls: Counter<'outcome'>;
  alertsDelivered: Counter<'sink'>;
}

export interface MetricSources {
  db?: Kysely<Database>;
  admin?: Admin;
  /** Consumer groups whose lag is reported. */
  groups?: readonly string[];
}

export function createMetrics(sources: MetricSources = {}): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'payrecon_process_' });

  const metrics: Metrics = {
    registry,
    eventsPublished: new Counter({
      name: 'payrecon_events_published_total',
      help: 'Events published, per topic.',
      labelNames: ['topic'],
      registers: [registry],
    }),
    eventsConsumed: new Counter({
      name: 'payrecon_events_consumed_total',
      help: 'Events consumed and handled, per topic.',
      labelNames: ['topic'],
      registers: [registry],
    }),
    reconcileBatchSeconds: new Histogram({
      name: 'payrecon_reconcile_batch_seconds',
      help: 'Time to apply one consumed batch to the ledger (one transaction).',
      labelNames: ['topic'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    webhookRequests: new Counter({
      name: 'payrecon_webhook_requests_total',
      help: 'Webhook requests by notification kind and outcome (accepted, rejected, unavailable).',
      labelNames: ['kind', 'outcome'],
      registers: [registry],
    }),
    webhookRejections: new Counter({
      name: 'payrecon_webhook_rejections_total',
      help: 'Webhooks refused with a 4xx, by reason.',
      labelNames: ['reason'],
      registers: [registry],
    }),
    pollCalls: new Counter({
      name: 'payrecon_poll_calls_total',
      help: 'Provider status calls made by the poller, by outcome.',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    alertsDelivered: new Counter({
      name: 'payrecon_alerts_delivered_total',
      help: 'Alerts delivered, per sink.',
      labelNames: ['sink'],
      registers: [registry],
    }),
  };

  const { db, admin } = sources;
  if (db) {
    new Gauge({
      name: 'payrecon_exceptions_open',
      help: 'Open or acknowledged exceptions, by type.',
      labelNames: ['type'],
      registers: [registry],
      async collect() {
        this.reset();
        const { rows } = await sql<{ type: string; n: string }>`
          SELECT type, count(*)::text AS n FROM exceptions WHERE state <> 'resolved' GROUP BY type`.execute(
          db,
        );
        for (const r of rows) this.set({ type: r.type }, Number(r.n));
      },
    });
    new Gauge({
      name: 'payrecon_poll_backlog',
      help: 'Entities whose next poll is due now.',
      registers: [registry],
      async collect() {
        const { rows } = await sql<{ n: string }>`
          SELECT count(*)::text AS n FROM mirrors WHERE next_poll_at IS NOT NULL AND next_poll_at <= now()`.execute(
          db,
        );
        this.set(Number(rows[0]?.n ?? 0));
      },
    });
  }
  if (admin) {
    new Gauge({
      name: 'payrecon_dlq_messages',
      help: 'Messages in each dead-letter topic (sum of partition end offsets).',
      labelNames: ['topic'],
      registers: [registry],
      async collect() {
        this.reset();
        for (const t of TOPIC_NAMES) {
          const dlq = dlqTopicOf(t);
          try {
            const offsets = await admin.fetchTopicOffsets(dlq);
            const total = offsets.reduce((n, p) => n + Number(p.high) - Number(p.low), 0);
            this.set({ topic: dlq }, total);
          } catch {
            // The topic may not exist yet.
          }
        }
      },
    });
    const groups = sources.groups ?? [];
    new Gauge({
      name: 'payrecon_consumer_lag',
      help: 'Messages not yet committed by a consumer group, per topic.',
      labelNames: ['group', 'topic'],
      registers: [registry],
      async collect() {
        this.reset();
        for (const groupId of groups) {
          try {
            const committed = await admin.fetchOffsets({ groupId });
            for (const t of committed) {
              const ends = await admin.fetchTopicOffsets(t.topic);
              let lag = 0;
              for (const p of t.partitions) {
                const end = Number(ends.find((e) => e.partition === p.partition)?.high ?? 0);
                const at = Number(p.offset);
                lag += Math.max(0, end - Math.max(at, 0));
              }
              this.set({ group: groupId, topic: t.topic }, lag);
            }
          } catch {
            // The group may not exist yet.
          }
        }
      },
    });
  }
  return metrics;
}
