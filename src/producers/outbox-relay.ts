/**
 * The outbox relay: publishes the alert rows the ledger wrote in its transactions (`outbox`) to
 * `recon.alert.raised.v1` and marks them published once Kafka acknowledged them. Rows are claimed with
 * `FOR UPDATE SKIP LOCKED`, so several relays never publish the same row at once. A crash between the
 * acknowledgement and the mark publishes the row again; the alert id is the same, and the dispatcher
 * delivers each alert id once.
 *
 * The outbox also names each import that brought new lines (a row written in the import's transaction):
 * the relay reads that import's lines with a cursor and publishes them to the kind's `imports.*.v1` topic
 * in batches of IMPORT_BATCH_LINES, then marks the row. A crash in between publishes the import again
 * under the same keys; matching is idempotent, so nothing is matched twice.
 */
import { type ImportLinesPayload, importLineBatches } from '../db/imports/events.ts';
import {
  claimUnpublished,
  claimUnpublishedEvents,
  markFailed,
  markPublished,
  type OutboxPayload,
} from '../db/runs/outbox.ts';
import type { Db } from '../db/schema.ts';
import { isRetryableAppError } from '../domain/errors.ts';
import { EXCEPTION_RULE_TEXT, SEVERITIES, type Severity } from '../domain/exception-rules.ts';
import { parseAmount } from '../domain/money.ts';
import { ENTITY_KINDS, type EntityKind } from '../domain/statuses.ts';
import type { Publisher } from '../events/kafka.ts';
import type { AlertRaised } from '../events/payloads.ts';
import { fromRecord } from '../events/records.ts';
import {
  ALERT_TOPIC,
  IMPORT_BATCH_LINES,
  IMPORT_TOPIC_NAMES,
  type ImportTopicName,
} from '../events/topics.ts';
import type { Logger } from '../logger.ts';

function text(v: unknown): string | null {
  return typeof v === 'string' && v.length > 0 ? v : null;
}

/** Maps an outbox row's payload to the alert event. Amounts in details stay exact (decimal text). */
export function alertFromOutbox(payload: OutboxPayload): AlertRaised {
  const details = payload.details ?? {};
  // The facts every exception carries (src/db/exceptions.ts): the provider's amount, else the intent's.
  const facts = (typeof details.facts === 'object' && details.facts !== null ? details.facts : {}) as Record<
    string,
    unknown
  >;
  const fromProvider = text(facts.providerAmount) !== null;
  const amountText =
    text(facts.providerAmount) ??
    text(facts.intentAmount) ??
    text(details.amount) ??
    text(details.providerAmount) ??
    text(details.provider_amount);
  const currency = fromProvider
    ? text(facts.providerCurrency)
    : (text(facts.intentCurrency) ?? text(details.currency));
  let amount: bigint | null = null;
  if (amountText) {
    try {
      amount = parseAmount(amountText, { allowNegative: true });
    } catch {
      amount = null;
    }
  }
  const kind = (ENTITY_KINDS as readonly string[]).includes(payload.kind ?? '')
    ? (payload.kind as EntityKind)
    : null;
  const severity = (SEVERITIES as readonly string[]).includes(payload.severity)
    ? (payload.severity as Severity)
    : 'critical';
  return {
    alertId: payload.alertId,
    type: payload.type,
    severity: severity as AlertRaised['severity'],
    account: payload.account,
    entityKind: kind,
    entityId: payload.entityId ?? null,
    amount,
    currency,
    message: (EXCEPTION_RULE_TEXT as Record<string, string>)[payload.type] ?? payload.type,
    raisedAt: new Date(payload.raisedAt),
    details,
  };
}

export interface OutboxRelayDeps {
  db: Db;
  publisher: Publisher;
  logger: Logger;
  /** Rows per publish (default 500). */
  batchSize?: number;
  /** Lines per message of an import topic (default IMPORT_BATCH_LINES). */
  importBatchLines?: number;
  /** Idle wait between empty polls, ms (default 250). */
  idleMs?: number;
}

export interface OutboxRelay {
  /** Publishes what is pending now; returns how many rows were published. */
  relayOnce(): Promise<number>;
  /** Publishes everything pending, then stops the loop. */
  stop(): Promise<void>;
}

export function startOutboxRelay(deps: OutboxRelayDeps, options: { loop?: boolean } = {}): OutboxRelay {
  const log = deps.logger.child({ module: 'outbox-relay' });
  const batchSize = deps.batchSize ?? 500;
  const importBatchLines = deps.importBatchLines ?? IMPORT_BATCH_LINES;
  const idleMs = deps.idleMs ?? 250;
  let running = options.loop ?? true;
  let wake: (() => void) | null = null;

  /**
   * Publishes the lines of the next pending import, a batch per message (a few in flight at once), in
   * the transaction that claimed its row; answers how many imports (0 or 1).
   */
  async function relayImport(): Promise<number> {
    return deps.db.transaction().execute(async (trx) => {
      const [row] = await claimUnpublishedEvents(trx, 1);
      if (!row) return 0;
      try {
        if (!(IMPORT_TOPIC_NAMES as readonly string[]).includes(row.topic)) {
          throw new Error(`outbox row ${row.id}: topic ${row.topic} is not an import topic`);
        }
        const topic = row.topic as ImportTopicName;
        const inFlight: Promise<void>[] = [];
        for await (const batch of importLineBatches(
          trx,
          row.payload as unknown as ImportLinesPayload,
          importBatchLines,
        )) {
          inFlight.push(deps.publisher.publish(topic, [{ value: fromRecord(topic, batch) }]));
          // The publisher sends what is waiting in one request; a few batches at a time bound memory.
          if (inFlight.length >= 8) await Promise.all(inFlight.splice(0));
        }
        await Promise.all(inFlight);
      } catch (err) {
        await markFailed(trx, [row.id], String((err as Error).message)).catch(() => undefined);
        throw err;
      }
      await markPublished(trx, [row.id]);
      return 1;
    });
  }

  async function relayOnce(): Promise<number> {
    const alerts = await relayAlerts();
    return alerts + (await relayImport());
  }

  async function relayAlerts(): Promise<number> {
    return deps.db.transaction().execute(async (trx) => {
      const rows = await claimUnpublished(trx, batchSize);
      if (rows.length === 0) return 0;
      try {
        // Keyed by the topic catalog (`<kind>:<account>:<id>`), like every other event of the entity.
        await deps.publisher.publish(
          ALERT_TOPIC,
          rows.map((r) => ({ value: alertFromOutbox(r.payload) })),
        );
      } catch (err) {
        await markFailed(
          trx,
          rows.map((r) => r.id),
          String((err as Error).message),
        );
        throw err;
      }
      await markPublished(
        trx,
        rows.map((r) => r.id),
      );
      return rows.length;
    });
  }

  const loop = (async () => {
    let failures = 0;
    while (running) {
      let more = false;
      try {
        const alerts = await relayAlerts();
        const imports = await relayImport();
        more = alerts >= batchSize || imports > 0;
        failures = 0;
      } catch (err) {
        failures += 1;
        log.warn({ err, failures, retryable: isRetryableAppError(err) }, 'outbox relay failed, will retry');
      }
      if (more) continue;
      const wait = failures > 0 ? Math.min(10_000, 250 * 2 ** Math.min(failures, 6)) : idleMs;
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, wait);
        wake = () => {
          clearTimeout(t);
          resolve();
        };
      });
      wake = null;
    }
  })();

  return {
    relayOnce,
    async stop() {
      running = false;
      (wake as (() => void) | null)?.();
      await loop;
      // Flush what is left so a clean stop leaves nothing behind.
      try {
        while ((await relayOnce()) > 0) {
          /* keep flushing */
        }
      } catch (err) {
        log.warn({ err }, 'outbox flush at stop failed; rows stay for the next start');
      }
    },
  };
}
