/**
 * Statements marked by `prepared` (src/db/ledger/statements.ts) go out as named prepared statements: prepared
 * once per connection (`pg_prepared_statements`), reused, with the same results as unnamed text; a
 * changed text gets another name; unmarked statements stay unnamed.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadBatch } from '../../src/db/ledger/read.ts';
import {
  ARRAY_ROWS_MARK,
  PREPARED_MARK,
  prepared,
  preparedArrays,
  statementName,
} from '../../src/db/ledger/statements.ts';
import type { Db } from '../../src/db/schema.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});

interface Prepared {
  name: string;
  statement: string;
  runs: number;
}

/** The connection's protocol-level prepared statements and how often each ran. */
async function preparedOn(db: Db): Promise<Prepared[]> {
  const { rows } = await sql<Prepared>`
    SELECT name, statement, (generic_plans + custom_plans)::int AS runs FROM pg_prepared_statements
    WHERE NOT from_sql ORDER BY name`.execute(db);
  return rows;
}

describe('named prepared statements', () => {
  it('prepares a marked statement once per connection and gives the same rows as unnamed text', async () => {
    await t.db.connection().execute(async (c) => {
      const query = (n: number) =>
        sql<{
          v: string;
          n: number;
        }>`SELECT v, ${n}::int AS n FROM unnest(${['a', 'b', null]}::text[]) AS x(v)`;
      const text = prepared(query(1)).compile(c).sql;
      expect(text.startsWith(PREPARED_MARK)).toBe(true);
      for (let n = 1; n <= 7; n++) {
        const named = await prepared(query(n)).execute(c);
        const plain = await query(n).execute(c);
        expect(named.rows).toEqual(plain.rows);
        expect(named.rows).toEqual([
          { v: 'a', n },
          { v: 'b', n },
          { v: null, n },
        ]);
      }
      const mine = (await preparedOn(c)).filter((p) => p.statement === text);
      expect(mine).toEqual([{ name: statementName(text), statement: text, runs: 7 }]);
      // Unmarked text is never prepared.
      const plainText = query(1).compile(c).sql;
      expect((await preparedOn(c)).filter((p) => p.statement === plainText)).toEqual([]);
    });
  });

  it('gives the rows of a statement marked by preparedArrays as arrays in select-list order, prepared once', async () => {
    await t.db.connection().execute(async (c) => {
      const query = (n: number) =>
        sql`SELECT v, ${n}::int AS n, v IS NULL AS missing FROM unnest(${['a', 'b', null]}::text[]) AS x(v)`;
      const text = preparedArrays(query(1)).compile(c).sql;
      expect(text.startsWith(ARRAY_ROWS_MARK)).toBe(true);
      expect(statementName(text)).not.toBeNull();
      for (let n = 1; n <= 3; n++) {
        const named = await preparedArrays<[string | null, number, boolean]>(query(n)).execute(c);
        expect(named.rows).toEqual([
          ['a', n, false],
          ['b', n, false],
          [null, n, true],
        ]);
        // The same text marked by `prepared` still gives objects.
        expect((await prepared(query(n)).execute(c)).rows).toEqual([
          { v: 'a', n, missing: false },
          { v: 'b', n, missing: false },
          { v: null, n, missing: true },
        ]);
      }
      const mine = (await preparedOn(c)).filter((p) => p.statement === text);
      expect(mine).toEqual([{ name: statementName(text), statement: text, runs: 3 }]);
    });
  });

  it('gives a changed text another name, each prepared once', async () => {
    await t.db.connection().execute(async (c) => {
      const one = prepared(sql<{ x: number }>`SELECT ${1}::int + 1 AS x`);
      const two = prepared(sql<{ x: number }>`SELECT ${1}::int + 2 AS x`);
      const [a, b] = [one.compile(c).sql, two.compile(c).sql];
      expect(statementName(a)).not.toBe(statementName(b));
      expect(statementName(a)).toBe(statementName(`${a}`));
      expect(statementName(a.slice(PREPARED_MARK.length))).toBeNull();
      for (let i = 0; i < 3; i++) {
        expect((await one.execute(c)).rows).toEqual([{ x: 2 }]);
        expect((await two.execute(c)).rows).toEqual([{ x: 3 }]);
      }
      const mine = (await preparedOn(c)).filter((p) => p.statement === a || p.statement === b);
      expect(mine.map((p) => [p.name, p.runs]).sort()).toEqual(
        [
          [statementName(a), 3],
          [statementName(b), 3],
        ].sort(),
      );
    });
  });

  it('runs the ledger read as one prepared statement per connection, whatever the batch', async () => {
    await t.db.connection().execute(async (c) => {
      for (let i = 0; i < 6; i++) {
        const refs = Array.from({ length: i + 1 }, (_, k) => ({
          account: 'm1',
          kind: 'deposit' as const,
          entityId: `d${i}-${k}`,
        }));
        const state = await c.transaction().execute((trx) => loadBatch(trx, refs));
        expect(state.mirrors.size).toBe(0);
      }
      const reads = (await preparedOn(c)).filter((p) => p.statement.includes('AS first_seen_ms'));
      expect(reads).toHaveLength(1);
      expect(reads[0]!.runs).toBe(6);
      expect(reads[0]!.name).toBe(statementName(reads[0]!.statement));
    });
  });
});
