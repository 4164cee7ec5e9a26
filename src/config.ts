/**
 * payrecon's configuration: one zod schema over the environment, parsed once at start-up and frozen.
 * Nothing else in the app reads `process.env`. A missing or malformed setting fails with a
 * `ConfigError` whose message is one line naming the variable and the rule, e.g.
 * `PAYRECON_WEB_PORT: must be an integer from 0 to 65535` or
 * `PAYRECON_ACCOUNTS[0].baseUrl: must be an http(s) URL`. Messages never echo a value.
 *
 * Absent DATABASE_URL, KAFKA_BROKERS or SCHEMA_REGISTRY_URL mean "start the embedded one"; no
 * provider account means "run against the sandbox". Later issues extend the schema here, one block per
 * concern, each variable with its default.
 */
import { accessSync, constants, readFileSync } from 'node:fs';
import { validate as validateCron } from 'node-cron';
import { z } from 'zod';
import { API_SCOPES } from './domain/api-tokens.ts';
import { AppError } from './domain/errors.ts';
import {
  DEFAULT_EXCEPTION_RULES,
  EXCEPTION_TYPES,
  type ExceptionType,
  SEVERITIES,
  type Severity,
} from './domain/exception-rules.ts';
import { DEFAULT_SLA_RULES, type SlaRule } from './domain/exception-sla.ts';
import {
  checkMatchRules,
  DEFAULT_MATCH_RULES,
  MATCH_CARDINALITIES,
  MATCH_PAIRS,
  type MatchRule,
} from './domain/matching.ts';
import { parseAmount } from './domain/money.ts';
import { DEFAULT_POLLING_RULES } from './domain/polling.ts';
import { WEB_ROLES } from './domain/roles.ts';

// ---------------------------------------------------------------- building blocks

function required(what: string) {
  return {
    error: (iss: { input?: unknown }) => (iss.input === undefined ? 'is required' : `must be ${what}`),
  };
}

const nonEmpty = (what = 'a non-empty text') => z.string(required(what)).trim().min(1, 'must not be empty');
/** `host:port` of a listener of its own (an IPv6 address in brackets). */
const hostPort = () =>
  nonEmpty('host:port').regex(/^(\[[0-9a-fA-F:.]+\]|[^:\s]+):\d{1,5}$/, 'must be host:port');

function httpUrl(what = 'an http(s) URL') {
  return z
    .string(required(what))
    .max(2048, 'at most 2048 characters')
    .refine((s) => {
      try {
        const u = new URL(s);
        return (u.protocol === 'http:' || u.protocol === 'https:') && u.hostname !== '';
      } catch {
        return false;
      }
    }, `must be ${what}`);
}

/** An integer given as env text (or a number inside JSON). */
function intText(min: number, max: number) {
  const rule = `must be an integer from ${min} to ${max}`;
  return z
    .union([z.string(), z.number()], required(`an integer from ${min} to ${max}`))
    .transform((v, ctx) => {
      const s = String(v).trim();
      const n = Number(s);
      if (!/^-?\d+$/.test(s) || !Number.isSafeInteger(n) || n < min || n > max) {
        ctx.addIssue({ code: 'custom', message: rule });
        return z.NEVER;
      }
      return n;
    });
}

function boolText() {
  return z.union([z.string(), z.boolean()], required('true or false')).transform((v, ctx) => {
    if (typeof v === 'boolean') return v;
    const s = v.trim().toLowerCase();
    if (['true', '1', 'yes'].includes(s)) return true;
    if (['false', '0', 'no'].includes(s)) return false;
    ctx.addIssue({ code: 'custom', message: 'must be true or false' });
    return z.NEVER;
  });
}

/** A JSON document in a variable, validated by `schema`; paths continue inside the JSON. */
function jsonText<T extends z.ZodType>(schema: T) {
  return z
    .string(required('JSON'))
    .transform((s, ctx): unknown => {
      try {
        return JSON.parse(s);
      } catch {
        ctx.addIssue({ code: 'custom', message: 'must be valid JSON' });
        return z.NEVER;
      }
    })
    .pipe(schema);
}

function cron() {
  return z
    .string(required('a cron expression'))
    .trim()
    .refine((s) => validateCron(s), 'must be a cron expression');
}

function timeZone() {
  return z
    .string(required('an IANA time zone'))
    .trim()
    .refine((tz) => {
      try {
        new Intl.DateTimeFormat('en', { timeZone: tz });
        return true;
      } catch {
        return false;
      }
    }, 'must be an IANA time zone such as UTC or America/Sao_Paulo');
}

// ---------------------------------------------------------------- provider accounts

export const WEBHOOK_SIGNATURE_MODES = ['off', 'warn', 'enforce'] as const;
export type WebhookSignatureMode = (typeof WEBHOOK_SIGNATURE_MODES)[number];

/** The webhook routes' limits (PAYRECON_WEBHOOK_*). */
export interface WebhookLimits {
  /** Notifications per second one sender (remote address) may send; its bucket holds twice that. */
  perSenderPerSecond: number;
  /** Notifications per second all senders together may send; the bucket holds twice that. */
  totalPerSecond: number;
  /** Seconds within which the same notification again is folded into the first (0: never). */
  dedupeSeconds: number;
}

export const DEFAULT_WEBHOOK_LIMITS: WebhookLimits = {
  perSenderPerSecond: 200,
  totalPerSecond: 1000,
  dedupeSeconds: 60,
};

/**
 * One merchant account at the provider. Secrets (deposit secret, cashout pass and secret, read-only
 * key) are redacted by the logger under these names.
 */
export const providerAccountSchema = z.object({
  /** Short name used in topics, ledger accounts and reports. */
  name: z
    .string(required('a name'))
    .regex(
      /^[a-z0-9][a-z0-9_-]{0,62}$/,
      'must be 1-63 characters a-z 0-9 _ - starting with a letter or digit',
    ),
  /** Main API base URL, e.g. https://api-stg.<provider>/ (paths /v3/... are appended). */
  baseUrl: httpUrl(),
  /** Card-data API base URL, e.g. https://cc-api-stg.<provider>/. */
  cardBaseUrl: httpUrl(),
  /** Deposit and refund `X-Login`. */
  depositLogin: nonEmpty(),
  /** Deposit and refund HMAC secret key. */
  depositSecret: nonEmpty(),
  /** Cashout `login` (body credential, max 32). */
  cashoutLogin: nonEmpty().pipe(z.string().max(32, 'at most 32 characters')),
  /** Cashout `pass` (body credential, max 32). */
  cashoutPass: nonEmpty().pipe(z.string().max(32, 'at most 32 characters')),
  /** Cashout `Payload-Signature` and notification `control` secret key. */
  cashoutSecret: nonEmpty(),
  /** Bearer key of the read-only calls (bank list). */
  readOnlyKey: nonEmpty(),
  /** Default notification_url of deposits, refunds and cashouts created through payrecon. */
  notificationUrl: httpUrl().optional(),
  /**
   * Checking webhook signatures (the account's deposit secret and cashout secret are its keys): enforce
   * (refuse a forged or replayed notification), warn (log and accept; said once at start) or off.
   */
  webhookSignatureMode: z
    .enum(WEBHOOK_SIGNATURE_MODES, required('one of off, warn, enforce'))
    .default('enforce'),
  /** Allowed distance of a webhook's X-Date from now, in seconds (docs/provider.md: default 5 minutes). */
  xDateWindowSeconds: intText(1, 86_400).default(300),
});
export type ProviderAccount = z.output<typeof providerAccountSchema>;

const accountsSchema = z
  .array(providerAccountSchema, required('a JSON array of accounts'))
  .superRefine((accounts, ctx) => {
    const seen = new Set<string>();
    accounts.forEach((a, i) => {
      if (seen.has(a.name)) ctx.addIssue({ code: 'custom', path: [i, 'name'], message: 'must be unique' });
      seen.add(a.name);
    });
  });

// ---------------------------------------------------------------- the rest

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

const HOUR_MS = 3_600_000;
const STUCK = DEFAULT_EXCEPTION_RULES.stuck;

/**
 * Exception deadlines (PAYRECON_EXCEPTION_DEADLINES, JSON, every key optional). Defaults are the
 * domain's `DEFAULT_EXCEPTION_RULES`, in whole minutes, hours or days.
 */
const deadlinesSchema = z
  .object({
    /** Minutes past a deposit's expiration_date before it counts as STUCK. */
    depositExpiryGraceMinutes: intText(0, 10_080).default(STUCK.depositAfterExpiryMs / 60_000),
    /** Hours a non-final deposit without an expiration_date may stay in its status. */
    depositNoExpiryHours: intText(1, 8_760).default(STUCK.depositNoExpiryMs / HOUR_MS),
    cashoutPendingHours: intText(1, 8_760).default(STUCK.cashoutPendingMs / HOUR_MS),
    cashoutOnHoldHours: intText(1, 8_760).default(STUCK.cashoutOnHoldMs / HOUR_MS),
    cashoutDeliveredHours: intText(1, 8_760).default(STUCK.cashoutDeliveredMs / HOUR_MS),
    refundPendingHours: intText(1, 8_760).default(STUCK.refundPendingMs / HOUR_MS),
    refundIncorrectDetailsHours: intText(1, 8_760).default(STUCK.refundIncorrectDetailsMs / HOUR_MS),
    refundDeliveredHours: intText(1, 8_760).default(STUCK.refundDeliveredMs / HOUR_MS),
    /** Days a COMPLETED cashout or refund is still watched for a late rejection. */
    lateRejectionWatchDays: intText(1, 365).default(
      DEFAULT_POLLING_RULES.lateRejectionWindowMs / (24 * HOUR_MS),
    ),
    /**
     * Days a CANCELLED deposit is still watched for a late completion (the provider's manual action; it
     * publishes no limit).
     */
    lateCompletionWatchDays: intText(1, 365).default(
      DEFAULT_POLLING_RULES.lateCompletionWindowMs / (24 * HOUR_MS),
    ),
    /** Minutes an observed entity may lack an intent before UNKNOWN_TRANSACTION. */
    unknownTransactionGraceMinutes: intText(0, 10_080).default(
      DEFAULT_EXCEPTION_RULES.unknownTransactionGraceMs / 60_000,
    ),
    /** Minutes a change seen by polling may wait for its webhook before MISSED_NOTIFICATION. */
    missedNotificationGraceMinutes: intText(0, 10_080).default(
      DEFAULT_EXCEPTION_RULES.missedNotificationGraceMs / 60_000,
    ),
    /**
     * Minutes a creation recorded with an unknown outcome may stay unanswered before OUTCOME_UNKNOWN
     * (cashouts: before the poller looks them up by external_id).
     */
    outcomeUnknownGraceMinutes: intText(1, 10_080).default(
      DEFAULT_EXCEPTION_RULES.outcomeUnknownGraceMs / 60_000,
    ),
  })
  .strict();

/**
 * Severity per exception type (PAYRECON_EXCEPTION_SEVERITIES, JSON `{"STUCK": "high"}`), on the
 * domain's scale; types not named keep `DEFAULT_EXCEPTION_RULES.severity`.
 */
const severitiesSchema = z
  .partialRecord(
    z.enum(EXCEPTION_TYPES, required(`an exception type (${EXCEPTION_TYPES.join(', ')})`)),
    z.enum(SEVERITIES, required(`one of ${SEVERITIES.join(', ')}`)),
  )
  .transform((s) => ({ ...DEFAULT_EXCEPTION_RULES.severity, ...s }) as Record<ExceptionType, Severity>);

/**
 * The exception queue's service-level rules (PAYRECON_EXCEPTION_SLA, a JSON array), e.g.
 * `[{"severity":"critical","minutes":60},{"type":"AMOUNT_MISMATCH","minutes":240},
 * {"currency":"BRL","minAmount":"10000.00","minutes":120}]`: each names at least one of type, severity or
 * currency (with minAmount, the entity's amount at or above it); the strictest matching rule applies, and
 * PAYRECON_EXCEPTION_SLA_MINUTES to an exception no rule matches (src/domain/exception-sla.ts).
 */
const slaRulesSchema = z
  .array(
    z
      .object({
        type: z
          .enum(EXCEPTION_TYPES, required(`an exception type (${EXCEPTION_TYPES.join(', ')})`))
          .optional(),
        severity: z.enum(SEVERITIES, required(`one of ${SEVERITIES.join(', ')}`)).optional(),
        currency: z
          .string(required('a currency code'))
          .regex(/^[A-Z]{3}$/, 'must be a three-letter currency code')
          .optional(),
        minAmount: z
          .string(required('a decimal amount as text, e.g. "10000.00"'))
          .refine((s) => {
            try {
              parseAmount(s);
              return true;
            } catch {
              return false;
            }
          }, 'must be a decimal amount as text with at most 2 decimals, e.g. "10000.00"')
          .transform((s) => parseAmount(s))
          .optional(),
        minutes: intText(1, 525_600),
      })
      .strict()
      .superRefine((r, ctx) => {
        if (r.type === undefined && r.severity === undefined && r.currency === undefined) {
          ctx.addIssue({ code: 'custom', message: 'must name a type, a severity or a currency' });
        }
        if (r.minAmount !== undefined && r.currency === undefined) {
          ctx.addIssue({ code: 'custom', path: ['currency'], message: 'is required with minAmount' });
        }
      }),
    required('a JSON array of rules'),
  )
  .max(200, 'at most 200 rules')
  .transform((rules): SlaRule[] =>
    rules.map((r) => ({
      ...(r.type !== undefined ? { type: r.type } : {}),
      ...(r.severity !== undefined ? { severity: r.severity } : {}),
      ...(r.currency !== undefined ? { currency: r.currency } : {}),
      ...(r.minAmount !== undefined ? { minAmount: r.minAmount } : {}),
      minutes: r.minutes,
    })),
  );

/** An API token as `payrecon api token create` prints it for PAYRECON_API_TOKENS. */
const apiTokenSchema = z.object({
  id: z.string(required('the token id')).regex(/^[0-9a-f]{12}$/, 'must be 12 hexadecimal digits'),
  name: z
    .string(required('a name'))
    .regex(/^[A-Za-z0-9._@-]{1,64}$/, 'must be 1-64 characters A-Z a-z 0-9 . _ @ -'),
  scopes: z.array(z.enum(API_SCOPES, `one of ${API_SCOPES.join(', ')}`)).min(1, 'at least one scope'),
  hash: z
    .string(required('a scrypt hash'))
    .regex(
      /^scrypt\$\d+\$\d+\$\d+\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+$/,
      'must be a scrypt hash scrypt$N$r$p$salt$key (base64)',
    ),
});

const webUserSchema = z.object({
  username: z
    .string(required('a user name'))
    .regex(/^[A-Za-z0-9._@-]{1,64}$/, 'must be 1-64 characters A-Z a-z 0-9 . _ @ -'),
  /** `scrypt$<N>$<r>$<p>$<salt base64>$<key base64>` (node:crypto scrypt). */
  passwordHash: z
    .string(required('a scrypt hash'))
    .regex(
      /^scrypt\$\d+\$\d+\$\d+\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+$/,
      'must be a scrypt hash scrypt$N$r$p$salt$key (base64)',
    ),
  /** viewer, operator (works exceptions) or controller (signs and approves closes); default operator. */
  role: z.enum(WEB_ROLES, required('viewer, operator or controller')).optional(),
});

/**
 * One match rule (PAYRECON_MATCH_RULES, a JSON list in priority order, or the path of a file holding it):
 * see `MatchRule` in src/domain/matching.ts. `tolerance.absoluteMinor` is in minor units,
 * `tolerance.percent` a percent of the expected amount with at most two decimals; no tolerance: amounts
 * are not compared; no `windowDays`: dates are not compared.
 */
const matchRuleSchema = z
  .object({
    name: nonEmpty('a rule name'),
    pair: z.enum(MATCH_PAIRS, required(MATCH_PAIRS.join(' or '))),
    keys: z
      .array(
        z.object({ left: nonEmpty('a key name'), right: nonEmpty('a key name') }),
        required('a list of {left, right}'),
      )
      .default([]),
    tolerance: z
      .object({
        absoluteMinor: intText(0, 1_000_000_000).default(0),
        percent: z
          .union([z.string(), z.number()], required('a percent such as 0.5'))
          .transform((v, ctx) => {
            const t = String(v).trim();
            const m = /^(\d{1,3})(?:\.(\d{1,2}))?$/.exec(t);
            if (!m || Number(m[1]) > 100) {
              ctx.addIssue({
                code: 'custom',
                message: 'must be a percent from 0 to 100 with at most two decimals',
              });
              return z.NEVER;
            }
            return Number(m[1]) * 100 + Number((m[2] ?? '').padEnd(2, '0'));
          })
          .default(0),
      })
      .nullable()
      .default(null),
    windowDays: intText(0, 366).nullable().default(null),
    cardinality: z.enum(MATCH_CARDINALITIES, required(MATCH_CARDINALITIES.join(', '))).default('one-to-one'),
    maxCandidates: intText(1, 24).default(12),
    maxGroup: intText(2, 8).default(4),
  })
  .strict()
  .transform(
    (r): MatchRule => ({
      name: r.name,
      pair: r.pair,
      keys: r.keys,
      tolerance:
        r.tolerance === null
          ? null
          : { absoluteMinor: BigInt(r.tolerance.absoluteMinor), percentBps: r.tolerance.percent },
      windowDays: r.windowDays,
      cardinality: r.cardinality,
      maxCandidates: r.maxCandidates,
      maxGroup: r.maxGroup,
    }),
  );

/** PAYRECON_MATCH_RULES: the JSON list itself, or the path of a file holding it. */
const matchRulesText = z
  .string(required('a JSON list of match rules or a file path'))
  .transform((s, ctx): unknown => {
    let text = s.trim();
    if (!text.startsWith('[')) {
      try {
        text = readFileSync(text, 'utf8');
      } catch (err) {
        ctx.addIssue({
          code: 'custom',
          message: `must be a JSON list or a readable file (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
        });
        return z.NEVER;
      }
    }
    try {
      return JSON.parse(text);
    } catch {
      ctx.addIssue({ code: 'custom', message: 'must be valid JSON' });
      return z.NEVER;
    }
  })
  .pipe(
    z.array(matchRuleSchema, required('a JSON list of match rules')).min(1, 'must name at least one rule'),
  )
  .superRefine((rules, ctx) => {
    const why = checkMatchRules(rules);
    if (why !== null) ctx.addIssue({ code: 'custom', message: why });
  });

/**
 * A bank account whose statements are imported (PAYRECON_BANK_ACCOUNTS): `id` as the statements name it
 * (an IBAN or another id), its currency, the merchant account (a provider account's name) it belongs to.
 */
const bankAccountSchema = z.object({
  id: z
    .string(required('the account id as statements name it'))
    .trim()
    .min(1, 'must not be empty')
    .max(34, 'at most 34 characters'),
  currency: z
    .string(required('an ISO 4217 code'))
    .regex(/^[A-Z]{3}$/, 'must be an ISO 4217 code such as EUR'),
  account: nonEmpty('the merchant account name'),
  name: nonEmpty('a name'),
});

const brokersText = z
  .string(required('a comma-separated list of host:port'))
  .transform((s) =>
    s
      .split(',')
      .map((b) => b.trim())
      .filter((b) => b !== ''),
  )
  .refine((list) => list.length > 0 && list.every((b) => /^[A-Za-z0-9.[\]:-]+:\d{1,5}$/.test(b)), {
    message: 'must be a comma-separated list of host:port',
  });

// ---------------------------------------------------------------- security and the topic plan

export const KAFKA_SASL_MECHANISMS = ['plain', 'scram-sha-256', 'scram-sha-512'] as const;
export type KafkaSaslMechanism = (typeof KAFKA_SASL_MECHANISMS)[number];

/** A file that must exist and be readable at start-up (certificates, keys). */
function readableFile(what = 'a readable file') {
  return z
    .string(required(what))
    .trim()
    .min(1, 'must not be empty')
    .superRefine((file, ctx) => {
      try {
        accessSync(file, constants.R_OK);
      } catch (err) {
        ctx.addIssue({
          code: 'custom',
          message: `must name a readable file (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
        });
      }
    });
}

/** Per-topic settings of the topic plan (KAFKA_TOPIC_OVERRIDES, JSON keyed by topic name). */
const topicOverrideSchema = z
  .object({
    partitions: intText(1, 10_000).optional(),
    replicationFactor: intText(1, 32).optional(),
    minInsyncReplicas: intText(1, 32).optional(),
    /** -1 keeps messages for ever. */
    retentionMs: intText(-1, Number.MAX_SAFE_INTEGER).optional(),
  })
  .strict();

/**
 * Variables whose value may instead come from a file named by `<NAME>_FILE` (secrets mounted as files,
 * as Docker and Kubernetes do); setting both is an error.
 */
export const FILE_VARIANTS = [
  'PAYRECON_ACCOUNTS',
  'KAFKA_SASL_USERNAME',
  'KAFKA_SASL_PASSWORD',
  'SCHEMA_REGISTRY_USERNAME',
  'SCHEMA_REGISTRY_PASSWORD',
] as const;

const postgresUrl = z
  .string(required('a postgres:// URL'))
  .refine((s) => /^postgres(ql)?:\/\/./.test(s), 'must be a postgres:// or postgresql:// URL')
  .refine((s) => {
    try {
      const u = new URL(s);
      return u.hostname !== '' && (u.port === '' || Number(u.port) > 0);
    } catch {
      return false;
    }
  }, 'must be a valid URL postgres://user:password@host:port/database (special characters in the password percent-encoded)');

/**
 * The environment, variable by variable. Keys are the variable names, so an issue's path starts with
 * the variable that is wrong.
 */
const envSchema = z.object({
  LOG_LEVEL: z.enum(LOG_LEVELS, required(`one of ${LOG_LEVELS.join(', ')}`)).default('info'),
  PAYRECON_DATA_DIR: nonEmpty('a directory path').default('.payrecon'),
  PAYRECON_ACCOUNTS: jsonText(accountsSchema).optional(),
  PAYRECON_BANK_ACCOUNTS: jsonText(
    z
      .array(bankAccountSchema, required('a JSON array of {id, currency, account, name}'))
      .refine(
        (list) => new Set(list.map((b) => b.id)).size === list.length,
        'must name each bank account id once',
      ),
  ).optional(),

  DATABASE_URL: postgresUrl.optional(),
  KAFKA_BROKERS: brokersText.optional(),
  KAFKA_CLIENT_ID: nonEmpty().default('payrecon'),
  SCHEMA_REGISTRY_URL: httpUrl().optional(),

  /** TLS to the brokers; the CA file replaces the system's trusted CAs, cert and key are for mutual TLS. */
  KAFKA_SSL: boolText().default(false),
  KAFKA_SSL_CA_FILE: readableFile().optional(),
  KAFKA_SSL_CERT_FILE: readableFile().optional(),
  KAFKA_SSL_KEY_FILE: readableFile().optional(),
  KAFKA_SASL_MECHANISM: z
    .enum(KAFKA_SASL_MECHANISMS, required(`one of ${KAFKA_SASL_MECHANISMS.join(', ')}`))
    .optional(),
  KAFKA_SASL_USERNAME: nonEmpty().optional(),
  KAFKA_SASL_PASSWORD: z.string(required('text')).min(1, 'must not be empty').optional(),
  SCHEMA_REGISTRY_USERNAME: nonEmpty().optional(),
  SCHEMA_REGISTRY_PASSWORD: z.string(required('text')).min(1, 'must not be empty').optional(),
  /** CA of an https SCHEMA_REGISTRY_URL (default: the system's trusted CAs). */
  SCHEMA_REGISTRY_CA_FILE: readableFile().optional(),
  /** CA of PostgreSQL's certificate; turns TLS on (verified) unless DATABASE_URL says sslmode=disable. */
  DATABASE_SSL_CA_FILE: readableFile().optional(),

  /** Topic plan: partitions of every topic (default: the catalog's count per topic). */
  KAFKA_TOPIC_PARTITIONS: intText(1, 10_000).optional(),
  /** Replicas of every topic (default: the cluster's default.replication.factor). */
  KAFKA_REPLICATION_FACTOR: intText(1, 32).optional(),
  KAFKA_MIN_INSYNC_REPLICAS: intText(1, 32).optional(),
  KAFKA_RETENTION_MS: intText(-1, Number.MAX_SAFE_INTEGER).optional(),
  /** JSON `{"<topic>": {partitions, replicationFactor, minInsyncReplicas, retentionMs}}`. */
  KAFKA_TOPIC_OVERRIDES: jsonText(
    z.record(z.string().regex(/^[A-Za-z0-9._-]{1,249}$/, 'must be a topic name'), topicOverrideSchema),
  ).optional(),
  /** false: parts never create topics; they check at start-up that theirs exist (`payrecon topics apply`). */
  KAFKA_AUTO_CREATE_TOPICS: boolText().default(true),

  PAYRECON_WEB_HOST: nonEmpty('a host name or address').default('127.0.0.1'),
  PAYRECON_WEB_PORT: intText(0, 65_535).default(8080),
  PAYRECON_WEB_USERS: jsonText(
    z.array(webUserSchema, required('a JSON array of {username, passwordHash, role?}')),
  ).optional(),
  /** Bearer tokens of /api/v1 and POST /intents, hashed (`payrecon api token create`). */
  PAYRECON_API_TOKENS: jsonText(
    z.array(apiTokenSchema, required('a JSON array of {id, name, scopes, hash}')),
  ).optional(),
  /** Webhook notifications one sender (remote address) may send per second (its burst: twice that). */
  PAYRECON_WEBHOOK_RATE_PER_SENDER: intText(1, 100_000).default(DEFAULT_WEBHOOK_LIMITS.perSenderPerSecond),
  /** Webhook notifications all senders together may send per second (burst: twice that). */
  PAYRECON_WEBHOOK_RATE_TOTAL: intText(1, 1_000_000).default(DEFAULT_WEBHOOK_LIMITS.totalPerSecond),
  /** Seconds within which the same notification again is acknowledged without a second event (0: never). */
  PAYRECON_WEBHOOK_DEDUPE_SECONDS: intText(0, 3_600).default(DEFAULT_WEBHOOK_LIMITS.dedupeSeconds),
  PAYRECON_SESSION_SECRET: z.string(required('text')).min(32, 'at least 32 characters').optional(),
  /** Failed sign-ins of one typed user name within the window, after which sign-in answers 429. */
  PAYRECON_WEB_SIGN_IN_FAILURES_PER_USER: intText(1, 1_000).default(5),
  /** Failed sign-ins from one client address within the window, after which sign-in answers 429. */
  PAYRECON_WEB_SIGN_IN_FAILURES_PER_ADDRESS: intText(1, 100_000).default(20),
  /** The window, in seconds, over which failed sign-ins are counted. */
  PAYRECON_WEB_SIGN_IN_WINDOW_SECONDS: intText(1, 86_400).default(900),
  /**
   * The password of the PAYRECON_WEB_USERS user a command acts as (`close prepare|approve`,
   * `exception decide|approve|reject`, `import --user`); read by those commands only, never logged.
   */
  PAYRECON_PASSWORD: z.string(required('text')).optional(),
  /** The page's address as users reach it; workbook entity ids link to their payment page under it. */
  PAYRECON_PUBLIC_URL: httpUrl().optional(),

  PAYRECON_TIMEZONE: timeZone().default('UTC'),
  /** Local time (HH:mm in PAYRECON_TIMEZONE) at which a settlement day ends. */
  PAYRECON_SETTLEMENT_CUTOFF: z
    .string(required('a time HH:mm'))
    .regex(/^(?:[01]\d|2[0-3]):[0-5]\d$/, 'must be a time HH:mm from 00:00 to 23:59')
    .default('00:00'),
  PAYRECON_CRON_POLL: cron().default('* * * * *'),
  PAYRECON_CRON_STUCK_SWEEP: cron().default('*/15 * * * *'),
  PAYRECON_CRON_LATE_REJECTION_SWEEP: cron().default('0 */6 * * *'),
  PAYRECON_CRON_SETTLEMENT: cron().default('30 0 * * *'),
  PAYRECON_CRON_EXCEPTION_REPORT: cron().default('0 7 * * *'),
  PAYRECON_CRON_LEDGER_VERIFY: cron().default('0 3 * * *'),
  /** The settlement fetch: the provider's reports and the bank statements from the sandbox's control API. */
  PAYRECON_CRON_SETTLEMENT_FETCH: cron().default('*/2 * * * *'),
  /** The control API the settlement fetch reads (`http://host:port/_sandbox`); the embedded sandbox's by default. */
  PAYRECON_SETTLEMENT_FETCH_URL: httpUrl(
    'an http(s) URL of the control API, e.g. http://127.0.0.1:8100/_sandbox',
  ).optional(),
  /** A directory of mapping profiles (`*.json`) the page and the API name besides the built-in ones. */
  PAYRECON_IMPORT_PROFILES_DIR: nonEmpty('a directory path').optional(),
  /** The largest file an upload (page or API) may be. */
  PAYRECON_IMPORT_MAX_BYTES: intText(1, 1_073_741_824).default(50 * 1024 * 1024),

  PAYRECON_ALERT_WEBHOOK_URL: httpUrl().optional(),
  PAYRECON_ALERT_MIN_SEVERITY: z
    .enum(SEVERITIES, required(`one of ${SEVERITIES.join(', ')}`))
    .default('high'),
  PAYRECON_ALERT_TIMEOUT_MS: intText(100, 60_000).default(5_000),

  PAYRECON_EXCEPTION_DEADLINES: jsonText(deadlinesSchema).optional(),
  PAYRECON_MATCH_RULES: matchRulesText.optional(),
  /** Days past a settlement's value date before SETTLEMENT_NOT_RECEIVED. */
  PAYRECON_SETTLEMENT_GRACE_DAYS: intText(0, 60).default(2),
  /** Seconds a report row that differs from the ledger waits for the ledger to catch up before it raises. */
  PAYRECON_MATCH_LEDGER_WAIT_SECONDS: intText(0, 86_400).default(300),
  /** An unmatched item of the close's bank proof above this amount (a magnitude) needs a note to sign. */
  PAYRECON_CLOSE_UNMATCHED_NOTE_ABOVE: z
    .string(required('a decimal amount, e.g. 100.00'))
    .refine((s) => {
      try {
        return parseAmount(s) >= 0n;
      } catch {
        return false;
      }
    }, 'must be a decimal amount of at least 0 with at most 2 decimals, e.g. 100.00')
    .transform((s) => parseAmount(s))
    .default(0n),
  PAYRECON_EXCEPTION_SEVERITIES: jsonText(severitiesSchema).optional(),
  PAYRECON_EXCEPTION_SLA: jsonText(slaRulesSchema).optional(),

  PAYRECON_POLL_CONCURRENCY: intText(1, 64).default(4),
  PAYRECON_POLL_BATCH_SIZE: intText(1, 10_000).default(200),
  /** Least time between two status reads of the same entity. */
  PAYRECON_POLL_MIN_INTERVAL_SECONDS: intText(1, 86_400).default(300),
  /** Polling schedule (src/domain/polling.ts): first back-off, its cap, re-poll of COMPLETED payouts. */
  PAYRECON_POLL_FIRST_DELAY_SECONDS: intText(1, 86_400).default(DEFAULT_POLLING_RULES.firstDelayMs / 1000),
  PAYRECON_POLL_MAX_DELAY_SECONDS: intText(1, 604_800).default(DEFAULT_POLLING_RULES.maxDelayMs / 1000),
  PAYRECON_POLL_COMPLETED_RECHECK_SECONDS: intText(1, 604_800).default(
    DEFAULT_POLLING_RULES.completedRecheckMs / 1000,
  ),
  /** The dense start of that re-check, comma-separated seconds (default 3600,14400,43200), each capped by it. */
  PAYRECON_POLL_COMPLETED_RECHECK_SCHEDULE_SECONDS: z
    .string(required('comma-separated seconds'))
    .refine((s) => /^\s*(\d{1,7}\s*(,\s*\d{1,7}\s*)*)?$/.test(s), 'must be comma-separated whole seconds')
    .transform((s) =>
      s
        .split(',')
        .map((x) => x.trim())
        .filter((x) => x !== '')
        .map(Number),
    )
    .default(DEFAULT_POLLING_RULES.completedRecheckScheduleMs.map((ms) => ms / 1000)),
  /** Readings that found nothing after which an entity the provider does not know is no longer polled. */
  PAYRECON_POLL_NOT_FOUND_ATTEMPTS: intText(1, 100).default(DEFAULT_POLLING_RULES.notFoundAttempts),
  /** Status calls the fetcher makes at once for each partition's batch of notifications. */
  PAYRECON_FETCH_CONCURRENCY: intText(1, 256).default(32),
  PAYRECON_PROVIDER_TIMEOUT_MS: intText(100, 120_000).default(10_000),
  PAYRECON_PROVIDER_RETRIES: intText(0, 10).default(3),
  /**
   * Seconds a merchant-side creation whose outcome is unknown (timeout, 5xx) is sent again, same request
   * and idempotency key, until the provider answers (recordingClient); 0: never.
   */
  PAYRECON_INTENT_SETTLE_WINDOW_SECONDS: intText(0, 86_400).default(900),

  PAYRECON_SANDBOX_TRAFFIC: boolText().default(true),

  /** `/healthz`, `/readyz` and `/metrics` of a part that serves no web routes (fetch, reconcile, ...). */
  PAYRECON_METRICS_HOST: nonEmpty('a host name or address').default('127.0.0.1'),
  PAYRECON_METRICS_PORT: intText(0, 65_535).default(9464),
  /** Service level of an unresolved exception no PAYRECON_EXCEPTION_SLA rule matches. */
  PAYRECON_EXCEPTION_SLA_MINUTES: intText(1, 525_600).default(1440),

  /** Reports generate on a pool of their own, this many at once; the others wait their turn. */
  PAYRECON_REPORT_CONCURRENCY: intText(1, 32).default(2),
  PAYRECON_REPORT_MAX_DAYS: intText(1, 36_600).default(366),
  /** Bearer token `/metrics` asks for (balances per account are not for whoever reaches the port). */
  PAYRECON_METRICS_TOKEN: nonEmpty('a token').optional(),
  /** `host:port`: `/metrics` answers there only, not on the web listener. */
  PAYRECON_METRICS_LISTEN: hostPort().optional(),
  /** `host:port`: the provider's webhook routes answer there only, not on the web listener. */
  PAYRECON_WEBHOOK_LISTEN: hostPort().optional(),
});

/** Rules that tie variables together; the issue names the variable to fix. */
const envRules = envSchema.superRefine((env, ctx) => {
  const issue = (variable: string, message: string) =>
    ctx.addIssue({ code: 'custom', path: [variable], message });
  const sasl = [env.KAFKA_SASL_MECHANISM, env.KAFKA_SASL_USERNAME, env.KAFKA_SASL_PASSWORD];
  if (sasl.some((v) => v !== undefined)) {
    if (env.KAFKA_SASL_MECHANISM === undefined) {
      issue(
        'KAFKA_SASL_MECHANISM',
        `is required with KAFKA_SASL_USERNAME (${KAFKA_SASL_MECHANISMS.join(', ')})`,
      );
    } else if (env.KAFKA_SASL_USERNAME === undefined) {
      issue('KAFKA_SASL_USERNAME', 'is required with KAFKA_SASL_MECHANISM');
    } else if (env.KAFKA_SASL_PASSWORD === undefined) {
      issue('KAFKA_SASL_PASSWORD', 'is required with KAFKA_SASL_MECHANISM');
    }
  }
  for (const v of ['KAFKA_SSL_CA_FILE', 'KAFKA_SSL_CERT_FILE', 'KAFKA_SSL_KEY_FILE'] as const) {
    if (env[v] !== undefined && !env.KAFKA_SSL) issue(v, 'needs KAFKA_SSL=true');
  }
  if ((env.KAFKA_SSL_CERT_FILE === undefined) !== (env.KAFKA_SSL_KEY_FILE === undefined)) {
    issue(
      env.KAFKA_SSL_CERT_FILE === undefined ? 'KAFKA_SSL_CERT_FILE' : 'KAFKA_SSL_KEY_FILE',
      'is required with the other of KAFKA_SSL_CERT_FILE and KAFKA_SSL_KEY_FILE',
    );
  }
  if ((env.SCHEMA_REGISTRY_USERNAME === undefined) !== (env.SCHEMA_REGISTRY_PASSWORD === undefined)) {
    issue(
      env.SCHEMA_REGISTRY_USERNAME === undefined ? 'SCHEMA_REGISTRY_USERNAME' : 'SCHEMA_REGISTRY_PASSWORD',
      'is required with the other of SCHEMA_REGISTRY_USERNAME and SCHEMA_REGISTRY_PASSWORD',
    );
  }
  if (env.SCHEMA_REGISTRY_CA_FILE !== undefined && !env.SCHEMA_REGISTRY_URL?.startsWith('https:')) {
    issue('SCHEMA_REGISTRY_CA_FILE', 'needs an https SCHEMA_REGISTRY_URL');
  }
  if (env.DATABASE_SSL_CA_FILE !== undefined && env.DATABASE_URL === undefined) {
    issue('DATABASE_SSL_CA_FILE', 'needs DATABASE_URL (the embedded PostgreSQL has no TLS)');
  }
});

/**
 * DATABASE_URL with DATABASE_SSL_CA_FILE as its `sslrootcert` (node-postgres reads it and verifies the
 * server's certificate); a URL naming its own sslrootcert keeps it.
 */
function databaseUrlWithCa(url: string | undefined, caFile: string | undefined): string | null {
  if (url === undefined) return null;
  if (caFile === undefined || /[?&]sslrootcert=/.test(url)) return url;
  return `${url}${url.includes('?') ? '&' : '?'}sslrootcert=${encodeURIComponent(caFile)}`;
}

function buildConfig(env: z.output<typeof envSchema>) {
  return {
    logLevel: env.LOG_LEVEL,
    dataDir: env.PAYRECON_DATA_DIR,
    accounts: env.PAYRECON_ACCOUNTS ?? [],
    /** The bank accounts whose statements may be imported; none: every statement is refused. */
    bankAccounts: env.PAYRECON_BANK_ACCOUNTS ?? [],
    /** Matching (src/domain/matching.ts): the rules in priority order and the grace of a settlement. */
    matching: {
      rules: env.PAYRECON_MATCH_RULES ?? [...DEFAULT_MATCH_RULES],
      settlementGraceDays: env.PAYRECON_SETTLEMENT_GRACE_DAYS,
      ledgerWaitSeconds: env.PAYRECON_MATCH_LEDGER_WAIT_SECONDS,
    },
    /** The month close's bank proof: unmatched items above this amount (minor units) need a note to sign. */
    closeNoteAbove: env.PAYRECON_CLOSE_UNMATCHED_NOTE_ABOVE,
    /** null: start embedded PostgreSQL under dataDir. */
    database: {
      url: databaseUrlWithCa(env.DATABASE_URL, env.DATABASE_SSL_CA_FILE),
      caFile: env.DATABASE_SSL_CA_FILE ?? null,
    },
    /** brokers null: start the embedded Kafka-compatible broker. */
    kafka: {
      brokers: env.KAFKA_BROKERS ?? null,
      clientId: env.KAFKA_CLIENT_ID,
      /** Shape of `KafkaSecuritySettings` (src/events/kafka.ts). */
      security: {
        ssl: env.KAFKA_SSL,
        caFile: env.KAFKA_SSL_CA_FILE ?? null,
        certFile: env.KAFKA_SSL_CERT_FILE ?? null,
        keyFile: env.KAFKA_SSL_KEY_FILE ?? null,
        sasl:
          env.KAFKA_SASL_MECHANISM && env.KAFKA_SASL_USERNAME && env.KAFKA_SASL_PASSWORD
            ? {
                mechanism: env.KAFKA_SASL_MECHANISM,
                username: env.KAFKA_SASL_USERNAME,
                password: env.KAFKA_SASL_PASSWORD,
              }
            : null,
      },
      /** Shape of `TopicPlanSettings` (src/events/topic-plan.ts). */
      topics: {
        partitions: env.KAFKA_TOPIC_PARTITIONS ?? null,
        replicationFactor: env.KAFKA_REPLICATION_FACTOR ?? null,
        minInsyncReplicas: env.KAFKA_MIN_INSYNC_REPLICAS ?? null,
        retentionMs: env.KAFKA_RETENTION_MS ?? null,
        overrides: env.KAFKA_TOPIC_OVERRIDES ?? {},
        autoCreate: env.KAFKA_AUTO_CREATE_TOPICS,
      },
    },
    /** url null: start the embedded schema registry. */
    schemaRegistry: {
      url: env.SCHEMA_REGISTRY_URL ?? null,
      /** Shape of `RegistryClientSettings` (src/events/serde.ts), with the url. */
      username: env.SCHEMA_REGISTRY_USERNAME ?? null,
      password: env.SCHEMA_REGISTRY_PASSWORD ?? null,
      caFile: env.SCHEMA_REGISTRY_CA_FILE ?? null,
    },
    /** The password a command acting as a page user authenticates it with (src/cli-auth.ts); null: ask. */
    cli: { password: env.PAYRECON_PASSWORD ?? null },
    web: {
      host: env.PAYRECON_WEB_HOST,
      port: env.PAYRECON_WEB_PORT,
      users: env.PAYRECON_WEB_USERS ?? [],
      /** null: a random secret kept under dataDir (src/web/session-secret.ts), so sessions survive a restart. */
      sessionSecret: env.PAYRECON_SESSION_SECRET ?? null,
      /** null: workbooks carry no links. An https URL marks the page's cookies Secure. */
      publicUrl: env.PAYRECON_PUBLIC_URL ?? null,
      /** Shape of `SignInLimits` (src/web/sessions.ts). */
      signIn: {
        perUser: env.PAYRECON_WEB_SIGN_IN_FAILURES_PER_USER,
        perAddress: env.PAYRECON_WEB_SIGN_IN_FAILURES_PER_ADDRESS,
        windowMs: env.PAYRECON_WEB_SIGN_IN_WINDOW_SECONDS * 1000,
      },
      /** /api/v1 and POST /intents tokens (hashed); none: the API refuses every request. */
      apiTokens: env.PAYRECON_API_TOKENS ?? [],
    },
    jobs: {
      timeZone: env.PAYRECON_TIMEZONE,
      settlementCutoff: env.PAYRECON_SETTLEMENT_CUTOFF,
      cron: {
        poll: env.PAYRECON_CRON_POLL,
        stuckSweep: env.PAYRECON_CRON_STUCK_SWEEP,
        lateRejectionSweep: env.PAYRECON_CRON_LATE_REJECTION_SWEEP,
        settlement: env.PAYRECON_CRON_SETTLEMENT,
        exceptionReport: env.PAYRECON_CRON_EXCEPTION_REPORT,
        ledgerVerify: env.PAYRECON_CRON_LEDGER_VERIFY,
        settlementFetch: env.PAYRECON_CRON_SETTLEMENT_FETCH,
      },
    },
    imports: {
      maxBytes: env.PAYRECON_IMPORT_MAX_BYTES,
      /** null: the page and the API name the built-in profiles only. */
      profilesDir: env.PAYRECON_IMPORT_PROFILES_DIR ?? null,
      /** null: the settlement fetch reads the embedded sandbox's control API, or runs not at all. */
      fetchUrl: env.PAYRECON_SETTLEMENT_FETCH_URL?.replace(/\/+$/, '') ?? null,
    },
    alerts: {
      /** null: alerts go to the log and metrics only. */
      webhookUrl: env.PAYRECON_ALERT_WEBHOOK_URL ?? null,
      minSeverity: env.PAYRECON_ALERT_MIN_SEVERITY,
      timeoutMs: env.PAYRECON_ALERT_TIMEOUT_MS,
    },
    exceptions: {
      deadlines: env.PAYRECON_EXCEPTION_DEADLINES ?? deadlinesSchema.parse({}),
      severities: env.PAYRECON_EXCEPTION_SEVERITIES ?? { ...DEFAULT_EXCEPTION_RULES.severity },
      /** The queue's service levels (src/domain/exception-sla.ts). */
      sla: {
        rules: env.PAYRECON_EXCEPTION_SLA ?? [...DEFAULT_SLA_RULES],
        defaultMinutes: env.PAYRECON_EXCEPTION_SLA_MINUTES,
      },
    },
    poller: {
      concurrency: env.PAYRECON_POLL_CONCURRENCY,
      batchSize: env.PAYRECON_POLL_BATCH_SIZE,
      minIntervalSeconds: env.PAYRECON_POLL_MIN_INTERVAL_SECONDS,
      firstDelaySeconds: env.PAYRECON_POLL_FIRST_DELAY_SECONDS,
      maxDelaySeconds: env.PAYRECON_POLL_MAX_DELAY_SECONDS,
      completedRecheckSeconds: env.PAYRECON_POLL_COMPLETED_RECHECK_SECONDS,
      completedRecheckScheduleSeconds: env.PAYRECON_POLL_COMPLETED_RECHECK_SCHEDULE_SECONDS,
      notFoundAttempts: env.PAYRECON_POLL_NOT_FOUND_ATTEMPTS,
    },
    /** `WebhookLimits` (src/producers/webhook-ingress.ts) and where the routes listen. */
    webhooks: {
      perSenderPerSecond: env.PAYRECON_WEBHOOK_RATE_PER_SENDER,
      totalPerSecond: env.PAYRECON_WEBHOOK_RATE_TOTAL,
      dedupeSeconds: env.PAYRECON_WEBHOOK_DEDUPE_SECONDS,
      /** The webhook routes' own listener (`host:port`), or null: they are on the web listener. */
      listen: env.PAYRECON_WEBHOOK_LISTEN ?? null,
    },
    fetcher: { concurrency: env.PAYRECON_FETCH_CONCURRENCY },
    provider: {
      timeoutMs: env.PAYRECON_PROVIDER_TIMEOUT_MS,
      retries: env.PAYRECON_PROVIDER_RETRIES,
      intentSettleWindowSeconds: env.PAYRECON_INTENT_SETTLE_WINDOW_SECONDS,
    },
    sandbox: { traffic: env.PAYRECON_SANDBOX_TRAFFIC },
    metrics: {
      host: env.PAYRECON_METRICS_HOST,
      port: env.PAYRECON_METRICS_PORT,
      exceptionSlaMinutes: env.PAYRECON_EXCEPTION_SLA_MINUTES,
      token: env.PAYRECON_METRICS_TOKEN ?? null,
      listen: env.PAYRECON_METRICS_LISTEN ?? null,
    },
    reports: {
      concurrency: env.PAYRECON_REPORT_CONCURRENCY,
      maxDays: env.PAYRECON_REPORT_MAX_DAYS,
    },
  };
}

/**
 * Settings that keep every scheduled job (each PAYRECON_CRON_* of the schema) out of the way of a run that
 * drives the parts itself: tests, benches, the chaos soak. The schedule is once a year, 1 January 00:00.
 */
export const JOBS_OFF: Readonly<Record<string, string>> = Object.fromEntries(
  Object.keys(envSchema.shape)
    .filter((k) => k.startsWith('PAYRECON_CRON_'))
    .map((k) => [k, '0 0 1 1 *']),
);

type Mutable = ReturnType<typeof buildConfig>;
type DeepReadonly<T> = T extends (infer U)[]
  ? readonly DeepReadonly<U>[]
  : T extends object
    ? { readonly [K in keyof T]: DeepReadonly<T[K]> }
    : T;
export type Config = DeepReadonly<Mutable>;

/** A setting that is missing or malformed; the message is one line, `VARIABLE: rule`. */
export class ConfigError extends AppError {
  readonly variable: string;
  readonly rule: string;
  constructor(variable: string, rule: string) {
    super('CONFIG_INVALID', `${variable}: ${rule}`, { details: { variable, rule } });
    this.name = 'ConfigError';
    this.variable = variable;
    this.rule = rule;
  }
}

function issuePath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out === '' ? String(p) : `.${String(p)}`;
  return out;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/**
 * Reads the configuration from `env` (process.env by default) once. Throws `ConfigError` for the first
 * problem (the variable and its rule); the result is deeply frozen.
 */
/**
 * The operating-system user running a command (USER), recorded as who asked for a report or took a
 * decision when no name is given; null when unset or blank.
 */
export function localUser(env: NodeJS.ProcessEnv = process.env): string | null {
  return env.USER?.trim() || null;
}

/** LOG_LEVEL as set, before any validation (the CLI's error path prints stacks at debug). */
export function requestedLogLevel(env: NodeJS.ProcessEnv = process.env): string | undefined {
  return env.LOG_LEVEL?.trim().toLowerCase();
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // Blank variables count as unset, as shells and compose files often leave them empty.
  const input: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined && v.trim() !== '') input[k] = v;

  const fromFile = new Set<string>();
  for (const name of FILE_VARIANTS) {
    const file = input[`${name}_FILE`];
    if (file === undefined) continue;
    if (input[name] !== undefined) {
      throw new ConfigError(`${name}_FILE`, `must not be set together with ${name}`);
    }
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new ConfigError(
        `${name}_FILE`,
        `must name a readable file (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
      );
    }
    // A secret file's final newline (echo > file) is not part of the secret.
    input[name] = name === 'PAYRECON_ACCOUNTS' ? text : text.replace(/\r?\n$/, '');
    fromFile.add(name);
  }

  const result = envRules.safeParse(input);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    let variable = issuePath(issue.path);
    let rule = issue.message;
    if (issue.code === 'unrecognized_keys') {
      variable = issuePath([...issue.path, issue.keys[0] ?? '?']);
      rule = 'is not a known key';
    } else if (issue.code === 'invalid_type' && rule.startsWith('Invalid input')) {
      rule = `must be ${issue.expected === 'object' ? 'a JSON object' : issue.expected === 'array' ? 'a JSON array' : issue.expected}`;
    }
    const head = /^[A-Z_]+/.exec(variable)?.[0] ?? '';
    if (fromFile.has(head)) variable = `${head}_FILE${variable.slice(head.length)}`;
    throw new ConfigError(variable || 'environment', rule);
  }
  return deepFreeze(buildConfig(result.data)) as Config;
}
