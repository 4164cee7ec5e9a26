/**
 * The status poller: asks the provider about entities whose next poll is due (the ledger keeps the
 * schedule in `poll_schedule.next_poll_at`, computed by `src/domain/polling.ts` each time it applies an
 * observation) and publishes what it reads as observations with source `poll`. A change seen only this
 * way is what the ledger raises as MISSED_NOTIFICATION.
 *
 * One round (`pollOnce`):
 * 1. pick up to `batchSize` due entities, most overdue first;
 * 2. push their next poll `leaseMs` ahead before calling anyone, so a slow round is never picked twice
 *    (by this loop or by another poller instance); applying the observation reschedules them properly;
 * 3. read their statuses with at most `concurrency` calls in flight;
 * 4. publish the observations in one acknowledged send.
 *
 * Each round also settles cashouts the merchant recorded with an unknown outcome (`unsettledCashouts`:
 * no cashout id, nothing observed under the external_id `outcomeUnknownGraceMs` after their creation):
 * they are looked up by external_id; one the provider holds is published as an observation (the ledger
 * links it to the intent by the external_id), one it does not hold completes the intent as declined (on
 * the intents topic). Each is asked at most once per `leaseMs`.
 *
 * A 429 stops the whole poller until the provider's Retry-After has passed (read from the answer's
 * header by an undici interceptor, since the client's error does not carry it); the entities not read
 * are deferred to then. Other failures defer just the entity (by `leaseMs`).
 */
import { Agent, DecoratorHandler, type Dispatcher } from 'undici';
import type { ProviderAccount } from '../config.ts';
import { entitiesDueForPolling } from '../db/polling/schedule.ts';
import { deferPolls } from '../db/polling/service.ts';
import { unsettledCashouts } from '../db/polling/unanswered-intents.ts';
import type { Db } from '../db/schema.ts';
import { DEFAULT_EXCEPTION_RULES } from '../domain/exception-rules.ts';
import type { Intent, Observation, ObservationSource } from '../domain/observation.ts';
import type { EntityKind } from '../domain/statuses.ts';
import type { Publisher } from '../events/kafka.ts';
import { INTENT_TOPIC, OBSERVATION_TOPIC } from '../events/topics.ts';
import { type Logger, logger as rootLogger } from '../logger.ts';
import { createProviderClient, type ProviderClientOptions, parseRetryAfter } from '../provider/client.ts';
import { ProviderError } from '../provider/errors.ts';
import {
  cashoutObservation,
  type EntityToRead,
  isNotFound,
  notFoundReason,
  readStatus,
  type StatusReader,
} from '../provider/to-observation.ts';

export interface StatusPollerDeps {
  db: Db;
  /** The provider client of an account (see `pollingClients`); undefined when not configured. */
  clientFor(account: string): StatusReader | undefined;
  publisher: Pick<Publisher, 'publish'>;
  /** Latest Retry-After seen on a 429, in ms (see `pollingClients`); null when none was sent. */
  lastRetryAfterMs?: () => number | null;
  /** Status calls in flight at once (default 8). */
  concurrency?: number;
  /** Entities per round (default 200). */
  batchSize?: number;
  /** How far a picked entity's next poll is pushed while it is being read (default 5 minutes). */
  leaseMs?: number;
  /** Pause after a 429 without a Retry-After (default 30 s). */
  rateLimitPauseMs?: number;
  /** Wait between rounds when the last one found less than a full batch (default 5 s). */
  idleMs?: number;
  /** Source of the observations (default `poll`; backfill uses `backfill`). */
  source?: ObservationSource;
  /**
   * Age of a cashout intent with an unknown outcome before it is looked up by external_id (default
   * `DEFAULT_EXCEPTION_RULES.outcomeUnknownGraceMs`); null: never.
   */
  outcomeUnknownGraceMs?: number | null;
  now?: () => Date;
  onRound?: (result: PollResult) => void;
  logger?: Logger;
}

export interface PollResult {
  /** Entities picked. */
  due: number;
  /** Observations published. */
  published: number;
  failed: number;
  /** Entities left unread because the provider answered 429. */
  rateLimited: number;
  /** True when the round did not run because the poller is paused by a 429. */
  paused: boolean;
  /** Cashouts with an unknown outcome looked up by external_id (found or not), when any. */
  cashoutsSettled?: number;
  /** When the poller may call the provider again (null: not paused). */
  pausedUntil: Date | null;
}

export interface StatusPoller {
  /** One round; safe to call while the loop runs (rounds never overlap). */
  pollOnce(): Promise<PollResult>;
  /** Stops the loop and waits for the round in progress. */
  stop(): Promise<void>;
}

function isRateLimited(err: unknown): boolean {
  return err instanceof ProviderError && (err.status === 429 || err.code === 'PROVIDER_RATE_LIMITED');
}

/** Reads the Retry-After of every 429 answer passing through the dispatcher. */
type DispatchHandler = Dispatcher.DispatchHandler;
type ResponseStart = Required<DispatchHandler>['onResponseStart'];

/**
 * Wraps a dispatch handler to read the Retry-After of 429 answers. undici's DecoratorHandler forwards
 * every callback in both handler styles; its type declarations predate the new ones, hence the casts.
 */
function recordingRetryAfter(handler: DispatchHandler, record: (ms: number | null) => void): DispatchHandler {
  const Decorator = DecoratorHandler as unknown as new (
    h: DispatchHandler,
  ) => DispatchHandler & {
    onResponseStart: ResponseStart;
  };
  const decorated = new Decorator(handler);
  const forward = decorated.onResponseStart.bind(decorated);
  decorated.onResponseStart = (controller, statusCode, headers, statusMessage) => {
    if (statusCode === 429) {
      const raw = headers['retry-after'];
      record(parseRetryAfter(Array.isArray(raw) ? raw[0] : raw, new Date()));
    }
    return forward(controller, statusCode, headers, statusMessage);
  };
  return decorated;
}

export interface PollingClients {
  clientFor(account: string): StatusReader | undefined;
  lastRetryAfterMs(): number | null;
  close(): Promise<void>;
}

/**
 * Provider clients for polling: a 429 is not waited out inside the client (`maxRetryAfterMs: 0`) but
 * surfaces at once, so the poller can pause as a whole; the Retry-After is recorded on the way.
 */
export function pollingClients(
  accounts: readonly ProviderAccount[],
  options: ProviderClientOptions = {},
): PollingClients {
  let last: number | null = null;
  const agent = new Agent();
  const dispatcher = agent.compose(
    (dispatch) => (opts, handler) =>
      dispatch(
        opts,
        recordingRetryAfter(handler, (ms) => {
          last = ms;
        }),
      ),
  );
  const clients = new Map(
    accounts.map((a) => [
      a.name,
      createProviderClient(a, { logger: rootLogger, ...options, maxRetryAfterMs: 0, dispatcher }),
    ]),
  );
  return {
    clientFor: (name) => clients.get(name),
    lastRetryAfterMs: () => last,
    close: () => agent.close(),
  };
}

export function startStatusPoller(deps: StatusPollerDeps, options: { loop?: boolean } = {}): StatusPoller {
  const concurrency = deps.concurrency ?? 8;
  const batchSize = deps.batchSize ?? 200;
  const leaseMs = deps.leaseMs ?? 5 * 60_000;
  const rateLimitPauseMs = deps.rateLimitPauseMs ?? 30_000;
  const idleMs = deps.idleMs ?? 5_000;
  const source = deps.source ?? 'poll';
  const outcomeGraceMs =
    deps.outcomeUnknownGraceMs === undefined
      ? DEFAULT_EXCEPTION_RULES.outcomeUnknownGraceMs
      : deps.outcomeUnknownGraceMs;
  /** Cashout intents looked up, by intent id: when they may be looked up again. */
  const lookedUp = new Map<string, number>();
  const now = deps.now ?? (() => new Date());
  const log = (deps.logger ?? rootLogger).child({ module: 'status-poller' });

  const state: { pausedUntil: Date | null } = { pausedUntil: null };
  let current: Promise<PollResult> | null = null;
  let stopped = false;
  let timer: NodeJS.Timeout | null = null;
  let wake: (() => void) | null = null;

  async function round(): Promise<PollResult> {
    const start = now();
    if (state.pausedUntil !== null && state.pausedUntil > start) {
      return {
        due: 0,
        published: 0,
        failed: 0,
        rateLimited: 0,
        paused: true,
        pausedUntil: state.pausedUntil,
      };
    }
    state.pausedUntil = null;
    const settled = await settleCashouts(start);
    const due = await entitiesDueForPolling(deps.db, start, batchSize);
    if (due.length === 0) {
      return {
        due: 0,
        published: 0,
        failed: 0,
        rateLimited: 0,
        paused: false,
        pausedUntil: null,
        ...(settled > 0 ? { cashoutsSettled: settled } : {}),
      };
    }
    const refs = due.map((d) => ({ merchantAccount: d.merchantAccount, kind: d.kind, entityId: d.entityId }));
    await deferPolls(deps.db, refs, new Date(start.getTime() + leaseMs));

    const observations: Observation[] = [];
    const failed: typeof refs = [];
    const unread: typeof refs = [];
    let next = 0;
    const worker = async () => {
      while (next < due.length) {
        const d = due[next++]!;
        const ref = { merchantAccount: d.merchantAccount, kind: d.kind as EntityKind, entityId: d.entityId };
        if (state.pausedUntil !== null) {
          unread.push(ref);
          continue;
        }
        const client = deps.clientFor(d.merchantAccount);
        if (!client) {
          log.warn({ account: d.merchantAccount }, 'entity of an account that is not configured; not polled');
          failed.push(ref);
          continue;
        }
        const entity: EntityToRead = {
          kind: d.kind,
          account: d.merchantAccount,
          entityId: d.entityId,
          externalRef: d.externalRef,
        };
        try {
          observations.push(await readStatus(client, entity, source, now));
        } catch (err) {
          if (isRateLimited(err)) {
            const wait = deps.lastRetryAfterMs?.() ?? null;
            const until = new Date(now().getTime() + (wait ?? rateLimitPauseMs));
            const paused = state.pausedUntil as Date | null;
            if (paused === null || until > paused) state.pausedUntil = until;
            unread.push(ref);
          } else {
            log.warn({ err, kind: d.kind, entityId: d.entityId, account: d.merchantAccount }, 'poll failed');
            failed.push(ref);
          }
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, due.length) }, worker));

    const { pausedUntil } = state;
    if (pausedUntil !== null && unread.length > 0) {
      // Ask again as soon as the provider allows, not a whole lease later.
      await deferPolls(deps.db, unread, pausedUntil);
      log.warn({ pausedUntil, unread: unread.length }, 'provider answered 429; poller paused');
    }
    await deps.publisher.publish(
      OBSERVATION_TOPIC,
      observations.map((value) => ({ value })),
    );
    const result: PollResult = {
      due: due.length,
      published: observations.length,
      failed: failed.length,
      rateLimited: unread.length,
      paused: false,
      pausedUntil,
      ...(settled > 0 ? { cashoutsSettled: settled } : {}),
    };
    log.debug(result, 'poll round');
    return result;
  }

  /**
   * Looks up by external_id the cashouts recorded with an unknown outcome past the grace, publishes what
   * the provider answered (an observation, or the intent completed as declined), and returns how many
   * got an answer.
   */
  async function settleCashouts(start: Date): Promise<number> {
    if (outcomeGraceMs === null) return 0;
    const t = start.getTime();
    if (lookedUp.size > 10_000) for (const [id, until] of lookedUp) if (until <= t) lookedUp.delete(id);
    const candidates = (await unsettledCashouts(deps.db, new Date(t - outcomeGraceMs), batchSize)).filter(
      (i) => (lookedUp.get(i.intentId) ?? 0) <= t,
    );
    const found: Observation[] = [];
    const refused: Intent[] = [];
    for (const intent of candidates) {
      const client = deps.clientFor(intent.account);
      if (!client || state.pausedUntil !== null) continue;
      lookedUp.set(intent.intentId, t + leaseMs);
      try {
        const answer = await client.getCashoutStatus({ external_id: intent.externalRef });
        found.push(
          cashoutObservation(answer, {
            account: intent.account,
            source,
            observedAt: now(),
            askedByExternalId: intent.externalRef,
          }),
        );
      } catch (err) {
        if (isNotFound(err)) {
          refused.push({
            ...intent,
            outcome: 'declined',
            response: {
              error: 'NOT_FOUND_AT_PROVIDER',
              lookedUpBy: 'external_id',
              reason: notFoundReason(err),
            },
          });
        } else if (isRateLimited(err)) {
          const wait = deps.lastRetryAfterMs?.() ?? null;
          state.pausedUntil = new Date(now().getTime() + (wait ?? rateLimitPauseMs));
          lookedUp.delete(intent.intentId);
        } else {
          log.warn(
            { err, externalId: intent.externalRef, account: intent.account },
            'look-up of a cashout with an unknown outcome failed; asked again later',
          );
        }
      }
    }
    if (found.length > 0) {
      await deps.publisher.publish(
        OBSERVATION_TOPIC,
        found.map((value) => ({ value })),
      );
    }
    if (refused.length > 0) {
      await deps.publisher.publish(
        INTENT_TOPIC,
        refused.map((value) => ({ value })),
      );
    }
    if (found.length + refused.length > 0) {
      log.info(
        { found: found.length, notFound: refused.length },
        'cashouts with an unknown outcome looked up by external_id',
      );
    }
    return found.length + refused.length;
  }

  async function pollOnce(): Promise<PollResult> {
    while (current) await current.catch(() => undefined);
    current = round();
    try {
      const result = await current;
      deps.onRound?.(result);
      return result;
    } finally {
      current = null;
    }
  }

  async function loop(): Promise<void> {
    while (!stopped) {
      let delay = idleMs;
      try {
        const result = await pollOnce();
        if (result.pausedUntil !== null) delay = Math.max(0, result.pausedUntil.getTime() - now().getTime());
        else if (result.due >= batchSize) delay = 0;
      } catch (err) {
        log.error({ err }, 'poll round failed; the picked entities are retried after their lease');
      }
      if (stopped) break;
      await new Promise<void>((resolve) => {
        wake = resolve;
        timer = setTimeout(resolve, delay);
      });
    }
  }

  const running = options.loop === false ? Promise.resolve() : loop();

  return {
    pollOnce,
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      wake?.();
      await running;
      while (current) await current.catch(() => undefined);
    },
  };
}
