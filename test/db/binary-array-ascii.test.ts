/**
 * `binaryColumns`' ASCII path for text and jsonb columns (values written into the buffer directly, short
 * ones character by character, long ones by one native write): a column whose non-ASCII value comes
 * after ASCII ones, on either side of the length at which the write changes, is read back by PostgreSQL
 * exactly as sent, as are the columns written after it.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binaryColumns } from '../../src/db/ledger/binary-array.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase({ migrate: false });
});
afterAll(async () => {
  await t?.drop();
});

interface Row {
  a: string | null;
  b: string | null;
}

/** Columns a (text) and b (`type`) sent as binary arrays and read back as text, in row order. */
async function roundTrip(rows: readonly Row[], type: 'text' | 'jsonb'): Promise<Row[]> {
  const [a, b] = binaryColumns(rows, [
    ['text', (r) => r.a],
    [type, (r) => r.b],
  ]);
  const { rows: back } = await sql<Row>`
    SELECT a, b::text AS b FROM unnest(${a}::text[], ${b}::${sql.raw(type)}[]) WITH ORDINALITY AS x(a, b, n)
    ORDER BY n`.execute(t.db);
  return back;
}

const ascii = (n: number, c = 'x') => c.repeat(n);

describe('binary text and jsonb columns, ASCII first', () => {
  for (const [name, late] of [
    ['a short value ending in non-ASCII', `${ascii(62)}é`],
    ['a value of 63 characters whose last is non-ASCII', `${ascii(62)}✓`],
    ['a value of 64 characters whose last is non-ASCII', `${ascii(63)}é`],
    ['a long value with a character outside the BMP', `${ascii(500)}𝄞${ascii(10)}`],
    ['a long value with a lone surrogate', `${ascii(100)}\ud800`],
  ] as const) {
    it(`text: ${name} after ASCII values of every length`, async () => {
      const values = [ascii(1), null, ascii(63), ascii(64), ascii(65), ascii(3000), late, ascii(2), null];
      const rows = values.map((b, i) => ({ a: `row ${i}`, b }));
      const back = await roundTrip(rows, 'text');
      const expected = late.includes('\ud800') ? late.replace('\ud800', '\ufffd') : late;
      expect(back.map((r) => r.a)).toEqual(rows.map((r) => r.a));
      expect(back.map((r) => r.b)).toEqual(values.map((v) => (v === late ? expected : v)));
    });
  }

  it('jsonb: a long non-ASCII document after short and long ASCII ones', async () => {
    const docs = [
      '{"k":1}',
      JSON.stringify({ long: ascii(80) }),
      null,
      JSON.stringify({ long: `${ascii(80)}é` }),
      JSON.stringify({ s: 'é' }),
    ];
    const rows = docs.map((b, i) => ({ a: `row ${i}`, b }));
    const back = await roundTrip(rows, 'jsonb');
    expect(back.map((r) => r.a)).toEqual(rows.map((r) => r.a));
    expect(back.map((r) => (r.b === null ? null : JSON.parse(r.b)))).toEqual(
      docs.map((d) => (d === null ? null : JSON.parse(d))),
    );
  });

  it('ASCII only: every length, NULLs between, trailing NULLs of a later column left out', async () => {
    const values = [null, '', ascii(1), ascii(63), ascii(64), ascii(127, 'y'), ascii(128, 'z'), null];
    const rows = values.map((b, i) => ({ a: `row ${i}`, b }));
    const back = await roundTrip(rows, 'text');
    expect(back.map((r) => r.b)).toEqual(values);
    expect(back.map((r) => r.a)).toEqual(rows.map((r) => r.a));
  });
});
