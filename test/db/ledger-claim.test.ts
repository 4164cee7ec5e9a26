/**
 * A batch reads its entities without a lock and claims their mirror rows when it writes, each by the
 * version it read (`writeBatch`). A row another transaction wrote in between is not claimed: the server
 * fails the claim (`MirrorMoved`, PostgreSQL's serialization failure code) and `withLedgerTransaction` runs
 * the batch again from what that transaction committed.
 */
import { Kysely, PostgresDialect, type PostgresPoolClient, sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb } from '../../src/db/connection.ts';
import { MirrorMoved } from '../../src/db/ledger/claim.ts';
import type { EntityRef } from '../../src/db/ledger/keys.ts';
import { loadBatch, type MirrorState } from '../../src/db/ledger/read.ts';
import { applyObservations, recordIntents } from '../../src/db/ledger/service.ts';
import { ARRAY_ROWS_MARK, namingPool } from '../../src/db/ledger/statements.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { writeBatch } from '../../src/db/ledger/write.ts';
import type { Database } from '../../src/db/schema.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
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
  return db
    .transaction()
    .execute((trx) =>
      writeBatch(trx, { history: [], entries: [], mirrors: [], held: [{ ...ref, version: read.version! }] }),
    );
}

/** The retries `withLedgerTransaction` logged, by PostgreSQL code. */
function retries() {
  const codes: unknown[] = [];
  return {
    codes,
    logger: { debug: (o: { code?: unknown }) => codes.push(o.code), warn: () => undefined },
  };
}

/** The late rejection (826) of cashout `id`, applied as the reconciler applies a batch (retried on a conflict). */
function rejectLate(db: Kysely<Database>, id: string, logger: ReturnType<typeof retries>['logger']) {
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

describe("a mirror row updated, vacuumed and its slot reused between a batch's read and its claim", () => {
  it('is not claimed: the batch runs again and the ledger is right', async () => {
    await withLedgerTransaction(t.db, (trx) => recordIntents(trx, [intent('cashout', 's1', 4_000n)]));
    for (const [status, at] of [
      ['PENDING', 11],
      ['PROCESSING', 12],
    ] as const) {
      await withLedgerTransaction(t.db, (trx) =>
        applyObservations(trx, [obs('cashout', 's1', status, at, { eventId: `s1-${status}` })]),
      );
    }
    // A vacuum drops the page's unused slots at its end: one more write after it puts the row in one of
    // the first slots, which the writes below take in turn.
    await sql`VACUUM (INDEX_CLEANUP ON) mirrors`.execute(other);
    await withLedgerTransaction(t.db, (trx) =>
      applyObservations(trx, [obs('cashout', 's1', 'PENDING', 10, { eventId: 's1-early' })]),
    );
    const slotOf = async () =>
      (
        await sql<{ ctid: string; version: string }>`
          SELECT ctid::text AS ctid, version::text AS version FROM mirrors WHERE entity_id = 's1'`.execute(
          other,
        )
      ).rows[0]!;
    const readRow = await slotOf();
    let reusedBy: string | null = null;
    let polls = 0;
    // After the batch's read and before its claim: other batches write the entity and a vacuum frees the
    // slot of the version read, until a live row stands in that slot. Each reading is older than the ones
    // before, so it moves the entity's first sighting, an indexed column: the row's new version is not a
    // heap-only tuple, and the slot of the one before is freed, not kept to redirect to it.
    const interfere = async () => {
      for (let i = 0; i < 10 && reusedBy === null; i++) {
        polls += 1;
        await withLedgerTransaction(other, (o) =>
          applyObservations(o, [obs('cashout', 's1', 'PENDING', 9 - i, { eventId: `s1-poll-${i}` })]),
        );
        await sql`VACUUM (INDEX_CLEANUP ON) mirrors`.execute(other);
        const { rows } = await sql<{ entity_id: string }>`
          SELECT entity_id FROM mirrors WHERE ctid = ${readRow.ctid}::tid`.execute(other);
        reusedBy = rows[0]?.entity_id ?? null;
      }
    };
    const log = retries();
    const db = interferingAfterFirstRead(interfere);
    try {
      await withLedgerTransaction(
        db,
        (trx) => applyObservations(trx, [obs('cashout', 's1', 'COMPLETED', 30, { eventId: 's1-completed' })]),
        { logger: log.logger },
      );
    } finally {
      await db.destroy();
    }
    // The slot the batch read held another version of a row (the entity's own or another's) at its claim.
    expect(reusedBy).not.toBeNull();
    expect((await slotOf()).version).not.toBe(readRow.version);
    expect(log.codes).toEqual(['40001']);
    const mirror = await t.db
      .selectFrom('mirrors')
      .select(['status', 'intent_id'])
      .where('entity_id', '=', 's1')
      .executeTakeFirstOrThrow();
    expect(mirror).toEqual({ status: 'COMPLETED', intent_id: 'in-cashout-s1' });
    const history = await t.db
      .selectFrom('status_history')
      .select('event_id')
      .where('entity_id', '=', 's1')
      .execute();
    expect(history).toHaveLength(4 + polls);
    expect(await entries('s1')).not.toEqual([]);
    const verify = await verifyLedger(t.db);
    expect(verify.failures).toEqual([]);
  });
});

/**
 * A database of one connection that runs `interfere` once, after the answer to the first statement whose
 * rows come back as arrays (a batch's read, `loadBatch`). First the connection sends a statement of the
 * simple protocol, which closes the read's portal: an open portal keeps its snapshot, and with it every
 * row version the read could see, out of a vacuum's reach.
 */
function interferingAfterFirstRead(interfere: () => Promise<void>): Kysely<Database> {
  const pool = new pg.Pool({ connectionString: t.url, max: 1, pipeline: true });
  const naming = namingPool(pool);
  let done = false;
  return new Kysely<Database>({
    dialect: new PostgresDialect({
      pool: {
        async connect() {
          const client = await naming.connect();
          return {
            // biome-ignore lint/suspicious/noExplicitAny: passed through to pg
            async query(text: any, values?: any): Promise<any> {
              const result = await client.query(text, values);
              if (!done && typeof text === 'string' && text.startsWith(ARRAY_ROWS_MARK)) {
                done = true;
                await client.query('SELECT 1');
                await interfere();
              }
              return result;
            },
            release: () => client.release(),
          } as unknown as PostgresPoolClient;
        },
        end: () => naming.end(),
      },
    }),
  });
}
