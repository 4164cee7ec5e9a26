/**
 * A mapping profile tells how a CSV or XLSX file of a bank or a provider reads: which column holds which
 * field, how dates and numbers are written, how an amount's sign is given and which fields identify a
 * row. Every real-world layout is a profile (a JSON file), not code; the sandbox's three files have
 * built-in ones (profiles/*.json beside this file). A bad profile is refused with one line naming the
 * field and the rule.
 */
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import type { ImportKind } from '../domain/imports.ts';
import { accepted, type ImportResult, refused } from './refusal.ts';

export const TRANSACTION_TYPES = ['deposit', 'cashout', 'refund', 'fee', 'settlement'] as const;
export type TransactionType = (typeof TRANSACTION_TYPES)[number];

const column = z.string().min(1, 'must name a column');

/** `YYYY`, `MM` and `DD` once each, any other character standing for itself (`DD.MM.YYYY`, `YYYYMMDD`). */
function isDateFormat(format: string): boolean {
  return ['YYYY', 'MM', 'DD'].every((token) => format.split(token).length === 2);
}

const common = {
  name: z.string().min(1, 'must not be empty'),
  description: z.string().optional(),
  dateFormat: z
    .string()
    .refine(isDateFormat, 'must hold YYYY, MM and DD once each (e.g. YYYY-MM-DD, DD.MM.YYYY)'),
  number: z
    .strictObject({
      decimal: z.enum(['.', ',']),
      thousands: z.enum(['', ',', '.', ' ', "'", '\u00a0']),
    })
    .refine((n) => n.decimal !== n.thousands, {
      message: 'must differ from the decimal separator',
      path: ['thousands'],
    }),
  sign: z.discriminatedUnion('convention', [
    z.strictObject({ convention: z.literal('signed') }),
    z.strictObject({
      convention: z.literal('direction'),
      column,
      credit: z.array(z.string().min(1)).min(1, 'must list at least one value'),
      debit: z.array(z.string().min(1)).min(1, 'must list at least one value'),
    }),
  ]),
  csv: z
    .strictObject({
      delimiter: z.string().length(1, 'must be one character'),
      quote: z.string().length(1, 'must be one character'),
    })
    .optional(),
  /** The XLSX sheet by name; the first sheet when absent. */
  sheet: z.string().min(1).optional(),
  /**
   * Optional fields whose column a file may lack (a layout that gained a column: older files stay
   * importable): a file without the column reads as if the profile named none.
   */
  optionalColumns: z.array(z.string().min(1)).optional(),
};

const bankFields = [
  'bookingDate',
  'amount',
  'valueDate',
  'currency',
  'reference',
  'endToEndId',
  'counterparty',
  'description',
  'balanceAfter',
  'account',
] as const;

const bankProfile = z.strictObject({
  kind: z.literal('bank-statement'),
  ...common,
  /** The currency of every row when the file has no currency column. */
  currency: z
    .string()
    .regex(/^[A-Z]{3}$/, 'must be an ISO 4217 code')
    .optional(),
  columns: z.strictObject({
    bookingDate: column,
    amount: column,
    valueDate: column.optional(),
    currency: column.optional(),
    reference: column.optional(),
    endToEndId: column.optional(),
    counterparty: column.optional(),
    description: column.optional(),
    balanceAfter: column.optional(),
    account: column.optional(),
  }),
  /** The character that joins the end-to-end ids of a batch entry in one cell; one id per cell when absent. */
  endToEndIdSeparator: z.string().length(1, 'must be one character').optional(),
  identity: z.array(z.enum(bankFields)).min(1, 'must name at least one field'),
});

const transactionFields = [
  'transactionId',
  'type',
  'status',
  'externalId',
  'invoiceId',
  'currency',
  'gross',
  'fee',
  'net',
  'createdAt',
  'updatedAt',
  'settlementId',
] as const;

const transactionsProfile = z.strictObject({
  kind: z.literal('provider-transactions'),
  ...common,
  columns: z.strictObject({
    transactionId: column,
    type: column,
    status: column,
    currency: column,
    gross: column,
    fee: column,
    net: column,
    createdAt: column,
    externalId: column.optional(),
    invoiceId: column.optional(),
    updatedAt: column.optional(),
    settlementId: column.optional(),
  }),
  /** The provider's words for the movement types; by default the type column holds the names themselves. */
  types: z.record(z.string().min(1), z.enum(TRANSACTION_TYPES)).optional(),
  /** Check net = gross - fee on every row. */
  checkNet: z.boolean().default(true),
  identity: z.array(z.enum(transactionFields)).min(1, 'must name at least one field'),
});

const settlementFields = [
  'settlementId',
  'account',
  'periodStart',
  'periodEnd',
  'currency',
  'gross',
  'fees',
  'settlementCurrency',
  'rate',
  'net',
  'valueDate',
  'bankReference',
  'balanceAtCutoff',
  'balanceAfter',
] as const;

const settlementsProfile = z.strictObject({
  kind: z.literal('provider-settlements'),
  ...common,
  columns: z.strictObject({
    settlementId: column,
    currency: column,
    gross: column,
    fees: column,
    settlementCurrency: column,
    rate: column,
    net: column,
    valueDate: column,
    account: column.optional(),
    periodStart: column.optional(),
    periodEnd: column.optional(),
    bankReference: column.optional(),
    /**
     * The provider's balance in the balance currency, as its balance report gives it: what was left
     * unsettled at the cut-off before the payout, and what the payout left to carry over. Either gives
     * the balance at the cut-off (the second plus the gross); with both, they must agree. Compared with
     * the ledger's `available` at the cut-off (PROVIDER_BALANCE_DRIFT); without them, nothing is compared.
     */
    balanceAtCutoff: column.optional(),
    balanceAfter: column.optional(),
  }),
  /** Check net = gross x rate - fees (to half a minor unit, the rounding) on every row. */
  checkNet: z.boolean().default(true),
  identity: z.array(z.enum(settlementFields)).min(1, 'must name at least one field'),
});

/** The fields every row of a kind needs (their columns are required). */
const REQUIRED_FIELDS: Readonly<Record<ImportKind, readonly string[]>> = {
  'bank-statement': ['bookingDate', 'amount'],
  'provider-transactions': [
    'transactionId',
    'type',
    'status',
    'currency',
    'gross',
    'fee',
    'net',
    'createdAt',
  ],
  'provider-settlements': [
    'settlementId',
    'currency',
    'gross',
    'fees',
    'settlementCurrency',
    'rate',
    'net',
    'valueDate',
  ],
};

const profileSchema = z
  .discriminatedUnion('kind', [bankProfile, transactionsProfile, settlementsProfile])
  .superRefine((profile, ctx) => {
    const columns = profile.columns as Record<string, string | undefined>;
    profile.identity.forEach((field, i) => {
      if (columns[field] === undefined) {
        ctx.addIssue({
          code: 'custom',
          path: ['identity', i],
          message: `names ${field}, which has no column`,
        });
      }
    });
    profile.optionalColumns?.forEach((field, i) => {
      if (columns[field] === undefined) {
        ctx.addIssue({
          code: 'custom',
          path: ['optionalColumns', i],
          message: `names ${field}, which has no column`,
        });
      } else if (
        REQUIRED_FIELDS[profile.kind].includes(field) ||
        profile.identity.includes(field as never) ||
        (profile.kind === 'bank-statement' && field === 'currency' && !profile.currency)
      ) {
        ctx.addIssue({
          code: 'custom',
          path: ['optionalColumns', i],
          message: `names ${field}, which every row needs`,
        });
      }
    });
    if (profile.kind === 'bank-statement' && profile.columns.currency === undefined && !profile.currency) {
      ctx.addIssue({
        code: 'custom',
        path: ['currency'],
        message: 'is required when columns.currency is absent',
      });
    }
  });

export type Profile = z.infer<typeof profileSchema>;
export type BankProfile = Extract<Profile, { kind: 'bank-statement' }>;
export type TransactionsProfile = Extract<Profile, { kind: 'provider-transactions' }>;
export type SettlementsProfile = Extract<Profile, { kind: 'provider-settlements' }>;

/** Checks a profile's JSON value; `source` names it in a refusal (`profile.json: field sign.column: ...`). */
export function parseProfile(source: string, value: unknown): ImportResult<Profile> {
  const parsed = profileSchema.safeParse(value);
  if (parsed.success) return accepted(parsed.data);
  const issue = parsed.error.issues[0];
  const path = issue?.path.map(String).join('.') ?? '';
  return refused(source, path === '' ? 'profile' : `field ${path}`, issue?.message ?? 'is not a profile');
}

/** Reads and checks a profile file. */
export async function readProfileFile(path: string): Promise<ImportResult<Profile>> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    return refused(path, null, `cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return refused(path, null, `is not JSON: ${(err as Error).message}`);
  }
  return parseProfile(path, value);
}

/** The built-in profiles by name (each file's `name`), with the kind each reads. */
export const BUILT_IN_PROFILES: Readonly<Record<string, ImportKind>> = {
  'sandbox-bank-csv': 'bank-statement',
  'sandbox-provider-transactions': 'provider-transactions',
  'sandbox-provider-settlements': 'provider-settlements',
};

const BUILT_IN_FILES: Record<ImportKind, string> = {
  'bank-statement': 'sandbox-bank-csv.json',
  'provider-transactions': 'sandbox-provider-transactions.json',
  'provider-settlements': 'sandbox-provider-settlements.json',
};

/** The built-in profile of a kind: the layout of the sandbox's file of that kind. */
export function builtInProfile(kind: ImportKind): Profile {
  const url = new URL(`./profiles/${BUILT_IN_FILES[kind]}`, import.meta.url);
  const result = parseProfile(url.pathname, JSON.parse(readFileSync(url, 'utf8')));
  if (!result.ok) throw result.refusal;
  return result.value;
}
