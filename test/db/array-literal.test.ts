/**
 * `arrayLiteral` (how the ledger's reads send their keys) and `rowsSource` (the write's rows, binary
 * arrays) read back by PostgreSQL: every value comes back as itself, bare or quoted, as text, numeric and
 * timestamptz arrays.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { arrayLiteral } from '../../bench/array-literal.ts';
import { type Column, rowsSource } from '../../src/db/ledger/keys.ts';
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
      FROM unnest(${arrayLiteral(instants.map((d) => d.toISOString()))}::timestamptz[]) WITH ORDINALITY AS x(v, n) ORDER BY n`.execute(
      t.db,
    );
    expect(times.map((r) => Number(r.ms))).toEqual(instants.map((d) => d.getTime()));
  });
});

describe('rowsSource read by PostgreSQL', () => {
  interface Row {
    /** First column: sent whole, it carries the row count (a new mirror's `version` is NULL on every row). */
    lead: string | null;
    id: string | null;
    early: string | null;
    none: string | null;
    at: Date | null;
    n: number | null;
  }
  const columns: Record<string, Column<Row>> = {
    lead: ['text', (r) => r.lead],
    id: ['text', (r) => r.id],
    early: ['text', (r) => r.early],
    none: ['text', (r) => r.none],
    at: ['timestamptz', (r) => r.at],
    n: ['integer', (r) => r.n],
  };
  const read = async (rows: Row[]) => {
    const { rows: out } = await sql<{
      lead: string | null;
      id: string;
      early: string | null;
      none: string | null;
      ms: string | null;
      n: number | null;
    }>`
      SELECT v.lead, v.id, v.early, v.none, (extract(epoch FROM v.at) * 1000)::bigint::text AS ms, v.n
      FROM ${rowsSource(rows, columns)}`.execute(t.db);
    return out.map((r) => ({
      lead: r.lead,
      id: r.id,
      early: r.early,
      none: r.none,
      at: r.ms === null ? null : new Date(Number(r.ms)),
      n: r.n,
    }));
  };

  it('gives back every row whole when columns end in NULLs (sent without them), are all NULL, or a row is', async () => {
    const at = new Date(Date.UTC(2026, 10, 1, 12));
    const rows: Row[] = [
      { lead: 'l', id: 'a', early: 'x', none: null, at, n: 1 },
      { lead: null, id: 'b', early: null, none: null, at: null, n: 2 },
      { lead: null, id: 'c', early: 'y', none: null, at, n: null },
      { lead: null, id: 'd', early: null, none: null, at: null, n: null },
      { lead: null, id: null, early: null, none: null, at: null, n: null },
    ];
    expect(await read(rows)).toEqual(rows);
    const single: Row[] = [{ lead: null, id: 'only', early: null, none: null, at: null, n: null }];
    expect(await read(single)).toEqual(single);
    expect(await read([])).toEqual([]);
  });
});
