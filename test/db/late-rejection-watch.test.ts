import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scheduleLateRejectionChecks } from '../../src/db/polling/schedule.ts';
import type { EntityKind } from '../../src/domain/statuses.ts';
import { mirrorsWithPolls, scheduleAt, watchMirrors } from './fixtures.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

const DAY = 86_400_000;

describe('late-rejection watch', () => {
  let tdb: TestDatabase;
  beforeAll(async () => {
    tdb = await createTestDatabase();
  });
  afterAll(async () => {
    await tdb.drop();
  });

  it('makes completed cashouts and refunds, cancelled deposits inside their windows due, and nothing else', async () => {
    const now = new Date('2026-11-21T12:00:00Z');
    const at = (days: number) => new Date(now.getTime() + days * DAY);
    await sql`INSERT INTO merchant_accounts (name) VALUES ('main')`.execute(tdb.db);
    const rows: [string, string, string, Date | null, Date | null, Date | null][] = [
      // kind, id, status, completed_at, next_poll_at, status_since (deposits)
      ['cashout', '1', 'COMPLETED', at(-2), at(5), null], // in the window, next poll far: made due
      ['refund', '2', 'COMPLETED', at(-10), null, null], // in the window, no poll planned: made due
      ['cashout', '3', 'COMPLETED', at(-40), at(5), null], // outside the 30-day window
      ['cashout', '4', 'COMPLETED', at(-1), at(0.5), null], // next poll within the recheck interval already
      ['cashout', '5', 'REJECTED', at(-3), null, null], // not COMPLETED
      ['deposit', '6', 'COMPLETED', at(-1), null, at(-1)], // deposits are not rejected later
      ['deposit', '7', 'CANCELLED', null, null, at(-3)], // may still be completed by hand: made due
      ['deposit', '8', 'CANCELLED', null, at(3), at(-20)], // in a 25-day window, next poll far: made due
      ['deposit', '9', 'CANCELLED', null, null, at(-26)], // outside the 25-day late-completion window
      ['deposit', '10', 'DECLINED', null, null, at(-1)], // declined deposits are not completed later
    ];
    for (const [kind, id, status, completed, next, since] of rows) {
      await sql`INSERT INTO mirrors (merchant_account, entity_kind, entity_id, status, completed_at, status_since, details)
        VALUES ('main', ${kind}, ${id}, ${status}, ${completed}, ${since}, '{}'::jsonb)`.execute(tdb.db);
      await scheduleAt(tdb.db, 'main', kind as EntityKind, id, next);
    }
    await watchMirrors(tdb.db);
    const due = await scheduleLateRejectionChecks(tdb.db, now, {
      lateRejectionWindowMs: 30 * DAY,
      lateCompletionWindowMs: 25 * DAY,
      completedRecheckMs: DAY,
    });
    expect(due).toBe(4);
    const after = await mirrorsWithPolls(tdb.db).select(['m.entity_id']).orderBy('m.entity_id').execute();
    const next = Object.fromEntries(after.map((r) => [r.entity_id, r.next_poll_at?.toISOString() ?? null]));
    expect(next).toEqual({
      '1': now.toISOString(),
      '2': now.toISOString(),
      '3': at(5).toISOString(),
      '4': at(0.5).toISOString(),
      '5': null,
      '6': null,
      '7': now.toISOString(),
      '8': now.toISOString(),
      '9': null,
      '10': null,
    });
  });
});
