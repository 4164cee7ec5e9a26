import { describe, expect, it } from 'vitest';
import { formatAmount, LEDGER_NUMERIC, parseAmount, parseMinor, parseMinorOrNull } from './money.ts';

describe('parseAmount', () => {
  it.each([
    ['0', 0n],
    ['0.00', 0n],
    ['100', 10000n],
    ['100.5', 10050n],
    ['100.50', 10050n],
    ['0.01', 1n],
    ['123456789012345678.99', 12345678901234567899n],
    ['999999999999999999.99', 99999999999999999999n],
    ['1.005e2', 10050n],
    ['1E3', 100000n],
    ['12.300', 1230n],
    ['-0', 0n],
  ])('parses %s exactly', (text, minor) => {
    expect(parseAmount(text)).toBe(minor);
  });

  it('round-trips the largest provider amount through format', () => {
    expect(formatAmount(parseAmount('999999999999999999.99'))).toBe('999999999999999999.99');
  });

  it.each([
    ['1.005', 'at most 2 decimals'],
    ['0.001', 'at most 2 decimals'],
    ['1234567890123456789', 'at most 18 integer digits'],
    ['-1.00', 'must not be negative'],
    ['abc', 'must be a decimal number'],
    ['', 'must be a decimal number'],
    ['1.2.3', 'must be a decimal number'],
    ['0x10', 'must be a decimal number'],
  ])('rejects %s (%s) naming the field', (text, rule) => {
    expect(() => parseAmount(text, { field: 'payment_info.amount' })).toThrowError(
      new RegExp(`^payment_info\\.amount: ${rule}`),
    );
  });

  it('accepts negatives only when allowed', () => {
    expect(parseAmount('-3.25', { allowNegative: true })).toBe(-325n);
  });

  it('refuses a fractional JavaScript number', () => {
    expect(() => parseAmount(100.5)).toThrowError(/decimal text/);
    expect(parseAmount(100)).toBe(10000n);
  });
});

describe('formatAmount', () => {
  it.each([
    [0n, '0.00'],
    [1n, '0.01'],
    [-1n, '-0.01'],
    [10050n, '100.50'],
    [-12345678901234567899n, '-123456789012345678.99'],
  ])('formats %s as %s', (minor, text) => {
    expect(formatAmount(minor)).toBe(text);
  });
});

describe('parseMinor, the one money codec', () => {
  it.each([
    ['0.00', 0n],
    ['123.45', 12_345n],
    ['-300.00', -30_000n],
    ['99999999999999999999.99', 9_999_999_999_999_999_999_999n],
    // Not the canonical two-decimal shape: parsed by parseAmount, same value.
    ['5', 500n],
    ['-1.5', -150n],
    ['007.10', 710n],
  ])('reads ledger text %s as %s minor units', (text, minor) => {
    expect(parseMinor(text, LEDGER_NUMERIC)).toBe(minor);
    expect(parseMinor(text, LEDGER_NUMERIC)).toBe(parseAmount(text, LEDGER_NUMERIC));
  });

  it('throws on an absent amount instead of reading it as zero; parseMinorOrNull gives null', () => {
    expect(() => parseMinor(null)).toThrow(/amount: is required/);
    expect(() => parseMinor(undefined, { field: 'fee' })).toThrow(/fee: is required/);
    expect(parseMinorOrNull(null)).toBeNull();
    expect(parseMinorOrNull(undefined)).toBeNull();
    expect(parseMinorOrNull('1.50')).toBe(150n);
  });

  it('keeps the limits of parseAmount on the fast path', () => {
    expect(() => parseMinor('-1.00')).toThrow(/negative/);
    expect(() => parseMinor(`${'9'.repeat(19)}.00`)).toThrow(/integer digits/);
    expect(parseMinor(`${'9'.repeat(18)}.99`)).toBe(10n ** 20n - 1n);
    expect(() => parseMinor(`${'9'.repeat(41)}.00`, LEDGER_NUMERIC)).toThrow(/integer digits/);
    expect(() => parseMinor('1.005', LEDGER_NUMERIC)).toThrow(/decimals/);
    expect(() => parseMinor('NaN')).toThrow();
  });
});
