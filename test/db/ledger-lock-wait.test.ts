/**
 * A batch that waits for another batch's lock on an entity plans from what that batch committed. Under
 * READ COMMITTED, `loadBatch`'s `FOR UPDATE` returns the row version committed while it waited, but the
 * rest of its statement (the entity's history, its entries, its intent) reads the snapshot taken before
 * the wait: those must be read again once the lock is held.
 */
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb } from '../../src/db/connection.ts';
import { loadBatch } from '../../src/db/ledger-repository.ts';
import { applyObservations, recordIntents, withLedgerTransaction } from '../../src/db/ledger-service.ts';
import type { Database } from '../../src/db/schema.ts';
import { verifyLedger } from '../../src/db/verify.ts';
import { intent, obs } from './fixtures.ts';
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

/**
 * Runs `first` in a transaction held open until the second transaction (`second`, on the other pool)
 * is blocked on a lock `first` holds, then commits it; returns what `second` returned.
 */
async function whileHeld<T>(
  first: (trx: Kysely<Database>) => Promise<unknown>,
  second: (trx: Kysely<Database>) => Promise<T>,
): Promise<T> {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  let locked!: () => void;
  const holding = new Promise<void>((resolve) => {
    locked = resolve;
  });
  const one = t.db.transaction().execute(async (trx) => {
    await first(trx);
    locked();
    await gate;
  });
  await holding;
  const two = other.transaction().execute(second);
  await someoneWaitsForALock(t.db);
  release();
  await one;
  return two;
}

describe('a batch that waited for a lock', () => {
  it('reads the history, entries and intent committed while it waited', async () => {
    await withLedgerTransaction(t.db, (trx) =>
      applyObservations(trx, [obs('cashout', 'w1', 'PENDING', 1, { eventId: 'w1-pending' })]),
    );
    const ref = { account: 'acme', kind: 'cashout' as const, entityId: 'w1' };
    const state = await whileHeld(
      async (trx) => {
        await recordIntents(trx, [intent('cashout', 'w1', 5_000n)]);
        await applyObservations(trx, [obs('cashout', 'w1', 'COMPLETED', 2, { eventId: 'w1-completed' })]);
      },
      (trx) => loadBatch(trx, [ref]),
    );
    const key = [...state.histories.keys()][0]!;
    expect(state.histories.get(key)?.map((h) => h.eventId)).toEqual(['w1-pending', 'w1-completed']);
    expect(state.applied.get(key)?.length).toBeGreaterThan(0);
    expect(state.locked.get(key)?.status).toBe('COMPLETED');
    expect(state.locked.get(key)?.intent?.intentId).toBe('in-cashout-w1');
  });

  it('books a late rejection against the completion another batch committed while it waited', async () => {
    await withLedgerTransaction(t.db, (trx) => recordIntents(trx, [intent('cashout', 'w2', 7_000n)]));
    await withLedgerTransaction(t.db, (trx) =>
      applyObservations(trx, [obs('cashout', 'w2', 'PENDING', 1, { eventId: 'w2-pending' })]),
    );
    await whileHeld(
      (trx) => applyObservations(trx, [obs('cashout', 'w2', 'COMPLETED', 2, { eventId: 'w2-completed' })]),
      (trx) =>
        applyObservations(trx, [
          obs('cashout', 'w2', 'REJECTED', 3, {
            eventId: 'w2-rejected',
            rejectionCode: '826',
            rejectionReason: 'Withdrawal reversed',
          }),
        ]),
    );
    // The same readings applied one after the other, to another entity: the entries must be the same.
    await withLedgerTransaction(t.db, (trx) => recordIntents(trx, [intent('cashout', 'w3', 7_000n)]));
    for (const [status, at] of [
      ['PENDING', 1],
      ['COMPLETED', 2],
      ['REJECTED', 3],
    ] as const) {
      await withLedgerTransaction(t.db, (trx) =>
        applyObservations(trx, [
          obs('cashout', 'w3', status, at, {
            eventId: `w3-${status}`,
            ...(status === 'REJECTED'
              ? { rejectionCode: '826', rejectionReason: 'Withdrawal reversed' }
              : {}),
          }),
        ]),
      );
    }
    const entries = async (id: string) =>
      (
        await t.db
          .selectFrom('journal_entries')
          .select(['effect', 'direction', 'seq', 'book', 'currency', 'amount'])
          .where('entity_id', '=', id)
          .orderBy('id')
          .execute()
      ).map((e) => `${e.effect} ${e.direction} ${e.seq} ${e.book} ${e.currency} ${e.amount}`);
    expect(await entries('w2')).toEqual(await entries('w3'));
    const mirror = await t.db
      .selectFrom('mirrors')
      .select(['status'])
      .where('entity_id', '=', 'w2')
      .executeTakeFirstOrThrow();
    expect(mirror.status).toBe('REJECTED');
    const verify = await verifyLedger(t.db);
    expect(verify.failures).toEqual([]);
  });
});
