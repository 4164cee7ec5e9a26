/**
 * Money is a bigint count of minor units (cents). The provider's amounts reach 18 integer digits and
 * 2 decimals, more than a JavaScript number holds exactly, so amounts are only ever parsed from, and
 * formatted to, decimal text. No float touches an amount.
 */
import { AppError } from './errors.ts';

/** Minor units (cents) of an amount with two decimals. */
export type Minor = bigint;

export const MAX_INTEGER_DIGITS = 18;
export const DECIMALS = 2;
const SCALE = 100n;

const DECIMAL = /^([+-]?)(\d+)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/;

export interface ParseAmountOptions {
  /** Field name used in the error message. */
  field?: string;
  /** Allow a leading minus sign (ledger postings); provider amounts are never negative. */
  allowNegative?: boolean;
  /** Most integer digits allowed (default 18, the provider's limit). */
  maxIntegerDigits?: number;
}

export class MoneyError extends AppError {
  constructor(field: string, rule: string, value: string) {
    super('INVALID_AMOUNT', `${field}: ${rule} (got ${JSON.stringify(value.slice(0, 40))})`, {
      details: { field, rule },
    });
  }
}

/**
 * Parses decimal text (as the provider sent it, before any JSON-to-number conversion) into minor units.
 * Accepts `100`, `100.5`, `100.50`, `-3.25` (with allowNegative) and exponent forms such as `1.005e2`
 * as long as the value has at most two decimals. A third significant decimal is an error, never rounded.
 */
export function parseAmount(text: string | number | bigint, options: ParseAmountOptions = {}): Minor {
  const field = options.field ?? 'amount';
  if (typeof text === 'bigint') return text * SCALE;
  if (typeof text === 'number') {
    // Only integers are exact as numbers; anything else must arrive as text.
    if (!Number.isSafeInteger(text)) {
      throw new MoneyError(
        field,
        'a fractional or unsafe number must be given as decimal text',
        String(text),
      );
    }
    text = String(text);
  }
  const raw = text.trim();
  const match = DECIMAL.exec(raw);
  if (!match) throw new MoneyError(field, 'must be a decimal number with at most 2 decimals', raw);
  const [, sign = '', intPart = '', fracPart = '', expPart] = match;
  let digits = intPart + fracPart;
  let pointAt = intPart.length; // decimal point position within digits
  if (expPart !== undefined) {
    const exp = Number(expPart);
    if (!Number.isSafeInteger(exp) || Math.abs(exp) > 64)
      throw new MoneyError(field, 'exponent out of range', raw);
    pointAt += exp;
  }
  if (pointAt < 0) {
    digits = '0'.repeat(-pointAt) + digits;
    pointAt = 0;
  }
  if (pointAt > digits.length) {
    digits = digits + '0'.repeat(pointAt - digits.length);
  }
  const integer = digits.slice(0, pointAt).replace(/^0+(?=\d)/, '') || '0';
  const fraction = digits.slice(pointAt).replace(/0+$/, '');
  if (fraction.length > DECIMALS) {
    throw new MoneyError(field, `at most ${DECIMALS} decimals allowed`, raw);
  }
  const maxDigits = options.maxIntegerDigits ?? MAX_INTEGER_DIGITS;
  if (integer.length > maxDigits) {
    throw new MoneyError(field, `at most ${maxDigits} integer digits allowed`, raw);
  }
  const minor = BigInt(integer) * SCALE + BigInt(fraction.padEnd(DECIMALS, '0'));
  if (sign === '-' && minor !== 0n) {
    if (!options.allowNegative) throw new MoneyError(field, 'must not be negative', raw);
    return -minor;
  }
  return minor;
}

/** The canonical text PostgreSQL writes for a numeric of scale 2: optional minus, no leading zero, two decimals. */
const CANONICAL_2 = /^-?(?:0|[1-9]\d*)\.\d\d$/;

/**
 * Options for numeric text the ledger reads back (balances, sums, postings): signed, and sums may exceed
 * the 18 integer digits of one amount.
 */
export const LEDGER_NUMERIC: ParseAmountOptions = {
  allowNegative: true,
  maxIntegerDigits: 40,
  field: 'ledger',
};

/**
 * The one money codec: decimal text (or a safe integer) to minor units. Throws a `MoneyError` on null or
 * undefined ("is required") and on anything `parseAmount` rejects; never returns a default. The
 * canonical form PostgreSQL writes (`-123.45`) is read by dropping the point (exact, and the hot path of
 * the ledger's reads); any other form goes through `parseAmount`, which gives the same value or error.
 */
export function parseMinor(
  value: string | number | null | undefined,
  options: ParseAmountOptions = {},
): Minor {
  if (value === null || value === undefined) {
    throw new MoneyError(options.field ?? 'amount', 'is required', String(value));
  }
  if (typeof value === 'string') {
    const negative = value.charCodeAt(0) === 45;
    const integerDigits = value.length - 3 - (negative ? 1 : 0);
    if (
      (!negative || options.allowNegative) &&
      integerDigits <= (options.maxIntegerDigits ?? MAX_INTEGER_DIGITS) &&
      CANONICAL_2.test(value)
    ) {
      return BigInt(value.slice(0, -3) + value.slice(-2));
    }
  }
  return parseAmount(value, options);
}

/** Numeric text the ledger reads back (signed; sums beyond 18 integer digits) to minor units; throws on null. */
export function parseLedgerMinor(text: string | null | undefined): Minor {
  return parseMinor(text, LEDGER_NUMERIC);
}

/** `parseMinor`, except that null and undefined (an absent amount) give null. */
export function parseMinorOrNull(
  value: string | number | null | undefined,
  options: ParseAmountOptions = {},
): Minor | null {
  return value === null || value === undefined ? null : parseMinor(value, options);
}

/**
 * Formats minor units as decimal text with exactly two decimals: `12345n` becomes `"123.45"`. The
 * digits of the magnitude are split as text (one bigint conversion; a division and a remainder of
 * bigints cost three times as much, and the ledger's write formats every amount it sends).
 */
export function formatAmount(minor: Minor): string {
  const negative = minor < 0n;
  const digits = (negative ? -minor : minor).toString();
  const n = digits.length;
  const text =
    n > DECIMALS
      ? `${digits.slice(0, n - DECIMALS)}.${digits.slice(n - DECIMALS)}`
      : `0.${'0'.repeat(DECIMALS - n)}${digits}`;
  return negative ? `-${text}` : text;
}

/**
 * Largest magnitude (minor units) whose amount a spreadsheet number cell holds exactly: a decimal of at
 * most 15 significant digits comes back from a double digit for digit (9,999,999,999,999.99). 2^53 is
 * the limit for integers; with two decimals a double stops telling cents apart well before it.
 */
export const MAX_EXACT_CELL_MINOR = 10n ** 15n - 1n;

/** True when the text is a valid provider amount (non-negative, 18 integer digits, 2 decimals). */
export function isAmountText(text: string): boolean {
  try {
    parseAmount(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * An amount as a spreadsheet cell value: a number when a double gives back its exact decimal text, else
 * the exact decimal text itself (18 integer digits and 2 decimals fit no double). Never throws, never
 * rounds; the number is parsed from the decimal text, no arithmetic on a float.
 */
export function minorToCell(minor: Minor): number | string {
  const abs = minor < 0n ? -minor : minor;
  const text = formatAmount(minor);
  return abs <= MAX_EXACT_CELL_MINOR ? Number(text) : text;
}
