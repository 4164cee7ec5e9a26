/**
 * The month close's document: the figures of one merchant account, currency and month
 * as plain JSON whose amounts are decimal strings (`"-12.50"`), written canonically (object keys sorted,
 * no spaces) so the same figures always give the same text and the same SHA-256. A signed close stores
 * exactly this text and its hash; the page, the API and the workbook read figures back from it, so a
 * document keeps the version it was signed with (`v`) and every reader reads each version:
 *
 * - version 1: the bank proof (when there is one) puts the statement against the ledger and lists the
 *   unmatched items with one total (`unmatchedTotal`);
 * - version 2: the bank proof explains its difference (`CloseBankProofLine`'s `openingBeforeFirst`,
 *   `linesNotInLedger`, `unexplained`), and totals the settlements in transit apart (`inTransit`).
 */
import { createHash } from 'node:crypto';

/** Month of a close: `YYYY-MM`. */
export const CLOSE_PERIOD_RE = /^\d{4}-(0[1-9]|1[0-2])$/;

export const CLOSE_STATUSES = ['prepared', 'approved'] as const;
export type CloseStatus = (typeof CLOSE_STATUSES)[number];

/** One ledger account's proof line: opening + movements - closing must be 0. */
export interface CloseAccountLine {
  book: string;
  account: string;
  opening: string;
  movements: string;
  closing: string;
  proof: string;
}

/** Postings booked in the period on one account, per entity kind, effect and direction. */
export interface CloseMovementLine {
  book: string;
  account: string;
  entityKind: string;
  effect: string;
  /** 1: applications; -1: reversals. */
  direction: number;
  amount: string;
  entries: number;
}

/** A cashout or refund holding money in `reserved` at the cut-off. */
export interface CloseInFlightLine {
  kind: string;
  entityId: string;
  externalRef: string | null;
  /** When its reservation was booked (ISO instant). */
  reservedAt: string;
  amount: string;
}

/** An exception open at the cut-off. */
export interface CloseExceptionLine {
  id: string;
  type: string;
  severity: string;
  entityKind: string;
  entityId: string;
  firstSeenAt: string;
  /** The entity's amount in the close's currency; null when unknown. */
  amount: string | null;
}

/** A journal entry booked in one period whose effect date falls in another (earlier) one. */
export interface CloseAdjustmentLine {
  entry: string;
  entityKind: string;
  entityId: string;
  effect: string;
  direction: number;
  book: string;
  /** ISO instants. */
  effectiveAt: string;
  bookedAt: string;
  /** The months (`YYYY-MM`, the close's time zone and cut-off) of the effect date and of the booking. */
  effectPeriod: string;
  bookedPeriod: string;
  /** Net movement of the entry on the live `available` account (or the book's first account). */
  available: string;
  postings: { account: string; amount: string }[];
}

/** An item not matched at the cut-off: a bank line or a settlement. */
export interface CloseUnmatchedItem {
  kind: 'bank_line' | 'settlement';
  /** The bank line's identity or the settlement id (the exception's entity id). */
  id: string;
  /** The bank's entry reference or the settlement's bank reference. */
  reference: string | null;
  amount: string;
  /** The bank line's booking date or the settlement's value date (`YYYY-MM-DD`). */
  date: string;
  /** Days from `date` to the period's last day. */
  ageDays: number;
  /** Its BANK_LINE_UNMATCHED or SETTLEMENT_NOT_RECEIVED exception, when one was raised. */
  exceptionId: string | null;
  /** A comment, acknowledgement or resolution note on that exception when the figures were computed. */
  noted: boolean;
}

/** A statement a bank proof names: its import, place in the file, own id and date. */
export interface CloseStatementRef {
  importId: string;
  position: number;
  statementId: string | null;
  date: string;
}

/**
 * The bank proof of one configured bank account at the cut-off (src/domain/bank-reconciliation.ts):
 *
 *   difference (statementClosing - ledger) = openingBeforeFirst + linesNotInLedger + unexplained
 *
 * The unmatched items are of two kinds. Bank lines (`bank_line`) are on the statement and not in the
 * ledger: those booked on or before the statement's date are `linesNotInLedger`, part of the difference;
 * those booked after it (to the period's last day) are in no statement reconciled here
 * (`linesAfterStatement`). Settlements (`settlement`) were paid by the provider and not seen in the bank:
 * they are in `settlements_in_transit`, not in the bank account, and no part of the difference
 * (`inTransit`). Every item, of either kind, is under the note rule (`itemsNeedingNote`).
 */
export interface CloseBankProofLine {
  /** The bank account as statements name it (PAYRECON_BANK_ACCOUNTS `id`). */
  bankAccount: string;
  name: string | null;
  /** The last imported statement whose lines end on or before the period's last day; null: none. */
  statement: CloseStatementRef | null;
  /** That statement's closing balance; null: no statement, or one without a balance. */
  statementClosing: string | null;
  /** The ledger's `bank:<id>` balance at the cut-off. */
  ledger: string;
  /** statementClosing - ledger; null without a statement balance. */
  difference: string | null;
  /** Bank lines and settlements unmatched at the cut-off, lines first. */
  unmatched: CloseUnmatchedItem[];
  /** Version 1 only: the total of every unmatched item, lines and settlements together. */
  unmatchedTotal?: string;
  /**
   * Version 2. The bank account's first imported statement (the one whose lines start earliest; its
   * `date` is its first line's booking date); null: none.
   */
  firstStatement?: CloseStatementRef | null;
  /** Version 2. Its opening balance: what the account held before payrecon's statements; null: unknown. */
  openingBeforeFirst?: string | null;
  /** Version 2. The total of the unmatched bank lines booked on or before the statement's date. */
  linesNotInLedger?: string;
  /** Version 2. The total of the unmatched bank lines booked after the statement's date. */
  linesAfterStatement?: string;
  /** Version 2. The total of the unmatched settlements (in transit, not in the bank). */
  inTransit?: string;
  /**
   * Version 2. difference - openingBeforeFirst - linesNotInLedger: 0.00 when the statement is explained;
   * null when the closing balance or the opening before the first statement is unknown.
   */
  unexplained?: string | null;
}

/** Version 2 of a bank proof line: its difference explained. */
export type ExplainedBankProofLine = CloseBankProofLine &
  Required<
    Pick<
      CloseBankProofLine,
      | 'firstStatement'
      | 'openingBeforeFirst'
      | 'linesNotInLedger'
      | 'linesAfterStatement'
      | 'inTransit'
      | 'unexplained'
    >
  >;

/** True for a bank proof line that explains its difference (version 2). */
export function isExplained(p: CloseBankProofLine): p is ExplainedBankProofLine {
  return p.linesNotInLedger !== undefined;
}

/** Whether an unmatched bank line of a proof is booked after the statement reconciled (none: all are). */
export function afterStatement(p: Pick<CloseBankProofLine, 'statement'>, item: CloseUnmatchedItem): boolean {
  return item.kind === 'bank_line' && (p.statement === null || item.date > p.statement.date);
}

/** The version a close document is written in now. */
export const CLOSE_DOCUMENT_VERSION = 2 as const;

/** Everything a close signs (`v`: the version it was signed with, see above). */
export interface CloseDocument {
  v: 1 | 2;
  merchantAccount: string;
  currency: string;
  period: string;
  timeZone: string;
  /** The period's instants (ISO), [start, end): the cut-off is `end`. */
  start: string;
  end: string;
  accounts: CloseAccountLine[];
  movements: CloseMovementLine[];
  /** Sum of the accounts' proofs as magnitudes (so two errors cannot cancel); must be 0. */
  proof: string;
  inFlight: CloseInFlightLine[];
  inFlightTotal: string;
  /** The live `reserved` balance at the cut-off (what `inFlightTotal` must equal). */
  reservedAtEnd: string;
  exceptions: CloseExceptionLine[];
  exceptionsTotal: string;
  /** Entries booked in this period whose effect date lies in an earlier period. */
  earlierPeriodAdjustments: CloseAdjustmentLine[];
  /**
   * The bank proof per configured bank account of the merchant account and currency (absent from
   * closes signed before it existed), and the amount above which an unmatched item needs a note.
   */
  bankProof?: CloseBankProofLine[];
  noteAbove?: string;
}

/**
 * The unmatched items of a bank proof whose amount (as a magnitude) is above `noteAbove` and that have
 * no note: what refuses sign-off.
 */
export function itemsNeedingNote(
  proof: readonly CloseBankProofLine[],
  noteAbove: bigint,
  parse: (amount: string) => bigint,
): CloseUnmatchedItem[] {
  return proof.flatMap((p) =>
    p.unmatched.filter((i) => {
      const a = parse(i.amount);
      return !i.noted && (a < 0n ? -a : a) > noteAbove;
    }),
  );
}

/** One line naming the items that refuse sign-off: the first few ids and the count. */
export function needsNoteMessage(items: readonly CloseUnmatchedItem[], noteAbove: string): string {
  const shown = items.slice(0, 3).map((i) => `${i.kind} ${i.id} (${i.amount})`);
  const more = items.length > shown.length ? ` and ${items.length - shown.length} more` : '';
  return `${items.length} unmatched item${items.length === 1 ? '' : 's'} above ${noteAbove} at the cut-off ha${items.length === 1 ? 's' : 've'} no note: ${shown.join(', ')}${more}; add a note on ${items.length === 1 ? 'its' : 'their'} exception (PAYRECON_CLOSE_UNMATCHED_NOTE_ABOVE)`;
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value).sort()) {
      const v = (value as Record<string, unknown>)[key];
      if (v !== undefined) out[key] = sortKeys(v);
    }
    return out;
  }
  if (typeof value === 'number' && !Number.isSafeInteger(value)) {
    // Only counts are numbers; an amount is always a decimal string.
    throw new Error(`close documents hold integers only, got ${value}`);
  }
  return value;
}

/** Canonical JSON: keys sorted at every level, no whitespace; undefined members dropped. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

/** Lower-case hex SHA-256 of the UTF-8 text (what PostgreSQL's CHECK computes too). */
export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** The month after `YYYY-MM`. */
export function nextPeriod(period: string): string {
  const [y, m] = period.split('-').map(Number) as [number, number];
  return m === 12 ? `${y + 1}-01` : `${y}-${String(m + 1).padStart(2, '0')}`;
}

/** The month before `YYYY-MM`. */
export function previousPeriod(period: string): string {
  const [y, m] = period.split('-').map(Number) as [number, number];
  return m === 1 ? `${y - 1}-12` : `${y}-${String(m - 1).padStart(2, '0')}`;
}
