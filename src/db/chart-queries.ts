/**
 * The reads behind the balances page's charts and movements (issue 18 point 4). Each is bounded by its
 * period through an index, so its cost follows the period, not the history: balances over time read
 * the daily snapshots (src/db/balance-snapshots.ts) by their primary key, movements read the per-day and
 * per-hour sums of `ledger_movements` (and at most an hour's postings at either end), volumes read mirrors by the day first seen
 * (`mirrors_first_seen_ix`, migration 20261125T0120_charts), and the age buckets read only unresolved
 * exceptions (`exceptions_open_ix`). Sums are `numeric` text parsed to bigint minor units.
 */
import { sql } from 'kysely';
import type { Book } from '../domain/effects.ts';
import { AGE_BUCKETS, type AgeBucketKey, UNRESOLVED_STATES } from '../domain/exception-queue.ts';
import { type Minor, parseLedgerMinor } from '../domain/money.ts';
import type { EntityKind } from '../domain/statuses.ts';
import type { Db } from './schema.ts';

/** The accounts a balance shows: what the provider owes (available) and what is held (reserved). */
export const BALANCE_ACCOUNTS = {
  live: { available: 'available', reserved: 'reserved' },
  test: { available: 'test_available', reserved: 'test_reserved' },
} as const;
const BALANCE_ACCOUNT_NAMES = Object.values(BALANCE_ACCOUNTS).flatMap((b) => [b.available, b.reserved]);

export interface BalancePoint {
  merchantAccount: string;
  currency: string;
  book: Book;
  /** `available` or `reserved` (`test_available`, `test_reserved` in the test book). */
  account: string;
  /** A UTC midnight: the balance of the postings created before it. */
  at: Date;
  balance: Minor;
}

/** Daily snapshots of every available and reserved account at the UTC midnights in [from, to]. */
export async function balanceHistory(
  db: Db,
  from: Date,
  to: Date,
  merchantAccount: string | null = null,
): Promise<BalancePoint[]> {
  const { rows } = await sql<{
    merchant_account: string;
    currency: string;
    book: Book;
    account: string;
    at: Date;
    balance: string;
  }>`
    SELECT a.merchant_account, a.currency, a.book, a.name AS account, s.at, s.balance::text AS balance
    FROM ledger_accounts a
    JOIN ledger_balance_snapshots s ON s.merchant_account = a.merchant_account AND s.currency = a.currency
      AND s.book = a.book AND s.account = a.name AND s.at >= ${from} AND s.at <= ${to}
    WHERE a.name IN (${sql.join(BALANCE_ACCOUNT_NAMES)})
      AND (${merchantAccount}::text IS NULL OR a.merchant_account = ${merchantAccount})
    ORDER BY a.merchant_account, a.currency, a.book, a.name, s.at`.execute(db);
  return rows.map((r) => ({
    merchantAccount: r.merchant_account,
    currency: r.currency,
    book: r.book,
    account: r.account,
    at: r.at,
    balance: parseLedgerMinor(r.balance),
  }));
}

export interface BalanceMovementRow {
  merchantAccount: string;
  currency: string;
  book: Book;
  account: string;
  effect: string;
  /** 1 applications, -1 reversals. */
  direction: 1 | -1;
  /** Sums of the postings into (positive) and out of (negative) the account since `todayStart`... */
  todayIn: Minor;
  todayOut: Minor;
  /** ...and since `monthStart`. */
  monthIn: Minor;
  monthOut: Minor;
}

const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;
const floorTo = (t: number, unit: number) => Math.floor(t / unit) * unit;
const ceilTo = (t: number, unit: number) => Math.ceil(t / unit) * unit;

interface MovementSum {
  merchant_account: string;
  currency: string;
  book: Book;
  account: string;
  effect: string;
  direction: number;
  amount_in: string;
  amount_out: string;
}

/**
 * Sums in and out of every available and reserved account in [from, to) by effect and direction, from
 * `ledger_movements` (migration 20261126T04516_balance_movements): whole UTC days from the day rows, the
 * whole hours at either end from the hour rows, and only what is left of an hour at either end (a time
 * zone off the hour, an instant within an hour) from the postings themselves. `open`: `to` is now, so the
 * hour it falls in is read whole from its hour row (nothing is posted after now). At most about 31 day
 * rows and 47 hour rows per account and effect, whatever the history.
 */
async function movementSums(
  db: Db,
  from: Date,
  to: Date,
  open: boolean,
  merchantAccount: string | null,
): Promise<MovementSum[]> {
  const f = from.getTime();
  const t = to.getTime();
  const h0 = ceilTo(f, HOUR_MS);
  const h1 = open ? ceilTo(t, HOUR_MS) : floorTo(t, HOUR_MS);
  const parts: { kind: 'postings' | 1 | 24; from: number; to: number }[] = [];
  if (h0 >= h1) {
    parts.push({ kind: 'postings', from: f, to: open ? Number.POSITIVE_INFINITY : t });
  } else {
    if (f < h0) parts.push({ kind: 'postings', from: f, to: h0 });
    const d0 = ceilTo(h0, DAY_MS);
    const d1 = floorTo(h1, DAY_MS);
    if (d0 < d1) {
      parts.push(
        { kind: 1, from: h0, to: d0 },
        { kind: 24, from: d0, to: d1 },
        { kind: 1, from: d1, to: h1 },
      );
    } else {
      parts.push({ kind: 1, from: h0, to: h1 });
    }
    if (!open && h1 < t) parts.push({ kind: 'postings', from: h1, to: t });
  }
  const accounts = sql`a.name IN (${sql.join(BALANCE_ACCOUNT_NAMES)})
    AND (${merchantAccount}::text IS NULL OR a.merchant_account = ${merchantAccount})`;
  const selects = parts
    .filter((p) => p.from < p.to)
    .map((p) => {
      const upper = Number.isFinite(p.to) ? new Date(p.to) : null;
      return p.kind === 'postings'
        ? sql`SELECT a.merchant_account, a.currency, a.book, a.name AS account, e.effect, e.direction,
            coalesce(sum(x.amount) FILTER (WHERE x.amount > 0), 0) AS amount_in,
            coalesce(sum(x.amount) FILTER (WHERE x.amount < 0), 0) AS amount_out
          FROM ledger_accounts a
          JOIN postings x ON x.merchant_account = a.merchant_account AND x.currency = a.currency
            AND x.book = a.book AND x.account = a.name AND x.created_at >= ${new Date(p.from)}
            AND (${upper}::timestamptz IS NULL OR x.created_at < ${upper})
          JOIN journal_entries e ON e.id = x.entry_id
          WHERE ${accounts}
          GROUP BY 1, 2, 3, 4, 5, 6`
        : sql`SELECT a.merchant_account, a.currency, a.book, a.name AS account, m.effect, m.direction,
            m.amount_in, m.amount_out
          FROM ledger_accounts a
          JOIN ledger_movements m ON m.merchant_account = a.merchant_account AND m.currency = a.currency
            AND m.book = a.book AND m.account = a.name AND m.hours = ${p.kind}
            AND m.bucket >= ${new Date(p.from)} AND m.bucket < ${upper}
          WHERE ${accounts}`;
    });
  if (selects.length === 0) return [];
  const { rows } = await sql<MovementSum>`
    SELECT merchant_account, currency, book, account, effect, direction,
      sum(amount_in)::text AS amount_in, sum(amount_out)::text AS amount_out
    FROM (${sql.join(selects, sql` UNION ALL `)}) s
    GROUP BY 1, 2, 3, 4, 5, 6
    ORDER BY 1, 2, 3, 4, 5, 6 DESC`.execute(db);
  return rows;
}

/**
 * Postings into and out of every available and reserved account in [monthStart, to), by effect and
 * direction, with the part since `todayStart` (which must not be before `monthStart`). `open`: `to` is
 * now (see `movementSums`).
 */
export async function balanceMovements(
  db: Db,
  monthStart: Date,
  todayStart: Date,
  to: Date,
  merchantAccount: string | null = null,
  open = false,
): Promise<BalanceMovementRow[]> {
  const [month, today] = await Promise.all([
    movementSums(db, monthStart, to, open, merchantAccount),
    movementSums(db, todayStart, to, open, merchantAccount),
  ]);
  const key = (r: MovementSum) =>
    `${r.merchant_account}|${r.currency}|${r.book}|${r.account}|${r.effect}|${r.direction}`;
  const todayByKey = new Map(today.map((r) => [key(r), r]));
  return month.map((r) => {
    const d = todayByKey.get(key(r));
    return {
      merchantAccount: r.merchant_account,
      currency: r.currency,
      book: r.book,
      account: r.account,
      effect: r.effect,
      direction: Number(r.direction) === -1 ? -1 : 1,
      todayIn: parseLedgerMinor(d?.amount_in ?? '0'),
      todayOut: parseLedgerMinor(d?.amount_out ?? '0'),
      monthIn: parseLedgerMinor(r.amount_in),
      monthOut: parseLedgerMinor(r.amount_out),
    };
  });
}

/** The status a volume row groups an entity under when the provider has given none (intent only, not found). */
export const NO_STATUS = 'NONE';

export interface VolumeRow {
  /** Local date (`YYYY-MM-DD` in the time zone asked for) the entity was first seen. */
  day: string;
  kind: EntityKind;
  /** Current status, or `NO_STATUS`. */
  status: string;
  /** Null when neither the provider nor an intent has given one yet. */
  currency: string | null;
  test: boolean;
  count: number;
  /** Sum of the gross amounts in use (entities with no amount add nothing). */
  amount: Minor;
}

/**
 * Deposits, cashouts and refunds first seen in [from, to), per local day in `timeZone`, kind, current
 * status, currency and test flag: counts and gross amounts.
 */
export async function dailyVolumes(
  db: Db,
  from: Date,
  to: Date,
  timeZone: string,
  merchantAccount: string | null = null,
): Promise<VolumeRow[]> {
  const { rows } = await sql<{
    day: string;
    entity_kind: EntityKind;
    status: string;
    currency: string | null;
    test: boolean;
    count: number;
    amount: string;
  }>`
    SELECT to_char((coalesce(m.first_seen_at, m.created_at) AT TIME ZONE ${timeZone})::date, 'YYYY-MM-DD') AS day,
      m.entity_kind, coalesce(m.status, ${NO_STATUS}) AS status, m.currency, m.test, count(*)::int AS count,
      coalesce(sum(m.amount), 0)::text AS amount
    FROM mirrors m
    WHERE coalesce(m.first_seen_at, m.created_at) >= ${from} AND coalesce(m.first_seen_at, m.created_at) < ${to}
      AND (${merchantAccount}::text IS NULL OR m.merchant_account = ${merchantAccount})
    GROUP BY 1, 2, 3, 4, 5
    ORDER BY 1, 2, 3, 4, 5`.execute(db);
  return rows.map((r) => ({
    day: r.day,
    kind: r.entity_kind,
    status: r.status,
    currency: r.currency,
    test: r.test,
    count: r.count,
    amount: parseLedgerMinor(r.amount),
  }));
}

export interface AgeBucketRow {
  bucket: AgeBucketKey;
  severity: string;
  count: number;
}

/**
 * Unresolved exceptions per age bucket (`AGE_BUCKETS`: age since first seen, [minDays, maxDays), the
 * queue's own filter) and severity, at `now`. Buckets with none are absent.
 */
export async function openExceptionsByAge(
  db: Db,
  now: Date,
  merchantAccount: string | null = null,
): Promise<AgeBucketRow[]> {
  // Buckets in order: the first whose upper bound the age is under.
  const bucket = sql`CASE ${sql.join(
    AGE_BUCKETS.map((b) =>
      Number.isFinite(b.maxDays)
        ? sql`WHEN x.first_seen_at > ${new Date(now.getTime() - b.maxDays * DAY_MS)} THEN ${b.key}`
        : sql`ELSE ${b.key}`,
    ),
    sql` `,
  )} END`;
  const { rows } = await sql<{ bucket: AgeBucketKey; severity: string; count: number }>`
    SELECT ${bucket} AS bucket, x.severity, count(*)::int AS count
    FROM exceptions x
    WHERE x.state IN (${sql.join([...UNRESOLVED_STATES])})
      AND (${merchantAccount}::text IS NULL OR x.merchant_account = ${merchantAccount})
    GROUP BY 1, 2
    ORDER BY 1, 2`.execute(db);
  return rows;
}
