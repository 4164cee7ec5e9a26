/**
 * The reads behind the balances page's charts (src/db/chart-queries.ts), with exact figures: entries
 * booked by hand at chosen instants (the service stamps now) either side of each period bound, daily
 * snapshots taken, then balances over time, today's and the month's movements by effect, the volumes
 * per local day (two time zones) and the open exceptions per age bucket at each bucket's bounds.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { takeBalanceSnapshots } from '../../src/db/ledger/balance-snapshots.ts';
import {
  balanceHistory,
  balanceMovements,
  dailyVolumes,
  openExceptionsByAge,
} from '../../src/db/read-models/charts.ts';
import { formatAmount } from '../../src/domain/money.ts';
import { bookAt } from './fixtures.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
  await sql`INSERT INTO merchant_accounts (name) VALUES ('acme'), ('other')`.execute(t.db);
  await sql`INSERT INTO ledger_accounts (merchant_account, currency, book, name)
    SELECT m, c, 'live', n FROM unnest(ARRAY['acme', 'other']) m, unnest(ARRAY['BRL', 'USD']) c,
      unnest(ARRAY['available', 'reserved', 'deposits', 'payouts']) n`.execute(t.db);
});
afterAll(async () => {
  await t?.drop();
});

/** One balanced entry at `at`: `debit` +amount, `credit` -amount (amount as decimal text). */
const book = (
  at: string,
  effect: string,
  direction: 1 | -1,
  debit: string,
  credit: string,
  amount: string,
  currency = 'BRL',
  account = 'acme',
) => bookAt(t.db, at, effect, direction, debit, credit, amount, currency, account);

const MONTH = new Date('2026-10-01T00:00:00Z');
const TODAY = new Date('2026-10-15T00:00:00Z');
const TO = new Date('2026-10-16T00:00:00Z');

describe('balance charts', () => {
  beforeAll(async () => {
    await book('2026-09-30T23:59:59.999Z', 'credit', 1, 'available', 'deposits', '100.00');
    await book('2026-10-01T00:00:00Z', 'credit', 1, 'available', 'deposits', '250.50');
    await book('2026-10-02T08:00:00Z', 'credit', 1, 'available', 'deposits', '5.00', 'USD');
    await book('2026-10-03T08:00:00Z', 'credit', 1, 'available', 'deposits', '9.99', 'BRL', 'other');
    await book('2026-10-10T12:00:00Z', 'reserve', 1, 'reserved', 'available', '80.25');
    await book('2026-10-15T00:00:00Z', 'settle', 1, 'payouts', 'reserved', '80.25');
    await book('2026-10-15T09:00:00Z', 'reserve', 1, 'reserved', 'available', '30.00');
    // A reversal of a credit: the mirror image.
    await book('2026-10-15T10:00:00Z', 'credit', -1, 'deposits', 'available', '20.00');
    await book('2026-10-16T00:00:00Z', 'credit', 1, 'available', 'deposits', '1.00');
    await takeBalanceSnapshots(t.db);
  });

  it('gives each available and reserved balance at each UTC midnight of the period', async () => {
    const rows = await balanceHistory(
      t.db,
      new Date('2026-09-30T00:00:00Z'),
      new Date('2026-10-17T00:00:00Z'),
      'acme',
    );
    const series = (currency: string, account: string) =>
      Object.fromEntries(
        rows
          .filter((r) => r.currency === currency && r.account === account)
          .map((r) => [r.at.toISOString().slice(0, 10), formatAmount(r.balance)]),
      );
    const available = series('BRL', 'available');
    // The first snapshot is the midnight after the first posting; a posting at midnight counts from the next.
    expect(Object.keys(available)).toHaveLength(17);
    expect(available).toMatchObject({
      '2026-10-01': '100.00',
      '2026-10-02': '350.50',
      '2026-10-10': '350.50',
      '2026-10-11': '270.25',
      '2026-10-15': '270.25',
      '2026-10-16': '220.25',
      '2026-10-17': '221.25',
    });
    const reserved = series('BRL', 'reserved');
    expect(Object.keys(reserved)[0]).toBe('2026-10-11');
    expect(reserved).toMatchObject({ '2026-10-11': '80.25', '2026-10-15': '80.25', '2026-10-16': '30.00' });
    expect(series('USD', 'available')['2026-10-03']).toBe('5.00');
    // Only the balance accounts, only the account asked for.
    expect(new Set(rows.map((r) => r.account))).toEqual(new Set(['available', 'reserved']));
    expect(rows.every((r) => r.merchantAccount === 'acme')).toBe(true);
    const all = await balanceHistory(
      t.db,
      new Date('2026-10-04T00:00:00Z'),
      new Date('2026-10-04T00:00:00Z'),
    );
    expect(
      all.map((r) => `${r.merchantAccount}/${r.currency}/${r.account}=${formatAmount(r.balance)}`).sort(),
    ).toEqual(['acme/BRL/available=350.50', 'acme/USD/available=5.00', 'other/BRL/available=9.99']);
  });

  it("gives today's and the month's movements in and out of each balance by effect and direction", async () => {
    const rows = await balanceMovements(t.db, MONTH, TODAY, TO, 'acme');
    expect(
      rows.map((r) =>
        [
          r.currency,
          r.account,
          r.effect,
          r.direction,
          formatAmount(r.todayIn),
          formatAmount(r.todayOut),
          formatAmount(r.monthIn),
          formatAmount(r.monthOut),
        ].join(' '),
      ),
    ).toEqual([
      'BRL available credit 1 0.00 0.00 250.50 0.00',
      'BRL available credit -1 0.00 -20.00 0.00 -20.00',
      'BRL available reserve 1 0.00 -30.00 0.00 -110.25',
      'BRL reserved reserve 1 30.00 0.00 110.25 0.00',
      'BRL reserved settle 1 0.00 -80.25 0.00 -80.25',
      'USD available credit 1 0.00 0.00 5.00 0.00',
    ]);
    expect((await balanceMovements(t.db, MONTH, TODAY, TO)).some((r) => r.merchantAccount === 'other')).toBe(
      true,
    );
  });
});

describe('volume and exception charts', () => {
  beforeAll(async () => {
    const mirror = (
      kind: string,
      id: string,
      status: string | null,
      currency: string | null,
      amount: string | null,
      firstSeen: string | null,
      createdAt: string,
      test = false,
    ) =>
      sql`INSERT INTO mirrors (merchant_account, entity_kind, entity_id, status, currency, amount, test, first_seen_at, created_at)
        VALUES ('acme', ${kind}, ${id}, ${status}, ${currency}, ${amount}::numeric, ${test}, ${firstSeen}::timestamptz,
          ${createdAt}::timestamptz)`.execute(t.db);
    const created = '2026-10-20T00:00:00Z';
    await mirror('deposit', 'd0', 'COMPLETED', 'BRL', '1.00', '2026-09-30T23:59:59Z', created);
    await mirror('deposit', 'd1', 'COMPLETED', 'BRL', '100.00', '2026-10-14T23:30:00Z', created);
    await mirror('deposit', 'd2', 'COMPLETED', 'BRL', '50.25', '2026-10-15T01:00:00Z', created);
    await mirror('deposit', 'd3', 'EXPIRED', 'BRL', '10.00', '2026-10-15T02:00:00Z', created);
    await mirror('deposit', 'd4', 'COMPLETED', 'BRL', '7.00', '2026-10-15T03:00:00Z', created, true);
    // Known only from an intent: no status, no first sighting; counted on its creation day.
    await mirror('cashout', 'c1', null, null, null, null, '2026-10-15T04:00:00Z');
    await mirror('refund', 'r1', 'COMPLETED', 'USD', '3.00', '2026-10-16T00:00:00Z', created);
  });

  it('counts and sums the entities first seen per local day, kind, status, currency and test flag', async () => {
    const text = (rows: Awaited<ReturnType<typeof dailyVolumes>>) =>
      rows.map((r) =>
        [r.day, r.kind, r.status, r.currency ?? '-', r.test, r.count, formatAmount(r.amount)].join(' '),
      );
    expect(text(await dailyVolumes(t.db, MONTH, TO, 'UTC', 'acme'))).toEqual([
      '2026-10-14 deposit COMPLETED BRL false 1 100.00',
      '2026-10-15 cashout NONE - false 1 0.00',
      '2026-10-15 deposit COMPLETED BRL false 1 50.25',
      '2026-10-15 deposit COMPLETED BRL true 1 7.00',
      '2026-10-15 deposit EXPIRED BRL false 1 10.00',
    ]);
    // Three hours behind UTC: the early hours of the 15th belong to the 14th.
    expect(text(await dailyVolumes(t.db, MONTH, TO, 'America/Sao_Paulo'))).toEqual([
      '2026-10-14 deposit COMPLETED BRL false 2 150.25',
      '2026-10-14 deposit EXPIRED BRL false 1 10.00',
      '2026-10-15 cashout NONE - false 1 0.00',
      '2026-10-15 deposit COMPLETED BRL true 1 7.00',
    ]);
    expect(await dailyVolumes(t.db, MONTH, TO, 'UTC', 'other')).toEqual([]);
  });

  it('reads a period of volumes through the first-seen index, not a scan of all mirrors', async () => {
    await sql`SET enable_seqscan = off`.execute(t.db);
    const { rows } = await sql<{ 'QUERY PLAN': string }>`EXPLAIN SELECT count(*) FROM mirrors m
      WHERE coalesce(m.first_seen_at, m.created_at) >= ${MONTH} AND coalesce(m.first_seen_at, m.created_at) < ${TO}`.execute(
      t.db,
    );
    await sql`RESET enable_seqscan`.execute(t.db);
    expect(rows.map((r) => r['QUERY PLAN']).join('\n')).toContain('mirrors_first_seen_ix');
  });

  it('counts unresolved exceptions per age bucket and severity, each bound in the older bucket', async () => {
    const now = new Date('2026-10-15T12:00:00Z');
    const DAY = 86_400_000;
    const ago = (days: number) => new Date(now.getTime() - days * DAY);
    const cases: [string, number, string, string][] = [
      ['x1', 0, 'low', 'open'],
      ['x2', 0.99, 'high', 'in_review'],
      ['x3', 1, 'low', 'open'],
      ['x4', 2.99, 'low', 'acknowledged'],
      ['x5', 3, 'critical', 'open'],
      ['x6', 6.99, 'critical', 'open'],
      ['x7', 7, 'high', 'open'],
      ['x8', 30, 'high', 'open'],
      ['x9', 30, 'high', 'resolved'],
    ];
    for (const [id, days, severity, state] of cases) {
      await sql`INSERT INTO exceptions (type, merchant_account, entity_kind, entity_id, severity, state, first_seen_at, last_seen_at)
        VALUES ('STUCK', 'acme', 'deposit', ${id}, ${severity}, ${state}, ${ago(days)}, ${now})`.execute(
        t.db,
      );
    }
    const rows = await openExceptionsByAge(t.db, now);
    expect(rows.map((r) => `${r.bucket} ${r.severity} ${r.count}`)).toEqual([
      '1to3d low 2',
      '3to7d critical 2',
      'gt7d high 2',
      'lt1d high 1',
      'lt1d low 1',
    ]);
    expect(await openExceptionsByAge(t.db, now, 'other')).toEqual([]);
  });
});
