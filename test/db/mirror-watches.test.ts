/**
 * `mirror_watches` holds one row per mirror whose set (`watch`) is not null, equal to the mirror's generated
 * `watch` and `watch_at` and its currency and test flag: the ledger's write statement keeps it through every
 * status move (into a set, between sets, out of them, a new entity's first row), and `payrecon db verify`
 * (full and incremental) names a missing, extra or wrong side row.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyObservations } from '../../src/db/ledger/service.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import type { Observation } from '../../src/domain/observation.ts';
import { obs } from './fixtures.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});

const DAY = 86_400_000;
const minute = (m: number) => new Date(Date.UTC(2026, 10, 1) + m * 60_000);
const apply = (o: Observation[]) => withLedgerTransaction(t.db, (trx) => applyObservations(trx, o));

/** The side row of an entity (null: none), and the mirror's generated columns. */
async function watchOf(id: string) {
  const side = await sql<{ watch: string; watch_at: Date | null; currency: string | null; test: boolean }>`
    SELECT watch, watch_at, currency, test FROM mirror_watches WHERE entity_id = ${id}`.execute(t.db);
  const mirror = await sql<{ watch: string | null; watch_at: Date | null }>`
    SELECT watch, watch_at FROM mirrors WHERE entity_id = ${id}`.execute(t.db);
  return { side: side.rows[0] ?? null, mirror: mirror.rows[0] ?? null };
}

async function holds() {
  expect((await verifyLedger(t.db)).failures).toEqual([]);
  expect((await verifyLedger(t.db, { since: new Date(Date.now() - DAY) })).failures).toEqual([]);
}

describe('mirror watches', () => {
  it('follow a cashout completed and then rejected, and a cancelled deposit completed late', async () => {
    // A new entity read PENDING: its mirror row is inserted with the side row of the open set.
    await apply([obs('cashout', 'c1', 'PENDING', 0, { currency: 'BRL', amount: 5_000n })]);
    expect(await watchOf('c1')).toEqual({
      side: { watch: 'open', watch_at: null, currency: 'BRL', test: false },
      mirror: { watch: 'open', watch_at: null },
    });
    // Inside the open set: the side row is left as it was.
    const before = await sql<{
      xmin: string;
    }>`SELECT xmin::text FROM mirror_watches WHERE entity_id = 'c1'`.execute(t.db);
    await apply([obs('cashout', 'c1', 'DELIVERED', 5, { currency: 'BRL', amount: 5_000n })]);
    const after = await sql<{
      xmin: string;
    }>`SELECT xmin::text FROM mirror_watches WHERE entity_id = 'c1'`.execute(t.db);
    expect(after.rows).toEqual(before.rows);
    // COMPLETED: the late-rejection watch, from its completion.
    await apply([obs('cashout', 'c1', 'COMPLETED', 10, { currency: 'BRL', amount: 5_000n })]);
    expect(await watchOf('c1')).toEqual({
      side: { watch: 'completed', watch_at: minute(10), currency: 'BRL', test: false },
      mirror: { watch: 'completed', watch_at: minute(10) },
    });
    await holds();
    // REJECTED late: out of every set, the side row goes.
    await apply([obs('cashout', 'c1', 'REJECTED', 60, { currency: 'BRL', amount: 5_000n })]);
    expect(await watchOf('c1')).toEqual({ side: null, mirror: { watch: null, watch_at: null } });
    await holds();

    // A deposit: open, then CANCELLED (the late-completion watch, from its status_since), then COMPLETED late.
    await apply([obs('deposit', 'd1', 'PENDING', 0)]);
    expect((await watchOf('d1')).side).toEqual({
      watch: 'open',
      watch_at: null,
      currency: 'BRL',
      test: false,
    });
    await apply([obs('deposit', 'd1', 'CANCELLED', 20)]);
    expect(await watchOf('d1')).toEqual({
      side: { watch: 'cancelled', watch_at: minute(20), currency: 'BRL', test: false },
      mirror: { watch: 'cancelled', watch_at: minute(20) },
    });
    await holds();
    await apply([obs('deposit', 'd1', 'COMPLETED', 600)]);
    expect(await watchOf('d1')).toEqual({ side: null, mirror: { watch: null, watch_at: null } });

    // A refund first read COMPLETED (a new row straight into the completed set), and a test deposit's set.
    await apply([
      obs('refund', 'r1', 'COMPLETED', 30, { parentDepositId: 'd1' }),
      obs('deposit', 'd2', 'CREATED', 1, { test: true }),
    ]);
    expect((await watchOf('r1')).side).toEqual({
      watch: 'completed',
      watch_at: minute(30),
      currency: 'BRL',
      test: false,
    });
    expect((await watchOf('d2')).side).toEqual({
      watch: 'open',
      watch_at: null,
      currency: 'BRL',
      test: true,
    });
    const counts = await sql<{ sides: number; watched: number }>`
      SELECT (SELECT count(*)::int FROM mirror_watches) AS sides,
        (SELECT count(*)::int FROM mirrors WHERE watch IS NOT NULL) AS watched`.execute(t.db);
    expect(counts.rows[0]!.sides).toBe(counts.rows[0]!.watched);
    await holds();
  });

  it('a side row missing, extra or wrong is named by the full and the incremental verification', async () => {
    await apply([
      obs('cashout', 'v1', 'PENDING', 0, { currency: 'BRL', amount: 100n }),
      obs('deposit', 'v2', 'CANCELLED', 0),
      obs('deposit', 'v3', 'COMPLETED', 0),
      obs('refund', 'v4', 'COMPLETED', 0),
    ]);
    await holds();
    await sql`DELETE FROM mirror_watches WHERE entity_id = 'v1'`.execute(t.db);
    await sql`UPDATE mirror_watches SET watch_at = watch_at + interval '1 second' WHERE entity_id = 'v2'`.execute(
      t.db,
    );
    await sql`INSERT INTO mirror_watches (entity_id, entity_kind, merchant_account, watch, watch_at, currency, test)
      VALUES ('v3', 'deposit', 'acme', 'cancelled', '2026-11-01T00:00:00Z', 'BRL', false)`.execute(t.db);
    await sql`UPDATE mirror_watches SET test = true WHERE entity_id = 'v4'`.execute(t.db);
    const name = 'mirror watch differs from its mirror';
    const want = [
      `${name}: cashout acme/v1: side row missing (mirror open BRL)`,
      `${name}: deposit acme/v2: side row cancelled at 2026-11-01T00:00:01.000Z BRL, mirror cancelled at 2026-11-01T00:00:00.000Z BRL`,
      `${name}: deposit acme/v3: side row cancelled at 2026-11-01T00:00:00.000Z BRL not wanted (mirror has no watch)`,
      `${name}: refund acme/v4: side row completed at 2026-11-01T00:00:00.000Z BRL test, mirror completed at 2026-11-01T00:00:00.000Z BRL`,
    ];
    const full = (await verifyLedger(t.db)).failures.filter((f) => f.startsWith(name));
    expect(full).toEqual(want);
    const recent = (await verifyLedger(t.db, { since: new Date(Date.now() - DAY) })).failures.filter((f) =>
      f.startsWith(name),
    );
    expect(recent).toEqual(want);
    // A side row of no mirror at all: the full verification names it.
    await sql`INSERT INTO mirror_watches (entity_id, entity_kind, merchant_account, watch, watch_at, currency, test)
      VALUES ('ghost', 'cashout', 'acme', 'open', NULL, 'BRL', false)`.execute(t.db);
    expect((await verifyLedger(t.db)).failures).toContain(
      `${name}: cashout acme/ghost: side row open BRL not wanted (mirror has no watch)`,
    );
    await sql`DELETE FROM mirror_watches WHERE entity_id IN ('ghost', 'v3')`.execute(t.db);
    await sql`INSERT INTO mirror_watches (entity_id, entity_kind, merchant_account, watch, watch_at, currency, test)
      SELECT entity_id, entity_kind, merchant_account, watch, watch_at, currency, test FROM mirrors WHERE entity_id = 'v1'`.execute(
      t.db,
    );
    await sql`UPDATE mirror_watches w SET watch_at = m.watch_at, test = m.test FROM mirrors m
      WHERE m.entity_id = w.entity_id AND m.entity_kind = w.entity_kind AND w.entity_id IN ('v2', 'v4')`.execute(
      t.db,
    );
    await holds();
  });
});
