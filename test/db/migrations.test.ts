import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateDown, migrateToLatest } from '../../src/db/connection.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

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

describe('migrations and ledger constraints', () => {
  it('migrates up, down and up again', async () => {
    const up = await migrateToLatest(t.db);
    expect(up[0]).toBe('Up 20261121T1040_ledger: Success');
    expect(up.every((l) => l.endsWith('Success'))).toBe(true);
    for (let i = up.length; i > 0; i--) {
      const down = await migrateDown(t.db);
      expect(down).toHaveLength(1);
      expect(down[0]).toMatch(/^Down .*: Success$/);
    }
    const tables = await sql<{
      n: number;
    }>`SELECT count(*)::int AS n FROM pg_tables WHERE tablename = 'postings'`.execute(t.db);
    expect(tables.rows[0]?.n).toBe(0);
    const again = await migrateToLatest(t.db);
    expect(again).toHaveLength(up.length);
    // A posting insert maintains one index, its entry's (migration 20261127T0200): an account's postings
    // in a time range are read from ledger_movements and the entries of the period (src/db/ledger-periods.ts).
    const indexes = await sql<{ indexname: string }>`
      SELECT indexname FROM pg_indexes WHERE tablename = 'postings' ORDER BY 1`.execute(t.db);
    expect(indexes.rows.map((r) => r.indexname)).toEqual(['postings_entry_ix']);
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
