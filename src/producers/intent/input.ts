/**
 * One intent as the merchant sends it, by `POST /intents`, `payrecon intent record` or a backfill CSV
 * row: `intentInputSchema` validates it (every issue named by field and rule), `intentFromInput` makes
 * the `Intent`, `parseIntents` does both for one intent or a list.
 */
import { z } from 'zod';
import { AppError } from '../../domain/errors.ts';
import { parseAmount } from '../../domain/money.ts';
import { INTENT_OPERATIONS, type Intent } from '../../domain/observation.ts';
import { recordWithoutSecrets as sanitized } from '../../domain/secrets.ts';
import { formatZodIssues } from '../../provider/schemas.ts';

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
