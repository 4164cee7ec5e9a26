/**
 * The entity state cache of a long-running writer (`EntityStateCache`, `LedgerOptions.known`): the ledger
 * uses what it wrote of an entity only while the entity's mirror row, as read, is the version it wrote, and
 * reads the tables as soon as another writer (or a rolled-back transaction) changed it.
 */
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb } from '../../src/db/connection.ts';
import { EntityStateCache } from '../../src/db/ledger/entity-cache.ts';
import { refKey } from '../../src/db/ledger/keys.ts';
import { loadBatch } from '../../src/db/ledger/read.ts';
import { applyObservations, recordIntents } from '../../src/db/ledger/service.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { balances } from '../../src/db/read-models/balances.ts';
import type { Database } from '../../src/db/schema.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import type { Observation } from '../../src/domain/observation.ts';
import { intent, obs } from './fixtures.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

let t: TestDatabase;
let other: Kysely<Database>;
beforeAll(async () => {
  t = await createTestDatabase();
  other = createDb(t.url, 4);
});
afterAll(async () => {
  await other?.destroy();
  await t?.drop();
});

const ref = (entityId: string) => ({ account: 'acme', kind: 'deposit' as const, entityId });

describe('entity state cache', () => {
  it('forgets the entity set least recently once full', () => {
    const known = new EntityStateCache(3);
    const entity = { version: '(0,1)/1', history: [], applied: [] };
    const held = () => ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].filter((k) => known.get(k) !== undefined);
    for (const k of ['a', 'b', 'c', 'a', 'd']) known.set(k, entity);
    expect(held()).toEqual(['a', 'c', 'd']);
    known.set('e', entity);
    expect(held()).toEqual(['a', 'd', 'e']);
    known.set('a', entity);
    known.set('f', entity);
    expect(held()).toEqual(['a', 'e', 'f']);
    known.delete('e');
    known.set('g', entity);
    expect(held()).toEqual(['a', 'f', 'g']);
    known.set('h', entity);
    expect(held()).toEqual(['f', 'g', 'h']);
    known.set('b', entity);
    known.set('c', entity);
    expect(held()).toEqual(['b', 'c', 'h']);
    expect(known.size).toBe(3);
  });

  it('serves an entity from the cache only while its row is the version the cache holds', async () => {
    const known = new EntityStateCache();
    const first = obs('deposit', 'k1', 'PENDING', 1);
    await withLedgerTransaction(t.db, (trx) => applyObservations(trx, [first], { known }));
    const key = refKey(ref('k1'));
    const held = known.get(key);
    expect(held?.history.map((h) => h.eventId)).toEqual([first.eventId]);
    // A marker only the cache holds, under the row's current version: a read that skips the tables returns it.
    known.set(key, { ...held!, history: [{ ...held!.history[0]!, eventId: 'only-in-the-cache' }] });
    const fromCache = await t.db.transaction().execute((trx) => loadBatch(trx, [ref('k1')], known));
    expect(fromCache.histories.get(key)?.map((h) => h.eventId)).toEqual(['only-in-the-cache']);
    // Another writer changes the row: its version moves on and the tables are read again.
    await sql`UPDATE mirrors SET version = nextval('mirror_versions'), updated_at = now() WHERE entity_id = 'k1'`.execute(
      other,
    );
    const fromTables = await t.db.transaction().execute((trx) => loadBatch(trx, [ref('k1')], known));
    expect(fromTables.histories.get(key)?.map((h) => h.eventId)).toEqual([first.eventId]);
  });

  it('keeps the linked intent only once its record can no longer change', async () => {
    const known = new EntityStateCache();
    const key = refKey(ref('k5'));
    await withLedgerTransaction(t.db, (trx) => recordIntents(trx, [intent('deposit', 'k5', 10_000n)]));
    await withLedgerTransaction(t.db, (trx) =>
      applyObservations(trx, [obs('deposit', 'k5', 'PENDING', 1)], { known }),
    );
    const held = known.get(key)!;
    expect(held.intent).toMatchObject({ intentId: 'in-deposit-k5', entityId: 'k5', amount: 10_000n });
    // A marker only the cache holds: while the row is that version, the intent is not read again.
    known.set(key, { ...held, intent: { ...held.intent!, amount: 1n } });
    const fromCache = await t.db.transaction().execute((trx) => loadBatch(trx, [ref('k5')], known));
    expect(fromCache.mirrors.get(key)?.intent?.amount).toBe(1n);
    await sql`UPDATE mirrors SET version = nextval('mirror_versions'), updated_at = now() WHERE entity_id = 'k5'`.execute(
      other,
    );
    const fromTables = await t.db.transaction().execute((trx) => loadBatch(trx, [ref('k5')], known));
    expect(fromTables.mirrors.get(key)?.intent?.amount).toBe(10_000n);

    // A pending intent (written ahead of its creation call, no entity id yet), linked by its reference:
    // its completion changes the record without writing the mirror row, so it is read with every batch.
    const pendingKey = refKey(ref('k6'));
    await withLedgerTransaction(t.db, (trx) =>
      recordIntents(trx, [intent('deposit', 'k6', 10_000n, { entityId: null, outcome: 'unknown' })]),
    );
    await withLedgerTransaction(t.db, (trx) =>
      applyObservations(trx, [obs('deposit', 'k6', 'PENDING', 1)], { known }),
    );
    expect(known.get(pendingKey)?.history).toHaveLength(1);
    expect(known.get(pendingKey)?.intent).toBeUndefined();
    await sql`UPDATE intents SET entity_id = 'k6', outcome = 'created' WHERE intent_id = 'in-deposit-k6'`.execute(
      other,
    );
    const state = await t.db.transaction().execute((trx) => loadBatch(trx, [ref('k6')], known));
    expect(state.histories.get(pendingKey)).toBe(known.get(pendingKey)?.history);
    expect(state.mirrors.get(pendingKey)?.intent).toMatchObject({
      intentId: 'in-deposit-k6',
      entityId: 'k6',
    });
  });

  it('sees what another writer recorded since its own write', async () => {
    const known = new EntityStateCache();
    await withLedgerTransaction(t.db, (trx) =>
      applyObservations(trx, [obs('deposit', 'k2', 'PENDING', 1)], { known }),
    );
    // Another process (no cache) records the completion, observed at minute 5.
    await withLedgerTransaction(other, (trx) =>
      applyObservations(trx, [obs('deposit', 'k2', 'COMPLETED', 5)]),
    );
    // This writer then gets an older poll: with its own write alone it would move the deposit back to PENDING.
    const late = obs('deposit', 'k2', 'PENDING', 3);
    await withLedgerTransaction(t.db, (trx) => applyObservations(trx, [late], { known }));
    const mirror = await t.db
      .selectFrom('mirrors')
      .select(['status'])
      .where('entity_id', '=', 'k2')
      .executeTakeFirstOrThrow();
    expect(mirror.status).toBe('COMPLETED');
    const row = await t.db
      .selectFrom('status_history')
      .select(['stale'])
      .where('event_id', '=', late.eventId)
      .executeTakeFirstOrThrow();
    expect(row.stale).toBe(true);
    expect(known.get(refKey(ref('k2')))?.history).toHaveLength(3);
    expect((await verifyLedger(t.db)).failures).toEqual([]);
  });

  it('reads the tables again after its own transaction rolled back', async () => {
    const known = new EntityStateCache();
    await withLedgerTransaction(t.db, (trx) =>
      applyObservations(trx, [obs('deposit', 'k3', 'PENDING', 1)], { known }),
    );
    const lost = obs('deposit', 'k3', 'COMPLETED', 2);
    await expect(
      t.db.transaction().execute(async (trx) => {
        await applyObservations(trx, [lost], { known });
        throw new Error('rolled back after the write');
      }),
    ).rejects.toThrow('rolled back');
    // The cache remembers the rolled-back write; the row's version says otherwise.
    expect(known.get(refKey(ref('k3')))?.history.map((h) => h.eventId)).toContain(lost.eventId);
    const state = await t.db.transaction().execute((trx) => loadBatch(trx, [ref('k3')], known));
    expect(state.histories.get(refKey(ref('k3')))?.map((h) => h.status)).toEqual(['PENDING']);
    const after = obs('deposit', 'k3', 'COMPLETED', 3);
    await withLedgerTransaction(t.db, (trx) => applyObservations(trx, [after], { known }));
    const history = await t.db
      .selectFrom('status_history')
      .select(['event_id'])
      .where('entity_id', '=', 'k3')
      .execute();
    expect(history.map((h) => h.event_id)).not.toContain(lost.eventId);
    expect(history).toHaveLength(2);
    expect((await verifyLedger(t.db)).failures).toEqual([]);
  });

  it('never double-posts when two cached writers apply the same observations at once', async () => {
    const batches: Observation[][] = [];
    for (let b = 0; b < 6; b++) {
      const batch: Observation[] = [];
      for (let e = 0; e < 40; e++) {
        batch.push(
          obs('deposit', `cd${e}`, b % 2 === 0 ? 'PENDING' : 'COMPLETED', b + 1, {
            eventId: `cd${e}-${b}`,
            feeAmount: 10n,
            feeCurrency: 'BRL',
            account: 'cached',
          }),
        );
        batch.push(
          obs('cashout', `cc${e}`, b < 3 ? 'PENDING' : 'DELIVERED', b + 1, {
            eventId: `cc${e}-${b}`,
            account: 'cached',
          }),
        );
      }
      batches.push(batch);
    }
    const intents = Array.from({ length: 40 }, (_, e) =>
      intent('cashout', `cc${e}`, 1_000n, { account: 'cached' }),
    );
    const caches = [new EntityStateCache(), new EntityStateCache()];
    const run = async (db: Kysely<Database>, order: Observation[][], known: EntityStateCache) => {
      for (const batch of order) {
        await withLedgerTransaction(db, (trx) => applyObservations(trx, batch, { known }));
      }
      await withLedgerTransaction(db, (trx) => recordIntents(trx, intents, { known }));
    };
    await Promise.all([run(t.db, batches, caches[0]!), run(other, [...batches].reverse(), caches[1]!)]);
    expect(caches[0]!.size + caches[1]!.size).toBeGreaterThan(0);
    const entries = await sql<{ n: string }>`
      SELECT count(*)::text AS n FROM journal_entries WHERE merchant_account = 'cached'`.execute(t.db);
    // 40 deposits completed (credit + fee) and 40 cashouts reserved.
    expect(Number(entries.rows[0]?.n)).toBe(40 * 3);
    const rows = await balances(t.db, { merchantAccount: 'cached' });
    const bal = Object.fromEntries(rows.map((r) => [r.account, r.balance]));
    expect(bal).toMatchObject({
      deposits: -40n * 10_000n,
      fees: 40n * 10n,
      reserved: 40n * 1_000n,
      available: 40n * (10_000n - 10n) - 40n * 1_000n,
    });
    expect((await verifyLedger(t.db)).failures).toEqual([]);
  });

  it('never changes the arrays it holds: batches are given them as they are, frozen here', async () => {
    // Every array the cache is given is frozen, so a batch that changed one in place would throw.
    class FrozenCache extends EntityStateCache {
      override set(key: string, known: Parameters<EntityStateCache['set']>[1]): void {
        super.set(key, {
          ...known,
          history: Object.freeze(known.history),
          applied: Object.freeze(known.applied),
        });
      }
    }
    const known = new FrozenCache();
    const ids = ['f1', 'f2', 'f3'];
    const readings = (at: number, status: string) => ids.map((id) => obs('deposit', id, status, at));
    const batches = [
      readings(1, 'PENDING'),
      readings(2, 'EARLY_RELEASED'),
      readings(3, 'PENDING'),
      readings(4, 'COMPLETED'),
    ];
    for (const batch of batches) {
      await withLedgerTransaction(t.db, (trx) => applyObservations(trx, batch, { known }));
      // A replay of the batch: nothing written, the cached arrays given back as they are.
      await withLedgerTransaction(t.db, (trx) => applyObservations(trx, batch, { known }));
    }
    const held = known.get(refKey(ref('f1')));
    expect(Object.isFrozen(held?.history)).toBe(true);
    expect(held?.history.map((h) => h.status)).toEqual(['PENDING', 'EARLY_RELEASED', 'PENDING', 'COMPLETED']);
    expect(held?.applied.map((e) => `${e.effect}:${e.direction}`)).toEqual(['credit:1']);
    const state = await t.db.transaction().execute((trx) => loadBatch(trx, [ref('f1')]));
    expect(state.histories.get(refKey(ref('f1')))?.map((h) => h.eventId)).toEqual(
      held?.history.map((h) => h.eventId),
    );
    expect((await verifyLedger(t.db)).failures).toEqual([]);
  });

  it('holds each entity under the version of its own row, updated or inserted in one batch', async () => {
    const known = new EntityStateCache();
    // Rows that exist before the batch (updated by it) and rows it creates (inserted), interleaved in key
    // order, with flags and statuses of every kind.
    await withLedgerTransaction(t.db, (trx) =>
      applyObservations(
        trx,
        [
          obs('deposit', 'v1', 'PENDING', 1, { test: true }),
          obs('deposit', 'v3', 'PENDING', 1, { crypto: true }),
          obs('deposit', 'v5', 'PENDING', 1),
        ],
        { known },
      ),
    );
    await withLedgerTransaction(t.db, (trx) =>
      applyObservations(
        trx,
        [
          obs('deposit', 'v5', 'EARLY_RELEASED', 2),
          obs('deposit', 'v4', 'PENDING', 2),
          obs('deposit', 'v1', 'COMPLETED', 2, { test: true }),
          obs('deposit', 'v2', 'PENDING', 2, { crypto: true }),
          obs('deposit', 'v3', 'COMPLETED', 2, { crypto: true }),
        ],
        { known },
      ),
    );
    const { rows } = await sql<{ entity_id: string; version: string }>`
      SELECT entity_id, version::text AS version FROM mirrors
      WHERE entity_id IN ('v1', 'v2', 'v3', 'v4', 'v5') ORDER BY entity_id`.execute(t.db);
    expect(rows).toHaveLength(5);
    for (const row of rows) expect(known.get(refKey(ref(row.entity_id)))?.version).toBe(row.version);
    // The rows as read whole (no cache): each with its own row's version and flags.
    const state = await t.db
      .transaction()
      .execute((trx) => loadBatch(trx, ['v1', 'v2', 'v3', 'v4', 'v5', 'v6'].map(ref)));
    expect(state.mirrors.has(refKey(ref('v6')))).toBe(false);
    const read = rows.map((row) => {
      const m = state.mirrors.get(refKey(ref(row.entity_id)))!;
      expect(m.version).toBe(row.version);
      return [m.entityId, m.status, m.everCompleted, m.everEarlyReleased, m.test, m.crypto];
    });
    expect(read).toEqual([
      ['v1', 'COMPLETED', true, false, true, false],
      ['v2', 'PENDING', false, false, false, true],
      ['v3', 'COMPLETED', true, false, false, true],
      ['v4', 'PENDING', false, false, false, false],
      ['v5', 'EARLY_RELEASED', false, true, false, false],
    ]);
  });
});
