/**
 * Daily balance snapshots: postings spread over past days (booked with their instants
 * by hand: the service stamps now), snapshots taken, then the balance at many instants (each posting's,
 * a millisecond either side, each midnight) equals the sum of the postings up to it; taking snapshots
 * again writes nothing; verification names a snapshot changed by hand.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SETTLE_MS, takeBalanceSnapshots } from '../../src/db/ledger/balance-snapshots.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { balances } from '../../src/db/read-models/balances.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});

const DAY = 86_400_000;
/** The latest midnight a snapshot may be taken at (10 minutes after it, SETTLE_MS). */
const today = Math.floor((Date.now() - SETTLE_MS) / DAY) * DAY;

/** A balanced entry (available +cents, deposits -cents, or fees for the odd ones) posted at `at`. */
async function post(n: number, currency: string, cents: number, at: Date) {
  const { rows } = await sql<{ id: string }>`
    INSERT INTO journal_entries (idempotency_key, merchant_account, entity_kind, entity_id, effect, direction, seq, book,
      currency, amount, effective_at, created_at)
    VALUES (${`deposit:acme:s${n}:credit`}, 'acme', 'deposit', ${`s${n}`}, 'credit', 1, 1, 'live', ${currency},
      ${(cents / 100).toFixed(2)}::numeric, ${at}, ${at}) RETURNING id`.execute(t.db);
  const other = n % 2 === 0 ? 'deposits' : 'fees';
  await sql`INSERT INTO postings (entry_id, merchant_account, currency, book, account, amount, created_at)
    VALUES (${rows[0]!.id}::bigint, 'acme', ${currency}, 'live', 'available', ${`${cents / 100}`}::numeric, ${at}),
      (${rows[0]!.id}::bigint, 'acme', ${currency}, 'live', ${other}, ${`${-cents / 100}`}::numeric, ${at})`.execute(
    t.db,
  );
}

async function summed(at: Date): Promise<Record<string, bigint>> {
  const { rows } = await sql<{ k: string; s: string }>`
    SELECT a.currency || '/' || a.name AS k, coalesce(sum(p.amount), 0)::text AS s
    FROM ledger_accounts a LEFT JOIN postings p ON p.merchant_account = a.merchant_account AND p.currency = a.currency
      AND p.book = a.book AND p.account = a.name AND p.created_at <= ${at}
    GROUP BY 1`.execute(t.db);
  return Object.fromEntries(rows.map((r) => [r.k, BigInt(r.s.replace('.', ''))]));
}

async function atInstant(at: Date): Promise<Record<string, bigint>> {
  const rows = await balances(t.db, { at });
  return Object.fromEntries(rows.map((r) => [`${r.currency}/${r.account}`, r.balance]));
}

describe('balance snapshots', () => {
  it('give the balance at any instant as the sum of the postings up to it', async () => {
    await sql`INSERT INTO merchant_accounts (name) VALUES ('acme')`.execute(t.db);
    await sql`INSERT INTO ledger_accounts (merchant_account, currency, book, name)
      SELECT 'acme', c, 'live', n FROM unnest(ARRAY['BRL', 'USD']) c, unnest(ARRAY['available', 'deposits', 'fees']) n`.execute(
      t.db,
    );
    const instants: Date[] = [];
    // Six days back to yesterday, a few postings a day, some exactly at midnight; none today.
    for (let n = 0; n < 40; n++) {
      const day = today - (6 - (n % 6)) * DAY;
      const at = new Date(n % 7 === 0 ? day : day + ((n * 7_919_993) % DAY));
      instants.push(at);
      await post(n, n % 3 === 0 ? 'USD' : 'BRL', 100 + n * 37, at);
    }
    // Yesterday's midnight is the latest one old enough; days from the first posting's up to it.
    const written = await takeBalanceSnapshots(t.db);
    expect(await takeBalanceSnapshots(t.db)).toBe(0);
    // One a day per account from the day after its first posting's to today's midnight.
    const perAccount = await sql<{ days: string; expected: string; last: Date }>`
      SELECT count(*)::text AS days, max(s.at) AS last,
        (SELECT ${today / DAY}::int - floor(extract(epoch FROM min(p.created_at)) / 86400)::int FROM postings p
          WHERE p.currency = s.currency AND p.account = s.account)::text AS expected
      FROM ledger_balance_snapshots s GROUP BY s.currency, s.account`.execute(t.db);
    expect(perAccount.rows).toHaveLength(6);
    expect(perAccount.rows.reduce((n, r) => n + Number(r.days), 0)).toBe(written);
    for (const r of perAccount.rows) {
      expect(r.days).toBe(r.expected);
      expect(new Date(r.last).getTime()).toBe(today);
    }

    const probes = [new Date(today - 7 * DAY)];
    for (let d = 6; d >= 0; d--) probes.push(new Date(today - d * DAY), new Date(today - d * DAY - 1));
    for (const at of instants) probes.push(at, new Date(at.getTime() - 1), new Date(at.getTime() + 1));
    probes.push(new Date(today + 1_000));
    for (const at of probes) {
      expect({ at, balances: await atInstant(at) }).toEqual({ at, balances: await summed(at) });
    }
    // The balances are not all zero: the probes saw money move.
    expect(Object.values(await atInstant(new Date(today))).some((b) => b !== 0n)).toBe(true);
    expect((await verifyLedger(t.db)).failures).toEqual([]);
  });

  it('verification names a snapshot changed by hand', async () => {
    const at = new Date(today - 2 * DAY);
    await sql`UPDATE ledger_balance_snapshots SET balance = balance - 1
      WHERE currency = 'BRL' AND account = 'available' AND at = ${at}`.execute(t.db);
    const real = (await summed(new Date(at.getTime() - 1)))['BRL/available']!;
    const text = (c: bigint) => `${c / 100n}.${String(c % 100n).padStart(2, '0')}`;
    // The balance just after it reads the snapshot (so it shows the corruption), the one before does not.
    const after = new Date(at.getTime() + 1);
    expect((await atInstant(after))['BRL/available']).toBe((await summed(after))['BRL/available']! - 100n);
    const before = new Date(at.getTime() - 1);
    expect((await atInstant(before))['BRL/available']).toBe(real);
    const { ok, failures } = await verifyLedger(t.db);
    expect(ok).toBe(false);
    expect(failures).toEqual([
      `balance snapshot differs from postings: acme BRL live/available at ${at.toISOString()}: ` +
        `snapshot ${text(real - 100n)}, postings before it sum to ${text(real)}`,
    ]);
  });
});
