/**
 * A transaction's opening sent with its first statement (`namingPool`, src/db/ledger/statements.ts): the same rows
 * and the same transaction as statements sent one at a time, without waiting for the opening's answer.
 */
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { namingPool } from '../../src/db/ledger/statements.ts';
import type { Database } from '../../src/db/schema.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase({ migrate: false });
  await sql`CREATE TABLE p (v int PRIMARY KEY)`.execute(t.db);
});
afterAll(async () => {
  await t?.drop();
});

interface Issued {
  text: string;
  /** Queries issued before this one whose answer had not come yet. */
  unanswered: number;
}

/** A database over one pipelined connection that notes every query the wrapper issues to `pg`. */
function spied(): { db: Kysely<Database>; issued: Issued[]; end(): Promise<void> } {
  const pool = new pg.Pool({ connectionString: t.url, max: 1, pipeline: true });
  const issued: Issued[] = [];
  // As `createDb`'s pool: the end of the test database (DROP ... WITH (FORCE)) may reach a client still
  // closing.
  pool.on('error', () => undefined);
  pool.on('connect', (client) => {
    client.on('error', () => undefined);
    const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
    let unanswered = 0;
    (client as unknown as { query: (...args: unknown[]) => Promise<unknown> }).query = (...args) => {
      const [config] = args as [string | { text: string }];
      issued.push({ text: typeof config === 'string' ? config : config.text, unanswered });
      unanswered += 1;
      const answer = query(...args);
      const answered = () => {
        unanswered -= 1;
      };
      answer.then(answered, answered);
      return answer;
    };
  });
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: namingPool(pool) }) });
  return { db, issued, end: () => db.destroy() };
}

const txid = sql<{ x: string }>`SELECT txid_current()::text AS x`;

describe('a transaction’s opening', () => {
  it('goes out with the first statement, unanswered, and opens the transaction it runs in', async () => {
    const s = spied();
    try {
      const xids = await s.db
        .transaction()
        .execute(async (trx) => [
          (await txid.execute(trx)).rows[0]!.x,
          (await sql<{ x: string }>`SELECT txid_current()::text AS x`.execute(trx)).rows[0]!.x,
        ]);
      expect(xids[0]).toBe(xids[1]);
      expect(s.issued.map((q) => [q.text, q.unanswered])).toEqual([
        ['begin', 0],
        [txid.compile(s.db).sql, 1],
        [txid.compile(s.db).sql, 0],
        ['commit', 0],
      ]);
    } finally {
      await s.end();
    }
  });

  it('keeps an isolation level, rolls back a failed transaction, and sends nothing for an empty one', async () => {
    const s = spied();
    try {
      const level = await s.db
        .transaction()
        .setIsolationLevel('serializable')
        .execute(async (trx) => {
          const { rows } = await sql<{
            l: string;
          }>`SELECT current_setting('transaction_isolation') AS l`.execute(trx);
          return rows[0]!.l;
        });
      expect(level).toBe('serializable');
      expect(s.issued[0]).toEqual({ text: 'start transaction isolation level serializable', unanswered: 0 });

      const failed = s.db.transaction().execute(async (trx) => {
        await sql`INSERT INTO p VALUES (8)`.execute(trx);
        await sql`INSERT INTO p VALUES (8)`.execute(trx);
      });
      await expect(failed).rejects.toMatchObject({ code: '23505' });
      expect((await sql<{ n: number }>`SELECT count(*)::int AS n FROM p`.execute(s.db)).rows).toEqual([
        { n: 0 },
      ]);

      s.issued.length = 0;
      await s.db.transaction().execute(async () => undefined);
      await expect(
        s.db.transaction().execute(async () => {
          throw new Error('before any statement');
        }),
      ).rejects.toThrow('before any statement');
      expect(s.issued).toEqual([]);
      // The connection is outside any transaction afterwards: a statement runs and commits on its own.
      await sql`INSERT INTO p VALUES (9)`.execute(s.db);
      expect((await sql<{ n: number }>`SELECT count(*)::int AS n FROM p`.execute(t.db)).rows).toEqual([
        { n: 1 },
      ]);
      await sql`DELETE FROM p`.execute(t.db);
    } finally {
      await s.end();
    }
  });
});
