import { describe, expect, it } from 'vitest';
import { arrayLiteral } from '../../bench/array-literal.ts';
import { formatAmount, LEDGER_NUMERIC, parseAmount, parseMinorOrNull } from '../../src/domain/money.ts';
import { Rng } from '../../src/sandbox/rng.ts';

/** The sandbox's seeded generator (mulberry32), so every run sees the same stream. */
const seeded = (seed: number) => {
  const rng = new Rng(seed);
  return () => rng.next();
};

describe('formatAmount', () => {
  /** The definition by bigint division, which `formatAmount` replaced by splitting the digits' text. */
  const byDivision = (minor: bigint) => {
    const abs = minor < 0n ? -minor : minor;
    return `${minor < 0n ? '-' : ''}${abs / 100n}.${(abs % 100n).toString().padStart(2, '0')}`;
  };
  it('writes what dividing by 100 writes, for amounts of 1 to 40 digits of either sign and the edges', () => {
    expect(formatAmount(0n)).toBe('0.00');
    expect(formatAmount(5n)).toBe('0.05');
    expect(formatAmount(-5n)).toBe('-0.05');
    expect(formatAmount(10n)).toBe('0.10');
    expect(formatAmount(-99n)).toBe('-0.99');
    expect(formatAmount(100n)).toBe('1.00');
    expect(formatAmount(-12_345n)).toBe('-123.45');
    expect(formatAmount(99_999_999_999_999_999_999n)).toBe('999999999999999999.99');
    const rnd = seeded(13);
    for (let i = 0; i < 5_000; i++) {
      const digits = 1 + Math.floor(rnd() * 40);
      let n = BigInt(Math.floor(rnd() * 10));
      for (let d = 1; d < digits; d++) n = n * 10n + BigInt(Math.floor(rnd() * 10));
      const minor = rnd() < 0.3 ? -n : n;
      expect(formatAmount(minor)).toBe(byDivision(minor));
    }
  });
});

describe('parseMinorOrNull with LEDGER_NUMERIC (how the repositories read numeric text)', () => {
  const toMinor = (v: string | null) => parseMinorOrNull(v, LEDGER_NUMERIC);
  it('reads numeric text of scale 2 as parseAmount does, exactly, up to 40 integer digits', () => {
    const rnd = seeded(11);
    for (let i = 0; i < 5_000; i++) {
      const digits = 1 + Math.floor(rnd() * 40);
      let n = BigInt(Math.floor(rnd() * 9) + 1);
      for (let d = 1; d < digits; d++) n = n * 10n + BigInt(Math.floor(rnd() * 10));
      const minor = rnd() < 0.3 ? -n : n;
      const text = formatAmount(minor);
      expect(toMinor(text)).toBe(minor);
      expect(toMinor(text)).toBe(parseAmount(text, { allowNegative: true, maxIntegerDigits: 40 }));
    }
    expect(toMinor('0.00')).toBe(0n);
    expect(toMinor('-0.05')).toBe(-5n);
    expect(toMinor('12')).toBe(1_200n);
    expect(toMinor('1.5')).toBe(150n);
    expect(toMinor(null)).toBeNull();
    expect(() => toMinor(`${'9'.repeat(41)}.00`)).toThrow(/integer digits/);
    expect(() => toMinor('1.005')).toThrow(/decimals/);
    expect(() => toMinor('NaN')).toThrow();
  });
});

describe('arrayLiteral', () => {
  it('writes ids, amounts and instants bare, quotes the rest, escapes only quote and backslash, null as NULL', () => {
    expect(arrayLiteral([])).toBe('{}');
    expect(arrayLiteral(['a', null, 'NULL', 'null', '', 'x,y', '{z}', 'q"', 'b\\s', ' a', 'a b'])).toBe(
      '{a,NULL,"NULL","null","","x,y","{z}","q\\"","b\\\\s"," a","a b"}',
    );
    expect(arrayLiteral(['-10.00', '2026-11-01T12:34:56.789Z', 'ev-1_x:y+z', '{"k":"v"}'])).toBe(
      '{-10.00,2026-11-01T12:34:56.789Z,ev-1_x:y+z,"{\\"k\\":\\"v\\"}"}',
    );
    // A field left undefined is NULL, as it was when JSON.stringify dropped it.
    expect(arrayLiteral([undefined as unknown as null])).toBe('{NULL}');
  });
});
