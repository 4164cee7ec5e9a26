import ExcelJS from 'exceljs';
import { type RawBuilder, sql } from 'kysely';
import {
  type AccountBalance,
  accountFilter,
  activeEntityCounts,
  earlyReleasedCredits,
  forEachBatch,
  ledgerTotals,
  type Movement,
} from '../db/report-queries.ts';
import type { Db } from '../db/schema.ts';
import { formatAmount, type Minor, minorToNumber, parseLedgerMinor } from '../domain/money.ts';
import { excelDate, type Period } from './period.ts';
import {
  type ColumnSpec,
  DATE_FORMAT,
  inSnapshot,
  MONEY_FORMAT,
  prepareOutputs,
  TableSheet,
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

const DEPOSIT_COLUMNS: ColumnSpec[] = [
  { header: 'Account', key: 'account', type: 'text', width: 14 },
  { header: 'Deposit id', key: 'id', type: 'text', width: 16 },
  { header: 'Invoice id', key: 'ref', type: 'text', width: 22 },
  { header: 'Status', key: 'status', type: 'text', width: 16 },
  { header: 'Status reason', key: 'reason', type: 'text', width: 18 },
  { header: 'Currency', key: 'currency', type: 'text', width: 9 },
  { header: 'Gross', key: 'gross', type: 'money' },
  { header: 'Fee', key: 'fee', type: 'money' },
  { header: 'Fee on payer', key: 'feeOnPayer', type: 'text', width: 12 },
  { header: 'Early released', key: 'early', type: 'text', width: 14 },
  { header: 'First seen', key: 'firstSeen', type: 'date' },
  { header: 'Status since', key: 'statusSince', type: 'date' },
  { header: 'Credited in period', key: 'credited', type: 'money', total: true, width: 18 },
  { header: 'Fees in period', key: 'fees', type: 'money', total: true },
  { header: 'Reversed in period', key: 'reversed', type: 'money', total: true, width: 18 },
  { header: 'Net to available', key: 'net', type: 'money', total: true, width: 17 },
];

const PAYOUT_COLUMNS = (kind: 'cashout' | 'refund'): ColumnSpec[] => [
  { header: 'Account', key: 'account', type: 'text', width: 14 },
  { header: kind === 'cashout' ? 'Cashout id' : 'Refund id', key: 'id', type: 'text', width: 16 },
  kind === 'cashout'
    ? { header: 'External id', key: 'ref', type: 'text', width: 22 }
    : { header: 'Deposit id', key: 'ref', type: 'text', width: 16 },
  { header: 'Status', key: 'status', type: 'text', width: 18 },
  { header: 'Rejection', key: 'rejection', type: 'text', width: 24 },
  { header: 'Currency', key: 'currency', type: 'text', width: 9 },
  { header: 'Amount', key: 'amount', type: 'money' },
  { header: 'First seen', key: 'firstSeen', type: 'date' },
  { header: 'Status since', key: 'statusSince', type: 'date' },
  { header: 'Completed at', key: 'completedAt', type: 'date' },
  { header: 'Reserved in period', key: 'reserved', type: 'money', total: true, width: 18 },
  { header: 'Released in period', key: 'released', type: 'money', total: true, width: 18 },
  { header: 'Settled in period', key: 'settled', type: 'money', total: true, width: 18 },
  { header: 'Rejected late in period', key: 'late', type: 'money', total: true, width: 22 },
  { header: 'Available movement', key: 'availableDelta', type: 'money', total: true, width: 19 },
  { header: 'Reserved movement', key: 'reservedDelta', type: 'money', total: true, width: 19 },
];

export const JOURNAL_COLUMNS: ColumnSpec[] = [
  { header: 'Entry', key: 'entry', type: 'int', width: 11 },
  { header: 'Booked at', key: 'bookedAt', type: 'date' },
  { header: 'Account', key: 'account', type: 'text', width: 14 },
  { header: 'Kind', key: 'kind', type: 'text', width: 9 },
  { header: 'Entity id', key: 'entityId', type: 'text', width: 16 },
  { header: 'Effect', key: 'effect', type: 'text', width: 22 },
  { header: 'Reversal', key: 'reversal', type: 'text', width: 9 },
  { header: 'Ledger account', key: 'ledgerAccount', type: 'text', width: 22 },
  { header: 'Currency', key: 'currency', type: 'text', width: 9 },
  { header: 'Amount', key: 'amount', type: 'money', total: true },
];

const BOOK_COLUMNS: ColumnSpec[] = [
  { header: 'Currency', key: 'currency', type: 'text', width: 9 },
  { header: 'Ledger account', key: 'account', type: 'text', width: 26 },
  { header: 'Opening', key: 'opening', type: 'money', total: true },
  { header: 'Movements', key: 'movement', type: 'money', total: true },
  { header: 'Closing', key: 'closing', type: 'money', total: true },
];

interface EntityRow {
  merchant_account: string;
  entity_id: string;
  external_ref: string | null;
  parent_deposit_id: string | null;
  status: string | null;
  status_reason: string | null;
  rejection_code: string | null;
  rejection_reason: string | null;
  currency: string;
  amount: string | null;
  fee_amount: string | null;
  fee_on_payer: boolean;
  ever_early_released: boolean;
  first_seen_at: Date | null;
  status_since: Date | null;
  completed_at: Date | null;
  e_credit: string;
  e_fee: string;
  e_reversal: string;
  e_reserve: string;
  e_release: string;
  e_settle: string;
  e_late: string;
  available_delta: string;
  reserved_delta: string;
}

/**
 * Live entities of one kind (with their mirror) with journal activity in the period, with that
 * activity per effect read from the postings: credit, fee and reversal on `available`; reserve and
 * settle on `reserved`; release and late reversal on `available`.
 */
function entityQuery(kind: string, p: Period, account: string | null): RawBuilder<EntityRow> {
  const on = (effect: string, ledgerAccount: string) =>
    sql`coalesce(sum(p.amount) FILTER (WHERE e.effect = ${effect} AND p.account = ${ledgerAccount}), 0)::text`;
  return sql<EntityRow>`
    SELECT m.merchant_account, m.entity_id, m.external_ref, m.parent_deposit_id, m.status, m.status_reason,
           m.rejection_code, m.rejection_reason, e.currency, m.amount::text AS amount,
           m.fee_amount::text AS fee_amount, m.fee_on_payer, m.ever_early_released, m.first_seen_at,
           m.status_since, m.completed_at,
           ${on('credit', 'available')} AS e_credit, ${on('fee', 'available')} AS e_fee,
           ${on('early_release_reversal', 'available')} AS e_reversal,
           ${on('reserve', 'reserved')} AS e_reserve, ${on('release', 'available')} AS e_release,
           ${on('settle', 'reserved')} AS e_settle, ${on('late_reversal', 'available')} AS e_late,
           coalesce(sum(p.amount) FILTER (WHERE p.account = 'available'), 0)::text AS available_delta,
           coalesce(sum(p.amount) FILTER (WHERE p.account = 'reserved'), 0)::text AS reserved_delta
      FROM mirrors m
      JOIN journal_entries e ON e.merchant_account = m.merchant_account AND e.entity_kind = m.entity_kind
                            AND e.entity_id = m.entity_id
      JOIN postings p ON p.entry_id = e.id
     WHERE m.entity_kind = ${kind} AND e.created_at >= ${p.start} AND e.created_at < ${p.end}
       AND e.book = 'live'${accountFilter(account)}
     GROUP BY m.merchant_account, m.entity_kind, m.entity_id, e.currency
     ORDER BY e.currency, min(e.id), m.entity_id`;
}

interface JournalRow {
  entry: string;
  /** Booking instant in epoch milliseconds (cheaper to read than timestamptz text). */
  booked_ms: number;
  merchant_account: string;
  entity_kind: string;
  entity_id: string;
  effect: string;
  direction: number;
  account: string;
  currency: string;
  amount: string;
}

/** One row per posting of the book's entries booked in the period, in booking order. */
export function journalQuery(book: string, p: Period, account: string | null): RawBuilder<JournalRow> {
  return sql<JournalRow>`
    SELECT e.id AS entry, (extract(epoch FROM e.created_at) * 1000)::float8 AS booked_ms, e.merchant_account, e.entity_kind, e.entity_id, e.effect,
           e.direction, p.account, p.currency, p.amount::text AS amount
      FROM journal_entries e JOIN postings p ON p.entry_id = e.id
     WHERE e.created_at >= ${p.start} AND e.created_at < ${p.end} AND e.book = ${book}${accountFilter(account)}
     ORDER BY e.id, p.id`;
}

export function journalCells(r: JournalRow): (Minor | Date | number | string | null)[] {
  return [
    Number(r.entry),
    new Date(r.booked_ms),
    r.merchant_account,
    r.entity_kind,
    r.entity_id,
    r.effect,
    r.direction < 0 ? 'yes' : '',
    r.account,
    r.currency,
    parseLedgerMinor(r.amount),
  ];
}

function add(map: Map<string, Record<string, Minor>>, currency: string, values: Record<string, Minor>): void {
  const current = map.get(currency) ?? {};
  for (const [k, v] of Object.entries(values)) current[k] = (current[k] ?? 0n) + v;
  map.set(currency, current);
}

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
  for (const currency of [...currencies].sort()) {
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
    const lines = LIVE_LINES.map((l) => lineOf(l.entityKind, l.effect, l.label));
    const known = new Set(LIVE_LINES.map((l) => `${l.entityKind}:${l.effect}`));
    const others = new Set(mine.map((m) => `${m.entityKind}:${m.effect}`).filter((k) => !known.has(k)));
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

function localStamp(d: Date, tz: string): string {
  return excelDate(d, tz).toISOString().slice(0, 16).replace('T', ' ');
}

function writeSummarySheet(
  wb: ExcelJS.stream.xlsx.WorkbookWriter,
  s: CurrencySummary,
  period: Period,
  account: string | null,
): void {
  const ws = wb.addWorksheet(`Summary ${s.currency}`, { views: [{ state: 'frozen', ySplit: 4 }] });
  ws.columns = [
    { key: 'label', width: 38 },
    { key: 'available', width: 20, style: { numFmt: MONEY_FORMAT } },
    { key: 'reserved', width: 20, style: { numFmt: MONEY_FORMAT } },
  ];
  const title = ws.addRow([
    `Settlement ${s.currency} · ${account ?? 'all accounts'} · ${period.from} to ${period.to} (live book)`,
  ]);
  title.font = { bold: true, size: 13 };
  title.commit();
  ws.addRow([
    `Booked from ${localStamp(period.start, period.timeZone)} to ${localStamp(period.end, period.timeZone)} ${period.timeZone} (cut-off ${period.cutoff})`,
  ]).commit();
  ws.addRow([]).commit();
  const header = ws.addRow(['', 'Available', 'Reserved']);
  header.font = { bold: true };
  header.fill = { type: 'pattern', pattern: 'solid', fgColor: { argb: 'FFE8ECF2' } };
  header.commit();
  const n = (m: Minor) => minorToNumber(m);
  const openingRow = 5;
  const o = ws.addRow(['Opening balance', n(s.openingAvailable), n(s.openingReserved)]);
  o.font = { bold: true };
  o.commit();
  for (const line of s.lines) ws.addRow([line.label, n(line.available), n(line.reserved)]).commit();
  const lastMovement = openingRow + s.lines.length;
  const closingRow = lastMovement + 1;
  const c = ws.addRow(['Closing balance', n(s.closingAvailable), n(s.closingReserved)]);
  c.font = { bold: true };
  c.border = { top: { style: 'thin' } };
  c.commit();
  const proof = (col: string, result: Minor) => ({
    formula: `${col}${openingRow}+SUM(${col}${openingRow + 1}:${col}${lastMovement})-${col}${closingRow}`,
    result: n(result),
  });
  const p = ws.addRow([
    'Proof: opening + movements − closing (must be 0)',
    proof('B', s.proofAvailable),
    proof('C', s.proofReserved),
  ]);
  p.font = {
    bold: true,
    color: { argb: s.proofAvailable === 0n && s.proofReserved === 0n ? 'FF1B5E20' : 'FFB3261E' },
  };
  p.commit();
  ws.addRow([]).commit();
  ws.addRow([
    'Deposits, net (gross less fees)',
    { formula: `B${openingRow + 1}+B${openingRow + 2}`, result: n(s.depositsNet) },
  ]).commit();
  ws.addRow(['  of which released early (gross)', n(s.earlyReleasedGross)]).commit();
  ws.addRow([]).commit();
  ws.addRow(['Test and crypto books are on their own sheets and never in these figures.']).commit();
  ws.commit();
}

/** Writes the settlement workbook (and CSVs); returns what it wrote. */
export async function writeSettlementWorkbook(db: Db, options: SettlementOptions): Promise<SettlementResult> {
  const { period, account } = options;
  const tz = period.timeZone;
  const csvPath = await prepareOutputs(options);

  return inSnapshot(db, async (trx) => {
    // Sorts stay in memory; JIT compilation costs more than it saves on these one-off queries.
    await sql`SET LOCAL work_mem = '64MB'`.execute(trx);
    await sql`SET LOCAL jit = off`.execute(trx);
    const { opening, closing, movements } = await ledgerTotals(trx, period.start, period.end, account);
    const early = await earlyReleasedCredits(trx, period.start, period.end, account);
    const { summaries, otherBooks } = summarize(opening, closing, movements, early);

    const queries = {
      deposit: entityQuery('deposit', period, account),
      cashout: entityQuery('cashout', period, account),
      refund: entityQuery('refund', period, account),
      live: journalQuery('live', period, account),
      test: journalQuery('test', period, account),
      crypto: journalQuery('crypto', period, account),
    };
    // Progress total: journal lines from the movements already at hand, entity rows from one count.
    const entities = await activeEntityCounts(trx, period.start, period.end, account);
    const total =
      movements.reduce((n, m) => n + m.lines, 0) + Object.values(entities).reduce((a, b) => a + b, 0);
    let done = 0;
    const progress = (k: number) => {
      done += k;
      options.onProgress?.(done, total);
    };
    progress(0);

    const wb = new ExcelJS.stream.xlsx.WorkbookWriter({
      filename: options.out,
      useStyles: true,
      useSharedStrings: false,
    });
    wb.creator = 'payrecon';
    wb.created = new Date(0);
    wb.modified = new Date(0);
    for (const s of summaries) writeSummarySheet(wb, s, period, account);
    if (summaries.length === 0) {
      const ws = wb.addWorksheet('Summary');
      ws.addRow([
        `No live activity or balances for ${account ?? 'any account'} up to ${period.to}.`,
      ]).commit();
      ws.commit();
    }
    const rowCounts: Record<string, number> = {};
    const files = [options.out];
    const preamble = (what: string) => [
      `${what} · ${account ?? 'all accounts'} · ${period.from} to ${period.to} · times in ${tz}`,
    ];

    // Deposits
    {
      const path = csvPath('deposits');
      const t = new TableSheet(wb, 'Deposits', DEPOSIT_COLUMNS, {
        timeZone: tz,
        csvPath: path,
        preamble: preamble('Live deposits with activity in the period'),
        currencyKey: 'currency',
      });
      const totals = new Map<string, Record<string, Minor>>();
      await forEachBatch(trx, queries.deposit, FETCH_SIZE, async (rows) => {
        for (const r of rows) {
          const credited = parseLedgerMinor(r.e_credit);
          const fees = -parseLedgerMinor(r.e_fee);
          const reversed = -parseLedgerMinor(r.e_reversal);
          const net = parseLedgerMinor(r.available_delta);
          t.add([
            r.merchant_account,
            r.entity_id,
            r.external_ref,
            r.status,
            r.status_reason,
            r.currency,
            r.amount === null ? null : parseLedgerMinor(r.amount),
            r.fee_amount === null ? null : parseLedgerMinor(r.fee_amount),
            r.fee_on_payer ? 'yes' : 'no',
            r.ever_early_released ? 'yes' : 'no',
            r.first_seen_at,
            r.status_since,
            credited,
            fees,
            reversed,
            net,
          ]);
          add(totals, r.currency, { credited, fees, reversed, net });
        }
        progress(rows.length);
        await t.drain();
      });
      for (const s of summaries) if (!totals.has(s.currency)) totals.set(s.currency, {});
      await t.finish(totals);
      rowCounts.Deposits = t.rowCount;
      if (path) files.push(path);
    }

    for (const kind of ['cashout', 'refund'] as const) {
      const name = kind === 'cashout' ? 'Cashouts' : 'Refunds';
      const path = csvPath(name.toLowerCase());
      const t = new TableSheet(wb, name, PAYOUT_COLUMNS(kind), {
        timeZone: tz,
        csvPath: path,
        preamble: preamble(`Live ${name.toLowerCase()} with activity in the period`),
        currencyKey: 'currency',
      });
      const totals = new Map<string, Record<string, Minor>>();
      await forEachBatch(trx, queries[kind], FETCH_SIZE, async (rows) => {
        for (const r of rows) {
          const v = {
            reserved: parseLedgerMinor(r.e_reserve),
            released: parseLedgerMinor(r.e_release),
            settled: -parseLedgerMinor(r.e_settle),
            late: parseLedgerMinor(r.e_late),
            availableDelta: parseLedgerMinor(r.available_delta),
            reservedDelta: parseLedgerMinor(r.reserved_delta),
          };
          t.add([
            r.merchant_account,
            r.entity_id,
            kind === 'cashout' ? r.external_ref : r.parent_deposit_id,
            r.status,
            [r.rejection_code, r.rejection_reason].filter(Boolean).join(' ') || null,
            r.currency,
            r.amount === null ? null : parseLedgerMinor(r.amount),
            r.first_seen_at,
            r.status_since,
            r.completed_at,
            v.reserved,
            v.released,
            v.settled,
            v.late,
            v.availableDelta,
            v.reservedDelta,
          ]);
          add(totals, r.currency, v);
        }
        progress(rows.length);
        await t.drain();
      });
      await t.finish(totals);
      rowCounts[name] = t.rowCount;
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
          preamble: [
            `${j.book === 'test' ? 'Test' : 'Crypto'} book balances · never part of the live summary · ${period.from} to ${period.to}`,
          ],
          currencyKey: 'currency',
        });
        const totals = new Map<string, Record<string, Minor>>();
        for (const b of rows) {
          bookSheet.add([b.currency, b.account, b.opening, b.movement, b.closing]);
          add(totals, b.currency, { opening: b.opening, movement: b.movement, closing: b.closing });
        }
        await bookSheet.finish(totals);
        rowCounts[bookSheet.name] = bookSheet.rowCount;
      }
      const path = csvPath(j.csv);
      const t = new TableSheet(wb, j.sheet, JOURNAL_COLUMNS, {
        timeZone: tz,
        csvPath: path,
        preamble: [
          `${j.title} · ${account ?? 'all accounts'} · ${period.from} to ${period.to} · times in ${tz}`,
        ],
        currencyKey: 'currency',
      });
      const totals = new Map<string, Record<string, Minor>>();
      await forEachBatch(trx, queries[j.book], FETCH_SIZE, async (rows) => {
        for (const r of rows) {
          const cells = journalCells(r);
          t.add(cells);
          add(totals, r.currency, { amount: cells[9] as Minor });
        }
        progress(rows.length);
        await t.drain();
      });
      await t.finish(totals);
      rowCounts[j.sheet] = t.rowCount;
      if (path) files.push(path);
    }

    await wb.commit();
    return { summaries, otherBooks, rowCounts, files };
  });
}

/** Text of a summary for logs and the terminal: one line per currency. */
export function describeSummaries(summaries: readonly CurrencySummary[]): string[] {
  return summaries.map(
    (s) =>
      `${s.currency}: available ${formatAmount(s.openingAvailable)} -> ${formatAmount(s.closingAvailable)}, reserved ${formatAmount(
        s.openingReserved,
      )} -> ${formatAmount(s.closingReserved)}, proof ${formatAmount(s.proofAvailable)}/${formatAmount(s.proofReserved)}`,
  );
}

export { DATE_FORMAT };
