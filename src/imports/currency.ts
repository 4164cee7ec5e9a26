/**
 * Amounts of statements and reports are decimal text in a currency. Their decimals are checked against
 * the currency's minor digits (ISO 4217, at least two), then the text goes through the money codec, which holds two
 * decimals: an amount is parsed from text digit for digit, never through a float, and a digit the codec
 * cannot hold is refused, never rounded.
 */
import { type Minor, MoneyError, parseAmount } from '../domain/money.ts';

/** ISO 4217 currencies whose minor unit is not 2 digits (every other currency has 2). */
const MINOR_DIGITS: Readonly<Record<string, number>> = {
  BIF: 0,
  CLP: 0,
  DJF: 0,
  GNF: 0,
  ISK: 0,
  JPY: 0,
  KMF: 0,
  KRW: 0,
  PYG: 0,
  RWF: 0,
  UGX: 0,
  UYI: 0,
  VND: 0,
  VUV: 0,
  XAF: 0,
  XOF: 0,
  XPF: 0,
  BHD: 3,
  IQD: 3,
  JOD: 3,
  KWD: 3,
  LYD: 3,
  OMR: 3,
  TND: 3,
  CLF: 4,
  UYW: 4,
};

const CURRENCY = /^[A-Z]{3}$/;
const PLAIN_DECIMAL = /^[+-]?\d+(?:\.\d+)?$/;

export function isCurrencyCode(text: string): boolean {
  return CURRENCY.test(text);
}

/**
 * The number of decimals an amount in the currency may carry: its ISO 4217 minor digits, and at least
 * two, since the provider and the settlement accounts it pays into keep two decimals in every currency
 * (a CLP deposit of 1143.40; its reports and statements say so), as the ledger does.
 */
export function minorDigits(currency: string): number {
  return Math.max(MINOR_DIGITS[currency] ?? 2, 2);
}

/**
 * Decimal text (`1234.5`, `-0.01`; no exponent, no separators) in a currency to minor units. Throws a
 * MoneyError naming the field and the rule.
 */
export function parseCurrencyAmount(
  text: string,
  currency: string,
  options: { field: string; allowNegative: boolean },
): Minor {
  if (!PLAIN_DECIMAL.test(text)) {
    throw new MoneyError(options.field, 'must be a decimal number (digits, an optional point)', text);
  }
  const point = text.indexOf('.');
  const decimals = point < 0 ? 0 : text.length - point - 1;
  const digits = minorDigits(currency);
  if (decimals > digits) {
    throw new MoneyError(options.field, `at most ${digits} decimals for ${currency}`, text);
  }
  return parseAmount(text, { field: options.field, allowNegative: options.allowNegative });
}
