/**
 * The one place that turns a provider status answer (deposit 2.1, cashout 2.9, refund 2.10) into the
 * `Observation` the ledger applies. The status fetcher (source `webhook`), the status poller (`poll`)
 * and backfill (`backfill`) all map through here, so the three never disagree on what a field means.
 *
 * - Deposits carry the gross amount (`amount`, else `local_amount`), currency, fee, the test and crypto
 *   flags, status_reason and the payer verification.
 * - Cashouts carry no amount: the ledger takes it from the merchant's intent (the status view of 2.9
 *   has none; a sandbox that adds one is not trusted for money). They carry the bank's reference
 *   (`provider_external_reference`) when the provider gives one.
 * - Refunds carry their amount and the deposit refunded.
 * - "Not found" (HTTP 404, code 208, code 509) is an observation with `status: null` and no reference,
 *   which the ledger raises as MISSING_AT_PROVIDER where an intent names the entity.
 * - References (`externalRef`, `bankReference`) come from the provider's answer only, never from what
 *   the caller was told (a notification may be forged): a cashout's external id is the answer's, or the
 *   one the provider was asked by and found.
 *
 * `details` keeps non-secret provider fields for the mirror: never card data (no masked card, holder
 * or expiry), never payer identity, never credentials.
 */
import { randomUUID } from 'node:crypto';
import { NO_FACTS, type Observation, type ObservationSource } from '../domain/observation.ts';
import { cashoutStatusFromCode, type EntityKind } from '../domain/statuses.ts';
import { ProviderError } from './errors.ts';
import type { CashoutStatusResponse, Deposit, Refund } from './schemas.ts';

export interface ReadingContext {
  account: string;
  source: ObservationSource;
  /** When the status was read. */
  observedAt: Date;
  /** Defaults to a fresh UUID. */
  eventId?: string;
}

function base(
  ctx: ReadingContext,
  kind: EntityKind,
  entityId: string,
): Omit<Observation, 'status' | 'externalRef' | 'details'> {
  return {
    eventId: ctx.eventId ?? randomUUID(),
    kind,
    account: ctx.account,
    entityId,
    observedAt: ctx.observedAt,
    source: ctx.source,
    currency: null,
    amount: null,
    ...NO_FACTS,
  };
}

/** Copies the present, non-null values of `keys` from `from`. */
function pick(from: Record<string, unknown>, keys: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of keys) {
    const v = from[k];
    if (v !== undefined && v !== null) out[k] = v;
  }
  return out;
}

const DEPOSIT_DETAIL_KEYS = [
  'user_id',
  'country',
  'local_amount',
  'usd_amount',
  'bonus_amount',
  'bonus_relative',
  'payment_method',
  'payment_type',
  'refunded',
  'completed_payment_method_code',
  'created_at',
  'expiration_date',
  'subscription_id',
  'paid_amount',
] as const;

/** A deposit status answer (GET /v3/deposits/{id}). */
export function depositObservation(deposit: Deposit, ctx: ReadingContext): Observation {
  const details = pick(deposit as Record<string, unknown>, DEPOSIT_DETAIL_KEYS);
  if (deposit.crypto) {
    // The wallet and network say where the money went; no secret in them.
    details.crypto = pick(deposit.crypto as Record<string, unknown>, [
      'currency',
      'network',
      'wallet',
      'crypto_fx',
      'crypto_amount',
    ]);
  }
  if (deposit.card_detail) {
    // Brand and type only: holder, masked number and expiry are card data.
    details.card = pick(deposit.card_detail as Record<string, unknown>, [
      'brand',
      'card_type',
      'transaction_result',
    ]);
  }
  return {
    ...base(ctx, 'deposit', String(deposit.deposit_id)),
    externalRef: deposit.invoice_id,
    status: deposit.status,
    currency: deposit.currency,
    amount: deposit.amount ?? deposit.local_amount ?? null,
    feeAmount: deposit.fee_amount ?? null,
    feeCurrency: deposit.fee_currency ?? (deposit.fee_amount == null ? null : deposit.currency),
    feeOnPayer: deposit.fee_on_payer ?? null,
    test: deposit.test === true,
    crypto: deposit.crypto !== null && deposit.crypto !== undefined,
    statusReason: deposit.status_reason ?? null,
    payerVerification: deposit.current_payer_verification ?? null,
    details,
  };
}

/**
 * A cashout status answer (POST /v3/cashout/status). `entityId` is the cashout id the caller asked
 * about, used when the answer leaves `cashout_id` out; `askedByExternalId` the external id the provider
 * was asked by (its answer is that cashout's), used when the answer leaves `external_id` out.
 */
export function cashoutObservation(
  answer: CashoutStatusResponse,
  ctx: ReadingContext & { entityId?: string | null; askedByExternalId?: string | null },
): Observation {
  const entityId =
    answer.cashout_id !== null && answer.cashout_id !== undefined
      ? String(answer.cashout_id)
      : (ctx.entityId ?? null);
  if (entityId === null) {
    throw new ProviderError('PROVIDER_SCHEMA_DRIFT', 'cashout status answer carries no cashout_id', {
      operation: 'getCashoutStatus',
      status: 200,
    });
  }
  const details = pick(answer as Record<string, unknown>, [
    'cashout_status',
    'cashout_status_description',
    'provider_external_reference',
  ]);
  const bank = answer.bank?.[0];
  if (bank) details.bank = pick(bank as Record<string, unknown>, ['code', 'name', 'branch']);
  return {
    ...base(ctx, 'cashout', entityId),
    externalRef: answer.external_id ?? ctx.askedByExternalId ?? null,
    status: cashoutStatusFromCode(answer.cashout_status),
    currency: answer.currency ?? null,
    rejectionCode:
      answer.rejection_code === null || answer.rejection_code === undefined
        ? null
        : String(answer.rejection_code),
    rejectionReason: answer.rejection_reason ?? null,
    bankReference: bankReferenceOf(answer.provider_external_reference),
    details,
  };
}

/**
 * A bank reference as the provider sent it (`provider_external_reference`, `bank_reference_id`), trimmed;
 * null when absent or blank (the provider sends "" before the bank has answered).
 */
export function bankReferenceOf(value: string | null | undefined): string | null {
  const v = value?.trim() ?? '';
  return v === '' ? null : v;
}

/** A refund status answer (GET /v3/refunds/{id}); `entityId` is the refund id asked about. */
export function refundObservation(refund: Refund, ctx: ReadingContext & { entityId: string }): Observation {
  return {
    ...base(ctx, 'refund', refund.refund_id == null ? ctx.entityId : String(refund.refund_id)),
    externalRef: null,
    status: refund.status,
    currency: refund.currency ?? null,
    amount: refund.amount,
    parentDepositId: String(refund.deposit_id),
    details: pick(refund as Record<string, unknown>, ['merchant_invoice_id']),
  };
}

/**
 * The provider does not know the entity: the ledger raises MISSING_AT_PROVIDER where an intent names it.
 * No reference: the provider gave none, and one from elsewhere could link the entity to an intent.
 */
export function notFoundObservation(
  kind: EntityKind,
  entityId: string,
  ctx: ReadingContext & { reason?: string },
): Observation {
  return {
    ...base(ctx, kind, entityId),
    externalRef: null,
    status: null,
    details: ctx.reason === undefined ? {} : { not_found: ctx.reason },
  };
}

/** True for the provider's "not found" answers: HTTP 404, code 208 (refunds), code 509 (cashouts). */
export function isNotFound(err: unknown): err is ProviderError {
  return (
    err instanceof ProviderError &&
    (err.status === 404 || err.providerCode === 208 || err.providerCode === 509)
  );
}

/** A short reason for a not-found answer, kept in the observation's details. */
export function notFoundReason(err: ProviderError): string {
  return `HTTP ${err.status ?? '-'}${err.providerCode === null ? '' : ` code ${err.providerCode}`}`;
}

/** What one status read needs to know about an entity. */
export interface EntityToRead {
  kind: EntityKind;
  account: string;
  entityId: string;
  /**
   * A trusted reference (the ledger's, never a notification's): the external_id a cashout without a
   * cashout id is asked by. Not copied into the observation unless the provider found the cashout by it.
   */
  externalRef: string | null;
}

/** The provider calls a status read uses (a `ProviderClient` satisfies it). */
export interface StatusReader {
  getDeposit(depositId: number | string): Promise<Deposit>;
  getRefund(refundId: number | string): Promise<Refund>;
  getCashoutStatus(
    ref: { cashout_id: number; external_id?: string } | { cashout_id?: number; external_id: string },
  ): Promise<CashoutStatusResponse>;
}

/**
 * Reads one entity's status and maps it, not-found included. Other provider errors are thrown as they
 * are (`retryable` says whether a retry may help).
 */
export async function readStatus(
  client: StatusReader,
  entity: EntityToRead,
  source: ObservationSource,
  now: () => Date = () => new Date(),
): Promise<Observation> {
  const { kind, entityId, account } = entity;
  try {
    switch (kind) {
      case 'deposit': {
        const deposit = await client.getDeposit(entityId);
        return depositObservation(deposit, { account, source, observedAt: now() });
      }
      case 'refund': {
        const refund = await client.getRefund(entityId);
        return refundObservation(refund, { account, source, observedAt: now(), entityId });
      }
      case 'cashout': {
        const id = /^[1-9]\d*$/.test(entityId) ? Number(entityId) : null;
        const ref =
          id !== null && Number.isSafeInteger(id)
            ? { cashout_id: id }
            : entity.externalRef !== null
              ? { external_id: entity.externalRef }
              : null;
        if (ref === null) {
          throw new ProviderError(
            'PROVIDER_ERROR',
            `cashout ${entityId}: neither a cashout id nor an external id`,
            {
              operation: 'getCashoutStatus',
              retryable: false,
            },
          );
        }
        const answer = await client.getCashoutStatus(ref);
        return cashoutObservation(answer, {
          account,
          source,
          observedAt: now(),
          entityId,
          askedByExternalId: 'external_id' in ref ? ref.external_id : null,
        });
      }
    }
  } catch (err) {
    if (isNotFound(err)) {
      return notFoundObservation(kind, entityId, {
        account,
        source,
        observedAt: now(),
        reason: notFoundReason(err),
      });
    }
    throw err;
  }
}
