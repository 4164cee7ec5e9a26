/**
 * verifyLedger names each broken invariant. The database refuses unbalanced and book-mixing entries by
 * itself, so the breakages here are ones only the verification can see: entries booked behind the
 * service's back that are balanced but wrong.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyObservations } from '../../src/db/ledger/service.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import { obs } from './fixtures.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});

async function book(
  key: string,
  entityId: string,
  book: string,
  lines: [string, string][],
  effect = 'credit',
) {
  await sql`INSERT INTO ledger_accounts (merchant_account, currency, book, name)
    SELECT 'acme', 'BRL', ${book}, n FROM unnest(${lines.map((l) => l[0])}::text[]) n ON CONFLICT DO NOTHING`.execute(
    t.db,
  );
  const { rows } = await sql<{ id: string }>`
    INSERT INTO journal_entries (idempotency_key, merchant_account, entity_kind, entity_id, effect, direction, seq, book,
      currency, amount, effective_at)
    VALUES (${key}, 'acme', 'deposit', ${entityId}, ${effect}, 1, 1, ${book}, 'BRL', 1.00, now()) RETURNING id`.execute(
    t.db,
  );
  await sql`INSERT INTO postings (entry_id, merchant_account, currency, book, account, amount)
    SELECT ${rows[0]!.id}::bigint, 'acme', 'BRL', ${book}, a, x FROM unnest(${lines.map((l) => l[0])}::text[],
      ${lines.map((l) => l[1])}::numeric[]) AS v(a, x)`.execute(t.db);
}

describe('verifyLedger', () => {
  it('passes on what the service booked and names each broken invariant', async () => {
    await withLedgerTransaction(t.db, (trx) =>
      applyObservations(trx, [
        obs('deposit', 'live1', 'COMPLETED', 1),
        obs('deposit', 'test1', 'COMPLETED', 1, { test: true }),
        obs('deposit', 'crypto1', 'APPROVED', 1, { crypto: true }),
      ]),
    );
    expect((await verifyLedger(t.db)).failures).toEqual([]);

    // A test deposit booked in the live book, a crypto deposit touching available, an extra live credit.
    await book('manual:test1', 'test1', 'live', [
      ['available', '1.00'],
      ['deposits', '-1.00'],
    ]);
    await book('manual:crypto1', 'crypto1', 'live', [
      ['available', '1.00'],
      ['deposits', '-1.00'],
    ]);
    await book(
      'manual:live1',
      'live1',
      'live',
      [
        ['fees', '1.00'],
        ['available', '-1.00'],
      ],
      'fee',
    );
    const v = await verifyLedger(t.db);
    expect(v.ok).toBe(false);
    const text = v.failures.join('\n');
    expect(text).toContain('test book mixed with others: manual:test1 in book live');
    expect(text).toContain('crypto deposit touches available: manual:crypto1 posts to available');
    expect(text).toMatch(/applied effects differ from wanted: deposit acme\/live1 \(status COMPLETED\)/);
    expect(text).toMatch(/applied effects differ from wanted: deposit acme\/test1/);
    expect(text).not.toContain('does not balance');
  });
});
