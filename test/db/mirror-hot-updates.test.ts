/**
 * The poll schedule lives off the mirror row (`poll_schedule`), and the sets a status is in (`watch`) are
 * indexed off it too (`mirror_watches`), so a reading that changes no indexed column of its mirror (a poll
 * reading the same status again, a move inside the open set or between sets) updates the mirror HOT: no new
 * entry in any of its indexes. Counted with `pg_stat_xact_user_tables` inside the batch's own transaction.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordIntents } from '../../src/db/ledger/service.ts';
import { deferPolls } from '../../src/db/polling/service.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import type { Observation } from '../../src/domain/observation.ts';
import { applyCountingUpdates, intent, mirrorsWithPolls, obs } from './fixtures.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t.drop();
});

const minute = (m: number) => new Date(Date.UTC(2026, 10, 1) + m * 60_000);

const applyCounting = (o: Observation[]) => applyCountingUpdates(t.db, 'mirrors', o);

const scheduleOf = async (id: string) =>
  mirrorsWithPolls(t.db)
    .select(['m.status', 'm.poll_attempts'])
    .where('m.entity_id', '=', id)
    .executeTakeFirstOrThrow();

describe('mirror updates', () => {
  it('a same-status poll updates the mirror HOT and moves its schedule in poll_schedule', async () => {
    await applyCounting([obs('refund', 'r1', 'PENDING', 100)]);
    const first = await scheduleOf('r1');
    expect(first).toMatchObject({ status: 'PENDING', poll_attempts: 0, next_poll_at: minute(101) });

    expect(await applyCounting([obs('refund', 'r1', 'PENDING', 101)])).toEqual({ updated: 1, hot: 1 });
    expect(await applyCounting([obs('refund', 'r1', 'PENDING', 103)])).toEqual({ updated: 1, hot: 1 });
    // The schedule backed off as before, kept in its own table.
    expect(await scheduleOf('r1')).toMatchObject({
      status: 'PENDING',
      poll_attempts: 2,
      next_poll_at: minute(107),
    });
  });

  it('a move between sets is HOT: a completed payout turning REJECTED, a cancelled deposit completing late', async () => {
    await applyCounting([obs('cashout', 'h1', 'PENDING', 100)]);
    expect(await applyCounting([obs('cashout', 'h1', 'COMPLETED', 102)])).toEqual({ updated: 1, hot: 1 });
    expect(await applyCounting([obs('cashout', 'h1', 'REJECTED', 200)])).toEqual({ updated: 1, hot: 1 });
    await applyCounting([obs('deposit', 'h2', 'PENDING', 100)]);
    expect(await applyCounting([obs('deposit', 'h2', 'CANCELLED', 102)])).toEqual({ updated: 1, hot: 1 });
    expect(await applyCounting([obs('deposit', 'h2', 'COMPLETED', 300)])).toEqual({ updated: 1, hot: 1 });
    // The side rows followed: both out of every set now.
    const side = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM mirror_watches WHERE entity_id IN ('h1', 'h2')`.execute(t.db);
    expect(side.rows[0]!.n).toBe(0);
  });

  it('a status change inside the open set is HOT (no index reads the status)', async () => {
    await applyCounting([obs('refund', 'r3', 'PENDING', 100)]);
    expect(await applyCounting([obs('refund', 'r3', 'DELIVERED', 102)])).toEqual({ updated: 1, hot: 1 });
    const { rows } = await sql<{ status: string; watch: string }>`
      SELECT status, watch FROM mirrors WHERE entity_id = 'r3'`.execute(t.db);
    expect(rows).toEqual([{ status: 'DELIVERED', watch: 'open' }]);
  });

  it('a status change out of the open set is HOT too (the sets are indexed in mirror_watches), and a final status leaves the schedule', async () => {
    await applyCounting([obs('refund', 'r2', 'PENDING', 100)]);
    expect(await applyCounting([obs('refund', 'r2', 'CANCELLED', 102)])).toEqual({ updated: 1, hot: 1 });
    const side = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM mirror_watches WHERE entity_id = 'r2'`.execute(t.db);
    expect(side.rows[0]!.n).toBe(0);
    expect(await scheduleOf('r2')).toMatchObject({ status: 'CANCELLED', next_poll_at: null });
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM poll_schedule WHERE entity_id = 'r2'`.execute(t.db);
    expect(rows[0]!.n).toBe(0);
  });

  it('the schedule is written only by a fresh reading, and only when its next poll moves', async () => {
    const scheduleRow = async (id: string) => {
      const { rows } = await sql<{ next_poll_at: Date; xmin: string }>`
        SELECT next_poll_at, xmin::text AS xmin FROM poll_schedule WHERE entity_id = ${id}`.execute(t.db);
      return rows[0];
    };
    // The intent schedules the first poll a minute after its creation; the first reading, observed at
    // that creation, computes the same minute: the row is left as it was (no new version).
    await withLedgerTransaction(t.db, (trx) => recordIntents(trx, [intent('cashout', 's1', 500n)]));
    const created = await scheduleRow('s1');
    expect(created?.next_poll_at).toEqual(minute(1));
    await applyCounting([obs('cashout', 's1', 'PENDING', 0)]);
    expect(await scheduleRow('s1')).toEqual(created);

    // A batch that records no fresh reading of an entity (its intent linked later) leaves its schedule
    // alone, here a poll the poller deferred.
    await applyCounting([obs('cashout', 's2', 'PENDING', 0)]);
    await deferPolls(t.db, [{ merchantAccount: 'acme', kind: 'cashout', entityId: 's2' }], minute(50));
    await withLedgerTransaction(t.db, (trx) => recordIntents(trx, [intent('cashout', 's2', 500n)]));
    expect((await scheduleOf('s2')).poll_attempts).toBe(0);
    expect((await scheduleRow('s2'))?.next_poll_at).toEqual(minute(50));
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM journal_entries WHERE entity_id = 's2'`.execute(t.db);
    expect(rows[0]!.n).toBe(1);
  });
});
