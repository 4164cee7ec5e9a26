/**
 * The typed HTTP client of the Payment Service API v3 (undici), one per provider account.
 *
 * - Every request is validated against its schema before it is sent; a broken one throws
 *   `ProviderValidationError` naming the field and rule, and nothing goes out.
 * - Every call has a timeout (`timeoutMs`, whole call including the body).
 * - Retries, with exponential back-off and full jitter, on network errors, timeouts, 5xx and 429
 *   (429/503 `Retry-After` is honoured):
 *   - reads (deposit, refund and cashout status, bank list) and the cashout status PUT: freely;
 *   - deposit, card deposit and refund creation: only with the same `X-Idempotency-Key` (the key is
 *     fixed before the first attempt; the provider answers a replay with the first result);
 *   - cashout creation: never blindly. After an ambiguous failure the client looks the `external_id`
 *     up; if the cashout exists its id is returned, if the provider answers 509 (not found) the
 *     creation is sent again; a 511 (external id already used) on a retry is resolved the same way,
 *     and so is the last failure when no retry is left; a creation sent with `resend` (it may have been
 *     sent before: a replay after a lost answer or a restart) resolves a 511 on its first attempt too;
 *   - cashout cancel: only on 429 (the request was not processed).
 * - Failures are `ProviderError`s with HTTP status, provider code and type. An answer that breaks its
 *   schema is a `ProviderError` with code PROVIDER_SCHEMA_DRIFT; unknown extra fields are kept and
 *   logged once per client as drift (names only, never values).
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Dispatcher, request } from 'undici';
import type { z } from 'zod';
import type { ErrorCode } from '../domain/errors.ts';
import type { Logger } from '../logger.ts';
import { unknownFields } from './drift.ts';
import { ProviderError, ProviderValidationError } from './errors.ts';
import { parseProviderJson, stringifyProviderJson } from './json.ts';
import {
  type Bank,
  banksResponseSchema,
  type CardDepositRequestInput,
  type CardDepositResponse,
  type CashoutCancelResponse,
  type CashoutCreateRequestInput,
  type CashoutCreateResponse,
  type CashoutStatusResponse,
  type CashoutUpdateResponse,
  cardDepositRequestSchema,
  cardDepositResponseSchema,
  cashoutCancelRequestSchema,
  cashoutCancelResponseSchema,
  cashoutCreateRequestSchema,
  cashoutCreateResponseSchema,
  cashoutStatusRequestSchema,
  cashoutStatusResponseSchema,
  cashoutUpdateRequestSchema,
  cashoutUpdateResponseSchema,
  type Deposit,
  type DepositCreateRequestInput,
  type DepositCreateResponse,
  depositCreateRequestSchema,
  depositCreateResponseSchema,
  depositSchema,
  formatZodIssues,
  type Refund,
  type RefundCreateRequestInput,
  type RefundCreateResponse,
  refundCreateRequestSchema,
  refundCreateResponseSchema,
  refundSchema,
} from './schemas.ts';
import { depositAuthorization, formatXDate, payloadSignature } from './signing.ts';

/** What the client needs of a provider account: where it is and the credentials (the config's `ProviderAccount` is one). */
export interface ProviderConnection {
  name: string;
  baseUrl: string;
  cardBaseUrl: string;
  depositLogin: string;
  depositSecret: string;
  cashoutLogin: string;
  cashoutPass: string;
  cashoutSecret: string;
  readOnlyKey: string;
  notificationUrl?: string | undefined;
}

/** The log calls the client makes; a pino `Logger` is one. */
type ClientLog = Pick<Logger, 'debug' | 'info' | 'warn'>;

const SILENT: ClientLog = { debug: () => undefined, info: () => undefined, warn: () => undefined };

export interface ProviderClientOptions {
  /** Whole-call timeout per attempt (default 10 s). */
  timeoutMs?: number;
  /** Retries after the first attempt (default 3). */
  retries?: number;
  /** First back-off delay (default 200 ms); doubles per attempt, with full jitter. */
  backoffBaseMs?: number;
  /** Largest back-off delay (default 5 s). */
  backoffMaxMs?: number;
  /** A Retry-After longer than this is not waited for: the call fails as rate limited (default 60 s). */
  maxRetryAfterMs?: number;
  /** Where the client logs its retries, drift and ambiguous cashouts (none: silent). */
  logger?: Logger;
  /** Clock of X-Date (tests). */
  now?: () => Date;
  /** Jitter source in [0, 1) (tests). */
  random?: () => number;
  /** undici dispatcher (connection pool); the global one by default. */
  dispatcher?: Dispatcher;
  /** Told of every HTTP exchange, retries included (metrics). */
  onCall?: (call: ProviderCallRecord) => void;
  /**
   * Aborted when the client's owner stops: a failed call is then not tried again (nor logged as
   * retried), and a back-off under way ends, so a clean shutdown is quiet and quick.
   */
  signal?: AbortSignal;
}

/** How one HTTP exchange with the provider ended. */
export type ProviderCallOutcome =
  | 'ok'
  | 'client_error'
  | 'rate_limited'
  | 'server_error'
  | 'timeout'
  | 'network_error';

/** One HTTP exchange: the client's operation name (e.g. `getDeposit`), its outcome and duration. */
export interface ProviderCallRecord {
  operation: string;
  outcome: ProviderCallOutcome;
  seconds: number;
}

/** The outcome of an answered exchange, by HTTP status. */
export function outcomeOfStatus(status: number): ProviderCallOutcome {
  if (status === 429) return 'rate_limited';
  if (status >= 500) return 'server_error';
  if (status >= 400) return 'client_error';
  return 'ok';
}

export interface IdempotentCallOptions {
  /** X-Idempotency-Key; a UUID is generated when absent. Reuse it to replay a creation safely. */
  idempotencyKey?: string;
}

export interface CashoutCallOptions {
  /**
   * The creation may have been sent before (a replay after a lost answer, or after a restart): a 511
   * (external id already used) is then resolved by looking the external_id up, as on a retry.
   */
  resend?: boolean;
}

export type CashoutRef =
  | { cashout_id: number; external_id?: string }
  | { cashout_id?: number; external_id: string };

export type NewCashout = Omit<CashoutCreateRequestInput, 'login' | 'pass' | 'notification_url'> & {
  /** Defaults to the account's notificationUrl. */
  notification_url?: string;
};

export type RefundView = Refund & {
  /** The voucher decoded from base64 (a PDF), when asked for with `voucher: true` and present. */
  voucherPdf: Buffer | null;
};

export interface ProviderClient {
  readonly account: string;
  createDeposit(
    input: DepositCreateRequestInput,
    options?: IdempotentCallOptions,
  ): Promise<DepositCreateResponse>;
  getDeposit(depositId: number | string): Promise<Deposit>;
  createCardDeposit(
    input: CardDepositRequestInput,
    options?: IdempotentCallOptions,
  ): Promise<CardDepositResponse>;
  createCashout(input: NewCashout, options?: CashoutCallOptions): Promise<CashoutCreateResponse>;
  getCashoutStatus(ref: CashoutRef): Promise<CashoutStatusResponse>;
  updateCashoutStatus(cashoutId: number, status: 'ON_HOLD' | 'PENDING'): Promise<CashoutUpdateResponse>;
  cancelCashout(ref: CashoutRef): Promise<CashoutCancelResponse>;
  createRefund(
    input: RefundCreateRequestInput,
    options?: IdempotentCallOptions,
  ): Promise<RefundCreateResponse>;
  getRefund(refundId: number | string, options?: { voucher?: boolean }): Promise<RefundView>;
  listBanks(country: string): Promise<Bank[]>;
}

/** Which retries a call may make. */
type RetryRule = 'free' | 'idempotent' | 'rate-limit-only' | 'none';
type Auth = 'deposit' | 'cashout' | 'bearer';

interface Call<S extends z.ZodType> {
  operation: string;
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  url: string;
  auth: Auth;
  /** Already-validated body (schema output); written with stringifyProviderJson. */
  body?: unknown;
  idempotencyKey?: string;
  retry: RetryRule;
  response: S;
  /** A creation that may have been sent before: a 511 on the first attempt is ambiguous too. */
  resend?: boolean;
}

interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

function joinUrl(base: string, path: string): string {
  return `${base.replace(/\/+$/, '')}${path}`;
}

function validate<S extends z.ZodType>(operation: string, schema: S, input: unknown): z.output<S> {
  const result = schema.safeParse(input);
  if (!result.success) throw new ProviderValidationError(operation, formatZodIssues(result.error));
  return result.data;
}

function header(headers: RawAnswer['headers'], name: string): string | undefined {
  const v = headers[name.toLowerCase()];
  return Array.isArray(v) ? v[0] : v;
}

/** Retry-After in ms (seconds or an HTTP date); null when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, now: Date): number | null {
  if (value === undefined) return null;
  const s = value.trim();
  if (/^\d+$/.test(s)) return Number(s) * 1000;
  const at = Date.parse(s);
  return Number.isNaN(at) ? null : Math.max(0, at - now.getTime());
}

function textField(v: unknown): string | null {
  return typeof v === 'string' && v !== '' ? v : null;
}

function intField(v: unknown): number | null {
  if (typeof v === 'number' && Number.isSafeInteger(v)) return v;
  if (typeof v === 'string' && /^\d+$/.test(v)) return Number(v);
  return null;
}

export function createProviderClient(
  account: ProviderConnection,
  options: ProviderClientOptions = {},
): ProviderClient {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const retries = options.retries ?? 3;
  const backoffBaseMs = options.backoffBaseMs ?? 200;
  const backoffMaxMs = options.backoffMaxMs ?? 5_000;
  const maxRetryAfterMs = options.maxRetryAfterMs ?? 60_000;
  const now = options.now ?? (() => new Date());
  const random = options.random ?? Math.random;
  const log: ClientLog =
    options.logger?.child({ module: 'provider-client', account: account.name }) ?? SILENT;
  const driftSeen = new Set<string>();

  function backoff(attempt: number): number {
    const ceiling = Math.min(backoffMaxMs, backoffBaseMs * 2 ** attempt);
    return Math.round(ceiling / 2 + (random() * ceiling) / 2);
  }

  function headersFor(call: Call<z.ZodType>, bodyText: string): Record<string, string> {
    const h: Record<string, string> = {};
    if (call.auth === 'bearer') {
      h.authorization = `Bearer ${account.readOnlyKey}`;
      return h;
    }
    h['content-type'] = 'application/json';
    if (call.auth === 'deposit') {
      const xDate = formatXDate(now());
      h['x-date'] = xDate;
      h['x-login'] = account.depositLogin;
      h.authorization = depositAuthorization({
        xDate,
        xLogin: account.depositLogin,
        body: bodyText,
        secret: account.depositSecret,
      });
      if (call.idempotencyKey !== undefined) h['x-idempotency-key'] = call.idempotencyKey;
    } else {
      h['payload-signature'] = payloadSignature(bodyText, account.cashoutSecret);
    }
    return h;
  }

  /** One HTTP exchange; throws a retryable ProviderError on timeout or network failure. */
  async function exchange(call: Call<z.ZodType>, bodyText: string): Promise<RawAnswer> {
    // One timer per call, cleared when the call ends: AbortSignal.timeout's timer stays armed after the
    // call and fires (building a DOMException) for every call still reachable when it expires.
    const controller = new AbortController();
    const { signal } = controller;
    const timer = setTimeout(
      () => controller.abort(new DOMException(`no answer within ${timeoutMs} ms`, 'TimeoutError')),
      timeoutMs,
    );
    const started = Date.now();
    try {
      const res = await request(call.url, {
        method: call.method,
        headers: headersFor(call, bodyText),
        ...(call.body === undefined ? {} : { body: bodyText }),
        signal,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}),
      });
      const text = await res.body.text();
      log.debug(
        { operation: call.operation, method: call.method, status: res.statusCode, ms: Date.now() - started },
        'provider call',
      );
      options.onCall?.({
        operation: call.operation,
        outcome: outcomeOfStatus(res.statusCode),
        seconds: (Date.now() - started) / 1000,
      });
      return { status: res.statusCode, headers: res.headers, text };
    } catch (err) {
      const code = (err as { code?: string }).code ?? '';
      const timedOut = signal.aborted || /TIMEOUT/.test(code) || (err as Error).name === 'TimeoutError';
      const errorCode: ErrorCode = timedOut ? 'PROVIDER_TIMEOUT' : 'PROVIDER_NETWORK';
      options.onCall?.({
        operation: call.operation,
        outcome: timedOut ? 'timeout' : 'network_error',
        seconds: (Date.now() - started) / 1000,
      });
      throw new ProviderError(
        errorCode,
        `${call.operation}: ${timedOut ? `no answer within ${timeoutMs} ms` : `network error ${code || (err as Error).message}`}`,
        { operation: call.operation, cause: err },
      );
    } finally {
      clearTimeout(timer);
    }
  }

  function errorFromAnswer(call: Call<z.ZodType>, answer: RawAnswer): ProviderError {
    let body: unknown = answer.text;
    try {
      body = answer.text === '' ? null : parseProviderJson(answer.text);
    } catch {
      // keep the text
    }
    const obj = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
    const providerCode = intField(obj.code);
    const providerType = textField(obj.type);
    const description = textField(obj.description) ?? textField(obj.message) ?? `HTTP ${answer.status}`;
    const code: ErrorCode =
      answer.status === 429
        ? 'PROVIDER_RATE_LIMITED'
        : answer.status >= 500
          ? 'PROVIDER_UNAVAILABLE'
          : 'PROVIDER_ERROR';
    const err = new ProviderError(
      code,
      `${call.operation}: HTTP ${answer.status}${providerCode === null ? '' : ` code ${providerCode}`}${
        providerType ? ` ${providerType}` : ''
      }: ${description}`,
      {
        operation: call.operation,
        status: answer.status,
        providerCode,
        providerType,
        body,
        details: {
          ...(Array.isArray(obj.details) ? { details: obj.details } : {}),
          ...(textField(obj.reason) ? { reason: obj.reason } : {}),
          ...(textField(obj.reason_code) ? { reasonCode: obj.reason_code } : {}),
        },
      },
    );
    return err;
  }

  function parseAnswer<S extends z.ZodType>(call: Call<S>, answer: RawAnswer): z.output<S> {
    let body: unknown;
    try {
      body = parseProviderJson(answer.text);
    } catch (err) {
      throw new ProviderError('PROVIDER_SCHEMA_DRIFT', `${call.operation}: answer is not JSON`, {
        operation: call.operation,
        status: answer.status,
        body: answer.text.slice(0, 200),
        cause: err,
      });
    }
    const result = call.response.safeParse(body);
    if (!result.success) {
      const issues = formatZodIssues(result.error);
      throw new ProviderError(
        'PROVIDER_SCHEMA_DRIFT',
        `${call.operation}: answer breaks its schema: ${issues.map((i) => `${i.field}: ${i.rule}`).join('; ')}`,
        { operation: call.operation, status: answer.status, body, details: { issues } },
      );
    }
    const extra = unknownFields(call.response, body).filter((f) => !driftSeen.has(`${call.operation}:${f}`));
    if (extra.length > 0) {
      for (const f of extra) driftSeen.add(`${call.operation}:${f}`);
      log.warn(
        { operation: call.operation, fields: extra },
        'provider answer has fields the contract does not name',
      );
    }
    return result.data;
  }

  function isRetryableFailure(err: ProviderError): boolean {
    if (err.code === 'PROVIDER_TIMEOUT' || err.code === 'PROVIDER_NETWORK') return true;
    return err.status !== null && (err.status === 429 || err.status >= 500);
  }

  /**
   * Sends a call with its retry rule. Returns the parsed answer or throws the last ProviderError.
   * `onAmbiguous` (cashout creation) decides what happens after a retryable failure instead of a
   * blind resend: return a value to finish, or `undefined` to send again.
   */
  async function send<S extends z.ZodType>(
    call: Call<S>,
    onAmbiguous?: (err: ProviderError, attempt: number) => Promise<z.output<S> | undefined>,
  ): Promise<z.output<S>> {
    const bodyText = call.body === undefined ? '' : stringifyProviderJson(call.body);
    for (let attempt = 0; ; attempt++) {
      let failure: ProviderError;
      let retryAfterMs: number | null = null;
      try {
        const answer = await exchange(call, bodyText);
        if (answer.status >= 200 && answer.status < 300) return parseAnswer(call, answer);
        failure = errorFromAnswer(call, answer);
        if (answer.status === 429 || answer.status === 503) {
          retryAfterMs = parseRetryAfter(header(answer.headers, 'retry-after'), now());
        }
        if (onAmbiguous && (attempt > 0 || call.resend) && failure.providerCode === 511) {
          // Our earlier attempt went through after all: find it rather than fail.
          const found = await onAmbiguous(failure, attempt);
          if (found !== undefined) return found;
          throw failure;
        }
      } catch (err) {
        if (!(err instanceof ProviderError) || err.status !== null || !isRetryableFailure(err)) throw err;
        failure = err;
      }
      const allowed =
        isRetryableFailure(failure) &&
        attempt < retries &&
        (call.retry === 'free' ||
          call.retry === 'idempotent' ||
          (call.retry === 'rate-limit-only' && failure.status === 429));
      const stopping = options.signal?.aborted === true;
      const giveUp = stopping || !allowed || (retryAfterMs !== null && retryAfterMs > maxRetryAfterMs);
      if (giveUp) {
        // Out of retries after an ambiguous failure: still tell the caller what exists, if anything.
        if (onAmbiguous && !stopping && isRetryableFailure(failure)) {
          const found = await onAmbiguous(failure, attempt);
          if (found !== undefined) return found;
        }
        throw failure;
      }
      const delay = retryAfterMs ?? backoff(attempt);
      log.info(
        {
          operation: call.operation,
          attempt: attempt + 1,
          status: failure.status,
          code: failure.code,
          delayMs: delay,
        },
        'retrying provider call',
      );
      try {
        await sleep(delay, undefined, options.signal ? { signal: options.signal } : undefined);
      } catch {
        // Stopped during the back-off: the failure stands, not retried.
        throw failure;
      }
      if (onAmbiguous) {
        const found = await onAmbiguous(failure, attempt);
        if (found !== undefined) return found;
      }
    }
  }

  const depositUrl = (path: string) => joinUrl(account.baseUrl, path);
  const cashoutCredentials = () => ({ login: account.cashoutLogin, pass: account.cashoutPass });

  async function getCashoutStatus(ref: CashoutRef): Promise<CashoutStatusResponse> {
    const operation = 'getCashoutStatus';
    const body = validate(operation, cashoutStatusRequestSchema, { ...cashoutCredentials(), ...ref });
    return send({
      operation,
      method: 'POST',
      url: depositUrl('/v3/cashout/status'),
      auth: 'cashout',
      body,
      retry: 'free',
      response: cashoutStatusResponseSchema,
    });
  }

  return {
    account: account.name,

    async createDeposit(input, opts = {}) {
      const operation = 'createDeposit';
      const withDefaults =
        input.notification_url === undefined && account.notificationUrl
          ? { ...input, notification_url: account.notificationUrl }
          : input;
      const body = validate(operation, depositCreateRequestSchema, withDefaults);
      return send({
        operation,
        method: 'POST',
        url: depositUrl('/v3/deposits'),
        auth: 'deposit',
        body,
        idempotencyKey: opts.idempotencyKey ?? randomUUID(),
        retry: 'idempotent',
        response: depositCreateResponseSchema,
      });
    },

    async getDeposit(depositId) {
      const operation = 'getDeposit';
      const id = String(depositId);
      if (!/^[1-9]\d*$/.test(id)) {
        throw new ProviderValidationError(operation, [
          { field: 'deposit_id', rule: 'must be a positive integer' },
        ]);
      }
      return send({
        operation,
        method: 'GET',
        url: depositUrl(`/v3/deposits/${id}`),
        auth: 'deposit',
        retry: 'free',
        response: depositSchema,
      });
    },

    async createCardDeposit(input, opts = {}) {
      const operation = 'createCardDeposit';
      const body = validate(operation, cardDepositRequestSchema, input);
      return send({
        operation,
        method: 'POST',
        url: joinUrl(account.cardBaseUrl, '/v3/deposits'),
        auth: 'deposit',
        body,
        idempotencyKey: opts.idempotencyKey ?? randomUUID(),
        retry: 'idempotent',
        response: cardDepositResponseSchema,
      });
    },

    async createCashout(input, opts = {}) {
      const operation = 'createCashout';
      const body = validate(operation, cashoutCreateRequestSchema, {
        ...input,
        ...cashoutCredentials(),
        notification_url: input.notification_url ?? account.notificationUrl,
      });
      const externalId = body.external_id;
      return send(
        {
          operation,
          method: 'POST',
          url: depositUrl('/v3/cashout'),
          auth: 'cashout',
          body,
          retry: 'free',
          response: cashoutCreateResponseSchema,
          ...(opts.resend ? { resend: true } : {}),
        },
        async (failure) => {
          // Never resend blindly: the first attempt may have created the cashout.
          let found: CashoutStatusResponse;
          try {
            found = await getCashoutStatus({ external_id: externalId });
          } catch (err) {
            if (err instanceof ProviderError && err.providerCode === 509) return undefined;
            log.warn(
              { operation, externalId, err },
              'cashout creation outcome unknown and the lookup failed; not resending',
            );
            throw failure;
          }
          if (found.cashout_id === null || found.cashout_id === undefined) {
            throw new ProviderError(
              'PROVIDER_SCHEMA_DRIFT',
              `${operation}: cashout ${externalId} exists but its status answer carries no cashout_id`,
              { operation, status: 200, body: null, cause: failure },
            );
          }
          log.info(
            { operation, externalId, cashoutId: found.cashout_id },
            'cashout found after an ambiguous failure',
          );
          return { cashout_id: found.cashout_id };
        },
      );
    },

    getCashoutStatus,

    async updateCashoutStatus(cashoutId, status) {
      const operation = 'updateCashoutStatus';
      const body = validate(operation, cashoutUpdateRequestSchema, {
        ...cashoutCredentials(),
        cashout_id: cashoutId,
        status,
      });
      return send({
        operation,
        method: 'PUT',
        url: depositUrl('/v3/cashout/status'),
        auth: 'cashout',
        body,
        retry: 'free',
        response: cashoutUpdateResponseSchema,
      });
    },

    async cancelCashout(ref) {
      const operation = 'cancelCashout';
      const body = validate(operation, cashoutCancelRequestSchema, { ...cashoutCredentials(), ...ref });
      return send({
        operation,
        method: 'DELETE',
        url: depositUrl('/v3/cashout/cancel'),
        auth: 'cashout',
        body,
        retry: 'rate-limit-only',
        response: cashoutCancelResponseSchema,
      });
    },

    async createRefund(input, opts = {}) {
      const operation = 'createRefund';
      const withDefaults =
        input.notification_url === undefined && account.notificationUrl
          ? { ...input, notification_url: account.notificationUrl }
          : input;
      const body = validate(operation, refundCreateRequestSchema, withDefaults);
      return send({
        operation,
        method: 'POST',
        url: depositUrl('/v3/refunds'),
        auth: 'deposit',
        body,
        idempotencyKey: opts.idempotencyKey ?? randomUUID(),
        retry: 'idempotent',
        response: refundCreateResponseSchema,
      });
    },

    async getRefund(refundId, opts = {}) {
      const operation = 'getRefund';
      const id = String(refundId);
      if (!/^[1-9]\d*$/.test(id)) {
        throw new ProviderValidationError(operation, [
          { field: 'refund_id', rule: 'must be a positive integer' },
        ]);
      }
      const refund = await send({
        operation,
        method: 'GET',
        url: depositUrl(`/v3/refunds/${id}${opts.voucher ? '?voucher=true' : ''}`),
        auth: 'deposit',
        retry: 'free',
        response: refundSchema,
      });
      const voucherPdf = refund.voucher ? Buffer.from(refund.voucher, 'base64') : null;
      return { ...refund, voucherPdf };
    },

    async listBanks(country) {
      const operation = 'listBanks';
      if (!/^[A-Z]{2}$/.test(country)) {
        throw new ProviderValidationError(operation, [
          { field: 'country', rule: 'must be an ISO 3166-1 alpha-2 country code' },
        ]);
      }
      return send({
        operation,
        method: 'GET',
        url: depositUrl(`/v3/banks?country=${country}`),
        auth: 'bearer',
        retry: 'free',
        response: banksResponseSchema,
      });
    },
  };
}

/** Provider clients per account, built once; undefined for an account not given. */
export function clientsFor(
  accounts: readonly ProviderConnection[],
  options: ProviderClientOptions = {},
): (account: string) => ProviderClient | undefined {
  const clients = new Map(accounts.map((a) => [a.name, createProviderClient(a, options)]));
  return (name) => clients.get(name);
}
