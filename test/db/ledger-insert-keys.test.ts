/**
 * The write's history rows and entries skip the keys already recorded by a `NOT EXISTS` probe (not `ON
 * CONFLICT`): a key committed before the write is skipped quietly, a key a concurrent batch is still
 * inserting fails the write on its unique index and `withLedgerTransaction` runs the batch again, which then
 * skips it.
 */
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb } from '../../src/db/connection.ts';
import { applyObservations } from '../../src/db/ledger/service.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import type { Database } from '../../src/db/schema.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import { obs } from './fixtures.ts';
import { createTestDatabase, someoneWaitsForALock, type TestDatabase } from './helpers.ts';

let t: TestDatabase;
let other: Kysely<Database>;
beforeAll(async () => {
  t = await createTestDatabase();
  other = createDb(t.url, 2);
});
afterAll(async () => {
  await other?.destroy();
  await t?.drop();
});

async function historyOf(eventId: string) {
  return t.db
    .selectFrom('status_history')
    .select(['entity_id', 'to_status'])
    .where('event_id', '=', eventId)
    .execute();
}

describe('history and entry keys already taken', () => {
  it('runs a batch again when its event id is being inserted by a batch not yet committed', async () => {
    const retried: unknown[] = [];
    const warned: unknown[] = [];
    const logger = { debug: (o: unknown) => retried.push(o), warn: (o: unknown) => warned.push(o) };
    let blocked: Promise<unknown> | undefined;
    await t.db.transaction().execute(async (trx) => {
      await applyObservations(trx, [obs('deposit', 'r1', 'COMPLETED', 1, { eventId: 'racing-event' })]);
      // The second batch probes the key before the first commits (it does not see it), inserts it and
      // waits on the first's unique index entry; when the first commits, its insert fails.
      blocked = withLedgerTransaction(
        other,
        (o) => applyObservations(o, [obs('deposit', 'r2', 'PENDING', 2, { eventId: 'racing-event' })]),
        { logger },
      );
      blocked.catch(() => undefined);
      await someoneWaitsForALock(t.db, {
        waitEvent: 'transactionid',
        query: '%INSERT INTO status_history%',
      });
    });
    await blocked;
    expect(retried).toEqual([expect.objectContaining({ code: '23505', attempt: 1 })]);
    expect(warned).toEqual([]);
    expect(await historyOf('racing-event')).toEqual([{ entity_id: 'r1', to_status: 'COMPLETED' }]);
    const mirrors = await t.db
      .selectFrom('mirrors')
      .select('entity_id')
      .where('entity_id', 'in', ['r1', 'r2'])
      .orderBy('entity_id')
      .execute();
    expect(mirrors.map((m) => m.entity_id)).toEqual(['r1', 'r2']);
    expect((await verifyLedger(t.db)).failures).toEqual([]);
  });

  it('skips an event id another entity recorded, without an error', async () => {
    const first = obs('deposit', 'k1', 'PENDING', 1, { eventId: 'shared-event' });
    const again = obs('deposit', 'k2', 'COMPLETED', 2, { eventId: 'shared-event' });
    await withLedgerTransaction(t.db, (trx) => applyObservations(trx, [first]));
    await withLedgerTransaction(t.db, (trx) => applyObservations(trx, [again]));
    expect(await historyOf('shared-event')).toEqual([{ entity_id: 'k1', to_status: 'PENDING' }]);
    // A replay of an entity's own reading records nothing and books nothing.
    const replay = await withLedgerTransaction(t.db, (trx) => applyObservations(trx, [first]));
    expect(replay.entriesBooked).toBe(0);
    expect(await historyOf('shared-event')).toHaveLength(1);
  });
});
