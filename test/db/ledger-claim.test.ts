/**
 * A batch reads its entities without a lock and claims their mirror rows when it writes, each by the
 * version it read (`claimStatement`). A row another transaction wrote in between is not claimed: the batch
 * is rolled back (`MirrorMoved`, PostgreSQL's serialization failure code) and `withLedgerTransaction` runs
 * it again from what that transaction committed.
 */
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb } from '../../src/db/connection.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import {
  type EntityRef,
  loadBatch,
  MirrorMoved,
  type MirrorState,
  writeStatement,
} from '../../src/db/ledger-repository.ts';
import { applyObservations, recordIntents, withLedgerTransaction } from '../../src/db/ledger-service.ts';
import { pipelined } from '../../src/db/prepared.ts';
import type { Database } from '../../src/db/schema.ts';
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
 * Runs `first` in a transaction held open until `second` (on the other pool) is blocked on a lock
 * `first` holds, then commits it (or rolls it back); returns what `second` returned.
 */
async function whileHeld<T>(
  first: (trx: Kysely<Database>) => Promise<unknown>,
  second: (db: Kysely<Database>) => Promise<T>,
  end: 'commit' | 'roll back' = 'commit',
): Promise<T> {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  let locked!: () => void;
  const holding = new Promise<void>((resolve) => {
    locked = resolve;
  });
  const one = t.db
    .transaction()
    .execute(async (trx) => {
      await first(trx);
      locked();
      await gate;
      if (end === 'roll back') throw new Error('rolled back');
    })
    .catch((err: Error) => {
      if (err.message !== 'rolled back') throw err;
    });
  await holding;
  const two = second(other);
  await someoneWaitsForALock(t.db);
  release();
  await one;
  return two;
}

/** Claims the mirror row of `ref` by the version `read` holds, as a batch claims a frozen entity's row. */
function claimHeld(db: Kysely<Database>, ref: EntityRef, read: MirrorState) {
  return db.transaction().execute(async (trx) => {
    const write = writeStatement({
      history: [],
      entries: [],
      mirrors: [],
      held: [{ ...ref, tid: read.tid!, xmin: read.xmin! }],
    });
    const [claimRows] = await pipelined(trx, [write.claim]);
    return write.result(claimRows, []);
  });
}

/** The retries `withLedgerTransaction` logged, by PostgreSQL code. */
function retries() {
  const codes: unknown[] = [];
  return { codes, logger: { warn: (o: { code?: unknown }) => codes.push(o.code) } };
}

/** The late rejection (826) of cashout `id`, applied as the reconciler applies a batch (retried on a conflict). */
function rejectLate(db: Kysely<Database>, id: string, logger: { warn: (o: { code?: unknown }) => void }) {
  return withLedgerTransaction(
    db,
    (trx) =>
      applyObservations(trx, [
        obs('cashout', id, 'REJECTED', 3, {
          eventId: `${id}-rejected`,
          rejectionCode: '826',
          rejectionReason: 'Withdrawal reversed',
        }),
      ]),
    { logger },
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

describe('a batch whose mirror row another transaction wrote after the batch read it', () => {
  it('is not claimed: the claim names the rows it missed, with a serialization failure code', async () => {
    await withLedgerTransaction(t.db, (trx) =>
      applyObservations(trx, [obs('cashout', 'c1', 'PENDING', 1, { eventId: 'c1-pending' })]),
    );
    const ref = { account: 'acme', kind: 'cashout' as const, entityId: 'c1' };
    const read = (await loadBatch(t.db, [ref])).mirrors.values().next().value!;
    // Another transaction writes the entity and commits before the claim.
    await withLedgerTransaction(other, (o) =>
      applyObservations(o, [obs('cashout', 'c1', 'PROCESSING', 2, { eventId: 'c1-processing' })]),
    );
    const failure = await claimHeld(t.db, ref, read).then(
      () => null,
      (err: unknown) => err,
    );
    expect(failure).toBeInstanceOf(MirrorMoved);
    expect((failure as MirrorMoved).code).toBe('40001');
    expect((failure as Error).message).toContain('1 mirror rows');
  });

  it('claims a row whose writer rolled back while the claim waited', async () => {
    await withLedgerTransaction(t.db, (trx) =>
      applyObservations(trx, [obs('cashout', 'c2', 'PENDING', 1, { eventId: 'c2-pending' })]),
    );
    const ref = { account: 'acme', kind: 'cashout' as const, entityId: 'c2' };
    const read = (await loadBatch(t.db, [ref])).mirrors.values().next().value!;
    // Another transaction writes the entity, holds its lock until the claim waits for it, then rolls back.
    const claimed = await whileHeld(
      (trx) => applyObservations(trx, [obs('cashout', 'c2', 'PROCESSING', 2, { eventId: 'c2-processing' })]),
      (db) => claimHeld(db, ref, read),
      'roll back',
    );
    expect(claimed).toMatchObject({ recorded: 0, booked: 0 });
    const mirror = await t.db
      .selectFrom('mirrors')
      .select('status')
      .where('entity_id', '=', 'c2')
      .executeTakeFirstOrThrow();
    expect(mirror.status).toBe('PENDING');
  });

  it('plans again from the history, entries and intent committed before its claim', async () => {
    await withLedgerTransaction(t.db, (trx) =>
      applyObservations(trx, [obs('cashout', 'w1', 'PENDING', 1, { eventId: 'w1-pending' })]),
    );
    const log = retries();
    await whileHeld(
      async (trx) => {
        await recordIntents(trx, [intent('cashout', 'w1', 5_000n)]);
        await applyObservations(trx, [obs('cashout', 'w1', 'COMPLETED', 2, { eventId: 'w1-completed' })]);
      },
      (db) => rejectLate(db, 'w1', log.logger),
    );
    // The second batch read the entity before the first committed, waited on its claim, and ran again.
    expect(log.codes).toContain('40001');
    const mirror = await t.db
      .selectFrom('mirrors')
      .select(['status', 'intent_id'])
      .where('entity_id', '=', 'w1')
      .executeTakeFirstOrThrow();
    expect(mirror).toEqual({ status: 'REJECTED', intent_id: 'in-cashout-w1' });
    const history = await t.db
      .selectFrom('status_history')
      .select('event_id')
      .where('entity_id', '=', 'w1')
      .orderBy('observed_at')
      .execute();
    expect(history.map((h) => h.event_id)).toEqual(['w1-pending', 'w1-completed', 'w1-rejected']);
  });

  it('books a late rejection against the completion another batch committed before its claim', async () => {
    await withLedgerTransaction(t.db, (trx) => recordIntents(trx, [intent('cashout', 'w2', 7_000n)]));
    await withLedgerTransaction(t.db, (trx) =>
      applyObservations(trx, [obs('cashout', 'w2', 'PENDING', 1, { eventId: 'w2-pending' })]),
    );
    const log = retries();
    await whileHeld(
      (trx) => applyObservations(trx, [obs('cashout', 'w2', 'COMPLETED', 2, { eventId: 'w2-completed' })]),
      (db) => rejectLate(db, 'w2', log.logger),
    );
    expect(log.codes).toContain('40001');
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
