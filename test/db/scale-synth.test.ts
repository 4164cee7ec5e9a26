/**
 * The synthesizer of `npm run bench:scale` (bench/scale-synth.ts) at a tiny size: the year it writes is one
 * the full verification accepts (entries, postings, running balances, snapshots, effects wanted by every
 * status path), so the bench cannot silently measure a database the ledger would not have written. Also
 * that every kind of payment the bench claims is there, and that a corrupted posting is caught (the
 * verification really reads what was written).
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { synthesizeScale } from '../../bench/scale-synth.ts';
import { takeBalanceSnapshots } from '../../src/db/ledger/balance-snapshots.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});

describe('bench:scale synthesizer', () => {
  it('writes a year of 2,000 payments that the full verification accepts', async () => {
    const result = await synthesizeScale(t.db, { payments: 2_000, chunk: 700 });
    expect(result.rows.mirrors).toBe(2_000);
    expect(result.rows.intents).toBe(2_000);
    // The synthesizer wrote the year's snapshots: the snapshot job finds nothing missing.
    expect(await takeBalanceSnapshots(t.db)).toBe(0);
    const snapshots = await sql<{
      n: string;
    }>`SELECT count(*)::text AS n FROM ledger_balance_snapshots`.execute(t.db);
    expect(Number(snapshots.rows[0]!.n)).toBeGreaterThan(360 * 20);
    const full = await verifyLedger(t.db);
    expect(full.failures).toEqual([]);
    expect(full.entities).toBe(2_000);
    const inc = await verifyLedger(t.db, { since: new Date(Date.now() - 25 * 3_600_000) });
    expect(inc.failures).toEqual([]);

    const { rows } = await sql<{ kind: string; status: string; book: string; n: string }>`
      SELECT m.entity_kind AS kind, m.status, CASE WHEN m.test THEN 'test' WHEN m.crypto THEN 'crypto' ELSE 'live' END
        AS book, count(*)::text AS n
      FROM mirrors m GROUP BY 1, 2, 3`.execute(t.db);
    const seen = new Set(rows.map((r) => `${r.kind} ${r.status} ${r.book}`));
    for (const want of [
      'deposit COMPLETED live',
      'deposit DECLINED live',
      'deposit CANCELLED live',
      'deposit COMPLETED test',
      'deposit COMPLETED crypto',
      'cashout COMPLETED live',
      'cashout CANCELLED live',
      'cashout REJECTED live',
      'cashout DECLINED live',
      'refund COMPLETED live',
      'refund COMPLETED test',
      'refund CANCELLED live',
    ]) {
      expect(seen, want).toContain(want);
    }
    const effects = await sql<{ effect: string }>`SELECT DISTINCT effect FROM journal_entries`.execute(t.db);
    expect(effects.rows.map((r) => r.effect).sort()).toEqual(
      [
        'credit',
        'crypto_approved',
        'crypto_delivered',
        'early_release_reversal',
        'fee',
        'late_reversal',
        'release',
        'reserve',
        'settle',
      ].sort(),
    );
    const exceptions = await sql<{ type: string }>`SELECT DISTINCT type FROM exceptions`.execute(t.db);
    expect(exceptions.rows.length).toBeGreaterThan(0);
  });

  it('is checked for real: one entry more than its path wants is named by the verification', async () => {
    const { rows } = await sql<{ entity_id: string }>`
      SELECT entity_id FROM mirrors WHERE entity_kind = 'deposit' AND status = 'DECLINED' AND NOT ever_early_released
      LIMIT 1`.execute(t.db);
    const id = rows[0]!.entity_id;
    const entry = await sql<{ id: string }>`
      INSERT INTO journal_entries (idempotency_key, merchant_account, entity_kind, entity_id, effect, direction, seq,
        book, currency, amount, effective_at)
      SELECT 'deposit:' || merchant_account || ':' || entity_id || ':credit', merchant_account, 'deposit', entity_id,
        'credit', 1, 1, 'live', currency, amount, now()
      FROM mirrors WHERE entity_kind = 'deposit' AND entity_id = ${id} RETURNING id`.execute(t.db);
    await sql`
      INSERT INTO postings (entry_id, merchant_account, currency, book, account, amount)
      SELECT e.id, e.merchant_account, e.currency, 'live', a.account, a.sign * e.amount
      FROM journal_entries e, (VALUES ('available', 1), ('deposits', -1)) a(account, sign)
      WHERE e.id = ${entry.rows[0]!.id}`.execute(t.db);
    const full = await verifyLedger(t.db);
    expect(full.failures.join('\n')).toContain(`deposit m`);
    expect(full.failures.join('\n')).toContain(`/${id} (status DECLINED)`);
  });

  it('puts monthPayments of the payments in the last whole calendar month (SCALE_MONTH_PAYMENTS), a year the verification accepts too', async () => {
    const dense = await createTestDatabase();
    try {
      const result = await synthesizeScale(dense.db, { payments: 2_000, monthPayments: 1_200, chunk: 300 });
      const month = result.month!;
      expect(month.end.getUTCDate()).toBe(1);
      expect(month.start.getTime()).toBeLessThan(result.end.getTime());
      // Intents are made a second before their payment: exactly the month's payments fall in it.
      const { rows } = await sql<{ inside: string; before: string; after: string }>`
        SELECT count(*) FILTER (WHERE created_at >= ${month.start} AND created_at < ${month.end})::text AS inside,
          count(*) FILTER (WHERE created_at < ${month.start})::text AS before,
          count(*) FILTER (WHERE created_at >= ${month.end})::text AS after
        FROM intents`.execute(dense.db);
      expect(Number(rows[0]!.inside)).toBe(1_200);
      expect(Number(rows[0]!.before) + Number(rows[0]!.after)).toBe(800);
      expect(Number(rows[0]!.before)).toBeGreaterThan(Number(rows[0]!.after));
      const full = await verifyLedger(dense.db);
      expect(full.failures).toEqual([]);
      expect(full.entities).toBe(2_000);
    } finally {
      await dense.drop();
    }
  });
});

describe('bench:scale synthesizer, a busy last day (SCALE_LAST_DAY)', () => {
  let u: TestDatabase;
  beforeAll(async () => {
    u = await createTestDatabase();
  });
  afterAll(async () => {
    await u?.drop();
  });

  it('puts the asked number of payments in the last 24 hours, and the verifications accept the year', async () => {
    const end = new Date(Date.now() - 3 * 3_600_000);
    await synthesizeScale(u.db, { payments: 1_000, lastDay: 600, chunk: 300, end });
    const { rows } = await sql<{ day: string; before: string }>`
      SELECT count(*) FILTER (WHERE first_seen_at > ${new Date(end.getTime() - 86_400_000)})::text AS day,
        count(*) FILTER (WHERE first_seen_at <= ${new Date(end.getTime() - 86_400_000)})::text AS before
      FROM mirrors`.execute(u.db);
    // Refunds are first seen an hour after their creation: the day's count is the payments created in it.
    expect(Number(rows[0]!.day)).toBeGreaterThanOrEqual(600 - 40);
    expect(Number(rows[0]!.day)).toBeLessThanOrEqual(600 + 40);
    expect(Number(rows[0]!.day) + Number(rows[0]!.before)).toBe(1_000);
    expect((await verifyLedger(u.db)).failures).toEqual([]);
    const inc = await verifyLedger(u.db, { since: new Date(end.getTime() - 22 * 3_600_000) });
    expect(inc.failures).toEqual([]);
    expect(inc.entities).toBeGreaterThan(500);
  });
});
