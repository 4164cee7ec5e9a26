/**
 * What a merchant downloads from the provider: the transactions report (a row per balance movement of
 * a deposit, cashout or refund, per settlement fee and per settlement, each naming the settlement that
 * swept it) and the settlement report (a row per settlement), as CSV or as XLSX with every cell text,
 * so amounts are exact. Like a provider's balance report, each settlement row also gives the merchant
 * balance in the balance currency: `balance_at_cutoff`, what was left unsettled at the cut-off before the
 * payout (`available` at the cut-off less everything settled before), and `balance_after`, what the
 * payout left to carry over (`balance_at_cutoff` less the gross).
 */
import ExcelJS from 'exceljs';
import { formatAmount, type Minor } from '../domain/money.ts';
import { csvText } from './bank-statement.ts';
import type { SandboxEngine } from './engine.ts';
import type { DepositRecord } from './entities.ts';
import { balanceMovements } from './movements.ts';
import type { SettlementRecord } from './settlements.ts';

export const TRANSACTION_COLUMNS = [
  'transaction_id',
  'type',
  'status',
  'external_id',
  'invoice_id',
  'currency',
  'gross',
  'fee',
  'net',
  'created_at',
  'updated_at',
  'settlement_id',
] as const;

export const SETTLEMENT_COLUMNS = [
  'settlement_id',
  'account',
  'period_start',
  'period_end',
  'currency',
  'gross',
  'fees',
  'settlement_currency',
  'rate',
  'net',
  'value_date',
  'bank_reference',
  'balance_at_cutoff',
  'balance_after',
] as const;

/** An instant as the reports write it: ISO 8601 UTC without milliseconds. */
export const instantText = (ms: number): string => `${new Date(ms).toISOString().slice(0, 19)}Z`;

export interface Window {
  /** Inclusive, ms (none: from the start). */
  from?: number;
  /** Exclusive, ms (none: up to now). */
  to?: number;
}

const inside = (at: number, w: Window) =>
  (w.from === undefined || at >= w.from) && (w.to === undefined || at < w.to);

/** Rows of the transactions report of `account` for movements in the window. */
export function transactionRows(
  engine: SandboxEngine,
  settlements: readonly SettlementRecord[],
  account: string,
  window: Window,
): string[][] {
  const byCurrency = new Map<string, SettlementRecord[]>();
  for (const s of settlements) {
    if (s.account !== account) continue;
    const list = byCurrency.get(s.currency) ?? [];
    list.push(s);
    byCurrency.set(s.currency, list);
  }
  for (const list of byCurrency.values()) list.sort((a, b) => a.periodEnd - b.periodEnd);
  // The settlement that swept a movement: the first payout whose cut-off came after it.
  const sweptBy = (currency: string, at: number): string => {
    const list = byCurrency.get(currency) ?? [];
    let lo = 0;
    let hi = list.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (list[mid]!.periodEnd > at) hi = mid;
      else lo = mid + 1;
    }
    return list[lo]?.id ?? '';
  };
  const rows: { at: number; order: number; cells: string[] }[] = [];
  for (const m of balanceMovements(engine, account)) {
    if (!inside(m.at, window)) continue;
    const r = m.record;
    const invoice = r.kind === 'deposit' ? r.invoiceId : r.kind === 'refund' ? r.invoiceId : '';
    const external =
      r.kind === 'cashout'
        ? r.externalId
        : r.kind === 'deposit'
          ? ((r as DepositRecord).merchantExternalReference ?? '')
          : '';
    const row = (type: string, gross: Minor, fee: Minor) => [
      String(r.id),
      type,
      r.status,
      external,
      invoice,
      m.currency,
      formatAmount(gross),
      formatAmount(fee),
      formatAmount(gross - fee),
      instantText(r.createdAt),
      instantText(m.at),
      sweptBy(m.currency, m.at),
    ];
    if (m.fee < 0n) {
      // A credit undone gives its fee back: the fee column holds the fee charged (never negative), so
      // the return of the money and the return of the fee are two rows, whose nets sum to the movement's.
      rows.push({ at: m.at, order: 0, cells: row(m.type, m.gross, 0n) });
      rows.push({ at: m.at, order: 0, cells: row('fee', -m.fee, 0n) });
    } else {
      rows.push({ at: m.at, order: 0, cells: row(m.type, m.gross, m.fee) });
    }
  }
  for (const s of settlements) {
    if (s.account !== account || !inside(s.periodEnd, window)) continue;
    const at = instantText(s.periodEnd);
    rows.push({
      at: s.periodEnd,
      order: 1,
      cells: [
        s.id,
        'settlement',
        'SETTLED',
        s.bankReference,
        '',
        s.currency,
        formatAmount(-s.gross),
        '0.00',
        formatAmount(-s.gross),
        at,
        at,
        s.id,
      ],
    });
    rows.push({
      at: s.periodEnd,
      order: 2,
      cells: [
        `FEE-${s.id}`,
        'fee',
        'SETTLED',
        '',
        '',
        s.settlementCurrency,
        formatAmount(-s.fees),
        '0.00',
        formatAmount(-s.fees),
        at,
        at,
        s.id,
      ],
    });
  }
  rows.sort((a, b) => a.at - b.at || a.order - b.order);
  return rows.map((r) => r.cells);
}

/** Rows of the settlement report of `account` for settlements whose cut-off is in the window. */
export function settlementRows(
  settlements: readonly SettlementRecord[],
  account: string,
  window: Window,
): string[][] {
  return settlements
    .filter((s) => s.account === account && inside(s.periodEnd, window))
    .map((s) => [
      s.id,
      s.account,
      instantText(s.periodStart),
      instantText(s.periodEnd),
      s.currency,
      formatAmount(s.gross),
      formatAmount(s.fees),
      s.settlementCurrency,
      s.rate,
      formatAmount(s.net),
      s.valueDate,
      s.bankReference,
      formatAmount(s.available - s.previouslySettled),
      formatAmount(s.available - s.previouslySettled - s.gross),
    ]);
}

export function reportCsv(header: readonly string[], rows: readonly string[][]): string {
  return csvText(header, rows);
}

/** One sheet, the same header and rows, every cell a text cell (amounts exact, dates as written). */
export async function reportXlsx(
  sheetName: string,
  header: readonly string[],
  rows: readonly string[][],
): Promise<Buffer> {
  const workbook = new ExcelJS.Workbook();
  const sheet = workbook.addWorksheet(sheetName);
  sheet.columns = header.map((h) => ({
    header: h,
    key: h,
    width: Math.max(12, h.length + 2),
    style: { numFmt: '@' },
  }));
  sheet.getRow(1).font = { bold: true };
  for (const r of rows) sheet.addRow(r);
  return Buffer.from(await workbook.xlsx.writeBuffer());
}
