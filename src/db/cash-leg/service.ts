/**
 * Books the cash leg (src/domain/cash-leg.ts): a settlement from its report row, a bank credit matched to
 * settlements, and the reversal of such a match (an unmatch). Every function is idempotent: a settlement
 * is booked once under its keys whatever the number of imports that bring it, a match once under its match
 * id while it stands, an unmatch reverses it once. Each runs in the caller's transaction when given one,
 * else in its own; entries go through the cash leg's write path (src/db/ledger/cash-write.ts).
 */
import { sql } from 'kysely';
import {
  type BankMatchBooking,
  bankMatchEntry,
  type CashEntry,
  type CashPosting,
  cashEntryKey,
  reversalOf,
  settlementEntries,
  settlementFactsOf,
} from '../../domain/cash-leg.ts';
import { AppError } from '../../domain/errors.ts';
import { parseLedgerMinor } from '../../domain/money.ts';
import { CASH_ENTRIES_PER_STATEMENT, type CashEntryToBook, writeCashEntries } from '../ledger/cash-write.ts';
import type { Db } from '../schema.ts';
import { inLedgerTransaction } from '../transaction.ts';

/** A stored settlement report row (`provider_settlement_rows`), as far as booking needs it. */
export interface SettlementRow {
  settlement_id: string;
  account: string | null;
  period_end: Date | null;
  currency: string;
  gross: string;
  fees: string;
  settlement_currency: string;
  rate: string;
  net: string;
  value_date: string | Date;
}

export type SettlementBooking =
  /** Entries booked now (`entries` of them). */
  | { status: 'booked'; entries: number }
  /** Booked before: nothing added. */
  | { status: 'already' }
  /** The report names no merchant account for it: nothing can be booked. */
  | { status: 'no-account' }
  /** Nothing to book (gross, fee and net all zero). */
  | { status: 'empty' };

/** A long list in slices of a statement's worth of entries (`CASH_ENTRIES_PER_STATEMENT`). */
function slices<T>(items: readonly T[]): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += CASH_ENTRIES_PER_STATEMENT) {
    out.push(items.slice(i, i + CASH_ENTRIES_PER_STATEMENT));
  }
  return out;
}

/** A date column (`YYYY-MM-DD` or a Date at local midnight as pg gives it) as that day's UTC midnight. */
function utcDay(value: string | Date): Date {
  if (typeof value === 'string') return new Date(`${value.slice(0, 10)}T00:00:00Z`);
  return new Date(Date.UTC(value.getFullYear(), value.getMonth(), value.getDate()));
}

/** The entries a settlement report row books (none when it names no merchant account or moves nothing). */
function settlementRowEntries(row: SettlementRow): CashEntryToBook[] {
  if (row.account === null || row.account === '') return [];
  const effectiveAt = row.period_end ?? utcDay(row.value_date);
  return settlementEntries(settlementFactsOf({ ...row, account: row.account })).map((entry) => ({
    entry,
    effectiveAt,
  }));
}

/**
 * Books a settlement from its report row: its entries (one, or two when converted) under keys of its
 * merchant account and settlement id, effective at its cut-off (else its value date). Booking it again
 * adds nothing.
 */
export async function bookSettlement(db: Db, row: SettlementRow): Promise<SettlementBooking> {
  if (row.account === null || row.account === '') return { status: 'no-account' };
  const entries = settlementRowEntries(row);
  if (entries.length === 0) return { status: 'empty' };
  const booked = await writeCashEntries(db, entries);
  return booked.length === 0 ? { status: 'already' } : { status: 'booked', entries: booked.length };
}

/**
 * Books settlement report rows together (a few statements, whatever their number); a settlement booked
 * before, or named twice, is booked once. Counts the rows booked now, booked before and without account.
 */
async function bookSettlementsOf(db: Db, rows: readonly SettlementRow[]): Promise<SettlementsBooked> {
  const out: SettlementsBooked = { booked: 0, already: 0, noAccount: 0 };
  for (const part of slices(rows)) {
    const entriesOf = part.map(settlementRowEntries);
    const booked = new Set(await writeCashEntries(db, entriesOf.flat()));
    part.forEach((row, i) => {
      if (row.account === null || row.account === '') out.noAccount += 1;
      else if (entriesOf[i]!.some((e) => booked.has(e.entry.idempotencyKey))) out.booked += 1;
      else out.already += 1;
    });
  }
  return out;
}

const SETTLEMENT_COLUMNS = [
  'settlement_id',
  'account',
  'period_end',
  'currency',
  'gross',
  'fees',
  'settlement_currency',
  'rate',
  'net',
  'value_date',
] as const;

export interface SettlementsBooked {
  /** Settlements booked now. */
  booked: number;
  /** Settlements booked before. */
  already: number;
  /** Rows that name no merchant account (not booked). */
  noAccount: number;
}

/**
 * Books the stored settlement rows of the given identities (an import's rows): each one not booked yet is
 * booked, the others add nothing. The rows are read as stored (the first import of a settlement keeps it).
 */
export async function bookSettlementRows(db: Db, identities: readonly string[]): Promise<SettlementsBooked> {
  if (identities.length === 0) return { booked: 0, already: 0, noAccount: 0 };
  return inLedgerTransaction(db, async (trx) => {
    const rows = await trx
      .selectFrom('provider_settlement_rows')
      .select(SETTLEMENT_COLUMNS)
      .where('identity', '=', sql<string>`ANY(${[...identities]}::text[])`)
      .orderBy('settlement_id')
      .orderBy('identity')
      .execute();
    return bookSettlementsOf(trx, rows as SettlementRow[]);
  });
}

/** Books the stored report rows of these settlements (merchant account and settlement id) not booked yet. */
async function bookSettlementsById(
  db: Db,
  settlements: readonly { account: string; settlementId: string }[],
): Promise<void> {
  if (settlements.length === 0) return;
  const rows = await db
    .selectFrom('provider_settlement_rows')
    .select(SETTLEMENT_COLUMNS)
    .where(
      sql<boolean>`(account, settlement_id) IN (SELECT * FROM unnest(${settlements.map((s) => s.account)}::text[],
        ${settlements.map((s) => s.settlementId)}::text[]))`,
    )
    .where(
      sql<boolean>`NOT EXISTS (SELECT 1 FROM journal_entries e
        WHERE e.entity_id = provider_settlement_rows.settlement_id AND e.entity_kind = 'settlement'
          AND e.merchant_account = provider_settlement_rows.account)`,
    )
    .orderBy('settlement_id')
    .orderBy('identity')
    .execute();
  await bookSettlementsOf(db, rows as SettlementRow[]);
}

interface BookedEntry {
  id: string;
  direction: number;
  seq: number;
  merchant_account: string;
  currency: string;
  amount: string;
  fee_amount: string | null;
}

/** The entries of a bank match, oldest first. */
async function matchEntries(db: Db, matchId: string): Promise<BookedEntry[]> {
  const { rows } = await sql<BookedEntry>`
    SELECT id::text, direction, seq, merchant_account, currency, amount::text, fee_amount::text
    FROM journal_entries
    WHERE entity_id = ${matchId} AND entity_kind = 'bank_match'
    ORDER BY id`.execute(db);
  return rows;
}

/** One match id at a time: its entries are read, then written, under this lock. */
async function lockMatch(db: Db, matchId: string): Promise<void> {
  await sql`SELECT pg_advisory_xact_lock(hashtextextended(${`bank_match:${matchId}`}, 0))`.execute(db);
}

function liveOf(entries: readonly BookedEntry[]) {
  const applications = entries.filter((e) => e.direction === 1);
  const reversals = entries.length - applications.length;
  const live = applications.length - reversals === 1 ? applications[applications.length - 1]! : null;
  return { applications: applications.length, reversals, live };
}

async function postingsOf(db: Db, entryId: string): Promise<CashPosting[]> {
  const { rows } = await sql<{ account: string; currency: string; amount: string }>`
    SELECT account, currency, amount::text FROM postings WHERE entry_id = ${entryId} ORDER BY id`.execute(db);
  return rows.map((r) => ({ account: r.account, currency: r.currency, amount: parseLedgerMinor(r.amount) }));
}

/**
 * Writes bank matches' entries (each its application `seq`), the settlements they name first, from their
 * stored report rows (nothing for those booked already); each effective on its bank line's booking day
 * (now when the line is not stored).
 */
async function writeBankMatches(
  db: Db,
  matches: readonly { booking: BankMatchBooking; seq: number }[],
): Promise<void> {
  await bookSettlementsById(
    db,
    matches.flatMap(({ booking }) =>
      booking.settlements.map((s) => ({ account: booking.account, settlementId: s.settlementId })),
    ),
  );
  const now = new Date();
  for (const part of slices(matches)) {
    const { rows: days } = await sql<{ identity: string; day: string }>`
      SELECT identity, booking_date::text AS day FROM bank_statement_lines
      WHERE identity = ANY(${part.map((m) => m.booking.bankLineIdentity)}::text[])`.execute(db);
    const dayOf = new Map(days.map((r) => [r.identity, utcDay(r.day)]));
    await writeCashEntries(
      db,
      part.map(({ booking, seq }) => ({
        entry: bankMatchEntry(booking, seq),
        effectiveAt: dayOf.get(booking.bankLineIdentity) ?? now,
        memo: {
          bankAccount: booking.bankAccount,
          bankLine: booking.bankLineIdentity,
          settlements: booking.settlements.map((x) => x.settlementId),
        },
      })),
    );
  }
}

export type BankMatchResult = { status: 'booked' } | { status: 'already' };

/**
 * Books a bank credit matched to settlements: settlements in transit less their nets, the bank account
 * plus the credit, bank fees plus the difference. Booking the same match again adds nothing; a match id
 * booked with other amounts or settlements while it stands is refused (CONFLICT); after its reversal the
 * same id may be booked again (its next application).
 */
export async function bookBankMatch(db: Db, booking: BankMatchBooking): Promise<BankMatchResult> {
  return inLedgerTransaction(db, async (trx) => {
    await lockMatch(trx, booking.matchId);
    const booked = await matchEntries(trx, booking.matchId);
    const { applications, live } = liveOf(booked);
    const entry = bankMatchEntry(booking, applications + 1);
    if (live !== null) {
      const same =
        live.merchant_account === entry.account &&
        live.currency === entry.currency &&
        parseLedgerMinor(live.amount) === entry.amount &&
        (live.fee_amount === null ? null : parseLedgerMinor(live.fee_amount)) === entry.feeAmount &&
        samePostings(await postingsOf(trx, live.id), entry.postings);
      if (same) return { status: 'already' };
      throw new AppError('CONFLICT', `bank match ${booking.matchId} is booked with other amounts`, {
        details: { matchId: booking.matchId },
      });
    }
    await writeBankMatches(trx, [{ booking, seq: applications + 1 }]);
    return { status: 'booked' };
  });
}

/**
 * Books the bank matches a matching run has just made, in the run's transaction, together: the settlements
 * they name not booked yet, then each match's first application (as `bookBankMatch` does one by one). The
 * matches are the run's own, seen by no other transaction before it commits, so no per-match lock is taken;
 * a match id something is booked under already is left to `bookBankMatch`, which tells a booking made
 * before from a conflicting one.
 */
export async function bookNewBankMatches(db: Db, bookings: readonly BankMatchBooking[]): Promise<void> {
  if (bookings.length === 0) return;
  await inLedgerTransaction(db, async (trx) => {
    const { rows: bookedBefore } = await sql<{ id: string }>`
      SELECT DISTINCT entity_id AS id FROM journal_entries
      WHERE entity_kind = 'bank_match' AND entity_id = ANY(${bookings.map((b) => b.matchId)}::text[])`.execute(
      trx,
    );
    const before = new Set(bookedBefore.map((r) => r.id));
    for (const b of bookings) if (before.has(b.matchId)) await bookBankMatch(trx, b);
    await writeBankMatches(
      trx,
      bookings.filter((b) => !before.has(b.matchId)).map((booking) => ({ booking, seq: 1 })),
    );
  });
}

function samePostings(a: readonly CashPosting[], b: readonly CashPosting[]): boolean {
  const key = (p: CashPosting) => `${p.account}\u0000${p.currency}\u0000${p.amount}`;
  const x = a.map(key).sort();
  const y = b.map(key).sort();
  return x.length === y.length && x.every((k, i) => k === y[i]);
}

export type ReverseResult = { status: 'reversed' } | { status: 'not-booked' };

/**
 * Reverses a bank match (an unmatch): the mirror image of its standing entry under its reversal key. A
 * match not standing (never booked, or reversed already) books nothing.
 */
export async function reverseBankMatch(db: Db, matchId: string): Promise<ReverseResult> {
  return inLedgerTransaction(db, async (trx) => {
    await lockMatch(trx, matchId);
    const booked = await matchEntries(trx, matchId);
    const { reversals, live } = liveOf(booked);
    if (live === null) return { status: 'not-booked' };
    const postings = await postingsOf(trx, live.id);
    const applied: CashEntry = {
      idempotencyKey: cashEntryKey('bank_match', live.merchant_account, matchId, 'bank_match', 1, live.seq),
      kind: 'bank_match',
      account: live.merchant_account,
      entityId: matchId,
      effect: 'bank_match',
      direction: 1,
      seq: live.seq,
      currency: live.currency,
      amount: parseLedgerMinor(live.amount),
      feeAmount: live.fee_amount === null ? null : parseLedgerMinor(live.fee_amount),
      rate: null,
      postings,
    };
    await writeCashEntries(trx, [{ entry: reversalOf(applied, reversals + 1), effectiveAt: new Date() }]);
    return { status: 'reversed' };
  });
}
