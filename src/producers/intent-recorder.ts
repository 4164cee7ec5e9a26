/**
 * Intents: the merchant's own record of what it created at the provider, published on
 * `merchant.intent.recorded.v1` for the reconciler to match against what the provider reports.
 *
 * - `intentFromDepositCreation`, `intentFromCardDepositCreation`, `intentFromCashoutCreation`,
 *   `intentFromRefundCreation` build an `Intent` from a creation call's request and its response (or
 *   its failure: a provider refusal is `declined`, a timeout or 5xx is `unknown`). The request and
 *   response are copied sanitised: never card data, credentials, tokens or signatures.
 * - `recordingClient(client, onIntent)` wraps a `ProviderClient` (or the sandbox traffic generator's
 *   `TrafficClient`): each create* call goes to the provider, then its intent goes to `onIntent` (and
 *   the call's result or error to the caller).
 * - `intentsPlugin(deps)`: `POST /intents` (one intent or an array, JSON), validated by
 *   `intentInputSchema`, answered 200 only once Kafka acknowledged, 400 naming field and rule, 401
 *   without the bearer token when one is set.
 * - `runIntentRecordCli`: `payrecon intent record --file FILE.json`.
 * - `connectFromConfig()`: config, Kafka publisher and registry for the CLI commands.
 */
import { randomUUID, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { SchemaRegistry } from '@kafkajs/confluent-schema-registry';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { type Config, loadConfig } from '../config.ts';
import { AppError, toAppError } from '../domain/errors.ts';
import { formatAmount, type Minor, parseAmount } from '../domain/money.ts';
import { INTENT_OPERATIONS, type Intent, type IntentOperation } from '../domain/observation.ts';
import { createKafka, createPublisher, type Publisher } from '../events/kafka.ts';
import { registerSchemas } from '../events/serde.ts';
import { type Logger, logger as rootLogger } from '../logger.ts';
import type { NewCashout, ProviderClient } from '../provider/client.ts';
import { ProviderError } from '../provider/errors.ts';
import { parseProviderJson } from '../provider/json.ts';
import {
  type CardDepositRequestInput,
  type CardDepositResponse,
  type CashoutCreateResponse,
  type DepositCreateRequestInput,
  type DepositCreateResponse,
  formatZodIssues,
  type RefundCreateRequestInput,
  type RefundCreateResponse,
} from '../provider/schemas.ts';

export const INTENT_TOPIC = 'merchant.intent.recorded.v1';

// ---------------------------------------------------------------- sanitising

/** Keys never copied into an intent, at any depth. */
const SECRET_KEYS = new Set([
  'login',
  'pass',
  'password',
  'secret',
  'credit_card',
  'card_number',
  'cvv',
  'card_token',
  'checkout_token',
  'token',
  'expiration_month',
  'expiration_year',
  'holder_name',
  'authorization',
  'signature',
  'payload-signature',
  'payload_signature',
  'control',
  'authentication_url',
]);

/**
 * A deep copy without secret keys; bigints (every bigint in a provider body is a `Minor` amount)
 * become decimal text so the stored JSON reads like the provider's.
 */
export function sanitize(value: unknown): unknown {
  if (typeof value === 'bigint') return formatAmount(value);
  if (Array.isArray(value)) return value.map(sanitize);
  if (value !== null && typeof value === 'object') {
    if (value instanceof Date) return value.toISOString();
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      if (SECRET_KEYS.has(k.toLowerCase()) || v === undefined) continue;
      out[k] = sanitize(v);
    }
    return out;
  }
  if (typeof value === 'function' || typeof value === 'symbol') return undefined;
  return value;
}

function sanitized(value: unknown): Record<string, unknown> {
  const s = sanitize(value);
  return s !== null && typeof s === 'object' && !Array.isArray(s) ? (s as Record<string, unknown>) : {};
}

/** A request amount as `Minor`: bigint is already minor units; text and numbers are decimal. */
function toMinor(value: unknown, field: string): Minor {
  if (typeof value === 'bigint') return value;
  if (typeof value === 'string' || typeof value === 'number') return parseAmount(String(value), { field });
  throw new AppError('VALIDATION_FAILED', `${field}: is required`, {
    details: { field, rule: 'is required' },
  });
}

// ---------------------------------------------------------------- building intents

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
  const err = o.error;
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

/** Local currency of the countries the provider serves, for cashouts created without a currency. */
const LOCAL_CURRENCY: Readonly<Record<string, string>> = {
  AR: 'ARS',
  BO: 'BOB',
  BR: 'BRL',
  CL: 'CLP',
  CO: 'COP',
  CR: 'CRC',
  EC: 'USD',
  GT: 'GTQ',
  MX: 'MXN',
  PA: 'USD',
  PE: 'PEN',
  PY: 'PYG',
  SV: 'USD',
  UY: 'UYU',
};

/** POST /v3/cashout (provider-facts): credentials (login, pass) are never copied. */
export function intentFromCashoutCreation(
  account: string,
  request: NewCashout | Record<string, unknown>,
  outcome: CreationOutcome<CashoutCreateResponse>,
): Intent {
  const req = request as Record<string, unknown>;
  const base = common(account, 'cashout', outcome);
  const country = String(req.country ?? '');
  const currency = typeof req.currency === 'string' ? req.currency : LOCAL_CURRENCY[country];
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
 * POST /v3/refunds (provider-facts). A refund request names no currency: give the refunded deposit's
 * (`currency`) unless the response's `refund_info` carries it. Without an amount (a full refund) the
 * amount comes from `refund_info` or `fullAmount`.
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
  return {
    ...base,
    externalRef: outcome.reference ?? (res ? `refund-${res.refund_id}` : `refund-${base.intentId}`),
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

// ---------------------------------------------------------------- recording clients

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

// ---------------------------------------------------------------- the input schema (HTTP, file, CSV)

const decimalAmount = (field: string, allowZero = false) =>
  z
    .union([z.string(), z.number()], { error: 'must be a decimal amount such as "100.50"' })
    .transform((v, ctx) => {
      try {
        const minor = parseAmount(String(v), { field });
        if (minor < 0n || (!allowZero && minor === 0n)) {
          ctx.addIssue({
            code: 'custom',
            message: allowZero ? 'must not be negative' : 'must be greater than 0',
          });
          return z.NEVER;
        }
        return minor;
      } catch (err) {
        ctx.addIssue({
          code: 'custom',
          message:
            err instanceof AppError ? String(err.details?.rule ?? err.message) : 'must be a decimal amount',
        });
        return z.NEVER;
      }
    });

const providerId = z
  .union([z.string(), z.number()], { error: 'must be a provider id (digits)' })
  .transform((v) => String(v))
  .refine((s) => /^[1-9]\d{0,19}$/.test(s), 'must be a provider id (digits)');

const flag = z.union([z.boolean(), z.string()], { error: 'must be true or false' }).transform((v, ctx) => {
  if (typeof v === 'boolean') return v;
  const s = v.trim().toLowerCase();
  if (s === 'true' || s === '1') return true;
  if (s === 'false' || s === '0' || s === '') return false;
  ctx.addIssue({ code: 'custom', message: 'must be true or false' });
  return z.NEVER;
});

/**
 * One intent as the merchant sends it (`POST /intents`, `payrecon intent record`, backfill CSV rows).
 * Amounts are decimal text (`"100.50"`); ids digits; `createdAt` ISO 8601.
 */
export const intentInputSchema = z
  .object({
    intentId: z.string().trim().min(1, 'must not be empty').max(200, 'at most 200 characters').optional(),
    operation: z.enum(INTENT_OPERATIONS, { error: `must be one of ${INTENT_OPERATIONS.join(', ')}` }),
    account: z
      .string({ error: 'is required' })
      .regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, 'must be an account name (a-z 0-9 _ -)'),
    externalRef: z
      .string({ error: 'is required' })
      .trim()
      .min(1, 'must not be empty')
      .max(128, 'at most 128 characters'),
    entityId: providerId.nullish(),
    currency: z.string({ error: 'is required' }).regex(/^[A-Z]{3}$/, 'must be an ISO 4217 code such as BRL'),
    amount: decimalAmount('amount'),
    expectedFee: decimalAmount('expectedFee', true).nullish(),
    test: flag.default(false),
    crypto: flag.default(false),
    feeOnPayer: flag.default(false),
    parentDepositId: providerId.nullish(),
    outcome: z
      .enum(['created', 'declined', 'unknown'], { error: 'must be created, declined or unknown' })
      .default('created'),
    createdAt: z
      .union([z.string(), z.date()], { error: 'must be an ISO 8601 date-time' })
      .transform((v, ctx) => {
        const d = v instanceof Date ? v : new Date(v);
        if (Number.isNaN(d.getTime()) || (typeof v === 'string' && !/^\d{4}-\d{2}-\d{2}/.test(v))) {
          ctx.addIssue({ code: 'custom', message: 'must be an ISO 8601 date-time' });
          return z.NEVER;
        }
        return d;
      })
      .optional(),
    request: z.record(z.string(), z.unknown(), { error: 'must be an object' }).optional(),
    response: z.record(z.string(), z.unknown(), { error: 'must be an object' }).nullish(),
  })
  .superRefine((v, ctx) => {
    if (v.operation === 'refund' && !v.parentDepositId) {
      ctx.addIssue({ code: 'custom', path: ['parentDepositId'], message: 'is required for a refund' });
    }
    if (v.outcome === 'created' && !v.entityId) {
      ctx.addIssue({ code: 'custom', path: ['entityId'], message: 'is required when outcome is created' });
    }
  });

export type IntentInput = z.input<typeof intentInputSchema>;

/** The Intent of a validated input; a missing intentId is derived from account, operation and ref. */
export function intentFromInput(v: z.output<typeof intentInputSchema>, now: Date = new Date()): Intent {
  return {
    // Derived, not random: re-sending the same record is then a no-op in the ledger.
    intentId: v.intentId ?? `${v.account}:${v.operation}:${v.externalRef}`,
    operation: v.operation,
    account: v.account,
    externalRef: v.externalRef,
    entityId: v.entityId ?? null,
    currency: v.currency,
    amount: v.amount,
    expectedFee: v.expectedFee ?? null,
    test: v.test,
    crypto: v.crypto,
    feeOnPayer: v.feeOnPayer,
    parentDepositId: v.parentDepositId ?? null,
    outcome: v.outcome,
    createdAt: v.createdAt ?? now,
    request: sanitized(v.request ?? {}),
    response: v.response ? sanitized(v.response) : null,
  };
}

export interface IntentIssue {
  /** Position in the list (0-based), when several were sent. */
  index?: number;
  field: string;
  rule: string;
}

/** Validates one intent or a list; answers the intents or every issue (field and rule). */
export function parseIntents(
  body: unknown,
  accounts?: readonly string[],
): { ok: true; intents: Intent[] } | { ok: false; issues: IntentIssue[] } {
  const list = Array.isArray(body) ? body : [body];
  const many = Array.isArray(body);
  if (list.length === 0)
    return { ok: false, issues: [{ field: 'body', rule: 'must hold at least one intent' }] };
  const intents: Intent[] = [];
  const issues: IntentIssue[] = [];
  const now = new Date();
  list.forEach((item, index) => {
    const at = many ? { index } : {};
    const result = intentInputSchema.safeParse(item);
    if (!result.success) {
      for (const i of formatZodIssues(result.error)) issues.push({ ...at, field: i.field, rule: i.rule });
      return;
    }
    if (accounts && !accounts.includes(result.data.account)) {
      issues.push({ ...at, field: 'account', rule: 'must name a configured provider account' });
      return;
    }
    intents.push(intentFromInput(result.data, now));
  });
  return issues.length > 0 ? { ok: false, issues } : { ok: true, intents };
}

export function issueText(i: IntentIssue): string {
  return `${i.index === undefined ? '' : `[${i.index}].`}${i.field}: ${i.rule}`;
}

// ---------------------------------------------------------------- HTTP

export interface IntentsPluginDeps {
  publisher: Pick<Publisher, 'publish'>;
  /** Bearer token required on `POST /intents`; null or absent: the route is open (say so at start-up). */
  token?: string | null;
  /** Configured account names; an intent for another account is refused. */
  accounts?: readonly string[];
  /** Largest body, bytes (default 1 MiB). */
  bodyLimit?: number;
  logger?: Logger;
}

function tokenMatches(req: FastifyRequest, token: string): boolean {
  const given = req.headers.authorization ?? '';
  const a = Buffer.from(given);
  const b = Buffer.from(`Bearer ${token}`);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** `POST /intents`: an encapsulated plugin (its own JSON parser: amounts must stay exact). */
export function intentsPlugin(deps: IntentsPluginDeps): FastifyPluginAsync {
  const log = (deps.logger ?? rootLogger).child({ module: 'intent-recorder' });
  if (!deps.token)
    log.warn('POST /intents has no bearer token configured: anyone who reaches it can record intents');
  return async (app: FastifyInstance) => {
    app.removeAllContentTypeParsers();
    app.addContentTypeParser(
      'application/json',
      { parseAs: 'string', bodyLimit: deps.bodyLimit ?? 1024 * 1024 },
      (_req, body, done) => {
        try {
          done(null, parseProviderJson(String(body)));
        } catch {
          done(new AppError('VALIDATION_FAILED', 'body: must be valid JSON'), undefined);
        }
      },
    );
    app.setErrorHandler((err, _req, reply: FastifyReply) => {
      const e = toAppError(err);
      if (e.code === 'UNSUPPORTED_MEDIA_TYPE') {
        return reply
          .code(e.httpStatus)
          .send({ error: 'unsupported_media_type', message: 'content-type: must be application/json' });
      }
      if (e.code === 'PAYLOAD_TOO_LARGE') {
        return reply.code(e.httpStatus).send({ error: 'too_large', message: 'body: too large' });
      }
      if (e.httpStatus < 500)
        return reply.code(e.httpStatus).send({ error: 'malformed', message: e.message });
      log.error({ err }, 'intent request failed');
      return reply.code(e.httpStatus).send({ error: 'internal', message: e.message });
    });
    if (deps.token) {
      const token = deps.token;
      app.addHook('onRequest', async (req, reply) => {
        if (!tokenMatches(req, token)) {
          return reply
            .code(401)
            .header('www-authenticate', 'Bearer')
            .send({ error: 'unauthorized', message: 'authorization: must be "Bearer <token>"' });
        }
      });
    }
    app.post('/intents', async (req, reply) => {
      const parsed = parseIntents(req.body, deps.accounts);
      if (!parsed.ok) {
        return reply.code(400).send({
          error: 'invalid',
          issues: parsed.issues,
          message: parsed.issues.map(issueText).join('; '),
        });
      }
      try {
        await deps.publisher.publish(
          INTENT_TOPIC,
          parsed.intents.map((value) => ({ value })),
        );
      } catch (err) {
        log.error({ err, intents: parsed.intents.length }, 'intents not published');
        return reply
          .code(503)
          .send({ error: 'unavailable', message: 'the intents could not be recorded; retry' });
      }
      return reply
        .code(200)
        .send({ recorded: parsed.intents.length, intent_ids: parsed.intents.map((i) => i.intentId) });
    });
  };
}

// ---------------------------------------------------------------- CLI

export interface Connected {
  config: Config;
  publisher: Publisher;
  close(): Promise<void>;
}

/**
 * Config, an acknowledged Kafka publisher and the registered schemas, for the CLI commands that
 * publish. KAFKA_BROKERS and SCHEMA_REGISTRY_URL must be set (these commands do not start the
 * embedded ones); a missing one fails with one line.
 */
export async function connectFromConfig(clientId = 'payrecon-cli'): Promise<Connected> {
  const config = loadConfig();
  if (config.kafka.brokers === null) {
    throw new AppError('CONFIG_INVALID', 'KAFKA_BROKERS: must be set for this command (host:port,...)');
  }
  if (config.schemaRegistry.url === null) {
    throw new AppError(
      'CONFIG_INVALID',
      'SCHEMA_REGISTRY_URL: must be set for this command (http://host:port)',
    );
  }
  const serde = await registerSchemas(new SchemaRegistry({ host: config.schemaRegistry.url }));
  const kafka = createKafka({
    brokers: [...config.kafka.brokers],
    clientId: `${config.kafka.clientId}-${clientId}`,
  });
  const publisher = await createPublisher(kafka, serde);
  return { config, publisher, close: () => publisher.disconnect() };
}

/** Runs a CLI action: an AppError prints as one line on stderr and exits 1. */
export async function runCliAction(action: () => Promise<void>): Promise<void> {
  try {
    await action();
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    process.stderr.write(`${message.split('\n')[0]}\n`);
    process.exitCode = 1;
  }
}

/** `payrecon intent record --file FILE.json`: one intent or an array; nothing published if any is invalid. */
export async function runIntentRecordCli(opts: { file: string }): Promise<void> {
  await runCliAction(async () => {
    let body: unknown;
    try {
      body = parseProviderJson(readFileSync(opts.file, 'utf8'));
    } catch (err) {
      throw new AppError(
        'VALIDATION_FAILED',
        `${opts.file}: ${err instanceof Error ? err.message : 'unreadable'}`,
      );
    }
    const connected = await connectFromConfig('intent');
    try {
      const parsed = parseIntents(
        body,
        connected.config.accounts.length > 0 ? connected.config.accounts.map((a) => a.name) : undefined,
      );
      if (!parsed.ok) {
        throw new AppError('VALIDATION_FAILED', `${opts.file}: ${parsed.issues.map(issueText).join('; ')}`);
      }
      await connected.publisher.publish(
        INTENT_TOPIC,
        parsed.intents.map((value) => ({ value })),
      );
      process.stdout.write(`recorded ${parsed.intents.length} intent(s)\n`);
    } finally {
      await connected.close();
    }
  });
}
