/**
 * What matching reads: the lines not in a live match, as the engine's items (`MatchItem`, amounts in minor
 * units, dates as ISO text) with what the exceptions need besides. Bank lines and settlements are grouped
 * by merchant account and currency; report rows and ledger payments by payment kind and currency.
 */
import { type RawBuilder, sql } from 'kysely';
import type { MatchItem } from '../../domain/matching.ts';
import type { Db } from '../schema.ts';

/** A configured bank account: its id as statements name it, its merchant account and currency. */
export interface MatchBankAccount {
  id: string;
  account: string;
  currency: string;
}

export interface BankLineItem extends MatchItem {
  bankAccount: string;
  merchant: string;
  currency: string;
  reference: string | null;
  bookingDate: string;
  description: string | null;
  /** A credit (positive, not a reversal): the only lines matched to settlements. */
  credit: boolean;
  /** The last match this line was in and left (unmatched), or null. */
  endedMatch: string | null;
}

export interface SettlementItem extends MatchItem {
  settlementId: string;
  merchant: string;
  currency: string;
  bankReference: string | null;
  endedMatch: string | null;
}

export interface ReportRowItem extends MatchItem {
  transactionId: string;
  type: string;
  status: string;
  currency: string;
  fee: bigint;
  at: string;
  /** When the import that first brought the row was recorded. */
  importedAt: Date;
}

export interface LedgerPaymentItem extends MatchItem {
  account: string;
  kind: 'deposit' | 'cashout' | 'refund';
  entityId: string;
  status: string | null;
  fee: bigint | null;
}

const minor = (text: string | null): bigint => (text === null ? 0n : BigInt(text));

/** Bank lines in no live match. */
export function unmatchedBankLines(
  db: Db,
  bankAccounts: readonly MatchBankAccount[],
): Promise<BankLineItem[]> {
  return bankLines(
    db,
    bankAccounts,
    sql`NOT EXISTS (
      SELECT 1 FROM match_members m WHERE m.side = 'bank_line' AND m.identity = b.identity AND m.live)`,
  );
}

/** The bank lines and settlements of a match, by identity, matched or not (what its booking needs). */
export async function bankMatchLines(
  db: Db,
  bankAccounts: readonly MatchBankAccount[],
  lineIdentities: readonly string[],
  settlementIdentities: readonly string[],
): Promise<{ lines: BankLineItem[]; settlements: SettlementItem[] }> {
  return {
    lines: await bankLines(db, bankAccounts, sql`b.identity = ANY(${[...lineIdentities]}::text[])`),
    settlements: await settlementRows(
      db,
      bankAccounts,
      sql`s.identity = ANY(${[...settlementIdentities]}::text[])`,
    ),
  };
}

async function bankLines(
  db: Db,
  bankAccounts: readonly MatchBankAccount[],
  where: RawBuilder<unknown>,
): Promise<BankLineItem[]> {
  const merchantOf = new Map(bankAccounts.map((b) => [b.id, b.account]));
  const { rows } = await sql<{
    identity: string;
    bank_account: string;
    currency: string;
    reference: string | null;
    booking_date: string;
    value_date: string;
    amount: string;
    reversal: boolean;
    end_to_end_ids: string[];
    description: string | null;
    ended: string | null;
  }>`
    SELECT b.identity, b.bank_account, b.currency, b.reference, b.booking_date::text AS booking_date,
      coalesce(b.value_date, b.booking_date)::text AS value_date, round(b.amount * 100)::text AS amount,
      b.reversal, b.end_to_end_ids, b.description,
      (SELECT max(x.match_id)::text FROM match_members x
       WHERE x.side = 'bank_line' AND x.identity = b.identity AND NOT x.live) AS ended
    FROM bank_statement_lines b
    WHERE ${where}`.execute(db);
  return rows.map((r) => {
    const merchant = merchantOf.get(r.bank_account) ?? r.bank_account;
    const amount = minor(r.amount);
    return {
      identity: r.identity,
      group: `${merchant}|${r.currency}`,
      amount,
      date: r.value_date,
      keys: {
        endToEndId: r.end_to_end_ids,
        reference: r.reference === null ? [] : [r.reference],
        remittance: r.description === null ? [] : [r.description],
      },
      bankAccount: r.bank_account,
      merchant,
      currency: r.currency,
      reference: r.reference,
      bookingDate: r.booking_date,
      description: r.description,
      credit: amount > 0n && !r.reversal,
      endedMatch: r.ended,
    };
  });
}

/**
 * Settlements in no live match. A report without the merchant account gives the settlement the merchant
 * of the one configured bank account in its settlement currency, if there is exactly one.
 */
export function unmatchedSettlements(
  db: Db,
  bankAccounts: readonly MatchBankAccount[],
): Promise<SettlementItem[]> {
  return settlementRows(
    db,
    bankAccounts,
    sql`NOT EXISTS (
      SELECT 1 FROM match_members m WHERE m.side = 'settlement' AND m.identity = s.identity AND m.live)`,
  );
}

async function settlementRows(
  db: Db,
  bankAccounts: readonly MatchBankAccount[],
  where: RawBuilder<unknown>,
): Promise<SettlementItem[]> {
  const { rows } = await sql<{
    identity: string;
    settlement_id: string;
    account: string | null;
    settlement_currency: string;
    net: string;
    value_date: string;
    bank_reference: string | null;
    ended: string | null;
  }>`
    SELECT s.identity, s.settlement_id, s.account, s.settlement_currency, round(s.net * 100)::text AS net,
      s.value_date::text AS value_date, s.bank_reference,
      (SELECT max(x.match_id)::text FROM match_members x
       WHERE x.side = 'settlement' AND x.identity = s.identity AND NOT x.live) AS ended
    FROM provider_settlement_rows s
    WHERE ${where}`.execute(db);
  return rows.map((r) => {
    const inCurrency = bankAccounts.filter((b) => b.currency === r.settlement_currency);
    const merchant = r.account ?? (inCurrency.length === 1 ? inCurrency[0]!.account : '');
    return {
      identity: r.identity,
      group: `${merchant}|${r.settlement_currency}`,
      amount: minor(r.net),
      date: r.value_date,
      keys: {
        bankReference: r.bank_reference === null ? [] : [r.bank_reference],
        settlementId: [r.settlement_id],
      },
      settlementId: r.settlement_id,
      merchant,
      currency: r.settlement_currency,
      bankReference: r.bank_reference,
      endedMatch: r.ended,
    };
  });
}

const PAYMENT_TYPES = ['deposit', 'cashout', 'refund'];

/**
 * The next page of report rows of payments (deposits, cashouts, refunds): the rows in no live match whose
 * transaction id is after `after` and at most `last`, the last transaction id of the next `limit` rows of
 * the report (so one transaction's rows are never split between pages); `last` null when nothing is left.
 */
export async function unmatchedReportRows(
  db: Db,
  after: string | null,
  limit: number,
): Promise<{ rows: ReportRowItem[]; last: string | null }> {
  // The lower bound as its own condition (not `$1 IS NULL OR ...`), so each page is an index range. The
  // page's end counts the rows of every type: read from the index alone, its plan does not hang on the
  // statistics of a table just imported (a filter on the type, priced without them, turned it into a
  // scan of the whole table for each page).
  const from = after === null ? sql`true` : sql`r.transaction_id > ${after}`;
  const { rows: page } = await sql<{ last: string | null }>`
    SELECT max(p.transaction_id) AS last FROM (
      SELECT r.transaction_id FROM provider_transaction_rows r
      WHERE ${from}
      ORDER BY r.transaction_id LIMIT ${limit}) p`.execute(db);
  const last = page[0]?.last ?? null;
  if (last === null) return { rows: [], last: null };
  const { rows } = await sql<ReportRowColumns>`
    SELECT ${REPORT_ROW_COLUMNS}
    FROM provider_transaction_rows r
    WHERE r.type IN (${sql.join(PAYMENT_TYPES)})
      AND ${from} AND r.transaction_id <= ${last}
      AND NOT EXISTS (
        SELECT 1 FROM match_members m WHERE m.side = 'provider_row' AND m.identity = r.identity AND m.live)`.execute(
    db,
  );
  return { last, rows: rows.map(reportRowItem) };
}

interface ReportRowColumns {
  identity: string;
  transaction_id: string;
  type: string;
  status: string;
  external_id: string | null;
  currency: string;
  gross: string;
  fee: string;
  at: string;
  imported_at: Date;
}

/** The columns of a report row (`r`) as `reportRowItem` reads them. */
const REPORT_ROW_COLUMNS = sql`r.identity, r.transaction_id, r.type, r.status, r.external_id, r.currency,
  round(r.gross * 100)::text AS gross, round(r.fee * 100)::text AS fee,
  to_char(coalesce(r.updated_at, r.created_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at,
  (SELECT i.imported_at FROM imports i WHERE i.id = r.import_id) AS imported_at`;

function reportRowItem(r: ReportRowColumns): ReportRowItem {
  return {
    identity: r.identity,
    group: `${r.type}|${r.currency}`,
    amount: minor(r.gross),
    date: r.at.slice(0, 10),
    keys: { transactionId: [r.transaction_id], externalId: r.external_id === null ? [] : [r.external_id] },
    transactionId: r.transaction_id,
    type: r.type,
    status: r.status,
    currency: r.currency,
    fee: minor(r.fee),
    at: r.at,
    importedAt: r.imported_at,
  };
}

/** The report rows in live matches with each of these ledger payments (by the payment's identity). */
export async function matchedReportRows(
  db: Db,
  paymentIdentities: readonly string[],
): Promise<Map<string, ReportRowItem[]>> {
  const out = new Map<string, ReportRowItem[]>();
  if (paymentIdentities.length === 0) return out;
  const { rows } = await sql<ReportRowColumns & { payment: string }>`
    SELECT p.identity AS payment, ${REPORT_ROW_COLUMNS}
    FROM match_members p
      JOIN match_members m ON m.match_id = p.match_id AND m.side = 'provider_row' AND m.live
      JOIN provider_transaction_rows r ON r.identity = m.identity
    WHERE p.side = 'ledger_payment' AND p.live AND p.identity = ANY(${[...paymentIdentities]}::text[])`.execute(
    db,
  );
  for (const r of rows) {
    const list = out.get(r.payment);
    if (list) list.push(reportRowItem(r));
    else out.set(r.payment, [reportRowItem(r)]);
  }
  return out;
}

export const ledgerPaymentIdentity = (kind: string, account: string, entityId: string) =>
  `${kind}:${account}:${entityId}`;

/** The ledger's payments named by these entity ids or merchant references (the mirrors' keys). */
export async function ledgerPayments(
  db: Db,
  entityIds: readonly string[],
  externalRefs: readonly string[],
): Promise<LedgerPaymentItem[]> {
  if (entityIds.length === 0 && externalRefs.length === 0) return [];
  const { rows } = await sql<{
    merchant_account: string;
    entity_kind: 'deposit' | 'cashout' | 'refund';
    entity_id: string;
    external_ref: string | null;
    status: string | null;
    currency: string | null;
    amount: string | null;
    fee: string | null;
    first_seen: string | null;
  }>`
    SELECT DISTINCT ON (m.entity_id, m.entity_kind, m.merchant_account)
      m.merchant_account, m.entity_kind, m.entity_id, m.external_ref, m.status, m.currency,
      round(m.amount * 100)::text AS amount, round(m.fee_amount * 100)::text AS fee,
      coalesce(m.first_seen_at, m.created_at)::date::text AS first_seen
    FROM (
      -- Two index look-ups (by id, by the merchant's reference), not one OR that scans the mirrors.
      SELECT x.* FROM unnest(${[...entityIds]}::text[]) AS k(id)
        CROSS JOIN LATERAL (SELECT * FROM mirrors y WHERE y.entity_id = k.id OFFSET 0) x
      UNION ALL
      SELECT x.* FROM unnest(${[...externalRefs]}::text[]) AS k(ref)
        CROSS JOIN LATERAL (SELECT * FROM mirrors y WHERE y.external_ref = k.ref OFFSET 0) x) m
    ORDER BY m.entity_id, m.entity_kind, m.merchant_account`.execute(db);
  return rows.map((r) => ({
    identity: ledgerPaymentIdentity(r.entity_kind, r.merchant_account, r.entity_id),
    group: `${r.entity_kind}|${r.currency ?? ''}`,
    amount: r.amount === null ? 0n : BigInt(r.amount),
    date: r.first_seen,
    keys: { entityId: [r.entity_id], externalRef: r.external_ref === null ? [] : [r.external_ref] },
    account: r.merchant_account,
    kind: r.entity_kind,
    entityId: r.entity_id,
    status: r.status,
    fee: r.fee === null ? null : BigInt(r.fee),
  }));
}
