/**
 * What an import stores, from what the parsers read: each line's identity, content hash and values in the
 * columns of its table, amounts as decimal text in major units (exact, from minor units) and instants as
 * ISO 8601 text. The database side takes these plain values, so it does not depend on the parsers.
 */
import { formatAmount } from '../domain/money.ts';
import type { ProviderSettlement, ProviderTransaction } from './profile-rows.ts';
import type { BankStatement, StatementLine } from './statement.ts';

const amountText = (minor: bigint | null): string | null => (minor === null ? null : formatAmount(minor));

function bankLineRecord(statement: BankStatement, line: StatementLine) {
  return {
    identity: line.identity,
    content_hash: line.contentHash,
    bank_account: statement.account,
    currency: line.currency,
    reference: line.reference,
    booking_date: line.bookingDate,
    value_date: line.valueDate,
    amount: formatAmount(line.amount),
    reversal: line.reversal,
    end_to_end_ids: [...line.endToEndIds],
    counterparty: line.counterparty,
    description: line.description,
    transactions: line.transactions.map((t) => ({
      amount: amountText(t.amount),
      currency: t.currency,
      endToEndId: t.endToEndId,
      references: { ...t.references },
      counterparty: t.counterparty,
      description: t.description,
    })),
  };
}

export function statementRecord(statement: BankStatement) {
  return {
    statementId: statement.statementId,
    format: statement.format,
    bankAccount: statement.account,
    currency: statement.currency,
    opening: amountText(statement.opening),
    closing: amountText(statement.closing),
    credits: formatAmount(statement.credits),
    debits: formatAmount(statement.debits),
    booked: statement.booked,
    pending: statement.pending,
    closingDate: statement.closingDate ?? null,
    lines: statement.lines.map((line) => bankLineRecord(statement, line)),
  };
}

export function transactionRowRecord(row: ProviderTransaction) {
  return {
    identity: row.identity,
    content_hash: row.contentHash,
    transaction_id: row.transactionId,
    type: row.type,
    status: row.status,
    external_id: row.externalId,
    invoice_id: row.invoiceId,
    currency: row.currency,
    gross: formatAmount(row.gross),
    fee: formatAmount(row.fee),
    net: formatAmount(row.net),
    created_at: row.createdAt,
    updated_at: row.updatedAt,
    settlement_id: row.settlementId,
  };
}

export function settlementRowRecord(row: ProviderSettlement) {
  return {
    identity: row.identity,
    content_hash: row.contentHash,
    settlement_id: row.settlementId,
    account: row.account,
    period_start: row.periodStart,
    period_end: row.periodEnd,
    currency: row.currency,
    gross: formatAmount(row.gross),
    fees: formatAmount(row.fees),
    settlement_currency: row.settlementCurrency,
    rate: row.rate,
    net: formatAmount(row.net),
    value_date: row.valueDate,
    bank_reference: row.bankReference,
    balance_at_cutoff: amountText(row.balanceAtCutoff),
  };
}
