/**
 * The workbooks as LibreOffice prints them: the settlement workbook of a period in five currencies and
 * the exception workbook are converted to PDF with `soffice --headless --convert-to pdf`, and the text of
 * each PDF page is read with `pdftotext -layout` (pages end with a form feed). Each currency's summary
 * (title, every line label and the proof) is on one page; the exception workbook, with a few rows, prints
 * a page per sheet. The pages are rendered to PNG (`pdftoppm`) under test-output/reports/print-pdf for a
 * look. Skipped with an install hint when soffice or poppler-utils is missing; required under
 * PAYRECON_REQUIRE_TOOLS=1.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ExcelJS from 'exceljs';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeExceptionWorkbook } from '../../src/reports/exception-workbook.ts';
import { localDate, type Period } from '../../src/reports/period.ts';
import { writeSettlementWorkbook } from '../../src/reports/settlement-workbook.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { seedBefore, seedCurrencies, seedPeriod } from './scenario.ts';

const SOFFICE = process.env.SOFFICE ?? '/usr/bin/soffice';
const PDFTOTEXT = '/usr/bin/pdftotext';
const PDFTOPPM = '/usr/bin/pdftoppm';
const missing = [SOFFICE, PDFTOTEXT, PDFTOPPM].filter((p) => !existsSync(p));
const required = process.env.PAYRECON_REQUIRE_TOOLS === '1';
const HINT = 'install them with: sudo apt-get install libreoffice-calc poppler-utils';
if (missing.length > 0 && !required) {
  console.warn(`PDF print test skipped: ${missing.join(', ')} not found (${HINT})`);
}

const OUT = join(process.cwd(), 'test-output', 'reports', 'print-pdf');
const CURRENCIES = ['BRL', 'USD', 'MXN', 'COP', 'EUR'];
/** The workbook's fixed order: BRL first, then by code. */
const ORDERED = ['BRL', 'COP', 'EUR', 'MXN', 'USD'];
const TZ = 'America/Sao_Paulo';

/** The text of each page of a PDF, whitespace runs collapsed to one space. */
function pagesOf(pdf: string): string[] {
  const run = spawnSync(PDFTOTEXT, ['-layout', pdf, '-'], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`pdftotext ${pdf}: ${run.stderr}`);
  const pages = run.stdout.split('\f').map((p) => p.replace(/\s+/g, ' ').trim());
  // The text ends with a form feed after the last page.
  if (pages.at(-1) === '') pages.pop();
  return pages;
}

/** The column-A texts of a sheet (title, labels, notes), whitespace collapsed. */
function labelsOf(ws: ExcelJS.Worksheet): string[] {
  const out: string[] = [];
  ws.eachRow((row) => {
    const v = row.getCell(1).value;
    if (typeof v === 'string' && v.trim() !== '') out.push(v.replace(/\s+/g, ' ').trim());
  });
  return out;
}

describe.skipIf(missing.length > 0 && !required)('workbooks printed to PDF by LibreOffice', () => {
  let t: TestDatabase;
  let dir: string;
  let settlementPdf: string;
  let exceptionPdf: string;
  let settlement: ExcelJS.Workbook;
  let exceptions: ExcelJS.Workbook;

  beforeAll(async () => {
    if (missing.length > 0) {
      throw new Error(`PAYRECON_REQUIRE_TOOLS=1 but ${missing.join(', ')} missing (${HINT})`);
    }
    await rm(OUT, { recursive: true, force: true });
    await mkdir(OUT, { recursive: true });
    t = await createTestDatabase();
    dir = await mkdtemp(join(tmpdir(), 'payrecon-print-pdf-'));
    await seedBefore(t.db);
    const start = await dbNow(t);
    await seedPeriod(t.db);
    await seedCurrencies(t.db, CURRENCIES, 30, 8);
    const end = await dbNow(t);
    const today = localDate(end, TZ);
    const period: Period = { from: today, to: today, start, end, timeZone: TZ, cutoff: '00:00' };
    const files = [join(dir, 'settlement.xlsx'), join(dir, 'exceptions.xlsx')] as const;
    await writeSettlementWorkbook(t.db, { period, account: null, out: files[0] });
    await writeExceptionWorkbook(t.db, { period, account: null, out: files[1], now: new Date() });
    // One soffice run for both, with a profile of its own (a user's is locked by their soffice), kept
    // between runs: creating it is most of a first run's time (37 s against 9 s, load average 20).
    const convert = spawnSync(
      SOFFICE,
      [
        `-env:UserInstallation=file://${join(tmpdir(), 'payrecon-soffice-profile')}`,
        '--headless',
        '--norestore',
        '--convert-to',
        'pdf',
        '--outdir',
        dir,
        ...files,
      ],
      { encoding: 'utf8', timeout: 240_000 },
    );
    expect(convert.status, `${convert.stdout}\n${convert.stderr}`).toBe(0);
    settlementPdf = join(dir, 'settlement.pdf');
    exceptionPdf = join(dir, 'exceptions.pdf');
    for (const file of files) await copyFile(file, join(OUT, file.slice(dir.length + 1)));
    for (const pdf of [settlementPdf, exceptionPdf]) {
      expect(existsSync(pdf), pdf).toBe(true);
      await copyFile(pdf, join(OUT, pdf.slice(dir.length + 1)));
      const name = pdf.slice(dir.length + 1, -4);
      const render = spawnSync(PDFTOPPM, ['-r', '60', '-png', pdf, join(OUT, name)], { encoding: 'utf8' });
      expect(render.status, render.stderr).toBe(0);
    }
    settlement = new ExcelJS.Workbook();
    await settlement.xlsx.readFile(files[0]);
    exceptions = new ExcelJS.Workbook();
    await exceptions.xlsx.readFile(files[1]);
  }, 300_000);

  afterAll(async () => {
    await t?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('prints each currency summary, title to proof, on one page', () => {
    const pages = pagesOf(settlementPdf);
    const summaries = settlement.worksheets.filter((w) => w.name.startsWith('Summary '));
    expect(summaries.map((w) => w.name)).toEqual(ORDERED.map((c) => `Summary ${c}`));
    for (const ws of summaries) {
      const labels = labelsOf(ws);
      expect(labels.length, ws.name).toBeGreaterThan(12);
      const [title] = labels;
      const holding = pages.map((p, i) => [p, i] as const).filter(([p]) => p.includes(title!));
      expect(
        holding.map(([, i]) => i + 1),
        `${ws.name}: pages with "${title}"`,
      ).toHaveLength(1);
      const [page] = holding[0]!;
      for (const label of labels) expect(page, `${ws.name}: "${label}"`).toContain(label);
      expect(page, ws.name).toMatch(/Proof: opening \+ movements − closing \(must be 0\)/);
      expect(page, ws.name).toMatch(/page \d+ of \d+/);
    }
  });

  it('repeats the header row on every page of a detail sheet that runs over pages', () => {
    const pages = pagesOf(settlementPdf);
    const deposits = settlement.getWorksheet('Deposits')!;
    const header = (deposits.getRow(2).values as unknown[]).filter((v) => typeof v === 'string');
    const [title] = labelsOf(deposits);
    const depositPages = pages.filter((p) => p.includes(title!));
    // 150 deposits and more: several pages, each with the title and the header.
    expect(depositPages.length).toBeGreaterThan(1);
    for (const p of depositPages) {
      for (const h of header.slice(0, 4)) expect(p).toContain(h as string);
    }
  });

  it('prints the exception workbook, a few rows, on a page per sheet', async () => {
    const pages = pagesOf(exceptionPdf);
    const sheets = exceptions.worksheets.length;
    const rows = exceptions.getWorksheet('Exceptions')!.actualRowCount;
    expect(rows).toBeLessThan(40);
    expect(pages.length).toBe(sheets);
    const pngs = (await readdir(OUT)).filter((f) => f.startsWith('exceptions') && f.endsWith('.png'));
    expect(pngs).toHaveLength(sheets);
  });
});

async function dbNow(t: TestDatabase): Promise<Date> {
  const { rows } = await sql<{ now: Date }>`SELECT clock_timestamp() AS now`.execute(t.db);
  return rows[0]!.now;
}
