/**
 * A thin layer over the exceljs streaming writer for the workbooks' tables. A table is declared once as
 * a list of columns (header, type, width, cell function of the row) and written by one loop: a bold
 * frozen header row, an autofilter, widths, totals rows with SUM formulas (summed here as rows are
 * added), and optionally the same rows as a CSV file for machines. Rows are committed as they are added,
 * so memory stays flat however many rows a sheet holds. Amounts a double cannot hold exactly are written
 * as their exact decimal text (`minorToCell`), never rounded. Every text cell of every workbook
 * (`workbookWriter`) and CSV field (`csvField`) passes the one formula guard, `inertText`.
 */
import { createWriteStream, type WriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import ExcelJS from 'exceljs';
import type { Kysely, Transaction } from 'kysely';
import { formatAmount, type Minor, minorToCell } from '../domain/money.ts';
import { excelDate } from './period.ts';

/**
 * The bold of titles, headers and totals, named in full: a font that names no face prints in
 * LibreOffice's default face (a serif), not the workbook's.
 */
export const BOLD: Partial<ExcelJS.Font> = { name: 'Calibri', family: 2, size: 11, bold: true };

/** Excel number formats of the workbooks. */
export const MONEY_FORMAT = '#,##0.00';
export const DATE_FORMAT = 'yyyy-mm-dd hh:mm:ss';
export const DAY_FORMAT = 'yyyy-mm-dd';
export const INT_FORMAT = '#,##0';

export type ColumnType = 'money' | 'date' | 'day' | 'int' | 'text';

export type CellInput = Minor | Date | number | string | null | undefined;

/** One column of a table: everything about it in one place. */
export interface ColumnSpec<R> {
  header: string;
  key: string;
  type: ColumnType;
  width?: number;
  /** Add this column's SUM to the totals row (money and int columns). */
  total?: boolean;
  /** The cell's value for a row (money as bigint minor units, dates as Date). */
  cell: (row: R) => CellInput;
  /** A text cell's link: a path under the page (`paymentPath`), written when `linkBase` is set. */
  link?: (row: R) => string | null;
  /** Long text (reasons, notes) wraps within the column's width instead of running into the next. */
  wrap?: boolean;
  /**
   * false: a column for machines and look-ups, folded away in a column group (one click shows it) and
   * so never on the printed page; the CSV always has it.
   */
  printed?: boolean;
  /**
   * 'input': a column the reader fills in (the exception workbook's decisions): written empty, tinted,
   * with a list to pick from where `choices` gives one; outside the print area (a table's input columns
   * come last) and not in the CSV. 'key': what an upload reads back to know the row: hidden outside the
   * folded group, never printed, not in the CSV.
   */
  role?: 'input' | 'key';
  /** An input cell's list (a data validation), or null for none. */
  choices?: (row: R) => readonly string[] | null;
}

/** Totals per currency ('' without a currency column) and column key: bigint for money, number for int. */
export type TableTotals = Map<string, Record<string, Minor | number>>;

function columnLetter(index: number): string {
  let n = index + 1;
  let s = '';
  while (n > 0) {
    const r = (n - 1) % 26;
    s = String.fromCharCode(65 + r) + s;
    n = Math.floor((n - 1) / 26);
  }
  return s;
}

function defaultWidth(col: ColumnSpec<never>): number {
  switch (col.type) {
    case 'money':
      return 15;
    case 'date':
      return 19;
    case 'day':
      return 12;
    case 'int':
      return 10;
    case 'text':
      return Math.max(12, col.header.length + 2);
  }
}

/** Numbers, amounts and dates stand right in their cells, and so does their header. */
function alignsRight(type: ColumnType): boolean {
  return type !== 'text';
}

/** How many lines `text` takes wrapped at word breaks in a column `width` characters wide. */
export function wrappedLines(text: string, width: number): number {
  let lines = 1;
  let used = 0;
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (used > 0 && used + 1 + word.length > width - 1) {
      lines++;
      used = word.length;
    } else used += (used > 0 ? 1 : 0) + word.length;
  }
  return lines;
}

/** The same alignment object for every wrapping column, so the style memo keys it without JSON. */
const WRAP: Partial<ExcelJS.Alignment> = { wrapText: true };

function formatOf(type: ColumnType): string | undefined {
  switch (type) {
    case 'money':
      return MONEY_FORMAT;
    case 'date':
      return DATE_FORMAT;
    case 'day':
      return DAY_FORMAT;
    case 'int':
      return INT_FORMAT;
    case 'text':
      return undefined;
  }
}

const STRICT_NUMBER = /^-?\d+(\.\d+)?$/;

/**
 * The one guard against spreadsheet formula injection, for every text cell of every CSV and workbook.
 * Text starting with a character a spreadsheet reads as the start of a formula (`=`, `+`, `-`, `@`, tab,
 * carriage return) gets a leading apostrophe, so it stays text when the file is opened, edited or
 * converted. The one exception is a strict decimal number (an optional minus, digits, optionally a point
 * and digits: `-12.50`): it cannot run anything and an amount must stay an amount. Anything looser
 * (`-1+cmd|' /C calc'!A0`, `-1e3`, `+5`) is not a strict number and is defused.
 */
export function inertText(text: string): string {
  const c = text.charCodeAt(0);
  // = + - @ tab CR
  if (c !== 61 && c !== 43 && c !== 45 && c !== 64 && c !== 9 && c !== 13) return text;
  return STRICT_NUMBER.test(text) ? text : `'${text}`;
}

/** Quotes a CSV field when needed (RFC 4180), after the formula guard (`inertText`). */
export function csvField(text: string): string {
  const t = inertText(text);
  return /[",\r\n]/.test(t) ? `"${t.replace(/"/g, '""')}"` : t;
}

/** A cell value through the formula guard: text and a link's text; anything else as it is. */
function inertValue(v: unknown): unknown {
  if (typeof v === 'string') return inertText(v);
  if (v !== null && typeof v === 'object' && 'hyperlink' in v && 'text' in v) {
    const link = v as ExcelJS.CellHyperlinkValue;
    return { ...link, text: inertText(link.text) };
  }
  return v;
}

/**
 * Passes every value of a row about to be written to a worksheet (an array, or an object by column key)
 * through `inertValue`, in place. Formulas are left alone: they are built here, never taken from data.
 */
function inertRow(values: unknown): void {
  if (Array.isArray(values)) {
    for (let i = 0; i < values.length; i++) values[i] = inertValue(values[i]);
  } else if (values !== null && typeof values === 'object' && !(values instanceof Date)) {
    const row = values as Record<string, unknown>;
    for (const key of Object.keys(row)) row[key] = inertValue(row[key]);
  }
}

/**
 * Waits until the zip behind a streaming worksheet has taken what was written so far. exceljs writes
 * committed rows into the zip entry without backpressure, so a producer faster than the compressor
 * would pile rows up in memory; awaiting this between batches keeps memory flat.
 */
export async function drainWorksheet(sheet: ExcelJS.Worksheet): Promise<void> {
  const stream = (sheet as unknown as { stream?: { pipes?: unknown[] } }).stream;
  for (const pipe of stream?.pipes ?? []) {
    // archiver's entry streams come from readable-stream: read its writable state directly.
    const w = pipe as {
      _writableState?: { length: number; highWaterMark: number };
      once(event: string, listener: () => void): void;
    };
    const state = w._writableState;
    if (state && state.length > state.highWaterMark)
      await new Promise<void>((resolve) => w.once('drain', resolve));
  }
}

/** The part of exceljs' style registry a workbook writer uses for every cell and row it writes. */
interface StyleRegistry {
  addStyleModel(model: Partial<ExcelJS.Style> | undefined, cellType?: number): number;
}

/**
 * A streaming workbook writer (styles kept, no shared strings) whose style look-up is memoized. exceljs
 * gives every cell a style object of its own (the row's merged with the column's), so its own cache (by
 * object) never hits, and it renders each cell's style to XML to find its id: most of a big sheet's
 * time. Styles that are equal as JSON have the same id (exceljs finds the same XML), so the id is kept
 * per JSON text and cell type and exceljs renders each distinct style once.
 */
export function workbookWriter(filename: string): ExcelJS.stream.xlsx.WorkbookWriter {
  const wb = new ExcelJS.stream.xlsx.WorkbookWriter({ filename, useStyles: true, useSharedStrings: false });
  // Every row of every sheet goes through the formula guard, whichever writer adds it.
  const addWorksheet = wb.addWorksheet.bind(wb);
  wb.addWorksheet = (name, options) => {
    const sheet = addWorksheet(name, options);
    const addRow = sheet.addRow.bind(sheet);
    sheet.addRow = (values, style) => {
      inertRow(values);
      return addRow(values, style);
    };
    return sheet;
  };
  const styles = (wb as unknown as { styles: StyleRegistry }).styles;
  const lookUp = styles.addStyleModel.bind(styles);
  const ids = new Map<string, number>();
  styles.addStyleModel = (model, cellType) => {
    if (!model) return lookUp(model, cellType);
    // Most cells' style is their column's: a number format, or the shared wrapping alignment. A key
    // without JSON for those.
    let format: string | undefined = '';
    for (const k in model) {
      if (k === 'numFmt') format = `${format}|${model.numFmt}`;
      else if (k !== 'alignment' || model.alignment !== WRAP) {
        format = undefined;
        break;
      } else format = `${format}|wrap`;
    }
    const key =
      format === undefined ? `${cellType ?? ''}${JSON.stringify(model)}` : `${cellType ?? ''}${format}`;
    let id = ids.get(key);
    if (id === undefined) {
      id = lookUp(model, cellType);
      ids.set(key, id);
    }
    return id;
  };
  return wb;
}

/** What a printed page's footer says: the report and its period. */
export interface PrintSetup {
  /** The report, e.g. `Settlement workbook · acme`. */
  report: string;
  /** The period, e.g. `2026-11-01 to 2026-11-24`. */
  period: string;
}

/** Text for a header or footer section: `&` starts a code there, so a literal one is doubled. */
function footerText(text: string): string {
  return text.replace(/&/g, '&&');
}

/**
 * What a printed page of a sheet carries: A4 in `orientation`; `fit: 'page'` puts the whole sheet on
 * one page, `fit: 'width'` every printed column on one page wide and the rows on as many pages down as
 * they need. `minScale` (percent) is the smallest scale the sheet may print at: its printed columns'
 * widths must fit the page at that scale (`fitScale`), and the print test reads the scale back from
 * the PDF's text size.
 */
export interface PrintRule {
  orientation: 'portrait' | 'landscape';
  fit: 'page' | 'width';
  minScale: number;
}

/** The page margins, in inches (the footer sits in the bottom one). */
const MARGINS = { left: 0.4, right: 0.4, top: 0.5, bottom: 0.6, header: 0.2, footer: 0.25 };
/** A4 in points. */
const A4 = { short: 595.28, long: 841.89 };

/** The printable width of an A4 page, in points, between the side margins. */
export function printableWidth(orientation: PrintRule['orientation']): number {
  const page = orientation === 'portrait' ? A4.short : A4.long;
  return page - (MARGINS.left + MARGINS.right) * 72;
}

/**
 * The width of columns on paper at 100 %, in points: a column `w` characters wide is 7w + 5 pixels of
 * the default 11-point font at 96 dpi, as Excel draws it.
 */
export function columnsWidth(widths: readonly number[]): number {
  return widths.reduce((sum, w) => sum + (7 * w + 5) * 0.75, 0);
}

/** The scale (percent, at most 100) at which columns of these widths fill the rule's page width. */
export function fitScale(widths: readonly number[], rule: PrintRule): number {
  return Math.min(100, Math.floor((printableWidth(rule.orientation) / columnsWidth(widths)) * 100));
}

/**
 * The page setup of a sheet: its rule, the rows up to `headerRows` repeated on each page, and a footer
 * with the report, the period and `page n of m`. Passed to `addWorksheet` (exceljs derives `fitToPage`
 * from these options).
 */
export function printOptions(
  print: PrintSetup,
  headerRows: number,
  rule: PrintRule,
): Partial<ExcelJS.AddWorksheetOptions> {
  return {
    pageSetup: {
      orientation: rule.orientation,
      paperSize: 9,
      fitToPage: true,
      fitToWidth: 1,
      fitToHeight: rule.fit === 'page' ? 1 : 0,
      printTitlesRow: `1:${Math.max(1, headerRows)}`,
      margins: MARGINS,
    },
    headerFooter: {
      differentFirst: false,
      differentOddEven: false,
      oddFooter: `&L${footerText(print.report)}&C${footerText(print.period)}&Rpage &P of &N`,
    },
  };
}

/** The widths of the columns a table prints (those not folded away). */
export function printedWidths(columns: readonly ColumnSpec<never>[]): number[] {
  return columns
    .filter((c) => c.printed !== false && c.role === undefined)
    .map((c) => c.width ?? defaultWidth(c));
}

/** The tint of the cells a reader fills in. */
const INPUT_FILL: ExcelJS.Fill = { type: 'pattern', pattern: 'solid', fgColor: { argb: 'FFFFF6D5' } };

/**
 * Currencies in the one fixed order every sheet uses (alphabetical ISO code; a row without a currency,
 * '' , first).
 */
export function byCurrency(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** A table of many columns: landscape, one page wide, never below 70 %. */
export const WIDE_TABLE: PrintRule = { orientation: 'landscape', fit: 'width', minScale: 70 };

/** Rows per worksheet before a table continues on `Name (2)`: Excel's limit is 1,048,576. */
export const MAX_SHEET_ROWS = 1_048_000;

export interface TableOptions {
  timeZone: string;
  /** Also write the rows to this CSV file (amounts as exact decimal text, dates as ISO 8601 UTC). */
  csvPath?: string | null;
  /** Lines above the header row (title, period). */
  preamble?: readonly string[];
  /** Key of the currency column: totals are written per currency with SUMIF. */
  currencyKey?: string;
  /** Footer text of the printed pages (see `printOptions`). */
  print: PrintSetup;
  /** What a printed page carries; default `WIDE_TABLE`. */
  rule?: PrintRule;
  /** The page's public base URL: columns with `link` become hyperlinks to it; null or absent: none. */
  linkBase?: string | null;
  maxRowsPerSheet?: number;
}

interface Part {
  sheet: ExcelJS.Worksheet;
  name: string;
  rows: number;
}

/**
 * Streams one table into a worksheet (continuing on further sheets past Excel's row limit) and,
 * when asked, into a CSV file with the same columns.
 */
export class TableSheet<R> {
  rowCount = 0;
  private readonly parts: Part[] = [];
  private readonly headerRow: number;
  private readonly csv: WriteStream | null;
  private csvBuffer: string[] = [];
  private readonly maxRows: number;
  private readonly linkBase: string | null;
  private readonly currencyCol: number;
  private readonly sums: TableTotals = new Map();
  /** Money columns holding at least one amount written as text (their totals cannot be a SUM). */
  private readonly textMoney = new Set<number>();
  /** The columns the CSV carries (input and key columns are the workbook's alone). */
  private readonly csvColumns: number[];

  constructor(
    private readonly workbook: ExcelJS.stream.xlsx.WorkbookWriter,
    readonly name: string,
    readonly columns: readonly ColumnSpec<R>[],
    private readonly options: TableOptions,
  ) {
    this.currencyCol = options.currencyKey ? columns.findIndex((c) => c.key === options.currencyKey) : -1;
    this.headerRow = (options.preamble?.length ?? 0) + 1;
    this.maxRows = options.maxRowsPerSheet ?? MAX_SHEET_ROWS;
    this.linkBase = options.linkBase ? options.linkBase.replace(/\/+$/, '') : null;
    this.csvColumns = columns.flatMap((c, i) => (c.role === undefined ? [i] : []));
    this.openPart(name);
    this.csv = options.csvPath ? createWriteStream(options.csvPath) : null;
    if (this.csv) this.csvBuffer.push(this.csvColumns.map((i) => csvField(columns[i]!.header)).join(','));
  }

  private get part(): Part {
    return this.parts[this.parts.length - 1]!;
  }

  private openPart(name: string): void {
    const folded = this.columns.some((c) => c.printed === false);
    const print = printOptions(this.options.print, this.headerRow, this.options.rule ?? WIDE_TABLE);
    // Input columns come last and stay off the paper: the print area ends before the first.
    const firstInput = this.columns.findIndex((c) => c.role === 'input');
    if (firstInput > 0) {
      // exceljs writes `$` + each end: `A$1:AG$1048576` becomes `$A$1:$AG$1048576`, an area LibreOffice
      // honours (it ignores `$A1:$AG1048576`).
      print.pageSetup = { ...print.pageSetup, printArea: `A$1:${columnLetter(firstInput - 1)}$1048576` };
    }
    const sheet = this.workbook.addWorksheet(name, {
      views: [{ state: 'frozen', ySplit: this.headerRow, xSplit: 0 }],
      ...print,
      ...(folded ? { properties: { outlineLevelCol: 1 } } : {}),
    });
    sheet.columns = this.columns.map((c) => {
      const numFmt = formatOf(c.type);
      return {
        key: c.key,
        width: c.width ?? defaultWidth(c),
        ...(numFmt ? { style: { numFmt } } : c.wrap ? { style: { alignment: WRAP } } : {}),
        ...(c.role === 'key'
          ? { hidden: true }
          : c.printed === false
            ? { hidden: true, outlineLevel: 1 }
            : {}),
      };
    });
    for (const line of this.options.preamble ?? []) {
      const row = sheet.addRow([line]);
      row.font = BOLD;
      // A title runs across the sheet, whatever its first column wraps.
      row.getCell(1).alignment = { wrapText: false };
      row.commit();
    }
    const header = sheet.addRow(this.columns.map((c) => c.header));
    header.font = BOLD;
    header.fill = { type: 'pattern', pattern: 'solid', fgColor: { argb: 'FFE8ECF2' } };
    // Headers wrap onto as many lines as the narrowest column needs, and stand over their figures.
    header.height =
      15 * Math.max(...this.columns.map((c) => wrappedLines(c.header, c.width ?? defaultWidth(c))));
    this.columns.forEach((c, i) => {
      header.getCell(i + 1).alignment = {
        wrapText: true,
        vertical: 'bottom',
        horizontal: alignsRight(c.type) ? 'right' : 'left',
      };
    });
    header.commit();
    // exceljs' WorksheetWriter writes `autoFilter` when the sheet is committed.
    (sheet as unknown as { autoFilter: string }).autoFilter =
      `A${this.headerRow}:${columnLetter(this.columns.length - 1)}${this.headerRow}`;
    this.parts.push({ sheet, name, rows: 0 });
  }

  /** Adds one data row: each column's cell function gives its value; total columns are summed. */
  add(row: R): void {
    if (this.part.rows >= this.maxRows) {
      this.part.sheet.commit();
      this.openPart(`${this.name} (${this.parts.length + 1})`);
    }
    const n = this.columns.length;
    const cells: (number | Date | string | ExcelJS.CellHyperlinkValue | null)[] = new Array(n);
    const csv: string[] | null = this.csv ? new Array(n) : null;
    const currency = this.currencyCol >= 0 ? String(this.columns[this.currencyCol]!.cell(row) ?? '') : '';
    let sums = this.sums.get(currency);
    if (!sums) {
      sums = {};
      this.sums.set(currency, sums);
    }
    let textCells: number[] | null = null;
    let inputCells: number[] | null = null;
    for (let i = 0; i < n; i++) {
      const column = this.columns[i]!;
      if (column.role === 'input') {
        // Written empty for the reader to fill in; its list is set on the cell below.
        cells[i] = null;
        if (csv) csv[i] = '';
        inputCells ??= [];
        inputCells.push(i);
        continue;
      }
      const v = column.cell(row);
      if (v === null || v === undefined || v === '') {
        cells[i] = null;
        if (csv) csv[i] = '';
        continue;
      }
      switch (column.type) {
        case 'money': {
          const minor = typeof v === 'bigint' ? v : BigInt(v as number);
          const cell = minorToCell(minor);
          cells[i] = cell;
          if (typeof cell === 'string') {
            this.textMoney.add(i);
            textCells ??= [];
            textCells.push(i);
          }
          if (csv) csv[i] = formatAmount(minor);
          if (column.total) sums[column.key] = ((sums[column.key] as Minor | undefined) ?? 0n) + minor;
          break;
        }
        case 'date':
        case 'day': {
          const d = v as Date;
          cells[i] = excelDate(d, this.options.timeZone);
          if (csv) csv[i] = d.toISOString();
          break;
        }
        case 'int':
          cells[i] = Number(v);
          if (csv) csv[i] = String(v);
          if (column.total) sums[column.key] = ((sums[column.key] as number | undefined) ?? 0) + Number(v);
          break;
        case 'text': {
          const path = this.linkBase && column.link ? column.link(row) : null;
          cells[i] = path ? { text: String(v), hyperlink: `${this.linkBase}${path}` } : String(v);
          if (csv) csv[i] = csvField(String(v));
          break;
        }
      }
    }
    const added = this.part.sheet.addRow(cells);
    for (const i of textCells ?? []) added.getCell(i + 1).alignment = { horizontal: 'right' };
    for (const i of inputCells ?? []) {
      const cell = added.getCell(i + 1);
      cell.fill = INPUT_FILL;
      const choices = this.columns[i]!.choices?.(row);
      if (choices && choices.length > 0) {
        cell.dataValidation = {
          type: 'list',
          allowBlank: true,
          formulae: [`"${choices.join(',')}"`],
          showErrorMessage: true,
          errorStyle: 'stop',
          errorTitle: this.columns[i]!.header,
          error: `One of: ${choices.join(', ')}, or empty.`,
        };
      }
    }
    added.commit();
    this.part.rows++;
    this.rowCount++;
    if (csv) {
      this.csvBuffer.push(this.csvColumns.map((i) => csv[i]).join(','));
      if (this.csvBuffer.length >= 2000) this.flushCsv();
    }
  }

  private flushCsv(): void {
    if (!this.csv || this.csvBuffer.length === 0) return;
    this.csv.write(`${this.csvBuffer.join('\r\n')}\r\n`);
    this.csvBuffer = [];
  }

  /** Waits for the zip and the CSV stream to take what was written (call between batches). */
  async drain(): Promise<void> {
    await drainWorksheet(this.part.sheet);
    this.flushCsv();
    const csv = this.csv;
    if (csv?.writableNeedDrain) await new Promise<void>((resolve) => csv.once('drain', () => resolve()));
  }

  private rangeOf(part: Part, col: number): string {
    const letter = columnLetter(col);
    const sheetRef = `'${part.name.replace(/'/g, "''")}'!`;
    return `${sheetRef}$${letter}$${this.headerRow + 1}:$${letter}$${this.headerRow + Math.max(part.rows, 1)}`;
  }

  /** The sums of the total columns so far, per currency (in the fixed currency order). */
  totals(): TableTotals {
    return new Map([...this.sums].sort(([a], [b]) => byCurrency(a, b)));
  }

  /**
   * Writes the totals rows and commits the sheet: one row per currency (SUMIF over the currency
   * column) when `currencyKey` is set, else one row of SUMs, for tables with total columns. Each
   * formula carries its computed result, so the file reads correctly without recalculation; a money
   * total whose column holds amounts written as text (or that is too large itself) is written as exact
   * text, without a formula. `currencies` adds (empty) totals rows for currencies without rows.
   */
  async finish(options: { currencies?: Iterable<string> } = {}): Promise<void> {
    if (this.columns.some((c) => c.total)) {
      const found = new Map(this.sums);
      for (const c of options.currencies ?? []) if (!found.has(c)) found.set(c, {});
      const totals = [...found].sort(([a], [b]) => byCurrency(a, b));
      const currencyCol = this.currencyCol;
      for (const [currency, values] of totals) {
        const cells = this.columns.map((c, i) => {
          if (i === 0) return currencyCol >= 0 ? `Total ${currency}` : 'Total';
          if (i === currencyCol) return currency;
          const result = values[c.key];
          if (!c.total || result === undefined) return null;
          const value = typeof result === 'bigint' ? minorToCell(result) : result;
          if (typeof value === 'string' || this.textMoney.has(i)) {
            return typeof result === 'bigint' ? formatAmount(result) : value;
          }
          if (this.rowCount === 0) return value;
          const formula = this.parts
            .map((p) =>
              currencyCol >= 0
                ? `SUMIF(${this.rangeOf(p, currencyCol)},"${currency.replace(/"/g, '""')}",${this.rangeOf(p, i)})`
                : `SUM(${this.rangeOf(p, i)})`,
            )
            .join('+');
          return { formula, result: value };
        });
        const row = this.part.sheet.addRow(cells);
        row.font = BOLD;
        row.commit();
      }
    }
    this.part.sheet.commit();
    this.flushCsv();
    const csv = this.csv;
    if (csv) {
      await new Promise<void>((resolve, reject) => {
        csv.once('error', reject);
        csv.end(() => resolve());
      });
    }
  }
}

/**
 * Creates the workbook's folder and the CSV folder, and answers where each detail sheet's CSV goes
 * (null when no CSV is wanted).
 */
export async function prepareOutputs(options: {
  out: string;
  csvDir?: string | null | undefined;
  csvPrefix?: string | undefined;
}): Promise<(sheet: string) => string | null> {
  await mkdir(dirname(options.out), { recursive: true });
  const csvDir = options.csvDir;
  if (csvDir) await mkdir(csvDir, { recursive: true });
  const prefix = options.csvPrefix ? `${options.csvPrefix}-` : '';
  return (sheet) => (csvDir ? join(csvDir, `${prefix}${sheet}.csv`) : null);
}

/**
 * Runs `fn` in one read-only REPEATABLE READ transaction: every sheet of a workbook reads the same
 * snapshot of the ledger, so its totals agree with each other whatever is booked meanwhile.
 */
export function inSnapshot<DB, T>(db: Kysely<DB>, fn: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
  return db.transaction().setIsolationLevel('repeatable read').setAccessMode('read only').execute(fn);
}
