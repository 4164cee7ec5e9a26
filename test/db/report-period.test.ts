/**
 * Workbooks read only their period: `ledgerTotals` (the settlement workbook's opening,
 * closing and movements) and `balancesBefore` (the balances page) on postings spread over a week, with
 * the daily snapshots taken. Opening and closing equal the sum of every posting before the instant, for
 * periods on and off midnight, one ending in the future; the movements are the period's postings; a
 * snapshot changed by hand moves the opening it feeds (so the opening is read from it, not summed over
 * history) and breaks opening + movements = closing.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SETTLE_MS, takeBalanceSnapshots } from '../../src/db/ledger/balance-snapshots.ts';
import { type AccountBalance, balancesBefore, ledgerTotals } from '../../src/db/read-models/reports.ts';
import { postAt } from './fixtures.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});

const DAY = 86_400_000;
const HOUR = 3_600_000;
/** The latest midnight a snapshot may be taken at (10 minutes after it, SETTLE_MS). */
const today = Math.floor((Date.now() - SETTLE_MS) / DAY) * DAY;

/** Every account's sum of the postings created before `instant`, for the accounts with one (by hand). */
async function summedBefore(instant: Date): Promise<Record<string, bigint>> {
  const { rows } = await sql<{ k: string; s: string }>`
    SELECT currency || ' ' || account AS k, sum(amount)::text AS s FROM postings
    WHERE created_at < ${instant} GROUP BY 1`.execute(t.db);
  return Object.fromEntries(rows.map((r) => [r.k, BigInt(r.s.replace('.', ''))]));
}

const keyed = (rows: readonly AccountBalance[]) =>
  Object.fromEntries(rows.map((r) => [`${r.currency} ${r.account}`, r.balance]));

describe('a period read from the daily snapshots', () => {
  it('opening and closing equal the sum of every posting before them; movements are the period', async () => {
    // A week back to yesterday, three postings a day in two currencies, some at midnight; then one now.
    for (let n = 0; n < 21; n++) {
      const day = today - (7 - Math.floor(n / 3)) * DAY;
      const at = n % 4 === 0 ? day : day + ((n * 7_919_993) % DAY);
      await postAt(t.db, `p${n}`, 1_000n + BigInt(n * 37), new Date(at), {
        currency: n % 3 === 0 ? 'USD' : 'BRL',
        other: n % 2 === 0 ? 'deposits' : 'fees',
      });
    }
    await postAt(t.db, 'now', 555n, new Date());
    expect(await takeBalanceSnapshots(t.db)).toBeGreaterThan(0);

    const periods: [Date, Date][] = [
      [new Date(today - 5 * DAY), new Date(today - 2 * DAY)],
      [new Date(today - 4 * DAY + 3 * HOUR), new Date(today - DAY + 5 * 60_000)],
      [new Date(today - 9 * DAY), new Date(today - 6 * DAY - 1)],
      [new Date(today - 2 * DAY), new Date(today + 2 * DAY)],
    ];
    for (const [start, end] of periods) {
      const totals = await ledgerTotals(t.db, start, end, null);
      const label = `${start.toISOString()} ${end.toISOString()}`;
      expect({ label, opening: keyed(totals.opening) }).toEqual({
        label,
        opening: await summedBefore(start),
      });
      expect({ label, closing: keyed(totals.closing) }).toEqual({ label, closing: await summedBefore(end) });
      // The movements per account are the period's postings, and close the gap.
      const moved: Record<string, bigint> = {};
      for (const m of totals.movements) {
        moved[`${m.currency} ${m.account}`] = (moved[`${m.currency} ${m.account}`] ?? 0n) + m.amount;
      }
      const { rows } = await sql<{ k: string; s: string }>`
        SELECT currency || ' ' || account AS k, sum(amount)::text AS s FROM postings
        WHERE created_at >= ${start} AND created_at < ${end} GROUP BY 1`.execute(t.db);
      expect({ label, moved }).toEqual({
        label,
        moved: Object.fromEntries(rows.map((r) => [r.k, BigInt(r.s.replace('.', ''))])),
      });
      for (const c of totals.closing) {
        const k = `${c.currency} ${c.account}`;
        expect({ label, k, proof: (keyed(totals.opening)[k] ?? 0n) + (moved[k] ?? 0n) - c.balance }).toEqual({
          label,
          k,
          proof: 0n,
        });
      }
      expect(totals.movements.every((m) => m.lines > 0)).toBe(true);
    }
    // The balances page's reading (before an instant) likewise, and the accounts with no posting yet
    // then are left out, as they were when balances were summed.
    const early = new Date(today - 7 * DAY + 1);
    expect(keyed(await balancesBefore(t.db, early, null))).toEqual(await summedBefore(early));
    expect(Object.keys(await summedBefore(early)).length).toBeLessThan(
      Object.keys(await summedBefore(new Date())).length,
    );
    expect(keyed(await balancesBefore(t.db, new Date(Date.now() + 1_000), 'acme'))).toEqual(
      await summedBefore(new Date(Date.now() + 1_000)),
    );
    expect(await balancesBefore(t.db, new Date(), 'nobody')).toEqual([]);
  });

  it('reads the opening from the snapshot: one changed by hand moves it and breaks the proof', async () => {
    const at = new Date(today - 3 * DAY);
    await sql`UPDATE ledger_balance_snapshots SET balance = balance + 1
      WHERE currency = 'BRL' AND account = 'available' AND at = ${at}`.execute(t.db);
    const start = new Date(at.getTime() + 2 * HOUR);
    const end = new Date(today - DAY + HOUR);
    const totals = await ledgerTotals(t.db, start, end, 'acme');
    expect(keyed(totals.opening)['BRL available']).toBe((await summedBefore(start))['BRL available']! + 100n);
    // The closing reads a later snapshot, right: opening + movements - closing is the 1.00 added.
    expect(keyed(totals.closing)['BRL available']).toBe((await summedBefore(end))['BRL available']);
    const moved = totals.movements
      .filter((m) => m.currency === 'BRL' && m.account === 'available')
      .reduce((s, m) => s + m.amount, 0n);
    expect(keyed(totals.opening)['BRL available']! + moved - keyed(totals.closing)['BRL available']!).toBe(
      100n,
    );
  });
});
