/**
 * Delivers alerts (`recon.alert.raised.v1`) to the sinks of the configuration: a Slack-compatible
 * incoming webhook, a generic JSON webhook, and the log. Each sink has a minimum severity and a rate
 * limit. Nothing is dropped: alerts over a sink's rate are folded into one digest message. Each
 * (alert, sink) pair is delivered once, recorded in `alert_deliveries`, so a replayed Kafka message
 * (the consumer is at-least-once) does not page anyone twice. A failing sink throws a retryable error
 * after the other sinks were served; the retry skips the sinks already done.
 */
import type { Kafka } from 'kafkajs';
import { request } from 'undici';
import { waitOutDatabaseOutages } from '../db/connection.ts';
import { deliveredAlertIds, recordAlertDeliveries } from '../db/runs/alert-deliveries.ts';
import type { Db } from '../db/schema.ts';
import { AppError } from '../domain/errors.ts';
import { SEVERITIES, type Severity, severityRank } from '../domain/exception-rules.ts';
import { formatAmount } from '../domain/money.ts';
import { type Publisher, type RunningConsumer, runBatchConsumer } from '../events/kafka.ts';
import type { AlertRaised } from '../events/payloads.ts';
import type { Serde } from '../events/serde.ts';
import { ALERT_TOPIC } from '../events/topics.ts';
import type { Logger } from '../logger.ts';

export type AlertSinkConfig =
  | { name: string; type: 'slack'; url: string; minSeverity: Severity; perMinute: number }
  | { name: string; type: 'webhook'; url: string; minSeverity: Severity; perMinute: number }
  | { name: string; type: 'log'; minSeverity: Severity };

export interface AlertDispatcherDeps {
  db: Db;
  sinks: readonly AlertSinkConfig[];
  logger: Logger;
  /** Per-call timeout of an HTTP sink, ms (default 10 s). */
  timeoutMs?: number;
  now?: () => number;
}

/** The alert as a sink sees it: amounts as decimal text, times as ISO text. */
export interface AlertJson {
  alert_id: string;
  type: string;
  severity: string;
  account: string;
  entity_kind: string | null;
  entity_id: string | null;
  amount: string | null;
  currency: string | null;
  message: string;
  raised_at: string;
  details: Record<string, unknown>;
}

export function alertToJson(alert: AlertRaised): AlertJson {
  return {
    alert_id: alert.alertId,
    type: alert.type,
    severity: alert.severity,
    account: alert.account,
    entity_kind: alert.entityKind,
    entity_id: alert.entityId,
    amount: alert.amount === null ? null : formatAmount(alert.amount),
    currency: alert.currency,
    message: alert.message,
    raised_at: alert.raisedAt.toISOString(),
    details: alert.details,
  };
}

/** One line a person reads: `[critical] LATE_REJECTION cashout main/8405147: ... (100.00 BRL)`. */
export function alertLine(alert: AlertRaised): string {
  const entity = alert.entityKind
    ? ` ${alert.entityKind} ${alert.account}/${alert.entityId}`
    : ` ${alert.account}`;
  const money =
    alert.amount === null ? '' : ` (${formatAmount(alert.amount)} ${alert.currency ?? ''})`.trimEnd();
  return `[${alert.severity}] ${alert.type}${entity}: ${alert.message}${money}`;
}

function severityOf(alert: AlertRaised): Severity {
  const s = alert.severity as string;
  if ((SEVERITIES as readonly string[]).includes(s)) return s as Severity;
  // Unknown severities are delivered as the highest rather than silently filtered out.
  return 'critical';
}

/** Token bucket: `perMinute` tokens, refilled continuously. */
class TokenBucket {
  private tokens: number;
  private last: number;
  constructor(
    private readonly perMinute: number,
    private readonly now: () => number,
  ) {
    this.tokens = perMinute;
    this.last = now();
  }
  private refill(): void {
    const t = this.now();
    this.tokens = Math.min(this.perMinute, this.tokens + ((t - this.last) / 60_000) * this.perMinute);
    this.last = t;
  }
  /** Takes up to `wanted` whole tokens; returns how many were taken. */
  take(wanted: number): number {
    this.refill();
    const n = Math.max(0, Math.min(wanted, Math.floor(this.tokens)));
    this.tokens -= n;
    return n;
  }
  /** Milliseconds until one token is available. */
  waitMs(): number {
    this.refill();
    return this.tokens >= 1 ? 0 : Math.ceil(((1 - this.tokens) / this.perMinute) * 60_000);
  }
}

export interface AlertDispatcher {
  /** Delivers a batch; throws a retryable AppError when a sink failed (after serving the others). */
  dispatch(
    alerts: readonly AlertRaised[],
  ): Promise<{ delivered: number; digests: number; perSink: Record<string, number> }>;
}

export function createAlertDispatcher(deps: AlertDispatcherDeps): AlertDispatcher {
  const now = deps.now ?? Date.now;
  const log = deps.logger.child({ module: 'alert-dispatcher' });
  const timeoutMs = deps.timeoutMs ?? 10_000;
  const buckets = new Map<string, TokenBucket>();
  // Alerts a sink has taken whose delivery record is not written yet (PostgreSQL went away in between):
  // the batch's retry records them instead of sending them again. Key: sink NUL alert id; value: digest.
  const unrecorded = new Map<string, boolean>();
  const sent = (sink: string, id: string) => `${sink}\u0000${id}`;
  async function record(sink: string, ids: readonly string[], digest: boolean): Promise<void> {
    for (const id of ids) unrecorded.set(sent(sink, id), digest);
    await recordAlertDeliveries(deps.db, sink, ids, digest);
    for (const id of ids) unrecorded.delete(sent(sink, id));
  }
  for (const sink of deps.sinks) {
    if (sink.type !== 'log') buckets.set(sink.name, new TokenBucket(Math.max(1, sink.perMinute), now));
  }

  async function post(sink: AlertSinkConfig & { url: string }, body: unknown): Promise<void> {
    let status: number;
    try {
      const res = await request(sink.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
      status = res.statusCode;
      await res.body.dump();
    } catch (err) {
      throw new AppError('PUBLISH_FAILED', `alert sink ${sink.name}: ${(err as Error).message}`, {
        cause: err,
      });
    }
    if (status < 200 || status >= 300) {
      throw new AppError('PUBLISH_FAILED', `alert sink ${sink.name} answered HTTP ${status}`, {
        details: { sink: sink.name, status },
      });
    }
  }

  function slackBody(alerts: readonly AlertRaised[]): unknown {
    if (alerts.length === 1) return { text: alertLine(alerts[0]!) };
    return {
      text: `${alerts.length} payrecon alerts:\n${alerts.map((a) => `• ${alertLine(a)}`).join('\n')}`,
    };
  }

  function webhookBody(alerts: readonly AlertRaised[]): unknown {
    return alerts.length === 1 ? alertToJson(alerts[0]!) : { digest: true, alerts: alerts.map(alertToJson) };
  }

  async function deliverTo(
    sink: AlertSinkConfig,
    alerts: readonly AlertRaised[],
  ): Promise<{ digests: number }> {
    if (sink.type === 'log') {
      for (const a of alerts) log.warn({ alert: alertToJson(a), sink: sink.name }, alertLine(a));
      await record(
        sink.name,
        alerts.map((a) => a.alertId),
        false,
      );
      return { digests: 0 };
    }
    const bucket = buckets.get(sink.name)!;
    const body = sink.type === 'slack' ? slackBody : webhookBody;
    let pending = [...alerts];
    let digests = 0;
    while (pending.length > 0) {
      const wait = bucket.waitMs();
      if (wait > 0) await new Promise((r) => setTimeout(r, Math.min(wait, 60_000)));
      const tokens = bucket.take(pending.length);
      if (tokens === 0) continue;
      // With enough tokens each alert goes alone; otherwise the last token carries a digest of the rest.
      const singles = tokens >= pending.length ? pending.length : tokens - 1;
      for (const a of pending.slice(0, singles)) {
        await post(sink, body([a]));
        await record(sink.name, [a.alertId], false);
      }
      const rest = pending.slice(singles);
      if (rest.length > 0) {
        await post(sink, body(rest));
        await record(
          sink.name,
          rest.map((a) => a.alertId),
          true,
        );
        digests += 1;
      }
      pending = [];
    }
    return { digests };
  }

  return {
    async dispatch(alerts) {
      // The same alert twice in one batch is one alert.
      const unique = [...new Map(alerts.map((a) => [a.alertId, a])).values()];
      let delivered = 0;
      let digests = 0;
      const perSink: Record<string, number> = {};
      const failures: AppError[] = [];
      for (const sink of deps.sinks) {
        const eligible = unique.filter((a) => severityRank(severityOf(a)) >= severityRank(sink.minSeverity));
        if (eligible.length === 0) continue;
        const done = await deliveredAlertIds(
          deps.db,
          sink.name,
          eligible.map((a) => a.alertId),
        );
        for (const digest of [false, true]) {
          const owed = eligible
            .filter((a) => !done.has(a.alertId) && unrecorded.get(sent(sink.name, a.alertId)) === digest)
            .map((a) => a.alertId);
          if (owed.length > 0) {
            await record(sink.name, owed, digest);
            for (const id of owed) done.add(id);
          }
        }
        const todo = eligible.filter((a) => !done.has(a.alertId));
        if (todo.length === 0) continue;
        try {
          const r = await deliverTo(sink, todo);
          delivered += todo.length;
          perSink[sink.name] = todo.length;
          digests += r.digests;
        } catch (err) {
          log.error({ err, sink: sink.name }, 'alert sink failed');
          failures.push(
            err instanceof AppError ? err : new AppError('PUBLISH_FAILED', String(err), { cause: err }),
          );
        }
      }
      if (failures.length > 0) {
        throw new AppError('PUBLISH_FAILED', failures.map((f) => f.message).join('; '), {
          cause: failures[0],
          retryable: true,
        });
      }
      return { delivered, digests, perSink };
    },
  };
}

export interface AlertConsumerDeps extends AlertDispatcherDeps {
  kafka: Kafka;
  serde: Serde;
  dlq: Publisher;
  /** Told of each batch dispatched: the alerts consumed and the deliveries per sink (metrics). */
  onDispatched?: (alerts: readonly AlertRaised[], perSink: Readonly<Record<string, number>>) => void;
}

export const ALERT_DISPATCHER_GROUP = 'payrecon-alert-dispatcher';

/**
 * Runs the dispatcher as a consumer of `recon.alert.raised.v1`; offsets commit after delivery. While
 * PostgreSQL (the delivery record) is unreachable the batch waits and retries, heartbeating, as the
 * reconciler's do: an outage is not a reason to dead-letter an alert (the chaos soak lost a late-rejection
 * alert to the DLQ that way during a PostgreSQL restart).
 */
export async function startAlertConsumer(deps: AlertConsumerDeps): Promise<RunningConsumer> {
  const dispatcher = createAlertDispatcher(deps);
  const log = deps.logger.child({ module: 'alert-dispatcher' });
  let stopping = false;
  const consumer = await runBatchConsumer({
    kafka: deps.kafka,
    groupId: ALERT_DISPATCHER_GROUP,
    topic: ALERT_TOPIC,
    serde: deps.serde,
    dlq: deps.dlq,
    logger: deps.logger,
    // One batch at a time: the rate limit and its digests are one budget across partitions.
    partitionsConsumedConcurrently: 1,
    handleBatch: async (messages, ctx) => {
      const result = await waitOutDatabaseOutages(() => dispatcher.dispatch(messages.map((m) => m.value)), {
        stopping: () => stopping,
        afterWait: () => ctx.heartbeat().catch(() => undefined),
        log,
      });
      deps.onDispatched?.(
        messages.map((m) => m.value),
        result.perSink,
      );
    },
  });
  return {
    consumer: consumer.consumer,
    ready: consumer.ready,
    async stop() {
      stopping = true;
      await consumer.stop();
    },
  };
}
