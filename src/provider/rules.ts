/**
 * Field rules of the Payment Service API v3 (spec sections 2.3-2.8 and 8), as small zod building blocks
 * with the rule text as the error message. `schemas.ts` composes them. Inputs are parsed-provider-JSON
 * values (`parseProviderJson`): every JSON number arrives as its decimal text, so numeric rules accept
 * text (and, for values built in code, a JavaScript number or, for amounts, a `Minor` bigint).
 */
import { isIP } from 'node:net';
import { z } from 'zod';
import { MAX_INTEGER_DIGITS, type Minor, MoneyError, parseAmount } from '../domain/money.ts';

type IssueInput = { input?: unknown };

/** Error function: a missing value reads `is required`, a wrong one reads `must be <what>`. */
export function needs(what: string) {
  return {
    error: (iss: IssueInput) => (iss.input === undefined ? 'is required' : `must be ${what}`),
  };
}

/** Text up to `max` characters (optionally at least `min`). */
export function text(max?: number, min = 0) {
  let s = z.string(needs('text'));
  if (min > 0) s = s.min(min, min === 1 ? 'must not be empty' : `at least ${min} characters`);
  if (max !== undefined) s = s.max(max, `at most ${max} characters`);
  return s;
}

export function bool() {
  return z.boolean(needs('true or false'));
}

/** Text matching a pattern; the rule names the format. */
export function pattern(re: RegExp, rule: string, max?: number) {
  let s = z.string(needs('text'));
  if (max !== undefined) s = s.max(max, `at most ${max} characters`);
  return s.regex(re, rule);
}

const INTEGER_TEXT = /^-?\d+$/;

/**
 * An integer given as JSON number text (or a JavaScript number); comes out as a safe integer.
 * `min`/`max` bound it; `digits` limits the count of digits.
 */
export function int(options: { min?: number; max?: number; digits?: number } = {}) {
  const { min, max, digits } = options;
  const what = min !== undefined && max !== undefined ? `an integer from ${min} to ${max}` : 'an integer';
  return z.union([z.string(), z.number()], needs(what)).transform((value, ctx): number => {
    const raw = typeof value === 'number' ? String(value) : value.trim();
    if (!INTEGER_TEXT.test(raw)) {
      ctx.addIssue({ code: 'custom', message: `must be ${what}` });
      return z.NEVER;
    }
    if (digits !== undefined && raw.replace(/^-/, '').replace(/^0+(?=\d)/, '').length > digits) {
      ctx.addIssue({ code: 'custom', message: `at most ${digits} digits` });
      return z.NEVER;
    }
    const n = Number(raw);
    if (!Number.isSafeInteger(n)) {
      ctx.addIssue({ code: 'custom', message: 'must be an integer below 2^53' });
      return z.NEVER;
    }
    if ((min !== undefined && n < min) || (max !== undefined && n > max)) {
      ctx.addIssue({ code: 'custom', message: `must be ${what}` });
      return z.NEVER;
    }
    return n;
  });
}

/** A provider id (deposit_id, cashout_id, refund_id): a positive integer, as JSON number or its text. */
export function id() {
  return int({ min: 1 });
}

/** Text that may also arrive as a JSON number (the provider is loose with codes): kept as text. */
export function textOrNumber(max?: number) {
  return z.union([z.string(), z.number()], needs('text')).transform((v, ctx): string => {
    const s = String(v);
    if (max !== undefined && s.length > max) {
      ctx.addIssue({ code: 'custom', message: `at most ${max} characters` });
      return z.NEVER;
    }
    return s;
  });
}

const MAX_MINOR = 10n ** BigInt(MAX_INTEGER_DIGITS + 2);

/**
 * A money amount: decimal text as the provider wrote it (`"100.50"`), or a `Minor` bigint built in
 * code. Up to 18 integer digits and 2 decimals; a third decimal is an error, never rounded. Comes out
 * as `Minor`. `positive` rejects zero; `negative` allows signs (never on the provider's fields).
 */
export function amount(options: { positive?: boolean } = {}) {
  return z
    .union([z.string(), z.bigint()], needs('a decimal amount (text) or minor units (bigint)'))
    .transform((value, ctx): Minor => {
      let minor: Minor;
      if (typeof value === 'bigint') {
        if (value < 0n) {
          ctx.addIssue({ code: 'custom', message: 'must not be negative' });
          return z.NEVER;
        }
        if (value >= MAX_MINOR) {
          ctx.addIssue({ code: 'custom', message: `at most ${MAX_INTEGER_DIGITS} integer digits allowed` });
          return z.NEVER;
        }
        minor = value;
      } else {
        try {
          minor = parseAmount(value);
        } catch (err) {
          const rule = err instanceof MoneyError ? String(err.details?.rule) : 'must be a decimal number';
          ctx.addIssue({ code: 'custom', message: rule });
          return z.NEVER;
        }
      }
      if (options.positive && minor === 0n) {
        ctx.addIssue({ code: 'custom', message: 'must be greater than 0' });
        return z.NEVER;
      }
      return minor;
    });
}

/** A decimal kept as text (crypto amounts and rates carry more than two decimals). */
export function decimalText() {
  return z
    .union([z.string(), z.number()], needs('a decimal number'))
    .transform((v) => String(v))
    .refine((s) => /^-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?$/.test(s), 'must be a decimal number');
}

const regionNames = new Intl.DisplayNames(['en'], { type: 'region' });
/** Region codes Intl knows that are not countries. */
const NOT_COUNTRIES = new Set(['EU', 'EZ', 'UN', 'QO', 'ZZ', 'XA', 'XB', 'AA', 'QU']);

/** ISO 3166-1 alpha-2 country code (upper case), checked against the ICU region list. */
/** Answers of `regionNames.of` by code (at most 26 x 26 entries): ICU's lookup costs microseconds a call. */
const countryAnswers = new Map<string, boolean>();

export function isCountryCode(value: string): boolean {
  if (!/^[A-Z]{2}$/.test(value) || NOT_COUNTRIES.has(value)) return false;
  let known = countryAnswers.get(value);
  if (known === undefined) {
    const name = regionNames.of(value);
    known = name !== undefined && name !== value;
    countryAnswers.set(value, known);
  }
  return known;
}

export function country() {
  return z
    .string(needs('an ISO 3166-1 alpha-2 country code'))
    .refine(isCountryCode, 'must be an ISO 3166-1 alpha-2 country code');
}

const CURRENCIES = new Set(Intl.supportedValuesOf('currency'));

/** ISO 4217 currency code (upper case), checked against the ICU currency list. */
export function isCurrencyCode(value: string): boolean {
  return /^[A-Z]{3}$/.test(value) && CURRENCIES.has(value);
}

export function currency() {
  return z
    .string(needs('an ISO 4217 currency code'))
    .refine(isCurrencyCode, 'must be an ISO 4217 currency code');
}

/** An https URL of at most 2048 characters (every URL field of the deposit request, spec 2.3 and 8). */
export function httpsUrl() {
  return z
    .string(needs('an HTTPS URL'))
    .max(2048, 'at most 2048 characters')
    .refine((s) => {
      try {
        const u = new URL(s);
        return u.protocol === 'https:' && u.hostname !== '';
      } catch {
        return false;
      }
    }, 'must be an HTTPS URL');
}

/** An http or https URL (cashout notification_url: the provider delivers to ports 80 and 443). */
export function webUrl() {
  return z
    .string(needs('an HTTP or HTTPS URL'))
    .max(2048, 'at most 2048 characters')
    .refine((s) => {
      try {
        const u = new URL(s);
        return (u.protocol === 'https:' || u.protocol === 'http:') && u.hostname !== '';
      } catch {
        return false;
      }
    }, 'must be an HTTP or HTTPS URL');
}

export function ipAddress() {
  return z
    .string(needs('an IPv4 or IPv6 address'))
    .refine((s) => isIP(s) !== 0, 'must be an IPv4 or IPv6 address');
}

/** True for `yyyyMMdd` naming a real calendar date. */
export function isCompactDate(value: string): boolean {
  const m = /^(\d{4})(\d{2})(\d{2})$/.exec(value);
  if (!m) return false;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const date = new Date(Date.UTC(y, mo - 1, d));
  return date.getUTCFullYear() === y && date.getUTCMonth() === mo - 1 && date.getUTCDate() === d;
}

export function compactDate() {
  return z
    .string(needs('a date in the format yyyyMMdd'))
    .max(8, 'at most 8 characters')
    .refine(isCompactDate, 'must be a date in the format yyyyMMdd');
}

// An address with a dot in the domain; deliberately simple (the provider's exact check is not published).
const EMAIL = /^[^\s@]+@[^\s@.]+(?:\.[^\s@.]+)+$/;

export function email() {
  return z
    .string(needs('a valid e-mail address'))
    .max(255, 'at most 255 characters')
    .regex(EMAIL, 'must be a valid e-mail address');
}

// Digits with optional +, spaces, dots, dashes and parentheses; 6 to 15 digits (E.164 allows 15).
export function isPhone(value: string): boolean {
  if (!/^\+?[\d\s().-]+$/.test(value)) return false;
  const digits = value.replace(/\D/g, '').length;
  return digits >= 6 && digits <= 15;
}

export function phone() {
  return z
    .string(needs('a valid phone number'))
    .max(32, 'at most 32 characters')
    .refine(isPhone, 'must be a valid phone number');
}

/** Date-time `yyyy-MM-dd HH:mm:ss` (payment_info dates, cashout notification `date`). */
export const DATE_TIME_TEXT = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/;
