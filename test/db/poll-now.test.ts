import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pollNow } from '../../src/db/polling/service.ts';
import type { EntityKind } from '../../src/domain/statuses.ts';
import { mirrorsWithPolls, scheduleAt } from './fixtures.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

describe('pollNow (the status fetcher hands entities to the poller)', () => {
  let tdb: TestDatabase;
  beforeAll(async () => {
    tdb = await createTestDatabase();
  });
  afterAll(async () => {
    await tdb.drop();
  });

  it('makes known entities due now, creates unknown ones due now, and leaves sooner polls alone', async () => {
    const now = new Date('2026-11-21T12:00:00Z');
    const at = (minutes: number) => new Date(now.getTime() + minutes * 60_000);
    await sql`INSERT INTO merchant_accounts (name) VALUES ('main')`.execute(tdb.db);
    const rows: [string, string, string, Date | null][] = [
      // kind, id, status, next_poll_at
      ['deposit', '1', 'PENDING', at(360)], // next poll six hours away: made due now
      ['cashout', '2', 'COMPLETED', null], // final for the back-off, no poll planned: read once more
      ['refund', '3', 'PENDING', at(-5)], // overdue already: left as it is
    ];
    for (const [kind, id, status, next] of rows) {
      await sql`INSERT INTO mirrors (merchant_account, entity_kind, entity_id, status, details)
        VALUES ('main', ${kind}, ${id}, ${status}, '{}'::jsonb)`.execute(tdb.db);
      await scheduleAt(tdb.db, 'main', kind as EntityKind, id, next);
    }
    await pollNow(
      tdb.db,
      [
        { account: 'main', kind: 'deposit', entityId: '1', externalRef: 'inv-1' },
        { account: 'main', kind: 'cashout', entityId: '2', externalRef: null },
        { account: 'main', kind: 'refund', entityId: '3', externalRef: null },
        // Known to nobody yet, of an account the ledger has not seen: row and account created.
        { account: 'other', kind: 'deposit', entityId: '4', externalRef: 'inv-4' },
      ],
      now,
    );
    const after = await mirrorsWithPolls(tdb.db)
      .select(['m.merchant_account', 'm.entity_kind', 'm.entity_id', 'm.status', 'm.external_ref'])
      .orderBy('m.entity_id')
      .execute();
    expect(
      after.map((r) => [r.merchant_account, r.entity_kind, r.entity_id, r.status, r.next_poll_at]),
    ).toEqual([
      ['main', 'deposit', '1', 'PENDING', now],
      ['main', 'cashout', '2', 'COMPLETED', now],
      ['main', 'refund', '3', 'PENDING', at(-5)],
      ['other', 'deposit', '4', null, now],
    ]);
    expect(after[3]!.external_ref).toBe('inv-4');
    const accounts = await tdb.db.selectFrom('merchant_accounts').select('name').orderBy('name').execute();
    expect(accounts.map((a) => a.name)).toEqual(['main', 'other']);

    // Twice is the same as once.
    await pollNow(
      tdb.db,
      [{ account: 'other', kind: 'deposit', entityId: '4', externalRef: 'inv-4' }],
      at(1),
    );
    const again = await mirrorsWithPolls(tdb.db).where('m.entity_id', '=', '4').execute();
    expect(again.map((r) => r.next_poll_at)).toEqual([now]);
  });
});
