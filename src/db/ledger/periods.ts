/**
 * A ledger account's postings in a time range, without an index on the postings' account and time (issue
 * 21 point 4: `postings_account_ix` was the costliest index a posting insert maintained, and is
 * gone). The range is read as the whole UTC days and hours inside it
 * from `ledger_movements` (per account, effect, direction and bucket,
 * kept by the postings' trigger in the transaction that posts), and only
 * what is left of an hour at either end from the postings themselves: the entries created then, by their
 * creation time (`journal_entries_created_ix`), each one's postings by its key (`postings_entry_ix`). A
 * posting's `created_at` is its entry's: both are their transaction's `now()` (the write statement inserts
 * the entries and their postings without either, src/db/ledger-repository.ts). So the cost follows the
 * period's buckets and at most an hour of entries at either end, whatever the history.
 */
import { type RawBuilder, sql } from 'kysely';

export const DAY_MS = 86_400_000;
export const HOUR_MS = 3_600_000;
export const floorTo = (t: number, unit: number) => Math.floor(t / unit) * unit;
const ceilTo = (t: number, unit: number) => Math.ceil(t / unit) * unit;

/** A stretch of a range: the day rows (24) or hour rows (1) of `ledger_movements`, or the postings. */
export type Segment = { kind: 'postings' | 1 | 24; from: number; to: number };

/**
 * [from, to) as the stretches to read: whole UTC days from the day rows of `ledger_movements`, the whole
 * hours at either end from its hour rows, and only what is left of an hour at either end (a time zone off
 * the hour, an instant within an hour) from the postings themselves. `open`: `to` is now, so the hour it
 * falls in is read whole from its hour row (nothing is posted after now).
 */
export function segments(from: Date, to: Date, open: boolean): Segment[] {
  const f = from.getTime();
  const t = to.getTime();
  if (f >= t) return [];
  const h0 = ceilTo(f, HOUR_MS);
  const h1 = open ? ceilTo(t, HOUR_MS) : floorTo(t, HOUR_MS);
  if (h0 >= h1) return [{ kind: 'postings', from: f, to: open ? Number.POSITIVE_INFINITY : t }];
  const out: Segment[] = [];
  if (f < h0) out.push({ kind: 'postings', from: f, to: h0 });
  const d0 = ceilTo(h0, DAY_MS);
  const d1 = floorTo(h1, DAY_MS);
  if (d0 < d1)
    out.push({ kind: 1, from: h0, to: d0 }, { kind: 24, from: d0, to: d1 }, { kind: 1, from: d1, to: h1 });
  else out.push({ kind: 1, from: h0, to: h1 });
  if (!open && h1 < t) out.push({ kind: 'postings', from: h1, to: t });
  return out.filter((s) => s.from < s.to);
}

/**
 * FROM and WHERE of the postings (`x`) of the entries (`e`) created from `from` (inclusive) to `to`
 * (exclusive, or inclusive when `inclusive`; null: no upper bound): the entries by their creation time,
 * each one's postings probed by its key whatever the planner's estimate (LATERAL, OFFSET 0), never a scan
 * of all the postings. Callers add conditions with `AND`.
 */
export function entryPostings(from: Date, to: Date | null, inclusive = false): RawBuilder<unknown> {
  const upper =
    to === null ? sql`` : inclusive ? sql`AND e.created_at <= ${to}` : sql`AND e.created_at < ${to}`;
  return sql`journal_entries e
    CROSS JOIN LATERAL (SELECT x.* FROM postings x WHERE x.entry_id = e.id OFFSET 0) x
    WHERE e.created_at >= ${from} ${upper}`;
}

/** The movement rows `m` of ledger account `a` (its `merchant_account`, `currency`, `book`, `name`). */
export const OF_ACCOUNT = sql`m.merchant_account = a.merchant_account AND m.currency = a.currency
  AND m.book = a.book AND m.account = a.name`;

/**
 * SQL over a ledger account aliased `a`: its balance of the postings created before `bound` (up to and
 * including it when `inclusive`), read as the latest daily snapshot at or before `bound` (the sum of the
 * postings before its UTC midnight, src/db/ledger/balance-snapshots.ts), plus the day movements from that
 * midnight to `bound`'s, the hour movements from there to `bound`'s hour, and the postings of the entries
 * created since that hour (one grouped read for every account): at most a day of movement rows and an
 * hour of entries once snapshots are taken, the account's day rows before `bound` if none. `posted` tells
 * whether the account had a posting by then (a snapshot or a movement exists only after one). `join` is
 * what the two expressions read: the snapshot, LATERAL, aliased `alias` (default `s`; two balances of one
 * account in one query, an opening and a closing, take two aliases), and the last hour's sums, aliased
 * `<alias>_edge`.
 */
export function balanceAsOf(bound: Date, inclusive: boolean, alias = 's') {
  const s = sql.raw(alias);
  const edge = sql.raw(`${alias}_edge`);
  const day = new Date(floorTo(bound.getTime(), DAY_MS));
  const hour = new Date(floorTo(bound.getTime(), HOUR_MS));
  const moved = (
    hours: 1 | 24,
    from: RawBuilder<unknown>,
  ) => sql`coalesce((SELECT sum(m.amount_in + m.amount_out)
      FROM ledger_movements m WHERE ${OF_ACCOUNT} AND m.hours = ${sql.lit(hours)} AND m.bucket >= ${from}
        AND m.bucket < ${hours === 24 ? day : hour}), 0)`;
  return {
    join: sql`LEFT JOIN LATERAL (SELECT ls.at, ls.balance FROM ledger_balance_snapshots ls
      WHERE ls.merchant_account = a.merchant_account AND ls.currency = a.currency AND ls.book = a.book
        AND ls.account = a.name AND ls.at <= ${bound}
      ORDER BY ls.at DESC LIMIT 1) ${s} ON true
    LEFT JOIN (SELECT x.merchant_account, x.currency, x.book, x.account, sum(x.amount) AS amount
      FROM ${entryPostings(hour, bound, inclusive)}
      GROUP BY x.merchant_account, x.currency, x.book, x.account) ${edge}
      ON ${edge}.merchant_account = a.merchant_account AND ${edge}.currency = a.currency
        AND ${edge}.book = a.book AND ${edge}.account = a.name`,
    // A snapshot is at a UTC midnight at or before `bound`, so at or before `day`.
    balance: sql`(coalesce(${s}.balance, 0) + ${moved(24, sql`coalesce(${s}.at, '-infinity')`)}
      + ${moved(1, sql`${day}`)} + coalesce(${edge}.amount, 0))::text`,
    posted: sql`(${s}.at IS NOT NULL OR ${edge}.amount IS NOT NULL OR EXISTS (SELECT 1 FROM ledger_movements m
      WHERE ${OF_ACCOUNT} AND m.hours = 1 AND m.bucket < ${hour}))`,
  };
}
