import { describe, expect, it } from 'vitest';
import { toMinor } from './ledger-queries.ts';

describe('toMinor', () => {
  it.each([
    ['0.00', 0n],
    ['123.45', 12_345n],
    ['-300.00', -30_000n],
    ['99999999999999999999.99', 9_999_999_999_999_999_999_999n],
    // Not the two-decimal shape: parsed by parseAmount.
    ['5', 500n],
    ['-1.5', -150n],
  ])('%s is %s minor units', (text, minor) => {
    expect(toMinor(text)).toBe(minor);
  });

  it('reads null as zero and refuses a third decimal', () => {
    expect(toMinor(null)).toBe(0n);
    expect(() => toMinor('1.005')).toThrow(/decimals/);
  });
});
