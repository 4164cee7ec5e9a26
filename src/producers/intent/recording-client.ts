/**
 * `recordingClient(client, onIntent)` wraps a `ProviderClient` (or the sandbox traffic generator's
 * `TrafficClient`): each create* call goes to the provider, then its intent goes to `onIntent` (and the
 * call's result or error to the caller).
 */
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
 * Wraps a client so that its creations record their intent: the provider is called, then the intent
 * (created, declined or unknown) is handed to `onIntent` before the caller sees the result or the
 * error. Works for a full `ProviderClient` and for the traffic generator's `TrafficClient`.
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
  ) {
    const createdAt = new Date();
    let response: R;
    try {
      response = await call();
    } catch (error) {
      await onIntent(await build({ error, createdAt }));
      throw error;
    }
    await onIntent(await build({ response, createdAt }));
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
      ),
  };
  // Keep every other member (status calls, `account`) of the wrapped client.
  return Object.assign(Object.create(null), client, wrapped) as C;
}
