/**
 * Amounts beyond what a spreadsheet number holds (18 integer digits are allowed; a double gives back at
 * most 15 significant digits) go through the settlement workbook exactly: as exact decimal text, never
 * rounded and never a throw, read back with the exceljs reader and, when python3-openpyxl is installed,
 * with openpyxl (skipped with an install hint otherwise; required under PAYRECON_REQUIRE_TOOLS=1).
 */
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ExcelJS from 'exceljs';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyObservations } from '../../src/db/ledger/service.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import { formatAmount, minorToCell } from '../../src/domain/money.ts';
import { NO_FACTS, type Observation } from '../../src/domain/observation.ts';
import { localDate } from '../../src/domain/zoned-time.ts';
import type { Period } from '../../src/reports/period.ts';
import { writeSettlementWorkbook } from '../../src/reports/settlement-workbook.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';

const TZ = 'UTC';
/** 10^17 minor units: 1,000,000,000,000,000.00, beyond 2^53 and beyond 15 significant digits. */
const HUGE = 10n ** 17n;
const SMALL = 12_345n;

/** Debian's python3-openpyxl lives in the system interpreter's packages (a pyenv python3 first on PATH lacks it). */
const PYTHON = process.env.PYTHON ?? (existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3');
const hasOpenpyxl = spawnSync(PYTHON, ['-c', 'import openpyxl'], { encoding: 'utf8' }).status === 0;
const required = process.env.PAYRECON_REQUIRE_TOOLS === '1';
const HINT = 'install it with: sudo apt-get install python3-openpyxl';
if (!hasOpenpyxl && !required) console.warn(`openpyxl read-back skipped: python3-openpyxl missing (${HINT})`);

let t: TestDatabase;
let dir: string;
let out: string;

function deposit(entityId: string, amount: bigint, at: Date): Observation {
  return {
    eventId: randomUUID(),
    kind: 'deposit',
    account: 'big',
    entityId,
    externalRef: `inv-${entityId}`,
    status: 'COMPLETED',
    observedAt: at,
    source: 'webhook',
    currency: 'BRL',
    amount,
    ...NO_FACTS,
    feeOnPayer: false,
    details: {},
  };
}

beforeAll(async () => {
  t = await createTestDatabase();
  dir = await mkdtemp(join(tmpdir(), 'payrecon-big-'));
  out = join(dir, 'settlement.xlsx');
  const { rows } = await sql<{ now: Date }>`SELECT clock_timestamp() AS now`.execute(t.db);
  const start = rows[0]!.now;
  const at = new Date(start.getTime() - 60_000);
  await withLedgerTransaction(t.db, (trx) =>
    applyObservations(trx, [deposit('1', HUGE, at), deposit('2', SMALL, at)]),
  );
  const { rows: after } = await sql<{ now: Date }>`SELECT clock_timestamp() AS now`.execute(t.db);
  const end = after[0]!.now;
  const day = localDate(end, TZ);
  const period: Period = { from: day, to: day, start, end, timeZone: TZ, cutoff: '00:00' };
  await writeSettlementWorkbook(t.db, { period, account: null, out, csvDir: dir, csvPrefix: 'big' });
});

afterAll(async () => {
  await t?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('amounts beyond a double in the workbook', () => {
  it('minorToCell keeps a number only while a double gives back the exact decimal', () => {
    expect(minorToCell(SMALL)).toBe(123.45);
    expect(minorToCell(10n ** 15n - 1n)).toBe(9_999_999_999_999.99);
    expect(minorToCell(10n ** 15n)).toBe('10000000000000.00');
    expect(minorToCell(HUGE)).toBe('1000000000000000.00');
    expect(minorToCell(-HUGE - 1n)).toBe('-1000000000000000.01');
  });

  it('writes 10^17 minor units exactly (exceljs), small amounts stay numbers, the total is exact text', async () => {
    const wb = new ExcelJS.Workbook();
    await wb.xlsx.readFile(out);
    const ws = wb.getWorksheet('Deposits')!;
    const rows: ExcelJS.Row[] = [];
    ws.eachRow((r) => rows.push(r));
    const header = rows.find((r) => r.getCell(1).value === 'Account')!;
    const col = (name: string) => (header.values as unknown[]).indexOf(name);
    const byId = (id: string) => rows.find((r) => r.getCell(col('Deposit id')).value === id)!;
    expect(byId('1').getCell(col('Gross')).value).toBe('1000000000000000.00');
    expect(byId('1').getCell(col('Credited in period')).value).toBe('1000000000000000.00');
    expect(byId('2').getCell(col('Gross')).value).toBe(123.45);
    const total = rows.find((r) => r.getCell(1).value === 'Total BRL')!;
    expect(total.getCell(col('Credited in period')).value).toBe(formatAmount(HUGE + SMALL));
    const summary = wb.getWorksheet('Summary BRL')!;
    const closing: ExcelJS.Row[] = [];
    summary.eachRow((r) => {
      if (r.getCell(1).value === 'Closing balance') closing.push(r);
    });
    expect(closing[0]!.getCell(2).value).toBe(formatAmount(HUGE + SMALL));
    const csv = await readFile(join(dir, 'big-deposits.csv'), 'utf8');
    expect(csv).toContain(',1000000000000000.00,');
  });

  it.skipIf(!hasOpenpyxl && !required)('reads back the same exact text with openpyxl', () => {
    if (!hasOpenpyxl) throw new Error(`PAYRECON_REQUIRE_TOOLS=1 but python3-openpyxl is missing (${HINT})`);
    const script = `
import json, sys, openpyxl
ws = openpyxl.load_workbook(sys.argv[1])["Deposits"]
rows = [list(r) for r in ws.iter_rows(values_only=True)]
header = next(r for r in rows if r and r[0] == "Account")
gross, ident = header.index("Gross"), header.index("Deposit id")
print(json.dumps({str(r[ident]): r[gross] for r in rows if len(r) > gross and r[ident] in ("1", "2")}))
`;
    const run = spawnSync(PYTHON, ['-c', script, out], { encoding: 'utf8' });
    expect(run.status, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({ '1': '1000000000000000.00', '2': 123.45 });
  });
});
