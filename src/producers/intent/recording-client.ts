/**
 * `recordingClient(client, onIntent)` wraps a `ProviderClient` (or the sandbox traffic generator's
 * `TrafficClient`): each create* call records its intent ahead (write-ahead), goes to the provider, then
 * records the intent again, completed with the provider's answer (and the call's result or error goes to
 * the caller). A creation whose outcome stays unknown (timeout, 5xx, connection reset after every retry)
 * is settled in the background: the same request is sent again until the provider answers, and the
 * intent is recorded a third time with that answer.
 */
import { createHash, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { AppError } from '../../domain/errors.ts';
import type { Intent, IntentOperation } from '../../domain/observation.ts';
import type { Logger } from '../../logger.ts';
import type { IdempotentCallOptions, ProviderClient } from '../../provider/client.ts';
import { ProviderError } from '../../provider/errors.ts';
import type { CashoutCreateResponse } from '../../provider/schemas.ts';
import {
  type CreationOutcome,
  failureOutcome,
  intentFromCardDepositCreation,
  intentFromCashoutCreation,
  intentFromDepositCreation,
  intentFromRefundCreation,
} from './build.ts';

export type IntentSink = (intent: Intent) => void | Promise<void>;

/** The creation calls of a `ProviderClient` (the sandbox traffic generator's `TrafficClient` too). */
export type CreatingClient = Pick<
  ProviderClient,
  'createDeposit' | 'createCardDeposit' | 'createCashout' | 'createRefund'
>;

/** How an unknown outcome is settled: replays with back-off (doubling, capped) within a window. */
export interface SettleOptions {
  /** How long after the creation its request may still be sent again; 0: never settle. */
  windowMs: number;
  /** Wait before the first replay (default 1 s); each next wait doubles, up to `maxDelayMs`. */
  firstDelayMs?: number;
  /** Longest wait between two replays (default 60 s). */
  maxDelayMs?: number;
}

export const DEFAULT_SETTLE: Required<SettleOptions> = {
  windowMs: 15 * 60_000,
  firstDelayMs: 1_000,
  maxDelayMs: 60_000,
};

export interface RecordingOptions {
  /** Account name of the intents; defaults to the client's `account`. */
  account?: string;
  /**
   * The refunded deposit's currency, when a refund answer does not carry it; defaults to reading the
   * deposit through the client's `getDeposit` when it has one.
   */
  depositCurrency?: (depositId: string) => Promise<string | undefined> | string | undefined;
  /** Settling of unknown outcomes (default `DEFAULT_SETTLE`); `{ windowMs: 0 }` turns it off. */
  settle?: SettleOptions;
  /** Where settling is logged (a creation still unknown at the end of its window is a warning). */
  logger?: Pick<Logger, 'info' | 'warn'>;
}

/** What a replay learnt: the provider's answer, its refusal, or nothing yet. */
type Replayed<R> = { response: R } | { error: unknown } | { unknown: unknown };

/**
 * The intent id of a creation sent with an idempotency key: a UUID derived from the account, the
 * operation and the key, so sending the same creation again (after a restart, by whoever keeps the key)
 * completes the same intent rather than recording a second one. (A cashout has no key: sent again, it is
 * refused with 511 and that refusal is a record of its own; its first intent is matched by external_id.)
 */
export function intentIdFor(account: string, operation: IntentOperation, key: string): string {
  const h = createHash('sha256').update(`${account}\u0000${operation}\u0000${key}`).digest('hex');
  // RFC 4122 layout: version 8 (vendor-specific), variant 10.
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-${((Number.parseInt(h[16]!, 16) & 0x3) | 0x8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/**
 * Wraps a client so that its creations record their intent, under one intent id. Before the call, the
 * pending intent (outcome `unknown`, no provider id) keyed by the merchant's reference (invoice_id,
 * external_id; for a refund its deposit and amount, `refundWriteAheadRef`) goes to `onIntent`; then the
 * provider is called, and the intent completed with its answer (created with the provider's id, declined,
 * or unknown) goes to `onIntent` before the caller sees the result or the error. The ledger completes the
 * pending record with the later one (`insertIntents`), and a pending record left alone (the process died
 * between the provider's answer and the second record) is matched by the merchant's reference when the
 * entity is first observed; one whose creation never reached the provider matches nothing and raises
 * nothing.
 *
 * Deposit, card deposit and refund creations carry an idempotency key fixed before the first attempt
 * (the caller's `idempotencyKey`, else a new UUID), and their intent id derives from it (`intentIdFor`). When the outcome stays unknown, the caller gets
 * its error at once and the wrapper, while the process lives, sends the same request with the same key
 * again (back-off within `settle.windowMs`): the provider answers a replay with the entity it created,
 * or creates it now if the first request never reached it (the caller was told the outcome is unknown,
 * not that nothing happened), or refuses it; that answer completes the intent. A cashout is sent again
 * with `resend` (the provider client then resolves a 511, external_id taken, by looking the external_id
 * up). The request, card data included, stays in this process's memory only.
 */
export function recordingClient<C extends CreatingClient>(
  client: C,
  onIntent: IntentSink,
  options: RecordingOptions = {},
): C {
  const account = options.account ?? (client as Partial<ProviderClient>).account;
  if (!account) throw new AppError('CONFIG_INVALID', 'recordingClient: the account name is required');
  const settle = { ...DEFAULT_SETTLE, ...(options.settle ?? {}) };
  const log = options.logger;

  async function record<R>(
    operation: IntentOperation,
    key: string | null,
    call: () => Promise<R>,
    build: (o: CreationOutcome<R>) => Intent | Promise<Intent>,
    replay: (() => Promise<Replayed<R>>) | null,
    writeAhead = true,
  ) {
    const ids = {
      intentId: key === null ? randomUUID() : intentIdFor(account!, operation, key),
      createdAt: new Date(),
    };
    if (writeAhead) await onIntent(await build(ids));
    let response: R;
    try {
      response = await call();
    } catch (error) {
      await onIntent(await build({ ...ids, error }));
      if (replay && failureOutcome(error) === 'unknown' && settle.windowMs > 0) {
        void settleLater(operation, ids, build, replay).catch((err: unknown) =>
          log?.warn({ operation, intentId: ids.intentId, err }, 'settling a creation failed'),
        );
      }
      throw error;
    }
    await onIntent(await build({ ...ids, response }));
    return response;
  }

  async function settleLater<R>(
    operation: IntentOperation,
    ids: { intentId: string; createdAt: Date },
    build: (o: CreationOutcome<R>) => Intent | Promise<Intent>,
    replay: () => Promise<Replayed<R>>,
  ): Promise<void> {
    const deadline = ids.createdAt.getTime() + settle.windowMs;
    let delay = settle.firstDelayMs;
    let tries = 0;
    let last: unknown;
    while (Date.now() + delay <= deadline) {
      // Unref'd: a settling creation never keeps the process alive.
      await sleep(delay, undefined, { ref: false });
      tries++;
      const got = await replay();
      if ('response' in got) {
        await onIntent(await build({ ...ids, response: got.response }));
        log?.info({ operation, intentId: ids.intentId, tries }, 'creation settled: the provider has it');
        return;
      }
      if ('error' in got) {
        await onIntent(await build({ ...ids, error: got.error }));
        log?.info({ operation, intentId: ids.intentId, tries }, 'creation settled: the provider refused it');
        return;
      }
      last = got.unknown;
      delay = Math.min(delay * 2, settle.maxDelayMs);
    }
    log?.warn(
      {
        operation,
        intentId: ids.intentId,
        tries,
        windowMs: settle.windowMs,
        code: last instanceof AppError ? last.code : undefined,
      },
      'creation outcome still unknown at the end of its settle window; the ledger resolves it',
    );
  }

  /** One replay of an idempotent creation: same request, same key. */
  const replayOf =
    <R>(call: () => Promise<R>) =>
    async (): Promise<Replayed<R>> => {
      try {
        return { response: await call() };
      } catch (error) {
        // 104: the key names another request (not ours to settle); keep the outcome unknown.
        if (error instanceof ProviderError && error.providerCode === 104) return { unknown: error };
        return failureOutcome(error) === 'unknown' ? { unknown: error } : { error };
      }
    };

  const withKey = (opts: IdempotentCallOptions | undefined) => {
    const key = opts?.idempotencyKey ?? randomUUID();
    return { key, opts: { ...(opts ?? {}), idempotencyKey: key } };
  };

  const getDeposit = (client as Partial<ProviderClient>).getDeposit?.bind(client);
  const depositCurrency = async (id: string): Promise<string | undefined> => {
    if (options.depositCurrency) return options.depositCurrency(id);
    return getDeposit ? (await getDeposit(id)).currency : undefined;
  };
  const wrapped: CreatingClient = {
    createDeposit: (input, given) => {
      const { key, opts } = withKey(given);
      const call = () => client.createDeposit(input, opts);
      return record(
        'deposit',
        key,
        call,
        (o) => intentFromDepositCreation(account, input, o),
        replayOf(call),
      );
    },
    createCardDeposit: (input, given) => {
      const { key, opts } = withKey(given);
      const call = () => client.createCardDeposit(input, opts);
      return record(
        'card_deposit',
        key,
        call,
        (o) => intentFromCardDepositCreation(account, input, o),
        replayOf(call),
      );
    },
    createCashout: (input, opts) => {
      const call = () => client.createCashout(input, opts);
      // Sent again as a resend: a 511 (the external_id is taken) is resolved by looking it up.
      const resend = replayOf(() => client.createCashout(input, { ...(opts ?? {}), resend: true }));
      const replay = async (): Promise<Replayed<CashoutCreateResponse>> => {
        const got = await resend();
        // A 511 whose look-up failed: the cashout exists; ask again later.
        if ('error' in got && got.error instanceof ProviderError && got.error.providerCode === 511) {
          return { unknown: got.error };
        }
        return got;
      };
      return record('cashout', null, call, (o) => intentFromCashoutCreation(account, input, o), replay);
    },
    createRefund: (input, given) => {
      const { key, opts } = withKey(given);
      const call = () => client.createRefund(input, opts);
      let currency: string | undefined;
      return record(
        'refund',
        key,
        call,
        async (o) => {
          currency =
            o.response?.refund_info?.currency ??
            currency ??
            (await depositCurrency(String(input.deposit_id)));
          return intentFromRefundCreation(account, input, { ...o, ...(currency ? { currency } : {}) });
        },
        replayOf(call),
        // A full refund (no amount) has no reference its readings repeat until the provider answers.
        input.amount !== undefined && input.amount !== null,
      );
    },
  };
  // Keep every other member (status calls, `account`) of the wrapped client.
  return Object.assign(Object.create(null), client, wrapped) as C;
}
