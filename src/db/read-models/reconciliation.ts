/**
 * The reconciliation of a bank account's day: what the bank's statement says (opening and closing
 * balance), what the ledger's `bank:<id>` account holds at the day's end (by the entries' effect days:
 * a bank match on its line's booking date, so a line matched days later counts on its own day; a
 * reversal on the date it was made in the report time zone), their difference and what explains it
 * (src/domain/bank-reconciliation.ts: the balance before the account's first imported statement, and the
 * lines booked to date that the ledger does not hold at the day's end), the share of the day's lines a
 * live match covers (by count and by amount), the lines no live match covers with their age, and the
 * settlements in transit no bank line is matched to yet. Amounts come back as bigint minor units; dates
 * as `YYYY-MM-DD`.
 *
 * A statement's day is read from its lines: the lines an import first recorded name it (`import_id`), so
 * the opening balance is that of the statement whose first line is booked on the day and the closing
 * balance that of the statement whose last line is; a statement re-imported adds no line and names no day.
 * A day without lines takes its balances from the statement whose closing date it is (the opening only
 * when that statement has no line of an earlier day).
 */
import { sql } from 'kysely';
import { type BankReconciliation, reconcileBank } from '../../domain/bank-reconciliation.ts';
import { BANK_ACCOUNT_PREFIX } from '../../domain/cash-leg.ts';
import { bankToday } from '../../domain/matching.ts';
import type { Minor } from '../../domain/money.ts';
import { addDays, localDate, zonedTimeToInstant } from '../../domain/zoned-time.ts';
import { lastStatementDays } from '../imports/read.ts';
import type { Db } from '../schema.ts';
import { type FirstStatement, firstStatement } from './statements.ts';

/** A configured bank account (PAYRECON_BANK_ACCOUNTS). */
export interface ReconciliationBankAccount {
  id: string;
  currency: string;
  account: string;
  name: string;
}

export interface ReconciliationAccountRow {
  bank: ReconciliationBankAccount;
  /** The latest booking date of its lines or closing date of its statements, or null when none is imported. */
  latestDay: string | null;
  lines: number;
  /** Lines and settlements no live match covers (all days). */
  unmatchedLines: number;
  openSettlements: number;
}

export interface DayLine {
  identity: string;
  reference: string | null;
  bookingDate: string;
  valueDate: string | null;
  amount: Minor;
  reversal: boolean;
  counterparty: string | null;
  description: string | null;
  endToEndIds: string[];
  /** The live match covering it, or null. */
  match: { id: string; rule: string } | null;
  /** Whole days from its booking date to today (in the time zone; see `bankToday`). */
  ageDays: number;
}

export interface OpenSettlement {
  identity: string;
  settlementId: string;
  valueDate: string;
  net: Minor;
  currency: string;
  bankReference: string | null;
  ageDays: number;
}

export interface DayMatch {
  id: string;
  rule: string;
  createdAt: Date;
  createdBy: string;
  note: string | null;
  difference: Minor;
  members: { side: string; identity: string; label: string; amount: Minor | null }[];
}

/** A bank line booked on or before the day that the ledger's bank account does not hold at its end. */
export interface LineNotInLedger {
  identity: string;
  reference: string | null;
  bookingDate: string;
  amount: Minor;
  /**
   * What of it the ledger lacks: its amount when no bank match of it takes effect by the day's end (or
   * its matches were reversed by then); minus its amount when two of its matches count on that day (a
   * line matched, unmatched and matched again: the unmatch's reversal takes effect on the day it was made).
   */
  missing: Minor;
  /** How many times the ledger's bank entries count it by the day's end (`missing` = amount x (1 - it)). */
  counted: number;
  counterparty: string | null;
  description: string | null;
  /** A live match covers it now (its bank match counts from a later day, or not in this bank account). */
  matchedNow: boolean;
  ageDays: number;
}

/** Why the statement's closing balance differs from the ledger's bank account at the day's end. */
export interface DayProof extends BankReconciliation {
  /** The bank account's first imported statement, whose opening is the balance before it; null: none. */
  firstStatement: FirstStatement | null;
  /** The lines booked on or before the day that the ledger does not hold at its end. */
  notInLedger: {
    count: number;
    /** The sum of what the ledger lacks of each. */
    total: Minor;
    /** The latest of them (booking date, newest first), at most `NOT_IN_LEDGER_LISTED`. */
    lines: LineNotInLedger[];
  };
}

/** The most lines not in the ledger a day lists (all are counted and summed). */
export const NOT_IN_LEDGER_LISTED = 500;

export interface ReconciliationDay {
  bank: ReconciliationBankAccount;
  date: string;
  /** The instant the day ends (exclusive) in the time zone. */
  dayEnd: Date;
  statement: { opening: Minor | null; closing: Minor | null };
  /** The ledger's `bank:<id>` balance of the entries effective before the day's end. */
  ledger: Minor;
  /** The same at the day's start: `ledger - ledgerOpening` is what the ledger moved on the day. */
  ledgerOpening: Minor;
  /** Statement closing minus ledger (null without a closing balance). */
  difference: Minor | null;
  /** What explains the difference, and what is left unexplained. */
  proof: DayProof;
  share: { lines: number; matchedLines: number; amount: Minor; matchedAmount: Minor };
  lines: DayLine[];
  unmatched: DayLine[];
  openSettlements: OpenSettlement[];
  matches: DayMatch[];
  /** The nearest days before and after with lines of this bank account, or null. */
  previous: string | null;
  next: string | null;
}

const minor = (text: string | null): Minor => BigInt(text ?? '0');
const daysFrom = (date: string, today: string) =>
  Math.max(0, Math.round((Date.parse(`${today}T00:00:00Z`) - Date.parse(`${date}T00:00:00Z`)) / 86_400_000));

/**
 * The day an entry of the ledger counts on in a reconciliation day: a bank match's application on its
 * line's booking date (stored as that date's UTC midnight, src/db/cash-leg/service.ts), whenever it was
 * matched; any other entry (a reversal, made at an instant) on its local date in the time zone. Over
 * journal entries aliased `e`.
 */
const effectDay = (timeZone: string) => sql`CASE WHEN e.entity_kind = 'bank_match' AND e.direction = 1
  THEN (e.effective_at AT TIME ZONE 'UTC')::date ELSE (e.effective_at AT TIME ZONE ${timeZone})::date END`;

/** Live match membership of bank line `b`. */
const LIVE_LINE = sql`EXISTS (SELECT 1 FROM match_members m
  WHERE m.side = 'bank_line' AND m.identity = b.identity AND m.live)`;

/** The settlements paid into this bank account: its merchant account's (or none named) in its currency. */
function settlementsOf(bank: ReconciliationBankAccount) {
  return sql`s.settlement_currency = ${bank.currency} AND (s.account = ${bank.account} OR s.account IS NULL)`;
}

/** Each configured bank account with its latest day and what stays unmatched. */
export async function reconciliationAccounts(
  db: Db,
  banks: readonly ReconciliationBankAccount[],
): Promise<ReconciliationAccountRow[]> {
  const out: ReconciliationAccountRow[] = [];
  for (const bank of banks) {
    // The latest day of a line or of a statement (a statement of a day without lines names it too).
    const { rows } = await sql<{ latest: string | null; lines: string; unmatched: string }>`
      SELECT greatest(max(b.booking_date), (SELECT max(s.closing_date) FROM import_statements s
          WHERE s.bank_account = ${bank.id}))::text AS latest,
        count(*)::text AS lines, count(*) FILTER (WHERE NOT ${LIVE_LINE})::text AS unmatched
      FROM bank_statement_lines b WHERE b.bank_account = ${bank.id}`.execute(db);
    const { rows: open } = await sql<{ n: string }>`
      SELECT count(*)::text AS n FROM provider_settlement_rows s
      WHERE ${settlementsOf(bank)} AND s.net > 0 AND NOT EXISTS (SELECT 1 FROM match_members m
        WHERE m.side = 'settlement' AND m.identity = s.identity AND m.live)`.execute(db);
    out.push({
      bank,
      latestDay: rows[0]?.latest ?? null,
      lines: Number(rows[0]?.lines ?? 0),
      unmatchedLines: Number(rows[0]?.unmatched ?? 0),
      openSettlements: Number(open[0]?.n ?? 0),
    });
  }
  return out;
}

/** One bank account's day; `now` dates the ages, `timeZone` the day's end. */
export async function reconciliationDay(
  db: Db,
  bank: ReconciliationBankAccount,
  date: string,
  timeZone: string,
  now: Date,
): Promise<ReconciliationDay> {
  // Ages count to the bank's today: a sandbox's statements may run ahead of this clock.
  const today = bankToday(localDate(now, timeZone), (await lastStatementDays(db)).get(bank.id));
  const dayEnd = zonedTimeToInstant(addDays(date, 1), '00:00', timeZone);

  const { rows: lineRows } = await sql<{
    identity: string;
    reference: string | null;
    booking_date: string;
    value_date: string | null;
    amount: string;
    reversal: boolean;
    counterparty: string | null;
    description: string | null;
    end_to_end_ids: string[];
    match_id: string | null;
    rule: string | null;
  }>`
    SELECT b.identity, b.reference, b.booking_date::text AS booking_date, b.value_date::text AS value_date,
      round(b.amount * 100)::text AS amount, b.reversal, b.counterparty, b.description, b.end_to_end_ids,
      x.match_id::text AS match_id, mt.rule
    FROM bank_statement_lines b
    LEFT JOIN match_members x ON x.side = 'bank_line' AND x.identity = b.identity AND x.live
    LEFT JOIN matches mt ON mt.id = x.match_id
    WHERE b.bank_account = ${bank.id} AND b.booking_date = ${date}::date
    ORDER BY b.amount DESC, b.reference, b.identity`.execute(db);
  const lines: DayLine[] = lineRows.map((r) => ({
    identity: r.identity,
    reference: r.reference,
    bookingDate: r.booking_date,
    valueDate: r.value_date,
    amount: minor(r.amount),
    reversal: r.reversal,
    counterparty: r.counterparty,
    description: r.description,
    endToEndIds: r.end_to_end_ids,
    match: r.match_id === null ? null : { id: r.match_id, rule: r.rule ?? '' },
    ageDays: daysFrom(r.booking_date, today),
  }));
  const abs = (m: Minor) => (m < 0n ? -m : m);
  const matched = lines.filter((l) => l.match !== null);

  // The statements first recorded with lines of this account, with the first and last day of those lines.
  const { rows: statements } = await sql<{
    opening: string | null;
    closing: string | null;
    first_day: string;
    last_day: string;
  }>`
    SELECT round(s.opening * 100)::text AS opening, round(s.closing * 100)::text AS closing,
      d.first_day, d.last_day
    FROM import_statements s
    JOIN LATERAL (SELECT min(b.booking_date)::text AS first_day, max(b.booking_date)::text AS last_day
      FROM bank_statement_lines b WHERE b.import_id = s.import_id AND b.bank_account = s.bank_account) d
      ON d.first_day IS NOT NULL
    WHERE s.bank_account = ${bank.id} AND (d.first_day = ${date} OR d.last_day = ${date})
    ORDER BY s.import_id, s.position`.execute(db);
  // A statement of the day by its closing date (a day without lines has no line to name it): its closing
  // balance, and its opening when none of its lines is booked before the day (a statement of that day alone).
  const { rows: ofDay } = await sql<{ opening: string | null; closing: string | null; earlier: boolean }>`
    SELECT round(s.opening * 100)::text AS opening, round(s.closing * 100)::text AS closing,
      EXISTS (SELECT 1 FROM bank_statement_lines b WHERE b.import_id = s.import_id
        AND b.bank_account = s.bank_account AND b.booking_date < ${date}::date) AS earlier
    FROM import_statements s
    WHERE s.bank_account = ${bank.id} AND s.closing_date = ${date}::date
    ORDER BY s.import_id DESC, s.position DESC LIMIT 1`.execute(db);
  const dated = ofDay[0];
  const opening =
    statements.find((s) => s.first_day === date && s.opening !== null)?.opening ??
    (dated && !dated.earlier ? dated.opening : null);
  const closing =
    statements.findLast((s) => s.last_day === date && s.closing !== null)?.closing ?? dated?.closing ?? null;

  // By effect day (`effectDay`).
  const { rows: ledgerRows } = await sql<{ opening: string; closing: string }>`
    WITH moved AS (
      SELECT p.amount, ${effectDay(timeZone)} AS day
      FROM postings p JOIN journal_entries e ON e.id = p.entry_id
      WHERE p.merchant_account = ${bank.account} AND p.currency = ${bank.currency} AND p.book = 'live'
        AND p.account = ${`${BANK_ACCOUNT_PREFIX}${bank.id}`})
    SELECT coalesce(round(sum(amount) FILTER (WHERE day < ${date}::date) * 100), 0)::text AS opening,
      coalesce(round(sum(amount) FILTER (WHERE day <= ${date}::date) * 100), 0)::text AS closing
    FROM moved`.execute(db);
  const ledger = minor(ledgerRows[0]?.closing ?? '0');
  const ledgerOpening = minor(ledgerRows[0]?.opening ?? '0');

  const { rows: open } = await sql<{
    identity: string;
    settlement_id: string;
    value_date: string;
    net: string;
    settlement_currency: string;
    bank_reference: string | null;
  }>`
    SELECT s.identity, s.settlement_id, s.value_date::text AS value_date, round(s.net * 100)::text AS net,
      s.settlement_currency, s.bank_reference
    FROM provider_settlement_rows s
    WHERE ${settlementsOf(bank)} AND s.net > 0 AND s.value_date <= ${date}::date
      AND NOT EXISTS (SELECT 1 FROM match_members m
        WHERE m.side = 'settlement' AND m.identity = s.identity AND m.live)
    ORDER BY s.value_date, s.settlement_id, s.identity`.execute(db);

  const [first, notInLedger] = await Promise.all([
    firstStatement(db, bank.id, bank.currency),
    linesNotInLedger(db, bank, date, timeZone, today),
  ]);
  const closingMinor = closing === null ? null : minor(closing);

  const matchIds = [...new Set(matched.map((l) => l.match!.id))];
  const matches = await matchesById(db, matchIds);

  const { rows: around } = await sql<{ previous: string | null; next: string | null }>`
    SELECT (SELECT max(booking_date)::text FROM bank_statement_lines
              WHERE bank_account = ${bank.id} AND booking_date < ${date}::date) AS previous,
           (SELECT min(booking_date)::text FROM bank_statement_lines
              WHERE bank_account = ${bank.id} AND booking_date > ${date}::date) AS next`.execute(db);

  return {
    bank,
    date,
    dayEnd,
    statement: {
      opening: opening === null ? null : minor(opening),
      closing: closing === null ? null : minor(closing),
    },
    ledger,
    ledgerOpening,
    difference: closingMinor === null ? null : closingMinor - ledger,
    proof: {
      ...reconcileBank({
        closing: closingMinor,
        openingBeforeFirst: first?.opening ?? null,
        linesNotInLedger: notInLedger.total,
        ledger,
      }),
      firstStatement: first,
      notInLedger,
    },
    share: {
      lines: lines.length,
      matchedLines: matched.length,
      amount: lines.reduce((sum, l) => sum + abs(l.amount), 0n),
      matchedAmount: matched.reduce((sum, l) => sum + abs(l.amount), 0n),
    },
    lines,
    unmatched: lines.filter((l) => l.match === null),
    openSettlements: open.map((s) => ({
      identity: s.identity,
      settlementId: s.settlement_id,
      valueDate: s.value_date,
      net: minor(s.net),
      currency: s.settlement_currency.trim(),
      bankReference: s.bank_reference,
      ageDays: daysFrom(s.value_date, today),
    })),
    matches,
    previous: around[0]?.previous ?? null,
    next: around[0]?.next ?? null,
  };
}

/**
 * The lines of the bank account booked on or before `date` that the ledger's bank account does not hold
 * at the day's end: for each line, the bank match entries of the matches it was ever in (applications
 * less reversals) that count by the day (`effectDay`); a line they count once is in the ledger, any other
 * lacks its amount times (1 - that count). Counted and summed over all of them; the latest listed. The
 * applications are read through the merchant account's bank match index, the reversals from the ended
 * matches: never the whole journal.
 */
async function linesNotInLedger(
  db: Db,
  bank: ReconciliationBankAccount,
  date: string,
  timeZone: string,
  today: string,
): Promise<DayProof['notInLedger']> {
  const { rows } = await sql<{
    identity: string;
    reference: string | null;
    booking_date: string;
    amount: string;
    missing: string;
    counted: number;
    counterparty: string | null;
    description: string | null;
    matched_now: boolean;
    n: number;
    total: string;
  }>`
    SELECT x.identity, x.reference, x.booking_date::text AS booking_date, round(x.amount * 100)::text AS amount,
      round(x.missing * 100)::text AS missing, x.counted, x.counterparty, x.description,
      EXISTS (SELECT 1 FROM match_members m WHERE m.side = 'bank_line' AND m.identity = x.identity AND m.live)
        AS matched_now,
      count(*) OVER ()::int AS n, round(sum(x.missing) OVER () * 100)::text AS total
    FROM (
      SELECT b.identity, b.reference, b.booking_date, b.amount, b.counterparty, b.description,
        (coalesce(a.n, 0) - coalesce(r.n, 0))::int AS counted,
        b.amount * (1 - coalesce(a.n, 0) + coalesce(r.n, 0)) AS missing
      FROM bank_statement_lines b
      -- The applications of the merchant account's bank matches (journal_entries_bank_match_ix), per line.
      LEFT JOIN (
        SELECT m.identity, count(*) AS n
        FROM journal_entries e
        JOIN match_members m ON m.match_id::text = e.entity_id AND m.side = 'bank_line'
        WHERE e.entity_kind = 'bank_match' AND e.direction = 1 AND e.merchant_account = ${bank.account}
          AND e.currency = ${bank.currency} AND ${effectDay(timeZone)} <= ${date}::date
        GROUP BY m.identity) a ON a.identity = b.identity
      -- Their reversals: only ended matches have any (match_members_ended_idx), per line.
      LEFT JOIN (
        SELECT m.identity, count(*) AS n
        FROM match_members m
        JOIN journal_entries e ON e.entity_id = m.match_id::text AND e.entity_kind = 'bank_match'
          AND e.merchant_account = ${bank.account} AND e.direction = -1
        WHERE m.side = 'bank_line' AND NOT m.live AND e.currency = ${bank.currency}
          AND ${effectDay(timeZone)} <= ${date}::date
        GROUP BY m.identity) r ON r.identity = b.identity
      WHERE b.bank_account = ${bank.id} AND b.currency = ${bank.currency} AND b.booking_date <= ${date}::date) x
    WHERE x.counted <> 1
    ORDER BY x.booking_date DESC, x.identity
    LIMIT ${NOT_IN_LEDGER_LISTED}`.execute(db);
  return {
    count: rows[0]?.n ?? 0,
    total: minor(rows[0]?.total ?? '0'),
    lines: rows.map((r) => ({
      identity: r.identity,
      reference: r.reference,
      bookingDate: r.booking_date,
      amount: minor(r.amount),
      missing: minor(r.missing),
      counted: r.counted,
      counterparty: r.counterparty,
      description: r.description,
      matchedNow: r.matched_now,
      ageDays: daysFrom(r.booking_date, today),
    })),
  };
}

interface MatchSqlRow {
  id: string;
  rule: string;
  created_at: Date;
  created_by: string;
  note: string | null;
  difference: string;
  side: string;
  identity: string;
  label: string | null;
  amount: string | null;
}

/** Matches with their members (live or not), each member labelled (reference or settlement id). */
async function matchesById(db: Db, ids: readonly string[]): Promise<DayMatch[]> {
  if (ids.length === 0) return [];
  const { rows } = await sql<MatchSqlRow>`
    SELECT mt.id::text AS id, mt.rule, mt.created_at, mt.created_by, mt.note,
      round(mt.difference * 100)::text AS difference, x.side, x.identity,
      coalesce(b.reference, s.settlement_id, x.identity) AS label,
      round(coalesce(b.amount, s.net) * 100)::text AS amount
    FROM matches mt JOIN match_members x ON x.match_id = mt.id
    LEFT JOIN bank_statement_lines b ON x.side = 'bank_line' AND b.identity = x.identity
    LEFT JOIN provider_settlement_rows s ON x.side = 'settlement' AND s.identity = x.identity
    WHERE mt.id = ANY(${ids.map(Number)}::bigint[])
    ORDER BY mt.id, x.side, x.identity`.execute(db);
  return groupMatches(rows);
}

function groupMatches(rows: readonly MatchSqlRow[]): DayMatch[] {
  const byId = new Map<string, DayMatch>();
  for (const r of rows) {
    let m = byId.get(r.id);
    if (!m) {
      m = {
        id: r.id,
        rule: r.rule,
        createdAt: r.created_at,
        createdBy: r.created_by,
        note: r.note,
        difference: minor(r.difference),
        members: [],
      };
      byId.set(r.id, m);
    }
    m.members.push({
      side: r.side,
      identity: r.identity,
      label: r.label ?? r.identity,
      amount: r.amount === null ? null : minor(r.amount),
    });
  }
  return [...byId.values()];
}

export interface MatchListRow extends DayMatch {
  pair: string;
  endedAt: Date | null;
  endedBy: string | null;
  endNote: string | null;
}

/**
 * The bank-settlement matches (live and ended, the audit) whose bank lines are of `bankAccount` (any when
 * null) and booked in [from, to] (either bound open when null), newest first, at most `limit`.
 */
export async function listMatches(
  db: Db,
  filter: { bankAccount: string | null; from: string | null; to: string | null; limit: number },
): Promise<MatchListRow[]> {
  const { rows: ids } = await sql<{ id: string }>`
    SELECT DISTINCT mt.id::text AS id, mt.id AS n FROM matches mt
    JOIN match_members x ON x.match_id = mt.id AND x.side = 'bank_line'
    JOIN bank_statement_lines b ON b.identity = x.identity
    WHERE mt.pair = 'bank-settlement'
      AND (${filter.bankAccount}::text IS NULL OR b.bank_account = ${filter.bankAccount})
      AND (${filter.from}::date IS NULL OR b.booking_date >= ${filter.from}::date)
      AND (${filter.to}::date IS NULL OR b.booking_date <= ${filter.to}::date)
    ORDER BY n DESC LIMIT ${filter.limit}`.execute(db);
  return withEnds(
    db,
    ids.map((r) => r.id),
  );
}

/** One match (live or ended) with its members, or null. */
export async function getMatch(db: Db, id: string): Promise<MatchListRow | null> {
  if (!/^\d{1,18}$/.test(id)) return null;
  return (await withEnds(db, [id]))[0] ?? null;
}

async function withEnds(db: Db, ids: readonly string[]): Promise<MatchListRow[]> {
  if (ids.length === 0) return [];
  const matches = await matchesById(db, ids);
  const { rows: ends } = await sql<{
    id: string;
    pair: string;
    ended_at: Date | null;
    ended_by: string | null;
    end_note: string | null;
  }>`
    SELECT id::text AS id, pair, ended_at, ended_by, end_note FROM matches
    WHERE id = ANY(${ids.map(Number)}::bigint[])`.execute(db);
  const endOf = new Map(ends.map((e) => [e.id, e]));
  return matches
    .map((m) => {
      const e = endOf.get(m.id);
      return {
        ...m,
        pair: e?.pair ?? 'bank-settlement',
        endedAt: e?.ended_at ?? null,
        endedBy: e?.ended_by ?? null,
        endNote: e?.end_note ?? null,
      };
    })
    .sort((a, b) => Number(BigInt(b.id) - BigInt(a.id)));
}

/**
 * The bank account and day an exception's line is reconciled on: a bank line's account and booking
 * date; a settlement's bank account (its merchant account's in its currency) and value date; else null.
 */
export async function reconciliationDayOf(
  db: Db,
  banks: readonly ReconciliationBankAccount[],
  kind: string,
  id: string,
): Promise<{ bankAccount: string; date: string } | null> {
  if (kind === 'bank_line') {
    const { rows } = await sql<{ bank_account: string; booking_date: string }>`
      SELECT bank_account, booking_date::text AS booking_date FROM bank_statement_lines
      WHERE identity = ${id}`.execute(db);
    const r = rows[0];
    return r ? { bankAccount: r.bank_account, date: r.booking_date } : null;
  }
  if (kind === 'settlement') {
    const { rows } = await sql<{ account: string | null; currency: string; value_date: string }>`
      SELECT account, settlement_currency AS currency, value_date::text AS value_date
      FROM provider_settlement_rows WHERE settlement_id = ${id} ORDER BY identity LIMIT 1`.execute(db);
    const r = rows[0];
    if (!r) return null;
    const bank =
      banks.find((b) => b.currency === r.currency.trim() && b.account === r.account) ??
      banks.find((b) => b.currency === r.currency.trim());
    return bank ? { bankAccount: bank.id, date: r.value_date } : null;
  }
  return null;
}
