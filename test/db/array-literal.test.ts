/**
 * `arrayLiteral` (how the ledger's write sends its rows) read back by PostgreSQL: every value comes back
 * as itself, bare or quoted, as text, numeric and timestamptz arrays.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { arrayLiteral, isoText } from '../../src/db/ledger-repository.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase({ migrate: false });
});
afterAll(async () => {
  await t?.drop();
});

describe('arrayLiteral read by PostgreSQL', () => {
  it('gives back every text value, NULL only for null', async () => {
    const values = [
      'a',
      'NULL',
      'null',
      'Null',
      '',
      ' a',
      'a ',
      'x,y',
      '{z}',
      'q"',
      'b\\s',
      'a\tb',
      'é',
      '-10.00',
      'ev-1_x:y+z',
      '{"k":"v"}',
      null,
    ];
    const { rows } = await sql<{ v: string | null }>`
      SELECT v FROM unnest(${arrayLiteral(values)}::text[]) WITH ORDINALITY AS x(v, n) ORDER BY n`.execute(
      t.db,
    );
    expect(rows.map((r) => r.v)).toEqual(values);
  });

  it('gives back runs of equal values (an element reused from the previous row) and their neighbours', async () => {
    const values = [
      null,
      null,
      'NULL',
      'NULL',
      null,
      'a b',
      'a b',
      'a',
      'a',
      '',
      '',
      null,
      'q"',
      'q"',
      'x',
      null,
    ];
    const { rows } = await sql<{ v: string | null }>`
      SELECT v FROM unnest(${arrayLiteral(values)}::text[]) WITH ORDINALITY AS x(v, n) ORDER BY n`.execute(
      t.db,
    );
    expect(rows.map((r) => r.v)).toEqual(values);
  });

  it('gives back amounts and instants written bare', async () => {
    const amounts = ['0.01', '-10.00', '123456789012345678.99'];
    const instants = [new Date(Date.UTC(2026, 10, 1, 12, 34, 56, 789)), new Date(0)];
    const { rows } = await sql<{ a: string }>`
      SELECT a::text FROM unnest(${arrayLiteral(amounts)}::numeric[]) WITH ORDINALITY AS x(a, n) ORDER BY n`.execute(
      t.db,
    );
    expect(rows.map((r) => r.a)).toEqual(amounts);
    const { rows: times } = await sql<{ ms: string }>`
      SELECT (extract(epoch FROM v) * 1000)::bigint::text AS ms
      FROM unnest(${arrayLiteral(instants.map(isoText))}::timestamptz[]) WITH ORDINALITY AS x(v, n) ORDER BY n`.execute(
      t.db,
    );
    expect(times.map((r) => Number(r.ms))).toEqual(instants.map((d) => d.getTime()));
  });
});
