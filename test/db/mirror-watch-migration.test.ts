import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateToLatest } from '../../src/db/connection.ts';
import { createTestDatabase, indexesOf, migrateDownThrough, type TestDatabase } from './helpers.ts';

/**
 * A database of the day before: mirrors in every set the status-dependent partial indexes served.
 * Migrating it computes `watch` and `watch_at` for every existing row (the sets those indexes held, and
 * the instant the late-move watch ranges over), and the new partial indexes hold exactly those rows;
 * migrating back restores the old indexes, which then serve the same rows.
 */
const NAME = '20261126T1100_mirror_watch';
let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase({ migrate: false });
});
afterAll(async () => {
  await t?.drop();
});

const indexNames = () => indexesOf(t.db, 'mirrors');

describe('the mirror watch migration on a populated database', () => {
  it('derives each mirror set from the status, and goes back', async () => {
    await migrateToLatest(t.db);
    await migrateDownThrough(t.db, NAME);
    expect(await indexNames()).toContain('mirrors_unfinished_ix');

    await sql`INSERT INTO merchant_accounts (name) VALUES ('m1')`.execute(t.db);
    await sql`
      INSERT INTO mirrors (merchant_account, entity_kind, entity_id, status, status_since, completed_at)
      VALUES ('m1', 'deposit', 'd-created', 'CREATED', '2026-11-20T10:00:00Z', NULL),
             ('m1', 'deposit', 'd-released', 'EARLY_RELEASED', '2026-11-20T10:00:00Z', NULL),
             ('m1', 'deposit', 'd-done', 'COMPLETED', '2026-11-20T10:00:00Z', '2026-11-20T10:00:00Z'),
             ('m1', 'deposit', 'd-cancelled', 'CANCELLED', '2026-11-21T11:00:00.123456Z', NULL),
             ('m1', 'deposit', 'd-unseen', NULL, NULL, NULL),
             ('m1', 'cashout', 'c-hold', 'ON_HOLD', '2026-11-20T10:00:00Z', NULL),
             ('m1', 'cashout', 'c-done', 'COMPLETED', '2026-11-22T12:00:00Z', '2026-11-22T12:00:00.000001Z'),
             ('m1', 'cashout', 'c-rejected', 'REJECTED', '2026-11-22T12:00:00Z', '2026-11-21T12:00:00Z'),
             ('m1', 'refund', 'r-details', 'INCORRECT_DETAILS', '2026-11-20T10:00:00Z', NULL),
             ('m1', 'refund', 'r-done', 'COMPLETED', '2026-11-23T12:00:00Z', '2026-11-23T12:00:00Z'),
             ('m1', 'refund', 'r-cancelled', 'CANCELLED', '2026-11-23T12:00:00Z', NULL)`.execute(t.db);

    await migrateToLatest(t.db);
    const watched = await sql<{ id: string; watch: string | null; at: string | null }>`
      SELECT entity_id AS id, watch, to_char(watch_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') AS at
      FROM mirrors ORDER BY entity_id`.execute(t.db);
    expect(watched.rows).toEqual([
      { id: 'c-done', watch: 'completed', at: '2026-11-22T12:00:00.000001' },
      { id: 'c-hold', watch: 'open', at: null },
      { id: 'c-rejected', watch: null, at: null },
      { id: 'd-cancelled', watch: 'cancelled', at: '2026-11-21T11:00:00.123456' },
      { id: 'd-created', watch: 'open', at: null },
      { id: 'd-done', watch: null, at: null },
      { id: 'd-released', watch: 'open', at: null },
      { id: 'd-unseen', watch: null, at: null },
      { id: 'r-cancelled', watch: null, at: null },
      { id: 'r-details', watch: 'open', at: null },
      { id: 'r-done', watch: 'completed', at: '2026-11-23T12:00:00.000000' },
    ]);
    const names2 = await indexNames();
    expect(names2).not.toContain('mirrors_unfinished_ix');
    // The sets' indexes are on the side table now (20261127T0100_mirror_watches), on the set, not the status.
    const inFlight = await sql<{ def: string }>`
      SELECT indexdef AS def FROM pg_indexes WHERE indexname = 'mirror_watches_in_flight_ix'
        AND schemaname = current_schema()`.execute(t.db);
    expect(inFlight.rows[0]?.def).toContain('watch');
    expect(inFlight.rows[0]?.def).not.toContain('status');
    // The status moves the row between sets (the columns are generated, no writer sets them).
    await sql`UPDATE mirrors SET status = 'COMPLETED', completed_at = '2026-11-24T00:00:00Z'
      WHERE entity_id = 'c-hold'`.execute(t.db);
    const moved = await sql<{ watch: string | null; at: Date | null }>`
      SELECT watch, watch_at AS at FROM mirrors WHERE entity_id = 'c-hold'`.execute(t.db);
    expect(moved.rows).toEqual([{ watch: 'completed', at: new Date('2026-11-24T00:00:00Z') }]);

    await migrateDownThrough(t.db, NAME);
    const back = await indexNames();
    expect(back).toEqual(
      expect.arrayContaining([
        'mirrors_unfinished_ix',
        'mirrors_in_flight_ix',
        'mirrors_completed_payouts_ix',
        'mirrors_cancelled_deposits_ix',
        'mirrors_no_intent_ix',
      ]),
    );
    expect(back).not.toContain('mirrors_open_ix');
    const columns = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM information_schema.columns
      WHERE table_name = 'mirrors' AND column_name IN ('watch', 'watch_at')`.execute(t.db);
    expect(columns.rows[0]?.n).toBe(0);
    const rows = await sql<{ n: number }>`SELECT count(*)::int AS n FROM mirrors`.execute(t.db);
    expect(rows.rows[0]?.n).toBe(11);
  });
});
