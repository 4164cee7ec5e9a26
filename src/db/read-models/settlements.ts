/**
 * What the cash leg's readers see: the ledger's `available` per merchant account and currency at an
 * instant (to compare with a balance the provider reports), the settlements of a period as their report
 * gives them with whether the ledger booked them, and the settlements a payment's money went out in (the
 * provider's transactions report names them). Amounts come back as bigint minor units.
 */
import { sql } from 'kysely';
import { LEDGER_NUMERIC, type Minor, parseMinor } from '../../domain/money.ts';
import type { Db } from '../schema.ts';
import { balances } from './balances.ts';

export interface AvailableBalance {
  merchantAccount: string;
  currency: string;
  available: Minor;
}

/**
 * The live `available` of every merchant account and currency (or of one merchant account) as booked up
 * to `at` (default now): the running balance now, an earlier instant from the snapshots (`balances`).
 */
export async function ledgerAvailable(
  db: Db,
  options: { at?: Date; merchantAccount?: string } = {},
): Promise<AvailableBalance[]> {
  const rows = await balances(db, { ...options, book: 'live' });
  return rows
    .filter((r) => r.account === 'available')
    .map((r) => ({ merchantAccount: r.merchantAccount, currency: r.currency, available: r.balance }));
}

export interface SettlementReportRow {
  settlementId: string;
  account: string | null;
  periodStart: Date | null;
  periodEnd: Date | null;
  currency: string;
  gross: Minor;
  fees: Minor;
  settlementCurrency: string;
  rate: string;
  net: Minor;
  /** `YYYY-MM-DD`. */
  valueDate: string;
  bankReference: string | null;
  /** True when the ledger holds the settlement's entries. */
  booked: boolean;
  /** The bank line of the standing bank match that names the settlement (`bookBankMatch`), if any. */
  bankLine: { reference: string | null; bookingDate: string; amount: Minor } | null;
}

interface SettlementSqlRow {
  settlement_id: string;
  account: string | null;
  period_start: Date | null;
  period_end: Date | null;
  currency: string;
  gross: string;
  fees: string;
  settlement_currency: string;
  rate: string;
  net: string;
  value_date: string;
  bank_reference: string | null;
  booked: boolean;
  line_reference?: string | null;
  line_date?: string | null;
  line_amount?: string | null;
}

const amount = (text: string) => parseMinor(text, LEDGER_NUMERIC);

function reportRow(r: SettlementSqlRow): SettlementReportRow {
  return {
    settlementId: r.settlement_id,
    account: r.account,
    periodStart: r.period_start,
    periodEnd: r.period_end,
    currency: r.currency.trim(),
    gross: amount(r.gross),
    fees: amount(r.fees),
    settlementCurrency: r.settlement_currency.trim(),
    rate: r.rate,
    net: amount(r.net),
    valueDate: r.value_date,
    bankReference: r.bank_reference,
    booked: r.booked,
    bankLine:
      r.line_date === null ||
      r.line_date === undefined ||
      r.line_amount === null ||
      r.line_amount === undefined
        ? null
        : { reference: r.line_reference ?? null, bookingDate: r.line_date, amount: amount(r.line_amount) },
  };
}

/** Whether the settlement row `s` is booked: an entry of its settlement in its merchant account. */
const BOOKED = sql<boolean>`EXISTS (SELECT 1 FROM journal_entries e WHERE e.entity_id = s.settlement_id
  AND e.entity_kind = 'settlement' AND e.merchant_account = s.account AND e.direction = 1)`;

const COLUMNS = sql`s.settlement_id, s.account, s.period_start, s.period_end, s.currency, s.gross::text,
  s.fees::text, s.settlement_currency, s.rate::text, s.net::text, s.value_date::text, s.bank_reference`;

/**
 * The bank line of the standing bank match naming settlement row `s`: the matches' applications of its
 * merchant account (`journal_entries_bank_match_ix`) that name it in their memo and have no reversal (the
 * reversal of application n is reversal n), the latest, and its line by identity.
 */
const MATCHED_LINE = sql`LEFT JOIN LATERAL (
    SELECT l.reference AS line_reference, l.booking_date::text AS line_date, l.amount::text AS line_amount
    FROM journal_entries m JOIN bank_statement_lines l ON l.identity = m.memo->>'bankLine'
    WHERE m.entity_kind = 'bank_match' AND m.direction = 1 AND m.merchant_account = s.account
      AND m.memo->'settlements' @> jsonb_build_array(s.settlement_id)
      AND NOT EXISTS (SELECT 1 FROM journal_entries r WHERE r.entity_id = m.entity_id
        AND r.entity_kind = 'bank_match' AND r.merchant_account = m.merchant_account AND r.direction = -1
        AND r.seq = m.seq)
    ORDER BY m.id DESC LIMIT 1) b ON true`;

/**
 * The settlements whose value date lies in [from, to] (local dates `YYYY-MM-DD`), of one merchant account
 * or all, each once (by value date, then id), with whether they are booked and the bank line matched.
 */
export async function settlementsOfPeriod(
  db: Db,
  from: string,
  to: string,
  account: string | null,
): Promise<SettlementReportRow[]> {
  const { rows } = await sql<SettlementSqlRow>`
    SELECT ${COLUMNS}, ${BOOKED} AS booked, b.line_reference, b.line_date, b.line_amount
    FROM provider_settlement_rows s ${MATCHED_LINE}
    WHERE s.value_date >= ${from}::date AND s.value_date <= ${to}::date
      AND (${account}::text IS NULL OR s.account = ${account})
    ORDER BY s.value_date, s.settlement_id, s.identity`.execute(db);
  return rows.map(reportRow);
}

export interface PaymentSettlement {
  settlementId: string;
  /** The row of the provider's transactions report that names it: its status and net. */
  status: string;
  net: Minor;
  currency: string;
  /** The settlement's report row, when imported. */
  settlement: SettlementReportRow | null;
}

/**
 * The settlements a payment's money went in or out in, as the provider's transactions report names them
 * (a move after a settlement falls into the next one, so a payment may have several), with each
 * settlement's report row when imported and the bank line matched to it. Read by key (the transaction rows by transaction id, the
 * settlement rows by settlement id).
 */
export async function paymentSettlements(
  db: Db,
  merchantAccount: string,
  kind: string,
  entityId: string,
): Promise<PaymentSettlement[]> {
  const { rows } = await sql<
    { t_settlement_id: string; t_status: string; t_net: string; t_currency: string } & {
      [K in keyof SettlementSqlRow]: SettlementSqlRow[K] | null;
    }
  >`
    SELECT t.settlement_id AS t_settlement_id, t.status AS t_status, t.net::text AS t_net, t.currency AS t_currency,
      ${COLUMNS}, CASE WHEN s.settlement_id IS NULL THEN NULL ELSE ${BOOKED} END AS booked,
      b.line_reference, b.line_date, b.line_amount
    FROM provider_transaction_rows t
    LEFT JOIN LATERAL (SELECT * FROM provider_settlement_rows s WHERE s.settlement_id = t.settlement_id
      AND (s.account IS NULL OR s.account = ${merchantAccount}) ORDER BY s.identity LIMIT 1) s ON true
    ${MATCHED_LINE}
    WHERE t.transaction_id = ${entityId} AND t.type = ${kind} AND t.settlement_id IS NOT NULL
    ORDER BY t.created_at, t.settlement_id`.execute(db);
  const seen = new Set<string>();
  const out: PaymentSettlement[] = [];
  for (const r of rows) {
    const key = `${r.t_settlement_id}\u0000${r.t_status}\u0000${r.t_net}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({
      settlementId: r.t_settlement_id,
      status: r.t_status,
      net: amount(r.t_net),
      currency: r.t_currency.trim(),
      settlement: r.settlement_id === null ? null : reportRow(r as SettlementSqlRow),
    });
  }
  return out;
}

/** The provider's balance of a merchant account and currency at a cut-off, and the ledger's `available` then. */
export interface ProviderBalanceFigures {
  merchantAccount: string;
  currency: string;
  /** The settlement whose report row gives the provider's balance, and its cut-off. */
  settlementId: string;
  cutoff: Date;
  provider: Minor;
  ledger: Minor;
}

/** The latest check of the provider's balance of a merchant account and currency (src/db/matching/balance-drift.ts). */
export interface ProviderBalanceCheckRow extends ProviderBalanceFigures {
  /** When the matching run made the check. */
  checkedAt: Date;
  /** Since when the checks have differed without a break; null while they agree. */
  differsSince: Date | null;
}

/** The latest check of each merchant account and currency, by account and currency. */
export async function latestBalanceChecks(db: Db): Promise<ProviderBalanceCheckRow[]> {
  const rows = await db
    .selectFrom('provider_balance_checks')
    .selectAll()
    .orderBy('merchant_account')
    .orderBy('currency')
    .execute();
  return rows.map((r) => ({
    merchantAccount: r.merchant_account,
    currency: r.currency,
    settlementId: r.settlement_id,
    cutoff: r.cutoff,
    provider: parseMinor(r.provider, LEDGER_NUMERIC),
    ledger: parseMinor(r.ledger, LEDGER_NUMERIC),
    checkedAt: r.checked_at,
    differsSince: r.differs_since,
  }));
}
