/**
 * The workbooks as LibreOffice prints them: the settlement workbook of a busy day in five currencies
 * (about 200 deposits, 70 cashouts and 1,100 postings) and the exception workbook are converted to PDF
 * with `soffice --headless --convert-to pdf`, and the text of each PDF page is read with `pdftotext`
 * (`-layout` for the text, pages end with a form feed; `-bbox` for where each word stands and how tall it
 * is). A page belongs to the sheet whose title it starts with (the title rows repeat on every page).
 * Each sheet is checked against its print rule: a summary on one page, every page of a sheet at the
 * rule's minimum scale or more (the footer's text height against a calibration sheet printed at 100 %),
 * one page wide (the last printed header on every page), folded columns absent, no figure cut to ###,
 * and the pages no more than the rows need at that scale. Number headers stand over their figures and
 * a rejection text stays in its column. The pages are rendered to PNG (`pdftoppm`) under
 * test-output/reports/print-pdf for a look. Skipped with an install hint when soffice or poppler-utils
 * is missing; required under PAYRECON_REQUIRE_TOOLS=1. The scale is checked where LibreOffice has the
 * workbooks' face or its metric twin (fc-match Calibri answers Calibri or Carlito: fonts-crosextra-carlito);
 * with another face the columns print wider than Excel prints them.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ExcelJS from 'exceljs';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localDate } from '../../src/domain/zoned-time.ts';
import { writeExceptionWorkbook } from '../../src/reports/exception-workbook.ts';
import type { Period } from '../../src/reports/period.ts';
import { writeSettlementWorkbook } from '../../src/reports/settlement-workbook.ts';
import type { PrintRule } from '../../src/reports/sheet-writer.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { exceptionRule, settlementRule } from './print-rules.ts';
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
const FONT_HINT = 'install it with: sudo apt-get install fonts-crosextra-carlito';
const face = spawnSync('fc-match', ['-f', '%{family}', 'Calibri'], { encoding: 'utf8' }).stdout ?? '';
const twinFace = /^(Calibri|Carlito)\b/.test(face);
if (!twinFace && !required) {
  console.warn(`PDF print scale check skipped: LibreOffice prints Calibri as "${face}" (${FONT_HINT})`);
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

/** A word of a PDF page: its box in points from the top left. */
interface Word {
  text: string;
  x0: number;
  y0: number;
  x1: number;
  y1: number;
}

/** The words of each page of a PDF, with their boxes (`pdftotext -bbox`), and the page height. */
function wordsOf(pdf: string): { height: number; words: Word[] }[] {
  const run = spawnSync(PDFTOTEXT, ['-bbox', pdf, '-'], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (run.status !== 0) throw new Error(`pdftotext -bbox ${pdf}: ${run.stderr}`);
  return run.stdout
    .split('<page ')
    .slice(1)
    .map((page) => ({
      height: Number(/height="([\d.]+)"/.exec(page)![1]),
      words: [
        ...page.matchAll(
          /<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">([^<]*)<\/word>/g,
        ),
      ].map((m) => ({
        x0: Number(m[1]),
        y0: Number(m[2]),
        x1: Number(m[3]),
        y1: Number(m[4]),
        text: m[5]!.replace(/&amp;/g, '&').replace(/&lt;/g, '<').replace(/&gt;/g, '>'),
      })),
    }));
}

/** The height of the footer's words (the bottom half inch): LibreOffice scales the footer with the sheet. */
function footerHeight(page: { height: number; words: Word[] }): number {
  const heights = page.words
    .filter((w) => w.y0 > page.height - 36)
    .map((w) => w.y1 - w.y0)
    .sort((a, b) => a - b);
  expect(heights.length).toBeGreaterThan(3);
  return heights[Math.floor(heights.length / 2)]!;
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
  let calibrationPdf: string;
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
    // A busy day: 45 deposits and 14 cashouts a currency on top of the scenario's traffic.
    await seedCurrencies(t.db, CURRENCIES, 45, 14);
    const end = await dbNow(t);
    const today = localDate(end, TZ);
    const period: Period = { from: today, to: today, start, end, timeZone: TZ, cutoff: '00:00' };
    const files = [
      join(dir, 'settlement.xlsx'),
      join(dir, 'exceptions.xlsx'),
      join(dir, 'calibration.xlsx'),
    ] as const;
    await writeSettlementWorkbook(t.db, { period, account: null, out: files[0] });
    await writeExceptionWorkbook(t.db, { period, account: null, out: files[1], now: new Date() });
    // The same footer printed at 100 % with no fitting: the text height every scale is measured against.
    const calibration = new ExcelJS.Workbook();
    const cal = calibration.addWorksheet('Calibration', {
      pageSetup: { orientation: 'portrait', paperSize: 9, scale: 100 },
      headerFooter: { oddFooter: '&LSettlement · all accounts&C2026-11-28 to 2026-11-28&Rpage &P of &N' },
    });
    cal.addRow(['100 %']);
    await calibration.xlsx.writeFile(files[2]);
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
    calibrationPdf = join(dir, 'calibration.pdf');
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

  /** The sheet each page of a workbook's PDF belongs to: the one whose title the page starts with. */
  function sheetOfPages(wb: ExcelJS.Workbook = settlement, pdf = settlementPdf): string[] {
    const titles = wb.worksheets.map((ws) => [ws.name, labelsOf(ws)[0]!] as const);
    return pagesOf(pdf).map((page, i) => {
      const found = titles.filter(([, title]) => page.startsWith(title));
      expect(
        found.map(([name]) => name),
        `page ${i + 1}: "${page.slice(0, 80)}"`,
      ).toHaveLength(1);
      return found[0]![0];
    });
  }

  /** The headers a table prints (its columns not folded away), from the read-back workbook. */
  function printedHeaders(ws: ExcelJS.Worksheet, headerRow: number): string[] {
    const out: string[] = [];
    // A print area (the exception workbook's ends before its input columns) ends what prints.
    const areaEnd = /:\$?([A-Z]+)\$?\d*$/.exec(ws.pageSetup.printArea ?? '')?.[1];
    const last = areaEnd ? ws.getColumn(areaEnd).number : Number.POSITIVE_INFINITY;
    ws.getRow(headerRow).eachCell((cell, col) => {
      if (!ws.getColumn(col).hidden && col <= last) out.push(String(cell.value));
    });
    return out;
  }

  /**
   * Checks each sheet of a workbook's PDF against its print rule; answers the pages and the scale
   * (percent) of each sheet.
   */
  function checkRules(
    wb: ExcelJS.Workbook,
    pdf: string,
    ruleOf: (sheet: string) => PrintRule,
  ): Record<string, { pages: number; scale: number }> {
    const sheetOf = sheetOfPages(wb, pdf);
    const pages = pagesOf(pdf);
    expect(sheetOf.length).toBe(pages.length);
    const full = footerHeight(wordsOf(calibrationPdf)[0]!);
    const scales = wordsOf(pdf).map((page) => footerHeight(page) / full);
    const summary: Record<string, { pages: number; scale: number }> = {};
    for (const ws of wb.worksheets) {
      const rule = ruleOf(ws.name);
      const mine = sheetOf.flatMap((s, i) => (s === ws.name ? [i] : []));
      expect(mine.length, `${ws.name}: pages`).toBeGreaterThan(0);
      // A sheet's pages follow each other.
      expect(mine.at(-1)! - mine[0]!, ws.name).toBe(mine.length - 1);
      const scale = Math.min(...mine.map((i) => scales[i]!));
      summary[ws.name] = { pages: mine.length, scale: Math.round(scale * 100) };
      // LibreOffice rounds a fitted scale: 2 points of slack.
      expect(scale * 100, `${ws.name}: scale`).toBeGreaterThanOrEqual(rule.minScale - 2);
      expect(scale, `${ws.name}: scale`).toBeLessThanOrEqual(1.02);
      if (rule.fit === 'page') {
        expect(mine, `${ws.name}: one page`).toHaveLength(1);
        continue;
      }
      const headerRow = (ws.views as { ySplit?: number }[])[0]?.ySplit ?? 1;
      const headers = printedHeaders(ws, headerRow);
      const folded = (ws.getRow(headerRow).values as unknown[]).filter(
        (h, col) => typeof h === 'string' && ws.getColumn(col).hidden,
      ) as string[];
      for (const i of mine) {
        const page = pages[i]!;
        // One page wide: the last printed header is on every page, and no figure is cut to ###.
        for (const word of headers.at(-1)!.split(' ')) expect(page, `${ws.name} p${i + 1}`).toContain(word);
        expect(page, `${ws.name} p${i + 1}`).not.toContain('###');
        for (const h of folded) expect(page, `${ws.name} p${i + 1}: folded "${h}"`).not.toContain(h);
      }
      // No more pages than the rows need: 15-point rows at the printed scale, below the title rows (the
      // title and a header of up to three lines: 60 points); a sheet without rows prints its header once.
      const rows = ws.actualRowCount - headerRow;
      const page = rule.orientation === 'portrait' ? 841.89 : 595.28;
      const perPage = Math.floor((page - 79.2 - 60 * scale) / (15 * scale));
      expect(mine.length, `${ws.name}: ${rows} rows, ${perPage} a page`).toBeLessThanOrEqual(
        Math.max(1, Math.ceil(rows / perPage)),
      );
    }
    return summary;
  }

  it.skipIf(!twinFace && !required)(
    'prints every sheet of a busy day by its rule: pages and scale',
    async () => {
      if (!twinFace)
        throw new Error(`PAYRECON_REQUIRE_TOOLS=1 but Calibri prints as "${face}" (${FONT_HINT})`);
      const summary = checkRules(settlement, settlementPdf, settlementRule);
      const exceptionSheets = checkRules(exceptions, exceptionPdf, exceptionRule);
      await writeFile(
        join(OUT, 'pages.json'),
        `${JSON.stringify({ settlement: summary, exceptions: exceptionSheets }, null, 2)}\n`,
      );
      // The busy day on paper: the journal on portrait pages of 60 and more postings.
      expect(summary.Journal!.pages).toBeLessThanOrEqual(
        Math.ceil(settlement.getWorksheet('Journal')!.actualRowCount / 60),
      );
      // The summaries, the books and the exception summary print at 100 %.
      for (const [name, sheet] of Object.entries({ ...summary, ...exceptionSheets })) {
        if (/Summary|book$/.test(name)) expect(sheet.scale, name).toBeGreaterThanOrEqual(98);
      }
    },
  );

  it.skipIf(!twinFace && !required)(
    'puts number headers over their figures and keeps a rejection in its column',
    () => {
      if (!twinFace)
        throw new Error(`PAYRECON_REQUIRE_TOOLS=1 but Calibri prints as "${face}" (${FONT_HINT})`);
      const sheetOf = sheetOfPages();
      const boxes = wordsOf(settlementPdf);
      const first = (sheet: string) => boxes[sheetOf.indexOf(sheet)]!;
      const deposits = first('Deposits');
      // Right-aligned header and figures end at the same x: "Fee" over the fees, "Gross" over the gross.
      for (const header of ['Gross', 'Fee']) {
        // The header word (not the "Fee" of "Fee on payer") is the one with figures ending under it.
        const counts = deposits.words
          .filter((w) => w.text === header)
          .map(
            (h) =>
              deposits.words.filter(
                (w) => w.y0 > h.y1 && /^-?[\d,]+\.\d\d$/.test(w.text) && Math.abs(w.x1 - h.x1) < 3,
              ).length,
          );
        expect(Math.max(0, ...counts), `figures under "${header}"`).toBeGreaterThan(20);
      }
      // The rejection text wraps inside its column: no word of it reaches the currency column.
      const cashouts = first('Cashouts');
      const currency = cashouts.words.find((w) => w.text === 'Currency')!;
      const rejection = cashouts.words.find((w) => w.text === 'Rejection')!;
      const texts = cashouts.words.filter(
        (w) => w.y0 > rejection.y1 && ['R01', 'insufficient', 'funds'].includes(w.text),
      );
      expect(texts.length).toBeGreaterThan(2);
      for (const w of texts) {
        expect(w.x0, w.text).toBeGreaterThanOrEqual(rejection.x0 - 1);
        expect(w.x1, w.text).toBeLessThan(currency.x0);
      }
    },
  );
});

async function dbNow(t: TestDatabase): Promise<Date> {
  const { rows } = await sql<{ now: Date }>`SELECT clock_timestamp() AS now`.execute(t.db);
  return rows[0]!.now;
}
