/**
 * The reconciliation exceptions of matching, raised by its sweep in the matching's transaction and
 * resolved by payrecon once a match covers their line:
 * - BANK_LINE_UNMATCHED: a bank line in no live match (entity `bank_line`, id the line's identity);
 * - SETTLEMENT_NOT_RECEIVED: a settlement of a positive net in no live match after its value date plus
 *   the grace (entity `settlement`, id the settlement id);
 * - PROVIDER_REPORT_UNMATCHED: a report row of a payment the ledger does not hold (entity the payment's
 *   kind and transaction id, under the report's merchant account);
 * - LEDGER_NOT_IN_REPORT: a ledger payment that moved the balance (an entry in the live book: the report
 *   lists the balance's movements, so a deposit that never completed, a test or a crypto one has no row),
 *   first seen inside the span the report rows cover, named by no row;
 * - PROVIDER_REPORT_MISMATCH: a row matched to its payment whose amount or fee differs, or whose status
 *   cannot lead to the ledger's nor follow from it (a report is a snapshot of its time: an earlier or a
 *   later status of the payment is no difference); compared again at every run and resolved once the
 *   ledger holds the payment as all its matched rows give it (a late move the report showed before the
 *   ledger read it).
 * The report's rows that differ from the ledger are raised only once they have waited for the ledger to
 * catch up (runMatching's `ledgerWaitMs`).
 * Each carries its facts; its fact (what reopens it once resolved) names the match its line left, so a line
 * unmatched by hand raises its exception again.
 */
import { sql } from 'kysely';
import type { ExceptionRules, ExceptionType } from '../../domain/exception-rules.ts';
import { formatAmount } from '../../domain/money.ts';
import { canReach, type EntityKind, isStatus } from '../../domain/statuses.ts';
import { type ExceptionToRaise, raiseExceptions } from '../exceptions/raise.ts';
import { resolveAsPayrecon } from '../exceptions/resolve.ts';
import type { Db } from '../schema.ts';
import {
  type BankLineItem,
  type LedgerPaymentItem,
  ledgerPaymentIdentity,
  ledgerPayments,
  matchedReportRows,
  type ReportRowItem,
  type SettlementItem,
} from './load.ts';

export function bankLineException(line: BankLineItem): ExceptionToRaise {
  const amount = formatAmount(line.amount);
  return {
    type: 'BANK_LINE_UNMATCHED',
    account: line.merchant,
    kind: 'bank_line',
    entityId: line.identity,
    details: {
      bankAccount: line.bankAccount,
      currency: line.currency,
      amount,
      bookingDate: line.bookingDate,
      valueDate: line.date,
      reference: line.reference,
      endToEndIds: line.keys.endToEndId ?? [],
      description: line.description,
      leftMatch: line.endedMatch,
    },
    facts: { externalRef: line.reference, providerAmount: amount, providerCurrency: line.currency },
    fact: line.endedMatch === null ? 'unmatched' : `unmatched after match ${line.endedMatch}`,
  };
}

export function settlementException(s: SettlementItem, graceDays: number): ExceptionToRaise {
  const amount = formatAmount(s.amount);
  return {
    type: 'SETTLEMENT_NOT_RECEIVED',
    account: s.merchant === '' ? '-' : s.merchant,
    kind: 'settlement',
    entityId: s.settlementId,
    details: {
      settlementId: s.settlementId,
      currency: s.currency,
      net: amount,
      valueDate: s.date,
      bankReference: s.bankReference,
      graceDays,
      leftMatch: s.endedMatch,
    },
    facts: { externalRef: s.bankReference, providerAmount: amount, providerCurrency: s.currency },
    fact: s.endedMatch === null ? 'not received' : `not received after match ${s.endedMatch}`,
  };
}

export function reportRowException(account: string, rows: readonly ReportRowItem[]): ExceptionToRaise {
  const first = rows[0]!;
  return {
    type: 'PROVIDER_REPORT_UNMATCHED',
    account,
    kind: first.type as 'deposit' | 'cashout' | 'refund',
    entityId: first.transactionId,
    details: {
      transactionId: first.transactionId,
      rows: rows.length,
      status: rows[rows.length - 1]!.status,
      currency: first.currency,
      gross: formatAmount(first.amount),
      fee: formatAmount(first.fee),
    },
    facts: {
      externalRef: first.keys.externalId?.[0] ?? null,
      providerAmount: formatAmount(first.amount < 0n ? -first.amount : first.amount),
      providerCurrency: first.currency,
    },
    fact: 'not in the ledger',
  };
}

/**
 * What a report says of a payment that differs from the ledger, or null: the status of its latest row
 * when neither status can lead to the other (`snapshotsAgree`), the amount of its first (gross,
 * unsigned), the fee of its first when it charges one.
 */
export function reportMismatch(
  rows: readonly ReportRowItem[],
  payment: LedgerPaymentItem,
): ExceptionToRaise | null {
  const ordered = byInstant(rows);
  const first = ordered[0]!;
  const last = ordered[ordered.length - 1]!;
  const differences: { fact: string; report: string; ledger: string | null }[] = [];
  if (payment.status !== null && !snapshotsAgree(payment.kind, last.status, payment.status)) {
    differences.push({ fact: 'status', report: last.status, ledger: payment.status });
  }
  const gross = first.amount < 0n ? -first.amount : first.amount;
  if (gross !== payment.amount) {
    differences.push({ fact: 'amount', report: formatAmount(gross), ledger: formatAmount(payment.amount) });
  }
  if (first.fee > 0n && payment.fee !== null && first.fee !== payment.fee) {
    differences.push({ fact: 'fee', report: formatAmount(first.fee), ledger: formatAmount(payment.fee) });
  }
  if (differences.length === 0) return null;
  return {
    type: 'PROVIDER_REPORT_MISMATCH',
    account: payment.account,
    kind: payment.kind,
    entityId: payment.entityId,
    details: { transactionId: first.transactionId, differences },
  };
}

const byInstant = (rows: readonly ReportRowItem[]) =>
  [...rows].sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0));

/**
 * Whether a report's status and the ledger's agree: a report row carries the payment's status when the
 * report was made, so the ledger may have moved on since (the report's status leads to the ledger's) or
 * not have read the provider's latest move yet (the ledger's leads to the report's; its polling reads
 * it). Only two statuses neither of which can lead to the other differ.
 */
export function snapshotsAgree(kind: EntityKind, report: string, ledger: string): boolean {
  if (report === ledger) return true;
  if (!isStatus(kind, report) || !isStatus(kind, ledger)) return false;
  return canReach(kind, report, ledger) || canReach(kind, ledger, report);
}

/**
 * The ledger's payments that moved the balance (an entry in the live book: the report lists movements), first
 * seen inside the span of the report rows and before the last report was imported (a payment seen since
 * cannot be in it, whatever the provider's clock, a sandbox's running ahead included), that no live match
 * or waiting report row names.
 */
export async function ledgerNotInReport(db: Db): Promise<ExceptionToRaise[]> {
  const { rows } = await sql<{
    merchant_account: string;
    entity_kind: 'deposit' | 'cashout' | 'refund';
    entity_id: string;
    lo: Date;
    hi: Date;
  }>`
    WITH span AS (
      SELECT min(created_at) AS lo, least(max(created_at),
          (SELECT max(i.imported_at) FROM imports i WHERE i.kind = 'provider-transactions')) AS hi
      FROM provider_transaction_rows WHERE type IN ('deposit', 'cashout', 'refund')),
    unmatched AS MATERIALIZED (
      SELECT m.merchant_account, m.entity_kind, m.entity_id, span.lo, span.hi
      FROM span JOIN mirrors m
        ON coalesce(m.first_seen_at, m.created_at) > span.lo AND coalesce(m.first_seen_at, m.created_at) < span.hi
      WHERE m.status IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM match_members x WHERE x.side = 'ledger_payment' AND x.live
          AND x.identity = m.entity_kind || ':' || m.merchant_account || ':' || m.entity_id)
        -- nor by a row that waits for the ledger (in no live match)
        AND NOT EXISTS (SELECT 1 FROM provider_transaction_rows r
          WHERE r.transaction_id = m.entity_id AND r.type = m.entity_kind
            AND NOT EXISTS (SELECT 1 FROM match_members x WHERE x.side = 'provider_row' AND x.identity = r.identity AND x.live)))
    -- The report lists movements of the balance: a payment that never moved it (an expired deposit, a test
    -- or crypto one) has no entry in the live book and no row. Asked of the unmatched payments only, one
    -- index probe each (OFFSET 0 keeps the probe a subplan, never a join over every entry).
    SELECT u.* FROM unmatched u
    WHERE EXISTS (SELECT 1 FROM journal_entries j WHERE j.entity_id = u.entity_id
      AND j.entity_kind = u.entity_kind AND j.merchant_account = u.merchant_account AND j.book = 'live'
      OFFSET 0)`.execute(db);
  return rows.map((r) => ({
    type: 'LEDGER_NOT_IN_REPORT',
    account: r.merchant_account,
    kind: r.entity_kind,
    entityId: r.entity_id,
    details: { reportFrom: r.lo.toISOString(), reportTo: r.hi.toISOString() },
    fact: 'not in the report',
  }));
}

/** Raises the exceptions (a condition: an open one is not counted again), counting them by type. */
export async function raiseMatchingExceptions(
  db: Db,
  raised: readonly ExceptionToRaise[],
  now: Date,
  rules: ExceptionRules,
): Promise<Partial<Record<ExceptionType, number>>> {
  const CHUNK = 20_000;
  for (let i = 0; i < raised.length; i += CHUNK) {
    await raiseExceptions(db, raised.slice(i, i + CHUNK), now, rules, { mode: 'condition' });
  }
  const counts: Partial<Record<ExceptionType, number>> = {};
  for (const r of raised) counts[r.type] = (counts[r.type] ?? 0) + 1;
  return counts;
}

/**
 * Resolves, as payrecon, the open matching exceptions whose line a live match now covers, with a note
 * naming the match and its rule; returns how many.
 */
export async function resolveMatchedExceptions(db: Db, now: Date): Promise<number> {
  // One branch per type, each an index probe per open exception (an OR across them read every member).
  const { rows } = await sql<{ id: string; state: string; note: string }>`
    WITH open AS (
      SELECT e.id, e.type, e.state, e.merchant_account, e.entity_kind, e.entity_id FROM exceptions e
      WHERE e.state IN ('open', 'in_review', 'acknowledged')
        AND e.type IN ('BANK_LINE_UNMATCHED', 'SETTLEMENT_NOT_RECEIVED', 'PROVIDER_REPORT_UNMATCHED',
          'LEDGER_NOT_IN_REPORT')),
    found AS (
      SELECT o.id, o.state, x.match_id FROM open o
        JOIN match_members x ON x.side = 'bank_line' AND x.identity = o.entity_id AND x.live
        WHERE o.type = 'BANK_LINE_UNMATCHED'
      UNION ALL
      SELECT o.id, o.state, x.match_id FROM open o
        JOIN provider_settlement_rows s ON s.settlement_id = o.entity_id
        JOIN match_members x ON x.side = 'settlement' AND x.identity = s.identity AND x.live
        WHERE o.type = 'SETTLEMENT_NOT_RECEIVED'
      UNION ALL
      SELECT o.id, o.state, x.match_id FROM open o
        JOIN provider_transaction_rows r ON r.transaction_id = o.entity_id AND r.type = o.entity_kind
        JOIN match_members x ON x.side = 'provider_row' AND x.identity = r.identity AND x.live
        WHERE o.type = 'PROVIDER_REPORT_UNMATCHED'
      UNION ALL
      SELECT o.id, o.state, x.match_id FROM open o
        JOIN match_members x ON x.side = 'ledger_payment' AND x.live
          AND x.identity = o.entity_kind || ':' || o.merchant_account || ':' || o.entity_id
        WHERE o.type = 'LEDGER_NOT_IN_REPORT'),
    covered AS (
      SELECT DISTINCT ON (f.id) f.id, f.state, 'matched: match ' || f.match_id || ' (' || mt.rule || ')' AS note
      FROM found f JOIN matches mt ON mt.id = f.match_id
      ORDER BY f.id, f.match_id)
    SELECT id::text AS id, state, note FROM covered`.execute(db);
  return resolveAsPayrecon(db, rows, now);
}

/**
 * Resolves, as payrecon, the open PROVIDER_REPORT_MISMATCH exceptions whose payment the ledger now holds as
 * the report gives it, checked again over every row matched to the payment (`reportMismatch`): a move the
 * report showed before the ledger read it (a cashout returned with 826, a deposit completed by hand).
 * Returns how many.
 */
export async function resolveAgreedMismatches(db: Db, now: Date): Promise<number> {
  const { rows: open } = await sql<{
    id: string;
    state: string;
    merchant_account: string;
    entity_kind: string;
    entity_id: string;
  }>`
    SELECT e.id::text AS id, e.state, e.merchant_account, e.entity_kind, e.entity_id FROM exceptions e
    WHERE e.state IN ('open', 'in_review', 'acknowledged') AND e.type = 'PROVIDER_REPORT_MISMATCH'`.execute(
    db,
  );
  if (open.length === 0) return 0;
  const identityOf = (e: (typeof open)[number]) =>
    ledgerPaymentIdentity(e.entity_kind, e.merchant_account, e.entity_id);
  const payments = new Map(
    (
      await ledgerPayments(
        db,
        open.map((e) => e.entity_id),
        [],
      )
    ).map((p) => [p.identity, p]),
  );
  const rowsOf = await matchedReportRows(db, open.map(identityOf));
  const agreed = open.filter((e) => {
    const payment = payments.get(identityOf(e));
    const rows = rowsOf.get(identityOf(e)) ?? [];
    return payment !== undefined && rows.length > 0 && reportMismatch(rows, payment) === null;
  });
  const note = 'agreed: the ledger now holds the payment as the report gives it';
  return resolveAsPayrecon(
    db,
    agreed.map((e) => ({ id: e.id, state: e.state, note })),
    now,
  );
}
