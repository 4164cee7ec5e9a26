/**
 * The one error base class of payrecon. Every error the app raises on purpose carries a stable `code`
 * from the table below, a `retryable` flag (consumers retry retryable errors and send the rest to the
 * DLQ), optional structured `details` and the `cause`. Provider error codes (100-105, 208, 401, 509 ...)
 * live in `src/provider/errors.ts`; this table is payrecon's own.
 */

export const ERROR_CODES = {
  // configuration and input
  CONFIG_INVALID: { retryable: false, http: 500 },
  VALIDATION_FAILED: { retryable: false, http: 400 },
  INVALID_AMOUNT: { retryable: false, http: 400 },
  INVALID_SIGNATURE: { retryable: false, http: 401 },
  /** A signed request outside the receiver's clock window. */
  REPLAYED: { retryable: false, http: 401 },
  PAYLOAD_TOO_LARGE: { retryable: false, http: 413 },
  UNSUPPORTED_MEDIA_TYPE: { retryable: false, http: 415 },
  /** Well-formed input refused by its content (an imported file that does not parse or balance). */
  UNPROCESSABLE: { retryable: false, http: 422 },
  NOT_FOUND: { retryable: false, http: 404 },
  CONFLICT: { retryable: false, http: 409 },
  /** Something that existed and is no longer kept (a report file past its retention). */
  GONE: { retryable: false, http: 410 },
  UNAUTHORIZED: { retryable: false, http: 401 },
  FORBIDDEN: { retryable: false, http: 403 },
  // provider calls
  PROVIDER_ERROR: { retryable: false, http: 502 },
  PROVIDER_UNAVAILABLE: { retryable: true, http: 503 },
  PROVIDER_RATE_LIMITED: { retryable: true, http: 503 },
  PROVIDER_TIMEOUT: { retryable: true, http: 504 },
  PROVIDER_NETWORK: { retryable: true, http: 503 },
  PROVIDER_SCHEMA_DRIFT: { retryable: false, http: 502 },
  // infrastructure
  PUBLISH_FAILED: { retryable: true, http: 503 },
  DATABASE_UNAVAILABLE: { retryable: true, http: 503 },
  SERIALIZATION_CONFLICT: { retryable: true, http: 503 },
  SCHEMA_INVALID: { retryable: false, http: 400 },
  // ledger
  LEDGER_INVARIANT: { retryable: false, http: 500 },
  ILLEGAL_TRANSITION: { retryable: false, http: 409 },
  // anything unexpected
  INTERNAL: { retryable: false, http: 500 },
} as const satisfies Record<string, { retryable: boolean; http: number }>;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface AppErrorOptions {
  cause?: unknown;
  details?: Record<string, unknown>;
  /** Overrides the code's default. */
  retryable?: boolean;
}

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly retryable: boolean;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, options: AppErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    this.retryable = options.retryable ?? ERROR_CODES[code].retryable;
    this.details = options.details;
  }

  /** The HTTP status this error maps to when it reaches an HTTP boundary. */
  get httpStatus(): number {
    return ERROR_CODES[this.code].http;
  }
}

/**
 * The one mapping of any error that reaches an HTTP boundary to an AppError, whose code gives the HTTP
 * status (`ERROR_CODES`): an AppError stays itself; a framework error carrying a 4xx `statusCode`
 * (fastify's body too large, unsupported media type, bad JSON ...) becomes the matching client error
 * with its message; anything else is INTERNAL, its message kept out of the answer. Every HTTP error
 * handler of payrecon answers from this.
 */
export function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  const status = (err as { statusCode?: unknown } | null)?.statusCode;
  const message = err instanceof Error ? err.message : String(err);
  if (typeof status === 'number' && status >= 400 && status < 500) {
    const code: ErrorCode =
      status === 413
        ? 'PAYLOAD_TOO_LARGE'
        : status === 415
          ? 'UNSUPPORTED_MEDIA_TYPE'
          : status === 404
            ? 'NOT_FOUND'
            : status === 401
              ? 'UNAUTHORIZED'
              : status === 403
                ? 'FORBIDDEN'
                : 'VALIDATION_FAILED';
    return new AppError(code, message, { cause: err });
  }
  return new AppError('INTERNAL', 'internal error', { cause: err });
}

/** The HTTP status of any error at an HTTP boundary (see `toAppError`). */
export function httpStatusOf(err: unknown): number {
  return toAppError(err).httpStatus;
}

/**
 * True for an AppError whose code the table above marks retryable (a consumer retries the batch, then
 * dead-letters it); false for anything else, unknown errors included. Whether a transaction hit a
 * conflict and runs again is the ledger's own question (serialization failures), not this one.
 */
export function isRetryableAppError(err: unknown): boolean {
  return err instanceof AppError ? err.retryable : false;
}

/** Exhaustiveness check for switches over a union. */
export function assertNever(value: never, what = 'value'): never {
  throw new AppError('INTERNAL', `unexpected ${what}: ${JSON.stringify(value)}`);
}
