/**
 * A CSV or XLSX file as a header and rows of cells, before any profile gives the cells a meaning. Cells
 * are text exactly as written: an XLSX text cell is taken as is; a number cell only when the shortest
 * decimal of its double has at most 15 significant digits, where that decimal is the one that was typed
 * (a longer one is not exact and is refused: such amounts must be text cells); a date cell stays a date
 * for the profile's date and instant fields.
 */
import { parse } from 'csv-parse/sync';
import ExcelJS from 'exceljs';
import { accepted, type ImportResult, quote, refused, utf8Text } from './refusal.ts';

export type Cell = string | Date;

export interface TableRow {
  /** The row's number in the file as a spreadsheet shows it: the header is row 1. */
  number: number;
  cells: readonly Cell[];
}

export interface Table {
  format: 'csv' | 'xlsx';
  header: readonly string[];
  rows: readonly TableRow[];
}

export interface TableOptions {
  delimiter?: string;
  quote?: string;
  /** The XLSX sheet by name; the first sheet when absent. */
  sheet?: string | undefined;
}

/** An XLSX file is a zip archive: it starts with a local file header. */
export function isZip(content: string | Uint8Array): boolean {
  return (
    typeof content !== 'string' &&
    content[0] === 0x50 &&
    content[1] === 0x4b &&
    content[2] === 0x03 &&
    content[3] === 0x04
  );
}

/** Reads a CSV or an XLSX file (told apart by its first bytes) into a table. */
export async function readTable(
  file: string,
  content: string | Uint8Array,
  options: TableOptions = {},
): Promise<ImportResult<Table>> {
  return isZip(content) ? readXlsx(file, content as Uint8Array, options) : readCsv(file, content, options);
}

function readCsv(file: string, content: string | Uint8Array, options: TableOptions): ImportResult<Table> {
  const decoded = utf8Text(file, content);
  if (!decoded.ok) return decoded;
  const text = decoded.value;
  let records: { record: string[]; info: { lines: number } }[];
  try {
    records = parse(text, {
      bom: true,
      delimiter: options.delimiter ?? ',',
      quote: options.quote ?? '"',
      info: true,
      skip_empty_lines: true,
    }) as unknown as { record: string[]; info: { lines: number } }[];
  } catch (err) {
    return refused(file, null, `does not parse as CSV: ${(err as Error).message}`);
  }
  const [head, ...body] = records;
  if (head === undefined) return refused(file, null, 'is empty: no header row');
  return accepted({
    format: 'csv',
    header: head.record.map((h) => h.trim()),
    rows: body.map(({ record, info }) => ({ number: info.lines, cells: record })),
  });
}

async function readXlsx(
  file: string,
  content: Uint8Array,
  options: TableOptions,
): Promise<ImportResult<Table>> {
  const workbook = new ExcelJS.Workbook();
  try {
    await workbook.xlsx.load(
      Buffer.from(content.buffer, content.byteOffset, content.byteLength) as unknown as ExcelJS.Buffer,
    );
  } catch (err) {
    return refused(file, null, `does not parse as XLSX: ${(err as Error).message}`);
  }
  const sheet = options.sheet === undefined ? workbook.worksheets[0] : workbook.getWorksheet(options.sheet);
  if (sheet === undefined) {
    return refused(
      file,
      null,
      options.sheet === undefined ? 'has no sheet' : `has no sheet named ${quote(options.sheet)}`,
    );
  }
  let header: string[] | null = null;
  const rows: TableRow[] = [];
  let problem: { where: string; rule: string } | null = null;
  sheet.eachRow({ includeEmpty: false }, (row, rowNumber) => {
    if (problem !== null) return;
    const width = header === null ? row.cellCount : header.length;
    const cells: Cell[] = [];
    for (let i = 1; i <= Math.max(width, row.cellCount); i += 1) {
      const cell = cellText(row.getCell(i).value);
      if (typeof cell === 'object' && 'problem' in cell) {
        const name = header?.[i - 1] ?? `column ${i}`;
        problem = { where: `row ${rowNumber}`, rule: `${quote(name)} ${cell.problem}` };
        return;
      }
      cells.push(cell);
    }
    if (header === null) {
      header = cells.map((c) => (typeof c === 'string' ? c.trim() : c.toISOString()));
      while (header.length > 0 && header[header.length - 1] === '') header.pop();
    } else {
      rows.push({ number: rowNumber, cells });
    }
  });
  if (problem !== null) {
    const { where, rule } = problem as { where: string; rule: string };
    return refused(file, where, rule);
  }
  if (header === null) return refused(file, null, 'is empty: no header row');
  return accepted({ format: 'xlsx', header, rows });
}

/** Most significant digits a double gives back exactly as the decimal that was typed. */
const EXACT_DIGITS = 15;

function cellText(value: ExcelJS.CellValue): Cell | { problem: string } {
  if (value === null || value === undefined) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (value instanceof Date) return value;
  if (typeof value === 'number') {
    const text = String(value);
    const significant = text.replace(/^-/, '').replace('.', '').replace(/^0+/, '');
    if (!Number.isFinite(value) || /e/i.test(text) || significant.length > EXACT_DIGITS) {
      return {
        problem: `holds the number ${text}, which a spreadsheet number does not keep exactly: write it as text`,
      };
    }
    return text;
  }
  if ('richText' in value) return value.richText.map((part) => part.text).join('');
  if ('error' in value) return { problem: `holds the error ${value.error}` };
  if ('formula' in value || 'sharedFormula' in value) {
    const result = (value as { result?: ExcelJS.CellValue }).result;
    if (result === undefined) return { problem: 'holds a formula without a computed value' };
    return cellText(result);
  }
  if ('hyperlink' in value) return value.text;
  return { problem: 'holds a value of an unknown kind' };
}
