/**
 * `binaryColumns` / `binaryArray` (how the ledger's write sends its rows) read back by PostgreSQL: every
 * value of every element type comes back as the same text as the value sent as text (an array literal
 * of its text form), NULL only for null.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { arrayLiteral } from '../../bench/array-literal.ts';
import {
  binaryArray,
  binaryColumns,
  type ElementType,
  type ElementValues,
} from '../../src/db/ledger/binary-array.ts';
import { formatAmount } from '../../src/domain/money.ts';
import { Rng } from '../../src/sandbox/rng.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase({ migrate: false });
});
afterAll(async () => {
  await t?.drop();
});

/** Each element as the server writes it (`::text`), sent as a binary array and as an array literal. */
async function both<K extends ElementType>(
  type: K,
  values: readonly (ElementValues[K] | null)[],
  asText: (v: ElementValues[K]) => string,
): Promise<{ binary: (string | null)[]; text: (string | null)[] }> {
  const literal = arrayLiteral(values.map((v) => (v === null ? null : asText(v))));
  const { rows: b } = await sql<{ v: string | null }>`
    SELECT v::text AS v FROM unnest(${binaryArray(type, values)}::${sql.raw(type)}[]) WITH ORDINALITY AS x(v, n)
    ORDER BY n`.execute(t.db);
  const { rows: l } = await sql<{ v: string | null }>`
    SELECT v::text AS v FROM unnest(${literal}::${sql.raw(type)}[]) WITH ORDINALITY AS x(v, n) ORDER BY n`.execute(
    t.db,
  );
  return { binary: b.map((r) => r.v), text: l.map((r) => r.v) };
}

/** 0001-01-01T00:00:00Z and 10000-01-01T00:00:00Z (`Date.UTC` reads years below 100 as 19xx). */
const YEAR_1 = -62_135_596_800_000;
const YEAR_10000 = 253_402_300_800_000;

const seeded = (seed: number) => {
  const rng = new Rng(seed);
  return () => rng.next();
};

describe('binary arrays read by PostgreSQL', () => {
  it('text: NULLs, empty strings, quotes, backslashes, braces, the word NULL, non-ASCII, long text', async () => {
    const values = [
      'a',
      null,
      '',
      'NULL',
      'null',
      ' a ',
      'x,y',
      '{z}',
      'q"',
      'b\\s',
      'a\tb\nc',
      'é',
      'naïve café ✓ 𝄞 日本',
      `${'é'.repeat(30)}x`,
      'x'.repeat(48),
      'y'.repeat(49),
      `${'z'.repeat(47)}é`,
      'w'.repeat(5000),
      null,
    ];
    const { binary, text } = await both('text', values, (v) => v);
    expect(binary).toEqual(values);
    expect(binary).toEqual(text);
  });

  it('text, every value ASCII (written as one string): lengths whose bytes reach 0x80, NULLs between and after', async () => {
    const values = [
      null,
      'a',
      '',
      'NULL',
      'q"\\',
      'x'.repeat(127),
      'y'.repeat(128),
      'z'.repeat(200),
      null,
      'w'.repeat(1023),
      'v'.repeat(1024),
      'u'.repeat(33_000),
      'ctl \u0001\u007f',
      null,
    ];
    const { binary, text } = await both('text', values, (v) => v);
    expect(binary).toEqual(values);
    expect(binary).toEqual(text);
    const [trimmed] = binaryColumns(values, [
      ['text', () => 'lead'],
      ['text', (v) => v],
    ]).slice(1);
    const { rows } = await sql<{ v: string | null }>`
      SELECT v FROM unnest(${trimmed}::text[]) WITH ORDINALITY AS x(v, n) ORDER BY n`.execute(t.db);
    expect(rows.map((r) => r.v)).toEqual(values.slice(0, -1));
  });

  it('numeric: zero, cents, negative amounts, 18 integer digits, beyond 2^53 minor units', async () => {
    const rnd = seeded(21);
    const values: (bigint | null)[] = [
      0n,
      1n,
      -1n,
      5n,
      10n,
      99n,
      100n,
      -100n,
      10_000n,
      1_000_000n,
      1_000_001n,
      123_456_789n,
      100_000_000_00n,
      2n ** 53n - 1n,
      2n ** 53n,
      2n ** 53n + 1n,
      -(2n ** 53n) - 7n,
      90_071_992_547_409n,
      90_071_992_547_410n,
      99_999_999_999_999_999_999n,
      -99_999_999_999_999_999_999n,
      100_000_000_000_000_000_000n,
      null,
    ];
    for (let i = 0; i < 200; i++) {
      const digits = 1 + Math.floor(rnd() * 20);
      let v = 0n;
      for (let d = 0; d < digits; d++) v = v * 10n + BigInt(Math.floor(rnd() * 10));
      values.push(rnd() < 0.3 ? -v : v);
    }
    const { binary, text } = await both('numeric', values, formatAmount);
    expect(binary).toEqual(values.map((v) => (v === null ? null : formatAmount(v))));
    expect(binary).toEqual(text);
  });

  it('timestamptz: the epochs, milliseconds, years 1 to 9999, random instants', async () => {
    const rnd = seeded(4);
    const values: (Date | null)[] = [
      new Date(0),
      new Date(-1),
      new Date(1),
      new Date(Date.UTC(2000, 0, 1)),
      new Date(Date.UTC(2000, 0, 1) - 1),
      new Date(Date.UTC(1999, 11, 31, 23, 59, 59, 999)),
      new Date(Date.UTC(2026, 10, 26, 12, 34, 56, 789)),
      new Date(Date.UTC(2026, 10, 26, 12, 34, 56)),
      new Date(YEAR_1),
      new Date(YEAR_1 + 1),
      new Date(YEAR_10000 - 1),
      new Date(Date.UTC(2255, 5, 5)),
      new Date(Date.UTC(2300, 0, 1, 0, 0, 0, 1)),
      null,
    ];
    for (let i = 0; i < 200; i++) {
      values.push(new Date(YEAR_1 + Math.floor(rnd() * (YEAR_10000 - YEAR_1))));
    }
    // The session's time zone must not change what is compared: instants as epoch milliseconds.
    const { rows: b } = await sql<{ ms: string | null }>`
      SELECT (extract(epoch FROM v) * 1000)::bigint::text AS ms
      FROM unnest(${binaryArray('timestamptz', values)}::timestamptz[]) WITH ORDINALITY AS x(v, n) ORDER BY n`.execute(
      t.db,
    );
    expect(b.map((r) => (r.ms === null ? null : Number(r.ms)))).toEqual(
      values.map((d) => d?.getTime() ?? null),
    );
    const { binary, text } = await both('timestamptz', values, (d) => d.toISOString());
    expect(binary).toEqual(text);
  });

  it('refuses an invalid instant', () => {
    expect(() => binaryArray('timestamptz', [new Date(Number.NaN)])).toThrow(RangeError);
  });

  it('boolean, smallint, integer: their edges', async () => {
    const bools = [true, false, null, true];
    expect(await both('boolean', bools, (b) => (b ? 't' : 'f'))).toEqual({
      binary: ['true', 'false', null, 'true'],
      text: ['true', 'false', null, 'true'],
    });
    const smalls = [0, 1, -1, 32_767, -32_768, null];
    const s = await both('smallint', smalls, String);
    expect(s.binary).toEqual(smalls.map((v) => (v === null ? null : String(v))));
    expect(s.binary).toEqual(s.text);
    const ints = [0, 1, -1, 2_147_483_647, -2_147_483_648, 65_536, null];
    const i = await both('integer', ints, String);
    expect(i.binary).toEqual(ints.map((v) => (v === null ? null : String(v))));
    expect(i.binary).toEqual(i.text);
    expect(() => binaryArray('smallint', [32_768])).toThrow(RangeError);
    expect(() => binaryArray('integer', [1.5])).toThrow(RangeError);
  });

  it('jsonb, every value ASCII (written as one string)', async () => {
    const values = [
      null,
      '{"a":"x\\"y"}',
      '[1,2,{"b":null}]',
      JSON.stringify({ long: 'z'.repeat(300) }),
      null,
    ];
    const { binary, text } = await both('jsonb', values, (v) => v);
    expect(binary).toEqual(text);
    expect(binary.map((v) => (v === null ? null : JSON.parse(v)))).toEqual(
      values.map((v) => (v === null ? null : JSON.parse(v))),
    );
  });

  it('jsonb: objects with quotes, backslashes, non-ASCII, nesting', async () => {
    const values = [
      JSON.stringify({ a: 1, b: 'x"y', c: 'back\\slash', d: 'é ✓ 𝄞', e: [1, { f: null }], g: true }),
      null,
      '{}',
      '[]',
      JSON.stringify({ long: 'z'.repeat(3000) }),
    ];
    const { binary, text } = await both('jsonb', values, (v) => v);
    expect(binary).toEqual(text);
    expect(binary[0]).toContain('x\\"y');
  });

  it('the empty array', async () => {
    const { rows } = await sql<{ n: number; d: string | null }>`
      SELECT cardinality(${binaryArray('text', [])}::text[]) AS n, array_dims(${binaryArray('numeric', [])}::numeric[]) AS d`.execute(
      t.db,
    );
    expect(rows).toEqual([{ n: 0, d: null }]);
  });

  it('an array of another element type than the parameter is refused by the server', async () => {
    await expect(sql`SELECT unnest(${binaryArray('numeric', [1n])}::text[])`.execute(t.db)).rejects.toThrow(
      /element type/,
    );
  });
});

describe('binaryColumns', () => {
  interface Row {
    id: string;
    amount: bigint | null;
    tail: string | null;
  }
  it('keeps the first column whole and leaves out the trailing NULLs of the others', async () => {
    const rows: Row[] = [
      { id: 'a', amount: 100n, tail: null },
      { id: 'b', amount: null, tail: 'x' },
      { id: 'c', amount: null, tail: null },
    ];
    const [ids, amounts, tails] = binaryColumns(rows, [
      ['text', (r) => r.id],
      ['numeric', (r) => r.amount],
      ['text', (r) => r.tail],
    ]);
    const { rows: dims } = await sql<{ i: number; a: number; t: number }>`
      SELECT cardinality(${ids}::text[]) AS i, cardinality(${amounts}::numeric[]) AS a,
        cardinality(${tails}::text[]) AS t`.execute(t.db);
    expect(dims).toEqual([{ i: 3, a: 1, t: 2 }]);
    const [none] = binaryColumns(rows, [['text', () => null]]);
    const [trimmed] = binaryColumns(rows, [
      ['text', (r) => r.id],
      ['text', () => null],
    ]).slice(1);
    const { rows: out } = await sql<{ n: number; m: number }>`
      SELECT cardinality(${none}::text[]) AS n, cardinality(${trimmed}::text[]) AS m`.execute(t.db);
    expect(out).toEqual([{ n: 3, m: 0 }]);
  });
});
