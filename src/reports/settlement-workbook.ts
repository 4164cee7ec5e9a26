import type ExcelJS from 'exceljs';
import { type CloseSummary, closesOfPeriods, getCloseRecord } from '../db/closes/records.ts';
import {
  type AccountBalance,
  type EntityRow,
  earlyReleasedCredits,
  entityQuery,
  entryPeriod,
  forEachBatch,
  type JournalRow,
  journalQuery,
  ledgerTotals,
  type Movement,
  openBatches,
  tuneForReport,
} from '../db/read-models/reports.ts';
import { type SettlementReportRow, settlementsOfPeriod } from '../db/read-models/settlements.ts';
import type { Db } from '../db/schema.ts';
import { formatAmount, type Minor, minorToCell, parseLedgerMinor } from '../domain/money.ts';
import { paymentPath } from '../domain/payment-path.ts';
import { ENTITY_KINDS } from '../domain/statuses.ts';
import { writeBankProofSheet } from './close.ts';
import { humanInstant, monthPeriod, type Period } from './period.ts';
import {
  BOLD,
  byCurrency,
  type ColumnSpec,
  DATE_FORMAT,
  inSnapshot,
  MONEY_FORMAT,
  type PrintRule,
  type PrintSetup,
  prepareOutputs,
  printOptions,
  TableSheet,
  WIDE_TABLE,
  workbookWriter,
} from './sheet-writer.ts';

export const FETCH_SIZE = 5000;

export interface SettlementOptions {
  period: Period;
  /** One merchant account, or null for all. */
  account: string | null;
  /** Output workbook path. */
  out: string;
  /** Directory for one CSV per detail sheet; null: no CSV. */
  csvDir?: string | null;
  /** Start of each CSV's name (`<prefix>-<sheet>.csv`; default: the sheet's name alone). */
  csvPrefix?: string;
  /** Called as detail rows are written (done, total). */
  onProgress?: (done: number, total: number) => void;
  /** The page's public base URL: entity ids become links to their payment page. */
  links?: string | null;
}

/** One line of a currency's summary: movement of `available` and `reserved`. */
export interface SummaryLine {
  label: string;
  entityKind: string;
  effect: string;
  available: Minor;
  reserved: Minor;
}

export interface CurrencySummary {
  currency: string;
  openingAvailable: Minor;
  openingReserved: Minor;
  lines: SummaryLine[];
  closingAvailable: Minor;
  closingReserved: Minor;
  /** opening + movements - closing; zero when the ledger is sound. */
  proofAvailable: Minor;
  proofReserved: Minor;
  depositsNet: Minor;
  earlyReleasedGross: Minor;
}

export interface BookBalance {
  book: 'test' | 'crypto';
  currency: string;
  account: string;
  opening: Minor;
  movement: Minor;
  closing: Minor;
}

export interface SettlementResult {
  summaries: CurrencySummary[];
  otherBooks: BookBalance[];
  /** Rows per sheet (tables only, without headers and totals). */
  rowCounts: Record<string, number>;
  /** Files written: the workbook, then the CSVs. */
  files: string[];
}

/** Summary lines in the order finance reads them. Anything else found in the live book is added after. */
export const LIVE_LINES: readonly { entityKind: string; effect: string; label: string }[] = [
  { entityKind: 'deposit', effect: 'credit', label: 'Deposits, gross' },
  { entityKind: 'deposit', effect: 'fee', label: 'Deposit fees' },
  { entityKind: 'deposit', effect: 'early_release_reversal', label: 'Early releases reversed' },
  { entityKind: 'cashout', effect: 'reserve', label: 'Cashouts reserved' },
  { entityKind: 'cashout', effect: 'release', label: 'Cashouts released' },
  { entityKind: 'cashout', effect: 'settle', label: 'Cashouts settled' },
  { entityKind: 'cashout', effect: 'late_reversal', label: 'Cashouts rejected late' },
  { entityKind: 'refund', effect: 'reserve', label: 'Refunds reserved' },
  { entityKind: 'refund', effect: 'release', label: 'Refunds released' },
  { entityKind: 'refund', effect: 'settle', label: 'Refunds settled' },
  { entityKind: 'refund', effect: 'late_reversal', label: 'Refunds rejected late' },
];

/**
 * The cash leg's lines (src/domain/cash-leg.ts), after the payments' lines when the period has them: the
 * settlements sweep `available`, gross (a converted one through its source currency's entry).
 */
export const CASH_LEG_LINES: readonly { entityKind: string; effect: string; label: string }[] = [
  { entityKind: 'settlement', effect: 'settlement', label: 'Settlements paid out, gross' },
  { entityKind: 'settlement', effect: 'settlement_fx_source', label: 'Settlements converted, gross' },
];

/**
 * Summary sheets (one per currency): portrait, the whole sheet on one page, at 100 %: the title, every
 * line, the closing balance and the proof are read together and signed off together.
 */
export const SUMMARY_PRINT: PrintRule = { orientation: 'portrait', fit: 'page', minScale: 100 };

/**
 * Deposits, cashouts and refunds: landscape, one page wide, at 70 % or more, the header rows on every
 * page. A page carries who, which payment, its status and why, its amounts and what the period booked
 * for it; reasons and references wrap. Columns for look-ups (when payrecon first saw the payment, and
 * on cashouts and refunds the movement per balance, which the per-effect columns add up to) are folded
 * away and not printed.
 */
export const ENTITY_PRINT: PrintRule = WIDE_TABLE;

/**
 * Journals: portrait, one page wide, at 70 % or more (about 60 postings a page), the header rows on
 * every page: every column of a posting is printed.
 */
export const JOURNAL_PRINT: PrintRule = { orientation: 'portrait', fit: 'width', minScale: 70 };

/** Test and crypto book balances: portrait, one page wide, at 100 %. */
export const BOOK_PRINT: PrintRule = { orientation: 'portrait', fit: 'width', minScale: 100 };

/** Deposit rows: entity facts, then the period's activity per effect on `available` (read from postings). */
export const DEPOSIT_COLUMNS: ColumnSpec<EntityRow>[] = [
  { header: 'Account', key: 'account', type: 'text', width: 12, wrap: true, cell: (r) => r.merchant_account },
  {
    header: 'Deposit id',
    key: 'id',
    type: 'text',
    width: 12,
    cell: (r) => r.entity_id,
    link: (r) => paymentPath(r.merchant_account, 'deposit', r.entity_id),
  },
  { header: 'Invoice id', key: 'ref', type: 'text', width: 16, wrap: true, cell: (r) => r.external_ref },
  { header: 'Status', key: 'status', type: 'text', width: 15, wrap: true, cell: (r) => r.status },
  {
    header: 'Status reason',
    key: 'reason',
    type: 'text',
    width: 14,
    wrap: true,
    cell: (r) => r.status_reason,
  },
  { header: 'Currency', key: 'currency', type: 'text', width: 10, cell: (r) => r.currency },
  { header: 'Gross', key: 'gross', type: 'money', cell: (r) => minorOrNull(r.amount) },
  { header: 'Fee', key: 'fee', type: 'money', width: 13, cell: (r) => minorOrNull(r.fee_amount) },
  {
    header: 'Fee on payer',
    key: 'feeOnPayer',
    type: 'text',
    width: 7,
    cell: (r) => (r.fee_on_payer ? 'yes' : 'no'),
  },
  {
    header: 'Early released',
    key: 'early',
    type: 'text',
    width: 10,
    cell: (r) => (r.ever_early_released ? 'yes' : 'no'),
  },
  { header: 'First seen', key: 'firstSeen', type: 'date', printed: false, cell: (r) => r.first_seen_at },
  { header: 'Status since', key: 'statusSince', type: 'date', cell: (r) => r.status_since },
  {
    header: 'Credited in period',
    key: 'credited',
    type: 'money',
    total: true,
    cell: (r) => parseLedgerMinor(r.e_credit),
  },
  {
    header: 'Fees in period',
    key: 'fees',
    type: 'money',
    total: true,
    width: 13,
    cell: (r) => -parseLedgerMinor(r.e_fee),
  },
  {
    header: 'Reversed in period',
    key: 'reversed',
    type: 'money',
    total: true,
    cell: (r) => -parseLedgerMinor(r.e_reversal),
  },
  {
    header: 'Net to available',
    key: 'net',
    type: 'money',
    total: true,
    cell: (r) => parseLedgerMinor(r.available_delta),
  },
];

/** Cashout and refund rows: entity facts, then the period's activity per effect. */
export const PAYOUT_COLUMNS = (kind: 'cashout' | 'refund'): ColumnSpec<EntityRow>[] => [
  { header: 'Account', key: 'account', type: 'text', width: 12, wrap: true, cell: (r) => r.merchant_account },
  {
    header: kind === 'cashout' ? 'Cashout id' : 'Refund id',
    key: 'id',
    type: 'text',
    width: 12,
    cell: (r) => r.entity_id,
    link: (r) => paymentPath(r.merchant_account, kind, r.entity_id),
  },
  kind === 'cashout'
    ? { header: 'External id', key: 'ref', type: 'text', width: 16, wrap: true, cell: (r) => r.external_ref }
    : { header: 'Deposit id', key: 'ref', type: 'text', width: 16, cell: (r) => r.parent_deposit_id },
  { header: 'Status', key: 'status', type: 'text', width: 12, wrap: true, cell: (r) => r.status },
  {
    header: 'Rejection',
    key: 'rejection',
    type: 'text',
    width: 22,
    wrap: true,
    cell: (r) => [r.rejection_code, r.rejection_reason].filter(Boolean).join(' ') || null,
  },
  { header: 'Currency', key: 'currency', type: 'text', width: 10, cell: (r) => r.currency },
  { header: 'Amount', key: 'amount', type: 'money', cell: (r) => minorOrNull(r.amount) },
  { header: 'First seen', key: 'firstSeen', type: 'date', printed: false, cell: (r) => r.first_seen_at },
  { header: 'Status since', key: 'statusSince', type: 'date', cell: (r) => r.status_since },
  { header: 'Completed at', key: 'completedAt', type: 'date', cell: (r) => r.completed_at },
  {
    header: 'Reserved in period',
    key: 'reserved',
    type: 'money',
    total: true,
    cell: (r) => parseLedgerMinor(r.e_reserve),
  },
  {
    header: 'Released in period',
    key: 'released',
    type: 'money',
    total: true,
    cell: (r) => parseLedgerMinor(r.e_release),
  },
  {
    header: 'Settled in period',
    key: 'settled',
    type: 'money',
    total: true,
    cell: (r) => -parseLedgerMinor(r.e_settle),
  },
  {
    header: 'Rejected late in period',
    key: 'late',
    type: 'money',
    total: true,
    cell: (r) => parseLedgerMinor(r.e_late),
  },
  {
    header: 'Available movement',
    key: 'availableDelta',
    type: 'money',
    total: true,
    printed: false,
    cell: (r) => parseLedgerMinor(r.available_delta),
  },
  {
    header: 'Reserved movement',
    key: 'reservedDelta',
    type: 'money',
    total: true,
    printed: false,
    cell: (r) => parseLedgerMinor(r.reserved_delta),
  },
];

/** Journal rows: one per posting. */
export const JOURNAL_COLUMNS: ColumnSpec<JournalRow>[] = [
  { header: 'Entry', key: 'entry', type: 'int', width: 10, cell: (r) => Number(r.entry) },
  // One character wider than the time: the booking time and the account beside it do not touch.
  { header: 'Booked at', key: 'bookedAt', type: 'date', width: 20, cell: (r) => new Date(r.booked_ms) },
  { header: 'Account', key: 'account', type: 'text', width: 12, wrap: true, cell: (r) => r.merchant_account },
  { header: 'Kind', key: 'kind', type: 'text', width: 8, cell: (r) => r.entity_kind },
  {
    header: 'Entity id',
    key: 'entityId',
    type: 'text',
    width: 12,
    cell: (r) => r.entity_id,
    // Payments link to their page; the cash leg's settlements and bank matches have none.
    link: (r) =>
      (ENTITY_KINDS as readonly string[]).includes(r.entity_kind)
        ? paymentPath(r.merchant_account, r.entity_kind, r.entity_id)
        : null,
  },
  { header: 'Effect', key: 'effect', type: 'text', width: 22, cell: (r) => r.effect },
  {
    header: 'Reversal',
    key: 'reversal',
    type: 'text',
    width: 10,
    cell: (r) => (r.direction < 0 ? 'yes' : ''),
  },
  { header: 'Ledger account', key: 'ledgerAccount', type: 'text', width: 12, cell: (r) => r.account },
  { header: 'Currency', key: 'currency', type: 'text', width: 10, cell: (r) => r.currency },
  { header: 'Amount', key: 'amount', type: 'money', total: true, cell: (r) => parseLedgerMinor(r.amount) },
];

/**
 * The provider's settlements whose value date lies in the period, one row each as its report gives it:
 * the gross in the balance currency, fees and net in the settlement currency (totals per settlement
 * currency), the rate, whether the ledger booked it, and the bank line matched to it (its reference and
 * booking date; empty while no standing match names it).
 */
export const SETTLEMENT_COLUMNS: ColumnSpec<SettlementReportRow>[] = [
  { header: 'Settlement id', key: 'settlementId', type: 'text', width: 16, cell: (r) => r.settlementId },
  { header: 'Account', key: 'account', type: 'text', width: 12, wrap: true, cell: (r) => r.account ?? '' },
  // The cut-offs, for look-ups: folded away, not printed (the value date is).
  { header: 'Period from', key: 'periodStart', type: 'date', printed: false, cell: (r) => r.periodStart },
  { header: 'Period to', key: 'periodEnd', type: 'date', printed: false, cell: (r) => r.periodEnd },
  { header: 'Currency', key: 'currency', type: 'text', width: 10, cell: (r) => r.currency },
  { header: 'Gross', key: 'gross', type: 'money', cell: (r) => r.gross },
  { header: 'Rate', key: 'rate', type: 'text', width: 14, cell: (r) => r.rate },
  {
    header: 'Settlement currency',
    key: 'settlementCurrency',
    type: 'text',
    width: 12,
    cell: (r) => r.settlementCurrency,
  },
  { header: 'Fees', key: 'fees', type: 'money', total: true, cell: (r) => r.fees },
  { header: 'Net', key: 'net', type: 'money', total: true, cell: (r) => r.net },
  { header: 'Value date', key: 'valueDate', type: 'text', width: 12, cell: (r) => r.valueDate },
  {
    header: 'Bank reference',
    key: 'bankReference',
    type: 'text',
    width: 18,
    cell: (r) => r.bankReference ?? '',
  },
  { header: 'Booked', key: 'booked', type: 'text', width: 8, cell: (r) => (r.booked ? 'yes' : 'no') },
  {
    header: 'Bank line',
    key: 'bankLine',
    type: 'text',
    width: 16,
    wrap: true,
    cell: (r) => (r.bankLine ? (r.bankLine.reference ?? 'no reference') : ''),
  },
  {
    header: 'Credited on',
    key: 'creditedOn',
    type: 'text',
    width: 12,
    cell: (r) => r.bankLine?.bookingDate ?? '',
  },
];

/** Settlements: landscape, one page wide, the header rows on every page. */
export const SETTLEMENTS_PRINT: PrintRule = WIDE_TABLE;

/** Test and crypto book balances. */
export const BOOK_COLUMNS: ColumnSpec<BookBalance>[] = [
  { header: 'Currency', key: 'currency', type: 'text', width: 10, cell: (b) => b.currency },
  { header: 'Ledger account', key: 'account', type: 'text', width: 16, cell: (b) => b.account },
  { header: 'Opening', key: 'opening', type: 'money', total: true, cell: (b) => b.opening },
  { header: 'Movements', key: 'movement', type: 'money', total: true, cell: (b) => b.movement },
  { header: 'Closing', key: 'closing', type: 'money', total: true, cell: (b) => b.closing },
];

const minorOrNull = (text: string | null): Minor | null => (text === null ? null : parseLedgerMinor(text));

function summarize(
  opening: AccountBalance[],
  closing: AccountBalance[],
  movements: Movement[],
  early: Map<string, Minor>,
): { summaries: CurrencySummary[]; otherBooks: BookBalance[] } {
  const live = (rows: typeof opening, currency: string, account: string) =>
    rows
      .filter((r) => r.book === 'live' && r.currency === currency && r.account === account)
      .reduce((s, r) => s + r.balance, 0n);
  const currencies = new Set<string>();
  for (const r of [...opening, ...closing]) if (r.book === 'live') currencies.add(r.currency);
  for (const m of movements) if (m.book === 'live') currencies.add(m.currency);

  const summaries: CurrencySummary[] = [];
  for (const currency of [...currencies].sort(byCurrency)) {
    const mine = movements.filter((m) => m.book === 'live' && m.currency === currency);
    const lineOf = (entityKind: string, effect: string, label: string): SummaryLine => {
      const rows = mine.filter((m) => m.entityKind === entityKind && m.effect === effect);
      return {
        label,
        entityKind,
        effect,
        available: rows.filter((m) => m.account === 'available').reduce((s, m) => s + m.amount, 0n),
        reserved: rows.filter((m) => m.account === 'reserved').reduce((s, m) => s + m.amount, 0n),
      };
    };
    const present = new Set(mine.map((m) => `${m.entityKind}:${m.effect}`));
    const lines = [
      ...LIVE_LINES,
      ...CASH_LEG_LINES.filter((l) => present.has(`${l.entityKind}:${l.effect}`)),
    ].map((l) => lineOf(l.entityKind, l.effect, l.label));
    const known = new Set([...LIVE_LINES, ...CASH_LEG_LINES].map((l) => `${l.entityKind}:${l.effect}`));
    // Other effects that move available or reserved (the cash leg's other entries move neither).
    const others = new Set(
      mine
        .filter((m) => m.account === 'available' || m.account === 'reserved')
        .map((m) => `${m.entityKind}:${m.effect}`)
        .filter((k) => !known.has(k)),
    );
    for (const key of [...others].sort()) {
      const [entityKind = '', effect = ''] = key.split(':');
      lines.push(lineOf(entityKind, effect, `Other: ${entityKind} ${effect}`));
    }
    const openingAvailable = live(opening, currency, 'available');
    const openingReserved = live(opening, currency, 'reserved');
    const closingAvailable = live(closing, currency, 'available');
    const closingReserved = live(closing, currency, 'reserved');
    const sumA = lines.reduce((s, l) => s + l.available, 0n);
    const sumR = lines.reduce((s, l) => s + l.reserved, 0n);
    summaries.push({
      currency,
      openingAvailable,
      openingReserved,
      lines,
      closingAvailable,
      closingReserved,
      proofAvailable: openingAvailable + sumA - closingAvailable,
      proofReserved: openingReserved + sumR - closingReserved,
      depositsNet: (lines[0]?.available ?? 0n) + (lines[1]?.available ?? 0n),
      earlyReleasedGross: early.get(currency) ?? 0n,
    });
  }

  const otherBooks: BookBalance[] = [];
  const keys = new Set<string>();
  for (const r of [...opening, ...closing])
    if (r.book !== 'live') keys.add(`${r.book}|${r.currency}|${r.account}`);
  for (const m of movements) if (m.book !== 'live') keys.add(`${m.book}|${m.currency}|${m.account}`);
  for (const key of [...keys].sort()) {
    const [book, currency, account] = key.split('|') as ['test' | 'crypto', string, string];
    const pick = (rows: typeof opening) =>
      rows
        .filter((r) => r.book === book && r.currency === currency && r.account === account)
        .reduce((s, r) => s + r.balance, 0n);
    otherBooks.push({
      book,
      currency,
      account,
      opening: pick(opening),
      movement: movements
        .filter((m) => m.book === book && m.currency === currency && m.account === account)
        .reduce((s, m) => s + m.amount, 0n),
      closing: pick(closing),
    });
  }
  return { summaries, otherBooks };
}

/** The footer of every printed page of the settlement workbook. */
export function settlementPrint(period: Period, account: string | null): PrintSetup {
  return { report: `Settlement · ${account ?? 'all accounts'}`, period: `${period.from} to ${period.to}` };
}

/** Labels of the summary's first column (the column is made wide enough for the longest). */
const PROOF_LABEL = 'Proof: opening + movements − closing (must be 0)';
const FIXED_LABELS = [
  'Opening balance',
  'Closing balance',
  PROOF_LABEL,
  'Deposits, net (gross less fees)',
  '  of which released early (gross)',
];
/** Width of the summary's amount columns. */
export const SUMMARY_AMOUNT_WIDTH = 20;

/** How much wider than body text a summary line is drawn: the 13-point bold title. */
export const TITLE_SCALE = 1.3;

/**
 * The summary's label column width: the longest label plus a margin, and wide enough that the title
 * lines (spanning the sheet's three columns) fit within them, so nothing is cut when printed.
 */
export function summaryLabelWidth(
  labels: readonly string[],
  titles: readonly { text: string; scale: number }[],
): number {
  const longest = Math.max(...labels.map((l) => l.length));
  const title = Math.max(0, ...titles.map((t) => Math.ceil(t.text.length * t.scale)));
  return Math.max(longest + 3, title - 2 * SUMMARY_AMOUNT_WIDTH + 2);
}

/** The month (`YYYY-MM`) a period covers exactly, or null when it is not one whole month. */
function wholeMonth(period: Period): string | null {
  const month = period.from.slice(0, 7);
  if (!period.from.endsWith('-01')) return null;
  return monthPeriod(month, period.timeZone, period.cutoff).to === period.to ? month : null;
}

/**
 * The month close's sign-off lines of a summary: who prepared and signed, who
 * approved, when, and the SHA-256 of the signed figures, per close of the month; none for a period
 * that is not a whole month.
 */
function signOffLines(month: string | null, closes: readonly CloseSummary[], tz: string): string[] {
  if (month === null) return [];
  if (closes.length === 0) return [`Month close ${month}: not signed yet`];
  return closes.flatMap((c) => [
    `Month close ${month} · ${c.merchantAccount}: prepared and signed by ${c.preparedBy}, ${humanInstant(c.preparedAt, tz, false)}`,
    c.approvedBy && c.approvedAt
      ? `  approved by ${c.approvedBy}, ${humanInstant(c.approvedAt, tz, false)}`
      : '  not approved yet',
    `  SHA-256 ${c.sha256 ?? ''}`,
  ]);
}

function writeSummarySheet(
  wb: ExcelJS.stream.xlsx.WorkbookWriter,
  s: CurrencySummary,
  period: Period,
  account: string | null,
  signOff: readonly string[],
): void {
  const heading = `Settlement ${s.currency} (live book) · ${account ?? 'all accounts'} · ${period.from} to ${period.to}`;
  const tz = period.timeZone;
  const booked = `Booked ${humanInstant(period.start, tz, false)} to ${humanInstant(period.end, tz, false)} (${tz}), cut-off ${period.cutoff}`;
  const labels = [...FIXED_LABELS, ...s.lines.map((l) => l.label)];
  const titles = [
    { text: heading, scale: TITLE_SCALE },
    { text: booked, scale: 1 },
    ...signOff.map((text) => ({ text, scale: 1 })),
  ];
  const ws = wb.addWorksheet(`Summary ${s.currency}`, {
    views: [{ state: 'frozen', ySplit: 4 }],
    ...printOptions(settlementPrint(period, account), 4, SUMMARY_PRINT),
  });
  ws.columns = [
    { key: 'label', width: summaryLabelWidth(labels, titles) },
    { key: 'available', width: SUMMARY_AMOUNT_WIDTH, style: { numFmt: MONEY_FORMAT } },
    { key: 'reserved', width: SUMMARY_AMOUNT_WIDTH, style: { numFmt: MONEY_FORMAT } },
  ];
  const title = ws.addRow([heading]);
  title.font = { ...BOLD, size: 13 };
  title.commit();
  ws.addRow([booked]).commit();
  ws.addRow([]).commit();
  const header = ws.addRow(['', 'Available', 'Reserved']);
  header.font = BOLD;
  header.fill = { type: 'pattern', pattern: 'solid', fgColor: { argb: 'FFE8ECF2' } };
  for (const col of [2, 3]) header.getCell(col).alignment = { horizontal: 'right' };
  header.commit();
  const n = minorToCell;
  // A formula over amounts written as text would not add up: such a figure is written as its exact text.
  const exact = (...values: Minor[]) => values.every((v) => typeof minorToCell(v) === 'number');
  const openingRow = 5;
  const o = ws.addRow(['Opening balance', n(s.openingAvailable), n(s.openingReserved)]);
  o.font = BOLD;
  o.commit();
  for (const line of s.lines) ws.addRow([line.label, n(line.available), n(line.reserved)]).commit();
  const lastMovement = openingRow + s.lines.length;
  const closingRow = lastMovement + 1;
  const c = ws.addRow(['Closing balance', n(s.closingAvailable), n(s.closingReserved)]);
  c.font = BOLD;
  c.border = { top: { style: 'thin' } };
  c.commit();
  const proof = (col: string, result: Minor, parts: Minor[]) =>
    exact(result, ...parts)
      ? {
          formula: `${col}${openingRow}+SUM(${col}${openingRow + 1}:${col}${lastMovement})-${col}${closingRow}`,
          result: n(result),
        }
      : formatAmount(result);
  const p = ws.addRow([
    PROOF_LABEL,
    proof('B', s.proofAvailable, [
      s.openingAvailable,
      s.closingAvailable,
      ...s.lines.map((l) => l.available),
    ]),
    proof('C', s.proofReserved, [s.openingReserved, s.closingReserved, ...s.lines.map((l) => l.reserved)]),
  ]);
  p.font = {
    ...BOLD,
    color: { argb: s.proofAvailable === 0n && s.proofReserved === 0n ? 'FF1B5E20' : 'FFB3261E' },
  };
  p.commit();
  ws.addRow([]).commit();
  ws.addRow([
    'Deposits, net (gross less fees)',
    exact(s.depositsNet, s.lines[0]?.available ?? 0n, s.lines[1]?.available ?? 0n)
      ? { formula: `B${openingRow + 1}+B${openingRow + 2}`, result: n(s.depositsNet) }
      : formatAmount(s.depositsNet),
  ]).commit();
  ws.addRow(['  of which released early (gross)', n(s.earlyReleasedGross)]).commit();
  ws.addRow([]).commit();
  ws.addRow(['Test and crypto books are on their own sheets and never in these figures.']).commit();
  if (signOff.length > 0) {
    ws.addRow([]).commit();
    const first = ws.addRow([signOff[0]]);
    first.font = BOLD;
    first.commit();
    for (const line of signOff.slice(1)) ws.addRow([line]).commit();
  }
  ws.commit();
}

/** Writes the settlement workbook (and CSVs); returns what it wrote. */
export async function writeSettlementWorkbook(db: Db, options: SettlementOptions): Promise<SettlementResult> {
  const { period, account } = options;
  const tz = period.timeZone;
  const csvPath = await prepareOutputs(options);

  return inSnapshot(db, async (trx) => {
    // Sorts stay in memory; JIT compilation costs more than it saves on these one-off queries.
    await tuneForReport(trx);
    // Every read below names the id range of the period's entries: the cost follows the period, not the history.
    const entries = await entryPeriod(trx, period);
    const { opening, closing, movements } = await ledgerTotals(
      trx,
      period.start,
      period.end,
      account,
      entries,
    );
    const early = await earlyReleasedCredits(trx, entries, account);
    const { summaries, otherBooks } = summarize(opening, closing, movements, early);

    const queries = {
      live: journalQuery('live', entries, account),
      test: journalQuery('test', entries, account),
      crypto: journalQuery('crypto', entries, account),
    };
    // The entity sheets' rows, every kind in one pass over the period; its first batch tells their number.
    const entityBatches = await openBatches(trx, entityQuery(entries, account), FETCH_SIZE);
    let entityBatch = await entityBatches.next().catch(async (err) => {
      await entityBatches.close().catch(() => undefined);
      throw err;
    });
    // The provider's settlements with a value date in the period (one row per settlement: a few a day).
    const settlements = await settlementsOfPeriod(trx, period.from, period.to, account);
    // Progress total: journal lines from the movements already at hand, entity rows from that first batch.
    const total =
      movements.reduce((n, m) => n + m.lines, 0) +
      Number(entityBatch[0]?.result_rows ?? 0) +
      settlements.length;
    let done = 0;
    const progress = (k: number) => {
      done += k;
      options.onProgress?.(done, total);
    };
    progress(0);

    const wb = workbookWriter(options.out);
    wb.creator = 'payrecon';
    wb.created = new Date(0);
    wb.modified = new Date(0);
    const month = wholeMonth(period);
    const closes = month === null ? [] : await closesOfPeriods(trx, [month], account);
    for (const s of summaries) {
      const signOff = signOffLines(
        month,
        closes.filter((c) => c.currency === s.currency),
        tz,
      );
      writeSummarySheet(wb, s, period, account, signOff);
    }
    if (summaries.length === 0) {
      const ws = wb.addWorksheet('Summary', printOptions(settlementPrint(period, account), 1, SUMMARY_PRINT));
      ws.addRow([
        `No live activity or balances for ${account ?? 'any account'} up to ${period.to}.`,
      ]).commit();
      ws.commit();
    }
    const rowCounts: Record<string, number> = {};
    const files = [options.out];
    const print = settlementPrint(period, account);
    // The signed closes' bank proofs, as frozen in their signed text.
    const signed = await Promise.all(
      closes.map((c) => getCloseRecord(trx, c.merchantAccount, c.currency, c.period)),
    );
    writeBankProofSheet(
      wb,
      signed.filter((r) => r !== null),
      print,
    );
    const preamble = (what: string) => [
      `${what} · ${account ?? 'all accounts'} · ${period.from} to ${period.to} · times in ${tz}`,
    ];

    // Deposits, cashouts and refunds: each sheet takes the cursor's rows of its kind (they come in that order).
    let entitiesOpen = true;
    try {
      for (const kind of ENTITY_KINDS) {
        const name = kind === 'deposit' ? 'Deposits' : kind === 'cashout' ? 'Cashouts' : 'Refunds';
        const path = csvPath(name.toLowerCase());
        const t = new TableSheet(wb, name, kind === 'deposit' ? DEPOSIT_COLUMNS : PAYOUT_COLUMNS(kind), {
          timeZone: tz,
          print,
          linkBase: options.links,
          csvPath: path,
          preamble: preamble(`Live ${name.toLowerCase()} with activity in the period`),
          currencyKey: 'currency',
          rule: ENTITY_PRINT,
        });
        for (;;) {
          let n = 0;
          while (n < entityBatch.length && entityBatch[n]!.entity_kind === kind) t.add(entityBatch[n++]!);
          if (n > 0) {
            progress(n);
            await t.drain();
          }
          if (n < entityBatch.length) {
            entityBatch = entityBatch.slice(n);
            break;
          }
          entityBatch = await entityBatches.next();
          if (entityBatch.length === 0) break;
        }
        await t.finish(kind === 'deposit' ? { currencies: summaries.map((s) => s.currency) } : {});
        rowCounts[name] = t.rowCount;
        if (path) files.push(path);
      }
      entitiesOpen = false;
      await entityBatches.close();
    } finally {
      if (entitiesOpen) await entityBatches.close().catch(() => undefined);
    }

    // The settlements sheet, as the provider's report gives them, with whether the ledger booked each.
    {
      const path = csvPath('settlements');
      const t = new TableSheet(wb, 'Settlements', SETTLEMENT_COLUMNS, {
        timeZone: tz,
        print,
        csvPath: path,
        preamble: preamble('Settlements the provider reported with a value date in the period'),
        currencyKey: 'settlementCurrency',
        rule: SETTLEMENTS_PRINT,
      });
      for (const r of settlements) t.add(r);
      progress(settlements.length);
      await t.finish();
      rowCounts.Settlements = t.rowCount;
      if (path) files.push(path);
    }

    const journals = [
      { book: 'live', sheet: 'Journal', csv: 'journal', title: 'Live journal, one row per posting' },
      {
        book: 'test',
        sheet: 'Test journal',
        csv: 'test-journal',
        title: 'Test book journal (not in live totals)',
      },
      {
        book: 'crypto',
        sheet: 'Crypto journal',
        csv: 'crypto-journal',
        title: 'Crypto book journal (not in live totals)',
      },
    ] as const;
    for (const j of journals) {
      if (j.book !== 'live') {
        const rows = otherBooks.filter((b) => b.book === j.book);
        const bookSheet = new TableSheet(wb, j.book === 'test' ? 'Test book' : 'Crypto book', BOOK_COLUMNS, {
          timeZone: tz,
          print,
          preamble: [
            `${j.book === 'test' ? 'Test' : 'Crypto'} book balances · never part of the live summary · ${period.from} to ${period.to}`,
          ],
          currencyKey: 'currency',
          rule: BOOK_PRINT,
        });
        for (const b of rows) bookSheet.add(b);
        await bookSheet.finish();
        rowCounts[bookSheet.name] = bookSheet.rowCount;
      }
      const path = csvPath(j.csv);
      const t = new TableSheet(wb, j.sheet, JOURNAL_COLUMNS, {
        timeZone: tz,
        print,
        linkBase: options.links,
        csvPath: path,
        preamble: [
          `${j.title} · ${account ?? 'all accounts'} · ${period.from} to ${period.to} · times in ${tz}`,
        ],
        currencyKey: 'currency',
        rule: JOURNAL_PRINT,
      });
      await forEachBatch(trx, queries[j.book], FETCH_SIZE, async (rows) => {
        for (const r of rows) t.add(r);
        progress(rows.length);
        await t.drain();
      });
      await t.finish();
      rowCounts[j.sheet] = t.rowCount;
      if (path) files.push(path);
    }

    await wb.commit();
    return { summaries, otherBooks, rowCounts, files };
  });
}

export { DATE_FORMAT };
