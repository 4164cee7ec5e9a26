/**
 * `recordingClient(client, onIntent)` wraps a `ProviderClient` (or the sandbox traffic generator's
 * `TrafficClient`): each create* call records its intent ahead (write-ahead), goes to the provider, then
 * records the intent again, completed with the provider's answer (and the call's result or error goes to
 * the caller).
 */
import { randomUUID } from 'node:crypto';
import { AppError } from '../../domain/errors.ts';
import type { Intent } from '../../domain/observation.ts';
import type { ProviderClient } from '../../provider/client.ts';
import {
  type CreationOutcome,
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

export interface RecordingOptions {
  /** Account name of the intents; defaults to the client's `account`. */
  account?: string;
  /**
   * The refunded deposit's currency, when a refund answer does not carry it; defaults to reading the
   * deposit through the client's `getDeposit` when it has one.
   */
  depositCurrency?: (depositId: string) => Promise<string | undefined> | string | undefined;
}

/**
 * Wraps a client so that its creations record their intent, twice under one intent id. Before the call,
 * the pending intent (outcome `unknown`, no provider id) keyed by the merchant's reference (invoice_id,
 * external_id) goes to `onIntent`; then the provider is called, and the intent completed with its answer
 * (created with the provider's id, declined, or unknown) goes to `onIntent` before the caller sees the
 * result or the error. The ledger completes the pending record with the later one (`insertIntents`), and
 * a pending record left alone (the process died between the provider's answer and the second record) is
 * matched by the merchant's reference when the entity is first observed; one whose creation never
 * reached the provider matches nothing and raises nothing. Refunds carry no merchant reference the
 * provider repeats (their reference is the provider's refund id), so their intent is recorded after the
 * answer only. Works for a full `ProviderClient` and for the traffic generator's `TrafficClient`.
 */
export function recordingClient<C extends CreatingClient>(
  client: C,
  onIntent: IntentSink,
  options: RecordingOptions = {},
): C {
  const account = options.account ?? (client as Partial<ProviderClient>).account;
  if (!account) throw new AppError('CONFIG_INVALID', 'recordingClient: the account name is required');
  async function record<R>(
    call: () => Promise<R>,
    build: (o: CreationOutcome<R>) => Intent | Promise<Intent>,
    writeAhead = true,
  ) {
    const ids = { intentId: randomUUID(), createdAt: new Date() };
    if (writeAhead) await onIntent(await build(ids));
    let response: R;
    try {
      response = await call();
    } catch (error) {
      await onIntent(await build({ ...ids, error }));
      throw error;
    }
    await onIntent(await build({ ...ids, response }));
    return response;
  }
  const getDeposit = (client as Partial<ProviderClient>).getDeposit?.bind(client);
  const depositCurrency = async (id: string): Promise<string | undefined> => {
    if (options.depositCurrency) return options.depositCurrency(id);
    return getDeposit ? (await getDeposit(id)).currency : undefined;
  };
  const wrapped: CreatingClient = {
    createDeposit: (input, opts) =>
      record(
        () => client.createDeposit(input, opts),
        (o) => intentFromDepositCreation(account, input, o),
      ),
    createCardDeposit: (input, opts) =>
      record(
        () => client.createCardDeposit(input, opts),
        (o) => intentFromCardDepositCreation(account, input, o),
      ),
    createCashout: (input) =>
      record(
        () => client.createCashout(input),
        (o) => intentFromCashoutCreation(account, input, o),
      ),
    createRefund: (input, opts) =>
      record(
        () => client.createRefund(input, opts),
        async (o) => {
          const currency =
            o.response?.refund_info?.currency ?? (await depositCurrency(String(input.deposit_id)));
          return intentFromRefundCreation(account, input, { ...o, ...(currency ? { currency } : {}) });
        },
        false,
      ),
  };
  // Keep every other member (status calls, `account`) of the wrapped client.
  return Object.assign(Object.create(null), client, wrapped) as C;
}
