/**
 * The settlement workbook's Settlements sheet: one row per settlement with a value date in the period, as
 * the provider's report gives it, and whether the ledger booked it; the summary takes the settlements'
 * movement of `available` and still proves to 0. Read back with the exceljs reader.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ExcelJS from 'exceljs';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordImport } from '../../src/db/imports/service.ts';
import { parseProviderSettlementsFile } from '../../src/imports/files.ts';
import { settlementRowRecord } from '../../src/imports/records.ts';
import { writeSettlementWorkbook } from '../../src/reports/settlement-workbook.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';

let t: TestDatabase;
let dir: string;

const REPORT = [
  'settlement_id,account,period_start,period_end,currency,gross,fees,settlement_currency,rate,net,value_date,bank_reference',
  'STL-A,acme,2026-03-01T03:00:00Z,2026-03-02T03:00:00Z,BRL,1000.00,1.50,BRL,1,998.50,2026-03-03,REF-A',
  'STL-B,acme,2026-03-01T03:00:00Z,2026-03-02T03:00:00Z,USD,200.00,0.75,BRL,5.1234,1023.93,2026-03-03,REF-B',
  // Outside the period (value date in April).
  'STL-C,acme,2026-03-31T03:00:00Z,2026-04-01T03:00:00Z,BRL,10.00,0.00,BRL,1,10.00,2026-04-02,REF-C',
].join('\n');

beforeAll(async () => {
  t = await createTestDatabase();
  dir = await mkdtemp(join(tmpdir(), 'payrecon-stl-'));
  const parsed = await parseProviderSettlementsFile('s.csv', REPORT);
  if (!parsed.ok) throw new Error(parsed.refusal.message);
  await recordImport(t.db, {
    kind: 'provider-settlements',
    fileName: 's.csv',
    sha256: createHash('sha256').update(REPORT).digest('hex'),
    profile: null,
    importedBy: 'ana',
    rows: parsed.value.map(settlementRowRecord),
  });
});

afterAll(async () => {
  await t?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('the Settlements sheet', () => {
  it('lists each settlement of the period with its amounts, rate, value date, reference and booking', async () => {
    const { rows } = await sql<{ now: Date }>`SELECT clock_timestamp() AS now`.execute(t.db);
    const end = rows[0]!.now;
    const result = await writeSettlementWorkbook(t.db, {
      period: {
        from: '2026-03-01',
        to: '2026-03-31',
        start: new Date(end.getTime() - 3_600_000),
        end,
        timeZone: 'America/Sao_Paulo',
        cutoff: '00:00',
      },
      account: 'acme',
      out: join(dir, 'settlement.xlsx'),
      csvDir: join(dir, 'csv'),
    });
    expect(result.rowCounts.Settlements).toBe(2);
    const wb = new ExcelJS.Workbook();
    await wb.xlsx.readFile(join(dir, 'settlement.xlsx'));
    const ws = wb.getWorksheet('Settlements')!;
    const header = (ws.getRow(2).values as unknown[]).slice(1);
    expect(header).toEqual([
      'Settlement id',
      'Account',
      'Period from',
      'Period to',
      'Currency',
      'Gross',
      'Rate',
      'Settlement currency',
      'Fees',
      'Net',
      'Value date',
      'Bank reference',
      'Booked',
      'Bank line',
      'Credited on',
    ]);
    const col = (name: string) => header.indexOf(name) + 1;
    const row = (n: number) => ws.getRow(n);
    expect(row(3).getCell(col('Settlement id')).value).toBe('STL-A');
    expect(row(3).getCell(col('Gross')).value).toBe(1000);
    expect(row(3).getCell(col('Fees')).value).toBe(1.5);
    expect(row(3).getCell(col('Net')).value).toBe(998.5);
    expect(row(3).getCell(col('Value date')).value).toBe('2026-03-03');
    expect(row(3).getCell(col('Bank reference')).value).toBe('REF-A');
    expect(row(3).getCell(col('Booked')).value).toBe('yes');
    // No bank line is matched to it yet.
    expect(row(3).getCell(col('Bank line')).value).toBeNull();
    expect(row(3).getCell(col('Period to')).value).toBeInstanceOf(Date);
    expect(row(4).getCell(col('Settlement id')).value).toBe('STL-B');
    expect(row(4).getCell(col('Currency')).value).toBe('USD');
    expect(row(4).getCell(col('Gross')).value).toBe(200);
    expect(row(4).getCell(col('Rate')).value).toBe('5.1234');
    expect(row(4).getCell(col('Settlement currency')).value).toBe('BRL');
    expect(row(4).getCell(col('Net')).value).toBe(1023.93);

    // The CSV has the same rows, amounts exact.
    const csv = (await readFile(join(dir, 'csv', 'settlements.csv'), 'utf8')).trimEnd().split('\r\n');
    expect(csv).toHaveLength(3);
    expect(csv[1]).toContain(',1000.00,');
    expect(csv[2]).toContain(',1023.93,');

    // The summary takes the settlements' movement of available and proves to 0.
    const figure = (ws: ExcelJS.Worksheet, label: (text: string) => boolean): unknown => {
      let found: unknown;
      ws.eachRow((r) => {
        if (found === undefined && label(String(r.getCell(1).value))) {
          const v = r.getCell(2).value as unknown;
          // A formula reads back its cached result (exceljs leaves a 0 result out).
          found =
            v && typeof v === 'object' && 'formula' in v ? ((v as { result?: unknown }).result ?? 0) : v;
        }
      });
      return found;
    };
    // The summary goes by booking time: all three settlements were booked in the period, STL-C too.
    const brl = wb.getWorksheet('Summary BRL')!;
    expect(figure(brl, (l) => l === 'Settlements paid out, gross')).toBe(-1010);
    expect(figure(brl, (l) => l === 'Closing balance')).toBe(-1010);
    expect(figure(brl, (l) => l.startsWith('Proof'))).toBe(0);
    const usd = wb.getWorksheet('Summary USD')!;
    expect(figure(usd, (l) => l === 'Settlements converted, gross')).toBe(-200);
    expect(figure(usd, (l) => l.startsWith('Proof'))).toBe(0);
  });
});
