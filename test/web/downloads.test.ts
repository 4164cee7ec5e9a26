/**
 * Every download the page offers, walked in Chromium as a finance user would: generate the settlement
 * workbook and the exception workbook from the reports page, download each file the run page lists and
 * the one the runs list links, export the exception queue as CSV; each file is read back (exceljs for
 * the workbooks) and its content checked against the scenario, and the workbook's SHA-256 shown on the
 * run page is the downloaded file's. Screenshots per step under test-output/web/downloads.
 */
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ExcelJS from 'exceljs';
import type { FastifyInstance } from 'fastify';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localDate } from '../../src/domain/zoned-time.ts';
import { ReportRunner } from '../../src/reports/runs.ts';
import { buildWebApp } from '../../src/web/app.ts';
import { hashPassword } from '../../src/web/auth.ts';
import { ledgerWebServices } from '../../src/web/services.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { seedBefore, seedPeriod } from '../reports/scenario.ts';
import { haveChromium, launchChromium, signIn } from './chromium.ts';

const withChromium = haveChromium('the downloads test');

const OUT = join(process.cwd(), 'test-output', 'web', 'downloads');
const TZ = 'UTC';
const PASSWORD = 'downloads pass phrase';

/** The texts of column `col` of a sheet, from row 3 on (rows 1-2 are the title and the header). */
function columnTexts(ws: ExcelJS.Worksheet, header: string): string[] {
  const col = (ws.getRow(2).values as unknown[]).indexOf(header);
  expect(col, `${ws.name} has a "${header}" column`).toBeGreaterThan(0);
  const out: string[] = [];
  ws.eachRow((row, n) => {
    if (n > 2) out.push(row.getCell(col).text);
  });
  return out;
}

describe.skipIf(!withChromium)('every download of the page, in Chromium', () => {
  let t: TestDatabase;
  let dir: string;
  let runner: ReportRunner;
  let app: FastifyInstance;
  let browser: Browser;
  let base: string;
  let page: Page;
  const today = localDate(new Date(), TZ);

  const shot = (name: string) => page.screenshot({ path: join(OUT, `${name}.png`), fullPage: true });

  /** Clicks a link that downloads; saves the file under the test's directory and returns its path. */
  async function download(selector: string, as: string): Promise<string> {
    const [d] = await Promise.all([page.waitForEvent('download'), page.click(selector)]);
    const path = join(dir, as);
    await d.saveAs(path);
    expect(d.suggestedFilename()).toMatch(/\.(xlsx|csv)$/);
    return path;
  }

  async function readWorkbook(path: string): Promise<ExcelJS.Workbook> {
    const wb = new ExcelJS.Workbook();
    await wb.xlsx.readFile(path);
    return wb;
  }

  /** Generates a workbook from the reports page and waits on its run page until it succeeded. */
  async function generate(kind: 'settlement' | 'exceptions'): Promise<void> {
    await page.goto(`${base}/reports`);
    await page.selectOption('select[name=kind]', kind);
    await page.fill('input[name=from]', today);
    await page.fill('input[name=to]', today);
    await page.selectOption('select[name=account]', '');
    await shot(`${kind}-1-form`);
    await page.click('form.inline button[type=submit]');
    await page.waitForURL(/\/reports\/\d+$/);
    // The run page refreshes itself while the workbook is written.
    await page.waitForSelector('#status:text("succeeded")', { timeout: 30_000 });
    await shot(`${kind}-2-run`);
  }

  beforeAll(async () => {
    await rm(OUT, { recursive: true, force: true });
    await mkdir(OUT, { recursive: true });
    t = await createTestDatabase();
    await seedBefore(t.db);
    await seedPeriod(t.db);
    dir = await mkdtemp(join(tmpdir(), 'payrecon-downloads-'));
    runner = new ReportRunner({ db: t.db, dir: join(dir, 'runs'), timeZone: TZ });
    app = await buildWebApp({
      users: [{ username: 'finance', passwordHash: await hashPassword(PASSWORD) }],
      sessionSecret: 'downloads-test-secret-0123456789-abcdefgh',
      timeZone: TZ,
      services: ledgerWebServices(t.db, runner),
    });
    base = await app.listen({ host: '127.0.0.1', port: 0 });
    browser = await launchChromium();
    page = await (await browser.newContext({ acceptDownloads: true })).newPage();
    await signIn(page, base, 'finance', PASSWORD);
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await runner?.idle();
    await t?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('generates the settlement workbook and downloads every file of the run', async () => {
    await generate('settlement');
    const links = page.locator('a[href*="/download/"]');
    const count = await links.count();
    expect(count).toBeGreaterThanOrEqual(1);
    const shown = (await page.locator('code').first().textContent()) ?? '';
    let workbook: string | null = null;
    const csvs = new Map<string, string>();
    for (let i = 0; i < count; i++) {
      const name = decodeURIComponent((await links.nth(i).getAttribute('href'))!.split('/').pop()!);
      const path = await download(`a[href*="/download/"] >> nth=${i}`, `settlement-${name}`);
      if (name.endsWith('.xlsx')) workbook = path;
      else csvs.set(name.replace(/^.*_\d{4}-\d\d-\d\d-(.+)\.csv$/, '$1'), await readFile(path, 'utf8'));
    }
    expect(workbook).not.toBeNull();
    // One CSV per detail sheet, each holding the period's rows of the scenario.
    expect([...csvs.keys()].sort()).toEqual([
      'cashouts',
      'crypto-journal',
      'deposits',
      'journal',
      'refunds',
      'settlements',
      'test-journal',
    ]);
    const csvLines = (k: string) => csvs.get(k)!.trim().split(/\r?\n/);
    expect(csvLines('deposits').join('\n')).toMatch(/(^|,)1002,/m);
    expect(csvLines('cashouts').join('\n')).toMatch(/(^|,)2003,/m);
    expect(csvLines('refunds').join('\n')).toMatch(/(^|,)3002,/m);
    expect(csvLines('journal').length).toBeGreaterThan(40);
    // The SHA-256 the run page shows is the downloaded workbook's.
    const sha = createHash('sha256')
      .update(await readFile(workbook!))
      .digest('hex');
    expect(shown).toBe(sha);

    const wb = await readWorkbook(workbook!);
    expect(wb.worksheets.filter((w) => w.name.startsWith('Summary ')).map((w) => w.name)).toEqual([
      'Summary BRL',
      'Summary USD',
    ]);
    const summary = wb.getWorksheet('Summary BRL')!;
    let proof: ExcelJS.Row | undefined;
    summary.eachRow((row) => {
      if (String(row.getCell(1).value).startsWith('Proof')) proof = row;
    });
    for (const c of [2, 3]) {
      expect(Number((proof!.getCell(c).value as ExcelJS.CellFormulaValue).result ?? 0)).toBe(0);
    }
    // The period's live deposits, cashouts and refunds; test and crypto deposits on their own sheets.
    const deposits = columnTexts(wb.getWorksheet('Deposits')!, 'Deposit id');
    expect(deposits).toEqual(expect.arrayContaining(['1002', '1003', '1004', '1005', '1101']));
    expect(deposits).not.toContain('1201');
    expect(columnTexts(wb.getWorksheet('Cashouts')!, 'Cashout id')).toEqual(
      expect.arrayContaining(['2001', '2002', '2003']),
    );
    expect(columnTexts(wb.getWorksheet('Refunds')!, 'Refund id')).toEqual(
      expect.arrayContaining(['3001', '3002']),
    );
    await shot('settlement-3-downloaded');
  });

  it('generates the exception workbook and downloads it from the runs list', async () => {
    await generate('exceptions');
    const shown = (await page.locator('code').first().textContent()) ?? '';
    await page.goto(`${base}/reports`);
    await shot('exceptions-3-runs-list');
    // The newest run comes first; its Download cell links the workbook.
    const row = page.locator('tbody tr', { hasText: 'exceptions' }).first();
    const href = await row.locator('a[href*="/download/"]').getAttribute('href');
    expect(href).toMatch(/\.xlsx$/);
    const path = await download(`a[href="${href}"]`, 'exceptions.xlsx');
    expect(
      createHash('sha256')
        .update(await readFile(path))
        .digest('hex'),
    ).toBe(shown);

    const wb = await readWorkbook(path);
    expect(wb.worksheets.map((w) => w.name)).toEqual(['Summary', 'Exceptions', 'Late rejections']);
    const detail = wb.getWorksheet('Exceptions')!;
    const types = columnTexts(detail, 'Type');
    const ids = columnTexts(detail, 'Entity id');
    expect(types).toEqual(expect.arrayContaining(['LATE_REJECTION', 'EARLY_RELEASE_REVERSED']));
    expect(ids[types.indexOf('LATE_REJECTION')]).toBe('2003');
    expect(columnTexts(wb.getWorksheet('Late rejections')!, 'Id')).toContain('2003');
    await shot('exceptions-4-downloaded');
  });

  it('exports the exception queue as CSV', async () => {
    await page.goto(`${base}/exceptions`);
    await shot('queue-1-page');
    const path = await download('#export', 'queue.csv');
    const lines = (await readFile(path, 'utf8')).trim().split(/\r?\n/);
    expect(lines.length).toBeGreaterThan(1);
    const header = lines[0]!.split(',');
    expect(header).toEqual(expect.arrayContaining(['type', 'entity_id']));
    const type = header.indexOf('type');
    const entity = header.indexOf('entity_id');
    const late = lines
      .slice(1)
      .map((l) => l.split(','))
      .find((cells) => cells[type] === 'LATE_REJECTION');
    expect(late?.[entity]).toBe('2003');
  });
});
