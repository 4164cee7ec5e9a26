/**
 * What a bank statement import yields, whatever the file's format (camt.053 or a bank's CSV or XLSX
 * through a profile): per account and currency, the balances, the counts and the booked lines, each with
 * its identity. Amounts are signed minor units from the account holder's side: credit +, debit -.
 */
import { formatAmount, type Minor } from '../domain/money.ts';
import {
  contentHash,
  contentIdentity,
  normaliseText,
  occurrenceCounter,
  referenceIdentity,
} from './identity.ts';
import { accepted, type ImportResult, refused } from './refusal.ts';

/** A reference's placeholder meaning "none was given" (ISO 20022 usage rule for EndToEndId). */
export const NOT_PROVIDED = 'NOTPROVIDED';

export type StatementFormat =
  | 'camt.053.001.02'
  | 'camt.053.001.03'
  | 'camt.053.001.04'
  | 'camt.053.001.05'
  | 'camt.053.001.06'
  | 'camt.053.001.07'
  | 'camt.053.001.08'
  | 'csv'
  | 'xlsx';

/** One transaction of an entry (a camt.053 TxDtls); a batch entry has several. */
export interface TransactionDetails {
  /** Signed, in `currency`; null when the file gives the entry's amount only. */
  amount: Minor | null;
  currency: string | null;
  endToEndId: string | null;
  /** The transaction's references by their camt.053 names (MsgId, InstrId, EndToEndId, TxId ...). */
  references: Readonly<Record<string, string>>;
  counterparty: string | null;
  description: string | null;
}

export interface StatementLine {
  /** Stable across files: see identity.ts. */
  identity: string;
  /** The hash of the whole normalised line: the same identity with another hash is a correction. */
  contentHash: string;
  /** The entry's number in its statement (camt.053) or the row's number in the file (header = row 1). */
  position: number;
  /** The bank's reference of the entry (camt.053 AcctSvcrRef), null when the file gives none. */
  reference: string | null;
  bookingDate: string;
  valueDate: string | null;
  amount: Minor;
  currency: string;
  reversal: boolean;
  endToEndIds: readonly string[];
  /** Every reference the line carries (entry and transactions), each once, in file order. */
  references: readonly string[];
  counterparty: string | null;
  description: string | null;
  transactions: readonly TransactionDetails[];
}

export interface BankStatement {
  format: StatementFormat;
  /** The statement's own id (camt.053 Stmt/Id), null for a CSV or XLSX file. */
  statementId: string | null;
  /** The account as the bank names it: IBAN or another id. */
  account: string;
  currency: string;
  /** Null only for a CSV or XLSX file whose profile names no balance column. */
  opening: Minor | null;
  closing: Minor | null;
  /** The sum of the booked credits (>= 0) and of the booked debits (<= 0). */
  credits: Minor;
  debits: Minor;
  /** Entries booked (the lines) and entries not booked (pending, future or informational: skipped). */
  booked: number;
  pending: number;
  /**
   * The closing balance's date (`YYYY-MM-DD`): camt.053's CLBD date, else the latest booking date of the
   * lines; null: a statement without lines or date.
   */
  closingDate?: string | null;
  lines: readonly StatementLine[];
}

export type DraftLine = Omit<StatementLine, 'identity' | 'contentHash'>;

/**
 * Gives the lines of one statement their identities and checks that the booked lines take the opening
 * balance to the closing one. `where` names the statement in a refusal; `keyOf` gives a line's
 * reference parts (the bank's entry reference by default), null for a line identified by its content.
 */
export function finishStatement(
  file: string,
  where: string,
  head: Omit<BankStatement, 'lines' | 'credits' | 'debits' | 'booked'>,
  drafts: readonly DraftLine[],
  describe: (line: DraftLine) => string,
  keyOf: (line: DraftLine) => readonly string[] | null = (line) =>
    line.reference === null ? null : [line.reference],
): ImportResult<BankStatement> {
  const lines: StatementLine[] = [];
  const occurrence = occurrenceCounter();
  const byKey = new Map<string, DraftLine>();
  let credits = 0n;
  let debits = 0n;
  for (const line of drafts) {
    const key = keyOf(line);
    if (key !== null) {
      const earlier = byKey.get(JSON.stringify(key));
      if (earlier !== undefined) {
        return refused(
          file,
          `${where}, ${describe(line)}`,
          `its reference ${key.join(' ')} repeats ${describe(earlier)}: a reference names one entry`,
        );
      }
      byKey.set(JSON.stringify(key), line);
    }
    const content = [
      line.currency,
      line.bookingDate,
      line.valueDate ?? '',
      formatAmount(line.amount),
      line.reversal ? 'reversal' : '',
      [...line.endToEndIds].sort().join(' '),
      normaliseText(line.counterparty ?? ''),
      normaliseText(line.description ?? ''),
    ];
    const identity =
      key !== null
        ? referenceIdentity(head.account, key)
        : contentIdentity(head.account, content, occurrence(content));
    lines.push({
      ...line,
      identity,
      contentHash: contentHash([head.account, line.reference ?? '', ...content]),
    });
    if (line.amount >= 0n) credits += line.amount;
    else debits += line.amount;
  }
  if (head.opening !== null && head.closing !== null && head.opening + credits + debits !== head.closing) {
    return refused(
      file,
      where,
      `the booked entries take the opening balance ${formatAmount(head.opening)} to ` +
        `${formatAmount(head.opening + credits + debits)}, not to the closing balance ${formatAmount(head.closing)}`,
    );
  }
  const latest = lines.reduce<string | null>(
    (day, l) => (day === null || l.bookingDate > day ? l.bookingDate : day),
    null,
  );
  return accepted({
    ...head,
    closingDate: head.closingDate ?? latest,
    credits,
    debits,
    booked: lines.length,
    lines,
  });
}
