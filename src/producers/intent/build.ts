/**
 * Intents from creation calls: `intentFromDepositCreation`, `intentFromCardDepositCreation`,
 * `intentFromCashoutCreation` and `intentFromRefundCreation` build an `Intent` from a call's request and
 * its response (or its failure: a provider refusal is `declined`, a timeout or 5xx is `unknown`). The
 * request and response are copied without secrets (`src/domain/secrets.ts`): never card data,
 * credentials, tokens or signatures.
 */
import { randomUUID } from 'node:crypto';
import { AppError } from '../../domain/errors.ts';
import { localCurrency, refundWriteAheadRef } from '../../domain/intent.ts';
import { type Minor, parseMinor } from '../../domain/money.ts';
import type { Intent, IntentOperation } from '../../domain/observation.ts';
import { recordWithoutSecrets as sanitized } from '../../domain/secrets.ts';
import type { NewCashout } from '../../provider/client.ts';
import { ProviderError } from '../../provider/errors.ts';
import type {
  CardDepositRequestInput,
  CardDepositResponse,
  CashoutCreateResponse,
  DepositCreateRequestInput,
  DepositCreateResponse,
  RefundCreateRequestInput,
  RefundCreateResponse,
} from '../../provider/schemas.ts';

/** A request amount as `Minor` (the one money codec): a bigint is minor units already; text and numbers decimal. */
function toMinor(value: unknown, field: string): Minor {
  if (typeof value === 'bigint') return value;
  return parseMinor(typeof value === 'string' || typeof value === 'number' ? value : null, { field });
}

export interface CreationOutcome<R> {
  /** The parsed response of a successful call. */
  response?: R | null;
  /** The error of a failed call. */
  error?: unknown;
  intentId?: string;
  createdAt?: Date;
  /** Expected fee from the merchant's fee schedule. */
  expectedFee?: Minor | null;
}

/** created when there is a response; declined when the provider answered a refusal; unknown otherwise. */
function outcomeOf(o: CreationOutcome<unknown>): Intent['outcome'] {
  if (o.response) return 'created';
  return failureOutcome(o.error);
}

/**
 * What a failed creation call says of the entity: `declined` when the provider answered a refusal (a 4xx
 * other than 429, or a request refused before it was sent), `unknown` otherwise (a timeout, a network
 * error, a 5xx or a 429 after every retry: the provider may have created it).
 */
export function failureOutcome(err: unknown): 'declined' | 'unknown' {
  if (
    err instanceof ProviderError &&
    err.status !== null &&
    err.status >= 400 &&
    err.status < 500 &&
    err.status !== 429
  ) {
    return 'declined';
  }
  if (err instanceof AppError && err.code === 'VALIDATION_FAILED') return 'declined';
  return 'unknown';
}

function errorSummary(err: unknown): Record<string, unknown> | null {
  if (err === undefined) return null;
  if (err instanceof ProviderError) {
    return { error: err.code, status: err.status, code: err.providerCode, type: err.providerType };
  }
  if (err instanceof AppError) return { error: err.code };
  return { error: 'INTERNAL' };
}

function common(
  account: string,
  operation: IntentOperation,
  o: CreationOutcome<unknown>,
): Pick<Intent, 'intentId' | 'operation' | 'account' | 'createdAt' | 'outcome' | 'expectedFee'> {
  return {
    intentId: o.intentId ?? randomUUID(),
    operation,
    account,
    createdAt: o.createdAt ?? new Date(),
    outcome: outcomeOf(o),
    expectedFee: o.expectedFee ?? null,
  };
}

function responseOf(o: CreationOutcome<unknown>): Record<string, unknown> | null {
  return o.response ? sanitized(o.response) : errorSummary(o.error);
}

/** POST /v3/deposits: request and response (2.3, 2.7). */
export function intentFromDepositCreation(
  account: string,
  request: DepositCreateRequestInput | Record<string, unknown>,
  outcome: CreationOutcome<DepositCreateResponse>,
): Intent {
  const req = request as Record<string, unknown>;
  const base = common(account, 'deposit', outcome);
  const res = outcome.response ?? null;
  return {
    ...base,
    externalRef: String(req.invoice_id ?? res?.merchant_invoice_id ?? base.intentId),
    entityId: res ? String(res.deposit_id) : null,
    currency: String(req.currency ?? ''),
    amount: toMinor(req.amount, 'amount'),
    test: req.test === true,
    crypto: req.crypto !== undefined && req.crypto !== null,
    feeOnPayer: req.fee_on_payer === true,
    parentDepositId: null,
    request: sanitized({ ...req, payer: undefined, bank_account: undefined }),
    response: responseOf(outcome),
  };
}

/** POST {cc_base_url}/v3/deposits (2.8): the card data never leaves the call. */
export function intentFromCardDepositCreation(
  account: string,
  request: CardDepositRequestInput | Record<string, unknown>,
  outcome: CreationOutcome<CardDepositResponse>,
): Intent {
  const req = request as Record<string, unknown>;
  const base = common(account, 'card_deposit', outcome);
  const res = outcome.response ?? null;
  return {
    ...base,
    externalRef: String(req.invoice_id ?? res?.merchant_invoice_id ?? base.intentId),
    entityId: res ? String(res.deposit_id) : null,
    // The card endpoint defaults the currency to USD (2.8).
    currency: String(req.currency ?? 'USD'),
    amount: toMinor(req.amount, 'amount'),
    test: false,
    crypto: false,
    feeOnPayer: req.fee_on_payer === true,
    parentDepositId: null,
    request: sanitized({ ...req, payer: undefined, credit_card: undefined, card_token: undefined }),
    response: responseOf(outcome),
  };
}

/** POST /v3/cashout (docs/provider.md): credentials (login, pass) are never copied. */
export function intentFromCashoutCreation(
  account: string,
  request: NewCashout | Record<string, unknown>,
  outcome: CreationOutcome<CashoutCreateResponse>,
): Intent {
  const req = request as Record<string, unknown>;
  const base = common(account, 'cashout', outcome);
  const country = String(req.country ?? '');
  const currency = typeof req.currency === 'string' ? req.currency : localCurrency(country);
  if (currency === undefined) {
    throw new AppError(
      'VALIDATION_FAILED',
      'currency: is required for a cashout to a country without a known currency',
      {
        details: { field: 'currency', rule: 'is required' },
      },
    );
  }
  const res = outcome.response ?? null;
  return {
    ...base,
    externalRef: String(req.external_id ?? base.intentId),
    entityId: res ? String(res.cashout_id) : null,
    currency,
    amount: toMinor(req.amount, 'amount'),
    test: false,
    crypto: false,
    feeOnPayer: false,
    parentDepositId: null,
    // Beneficiary identity and account numbers stay out: only what reconciliation needs.
    request: sanitized({
      external_id: req.external_id,
      country: req.country,
      currency: req.currency,
      amount: req.amount,
      bank_code: req.bank_code,
      account_type: req.account_type,
      on_hold: req.on_hold,
      type: req.type,
    }),
    response: responseOf(outcome),
  };
}

/**
 * POST /v3/refunds (docs/provider.md). A refund request names no currency: give the refunded deposit's
 * (`currency`) unless the response's `refund_info` carries it. Without an amount (a full refund) the
 * amount comes from `refund_info` or `fullAmount`. Without an answer, a refund with an amount is
 * referenced by `refundWriteAheadRef` (its deposit and amount), which the ledger can match.
 */
export function intentFromRefundCreation(
  account: string,
  request: RefundCreateRequestInput | Record<string, unknown>,
  outcome: CreationOutcome<RefundCreateResponse> & {
    currency?: string;
    fullAmount?: Minor;
    reference?: string;
  },
): Intent {
  const req = request as Record<string, unknown>;
  const base = common(account, 'refund', outcome);
  const res = outcome.response ?? null;
  const currency = res?.refund_info?.currency ?? outcome.currency;
  if (!currency) {
    throw new AppError('VALIDATION_FAILED', "currency: is required (the refunded deposit's currency)", {
      details: { field: 'currency', rule: 'is required' },
    });
  }
  const amount =
    req.amount !== undefined && req.amount !== null
      ? toMinor(req.amount, 'amount')
      : (res?.refund_info?.amount ?? outcome.fullAmount ?? toMinor(undefined, 'amount'));
  // Before the answer (and while its outcome is unknown) the refund is known by its deposit and amount
  // (`refundWriteAheadRef`), which its readings carry; once created, by the provider's refund id.
  const pendingRef =
    req.amount !== undefined && req.amount !== null
      ? refundWriteAheadRef(String(req.deposit_id), amount)
      : `refund-${base.intentId}`;
  return {
    ...base,
    externalRef: outcome.reference ?? (res ? `refund-${res.refund_id}` : pendingRef),
    entityId: res ? String(res.refund_id) : null,
    currency,
    amount,
    test: false,
    crypto: false,
    feeOnPayer: false,
    parentDepositId: String(req.deposit_id),
    request: sanitized({ ...req, bank_account: undefined }),
    response: responseOf(outcome),
  };
}
