/**
 * The provider's error codes in one registry (spec section 7 and docs/provider.md), and the typed
 * errors of the provider client:
 *
 * - `ProviderError`: the call reached the provider (or tried to) and failed: an error answer (HTTP
 *   status, provider `code` and `type`), a timeout, a network error, or an answer that breaks its
 *   schema.
 * - `ProviderValidationError`: a request that breaks the contract, caught before anything is sent.
 *
 * HTTP statuses marked *inferred* are not published; they follow the nearest documented case.
 */
import { AppError, type ErrorCode } from '../domain/errors.ts';
import type { CardRejectionCode, FieldIssue } from './schemas.ts';

export type ProviderErrorScope = 'headers' | 'deposit' | 'refund' | 'cashout';

export interface ProviderErrorInfo {
  /** The provider's `type` name (documented where the provider sends one; payrecon's name otherwise). */
  name: string;
  /** The provider's message or description text. */
  message: string;
  /** HTTP status the provider answers with. */
  http: number;
  scope: ProviderErrorScope;
}

export const PROVIDER_ERRORS = {
  100: { name: 'INVALID_CREDENTIALS', message: 'Invalid credentials', http: 401, scope: 'headers' },
  101: { name: 'MISSING_HEADER', message: 'Missing required header', http: 400, scope: 'headers' },
  102: { name: 'INVALID_SIGNATURE', message: 'Invalid signature', http: 400, scope: 'headers' },
  103: { name: 'INVALID_DATE_RANGE', message: 'Invalid date range', http: 400, scope: 'headers' },
  104: {
    name: 'IDEMPOTENCY_KEY_ALREADY_USED',
    message: 'Idempotency key already used with another request',
    http: 400,
    scope: 'headers',
  },
  105: { name: 'EMPTY_HEADER_VALUE', message: 'Empty header value', http: 400, scope: 'headers' },
  208: { name: 'RESOURCE_NOT_FOUND', message: 'Resource not found', http: 404, scope: 'refund' },
  // Cashout codes: HTTP 401 for credentials, 400 for KYC, 412 for validation and state (docs/provider.md).
  300: { name: 'INVALID_PARAMETERS', message: 'Invalid parameters', http: 412, scope: 'cashout' },
  302: { name: 'INVALID_CONTROL_STRING', message: 'Invalid control string', http: 412, scope: 'cashout' },
  303: { name: 'INVALID_BANK_CODE', message: 'Invalid bank code', http: 412, scope: 'cashout' },
  401: { name: 'INVALID_CREDENTIALS', message: 'Invalid credentials.', http: 401, scope: 'cashout' },
  402: { name: 'IP_NOT_WHITELISTED', message: 'IP address not whitelisted', http: 401, scope: 'cashout' },
  502: { name: 'INVALID_JSON', message: 'Invalid JSON', http: 400, scope: 'cashout' },
  508: { name: 'LIMIT_EXCEEDED', message: 'Limit exceeded', http: 412, scope: 'cashout' },
  509: { name: 'CASHOUT_NOT_FOUND', message: 'Cashout not found with this ID', http: 412, scope: 'cashout' },
  510: {
    name: 'INVALID_STATUS_TRANSITION',
    message: 'Invalid status transition',
    http: 412,
    scope: 'cashout',
  },
  511: { name: 'EXTERNAL_ID_ALREADY_USED', message: 'External ID already used', http: 412, scope: 'cashout' },
  514: { name: 'INSUFFICIENT_FUNDS', message: 'Insufficient funds', http: 412, scope: 'cashout' },
  526: { name: 'INVALID_CURRENCY', message: 'Invalid currency', http: 412, scope: 'cashout' },
  533: { name: 'AMOUNT_UNDER_MINIMUM', message: 'Amount under the minimum', http: 412, scope: 'cashout' },
  702: { name: 'COULD_NOT_CANCEL', message: 'Could not cancel the cashout', http: 412, scope: 'cashout' },
  802: {
    name: 'INVALID_AMOUNT_TO_REFUND',
    message: 'Amount to refund not valid',
    http: 400,
    scope: 'refund',
  },
} as const satisfies Record<number, ProviderErrorInfo>;

export type ProviderErrorCode = keyof typeof PROVIDER_ERRORS;

/** Card rejection reasons (7.3): `payment_info.reason_code` of a REJECTED card deposit. */
export const CARD_REJECTION_REASONS: Readonly<Record<CardRejectionCode, string>> = {
  EXTERNAL_HIGH_RISK: 'Rejected by the issuer anti-fraud',
  TRX_NOT_SUPPORTED: 'Transaction type not supported by the acquirer',
  INVALID_CARD_NUMBER: 'Invalid card number',
  INVALID_CARD_HOLDER: 'Invalid card holder',
  INVALID_CARD_EXPIRATION: 'Invalid card expiration',
  INVALID_SECURITY_CODE: 'Invalid security code',
  INVALID_ISSUER: 'Invalid issuer',
  INVALID_PIN: 'Invalid PIN',
  DUPLICATE_PAYMENT: 'Duplicate payment',
  MAX_ATTEMPTS_REACHED: 'Maximum attempts reached for this user and card',
  INSUFFICIENT_FUNDS: 'Insufficient funds',
  AUTHORIZATION_CALL_REQUIRED: 'The customer must call the bank to activate the card',
  CARD_BIN_NOT_FOUND: 'Card BIN not found',
  CARD_EXPIRED: 'Card expired',
  CARD_DECLINED: 'Card declined',
  CARD_REPORTED_STOLEN: 'Card reported as stolen',
  CARD_REPORTED_LOST: 'Card reported as lost',
  CARD_RESTRICTED_BY_BANK: 'Card restricted by the bank',
  CARD_REQUESTED_BY_BANK: 'Card requested by the bank',
  CARD_BLACKLISTED: 'Card blacklisted',
  CARD_DISABLED: 'Card disabled',
  OTHER_REASON: 'Card rejected',
};

/** Registry entry of a provider code, or undefined for a code the registry does not know. */
export function providerErrorInfo(code: number | null | undefined): ProviderErrorInfo | undefined {
  if (code === null || code === undefined) return undefined;
  return (PROVIDER_ERRORS as Record<number, ProviderErrorInfo>)[code];
}

export function isProviderErrorCode(code: number): code is ProviderErrorCode {
  return providerErrorInfo(code) !== undefined;
}

export interface ProviderErrorOptions {
  /** Client operation, e.g. `createDeposit`. */
  operation: string;
  /** HTTP status of the answer; null when none arrived (timeout, network). */
  status?: number | null;
  providerCode?: number | null;
  providerType?: string | null;
  /** The answer body as parsed (numbers as text) or its raw text; never a request body. */
  body?: unknown;
  cause?: unknown;
  details?: Record<string, unknown>;
  retryable?: boolean;
}

/**
 * A failed provider call. `code` is payrecon's (PROVIDER_ERROR, PROVIDER_UNAVAILABLE,
 * PROVIDER_RATE_LIMITED, PROVIDER_TIMEOUT, PROVIDER_NETWORK, PROVIDER_SCHEMA_DRIFT);
 * `providerCode`/`providerType` are the provider's (102, INVALID_SIGNATURE ...).
 */
export class ProviderError extends AppError {
  readonly operation: string;
  /** HTTP status of the provider's answer; null when no answer arrived. */
  readonly status: number | null;
  readonly providerCode: number | null;
  readonly providerType: string | null;
  readonly body: unknown;

  constructor(code: ErrorCode, message: string, options: ProviderErrorOptions) {
    super(code, message, {
      cause: options.cause,
      details: options.details,
      ...(options.retryable === undefined ? {} : { retryable: options.retryable }),
    });
    this.name = 'ProviderError';
    this.operation = options.operation;
    this.status = options.status ?? null;
    this.providerCode = options.providerCode ?? null;
    this.providerType = options.providerType ?? providerErrorInfo(options.providerCode)?.name ?? null;
    this.body = options.body;
  }

  /** The provider's HTTP status when it answered, otherwise the status of payrecon's code. */
  override get httpStatus(): number {
    return this.status ?? super.httpStatus;
  }
}

/** A request that breaks the contract; nothing was sent. */
export class ProviderValidationError extends AppError {
  readonly operation: string;
  readonly issues: readonly FieldIssue[];

  constructor(operation: string, issues: readonly FieldIssue[]) {
    super('VALIDATION_FAILED', `${operation}: ${issues.map((i) => `${i.field}: ${i.rule}`).join('; ')}`, {
      details: { operation, issues },
    });
    this.name = 'ProviderValidationError';
    this.operation = operation;
    this.issues = issues;
  }
}
