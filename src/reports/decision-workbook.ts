/**
 * Reads an exception workbook uploaded back (src/reports/exception-workbook.ts) for its decisions: the
 * Exceptions sheets (`Exceptions`, `Exceptions (2)`, ...), their Decision, Note and Key columns found by
 * header, every row whose Decision is filled. Cells are read as text and never as numbers: a Decision,
 * Note or Key cell holding a number, a date or a formula is a rule broken on its row, never converted.
 *
 * Read with exceljs' whole-workbook reader: its streaming reader (4.4) now and then misses a sheet or its
 * name, which an all-or-nothing upload cannot afford. The whole reader takes about 100 MB per MB of
 * xlsx, so a file is at most DECISION_WORKBOOK_MAX_BYTES (about 25,000 exception rows; a larger month is
 * requested per account or for fewer days) and one file is read at a time per process.
 */
import ExcelJS from 'exceljs';
import { type BulkDecisionOutcome, decideInBulk } from '../db/exceptions/bulk-decisions.ts';
import type { Db } from '../db/schema.ts';
import { AppError } from '../domain/errors.ts';
import {
  DECISION_HEADER,
  type DecisionRow,
  KEY_HEADER,
  NOTE_HEADER,
  parseExceptionKey,
  type RowProblem,
  WORKBOOK_DECISIONS,
  type WorkbookDecision,
} from '../domain/workbook-decisions.ts';

/** The largest workbook an upload may be (the page and the API refuse a larger one). */
export const DECISION_WORKBOOK_MAX_BYTES = 5 * 1024 * 1024;
/** The most decided rows one upload may carry. */
export const DECISION_ROWS_MAX = 5000;
/** The longest note (as on the page). */
const NOTE_MAX = 1000;

export interface DecisionWorkbook {
  rows: DecisionRow[];
  problems: RowProblem[];
}

/** The read in progress: one workbook at a time per process (see above). */
let reading: Promise<unknown> = Promise.resolve();

/** A cell's text, or why it is not text. */
function textOf(value: ExcelJS.CellValue): { text: string } | { not: string } {
  if (value === null || value === undefined) return { text: '' };
  if (typeof value === 'string') return { text: value };
  if (typeof value === 'number') return { not: 'a number' };
  if (typeof value === 'boolean') return { not: 'a true/false value' };
  if (value instanceof Date) return { not: 'a date' };
  if (typeof value === 'object') {
    if ('formula' in value || 'sharedFormula' in value) return { not: 'a formula' };
    if ('richText' in value) return { text: value.richText.map((r) => r.text).join('') };
    if ('error' in value) return { not: `an error (${String(value.error)})` };
    if ('text' in value && typeof value.text === 'string') return { text: value.text };
  }
  return { not: 'not text' };
}

const isExceptionsSheet = (name: string) => /^Exceptions( \(\d+\))?$/.test(name);

/**
 * The decided rows of the workbook's Exceptions sheets and the problems of rows that cannot be read.
 * Throws VALIDATION_FAILED (one line) when the file is not an xlsx, has no Exceptions sheet, or lacks a
 * column.
 */
export function readDecisionWorkbook(bytes: Uint8Array): Promise<DecisionWorkbook> {
  const turn = reading.then(() => readWorkbook(bytes));
  reading = turn.catch(() => undefined);
  return turn;
}

async function readWorkbook(bytes: Uint8Array): Promise<DecisionWorkbook> {
  if (bytes.byteLength > DECISION_WORKBOOK_MAX_BYTES) {
    throw new AppError(
      'VALIDATION_FAILED',
      `file: larger than ${DECISION_WORKBOOK_MAX_BYTES / 1024 / 1024} MiB (request the workbook for one account or fewer days)`,
    );
  }
  // An xlsx is a zip: "PK\x03\x04".
  if (bytes.byteLength < 4 || bytes[0] !== 0x50 || bytes[1] !== 0x4b) {
    throw new AppError('VALIDATION_FAILED', 'file: not an xlsx workbook (download the exception workbook)');
  }
  const rows: DecisionRow[] = [];
  const problems: RowProblem[] = [];
  const wb = new ExcelJS.Workbook();
  try {
    await wb.xlsx.load(Buffer.from(bytes) as unknown as ArrayBuffer);
  } catch (err) {
    throw new AppError('VALIDATION_FAILED', 'file: not a readable xlsx workbook', { cause: err });
  }
  const sheets = wb.worksheets.filter((w) => isExceptionsSheet(w.name));
  for (const sheet of sheets) {
    const name = sheet.name;
    let cols: { decision: number; note: number; key: number } | null = null;
    const last = sheet.rowCount;
    for (let n = 1; n <= last; n++) {
      const row = sheet.findRow(n);
      if (!row) continue;
      if (!cols) {
        const headers = new Map<string, number>();
        row.eachCell((cell, col) => {
          if (typeof cell.value === 'string' && !headers.has(cell.value)) headers.set(cell.value, col);
        });
        const decision = headers.get(DECISION_HEADER);
        const note = headers.get(NOTE_HEADER);
        const key = headers.get(KEY_HEADER);
        if (decision && note && key) cols = { decision, note, key };
        continue;
      }
      const refuse = (rule: string) => problems.push({ sheet: name, row: n, rule });
      const decisionCell = textOf(row.getCell(cols.decision).value);
      if ('not' in decisionCell) {
        refuse(`Decision: ${decisionCell.not}, not one of ${WORKBOOK_DECISIONS.join(', ')}`);
        continue;
      }
      const decision = decisionCell.text.trim();
      // A row without a decision is left as it is.
      if (decision === '') continue;
      if (rows.length + problems.length >= DECISION_ROWS_MAX) {
        throw new AppError('VALIDATION_FAILED', `file: more than ${DECISION_ROWS_MAX} rows have a decision`);
      }
      let ok = true;
      if (!(WORKBOOK_DECISIONS as readonly string[]).includes(decision)) {
        refuse(`Decision: "${decision.slice(0, 40)}" is not one of ${WORKBOOK_DECISIONS.join(', ')}`);
        ok = false;
      }
      const noteCell = textOf(row.getCell(cols.note).value);
      if ('not' in noteCell) {
        refuse(`Note: ${noteCell.not}; write the note as text`);
        ok = false;
      } else if (noteCell.text.trim().length > NOTE_MAX) {
        refuse(`Note: longer than ${NOTE_MAX} characters`);
        ok = false;
      }
      const keyCell = textOf(row.getCell(cols.key).value);
      const key = 'text' in keyCell ? parseExceptionKey(keyCell.text) : null;
      if (!key) {
        refuse('Key: missing or changed (the hidden column the workbook was downloaded with)');
        ok = false;
      }
      if (ok && key && 'text' in noteCell) {
        rows.push({
          sheet: name,
          row: n,
          id: key.id,
          version: key.version,
          decision: decision as WorkbookDecision,
          note: noteCell.text.trim(),
        });
      }
    }
    if (!cols) {
      throw new AppError(
        'VALIDATION_FAILED',
        `sheet ${name}: no ${DECISION_HEADER}, ${NOTE_HEADER} and ${KEY_HEADER} columns (download a new exception workbook)`,
      );
    }
  }
  if (sheets.length === 0) {
    throw new AppError('VALIDATION_FAILED', 'file: no Exceptions sheet (upload the exception workbook)');
  }
  return { rows, problems };
}

/**
 * An uploaded exception workbook's decisions, all applied or none (`decideInBulk`): the page's upload and
 * `POST /api/v1/exceptions/decisions` both come here. Throws `BulkDecisionRefused` (every refused row)
 * or VALIDATION_FAILED (the file).
 */
export async function decideFromWorkbook(
  db: Db,
  bytes: Uint8Array,
  who: { by: string; mayApprove: boolean; now?: Date },
): Promise<BulkDecisionOutcome[]> {
  const { rows, problems } = await readDecisionWorkbook(bytes);
  return decideInBulk(db, { rows, problems, ...who });
}
