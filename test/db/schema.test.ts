import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIGRATIONS, migrateDown, migrateToLatest } from '../../src/db/connection.ts';
import { createTestDatabase, indexesOf, type TestDatabase } from './helpers.ts';

/**
 * The schema's own rules, on a database migrated from empty: the migrations go up, down to an empty schema
 * and up again; the ledger's triggers and constraints refuse what they must (an unbalanced entry, one that
 * mixes books, an unknown account, a change to an immutable row), naming the first fault of a statement in
 * a fixed order; the keys are unique; the mirrors' sets are generated from the status.
 */

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase({ migrate: false });
});
afterAll(async () => {
  await t?.drop();
});

async function insertEntry(key: string, book = 'live'): Promise<string> {
  const row = await t.db
    .insertInto('journal_entries')
    .values({
      idempotency_key: key,
      merchant_account: 'm1',
      entity_kind: 'deposit',
      entity_id: key,
      effect: 'credit',
      direction: 1,
      seq: 1,
      book: book as 'live',
      currency: 'BRL',
      amount: '10.00',
      fee_currency: null,
      fee_amount: null,
      effective_at: new Date(),
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  return row.id;
}

/** What the public schema holds besides the migrator's own tables: relations and functions, by name. */
async function schemaObjects(): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`
    SELECT relname AS name FROM pg_class
    WHERE relnamespace = current_schema()::regnamespace AND relname NOT LIKE 'kysely_migration%'
    UNION ALL
    SELECT proname FROM pg_proc WHERE pronamespace = current_schema()::regnamespace
    ORDER BY 1`.execute(t.db);
  return rows.map((r) => r.name);
}

describe('the schema and its ledger constraints', () => {
  it('migrates up, down to an empty schema and up again', async () => {
    const up = await migrateToLatest(t.db);
    const names = Object.keys(MIGRATIONS);
    expect(up).toEqual(names.map((name) => `Up ${name}: Success`));
    const objects = await schemaObjects();
    expect(objects).toEqual(expect.arrayContaining(['postings', 'mirrors', 'postings_check_balanced']));
    for (let i = up.length; i > 0; i--) {
      const down = await migrateDown(t.db);
      expect(down).toHaveLength(1);
      expect(down[0]).toMatch(/^Down .*: Success$/);
    }
    expect(await schemaObjects()).toEqual([]);
    const again = await migrateToLatest(t.db);
    expect(again).toHaveLength(up.length);
    expect(await schemaObjects()).toEqual(objects);
    // A posting insert maintains one index, its entry's: an account's postings in a time range are read
    // from ledger_movements and the entries of the period.
    expect(await indexesOf(t.db, 'postings')).toEqual(['postings_entry_ix']);
    await t.db.insertInto('merchant_accounts').values({ name: 'm1' }).execute();
    await t.db
      .insertInto('ledger_accounts')
      .values(
        ['available', 'deposits', 'fees'].map((name) => ({
          merchant_account: 'm1',
          currency: 'BRL',
          book: 'live' as const,
          name,
        })),
      )
      .execute();
    await t.db
      .insertInto('ledger_accounts')
      .values({ merchant_account: 'm1', currency: 'BRL', book: 'test', name: 'test_available' })
      .execute();
  });

  it('accepts a balanced entry and refuses an unbalanced one', async () => {
    const ok = await insertEntry('e-ok');
    await t.db
      .insertInto('postings')
      .values([
        {
          entry_id: ok,
          merchant_account: 'm1',
          currency: 'BRL',
          book: 'live',
          account: 'available',
          amount: '10.00',
        },
        {
          entry_id: ok,
          merchant_account: 'm1',
          currency: 'BRL',
          book: 'live',
          account: 'deposits',
          amount: '-10.00',
        },
      ])
      .execute();
    const bad = await insertEntry('e-bad');
    await expect(
      t.db
        .insertInto('postings')
        .values([
          {
            entry_id: bad,
            merchant_account: 'm1',
            currency: 'BRL',
            book: 'live',
            account: 'available',
            amount: '10.00',
          },
          {
            entry_id: bad,
            merchant_account: 'm1',
            currency: 'BRL',
            book: 'live',
            account: 'deposits',
            amount: '-9.99',
          },
        ])
        .execute(),
    ).rejects.toThrow(/does not balance/);
  });

  it('refuses an entry that mixes books', async () => {
    const e = await insertEntry('e-mix');
    await expect(
      t.db
        .insertInto('postings')
        .values([
          {
            entry_id: e,
            merchant_account: 'm1',
            currency: 'BRL',
            book: 'live',
            account: 'available',
            amount: '10.00',
          },
          {
            entry_id: e,
            merchant_account: 'm1',
            currency: 'BRL',
            book: 'test',
            account: 'test_available',
            amount: '-10.00',
          },
        ])
        .execute(),
    ).rejects.toThrow(/mixes books/);
  });

  it('refuses an account name outside its book', async () => {
    await expect(
      t.db
        .insertInto('ledger_accounts')
        .values({ merchant_account: 'm1', currency: 'BRL', book: 'test', name: 'available' })
        .execute(),
    ).rejects.toThrow(/ledger_accounts_book_name_ck/);
  });

  it('refuses postings to an unknown entry or ledger account', async () => {
    await expect(
      t.db
        .insertInto('postings')
        .values([
          {
            entry_id: '999999',
            merchant_account: 'm1',
            currency: 'BRL',
            book: 'live',
            account: 'available',
            amount: '1.00',
          },
          {
            entry_id: '999999',
            merchant_account: 'm1',
            currency: 'BRL',
            book: 'live',
            account: 'deposits',
            amount: '-1.00',
          },
        ])
        .execute(),
    ).rejects.toThrow(/does not exist/);
    const e = await insertEntry('e-acct');
    await expect(
      t.db
        .insertInto('postings')
        .values([
          {
            entry_id: e,
            merchant_account: 'm1',
            currency: 'BRL',
            book: 'live',
            account: 'available',
            amount: '1.00',
          },
          {
            entry_id: e,
            merchant_account: 'm1',
            currency: 'BRL',
            book: 'live',
            account: 'payouts',
            amount: '-1.00',
          },
        ])
        .execute(),
    ).rejects.toThrow(/unknown ledger account/);
  });

  it('names the first fault of a statement in the order: entry, account, balance', async () => {
    const posting = (entry_id: string, book: string, account: string, amount: string, merchant = 'm1') => ({
      entry_id,
      merchant_account: merchant,
      currency: 'BRL',
      book: book as 'live',
      account,
      amount,
    });
    const fault = async (rows: ReturnType<typeof posting>[]) => {
      const e = await t.db
        .insertInto('postings')
        .values(rows)
        .execute()
        .then(
          () => undefined,
          (err: { constraint?: string; code?: string }) => err,
        );
      return e && `${e.code} ${e.constraint}`;
    };
    const ok = await insertEntry('o-ok');
    const mixed = await insertEntry('o-mixed');
    const other = await insertEntry('o-other-merchant');
    const unbalanced = await insertEntry('o-unbalanced');
    const testBook = await insertEntry('o-test-book', 'test');
    // One statement with an unbalanced entry, an unknown account and an entry that mixes books.
    expect(
      await fault([
        posting(ok, 'live', 'available', '5.00'),
        posting(ok, 'live', 'deposits', '-5.00'),
        posting(unbalanced, 'live', 'available', '5.00'),
        posting(unbalanced, 'live', 'nowhere', '-4.00'),
        posting(mixed, 'live', 'available', '5.00'),
        posting(mixed, 'test', 'test_available', '-4.00'),
      ]),
    ).toBe('23514 postings_single_book');
    // Postings of another merchant account than their entry's, balanced: still the entry's fault.
    expect(
      await fault([
        posting(other, 'live', 'available', '1.00', 'm2'),
        posting(other, 'live', 'deposits', '-1.00', 'm2'),
      ]),
    ).toBe('23514 postings_single_book');
    // A book other than the entry's, in a single-book, balanced group.
    expect(
      await fault([
        posting(ok, 'test', 'test_available', '1.00'),
        posting(ok, 'test', 'test_available', '-1.00'),
      ]),
    ).toBe('23514 postings_single_book');
    // No entry fault: the unknown account comes before the imbalance.
    expect(
      await fault([
        posting(unbalanced, 'live', 'available', '5.00'),
        posting(unbalanced, 'live', 'nowhere', '-4.00'),
      ]),
    ).toBe('23503 postings_account_known');
    expect(
      await fault([
        posting(testBook, 'test', 'test_available', '5.00'),
        posting(unbalanced, 'live', 'available', '5.00'),
        posting(unbalanced, 'live', 'deposits', '-4.00'),
      ]),
    ).toBe('23514 postings_balanced');
    expect(
      await fault([
        posting(testBook, 'test', 'test_available', '1.00'),
        posting(testBook, 'test', 'test_available', '-1.00'),
      ]),
    ).toBeUndefined();
  });

  it('refuses UPDATE, DELETE and TRUNCATE of entries and postings', async () => {
    await expect(sql`UPDATE postings SET amount = amount`.execute(t.db)).rejects.toThrow(/immutable/);
    await expect(sql`DELETE FROM journal_entries`.execute(t.db)).rejects.toThrow(/immutable/);
    await expect(sql`TRUNCATE postings`.execute(t.db)).rejects.toThrow(/immutable/);
    await expect(sql`DELETE FROM ledger_accounts`.execute(t.db)).rejects.toThrow(/immutable/);
  });

  it('keeps the idempotency key unique', async () => {
    await expect(insertEntry('e-ok')).rejects.toThrow(/journal_entries_idempotency_key_uq/);
    // The writer's arbiter: a key already booked is skipped, not doubled.
    const skipped = await sql`
      INSERT INTO journal_entries (idempotency_key, merchant_account, entity_kind, entity_id, effect, direction, seq,
        book, currency, amount, effective_at)
      VALUES ('e-ok', 'm1', 'deposit', 'e-ok', 'credit', 1, 1, 'live', 'BRL', 10, now())
      ON CONFLICT (idempotency_key) DO NOTHING RETURNING id`.execute(t.db);
    expect(skipped.rows).toHaveLength(0);
  });

  it('keeps the event id of the history unique, and skips a recorded one on conflict', async () => {
    const history = (eventId: string, entityId: string, onConflict: boolean) => sql`
      INSERT INTO status_history (event_id, merchant_account, entity_kind, entity_id, source, observed_at)
      VALUES (${eventId}, 'm1', 'deposit', ${entityId}, 'poll', now())
      ${onConflict ? sql`ON CONFLICT (event_id) DO NOTHING` : sql``} RETURNING id`;
    expect((await history('ev-1', 'd-1', false).execute(t.db)).rows).toHaveLength(1);
    // Unique across entities, as before.
    await expect(history('ev-1', 'd-2', false).execute(t.db)).rejects.toMatchObject({
      code: '23505',
      constraint: 'status_history_event_uq',
    });
    expect((await history('ev-1', 'd-1', true).execute(t.db)).rows).toHaveLength(0);
    expect((await history('ev-1 ', 'd-1', true).execute(t.db)).rows).toHaveLength(1);
  });
});

describe("the mirrors' sets", () => {
  it('are generated from the status, and move with it', async () => {
    await sql`INSERT INTO merchant_accounts (name) VALUES ('w1')`.execute(t.db);
    await sql`
      INSERT INTO mirrors (merchant_account, entity_kind, entity_id, status, status_since, completed_at)
      VALUES ('w1', 'deposit', 'd-created', 'CREATED', '2026-11-20T10:00:00Z', NULL),
             ('w1', 'deposit', 'd-released', 'EARLY_RELEASED', '2026-11-20T10:00:00Z', NULL),
             ('w1', 'deposit', 'd-done', 'COMPLETED', '2026-11-20T10:00:00Z', '2026-11-20T10:00:00Z'),
             ('w1', 'deposit', 'd-cancelled', 'CANCELLED', '2026-11-21T11:00:00.123456Z', NULL),
             ('w1', 'deposit', 'd-unseen', NULL, NULL, NULL),
             ('w1', 'cashout', 'c-hold', 'ON_HOLD', '2026-11-20T10:00:00Z', NULL),
             ('w1', 'cashout', 'c-done', 'COMPLETED', '2026-11-22T12:00:00Z', '2026-11-22T12:00:00.000001Z'),
             ('w1', 'cashout', 'c-rejected', 'REJECTED', '2026-11-22T12:00:00Z', '2026-11-21T12:00:00Z'),
             ('w1', 'refund', 'r-details', 'INCORRECT_DETAILS', '2026-11-20T10:00:00Z', NULL),
             ('w1', 'refund', 'r-done', 'COMPLETED', '2026-11-23T12:00:00Z', '2026-11-23T12:00:00Z'),
             ('w1', 'refund', 'r-cancelled', 'CANCELLED', '2026-11-23T12:00:00Z', NULL)`.execute(t.db);
    const watched = await sql<{ id: string; watch: string | null; at: string | null }>`
      SELECT entity_id AS id, watch, to_char(watch_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') AS at
      FROM mirrors WHERE merchant_account = 'w1' ORDER BY entity_id`.execute(t.db);
    expect(watched.rows).toEqual([
      { id: 'c-done', watch: 'completed', at: '2026-11-22T12:00:00.000001' },
      { id: 'c-hold', watch: 'open', at: null },
      { id: 'c-rejected', watch: null, at: null },
      { id: 'd-cancelled', watch: 'cancelled', at: '2026-11-21T11:00:00.123456' },
      { id: 'd-created', watch: 'open', at: null },
      { id: 'd-done', watch: null, at: null },
      { id: 'd-released', watch: 'open', at: null },
      { id: 'd-unseen', watch: null, at: null },
      { id: 'r-cancelled', watch: null, at: null },
      { id: 'r-details', watch: 'open', at: null },
      { id: 'r-done', watch: 'completed', at: '2026-11-23T12:00:00.000000' },
    ]);
    // The status moves the row between sets (the columns are generated, no writer sets them).
    await sql`UPDATE mirrors SET status = 'COMPLETED', completed_at = '2026-11-24T00:00:00Z'
      WHERE merchant_account = 'w1' AND entity_id = 'c-hold'`.execute(t.db);
    const moved = await sql<{ watch: string | null; at: Date | null }>`
      SELECT watch, watch_at AS at FROM mirrors WHERE merchant_account = 'w1' AND entity_id = 'c-hold'`.execute(
      t.db,
    );
    expect(moved.rows).toEqual([{ watch: 'completed', at: new Date('2026-11-24T00:00:00Z') }]);
  });

  it('are indexed on the side table, so a status change leaves the indexes of mirrors alone', async () => {
    // No index of mirrors reads the status or the sets (key, expression or predicate), so a reading that
    // changes only those can update the row HOT, and fillfactor leaves the page room for it.
    const defs = await sql<{ def: string }>`
      SELECT indexdef AS def FROM pg_indexes WHERE tablename = 'mirrors' AND schemaname = current_schema()`.execute(
      t.db,
    );
    expect(defs.rows.length).toBeGreaterThan(0);
    for (const { def } of defs.rows)
      expect(def).not.toMatch(/\b(status|status_since|completed_at|watch|watch_at)\b/);
    const options = await sql<{ options: string[] | null }>`
      SELECT reloptions AS options FROM pg_class WHERE oid = 'mirrors'::regclass`.execute(t.db);
    expect(options.rows[0]?.options).toEqual(['fillfactor=50']);
    const inFlight = await sql<{ def: string }>`
      SELECT indexdef AS def FROM pg_indexes WHERE indexname = 'mirror_watches_in_flight_ix'
        AND schemaname = current_schema()`.execute(t.db);
    expect(inFlight.rows[0]?.def).toContain('watch');
    expect(inFlight.rows[0]?.def).not.toContain('status');
    expect(await indexesOf(t.db, 'mirror_watches')).toEqual([
      'mirror_watches_cancelled_ix',
      'mirror_watches_completed_ix',
      'mirror_watches_in_flight_ix',
      'mirror_watches_open_ix',
      'mirror_watches_pk',
    ]);
  });
});

describe('a database made by migrations this code does not have', () => {
  it('is refused in one line that says it is re-created', async () => {
    const other = await createTestDatabase();
    try {
      await sql`INSERT INTO kysely_migration (name, timestamp) VALUES ('20261121T1040_ledger', now()::text)`.execute(
        other.db,
      );
      await expect(migrateToLatest(other.db)).rejects.toMatchObject({
        code: 'CONFLICT',
        message: expect.stringMatching(
          /^database: it ran migration 20261121T1040_ledger, which this code does not have \(.*re-created.*\)$/,
        ),
      });
    } finally {
      await other.drop();
    }
  });
});
