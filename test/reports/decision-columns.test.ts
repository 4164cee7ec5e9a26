/**
 * The exception workbook's decision columns, read back independently: with exceljs and, when
 * python3-openpyxl is installed, with openpyxl (skipped with an install hint otherwise; required under
 * PAYRECON_REQUIRE_TOOLS=1). The Exceptions sheet ends with Decision and Note (shown, tinted, outside the
 * print area) and Key (hidden, outside the folded group, text `<id>@<version>`); the Decision cell of an
 * open ILLEGAL_TRANSITION or FACTS_CHANGED carries a list (approve, reject, keep-ledger once a proposal
 * waits), other rows none; the CSV beside it has none of the three columns. Filled in and saved again
 * by LibreOffice Calc (shared strings, its own styles), the workbook still uploads.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ExcelJS from 'exceljs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decideException } from '../../src/db/exceptions/decisions.ts';
import { raiseExceptions } from '../../src/db/exceptions/raise.ts';
import { applyObservations } from '../../src/db/ledger/service.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import type { Observation } from '../../src/domain/observation.ts';
import { decideFromWorkbook } from '../../src/reports/decision-workbook.ts';
import { writeExceptionWorkbook } from '../../src/reports/exception-workbook.ts';
import { obs } from '../db/fixtures.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { fillDecisions } from './decision-fill.ts';

const PYTHON = process.env.PYTHON ?? (existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3');
const hasOpenpyxl = spawnSync(PYTHON, ['-c', 'import openpyxl'], { encoding: 'utf8' }).status === 0;
const required = process.env.PAYRECON_REQUIRE_TOOLS === '1';
const HINT = 'install it with: sudo apt-get install python3-openpyxl';
if (!hasOpenpyxl && !required)
  console.warn(`openpyxl decision columns check skipped: python3-openpyxl missing (${HINT})`);
const SOFFICE = process.env.SOFFICE ?? '/usr/bin/soffice';
const hasSoffice = existsSync(SOFFICE);
const SOFFICE_HINT = 'install it with: sudo apt-get install libreoffice-calc';
if (!hasSoffice && !required)
  console.warn(`LibreOffice re-save check skipped: ${SOFFICE} missing (${SOFFICE_HINT})`);

let t: TestDatabase;
let dir: string;
let file: string;
const ids: Record<string, string> = {};

const apply = (o: Observation[]) => withLedgerTransaction(t.db, (trx) => applyObservations(trx, o));
const idOf = async (account: string, type: string) =>
  (
    await t.db
      .selectFrom('exceptions')
      .select('id')
      .where('merchant_account', '=', account)
      .where('type', '=', type)
      .executeTakeFirstOrThrow()
  ).id;

beforeAll(async () => {
  t = await createTestDatabase();
  dir = await mkdtemp(join(tmpdir(), 'payrecon-decision-columns-'));
  for (const a of ['cols-open', 'cols-proposed']) {
    await apply([
      { ...obs('deposit', 'd1', 'COMPLETED', 1), account: a } as Observation,
      { ...obs('deposit', 'd1', 'PENDING', 2), account: a } as Observation,
    ]);
    ids[a] = await idOf(a, 'ILLEGAL_TRANSITION');
  }
  await decideException(t.db, {
    id: ids['cols-proposed']!,
    decision: 'accept-provider',
    by: 'ana',
    note: 'reopened',
  });
  await raiseExceptions(
    t.db,
    [{ type: 'STUCK', account: 'cols-stuck', kind: 'cashout', entityId: 'c1', details: {} }],
    new Date(Date.now() - 3_600_000),
  );
  ids['cols-stuck'] = await idOf('cols-stuck', 'STUCK');
  const now = new Date();
  const day = now.toISOString().slice(0, 10);
  file = join(dir, 'exceptions.xlsx');
  await writeExceptionWorkbook(t.db, {
    period: {
      from: day,
      to: day,
      start: new Date(now.getTime() - 86_400_000),
      end: new Date(now.getTime() + 60_000),
      timeZone: 'UTC',
      cutoff: '00:00',
    },
    account: null,
    out: file,
    csvDir: dir,
    now: new Date(now.getTime() + 1_000),
  });
});

afterAll(async () => {
  await t?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('the decision columns read with exceljs', () => {
  it('ends the Exceptions sheet with Decision, Note and the hidden Key; lists only where a decision fits', async () => {
    const wb = new ExcelJS.Workbook();
    await wb.xlsx.readFile(file);
    const ws = wb.getWorksheet('Exceptions')!;
    const header = (ws.getRow(2).values as unknown[]).slice(1);
    expect(header.slice(-3)).toEqual(['Decision', 'Note', 'Key']);
    const col = (name: string) => header.indexOf(name) + 1;
    expect(ws.getColumn(col('Key')).hidden).toBe(true);
    expect(ws.getColumn(col('Key')).outlineLevel ?? 0).toBe(0);
    expect(ws.getColumn(col('Decision')).hidden).toBe(false);
    expect(ws.getColumn(col('Note')).hidden).toBe(false);
    // Printed up to the column before Decision.
    expect(ws.pageSetup.printArea).toBe('A1:AG1048576');
    const byId = new Map<string, ExcelJS.Row>();
    ws.eachRow((row, n) => {
      if (n > 2) byId.set(String(row.getCell(1).value), row);
    });
    const list = (account: string) =>
      byId.get(ids[account]!)!.getCell(col('Decision')).dataValidation?.formulae?.[0] ?? null;
    expect(list('cols-open')).toBe('"keep-ledger,accept-provider"');
    expect(list('cols-proposed')).toBe('"approve,reject,keep-ledger"');
    expect(list('cols-stuck')).toBeNull();
    for (const a of Object.keys(ids)) {
      const row = byId.get(ids[a]!)!;
      expect(row.getCell(col('Key')).value).toMatch(new RegExp(`^${ids[a]}@\\d+\\.[0-9a-f]{8}$`));
      expect(row.getCell(col('Decision')).value ?? null).toBeNull();
    }
    const csv = await readFile(join(dir, 'exceptions.csv'), 'utf8');
    const csvHeader = csv.split('\r\n')[0]!.split(',');
    expect(csvHeader).toContain('Resolution note');
    for (const name of ['Decision', 'Note', 'Key']) expect(csvHeader).not.toContain(name);
  });
});

describe.skipIf(!hasOpenpyxl && !required)('the decision columns read with openpyxl', () => {
  it('agrees: the Key column hidden and text, the lists on the decidable rows, the print area', () => {
    if (!hasOpenpyxl) throw new Error(`PAYRECON_REQUIRE_TOOLS=1 but python3-openpyxl is missing (${HINT})`);
    const script = `
import json, sys, openpyxl
from openpyxl.utils import get_column_letter
wb = openpyxl.load_workbook(sys.argv[1])
ws = wb["Exceptions"]
header = [c.value for c in ws[2]]
cols = {name: header.index(name) + 1 for name in ("Id", "Decision", "Note", "Key")}
key_letter = get_column_letter(cols["Key"])
rows = {}
for r in range(3, ws.max_row + 1):
    ident = ws.cell(r, cols["Id"]).value
    if ident is None: continue
    key = ws.cell(r, cols["Key"])
    decision = ws.cell(r, cols["Decision"]).coordinate
    lists = [dv.formula1 for dv in ws.data_validations.dataValidation if decision in dv.sqref]
    rows[str(ident)] = {"key": key.value, "keyType": key.data_type, "lists": lists,
                        "decision": ws.cell(r, cols["Decision"]).value, "note": ws.cell(r, cols["Note"]).value}
print(json.dumps({
    "header": header[-3:],
    "keyHidden": bool(ws.column_dimensions[key_letter].hidden),
    "decisionHidden": bool(ws.column_dimensions[get_column_letter(cols["Decision"])].hidden),
    "printArea": ws.print_area if isinstance(ws.print_area, str) else ",".join(ws.print_area or []),
    "rows": rows,
}))
`;
    const run = spawnSync(PYTHON, ['-c', script, file], { encoding: 'utf8' });
    expect(run.status, run.stderr).toBe(0);
    const out = JSON.parse(run.stdout) as {
      header: string[];
      keyHidden: boolean;
      decisionHidden: boolean;
      printArea: string;
      rows: Record<string, { key: string; keyType: string; lists: string[]; decision: null; note: null }>;
    };
    expect(out.header).toEqual(['Decision', 'Note', 'Key']);
    expect(out.keyHidden).toBe(true);
    expect(out.decisionHidden).toBe(false);
    expect(out.printArea).toMatch(/^('Exceptions'!)?\$A\$1:\$AG\$1048576$/);
    expect(out.rows[ids['cols-open']!]).toMatchObject({
      keyType: 's',
      lists: ['"keep-ledger,accept-provider"'],
      decision: null,
      note: null,
    });
    expect(out.rows[ids['cols-proposed']!]!.lists).toEqual(['"approve,reject,keep-ledger"']);
    expect(out.rows[ids['cols-stuck']!]!.lists).toEqual([]);
    for (const id of Object.values(ids))
      expect(out.rows[id]!.key).toMatch(new RegExp(`^${id}@\\d+\\.[0-9a-f]{8}$`));
  });
});

describe.skipIf(!hasSoffice && !required)('the workbook saved again by LibreOffice', () => {
  it('still uploads: its decision is read and applied', async () => {
    if (!hasSoffice) throw new Error(`PAYRECON_REQUIRE_TOOLS=1 but ${SOFFICE} is missing (${SOFFICE_HINT})`);
    const id = ids['cols-open']!;
    const filled = await fillDecisions(await readFile(file), {
      [id]: { decision: 'keep-ledger', note: 'kept, checked in Calc' },
    });
    await writeFile(join(dir, 'filled.xlsx'), filled.bytes);
    const run = spawnSync(
      SOFFICE,
      [
        `-env:UserInstallation=file://${dir}/profile`,
        '--headless',
        '--convert-to',
        'xlsx:Calc MS Excel 2007 XML',
        '--outdir',
        join(dir, 'calc'),
        join(dir, 'filled.xlsx'),
      ],
      { encoding: 'utf8', timeout: 120_000 },
    );
    expect(run.status, run.stderr).toBe(0);
    const saved = await readFile(join(dir, 'calc', 'filled.xlsx'));
    const outcomes = await decideFromWorkbook(t.db, saved, { by: 'ana', mayApprove: false });
    expect(outcomes.map((o) => [o.id, o.row, o.outcome])).toEqual([[id, filled.rows[id], 'decided']]);
  }, 150_000);
});
