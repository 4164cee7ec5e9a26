/**
 * The ledger's movements per account, effect, direction and UTC day or hour (`ledger_movements`), which
 * the balances page reads instead of a month of postings: kept by the postings' trigger under two
 * concurrent reconcilers (no deadlock retry allowed) and for entries booked by hand at chosen instants;
 * the page's movements (`balanceMovements`) equal the sums over the postings for periods on and off the
 * hour and the day (a +05:30 time zone), closed and open at now; `verifyLedger`, full and incremental,
 * names a changed and a missing row.
 */

import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb } from '../../src/db/connection.ts';
import { applyObservations } from '../../src/db/ledger/service.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { balanceMovements } from '../../src/db/read-models/charts.ts';
import type { Database } from '../../src/db/schema.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import { formatAmount } from '../../src/domain/money.ts';
import type { Observation } from '../../src/domain/observation.ts';
import { bookAt, depositBatches } from './fixtures.ts';
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

/** One balanced live entry of acme at `at`: `debit` +amount, `credit` -amount (decimal text). */
const book = (at: string, effect: string, direction: 1 | -1, debit: string, credit: string, amount: string) =>
  bookAt(t.db, at, effect, direction, debit, credit, amount);

/** The movements as the page lists them, one line each. */
async function pageLines(monthStart: Date, todayStart: Date, to: Date, open = false): Promise<string[]> {
  const rows = await balanceMovements(t.db, monthStart, todayStart, to, null, open);
  return rows.map((r) =>
    [
      r.merchantAccount,
      r.currency,
      r.book,
      r.account,
      r.effect,
      r.direction,
      formatAmount(r.todayIn),
      formatAmount(r.todayOut),
      formatAmount(r.monthIn),
      formatAmount(r.monthOut),
    ].join(' '),
  );
}

/** The same figures summed over the postings themselves (what the page read before the table). */
async function postingLines(monthStart: Date, todayStart: Date, to: Date | null): Promise<string[]> {
  const { rows } = await sql<{ line: string }>`
    SELECT concat_ws(' ', p.merchant_account, p.currency, p.book, p.account, e.effect, e.direction,
      to_char(coalesce(sum(p.amount) FILTER (WHERE p.created_at >= ${todayStart} AND p.amount > 0), 0), 'FM999999999990.00'),
      to_char(coalesce(sum(p.amount) FILTER (WHERE p.created_at >= ${todayStart} AND p.amount < 0), 0), 'FM999999999990.00'),
      to_char(coalesce(sum(p.amount) FILTER (WHERE p.amount > 0), 0), 'FM999999999990.00'),
      to_char(coalesce(sum(p.amount) FILTER (WHERE p.amount < 0), 0), 'FM999999999990.00')) AS line
    FROM postings p JOIN journal_entries e ON e.id = p.entry_id
    WHERE p.account IN ('available', 'reserved', 'test_available', 'test_reserved')
      AND p.created_at >= ${monthStart} AND (${to}::timestamptz IS NULL OR p.created_at < ${to})
    GROUP BY p.merchant_account, p.currency, p.book, p.account, e.effect, e.direction
    ORDER BY p.merchant_account, p.currency, p.book, p.account, e.effect, e.direction DESC`.execute(t.db);
  return rows.map((r) => r.line);
}

const batches = (prefix: string, reversed: boolean) =>
  depositBatches(prefix, reversed, { batches: 6, perBatch: 25 });

const at = (iso: string) => new Date(iso);

describe('ledger movements', () => {
  it('are kept under two concurrent reconcilers, and the page reads now what the postings sum to', async () => {
    const run = async (db: Kysely<Database>, list: Observation[][]) => {
      for (const batch of list) {
        await withLedgerTransaction(db, (trx) => applyObservations(trx, batch), { maxAttempts: 1 });
      }
    };
    await Promise.all([run(t.db, batches('a', false)), run(other, batches('b', true))]);
    expect((await verifyLedger(t.db)).failures).toEqual([]);
    // Now: today and the month open at now (the open hour read whole from its hour row).
    const now = new Date();
    const day = new Date(Math.floor(now.getTime() / 86_400_000) * 86_400_000);
    const month = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
    const lines = await pageLines(month, day, now, true);
    expect(lines.length).toBeGreaterThanOrEqual(4);
    expect(lines).toEqual(await postingLines(month, day, null));
  });

  it('give the sums over the postings for periods on and off the hour and the day', async () => {
    await sql`INSERT INTO ledger_accounts (merchant_account, currency, book, name)
      SELECT 'acme', 'BRL', 'live', n FROM unnest(ARRAY['available', 'reserved', 'deposits', 'payouts']) n
      ON CONFLICT DO NOTHING`.execute(t.db);
    await book('2026-09-30T23:59:59.999Z', 'credit', 1, 'available', 'deposits', '100.00');
    await book('2026-10-01T00:00:00Z', 'credit', 1, 'available', 'deposits', '250.50');
    await book('2026-10-01T18:29:59Z', 'credit', 1, 'available', 'deposits', '3.00');
    await book('2026-10-01T18:30:00Z', 'credit', 1, 'available', 'deposits', '4.00');
    await book('2026-10-10T12:00:00Z', 'reserve', 1, 'reserved', 'available', '80.25');
    await book('2026-10-14T18:29:00Z', 'reserve', 1, 'reserved', 'available', '7.00');
    await book('2026-10-14T18:30:00Z', 'settle', 1, 'payouts', 'reserved', '80.25');
    await book('2026-10-15T09:00:00Z', 'reserve', 1, 'reserved', 'available', '30.00');
    await book('2026-10-15T09:40:00Z', 'credit', -1, 'deposits', 'available', '20.00');
    await book('2026-10-15T09:45:00Z', 'credit', 1, 'available', 'deposits', '6.00');
    await book('2026-10-16T00:00:00Z', 'credit', 1, 'available', 'deposits', '1.00');
    const periods: [string, string, string][] = [
      // UTC: whole days and hours.
      ['2026-10-01T00:00:00Z', '2026-10-15T00:00:00Z', '2026-10-16T00:00:00Z'],
      // Asia/Kolkata (+05:30): month and day start at 18:30 UTC; an instant within an hour.
      ['2026-09-30T18:30:00Z', '2026-10-14T18:30:00Z', '2026-10-15T09:42:00Z'],
      // Today and the month within one hour.
      ['2026-10-15T09:30:00Z', '2026-10-15T09:41:00Z', '2026-10-15T09:50:00Z'],
      // Both ends on the hour, not the day.
      ['2026-10-01T18:00:00Z', '2026-10-15T09:00:00Z', '2026-10-15T10:00:00Z'],
    ];
    for (const [month, today, to] of periods) {
      const lines = await pageLines(at(month), at(today), at(to));
      expect(lines.length, `${month} ${today} ${to}`).toBeGreaterThan(0);
      expect(lines, `${month} ${today} ${to}`).toEqual(await postingLines(at(month), at(today), at(to)));
    }
    // One figure by hand: the +05:30 month's reversal out of available up to 09:42 UTC.
    expect(await pageLines(at(periods[1]![0]), at(periods[1]![1]), at(periods[1]![2]))).toContain(
      'acme BRL live available credit -1 0.00 -20.00 0.00 -20.00',
    );
    // (Entries booked by hand have no entity behind them: only the movements' check applies.)
    const { failures } = await verifyLedger(t.db);
    expect(failures.filter((f) => f.startsWith('ledger movement'))).toEqual([]);
  });

  it('verification, full and incremental, names a changed and a missing movement', async () => {
    await sql`UPDATE ledger_movements SET amount_out = amount_out - 0.05
      WHERE merchant_account = 'acme' AND currency = 'BRL' AND book = 'live' AND account = 'available'
        AND hours = 24 AND bucket = '2026-10-15T00:00:00Z' AND effect = 'reserve' AND direction = 1`.execute(
      t.db,
    );
    await sql`DELETE FROM ledger_movements
      WHERE merchant_account = 'acme' AND currency = 'BRL' AND book = 'live' AND account = 'reserved'
        AND hours = 1 AND bucket = '2026-10-10T12:00:00Z' AND effect = 'reserve' AND direction = 1`.execute(
      t.db,
    );
    const changed =
      'ledger movement differs from postings: acme BRL live/available reserve day 2026-10-15T00:00:00.000Z: ' +
      'movements in 0 out -30.05, postings in 0 out -30.00';
    const missing =
      'ledger movement differs from postings: acme BRL live/reserved reserve hour 2026-10-10T12:00:00.000Z: ' +
      'movements in missing out missing, postings in 80.25 out 0';
    const full = await verifyLedger(t.db);
    expect(full.ok).toBe(false);
    expect(full.failures.filter((f) => f.startsWith('ledger movement'))).toEqual([changed, missing]);
    // Incremental from within 15 October: that day's buckets, not 10 October's.
    const recent = await verifyLedger(t.db, { since: new Date('2026-10-15T09:00:00Z') });
    expect(recent.failures.filter((f) => f.startsWith('ledger movement'))).toEqual([changed]);
  });
});
