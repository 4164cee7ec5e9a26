/**
 * The incremental verification (`verifyLedger` with `since`, the hourly job's): it reads only its period,
 * so an old snapshot changed by hand is for the full verification to find, while a running balance
 * changed by hand and a wrong entry booked in the period are found by both.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SETTLE_MS, takeBalanceSnapshots } from '../../src/db/ledger/balance-snapshots.ts';
import { applyObservations } from '../../src/db/ledger/service.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import { obs, postAt } from './fixtures.ts';
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

const post = (id: string, cents: number, at: Date) => postAt(t.db, id, BigInt(cents), at);

describe('incremental verification', () => {
  it('checks only its period, and what it checks it names', async () => {
    await withLedgerTransaction(t.db, (trx) =>
      applyObservations(trx, [obs('deposit', 'now1', 'COMPLETED', 1, { feeAmount: 5n, feeCurrency: 'BRL' })]),
    );
    // Old postings (of no entity with a mirror: what the full check of entities would not see either).
    for (let d = 5; d >= 1; d--) await post(`old${d}`, 1_000 + d, new Date(today - d * DAY + 3_600_000));
    expect(await takeBalanceSnapshots(t.db)).toBeGreaterThan(0);
    const since = new Date(Date.now() - DAY);
    expect((await verifyLedger(t.db, { since })).failures).toEqual([]);
    expect((await verifyLedger(t.db)).failures).toEqual([]);

    // An old snapshot changed by hand: outside the period; the full verification names it.
    const old = new Date(today - 3 * DAY);
    await sql`UPDATE ledger_balance_snapshots SET balance = balance + 5
      WHERE account = 'available' AND at = ${old}`.execute(t.db);
    expect((await verifyLedger(t.db, { since })).failures).toEqual([]);
    expect((await verifyLedger(t.db)).failures).toEqual([
      expect.stringMatching(
        new RegExp(
          `^balance snapshot differs from postings: acme BRL live/available at ${old.toISOString()}: `,
        ),
      ),
    ]);
    // Today's midnight is in the period (snapshots from the day before `since` on): the incremental names it.
    await sql`UPDATE ledger_balance_snapshots SET balance = balance + 5
      WHERE account = 'deposits' AND at = ${new Date(today)}`.execute(t.db);
    const snapshotFailure = expect.stringMatching(
      new RegExp(
        `^balance snapshot differs from postings: acme BRL live/deposits at ${new Date(today).toISOString()}: `,
      ),
    );
    // (The running balance, checked against that latest snapshot, then disagrees too: both are named.)
    expect((await verifyLedger(t.db, { since })).failures).toEqual([
      'running balance differs from postings: acme BRL live/deposits: running -150.15, postings sum to -145.15',
      snapshotFailure,
    ]);
    await sql`UPDATE ledger_balance_snapshots SET balance = balance - 5
      WHERE account = 'deposits' AND at = ${new Date(today)}`.execute(t.db);

    // A running balance changed by hand: found against the latest snapshot plus the postings since.
    await sql`UPDATE ledger_balances SET balance = balance + 0.07 WHERE account = 'fees'`.execute(t.db);
    expect((await verifyLedger(t.db, { since })).failures).toEqual([
      expect.stringMatching(
        /^running balance differs from postings: acme BRL live\/fees: running 0\.12, postings sum to 0\.05$/,
      ),
    ]);
    await sql`UPDATE ledger_balances SET balance = balance - 0.07 WHERE account = 'fees'`.execute(t.db);

    // A second credit for the deposit booked now, by hand: the period's entity check names it.
    await post('now1', 10_000, new Date());
    const { failures } = await verifyLedger(t.db, { since });
    expect(failures).toEqual([
      expect.stringMatching(/^applied effects differ from wanted: deposit acme\/now1 /),
    ]);
  });
});

describe('incremental verification, chunk by chunk', () => {
  let u: TestDatabase;
  beforeAll(async () => {
    u = await createTestDatabase();
  });
  afterAll(async () => {
    await u?.drop();
  });
  const apply = (o: Parameters<typeof applyObservations>[1]) =>
    withLedgerTransaction(u.db, (trx) => applyObservations(trx, o));

  it('finds what the full verification finds in the period, whatever the chunk, and times each check', async () => {
    const since = new Date(Date.now() - DAY);
    const deposits = Array.from({ length: 7 }, (_, i) => obs('deposit', `d${i}`, 'COMPLETED', 1));
    await apply([...deposits, obs('deposit', 'c1', 'APPROVED', 1, { crypto: true })]);
    // A refund booked live before its deposit is known as test: booked in the wrong book until its next
    // reading moves it (test/db/ledger-service.test.ts).
    await apply([obs('refund', 'rt', 'PENDING', 2, { parentDepositId: 'dt', amount: 2_500n })]);
    await apply([obs('deposit', 'dt', 'COMPLETED', 3, { test: true })]);
    // A second credit of d5 and a credit of the crypto deposit on available, booked by hand now.
    await postAt(u.db, 'd5', 10_000n, new Date());
    await postAt(u.db, 'c1', 1_000n, new Date());

    const full = await verifyLedger(u.db);
    const text = full.failures.join('\n');
    expect(text).toMatch(/test book mixed with others: refund:acme:rt:reserve in book live/);
    expect(text).toMatch(/crypto deposit touches available: manual:c1:credit:\d+ posts to available/);
    expect(text).toMatch(/applied effects differ from wanted: deposit acme\/d5 /);
    expect(text).toMatch(/applied effects differ from wanted: deposit acme\/c1 /);

    // Everything happened in the period: the incremental verification names the same, chunk of 1 or 2,000
    // (the next chunk loads while this one is planned), and says how long each check took.
    for (const chunk of [1, 3, 2_000]) {
      const timings: Record<string, number> = {};
      const inc = await verifyLedger(u.db, { since, chunk, timings });
      expect(inc.failures).toEqual(full.failures);
      expect(inc.entities).toBe(full.entities);
      expect(Object.keys(timings)).toEqual(
        expect.arrayContaining([
          'entries balance',
          'test book apart',
          'running balances',
          'snapshots',
          'entities of the period',
          'entity state loaded',
          'entity plans',
        ]),
      );
    }
  });
});
