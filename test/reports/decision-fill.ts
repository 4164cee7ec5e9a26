/**
 * Fills the Decision and Note columns of a downloaded exception workbook as a person would in a
 * spreadsheet (exceljs, the whole file loaded and written back), for the round-trip tests.
 */
import ExcelJS from 'exceljs';

export type CellFill = string | number | { formula: string };

export interface RowFill {
  decision?: CellFill;
  note?: CellFill;
  /** Replaces the hidden Key cell. */
  key?: CellFill;
}

/** The workbook with the rows of the given exception ids filled; and each id's row number. */
export async function fillDecisions(
  bytes: Uint8Array,
  fills: Record<string, RowFill>,
): Promise<{ bytes: Buffer; rows: Record<string, number> }> {
  const wb = new ExcelJS.Workbook();
  await wb.xlsx.load(Buffer.from(bytes) as unknown as ArrayBuffer);
  const ws = wb.getWorksheet('Exceptions');
  if (!ws) throw new Error('no Exceptions sheet');
  let header = 0;
  ws.eachRow((row, n) => {
    if (!header && (row.values as unknown[]).includes('Decision')) header = n;
  });
  const headers = ws.getRow(header).values as unknown[];
  const col = (name: string) => {
    const i = headers.indexOf(name);
    if (i < 1) throw new Error(`no ${name} column`);
    return i;
  };
  const [idCol, decisionCol, noteCol, keyCol] = ['Id', 'Decision', 'Note', 'Key'].map(col) as [
    number,
    number,
    number,
    number,
  ];
  const rows: Record<string, number> = {};
  ws.eachRow((row, n) => {
    if (n <= header) return;
    const id = String(row.getCell(idCol).value ?? '');
    const fill = fills[id];
    if (!fill) return;
    rows[id] = n;
    if (fill.decision !== undefined) row.getCell(decisionCol).value = fill.decision;
    if (fill.note !== undefined) row.getCell(noteCol).value = fill.note;
    if (fill.key !== undefined) row.getCell(keyCol).value = fill.key;
  });
  for (const id of Object.keys(fills)) if (!rows[id]) throw new Error(`exception ${id} not in the workbook`);
  return { bytes: Buffer.from(await wb.xlsx.writeBuffer()), rows };
}
