/**
 * The figures of a month close: one merchant account, currency and month (the signed record of them is
 * src/db/closes/records.ts).
 *
 * Periods use booking time (`created_at`), like the settlement workbook and the daily snapshots, so a
 * period's figures never change once it is over: opening and closing balances are the latest daily
 * snapshot at or before the instant plus what moved since (`balanceAsOf`: at most a day of movements
 * and an hour of entries), movements are the period's entries read by their creation time and their
 * postings by entry (`entryPostings`). Nothing sums the whole history. An entry booked after a period whose effect date (`effective_at`) lies inside it is a
 * post-close adjustment: it moves the next period's figures, and is listed on both pages.
 */
import { sql } from 'kysely';
import {
  CLOSE_DOCUMENT_VERSION,
  type CloseAccountLine,
  type CloseAdjustmentLine,
  type CloseDocument,
  type CloseExceptionLine,
  type CloseInFlightLine,
  type CloseMovementLine,
} from '../../domain/close.ts';
import { formatAmount, type Minor, parseLedgerMinor, parseMinorOrNull } from '../../domain/money.ts';
import { balanceAsOf, entryPostings } from '../ledger/periods.ts';
import { IN_FLIGHT_LITERALS, OPEN_PAYOUTS } from '../read-models/balances.ts';
import type { Db } from '../schema.ts';
import { type BankProofSettings, bankAccountsOf, bankProof } from './bank-proof.ts';

/** One merchant account, currency and month, with the month's instants in the report time zone. */
export interface CloseScope {
  merchantAccount: string;
  currency: string;
  /** `YYYY-MM`. */
  period: string;
  timeZone: string;
  /** [start, end): the cut-off is `end`. */
  start: Date;
  end: Date;
  /** The close month (`YYYY-MM`) an instant falls in, under the same time zone and cut-off. */
  monthOf(instant: Date): string;
  /** The bank accounts and the note rule of the bank proof; absent or no account of the pair: no bank proof. */
  bank?: BankProofSettings;
}

const amount = (minor: Minor): string => formatAmount(minor);
const iso = (d: Date): string => d.toISOString();

/** Each ledger account of the scope's merchant account and currency: balances before `start` and `end`. */
async function accountBalances(
  db: Db,
  s: CloseScope,
): Promise<{ book: string; account: string; opening: Minor; closing: Minor }[]> {
  // The latest daily snapshot plus what moved since, at the period's start and at its end.
  const opening = balanceAsOf(s.start, false, 'so');
  const closing = balanceAsOf(s.end, false, 'sc');
  const { rows } = await sql<{ book: string; name: string; opening: string; closing: string }>`
    SELECT a.book, a.name, ${opening.balance} AS opening, ${closing.balance} AS closing
    FROM ledger_accounts a ${opening.join} ${closing.join}
    WHERE a.merchant_account = ${s.merchantAccount} AND a.currency = ${s.currency}
    ORDER BY a.book, a.name`.execute(db);
  return rows.map((r) => ({
    book: r.book,
    account: r.name,
    opening: parseLedgerMinor(r.opening),
    closing: parseLedgerMinor(r.closing),
  }));
}

/** The period's postings per ledger account, entity kind, effect and direction. */
async function periodMovements(db: Db, s: CloseScope): Promise<CloseMovementLine[]> {
  const { rows } = await sql<{
    book: string;
    account: string;
    entity_kind: string;
    effect: string;
    direction: number;
    amount: string;
    entries: number;
  }>`
    SELECT x.book, x.account, e.entity_kind, e.effect, e.direction, sum(x.amount)::text AS amount,
      count(DISTINCT e.id)::int AS entries
    FROM ${entryPostings(s.start, s.end)}
      AND e.merchant_account = ${s.merchantAccount} AND x.currency = ${s.currency}
    GROUP BY x.book, x.account, e.entity_kind, e.effect, e.direction
    ORDER BY x.book, x.account, e.entity_kind, e.effect, e.direction DESC`.execute(db);
  return rows.map((r) => ({
    book: r.book,
    account: r.account,
    entityKind: r.entity_kind,
    effect: r.effect,
    direction: r.direction,
    amount: amount(parseLedgerMinor(r.amount)),
    entries: r.entries,
  }));
}

/**
 * Cashouts and refunds holding money in the live `reserved` account at the cut-off. The candidates are
 * the entities in flight now and those whose reservation moved after the cut-off (both small sets, found
 * through indexes); each one's reserved balance at the cut-off is summed from its own entries.
 */
async function inFlightAt(db: Db, s: CloseScope): Promise<CloseInFlightLine[]> {
  const { rows } = await sql<{
    entity_kind: string;
    entity_id: string;
    external_ref: string | null;
    reserved_at: Date;
    amount: string;
  }>`
    WITH candidates AS (
      -- (only cashouts and refunds reserve: the other entries' postings are not read)
      SELECT e.entity_kind, e.entity_id FROM ${entryPostings(s.end, null)}
        AND e.merchant_account = ${s.merchantAccount} AND e.book = 'live' AND e.entity_kind IN ('cashout', 'refund')
        AND x.currency = ${s.currency} AND x.account = 'reserved'
      UNION
      -- the open cashouts and refunds (mirror_watches_in_flight_ix)
      SELECT m.entity_kind, m.entity_id FROM mirror_watches w
      JOIN mirrors m ON m.entity_id = w.entity_id AND m.entity_kind = w.entity_kind AND m.merchant_account = w.merchant_account
      WHERE ${OPEN_PAYOUTS} AND m.status IN (${IN_FLIGHT_LITERALS})
        AND w.merchant_account = ${s.merchantAccount} AND w.currency = ${s.currency} AND NOT w.test
    )
    SELECT c.entity_kind, c.entity_id, m.external_ref, r.reserved_at, r.amount
    FROM candidates c
    CROSS JOIN LATERAL (
      SELECT min(e.created_at) AS reserved_at, sum(p.amount)::text AS amount
      FROM journal_entries e JOIN postings p ON p.entry_id = e.id
      WHERE e.merchant_account = ${s.merchantAccount} AND e.entity_kind = c.entity_kind AND e.entity_id = c.entity_id
        AND e.created_at < ${s.end} AND p.book = 'live' AND p.account = 'reserved' AND p.currency = ${s.currency}) r
    -- each candidate's mirror by its key, whatever the estimate of the candidates (never a scan of mirrors)
    LEFT JOIN LATERAL (SELECT m.external_ref FROM mirrors m WHERE m.merchant_account = ${s.merchantAccount}
      AND m.entity_kind = c.entity_kind AND m.entity_id = c.entity_id OFFSET 0) m ON true
    WHERE r.amount IS NOT NULL AND r.amount::numeric <> 0
    ORDER BY r.reserved_at, c.entity_kind, c.entity_id`.execute(db);
  return rows.map((r) => ({
    kind: r.entity_kind,
    entityId: r.entity_id,
    externalRef: r.external_ref,
    reservedAt: iso(r.reserved_at),
    amount: amount(parseLedgerMinor(r.amount)),
  }));
}

/** An amount text from an exception's facts, or null when absent or unreadable. */
function factAmount(text: string | null): Minor | null {
  try {
    return parseMinorOrNull(text, { allowNegative: true, field: 'amount' });
  } catch {
    return null;
  }
}

/** Exceptions of the account open at the cut-off whose entity is in the close's currency. */
async function exceptionsOpenAt(db: Db, s: CloseScope): Promise<CloseExceptionLine[]> {
  const { rows } = await sql<{
    id: string;
    type: string;
    severity: string;
    entity_kind: string;
    entity_id: string;
    first_seen_at: Date;
    amount: string | null;
  }>`
    SELECT x.id::text AS id, x.type, x.severity, x.entity_kind, x.entity_id, x.first_seen_at,
      coalesce(m.amount::text, x.details #>> '{facts,providerAmount}', x.details #>> '{facts,intentAmount}') AS amount
    FROM exceptions x
    LEFT JOIN mirrors m ON m.merchant_account = x.merchant_account AND m.entity_kind = x.entity_kind
      AND m.entity_id = x.entity_id
    WHERE x.merchant_account = ${s.merchantAccount} AND x.first_seen_at < ${s.end}
      AND (x.resolved_at IS NULL OR x.resolved_at >= ${s.end})
      AND coalesce(m.currency, x.details #>> '{facts,providerCurrency}', x.details #>> '{facts,intentCurrency}')
        = ${s.currency}
    ORDER BY x.first_seen_at, x.id`.execute(db);
  return rows.map((r) => {
    const minor = factAmount(r.amount);
    return {
      id: r.id,
      type: r.type,
      severity: r.severity,
      entityKind: r.entity_kind,
      entityId: r.entity_id,
      firstSeenAt: iso(r.first_seen_at),
      amount: minor === null ? null : amount(minor),
    };
  });
}

/** Entries of the account and currency booked in [bookedFrom, bookedTo) with effect dates in [effFrom, effTo). */
async function adjustments(
  db: Db,
  s: CloseScope,
  booked: { from: Date; to: Date | null },
  effective: { from: Date | null; to: Date },
): Promise<CloseAdjustmentLine[]> {
  const { rows } = await sql<{
    id: string;
    entity_kind: string;
    entity_id: string;
    effect: string;
    direction: number;
    book: string;
    effective_at: Date;
    created_at: Date;
    postings: { account: string; amount: string }[];
  }>`
    SELECT e.id::text AS id, e.entity_kind, e.entity_id, e.effect, e.direction, e.book, e.effective_at, e.created_at,
      (SELECT json_agg(json_build_object('account', p.account, 'amount', p.amount::text) ORDER BY p.id)
         FROM postings p WHERE p.entry_id = e.id) AS postings
    FROM journal_entries e
    WHERE e.created_at >= ${booked.from} AND (${booked.to}::timestamptz IS NULL OR e.created_at < ${booked.to})
      AND e.effective_at < ${effective.to}
      AND (${effective.from}::timestamptz IS NULL OR e.effective_at >= ${effective.from})
      AND e.merchant_account = ${s.merchantAccount} AND e.currency = ${s.currency}
    ORDER BY e.created_at, e.id`.execute(db);
  return rows.map((r) => {
    const postings = (r.postings ?? []).map((p) => ({
      account: p.account,
      amount: amount(parseLedgerMinor(p.amount)),
    }));
    const main =
      postings.find((p) => p.account === 'available' || p.account === 'test_available') ?? postings[0];
    return {
      entry: r.id,
      entityKind: r.entity_kind,
      entityId: r.entity_id,
      effect: r.effect,
      direction: r.direction,
      book: r.book,
      effectiveAt: iso(r.effective_at),
      bookedAt: iso(r.created_at),
      effectPeriod: s.monthOf(r.effective_at),
      bookedPeriod: s.monthOf(r.created_at),
      available: main?.amount ?? '0.00',
      postings,
    };
  });
}

/** The figures of a close, computed now from the ledger (what preparing signs). */
export async function closeDocument(db: Db, s: CloseScope): Promise<CloseDocument> {
  const [balances, movements, inFlight, exceptions, earlier] = await Promise.all([
    accountBalances(db, s),
    periodMovements(db, s),
    inFlightAt(db, s),
    exceptionsOpenAt(db, s),
    adjustments(db, s, { from: s.start, to: s.end }, { from: null, to: s.start }),
  ]);
  const moved = new Map<string, Minor>();
  for (const m of movements) {
    const key = `${m.book}|${m.account}`;
    moved.set(key, (moved.get(key) ?? 0n) + parseLedgerMinor(m.amount));
  }
  let proof = 0n;
  const accounts: CloseAccountLine[] = balances.map((b) => {
    const movement = moved.get(`${b.book}|${b.account}`) ?? 0n;
    const line = b.opening + movement - b.closing;
    proof += line < 0n ? -line : line;
    return {
      book: b.book,
      account: b.account,
      opening: amount(b.opening),
      movements: amount(movement),
      closing: amount(b.closing),
      proof: amount(line),
    };
  });
  const bankAccounts = s.bank ? bankAccountsOf(s.bank.accounts, s) : [];
  const proofs =
    bankAccounts.length === 0
      ? null
      : await bankProof(
          db,
          s,
          bankAccounts,
          (name) => balances.find((b) => b.book === 'live' && b.account === name)?.closing ?? 0n,
        );
  const reserved = balances.find((b) => b.book === 'live' && b.account === 'reserved')?.closing ?? 0n;
  const sum = (values: (string | null)[]) =>
    amount(values.reduce<Minor>((t, v) => t + (v === null ? 0n : parseLedgerMinor(v)), 0n));
  return {
    v: CLOSE_DOCUMENT_VERSION,
    merchantAccount: s.merchantAccount,
    currency: s.currency,
    period: s.period,
    timeZone: s.timeZone,
    start: iso(s.start),
    end: iso(s.end),
    accounts,
    movements,
    proof: amount(proof),
    inFlight,
    inFlightTotal: sum(inFlight.map((f) => f.amount)),
    reservedAtEnd: amount(reserved),
    exceptions,
    exceptionsTotal: sum(exceptions.map((x) => x.amount)),
    earlierPeriodAdjustments: earlier,
    ...(proofs === null || !s.bank ? {} : { bankProof: proofs, noteAbove: amount(s.bank.noteAbove) }),
  };
}

/** Entries booked after the period whose effect date lies inside it (never part of its frozen figures). */
export function postCloseAdjustments(db: Db, s: CloseScope): Promise<CloseAdjustmentLine[]> {
  return adjustments(db, s, { from: s.end, to: null }, { from: s.start, to: s.end });
}
