/**
 * The ledger's balances at any instant, its movements between two instants, and the cashouts and
 * refunds in flight. Amounts come back as bigint minor units.
 */
import { sql } from 'kysely';
import { type Book, PAYOUT_IN_FLIGHT } from '../../domain/effects.ts';
import { LEDGER_NUMERIC, type Minor, parseMinor, parseMinorOrNull } from '../../domain/money.ts';
import { balanceAsOf, entryPostings } from '../ledger/periods.ts';
import type { Db } from '../schema.ts';

/** `PAYOUT_IN_FLIGHT` as SQL literals (constants): a partial index's predicate can be matched only by literals. */
export const IN_FLIGHT_LITERALS = sql.join(PAYOUT_IN_FLIGHT.map((s) => sql.lit(s)));

/**
 * The open cashouts and refunds of `mirror_watches w`: the predicate of its partial index
 * `mirror_watches_in_flight_ix` word for word (the planner matches an index's predicate by its text).
 */
export const OPEN_PAYOUTS = sql`w.watch = 'open' AND w.entity_kind IN ('cashout', 'refund')`;

export interface BalanceRow {
  merchantAccount: string;
  currency: string;
  book: Book;
  account: string;
  balance: Minor;
}

export interface BalanceFilter {
  /** Balances as booked up to and including this instant (default: now). */
  at?: Date;
  merchantAccount?: string;
  book?: Book;
}

/** The running balance of ledger account `a` (the postings' trigger keeps it; no row: no posting yet). */
export const RUNNING_BALANCE = sql`coalesce((SELECT b.balance FROM ledger_balances b
  WHERE b.merchant_account = a.merchant_account AND b.currency = a.currency AND b.book = a.book
    AND b.account = a.name), 0)::text`;

/**
 * Balance of every ledger account (accounts with no postings yet show zero). Now (no `at`, or an instant
 * not in the past) reads the running balances, one row per account kept by the postings' trigger
 * (migration 20261124T1300_running_balances); an earlier instant is the latest daily snapshot at or
 * before it plus what moved since (`balanceAsOf`, src/db/ledger/periods.ts).
 */
export async function balances(db: Db, filter: BalanceFilter = {}): Promise<BalanceRow[]> {
  const at = filter.at !== undefined && filter.at.getTime() < Date.now() ? filter.at : null;
  const asOf = at === null ? null : balanceAsOf(at, true);
  const balance = asOf === null ? RUNNING_BALANCE : asOf.balance;
  const snapshot = asOf === null ? sql`` : asOf.join;
  const { rows } = await sql<{
    merchant_account: string;
    currency: string;
    book: Book;
    name: string;
    balance: string;
  }>`
    SELECT a.merchant_account, a.currency, a.book, a.name, ${balance} AS balance
    FROM ledger_accounts a ${snapshot}
    WHERE (${filter.merchantAccount ?? null}::text IS NULL OR a.merchant_account = ${filter.merchantAccount ?? null})
      AND (${filter.book ?? null}::text IS NULL OR a.book = ${filter.book ?? null})
    ORDER BY a.merchant_account, a.currency, a.book, a.name`.execute(db);
  return rows.map((r) => ({
    merchantAccount: r.merchant_account,
    currency: r.currency,
    book: r.book,
    account: r.name,
    balance: parseMinor(r.balance, LEDGER_NUMERIC),
  }));
}

export interface MovementRow {
  merchantAccount: string;
  currency: string;
  book: Book;
  effect: string;
  /** 1 applications, -1 reversals. */
  direction: 1 | -1;
  account: string;
  amount: Minor;
  entries: number;
}

/**
 * Postings booked in [from, to), grouped by effect, direction and account, with the number of entries:
 * the period's entries by their creation time and each one's postings by its key (`entryPostings`), so
 * the cost follows the period, not the history. (`ledger_movements` has the sums but not the entries.)
 */
export async function movements(
  db: Db,
  from: Date,
  to: Date,
  merchantAccount?: string,
): Promise<MovementRow[]> {
  const { rows } = await sql<{
    merchant_account: string;
    currency: string;
    book: Book;
    effect: string;
    direction: number;
    account: string;
    amount: string;
    entries: number;
  }>`
    SELECT x.merchant_account, x.currency, x.book, e.effect, e.direction, x.account, sum(x.amount)::text AS amount,
      count(DISTINCT e.id)::int AS entries
    FROM ${entryPostings(from, to)}
      AND (${merchantAccount ?? null}::text IS NULL OR e.merchant_account = ${merchantAccount ?? null})
    GROUP BY x.merchant_account, x.currency, x.book, e.effect, e.direction, x.account
    ORDER BY x.merchant_account, x.currency, x.book, e.effect, e.direction DESC, x.account`.execute(db);
  return rows.map((r) => ({
    merchantAccount: r.merchant_account,
    currency: r.currency,
    book: r.book,
    effect: r.effect,
    direction: r.direction === -1 ? -1 : 1,
    account: r.account,
    amount: parseMinor(r.amount, LEDGER_NUMERIC),
    entries: r.entries,
  }));
}

export interface InFlightRow {
  merchantAccount: string;
  kind: 'cashout' | 'refund';
  entityId: string;
  externalRef: string | null;
  status: string;
  statusSince: Date | null;
  currency: string | null;
  amount: Minor | null;
}

/** Cashouts and refunds holding money in `reserved` (PENDING, ON_HOLD, DELIVERED, INCORRECT_DETAILS). */
export async function inFlight(db: Db, merchantAccount?: string): Promise<InFlightRow[]> {
  const { rows } = await sql<{
    merchant_account: string;
    entity_kind: 'cashout' | 'refund';
    entity_id: string;
    external_ref: string | null;
    status: string;
    status_since: Date | null;
    currency: string | null;
    amount: string | null;
  }>`
    SELECT m.merchant_account, m.entity_kind, m.entity_id, m.external_ref, m.status, m.status_since, m.currency,
      m.amount::text
    -- The open cashouts and refunds (mirror_watches_in_flight_ix, migration 20261127T0100_mirror_watches).
    FROM mirror_watches w
    JOIN mirrors m ON m.entity_id = w.entity_id AND m.entity_kind = w.entity_kind AND m.merchant_account = w.merchant_account
    WHERE ${OPEN_PAYOUTS} AND m.status IN (${IN_FLIGHT_LITERALS})
      AND (${merchantAccount ?? null}::text IS NULL OR w.merchant_account = ${merchantAccount ?? null})
    ORDER BY m.status_since, m.entity_id`.execute(db);
  return rows.map((r) => ({
    merchantAccount: r.merchant_account,
    kind: r.entity_kind,
    entityId: r.entity_id,
    externalRef: r.external_ref,
    status: r.status,
    statusSince: r.status_since,
    currency: r.currency,
    amount: parseMinorOrNull(r.amount, LEDGER_NUMERIC),
  }));
}

export interface InFlightCount {
  merchantAccount: string;
  currency: string;
  /** Refunds of test deposits carry the test flag and are in flight in the test book. */
  test: boolean;
  cashouts: number;
  refunds: number;
}

/**
 * Cashouts and refunds in flight per merchant account, currency and test flag (groups with some in flight).
 * Read from the side table's index of open cashouts and refunds alone (index-only: migration
 * 20261127T0100_mirror_watches): an open cashout or refund is one in flight, no more, no less
 * (`mirror_watch`; test/db/mirror-watch-domain.test.ts holds it to the domain's `PAYOUT_IN_FLIGHT`).
 */
export async function inFlightCounts(db: Db): Promise<InFlightCount[]> {
  const { rows } = await sql<{
    merchant_account: string;
    currency: string;
    test: boolean;
    cashouts: number;
    refunds: number;
  }>`
    SELECT w.merchant_account, w.currency, w.test,
           count(*) FILTER (WHERE w.entity_kind = 'cashout')::int AS cashouts,
           count(*) FILTER (WHERE w.entity_kind = 'refund')::int AS refunds
      FROM mirror_watches w
     WHERE ${OPEN_PAYOUTS} AND w.currency IS NOT NULL
     GROUP BY 1, 2, 3`.execute(db);
  return rows.map((r) => ({
    merchantAccount: r.merchant_account,
    currency: r.currency,
    test: r.test,
    cashouts: r.cashouts,
    refunds: r.refunds,
  }));
}
