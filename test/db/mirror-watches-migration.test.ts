import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateToLatest } from '../../src/db/connection.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { createTestDatabase, indexesOf, migrateDownThrough, type TestDatabase } from './helpers.ts';

/**
 * A populated database of the day before: mirrors in every set, their `watch` and `watch_at` generated and
 * indexed on `mirrors`. Migrating it fills `mirror_watches` with one row per mirror with a set, equal to
 * the generated columns (and the currency and test flag), drops the four partial indexes of `mirrors` and
 * sets its fillfactor; `payrecon db verify` holds; migrating back restores the indexes.
 */
const NAME = '20261127T0100_mirror_watches';
let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase({ migrate: false });
});
afterAll(async () => {
  await t?.drop();
});

const SETS = [
  'mirrors_open_ix',
  'mirrors_in_flight_ix',
  'mirrors_completed_payouts_ix',
  'mirrors_cancelled_deposits_ix',
];

const indexNames = () => indexesOf(t.db, 'mirrors');

describe('the mirror watches migration on a populated database', () => {
  it('backfills the side table from the generated sets, drops their indexes off mirrors, and goes back', async () => {
    await migrateToLatest(t.db);
    await migrateDownThrough(t.db, NAME);
    expect(await indexNames()).toEqual(expect.arrayContaining(SETS));

    await sql`INSERT INTO merchant_accounts (name) VALUES ('m1'), ('m2')`.execute(t.db);
    await sql`
      INSERT INTO mirrors (merchant_account, entity_kind, entity_id, status, status_since, completed_at, currency, test)
      VALUES ('m1', 'deposit', 'd-created', 'CREATED', '2026-11-20T10:00:00Z', NULL, 'BRL', true),
             ('m1', 'deposit', 'd-done', 'COMPLETED', '2026-11-20T10:00:00Z', '2026-11-20T10:00:00Z', 'BRL', false),
             ('m1', 'deposit', 'd-cancelled', 'CANCELLED', '2026-11-21T11:00:00.123456Z', NULL, 'BRL', false),
             ('m1', 'deposit', 'd-unseen', NULL, NULL, NULL, NULL, false),
             ('m2', 'cashout', 'c-hold', 'ON_HOLD', '2026-11-20T10:00:00Z', NULL, 'USD', false),
             ('m2', 'cashout', 'c-done', 'COMPLETED', '2026-11-22T12:00:00Z', '2026-11-22T12:00:00.000001Z', 'BRL', false),
             ('m1', 'cashout', 'c-rejected', 'REJECTED', '2026-11-22T12:00:00Z', '2026-11-21T12:00:00Z', 'BRL', false),
             ('m1', 'refund', 'r-details', 'INCORRECT_DETAILS', '2026-11-20T10:00:00Z', NULL, 'BRL', true),
             ('m1', 'refund', 'r-done', 'COMPLETED', '2026-11-23T12:00:00Z', '2026-11-23T12:00:00Z', NULL, false)`.execute(
      t.db,
    );

    await migrateToLatest(t.db);
    const side = await sql<{ row: string }>`
      SELECT concat_ws(' ', merchant_account, entity_kind, entity_id, watch,
        to_char(watch_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), currency, test) AS row
      FROM mirror_watches ORDER BY entity_id`.execute(t.db);
    expect(side.rows.map((r) => r.row)).toEqual([
      'm2 cashout c-done completed 2026-11-22T12:00:00.000001 BRL f',
      'm2 cashout c-hold open USD f',
      'm1 deposit d-cancelled cancelled 2026-11-21T11:00:00.123456 BRL f',
      'm1 deposit d-created open BRL t',
      'm1 refund r-details open BRL t',
      'm1 refund r-done completed 2026-11-23T12:00:00.000000 f',
    ]);
    // Equal to the generated columns, row for row.
    const differ = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM (SELECT entity_id, entity_kind, merchant_account, watch, watch_at, currency, test
        FROM mirrors WHERE watch IS NOT NULL) m
      FULL JOIN mirror_watches w USING (entity_id, entity_kind, merchant_account)
      WHERE (m.watch, m.watch_at, m.currency, m.test) IS DISTINCT FROM (w.watch, w.watch_at, w.currency, w.test)`.execute(
      t.db,
    );
    expect(differ.rows[0]?.n).toBe(0);
    const names2 = await indexNames();
    for (const name of SETS) expect(names2).not.toContain(name);
    const options = await sql<{ options: string[] | null }>`
      SELECT reloptions AS options FROM pg_class WHERE oid = 'mirrors'::regclass`.execute(t.db);
    expect(options.rows[0]?.options).toEqual(['fillfactor=50']);
    // The verification's check of the side table holds on the migrated rows (the ledger checks find the
    // hand-written mirrors' missing entries: only the side table's check is looked at).
    const { failures } = await verifyLedger(t.db);
    expect(failures.filter((f) => f.startsWith('mirror watch'))).toEqual([]);

    await migrateDownThrough(t.db, NAME);
    expect(await indexNames()).toEqual(expect.arrayContaining(SETS));
    const gone = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM pg_class WHERE relname = 'mirror_watches'
        AND relnamespace = current_schema()::regnamespace`.execute(t.db);
    expect(gone.rows[0]?.n).toBe(0);
    const rows = await sql<{ n: number }>`SELECT count(*)::int AS n FROM mirrors`.execute(t.db);
    expect(rows.rows[0]?.n).toBe(9);
  });
});
