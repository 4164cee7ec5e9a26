/**
 * The finance page in a real browser (Chromium through playwright-core): sign in, generate a
 * settlement workbook for a period with traffic, download it and open it with the exceljs reader,
 * resolve an exception; a request without a session is refused.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ExcelJS from 'exceljs';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localDate } from '../../src/domain/zoned-time.ts';
import { ReportRunner } from '../../src/reports/runs.ts';
import { buildWebApp } from '../../src/web/app.ts';
import { hashPassword } from '../../src/web/auth.ts';
import { ledgerWebServices } from '../../src/web/services.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { seedBefore, seedPeriod } from '../reports/scenario.ts';
import { haveChromium as chromiumHere, launchChromium } from './chromium.ts';

const haveChromium = chromiumHere('the browser test');

const TZ = 'Europe/Berlin';

describe.skipIf(!haveChromium)('finance page in Chromium', () => {
  let t: TestDatabase;
  let dir: string;
  let app: FastifyInstance;
  let runner: ReportRunner;
  let browser: Browser;
  let base: string;

  beforeAll(async () => {
    t = await createTestDatabase();
    await seedBefore(t.db);
    await seedPeriod(t.db);
    dir = await mkdtemp(join(tmpdir(), 'payrecon-browser-'));
    runner = new ReportRunner({ db: t.db, dir, timeZone: TZ });
    app = await buildWebApp({
      users: [{ username: 'finance', passwordHash: await hashPassword('s3cret pass phrase') }],
      sessionSecret: 'browser-test-secret-0123456789-abcdefghijkl',
      timeZone: TZ,
      services: ledgerWebServices(t.db, runner),
    });
    base = await app.listen({ host: '127.0.0.1', port: 0 });
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await runner?.idle();
    await t?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('refuses a request without a session', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const api = await context.request.get(`${base}/balances`, {
      maxRedirects: 0,
      headers: { accept: '*/*' },
    });
    expect(api.status()).toBe(401);
    const posted = await context.request.post(`${base}/exceptions/1`, {
      form: { action: 'resolve' },
      maxRedirects: 0,
    });
    expect(posted.status()).toBe(401);
    await page.goto(`${base}/balances`);
    expect(new URL(page.url()).pathname).toBe('/login');
    await expect(page.locator('h1').textContent()).resolves.toBe('payrecon sign-in');
    await context.close();
  });

  it('signs in, generates and downloads a settlement workbook, and resolves an exception', async () => {
    const context = await browser.newContext({ acceptDownloads: true });
    const page = await context.newPage();
    await page.goto(`${base}/reports`);
    await page.fill('input[name=username]', 'finance');
    await page.fill('input[name=password]', 'wrong');
    await page.click('button[type=submit]');
    await expect(page.locator('[role=alert]').textContent()).resolves.toContain(
      'Wrong user name or password',
    );
    await page.fill('input[name=password]', 's3cret pass phrase');
    await page.click('button[type=submit]');
    await page.waitForURL(`${base}/balances`);
    await page.click('header a:text-is("Reports")');
    await page.waitForURL(`${base}/reports`);

    const today = localDate(new Date(), TZ);
    await page.selectOption('select[name=kind]', 'settlement');
    await page.fill('input[name=from]', today);
    await page.fill('input[name=to]', today);
    await page.selectOption('select[name=account]', 'acme');
    await page.click('form.inline button[type=submit]');
    await page.waitForURL(/\/reports\/\d+$/);
    // The run page refreshes itself while the workbook is written.
    await page.waitForSelector('#status:text("succeeded")', { timeout: 20_000 });
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('a[href$=".xlsx"]')]);
    const file = join(dir, 'downloaded.xlsx');
    await download.saveAs(file);
    const wb = new ExcelJS.Workbook();
    await wb.xlsx.readFile(file);
    const summary = wb.getWorksheet('Summary BRL');
    expect(summary).toBeDefined();
    let proof: ExcelJS.Row | undefined;
    summary!.eachRow((row) => {
      if (String(row.getCell(1).value).startsWith('Proof')) proof = row;
    });
    expect(Number((proof!.getCell(2).value as ExcelJS.CellFormulaValue).result ?? 0)).toBe(0);
    expect(wb.getWorksheet('Deposits')!.rowCount).toBeGreaterThan(3);

    await page.click('header a:text("Exceptions")');
    await page.waitForURL(`${base}/exceptions`);
    const row = page.locator('tr[data-exception]', { hasText: 'EARLY_RELEASE_REVERSED' });
    const id = await row.getAttribute('data-exception');
    await row.locator('input[name=note]').fill('Chargeback confirmed with the provider');
    await row.locator('button[value=resolve]').click();
    await page.waitForURL(/\/exceptions\?done=resolve/);
    await expect(page.locator('[role=status]').textContent()).resolves.toContain('resolved');
    expect(await page.locator(`tr[data-exception="${id}"]`).count()).toBe(0);
    const { rows } = await sql<{
      state: string;
      resolved_by: string;
      resolution_note: string;
      resolved_at: Date;
    }>`
      SELECT state, resolved_by, resolution_note, resolved_at FROM exceptions WHERE id = ${id}`.execute(t.db);
    expect(rows[0]).toMatchObject({
      state: 'resolved',
      resolved_by: 'finance',
      resolution_note: 'Chargeback confirmed with the provider',
    });

    await page.click('header a:text("Balances")');
    await expect(page.locator('td.num').first().textContent()).resolves.toMatch(/^-?[\d,]+\.\d\d$/);
    await context.close();
  });
});
