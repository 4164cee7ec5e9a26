/**
 * The reads behind the balances page's charts and movements. Each is bounded by its
 * period through an index, so its cost follows the period, not the history: balances over time read
 * the daily snapshots (src/db/ledger/balance-snapshots.ts) by their primary key, movements read the per-day and
 * per-hour sums of `ledger_movements` (and at most an hour's entries at either end), volumes read mirrors by the day first seen
 * (`mirrors_first_seen_ix`), and the age buckets read only unresolved
 * exceptions (`exceptions_open_ix`). Sums are `numeric` text parsed to bigint minor units.
 */
import { sql } from 'kysely';
import type { Book } from '../../domain/effects.ts';
import { AGE_BUCKETS, type AgeBucketKey, UNRESOLVED_STATES } from '../../domain/exception-queue.ts';
import { type Minor, parseLedgerMinor } from '../../domain/money.ts';
import type { EntityKind } from '../../domain/statuses.ts';
import { DAY_MS, entryPostings, OF_ACCOUNT, segments } from '../ledger/periods.ts';
import type { Db } from '../schema.ts';

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

/**
 * Postings into and out of every available and reserved account in [monthStart, to), by effect and
 * direction, with the part since `todayStart` (which must not be before `monthStart`), from
 * `ledger_movements` (see `segments` in
 * src/db/ledger/periods.ts): about 31 day rows and at most 47 hour rows per account and effect, whatever
 * the history, and what is left of an hour at either end from that hour's entries, read once for every
 * account. Each account's rows are summed on their own (a small group per account), today's stretch read
 * once for both figures. `open`: `to` is now.
 */
export async function balanceMovements(
  db: Db,
  monthStart: Date,
  todayStart: Date,
  to: Date,
  merchantAccount: string | null = null,
  open = false,
): Promise<BalanceMovementRow[]> {
  const parts = [
    ...segments(monthStart, todayStart, false).map((s) => ({ ...s, today: false })),
    ...segments(todayStart, to, open).map((s) => ({ ...s, today: true })),
  ];
  if (parts.length === 0) return [];
  // What is left of an hour at either end, from the postings of the entries created then: read once for
  // every account (a CTE computed once), each account then takes its own rows.
  const edges = parts.filter((p) => p.kind === 'postings');
  const edge =
    edges.length === 0
      ? sql``
      : sql`WITH edge AS MATERIALIZED (
          SELECT u.merchant_account, u.currency, u.book, u.account, u.effect, u.direction,
            sum(greatest(u.amount, 0)) AS amount_in, sum(least(u.amount, 0)) AS amount_out, u.today
          FROM (${sql.join(
            edges.map(
              (p) =>
                sql`SELECT x.*, ${p.today}::boolean AS today, e.effect, e.direction
                  FROM ${entryPostings(new Date(p.from), Number.isFinite(p.to) ? new Date(p.to) : null)}`,
            ),
            sql` UNION ALL `,
          )}) u
          GROUP BY 1, 2, 3, 4, 5, 6, 9)`;
  const selects = parts.flatMap((p) =>
    p.kind === 'postings'
      ? []
      : [
          sql`SELECT m.effect, m.direction, m.amount_in, m.amount_out, ${p.today}::boolean AS today
          FROM ledger_movements m
          WHERE ${OF_ACCOUNT} AND m.hours = ${p.kind} AND m.bucket >= ${new Date(p.from)}
            AND m.bucket < ${new Date(p.to)}`,
        ],
  );
  if (edges.length > 0)
    selects.push(sql`SELECT x.effect, x.direction, x.amount_in, x.amount_out, x.today FROM edge x
      WHERE x.merchant_account = a.merchant_account AND x.currency = a.currency AND x.book = a.book
        AND x.account = a.name`);
  const { rows } = await sql<{
    merchant_account: string;
    currency: string;
    book: Book;
    account: string;
    effect: string;
    direction: number;
    today_in: string;
    today_out: string;
    month_in: string;
    month_out: string;
  }>`
    ${edge}
    SELECT a.merchant_account, a.currency, a.book, a.name AS account, s.effect, s.direction,
      s.today_in::text AS today_in, s.today_out::text AS today_out, s.month_in::text AS month_in,
      s.month_out::text AS month_out
    FROM ledger_accounts a
    CROSS JOIN LATERAL (
      SELECT u.effect, u.direction,
        coalesce(sum(u.amount_in) FILTER (WHERE u.today), 0) AS today_in,
        coalesce(sum(u.amount_out) FILTER (WHERE u.today), 0) AS today_out,
        sum(u.amount_in) AS month_in, sum(u.amount_out) AS month_out
      FROM (${sql.join(selects, sql` UNION ALL `)}) u
      GROUP BY u.effect, u.direction) s
    WHERE a.name IN (${sql.join(BALANCE_ACCOUNT_NAMES)})
      AND (${merchantAccount}::text IS NULL OR a.merchant_account = ${merchantAccount})
    ORDER BY a.merchant_account, a.currency, a.book, a.name, s.effect, s.direction DESC`.execute(db);
  return rows.map((r) => ({
    merchantAccount: r.merchant_account,
    currency: r.currency,
    book: r.book,
    account: r.account,
    effect: r.effect,
    direction: Number(r.direction) === -1 ? -1 : 1,
    todayIn: parseLedgerMinor(r.today_in),
    todayOut: parseLedgerMinor(r.today_out),
    monthIn: parseLedgerMinor(r.month_in),
    monthOut: parseLedgerMinor(r.month_out),
  }));
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
