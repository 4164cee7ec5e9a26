/**
 * What the pipeline tells the ledger. An Observation is one reading of an entity's state at the
 * provider (from a webhook-triggered status call, a poll, or a backfill); an Intent is the merchant's
 * own record of what it created. Both travel as Avro on Kafka (`provider.status.observed.v1`,
 * `merchant.intent.recorded.v1`, amounts as decimal strings) and reach `applyObservations` and
 * `recordIntents` in this shape. Amounts are minor units; ids are the provider's, as text.
 */
import type { Minor } from './money.ts';
import type { EntityKind } from './statuses.ts';

export const OBSERVATION_SOURCES = ['webhook', 'poll', 'intent', 'backfill'] as const;
export type ObservationSource = (typeof OBSERVATION_SOURCES)[number];

/**
 * Where a status in the history came from: a reading (above), or `operator`: an operator accepted the
 * provider's status that the ledger had refused as an illegal move (it never travels on a topic).
 */
export type HistorySource = ObservationSource | 'operator';

/** What the ledger applies: a reading, or an operator's acceptance (source `operator`). */
export type LedgerObservation = Omit<Observation, 'source'> & { source: HistorySource };

export interface Observation {
  /** Unique id of this reading (a UUID); replaying the same event is a no-op in the history. */
  eventId: string;
  kind: EntityKind;
  /** Merchant account name (the provider account of the configuration). */
  account: string;
  /** Provider id: deposit_id, cashout_id or refund_id, as decimal text. */
  entityId: string;
  /** Merchant-side id: invoice_id for deposits, external_id for cashouts; null for refunds. */
  externalRef: string | null;
  /** Status at the provider; null when the provider answered "not found". */
  status: string | null;
  /** When the provider state was read (poll, fetch) or stated (notification date). */
  observedAt: Date;
  source: ObservationSource;
  currency: string | null;
  /** Gross amount in minor units when the provider reports it (deposits, refunds). */
  amount: Minor | null;
  feeAmount: Minor | null;
  feeCurrency: string | null;
  /** The customer pays the fee (deposit request flag); when true no fee is debited. */
  feeOnPayer: boolean | null;
  /** Deposit created with test=true: touches the test book only. */
  test: boolean;
  /** Crypto deposit: credits the customer's wallet, never `available`. */
  crypto: boolean;
  /** THIRD_PARTY_PAYER or AMOUNT_MISMATCH on a CANCELLED deposit. */
  statusReason: string | null;
  /** MATCH, UNMATCH, NO_CLIENT_DOCUMENT, NO_CURRENT_PAYER_DATA. */
  payerVerification: string | null;
  /** Bank rejection code and reason (cashouts). */
  rejectionCode: string | null;
  rejectionReason: string | null;
  /** For refunds: the deposit refunded. */
  parentDepositId: string | null;
  /**
   * The provider's bank-side id of a cashout (`provider_external_reference` of the status answer, never
   * the notification's `bank_reference_id`, which anyone can send; in Brazil the instant payment's
   * end-to-end id).
   */
  bankReference: string | null;
  /** Provider fields kept for the mirror (no card data, no credentials). */
  details: Record<string, unknown>;
}

/**
 * The facts a reading starts without: no fee, not test or crypto, no reasons, no parent deposit, no bank
 * reference. Every place that builds an observation (the provider readings, test fixtures) spreads these
 * and sets what it knows.
 */
export const NO_FACTS = {
  feeAmount: null,
  feeCurrency: null,
  feeOnPayer: null,
  test: false,
  crypto: false,
  statusReason: null,
  payerVerification: null,
  rejectionCode: null,
  rejectionReason: null,
  parentDepositId: null,
  bankReference: null,
} as const satisfies Partial<Observation>;

export const INTENT_OPERATIONS = ['deposit', 'card_deposit', 'cashout', 'refund'] as const;
export type IntentOperation = (typeof INTENT_OPERATIONS)[number];

export interface Intent {
  /** Unique id of the record (a UUID, or a stable id from the merchant's system). */
  intentId: string;
  operation: IntentOperation;
  account: string;
  /** invoice_id (deposits), external_id (cashouts), or the merchant's refund reference. */
  externalRef: string;
  /** Provider id from the creation response, when the creation succeeded. */
  entityId: string | null;
  currency: string;
  amount: Minor;
  /** Expected fee (from the merchant's fee schedule) if known. */
  expectedFee: Minor | null;
  test: boolean;
  crypto: boolean;
  feeOnPayer: boolean;
  /** For refunds: the deposit refunded. */
  parentDepositId: string | null;
  /** The creation call's result: created, declined (provider refused), or unknown (timeout). */
  outcome: 'created' | 'declined' | 'unknown';
  createdAt: Date;
  /** Sanitised request and response (never card data, credentials or signatures). */
  request: Record<string, unknown>;
  response: Record<string, unknown> | null;
}

export function intentKind(operation: IntentOperation): EntityKind {
  return operation === 'card_deposit' ? 'deposit' : operation;
}
