/**
 * The ledger's read (`loadBatch`) and write statements (`writeBatch`: the claim and the rest) find every
 * row they read, update or delete by a key probe or by the `ctid` read with the row, whatever the size of
 * the tables when the server planned it: a prepared statement keeps its generic plan for as long as the
 * connection lives, so a plan made on a new, empty database that hashed a whole table (the planner's choice
 * for small tables, for `mirrors` joined to its rows by `ctid` directly) would scan that table in every
 * batch once it has grown.
 * auto_explain reports each plan to this connection as a notice; `force_generic_plan` makes the server
 * plan the statement as it will after five executions, here on tables never analyzed and almost empty.
 */
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyObservations } from '../../src/db/ledger/service.ts';
import { namingPool } from '../../src/db/ledger/statements.ts';
import type { Database } from '../../src/db/schema.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import { obs } from './fixtures.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

let t: TestDatabase;
let pool: pg.Pool;
let db: Kysely<Database>;
const notices: string[] = [];
beforeAll(async () => {
  t = await createTestDatabase();
  // One connection, so the session's settings below hold for every statement.
  pool = new pg.Pool({ connectionString: t.url, max: 1, pipeline: true });
  pool.on('connect', (client) => {
    client.on('notice', (n) => notices.push(n.message ?? ''));
  });
  db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: namingPool(pool) }) });
  await sql`LOAD 'auto_explain'`.execute(db);
  await sql`SET auto_explain.log_min_duration = 0`.execute(db);
  await sql`SET auto_explain.log_level = 'notice'`.execute(db);
  await sql`SET plan_cache_mode = force_generic_plan`.execute(db);
});
afterAll(async () => {
  await db?.destroy();
  await t?.drop();
});

describe('the write statement’s generic plan', () => {
  it('updates the mirrors by ctid and scans no table whole, planned on an empty database', async () => {
    const first = ['w1', 'w2', 'w3'].map((id, n) => obs('deposit', id, 'PENDING', n + 1));
    await withLedgerTransaction(db, (trx) => applyObservations(trx, first));
    notices.length = 0;
    // The second batch updates the three mirror rows (and their side rows: COMPLETED leaves the open set).
    const second = ['w1', 'w2', 'w3'].map((id, n) => obs('deposit', id, 'COMPLETED', n + 10));
    await withLedgerTransaction(db, (trx) => applyObservations(trx, second));
    // The read (no lock), the claim (the mirror rows' update) and the rest of the write.
    const reads = notices.filter((n) => n.includes('AS first_seen_ms'));
    const claims = notices.filter((n) => n.includes('WITH m AS'));
    const writes = notices.filter((n) => n.includes('WITH ma AS'));
    expect([reads.length, claims.length, writes.length]).toEqual([1, 1, 1]);
    expect(claims[0]).toMatch(/Update on mirrors m\b/);
    expect(claims[0]).toMatch(/Tid Scan on mirrors m\s/);
    for (const plan of [reads[0], claims[0], writes[0]]) expect(plan).not.toMatch(/Seq Scan/);
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM mirrors WHERE status = 'COMPLETED'`.execute(db);
    expect(rows[0]?.n).toBe(3);
  });
});
