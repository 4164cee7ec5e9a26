import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateToLatest } from '../../src/db/connection.ts';
import { createTestDatabase, migrateDownThrough, type TestDatabase } from './helpers.ts';

/**
 * A database of the day before: mirrors with their next poll in `mirrors.next_poll_at`. Migrating it
 * carries every scheduled entity into `poll_schedule` at the same instant (microseconds included) and
 * leaves the unscheduled ones unscheduled; migrating back restores the column.
 */
const NAME = '20261126T06251_poll_schedule';
let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase({ migrate: false });
});
afterAll(async () => {
  await t?.drop();
});

describe('the poll schedule migration on a populated database', () => {
  it('moves each next poll to poll_schedule, and back', async () => {
    await migrateToLatest(t.db);
    await migrateDownThrough(t.db, NAME);
    const columns = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM information_schema.columns
      WHERE table_name = 'mirrors' AND column_name = 'next_poll_at'`.execute(t.db);
    expect(columns.rows[0]?.n).toBe(1);

    await sql`INSERT INTO merchant_accounts (name) VALUES ('m1')`.execute(t.db);
    await sql`
      INSERT INTO mirrors (merchant_account, entity_kind, entity_id, status, next_poll_at, poll_attempts)
      VALUES ('m1', 'deposit', 'd-due', 'PENDING', '2026-11-25T10:00:00.123456Z', 3),
             ('m1', 'cashout', 'c-later', 'ON_HOLD', '2026-12-01T00:00:00.000001Z', 0),
             ('m1', 'deposit', 'd-done', 'COMPLETED', NULL, 5)`.execute(t.db);

    await migrateToLatest(t.db);
    const schedule = await sql<{ id: string; at: string }>`
      SELECT entity_id AS id, to_char(next_poll_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') AS at
      FROM poll_schedule ORDER BY entity_id`.execute(t.db);
    expect(schedule.rows).toEqual([
      { id: 'c-later', at: '2026-12-01T00:00:00.000001' },
      { id: 'd-due', at: '2026-11-25T10:00:00.123456' },
    ]);
    const mirrors = await sql<{ id: string; attempts: number }>`
      SELECT entity_id AS id, poll_attempts AS attempts FROM mirrors ORDER BY entity_id`.execute(t.db);
    expect(mirrors.rows).toEqual([
      { id: 'c-later', attempts: 0 },
      { id: 'd-done', attempts: 5 },
      { id: 'd-due', attempts: 3 },
    ]);
    const gone = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM information_schema.columns
      WHERE table_name = 'mirrors' AND column_name = 'next_poll_at'`.execute(t.db);
    expect(gone.rows[0]?.n).toBe(0);

    await migrateDownThrough(t.db, NAME);
    const back = await sql<{ id: string; at: string | null }>`
      SELECT entity_id AS id, to_char(next_poll_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') AS at
      FROM mirrors ORDER BY entity_id`.execute(t.db);
    expect(back.rows).toEqual([
      { id: 'c-later', at: '2026-12-01T00:00:00.000001' },
      { id: 'd-done', at: null },
      { id: 'd-due', at: '2026-11-25T10:00:00.123456' },
    ]);
  });
});
