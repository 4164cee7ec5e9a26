/**
 * Lossless JSON for provider bodies. The provider's amounts reach 18 integer digits and 2 decimals,
 * beyond what a JavaScript number holds, so a body is never given to `JSON.parse`:
 *
 * - `parseProviderJson` turns every JSON number into its decimal text (`100.50` becomes the string
 *   `"100.50"`), so the zod schemas of `schemas.ts` see text and decide per field whether it is an
 *   amount (`Minor`), an integer id or a code.
 * - `stringifyProviderJson` writes a body. The marking rule is: **every `bigint` in the value is a
 *   `Minor` amount** and is written as a JSON number with exactly two decimals (`10050n` becomes
 *   `100.50`). JavaScript numbers (ids, codes, installments) are written as usual. A value that is
 *   neither (text that must go out as a raw JSON number, e.g. an id larger than 2^53) can be wrapped in
 *   `jsonNumber(text)`. Amounts that are not minor units of two decimals (none in this API) would also
 *   use `jsonNumber`.
 */
import { isLosslessNumber, parse, stringify } from 'lossless-json';
import { AppError } from '../domain/errors.ts';
import { formatAmount } from '../domain/money.ts';

const NUMBER_TEXT = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/** A number written raw into JSON from its decimal text. */
export class JsonNumber {
  readonly text: string;
  constructor(text: string) {
    if (!NUMBER_TEXT.test(text)) {
      throw new AppError('VALIDATION_FAILED', `not a JSON number: ${JSON.stringify(text.slice(0, 40))}`);
    }
    this.text = text;
  }
  toJSON(): string {
    return this.text;
  }
}

/** Marks decimal text to be written as a raw JSON number. */
export function jsonNumber(text: string): JsonNumber {
  return new JsonNumber(text);
}

/**
 * Parses a provider body losslessly: every JSON number becomes its decimal text (a string). Throws a
 * VALIDATION_FAILED AppError (rule `must be valid JSON`) on malformed text.
 */
export function parseProviderJson(text: string): unknown {
  try {
    return parse(text, null, (value: string) => value);
  } catch (err) {
    throw new AppError('VALIDATION_FAILED', `body: must be valid JSON (${(err as Error).message})`, {
      cause: err,
      details: { field: 'body', rule: 'must be valid JSON' },
    });
  }
}

const numberStringifiers = [
  {
    test: (value: unknown) => typeof value === 'bigint',
    stringify: (value: unknown) => formatAmount(value as bigint),
  },
  {
    test: (value: unknown) => value instanceof JsonNumber,
    stringify: (value: unknown) => (value as JsonNumber).text,
  },
  {
    test: (value: unknown) => isLosslessNumber(value),
    stringify: (value: unknown) => String(value),
  },
];

/**
 * Writes a provider body: bigint values as two-decimal amounts, `JsonNumber` as raw numbers, the rest
 * as `JSON.stringify` would (undefined properties are left out). Compact, no spaces, key order kept,
 * so the text is exactly what is signed and sent.
 */
export function stringifyProviderJson(value: unknown): string {
  const text = stringify(value, null, undefined, numberStringifiers);
  if (text === undefined) {
    throw new AppError('VALIDATION_FAILED', 'body: value cannot be written as JSON');
  }
  return text;
}
