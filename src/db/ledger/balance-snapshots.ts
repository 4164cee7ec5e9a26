/**
 * Daily balance snapshots per ledger account (`ledger_balance_snapshots`): the row at a UTC
 * midnight holds the sum of the account's postings created before it. `takeBalanceSnapshots` writes the
 * missing days from each account's latest snapshot (or its first posting) up to the last midnight that
 * is at least `SETTLE_MS` old, so no transaction still in flight can post before it (a posting's
 * `created_at` is its transaction's start). Each day adds that day's movements (the sums of its postings
 * per account and effect, `ledger_movements`, written in the transaction that posts, so settled alike),
 * read by their key: the cost follows the days written, not the history.
 */
import { sql } from 'kysely';
import type { Db } from '../schema.ts';
import { OF_ACCOUNT } from './periods.ts';

/** How long after a midnight its snapshot waits for the transactions that started before it. */
export const SETTLE_MS = 10 * 60_000;

/** Writes the missing daily snapshots up to `upTo` (default now); returns the number of rows written. */
export async function takeBalanceSnapshots(db: Db, upTo: Date = new Date()): Promise<number> {
  if (!db.isTransaction) return db.transaction().execute((trx) => takeBalanceSnapshots(trx, upTo));
  // The planner prices a year of per-day sums high enough to JIT-compile the statement: about 0.3 s
  // spent on every call, most of which write nothing.
  await sql`SET LOCAL jit = off`.execute(db);
  const { rows } = await sql<{ n: string }>`
    WITH cutoff AS (
      SELECT date_trunc('day', least(${upTo}::timestamptz, now()) - make_interval(secs => ${SETTLE_MS / 1000}), 'UTC') AS c
    ), start AS (
      SELECT a.merchant_account, a.currency, a.book, a.name AS account, coalesce(s.balance, 0) AS base,
        coalesce(s.at, (SELECT min(m.bucket) FROM ledger_movements m WHERE ${OF_ACCOUNT} AND m.hours = 24))
          AS from_at
      FROM ledger_accounts a
      LEFT JOIN LATERAL (
        SELECT s.at, s.balance FROM ledger_balance_snapshots s
        WHERE s.merchant_account = a.merchant_account AND s.currency = a.currency AND s.book = a.book
          AND s.account = a.name
        ORDER BY s.at DESC LIMIT 1) s ON true
    ), days AS (
      SELECT s.merchant_account, s.currency, s.book, s.account, s.base, d.at,
        coalesce((SELECT sum(m.amount_in + m.amount_out) FROM ledger_movements m
          WHERE m.merchant_account = s.merchant_account AND m.currency = s.currency AND m.book = s.book
            AND m.account = s.account AND m.hours = 24 AND m.bucket = d.at - interval '24 hours'), 0)
          AS day_sum
      FROM start s CROSS JOIN cutoff
        CROSS JOIN LATERAL generate_series(s.from_at + interval '24 hours', cutoff.c, interval '24 hours') AS d(at)
      WHERE s.from_at IS NOT NULL
    ), ins AS (
      INSERT INTO ledger_balance_snapshots (merchant_account, currency, book, account, at, balance)
      SELECT merchant_account, currency, book, account, at,
        base + sum(day_sum) OVER (PARTITION BY merchant_account, currency, book, account ORDER BY at)
      FROM days
      ON CONFLICT DO NOTHING
      RETURNING 1
    )
    SELECT count(*)::text AS n FROM ins`.execute(db);
  return Number(rows[0]?.n ?? 0);
}
