/**
 * The reconciliation exceptions of matching, raised by its sweep in the matching's transaction and
 * resolved by payrecon once a match covers their line:
 * - BANK_LINE_UNMATCHED: a bank line in no live match (entity `bank_line`, id the line's identity);
 * - SETTLEMENT_NOT_RECEIVED: a settlement of a positive net in no live match after its value date plus
 *   the grace (entity `settlement`, id the settlement id);
 * - PROVIDER_REPORT_UNMATCHED: a report row of a payment the ledger does not hold (entity the payment's
 *   kind and transaction id, under the report's merchant account);
 * - LEDGER_NOT_IN_REPORT: a ledger payment first seen inside the span the report rows cover, named by no
 *   row;
 * - PROVIDER_REPORT_MISMATCH: a row matched to its payment whose status, amount or fee differs.
 * The report's two are raised only once the rows have waited for the ledger to catch up (runMatching).
 * Each carries its facts; its fact (what reopens it once resolved) names the match its line left, so a line
 * unmatched by hand raises its exception again.
 */
import { sql } from 'kysely';
import type { ExceptionRules, ExceptionType } from '../../domain/exception-rules.ts';
import { formatAmount } from '../../domain/money.ts';
import { canReach, isStatus } from '../../domain/statuses.ts';
import { type ExceptionToRaise, raiseExceptions } from '../exceptions/raise.ts';
import type { Db } from '../schema.ts';
import type { BankLineItem, LedgerPaymentItem, ReportRowItem, SettlementItem } from './load.ts';

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
 * (unless the ledger has held that status, or its status can follow it: the report is a snapshot of the
 * status when it was read, and the ledger may have moved on since, through moves it did not all see),
 * the amount of its first (gross, unsigned), the fee of its first when it charges one.
 */
export function reportMismatch(
  rows: readonly ReportRowItem[],
  payment: LedgerPaymentItem,
  held: ReadonlySet<string> = new Set(),
): ExceptionToRaise | null {
  const ordered = [...rows].sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0));
  // The ledger's status can follow the report's: the ledger moved on since the report was read.
  const after = (status: string) =>
    payment.status !== null &&
    isStatus(payment.kind, status) &&
    isStatus(payment.kind, payment.status) &&
    canReach(payment.kind, status, payment.status);
  const first = ordered[0]!;
  const last = ordered[ordered.length - 1]!;
  const differences: { fact: string; report: string; ledger: string | null }[] = [];
  if (
    payment.status !== null &&
    last.status !== payment.status &&
    !held.has(last.status) &&
    !after(last.status)
  ) {
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

/**
 * The ledger's payments that moved money (the report lists balance movements: a deposit that completed or
 * was released early, a cashout or refund; none of the test or crypto book), first seen inside the span
 * of the report rows and before the last report was imported (a payment seen since cannot be in it, and
 * this bound holds whatever the provider's clock, a sandbox's running ahead included), that no live match
 * names.
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
      FROM provider_transaction_rows WHERE type IN ('deposit', 'cashout', 'refund'))
    SELECT m.merchant_account, m.entity_kind, m.entity_id, span.lo, span.hi
    FROM span JOIN mirrors m
      ON coalesce(m.first_seen_at, m.created_at) > span.lo AND coalesce(m.first_seen_at, m.created_at) < span.hi
    WHERE m.status IS NOT NULL AND NOT m.test AND NOT m.crypto
      AND (m.entity_kind <> 'deposit' OR m.ever_completed OR m.ever_early_released)
      AND NOT EXISTS (SELECT 1 FROM match_members x WHERE x.side = 'ledger_payment' AND x.live
        AND x.identity = m.entity_kind || ':' || m.merchant_account || ':' || m.entity_id)
      -- nor by a row that waits for the ledger (in no live match)
      AND NOT EXISTS (SELECT 1 FROM provider_transaction_rows r
        WHERE r.transaction_id = m.entity_id AND r.type = m.entity_kind
          AND NOT EXISTS (SELECT 1 FROM match_members x WHERE x.side = 'provider_row' AND x.identity = r.identity AND x.live))`.execute(
    db,
  );
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
  const { rows } = await sql<{ id: string }>`
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
      ORDER BY f.id, f.match_id),
    done AS (
      UPDATE exceptions e SET state = 'resolved', resolved_by = 'payrecon', resolved_at = ${now}::timestamptz,
        resolution_note = c.note, updated_at = now()
      FROM covered c WHERE e.id = c.id
      RETURNING e.id, c.state, c.note),
    events AS (
      INSERT INTO exception_events (exception_id, at, actor, action, from_state, to_state, note)
      SELECT id, ${now}::timestamptz, 'payrecon', 'state', state, 'resolved', note FROM done)
    SELECT id::text AS id FROM done`.execute(db);
  return rows.length;
}
