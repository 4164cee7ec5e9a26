/**
 * Workbooks that print: both workbooks are generated from the report scenario and read back with the
 * exceljs reader and, when python3-openpyxl is installed, with openpyxl (skipped with an install hint
 * otherwise; required under PAYRECON_REQUIRE_TOOLS=1). Every sheet prints by its declared rule
 * (orientation, one page or one page wide), repeats its header rows and has a footer with the report,
 * the period and "page n of m"; every table's printed columns fit its page at the rule's minimum scale,
 * columns for look-ups are folded away, number headers stand right and long texts wrap; every summary
 * label fits its column and the title lines fit the sheet's width; "times seen" has no total; the
 * title's instant is for people; currencies come in one fixed order.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ExcelJS from 'exceljs';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localDate } from '../../src/domain/zoned-time.ts';
import {
  DETAIL_COLUMNS,
  EXCEPTION_DETAIL_PRINT,
  LATE_COLUMNS,
  LATE_PRINT,
  writeExceptionWorkbook,
} from '../../src/reports/exception-workbook.ts';
import type { Period } from '../../src/reports/period.ts';
import {
  BOOK_COLUMNS,
  BOOK_PRINT,
  DEPOSIT_COLUMNS,
  ENTITY_PRINT,
  JOURNAL_COLUMNS,
  JOURNAL_PRINT,
  PAYOUT_COLUMNS,
  SETTLEMENT_COLUMNS,
  SETTLEMENTS_PRINT,
  TITLE_SCALE,
  writeSettlementWorkbook,
} from '../../src/reports/settlement-workbook.ts';
import { type ColumnSpec, fitScale, type PrintRule, printedWidths } from '../../src/reports/sheet-writer.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { exceptionRule, settlementRule } from './print-rules.ts';
import { seedBefore, seedPeriod } from './scenario.ts';

const PYTHON = process.env.PYTHON ?? (existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3');
const hasOpenpyxl = spawnSync(PYTHON, ['-c', 'import openpyxl'], { encoding: 'utf8' }).status === 0;
const required = process.env.PAYRECON_REQUIRE_TOOLS === '1';
const HINT = 'install it with: sudo apt-get install python3-openpyxl';
if (!hasOpenpyxl && !required)
  console.warn(`openpyxl print check skipped: python3-openpyxl missing (${HINT})`);

const TZ = 'America/Sao_Paulo';
let t: TestDatabase;
let dir: string;
let period: Period;
const settlementFile = () => join(dir, 'settlement.xlsx');
const exceptionFile = () => join(dir, 'exceptions.xlsx');

async function dbNow(): Promise<Date> {
  const { rows } = await sql<{ now: Date }>`SELECT clock_timestamp() AS now`.execute(t.db);
  return rows[0]!.now;
}

async function read(path: string): Promise<ExcelJS.Workbook> {
  const wb = new ExcelJS.Workbook();
  await wb.xlsx.readFile(path);
  return wb;
}

/** The row number of the header (the first bold row whose second cell is set, after the title lines). */
function headerRowOf(ws: ExcelJS.Worksheet): number {
  const views = ws.views as { ySplit?: number }[];
  return views[0]?.ySplit ?? 1;
}

function expectPrintSetup(ws: ExcelJS.Worksheet, report: RegExp, rule: PrintRule): void {
  const p = ws.pageSetup;
  expect(p.orientation, ws.name).toBe(rule.orientation);
  expect(p.fitToPage, ws.name).toBe(true);
  expect(p.fitToWidth, ws.name).toBe(1);
  // One page: one page tall too; one page wide: as many pages down as the rows need.
  expect(p.fitToHeight, ws.name).toBe(rule.fit === 'page' ? 1 : 0);
  // The rows down to the header repeat on every printed page.
  expect(p.printTitlesRow, ws.name).toBe(`1:${headerRowOf(ws)}`);
  const footer = ws.headerFooter.oddFooter ?? '';
  expect(footer, ws.name).toMatch(report);
  expect(footer, ws.name).toContain(`&C${period.from} to ${period.to}`);
  expect(footer, ws.name).toContain('&Rpage &P of &N');
}

beforeAll(async () => {
  t = await createTestDatabase();
  dir = await mkdtemp(join(tmpdir(), 'payrecon-print-'));
  await seedBefore(t.db);
  const start = await dbNow();
  await seedPeriod(t.db);
  const end = await dbNow();
  const today = localDate(end, TZ);
  period = { from: today, to: today, start, end, timeZone: TZ, cutoff: '00:00' };
  await writeSettlementWorkbook(t.db, { period, account: null, out: settlementFile() });
  await writeExceptionWorkbook(t.db, {
    period: { ...period, start: new Date(period.start.getTime() - 86_400_000) },
    account: null,
    out: exceptionFile(),
    now: new Date(),
  });
});

afterAll(async () => {
  await t?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('settlement workbook print setup', () => {
  it('every sheet prints by its rule, header rows repeated, with the footer', async () => {
    const wb = await read(settlementFile());
    expect(wb.worksheets.length).toBeGreaterThan(5);
    for (const ws of wb.worksheets)
      expectPrintSetup(ws, /^&LSettlement · all accounts&C/, settlementRule(ws.name));
    // Summaries are portrait statements; entity sheets landscape; journals portrait.
    expect(wb.getWorksheet('Summary BRL')!.pageSetup.orientation).toBe('portrait');
    expect(wb.getWorksheet('Deposits')!.pageSetup.orientation).toBe('landscape');
    expect(wb.getWorksheet('Journal')!.pageSetup.orientation).toBe('portrait');
  });

  it("every table's printed columns fit its page at the rule's minimum scale", () => {
    const tables: [string, readonly ColumnSpec<never>[], PrintRule][] = [
      ['Deposits', DEPOSIT_COLUMNS, ENTITY_PRINT],
      ['Cashouts', PAYOUT_COLUMNS('cashout'), ENTITY_PRINT],
      ['Refunds', PAYOUT_COLUMNS('refund'), ENTITY_PRINT],
      ['Journal', JOURNAL_COLUMNS, JOURNAL_PRINT],
      ['Settlements', SETTLEMENT_COLUMNS, SETTLEMENTS_PRINT],
      ['Test book', BOOK_COLUMNS, BOOK_PRINT],
      ['Exceptions', DETAIL_COLUMNS(new Date()), EXCEPTION_DETAIL_PRINT],
      ['Late rejections', LATE_COLUMNS, LATE_PRINT],
    ];
    for (const [name, columns, rule] of tables) {
      expect(fitScale(printedWidths(columns), rule), name).toBeGreaterThanOrEqual(rule.minScale);
      expect(rule.minScale, name).toBeGreaterThanOrEqual(70);
    }
    // Folding columns away is what makes the wide tables fit: all of them would not.
    const all = DETAIL_COLUMNS(new Date()).map((c) => c.width ?? 15);
    expect(fitScale(all, EXCEPTION_DETAIL_PRINT)).toBeLessThan(70);
  });

  it('folds look-up columns away, puts number headers over their figures and wraps long texts', async () => {
    const wb = await read(settlementFile());
    const deposits = wb.getWorksheet('Deposits')!;
    const header = deposits.getRow(2);
    const col = (name: string) => (header.values as unknown[]).indexOf(name);
    // Folded: hidden in a column group, one click shows it; the sheet has the outline.
    const firstSeen = deposits.getColumn(col('First seen'));
    expect(firstSeen.hidden).toBe(true);
    expect(firstSeen.outlineLevel).toBe(1);
    expect(deposits.getColumn(col('Status since')).hidden).toBe(false);
    for (const name of ['Gross', 'Fee', 'Credited in period', 'Net to available', 'Status since']) {
      expect(header.getCell(col(name)).alignment?.horizontal, name).toBe('right');
    }
    for (const name of ['Account', 'Deposit id', 'Status']) {
      expect(header.getCell(col(name)).alignment?.horizontal, name).toBe('left');
    }
    // The header is tall enough for its wrapped lines ("Credited in period" takes two).
    expect(header.height).toBeGreaterThanOrEqual(30);
    const cashouts = wb.getWorksheet('Cashouts')!;
    const cHeader = (cashouts.getRow(2).values as unknown[]).map(String);
    const rejection = cHeader.indexOf('Rejection');
    const rejected = [...Array(cashouts.rowCount).keys()]
      .map((i) => cashouts.getRow(i + 1).getCell(rejection))
      .find((c) => String(c.value ?? '').startsWith('R03'));
    expect(rejected?.alignment?.wrapText).toBe(true);
    for (const name of ['Available movement', 'Reserved movement', 'First seen']) {
      expect(cashouts.getColumn(cHeader.indexOf(name)).hidden, name).toBe(true);
    }
    // The summary's figure headers stand over the figures.
    const summary = wb.getWorksheet('Summary BRL')!.getRow(4);
    expect(summary.getCell(2).alignment?.horizontal).toBe('right');
    expect(summary.getCell(3).alignment?.horizontal).toBe('right');
  });

  it('every summary label fits its column, and the title lines fit the sheet', async () => {
    const wb = await read(settlementFile());
    const summaries = wb.worksheets.filter((w) => w.name.startsWith('Summary '));
    expect(summaries.map((w) => w.name)).toEqual(['Summary BRL', 'Summary USD']);
    for (const ws of summaries) {
      const widths = [1, 2, 3].map((c) => ws.getColumn(c).width ?? 0);
      const labelWidth = widths[0]!;
      const total = widths.reduce((a, b) => a + b, 0);
      let labels = 0;
      ws.eachRow((row, n) => {
        const text = row.getCell(1).value;
        if (typeof text !== 'string') return;
        if (n === 1) expect(text.length * TITLE_SCALE, `${ws.name} title`).toBeLessThanOrEqual(total);
        else if (n === 2) expect(text.length, `${ws.name} line 2`).toBeLessThanOrEqual(total);
        else if (row.getCell(2).value !== null || text.trim().length > 0) {
          // A label with figures beside it must fit its own column; a note alone may span the sheet.
          if (row.getCell(2).value !== null) {
            expect(text.length, `${ws.name}: "${text}"`).toBeLessThan(labelWidth);
            labels++;
          } else expect(text.length, `${ws.name}: "${text}"`).toBeLessThanOrEqual(total);
        }
      });
      expect(labels).toBeGreaterThan(10);
      const proof = ws.getRow(5 + 11 + 2).getCell(1).value;
      expect(String(proof)).toMatch(/^Proof: opening \+ movements − closing \(must be 0\)$/);
      // The instants of the title are for people: day, month name, year, time; no ISO stamp.
      expect(String(ws.getRow(2).getCell(1).value)).toMatch(
        /^Booked \d{1,2} [A-Z][a-z]{2} \d{4}, \d\d:\d\d to \d{1,2} [A-Z][a-z]{2} \d{4}, \d\d:\d\d \(America\/Sao_Paulo\), cut-off 00:00$/,
      );
    }
  });

  it('writes the totals rows of a detail sheet in the fixed currency order', async () => {
    const wb = await read(settlementFile());
    const totals: string[] = [];
    wb.getWorksheet('Deposits')!.eachRow((row) => {
      const v = row.getCell(1).value;
      if (typeof v === 'string' && v.startsWith('Total ')) totals.push(v);
    });
    expect(totals).toEqual(['Total BRL', 'Total USD']);
  });
});

describe('exception workbook print setup', () => {
  it('every sheet prints by its rule, header rows repeated, with the footer', async () => {
    const wb = await read(exceptionFile());
    expect(wb.worksheets.map((w) => w.name)).toEqual(['Summary', 'Exceptions', 'Late rejections']);
    for (const ws of wb.worksheets)
      expectPrintSetup(ws, /^&LExceptions · all accounts&C/, exceptionRule(ws.name));
  });

  it('has no total of "times seen", a title instant for people, and labels that fit', async () => {
    const wb = await read(exceptionFile());
    const detail = wb.getWorksheet('Exceptions')!;
    const header = detail.getRow(2).values as unknown[];
    const seen = header.indexOf('Times seen');
    expect(seen).toBeGreaterThan(0);
    detail.eachRow((row, n) => {
      if (n <= 2) return;
      const v = row.getCell(seen).value;
      expect(typeof v === 'object' && v !== null && 'formula' in v, `row ${n}`).toBe(false);
      expect(String(row.getCell(1).value ?? '')).not.toMatch(/^Total/);
    });
    const summary = wb.getWorksheet('Summary')!;
    const asOf = String(summary.getRow(2).getCell(1).value);
    expect(asOf).toMatch(/^Open as of \d{1,2} [A-Z][a-z]{2} \d{4}, \d\d:\d\d \(America\/Sao_Paulo\)$/);
    expect(asOf).not.toMatch(/\d{4}-\d\d-\d\dT/);
    const width = summary.getColumn(1).width ?? 0;
    summary.eachRow((row, n) => {
      if (n <= 2) return;
      const text = String(row.getCell(1).value ?? '');
      expect(text.length, `"${text}"`).toBeLessThan(width);
    });
  });
});

describe.skipIf(!hasOpenpyxl && !required)('print setup read back with openpyxl', () => {
  it('agrees on orientation, fit to width, print titles and footers for every sheet', () => {
    if (!hasOpenpyxl) throw new Error(`PAYRECON_REQUIRE_TOOLS=1 but python3-openpyxl is missing (${HINT})`);
    const script = `
import json, sys, openpyxl
out = {}
for path in sys.argv[1:]:
    wb = openpyxl.load_workbook(path)
    for ws in wb.worksheets:
        out[path.rsplit("/", 1)[-1] + ":" + ws.title] = {
            "orientation": ws.page_setup.orientation,
            "fitToPage": bool(ws.sheet_properties.pageSetUpPr and ws.sheet_properties.pageSetUpPr.fitToPage),
            "fitToWidth": int(ws.page_setup.fitToWidth) if ws.page_setup.fitToWidth is not None else None,
            "fitToHeight": int(ws.page_setup.fitToHeight) if ws.page_setup.fitToHeight is not None else None,
            "titles": ws.print_title_rows,
            "left": ws.oddFooter.left.text, "center": ws.oddFooter.center.text, "right": ws.oddFooter.right.text,
        }
print(json.dumps(out))
`;
    const run = spawnSync(PYTHON, ['-c', script, settlementFile(), exceptionFile()], { encoding: 'utf8' });
    expect(run.status, run.stderr).toBe(0);
    const sheets = JSON.parse(run.stdout) as Record<string, Record<string, unknown>>;
    expect(Object.keys(sheets).length).toBeGreaterThan(8);
    for (const [name, s] of Object.entries(sheets)) {
      const [file, sheet = ''] = name.split(':');
      const rule = file === 'settlement.xlsx' ? settlementRule(sheet) : exceptionRule(sheet);
      expect(s, name).toMatchObject({
        orientation: rule.orientation,
        fitToPage: true,
        fitToWidth: 1,
        fitToHeight: rule.fit === 'page' ? 1 : 0,
        center: `${period.from} to ${period.to}`,
        right: 'page &P of &N',
      });
      expect(String(s.titles), name).toMatch(/^\$1:\$\d$/);
      expect(String(s.left), name).toMatch(/^(Settlement|Exceptions) · all accounts$/);
    }
  });
});

describe('workbook links to the payment page', () => {
  it('makes entity ids hyperlinks when a public base URL is given, and plain text otherwise', async () => {
    const out = join(dir, 'linked.xlsx');
    await writeSettlementWorkbook(t.db, {
      period,
      account: null,
      out,
      links: 'https://payrecon.example.com/',
    });
    const wb = await read(out);
    const deposits = wb.getWorksheet('Deposits')!;
    const header = deposits.getRow(2).values as unknown[];
    const idCol = header.indexOf('Deposit id');
    const accountCol = header.indexOf('Account');
    const row = deposits.getRow(3);
    const id = row.getCell(idCol);
    expect(id.hyperlink).toBe(
      `https://payrecon.example.com/payments/${row.getCell(accountCol).value}/deposit/${id.text}`,
    );
    const journal = wb.getWorksheet('Journal')!;
    const jHeader = journal.getRow(2).values as unknown[];
    const entity = journal.getRow(3).getCell(jHeader.indexOf('Entity id'));
    expect(entity.hyperlink).toMatch(
      /^https:\/\/payrecon\.example\.com\/payments\/[^/]+\/(deposit|cashout|refund)\/[^/]+$/,
    );

    const plain = await read(settlementFile());
    const plainId = plain.getWorksheet('Deposits')!.getRow(3).getCell(idCol);
    expect(plainId.hyperlink).toBeUndefined();
    expect(typeof plainId.value).toBe('string');
  });
});
