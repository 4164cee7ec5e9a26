/**
 * The settlement and exception workbooks, generated from a ledger fed through applyObservations and
 * recordIntents, read back with the exceljs reader and checked against the ledger's own sums.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ExcelJS from 'exceljs';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { changeQueueItem } from '../../src/db/exceptions/queue-service.ts';
import { parseAmount } from '../../src/domain/money.ts';
import { localDate, zoneOffsetMs } from '../../src/domain/zoned-time.ts';
import { writeExceptionWorkbook } from '../../src/reports/exception-workbook.ts';
import type { Period } from '../../src/reports/period.ts';
import { writeSettlementWorkbook } from '../../src/reports/settlement-workbook.ts';
import { DATE_FORMAT, MONEY_FORMAT } from '../../src/reports/sheet-writer.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { seedBefore, seedPeriod } from './scenario.ts';

const TZ = 'America/Sao_Paulo';
let t: TestDatabase;
let dir: string;
let period: Period;

/** Cell number back to minor units (the workbook holds major units with two decimals). */
const minor = (v: unknown): bigint => BigInt(Math.round(Number(v) * 100));

async function dbNow(): Promise<Date> {
  const { rows } = await sql<{ now: Date }>`SELECT clock_timestamp() AS now`.execute(t.db);
  return rows[0]!.now;
}

/** The ledger's own balance of a live account before an instant, summed independently of src/reports. */
async function ledgerBalance(
  account: string,
  currency: string,
  before: Date,
  book = 'live',
): Promise<bigint> {
  const { rows } = await sql<{ s: string | null }>`
    SELECT sum(p.amount)::text AS s FROM postings p JOIN journal_entries e ON e.id = p.entry_id
     WHERE p.account = ${account} AND p.currency = ${currency} AND p.book = ${book}
       AND e.created_at < ${before}`.execute(t.db);
  return rows[0]?.s ? parseAmount(rows[0].s, { allowNegative: true }) : 0n;
}

async function ledgerMovement(
  kind: string,
  effect: string,
  account: string,
  currency: string,
): Promise<bigint> {
  const { rows } = await sql<{ s: string | null }>`
    SELECT sum(p.amount)::text AS s FROM postings p JOIN journal_entries e ON e.id = p.entry_id
     WHERE e.entity_kind = ${kind} AND e.effect = ${effect} AND p.account = ${account} AND p.currency = ${currency}
       AND e.book = 'live' AND e.created_at >= ${period.start} AND e.created_at < ${period.end}`.execute(
    t.db,
  );
  return rows[0]?.s ? parseAmount(rows[0].s, { allowNegative: true }) : 0n;
}

function rowsOf(ws: ExcelJS.Worksheet): ExcelJS.Row[] {
  const out: ExcelJS.Row[] = [];
  ws.eachRow((row) => out.push(row));
  return out;
}

function findRow(ws: ExcelJS.Worksheet, label: string): ExcelJS.Row {
  const row = rowsOf(ws).find((r) => r.getCell(1).value === label);
  if (!row) throw new Error(`no row "${label}" in ${ws.name}`);
  return row;
}

/** Value of a cell, taking a formula's cached result. */
function cellValue(cell: ExcelJS.Cell): unknown {
  const v = cell.value as unknown;
  if (v && typeof v === 'object' && 'formula' in (v as object))
    return (v as { result?: unknown }).result ?? 0;
  return v;
}

beforeAll(async () => {
  t = await createTestDatabase();
  dir = await mkdtemp(join(tmpdir(), 'payrecon-wb-'));
  // The period's bounds come from the database's own clock, which stamps every entry (`created_at`
  // is its transaction's start): `start` is read after seedBefore's transactions committed and before
  // seedPeriod's began, `end` after seedPeriod's committed. No sleep separates them; causality does.
  await seedBefore(t.db);
  const start = await dbNow();
  await seedPeriod(t.db);
  const end = await dbNow();
  const today = localDate(end, TZ);
  period = { from: today, to: today, start, end, timeZone: TZ, cutoff: '00:00' };
});

afterAll(async () => {
  await t?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('settlement workbook', () => {
  let wb: ExcelJS.Workbook;
  let result: Awaited<ReturnType<typeof writeSettlementWorkbook>>;
  const progress: [number, number][] = [];

  beforeAll(async () => {
    result = await writeSettlementWorkbook(t.db, {
      period,
      account: null,
      out: join(dir, 'settlement.xlsx'),
      csvDir: join(dir, 'csv'),
      onProgress: (d, n) => progress.push([d, n]),
    });
    wb = new ExcelJS.Workbook();
    await wb.xlsx.readFile(join(dir, 'settlement.xlsx'));
  });

  it('has a summary per currency, detail sheets, and the test and crypto books on their own sheets', () => {
    expect(wb.worksheets.map((w) => w.name)).toEqual([
      'Summary BRL',
      'Summary USD',
      'Deposits',
      'Cashouts',
      'Refunds',
      'Settlements',
      'Journal',
      'Test book',
      'Test journal',
      'Crypto book',
      'Crypto journal',
    ]);
    const last = progress.at(-1)!;
    expect(last[0]).toBe(last[1]);
    expect(last[1]).toBe(
      Object.entries(result.rowCounts)
        .filter(([k]) => !k.endsWith('book'))
        .reduce((a, [, b]) => a + b, 0),
    );
  });

  it('summary opening and closing balances equal the ledger, and the proof line is zero', async () => {
    for (const currency of ['BRL', 'USD']) {
      const ws = wb.getWorksheet(`Summary ${currency}`)!;
      const opening = findRow(ws, 'Opening balance');
      const closing = findRow(ws, 'Closing balance');
      expect(minor(opening.getCell(2).value)).toBe(await ledgerBalance('available', currency, period.start));
      expect(minor(opening.getCell(3).value)).toBe(await ledgerBalance('reserved', currency, period.start));
      expect(minor(closing.getCell(2).value)).toBe(await ledgerBalance('available', currency, period.end));
      expect(minor(closing.getCell(3).value)).toBe(await ledgerBalance('reserved', currency, period.end));
      // The proof recomputed from the cells as read back, and the formula that shows it.
      const rows = rowsOf(ws);
      const movements = rows.slice(rows.indexOf(opening) + 1, rows.indexOf(closing));
      expect(movements.length).toBeGreaterThanOrEqual(11);
      for (const col of [2, 3]) {
        const sum = movements.reduce((s, r) => s + minor(r.getCell(col).value), 0n);
        expect(minor(opening.getCell(col).value) + sum - minor(closing.getCell(col).value)).toBe(0n);
      }
      const proof = rows.find((r) => String(r.getCell(1).value).startsWith('Proof'))!;
      const formula = proof.getCell(2).value as ExcelJS.CellFormulaValue;
      expect(formula.formula).toMatch(/^B\d+\+SUM\(B\d+:B\d+\)-B\d+$/);
      expect(Number(formula.result ?? 0)).toBe(0);
      expect(proof.getCell(2).numFmt).toBe(MONEY_FORMAT);
    }
    const brl = result.summaries.find((s) => s.currency === 'BRL')!;
    expect(brl.proofAvailable).toBe(0n);
    expect(brl.proofReserved).toBe(0n);
    expect(brl.openingAvailable).not.toBe(0n);
    expect(brl.openingReserved).not.toBe(0n);
  });

  it('movements by effect equal the ledger, and test and crypto amounts are absent from live totals', async () => {
    const ws = wb.getWorksheet('Summary BRL')!;
    const line = (label: string, col = 2) => minor(findRow(ws, label).getCell(col).value);
    expect(line('Deposits, gross')).toBe(await ledgerMovement('deposit', 'credit', 'available', 'BRL'));
    // 500.50 + 200.00 + 120.00 + 99.00 live; the test deposit's 777.77 and the crypto 333.33 are not in.
    expect(line('Deposits, gross')).toBe(91_950n);
    expect(line('Deposit fees')).toBe(await ledgerMovement('deposit', 'fee', 'available', 'BRL'));
    expect(line('Early releases reversed')).toBe(-19_500n);
    expect(line('Cashouts reserved')).toBe(await ledgerMovement('cashout', 'reserve', 'available', 'BRL'));
    expect(line('Cashouts reserved', 3)).toBe(23_000n);
    expect(line('Cashouts released')).toBe(15_000n);
    expect(line('Cashouts settled', 3)).toBe(-38_000n);
    expect(line('Cashouts rejected late')).toBe(8_000n);
    expect(line('Refunds reserved', 3)).toBe(15_000n);
    expect(line('Refunds settled', 3)).toBe(-5_000n);
    expect(minor(cellValue(findRow(ws, 'Deposits, net (gross less fees)').getCell(2)))).toBe(
      91_950n - 1_810n,
    );
    expect(line('  of which released early (gross)')).toBe(32_000n);

    const liveIds = new Set<string>();
    for (const name of ['Deposits', 'Journal']) {
      for (const r of rowsOf(wb.getWorksheet(name)!))
        liveIds.add(String(r.getCell(name === 'Journal' ? 5 : 2).value));
    }
    expect(liveIds.has('1201')).toBe(false);
    expect(liveIds.has('1301')).toBe(false);
    const journalAccounts = rowsOf(wb.getWorksheet('Journal')!).map((r) => String(r.getCell(8).value));
    expect(journalAccounts.some((a) => a.startsWith('test_') || a.startsWith('crypto_'))).toBe(false);

    const testBook = wb.getWorksheet('Test book')!;
    const testAvailable = rowsOf(testBook).find((r) => r.getCell(2).value === 'test_available')!;
    expect(minor(testAvailable.getCell(5).value)).toBe(
      await ledgerBalance('test_available', 'BRL', period.end, 'test'),
    );
    expect(minor(testAvailable.getCell(5).value)).toBe(77_000n);
    const cryptoIds = rowsOf(wb.getWorksheet('Crypto journal')!).map((r) => String(r.getCell(5).value));
    expect(cryptoIds.filter((id) => id === '1301')).toHaveLength(4);
  });

  it('detail sheets: totals per currency with formulas equal the ledger; frozen header and autofilter', async () => {
    const deposits = wb.getWorksheet('Deposits')!;
    expect(deposits.views[0]).toMatchObject({ state: 'frozen', ySplit: 2 });
    expect(deposits.autoFilter).toBe('A2:P2');
    const total = findRow(deposits, 'Total BRL');
    const credited = total.getCell(13).value as ExcelJS.CellFormulaValue;
    expect(credited.formula).toContain('SUMIF(');
    expect(minor(credited.result)).toBe(await ledgerMovement('deposit', 'credit', 'available', 'BRL'));
    const net = total.getCell(16).value as ExcelJS.CellFormulaValue;
    const expectedNet =
      (await ledgerMovement('deposit', 'credit', 'available', 'BRL')) +
      (await ledgerMovement('deposit', 'fee', 'available', 'BRL')) +
      (await ledgerMovement('deposit', 'early_release_reversal', 'available', 'BRL'));
    expect(minor(net.result)).toBe(expectedNet);
    // The formula's inputs, as read back, add up to its result.
    const dataRows = rowsOf(deposits).filter(
      (r) => r.number > 2 && r.getCell(6).value === 'BRL' && r !== total,
    );
    expect(dataRows.reduce((s, r) => s + minor(r.getCell(16).value), 0n)).toBe(expectedNet);

    const cashouts = wb.getWorksheet('Cashouts')!;
    const late = rowsOf(cashouts).find((r) => r.getCell(2).value === '2003')!;
    expect(late.getCell(4).value).toBe('REJECTED');
    expect(late.getCell(5).value).toBe('R03 account closed');
    expect(minor(late.getCell(14).value)).toBe(8_000n);
    const cashTotal = findRow(cashouts, 'Total BRL');
    expect(minor((cashTotal.getCell(16).value as ExcelJS.CellFormulaValue).result)).toBe(
      (await ledgerMovement('cashout', 'reserve', 'reserved', 'BRL')) +
        (await ledgerMovement('cashout', 'release', 'reserved', 'BRL')) +
        (await ledgerMovement('cashout', 'settle', 'reserved', 'BRL')),
    );

    const journal = wb.getWorksheet('Journal')!;
    const jt = findRow(journal, 'Total BRL').getCell(10).value as ExcelJS.CellFormulaValue;
    expect(jt.formula).toContain('SUMIF(');
    expect(Number(jt.result ?? 0)).toBe(0);
  });

  it('dates are real Excel dates in the configured time zone; amounts are numbers with the money format', async () => {
    const journal = wb.getWorksheet('Journal')!;
    const first = journal.getRow(3);
    const booked = first.getCell(2);
    expect(booked.value).toBeInstanceOf(Date);
    expect(booked.numFmt).toBe(DATE_FORMAT);
    const { rows } = await sql<{ created_at: Date }>`
      SELECT created_at FROM journal_entries WHERE id = ${String(first.getCell(1).value)}`.execute(t.db);
    const instant = rows[0]!.created_at;
    // São Paulo is UTC-3: the cell shows local wall time.
    expect((booked.value as Date).getTime()).toBe(instant.getTime() + zoneOffsetMs(instant, TZ));
    expect(zoneOffsetMs(instant, TZ)).toBe(-3 * 3_600_000);
    const amount = first.getCell(10);
    expect(typeof amount.value).toBe('number');
    expect(amount.numFmt).toBe(MONEY_FORMAT);
    const deposits = wb.getWorksheet('Deposits')!;
    expect(deposits.getRow(3).getCell(11).value).toBeInstanceOf(Date);
  });

  it('writes a CSV per detail sheet with exact amounts', async () => {
    const csv = (await readFile(join(dir, 'csv', 'deposits.csv'), 'utf8')).trimEnd().split('\r\n');
    expect(csv[0]).toContain('Deposit id,Invoice id');
    expect(csv.length).toBe(result.rowCounts.Deposits! + 1);
    expect(csv.find((l) => l.includes(',1002,'))).toContain(',500.50,');
    const journal = (await readFile(join(dir, 'csv', 'journal.csv'), 'utf8')).trimEnd().split('\r\n');
    expect(journal.length).toBe(result.rowCounts.Journal! + 1);
    expect(result.files.map((f) => f.split('/').pop())).toEqual([
      'settlement.xlsx',
      'deposits.csv',
      'cashouts.csv',
      'refunds.csv',
      'settlements.csv',
      'journal.csv',
      'test-journal.csv',
      'crypto-journal.csv',
    ]);
  });

  it('filters by merchant account', async () => {
    const r = await writeSettlementWorkbook(t.db, { period, account: 'nobody', out: join(dir, 'none.xlsx') });
    expect(r.summaries).toEqual([]);
    expect(r.rowCounts.Journal).toBe(0);
  });
});

describe('exception workbook', () => {
  it('counts open exceptions by type and age, lists them, and lists late rejections', async () => {
    // Age one exception into the 3-7 day bucket (past its day of service level), assigned and commented.
    await sql`UPDATE exceptions SET first_seen_at = now() - interval '5 days' WHERE type = 'EARLY_RELEASE_REVERSED'`.execute(
      t.db,
    );
    const early = await t.db
      .selectFrom('exceptions')
      .select('id')
      .where('type', '=', 'EARLY_RELEASE_REVERSED')
      .executeTakeFirstOrThrow();
    await changeQueueItem(
      t.db,
      String(early.id),
      { kind: 'assign', assignee: 'ana', note: null },
      'ana',
      new Date(),
    );
    await changeQueueItem(
      t.db,
      String(early.id),
      { kind: 'comment', note: 'asked the bank' },
      'ana',
      new Date(),
    );
    const out = join(dir, 'exceptions.xlsx');
    const r = await writeExceptionWorkbook(t.db, {
      period: { ...period, start: new Date(period.start.getTime() - 86_400_000) },
      account: null,
      out,
      csvDir: join(dir, 'exc'),
      now: new Date(),
    });
    const wb = new ExcelJS.Workbook();
    await wb.xlsx.readFile(out);
    expect(wb.worksheets.map((w) => w.name)).toEqual(['Summary', 'Exceptions', 'Late rejections']);
    const summary = wb.getWorksheet('Summary')!;
    const late = findRow(summary, 'LATE_REJECTION');
    expect([2, 3, 4, 5].map((c) => late.getCell(c).value)).toEqual([1, 0, 0, 0]);
    const earlyCounts = findRow(summary, 'EARLY_RELEASE_REVERSED');
    expect([2, 3, 4, 5].map((c) => earlyCounts.getCell(c).value)).toEqual([0, 0, 1, 0]);
    expect((findRow(summary, 'Total').getCell(6).value as ExcelJS.CellFormulaValue).result).toBe(2);
    expect(r.byType.find((b) => b.type === 'LATE_REJECTION')?.openedInPeriod).toBe(1);

    const detail = wb.getWorksheet('Exceptions')!;
    const headers = (detail.getRow(2).values as unknown[]).map((v) => String(v ?? ''));
    const col = (header: string) => {
      const i = headers.indexOf(header);
      if (i < 1) throw new Error(`no column ${header} in ${headers.join('|')}`);
      return i;
    };
    expect(detail.autoFilter).toBe('A2:AJ2');
    expect(r.rowCounts.Exceptions).toBe(2);
    expect(detail.getRow(3).getCell(col('First seen')).value).toBeInstanceOf(Date);
    // Every exception carries its facts: provider status, the rule in one sentence.
    const lateRow = detail.getRow(4);
    expect(lateRow.getCell(col('Type')).value).toBe('LATE_REJECTION');
    expect(lateRow.getCell(col('Provider status')).value).toBe('REJECTED');
    expect(String(lateRow.getCell(col('Rule')).value)).toMatch(/rejected later/);
    // And the queue's fields: state, assignee, due time, overdue, age bucket, last comment.
    const earlyRow = detail.getRow(3);
    expect(earlyRow.getCell(col('Type')).value).toBe('EARLY_RELEASE_REVERSED');
    expect(earlyRow.getCell(col('State')).value).toBe('open');
    expect(earlyRow.getCell(col('Assignee')).value).toBe('ana');
    expect(earlyRow.getCell(col('Age bucket')).value).toBe('3–7 days');
    expect(earlyRow.getCell(col('Due')).value).toBeInstanceOf(Date);
    expect(earlyRow.getCell(col('Overdue')).value).toBe('overdue');
    expect(earlyRow.getCell(col('Last comment')).value).toBe('asked the bank');
    expect(earlyRow.getCell(col('Last comment by')).value).toBe('ana');
    expect(lateRow.getCell(col('Overdue')).value ?? null).toBeNull();

    const lateSheet = wb.getWorksheet('Late rejections')!;
    const row = lateSheet.getRow(3);
    expect(row.getCell(3).value).toBe('2003');
    expect(row.getCell(8).value).toBe(80);
    expect(row.getCell(8).numFmt).toBe(MONEY_FORMAT);
    expect(row.getCell(9).value).toBeInstanceOf(Date);
    expect(row.getCell(11).value).toBeInstanceOf(Date);
    expect(r.lateRejections).toEqual([{ currency: 'BRL', amount: 8_000n }]);
    const csv = (await readFile(join(dir, 'exc', 'late-rejections.csv'), 'utf8')).trimEnd().split('\r\n');
    expect(csv).toHaveLength(2);
    expect(csv[1]).toContain(',80.00,');
  });
});
