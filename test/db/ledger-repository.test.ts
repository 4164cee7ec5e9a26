import { describe, expect, it } from 'vitest';
import { arrayLiteral, instantLiteral, isoText } from '../../src/db/ledger-repository.ts';
import { formatAmount, LEDGER_NUMERIC, parseAmount, parseMinorOrNull } from '../../src/domain/money.ts';
import { Rng } from '../../src/sandbox/rng.ts';

/** The sandbox's seeded generator (mulberry32), so every run sees the same stream. */
const seeded = (seed: number) => {
  const rng = new Rng(seed);
  return () => rng.next();
};

describe('isoText', () => {
  it('writes what Date#toISOString writes, for instants of every year 0-9999 and the edges', () => {
    const rnd = seeded(7);
    const edges = [
      0,
      -1,
      1,
      Date.UTC(2024, 1, 29, 23, 59, 59, 999),
      Date.UTC(2100, 1, 28, 12),
      Date.UTC(2000, 1, 29),
      Date.UTC(1969, 11, 31, 23, 59, 59, 999),
      -62_167_219_200_000,
      -62_167_219_200_001,
      253_402_300_799_999,
      253_402_300_800_000,
      8.64e15,
      -8.64e15,
    ];
    for (const ms of edges) expect(isoText(new Date(ms))).toBe(new Date(ms).toISOString());
    for (let i = 0; i < 20_000; i++) {
      const ms = Math.floor(-62_167_219_200_000 + rnd() * (253_402_300_800_000 + 62_167_219_200_000));
      expect(isoText(new Date(ms))).toBe(new Date(ms).toISOString());
    }
  });

  it('throws for an invalid date, as toISOString does', () => {
    expect(() => isoText(new Date(Number.NaN))).toThrow(RangeError);
  });
});

describe('instantLiteral', () => {
  it('writes isoText less the .000 of a whole second, and isoText otherwise', () => {
    expect(instantLiteral(new Date(Date.UTC(2026, 10, 1, 12, 34, 56)))).toBe('2026-11-01T12:34:56Z');
    expect(instantLiteral(new Date(Date.UTC(2026, 10, 1, 12, 34, 56, 7)))).toBe('2026-11-01T12:34:56.007Z');
    expect(instantLiteral(new Date(0))).toBe('1970-01-01T00:00:00Z');
    expect(instantLiteral(new Date(8.64e15))).toBe(new Date(8.64e15).toISOString());
    const rnd = seeded(17);
    for (let i = 0; i < 20_000; i++) {
      let ms = Math.floor(-62_167_219_200_000 + rnd() * (253_402_300_800_000 + 62_167_219_200_000));
      if (i % 2 === 0) ms -= ((ms % 1000) + 1000) % 1000;
      const iso = new Date(ms).toISOString();
      expect(instantLiteral(new Date(ms))).toBe(ms % 1000 === 0 ? iso.replace('.000Z', 'Z') : iso);
    }
  });
});

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
