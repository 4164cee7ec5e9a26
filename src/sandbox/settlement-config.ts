/**
 * What a merchant account's settlements follow (the account's `settlement` field, `--accounts FILE`),
 * and the bank-side settings of the sandbox (`PUT /_sandbox/bank`): how often the bank does what real
 * banks do to a settlement's credit. Every field has a default, so an account without the field is
 * settled daily at midnight of its time zone, value date T+1, per currency.
 */
import { z } from 'zod';
import { parseAmount } from '../domain/money.ts';

const amountText = z.string().refine((s) => {
  try {
    return parseAmount(s) >= 0n;
  } catch {
    return false;
  }
}, 'must be a non-negative decimal amount with at most 2 decimals');

/** A positive decimal rate with up to 10 digits after the point. */
export const RATE_DIGITS = 10;
const rateText = z.string().regex(/^\d+(\.\d{1,10})?$/, 'must be a decimal with at most 10 decimals');

const currencyCode = z.string().regex(/^[A-Z]{3}$/, 'must be an ISO 4217 code');

export const settlementConfigSchema = z.object({
  enabled: z.boolean().default(true),
  /** `daily`: every day at the cut-off; `weekly`: on `weekday` only. */
  schedule: z.enum(['daily', 'weekly']).default('daily'),
  /** ISO weekday of a weekly schedule (1 Monday ... 7 Sunday). */
  weekday: z.number().int().min(1).max(7).default(1),
  /** Local wall time of the cut-off in the account's time zone. */
  cutoff: z
    .string()
    .regex(/^([01]\d|2[0-3]):[0-5]\d$/, 'must be HH:MM')
    .default('00:00'),
  /** Calendar days from the period's last local day to the value date (T+1 by default). */
  valueDays: z.number().int().min(0).max(30).default(1),
  /** Currency everything is converted into; null pays each balance in its own currency. */
  currency: currencyCode.nullable().default(null),
  /** Spread taken off the market rate, basis points. */
  spreadBps: z.number().int().min(0).max(5000).default(150),
  /** Market rates from a balance currency into the settlement currency (default: the catalogue's USD rates). */
  rates: z.record(currencyCode, rateText).default({}),
  /** Settlement fee in the settlement currency: a fixed part plus basis points of the converted gross. */
  fee: z
    .object({ fixed: amountText.default('1.00'), bps: z.number().int().min(0).max(10000).default(0) })
    .default({ fixed: '1.00', bps: 0 }),
  /** Id (IBAN or other) of the bank account receiving each settlement currency; default a generated IBAN. */
  bankAccounts: z.record(currencyCode, z.string().min(1).max(34)).default({}),
});

export type SettlementConfig = z.infer<typeof settlementConfigSchema>;

export const DEFAULT_SETTLEMENT_CONFIG: SettlementConfig = settlementConfigSchema.parse({});

export const bankSettingsSchema = z.object({
  /** Share of settlement credits booked a day after the value date. */
  lateCreditRate: z.number().min(0).max(1).default(0.06),
  /** Share of settlements paid together with the next one in one batch credit. */
  batchedCreditRate: z.number().min(0).max(1).default(0.06),
  /** Share of credits the bank takes a fee from. */
  bankFeeRate: z.number().min(0).max(1).default(0.06),
  /** Bank fee range, in the credit's currency. */
  bankFee: z.tuple([amountText, amountText]).default(['0.50', '4.50']),
  /** Share of settlement credits that never arrive. */
  missingCreditRate: z.number().min(0).max(1).default(0.03),
  /** Share of credits returned (reversed) one to three days later. */
  returnedCreditRate: z.number().min(0).max(1).default(0.03),
  /** Chance per bank account and cut-off of a line unrelated to settlements (rent, transfers). */
  unrelatedLineRate: z.number().min(0).max(1).default(0.3),
});

export type BankSettings = z.infer<typeof bankSettingsSchema>;
