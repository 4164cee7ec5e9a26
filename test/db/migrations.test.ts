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

  it('refuses UPDATE, DELETE and TRUNCATE of entries and postings', async () => {
    await expect(sql`UPDATE postings SET amount = amount`.execute(t.db)).rejects.toThrow(/immutable/);
    await expect(sql`DELETE FROM journal_entries`.execute(t.db)).rejects.toThrow(/immutable/);
    await expect(sql`TRUNCATE postings`.execute(t.db)).rejects.toThrow(/immutable/);
    await expect(sql`DELETE FROM ledger_accounts`.execute(t.db)).rejects.toThrow(/immutable/);
  });

  it('keeps the idempotency key unique', async () => {
    await expect(insertEntry('e-ok')).rejects.toThrow(/journal_entries_idempotency_key_uq/);
  });
});
