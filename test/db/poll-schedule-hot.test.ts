/**
 * The poller's index holds the hour of each next poll (`poll_schedule.due_from`), not the instant: a
 * reschedule inside the same hour changes no indexed column of the schedule row and is HOT, one into
 * another hour is not; either way the poller finds each entity due exactly at its next poll, most overdue
 * first across hours, and not before. HOT updates counted with `pg_stat_xact_user_tables` inside the
 * batch's own transaction.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyObservations } from '../../src/db/ledger/service.ts';
import { entitiesDueForPolling } from '../../src/db/polling/schedule.ts';
import { pollBacklog } from '../../src/db/read-models/metrics.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import type { Observation } from '../../src/domain/observation.ts';
import { applyCountingUpdates, obs, scheduleAt } from './fixtures.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t.drop();
});

const minute = (m: number) => new Date(Date.UTC(2026, 10, 1) + m * 60_000);

const applyCounting = (o: Observation[]) => applyCountingUpdates(t.db, 'poll_schedule', o);

const dueIds = async (at: Date, limit = 100) =>
  (await entitiesDueForPolling(t.db, at, limit)).map((e) => e.entityId);

describe('the poll schedule indexed by the hour of the next poll', () => {
  it('reschedules inside the hour HOT, into another hour not, and the poller finds each poll exactly when due', async () => {
    // Observed 01:40, a poll a minute later; each reading of the same status doubles the back-off.
    await applyCounting([obs('refund', 'h1', 'PENDING', 100)]);
    expect(await dueIds(minute(101))).toEqual(['h1']);
    // 01:41 -> 01:43, then 01:43 -> 01:47: the same hour.
    expect(await applyCounting([obs('refund', 'h1', 'PENDING', 101)])).toEqual({ updated: 1, hot: 1 });
    expect(await applyCounting([obs('refund', 'h1', 'PENDING', 103)])).toEqual({ updated: 1, hot: 1 });
    expect(await dueIds(new Date(minute(107).getTime() - 1))).toEqual([]);
    expect(await dueIds(minute(107))).toEqual(['h1']);
    // 01:47 -> 02:18 (read at 02:10, eight minutes' back-off): another hour, a new index entry.
    expect(await applyCounting([obs('refund', 'h1', 'PENDING', 130)])).toEqual({ updated: 1, hot: 0 });
    expect(await dueIds(minute(137))).toEqual([]);
    expect(await dueIds(minute(138))).toEqual(['h1']);
    // A final status takes it off the schedule.
    await applyCounting([obs('refund', 'h1', 'CANCELLED', 140)]);
    expect(await dueIds(minute(10_000))).toEqual([]);
  });

  it('returns the due rows most overdue first across hours, up to its limit, and none due later in the hour', async () => {
    const ids = ['q1', 'q2', 'q3', 'q4', 'q5'];
    await withLedgerTransaction(t.db, (trx) =>
      applyObservations(
        trx,
        ids.map((id) => obs('deposit', id, 'PENDING', 0)),
      ),
    );
    // Two in the hour before, two in the current hour (one of them after `now`), one on the hour itself.
    const at: Record<string, number> = { q1: 179, q2: 130, q3: 185, q4: 180, q5: 200 };
    for (const id of ids) await scheduleAt(t.db, 'acme', 'deposit', id, minute(at[id]!));
    const now = minute(190);
    expect(await dueIds(now)).toEqual(['q2', 'q1', 'q4', 'q3']);
    expect(await dueIds(now, 3)).toEqual(['q2', 'q1', 'q4']);
    expect(await pollBacklog(t.db, now)).toBe(4);
    // Same instant, two entities: by entity id, as before.
    await scheduleAt(t.db, 'acme', 'deposit', 'q5', minute(130));
    expect(await dueIds(now, 2)).toEqual(['q2', 'q5']);
  });

  it('generates the hour of every scheduled poll: never after it, less than an hour before', async () => {
    const scheduled = await sql<{ n: number }>`SELECT count(*)::int AS n FROM poll_schedule`.execute(t.db);
    expect(scheduled.rows[0]?.n).toBeGreaterThan(0);
    const due = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM poll_schedule
      WHERE due_from > next_poll_at OR due_from <= next_poll_at - interval '1 hour'`.execute(t.db);
    expect(due.rows[0]?.n).toBe(0);
  });
});
