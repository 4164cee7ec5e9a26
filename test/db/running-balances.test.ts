/**
 * Running balances: the postings' trigger keeps one balance row per ledger account in
 * the transaction that posts; two reconcilers posting to the same accounts at once (no deadlock retry
 * allowed) leave running balances equal to the postings, and every later batch keeps them so;
 * `verifyLedger` names an account whose running balance was corrupted by hand.
 */

import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb } from '../../src/db/connection.ts';
import { applyObservations } from '../../src/db/ledger/service.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { balances } from '../../src/db/read-models/balances.ts';
import type { Database } from '../../src/db/schema.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import type { Observation } from '../../src/domain/observation.ts';
import { depositBatches, obs } from './fixtures.ts';
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

/** Each account's sum of postings, keyed `merchant currency book/account`. */
async function postedSums(): Promise<Record<string, bigint>> {
  const { rows } = await sql<{ k: string; s: string }>`
    SELECT merchant_account || ' ' || currency || ' ' || book || '/' || account AS k, sum(amount)::text AS s
    FROM postings GROUP BY 1`.execute(t.db);
  return Object.fromEntries(rows.map((r) => [r.k, BigInt(r.s.replace('.', ''))]));
}

async function runningBalances(): Promise<Record<string, bigint>> {
  const rows = await balances(t.db);
  return Object.fromEntries(
    rows.map((r) => [`${r.merchantAccount} ${r.currency} ${r.book}/${r.account}`, r.balance]),
  );
}

const batches = (prefix: string, reversed: boolean) =>
  depositBatches(prefix, reversed, { batches: 8, perBatch: 30 });

describe('running balances', () => {
  it('equal the postings under two concurrent reconcilers, with no deadlock to retry', async () => {
    const run = async (db: Kysely<Database>, list: Observation[][]) => {
      for (const batch of list) {
        // maxAttempts 1: a deadlock (40P01) fails the test instead of being retried.
        await withLedgerTransaction(db, (trx) => applyObservations(trx, batch), { maxAttempts: 1 });
      }
    };
    await Promise.all([run(t.db, batches('a', false)), run(other, batches('b', true))]);

    const posted = await postedSums();
    // 2 reconcilers x 8 batches x 30 deposits, each with a credit and a fee entry.
    const entries = await sql<{ n: string }>`SELECT count(*)::text AS n FROM journal_entries`.execute(t.db);
    expect(Number(entries.rows[0]!.n)).toBe(2 * 8 * 30 * 2);
    expect(Object.keys(posted).length).toBeGreaterThanOrEqual(10);
    expect(await runningBalances()).toEqual(posted);
    expect((await verifyLedger(t.db)).failures).toEqual([]);
  });

  it('are kept equal to the postings by a later batch', async () => {
    expect(await runningBalances()).toEqual(await postedSums());
    await withLedgerTransaction(t.db, (trx) =>
      applyObservations(trx, [
        obs('deposit', 'after-backfill', 'COMPLETED', 1, { feeAmount: 3n, feeCurrency: 'BRL' }),
      ]),
    );
    expect(await runningBalances()).toEqual(await postedSums());
  });

  it('verification names an account whose running balance was changed by hand', async () => {
    await sql`UPDATE ledger_balances SET balance = balance + 0.01
      WHERE merchant_account = 'acme' AND currency = 'USD' AND book = 'live' AND account = 'fees'`.execute(
      t.db,
    );
    const posted = (await postedSums())['acme USD live/fees']!;
    const { ok, failures } = await verifyLedger(t.db);
    expect(ok).toBe(false);
    const text = (posted: bigint) => `${posted / 100n}.${String(posted % 100n).padStart(2, '0')}`;
    expect(failures).toEqual([
      `running balance differs from postings: acme USD live/fees: running ${text(posted + 1n)}, postings sum to ${text(posted)}`,
    ]);
  });
});
