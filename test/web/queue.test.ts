/**
 * The exception queue in Chromium, as an operator works it: the queue fits a 1280px
 * window with due times, overdue marks and counts per age bucket; an exception is assigned, taken, put in
 * review and commented, each step in its audit trail; the filters (assignee, currency, amount range,
 * overdue) narrow the list and keep what was typed after an error; two rows are resolved in bulk with one
 * note; the filtered list downloads as CSV; a viewer sees the queue without a single action. A screenshot
 * per step under test-output/web/queue.
 */
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { raiseExceptions } from '../../src/db/exceptions/raise.ts';
import { ReportRunner } from '../../src/reports/runs.ts';
import { buildWebApp } from '../../src/web/app.ts';
import { hashPassword } from '../../src/web/auth.ts';
import { ledgerWebServices } from '../../src/web/services.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { seedBefore, seedPeriod } from '../reports/scenario.ts';
import { haveChromium as chromiumHere, launchChromium, signIn as signInForm } from './chromium.ts';

const haveChromium = chromiumHere('the exception queue test');

const OUT = join(process.cwd(), 'test-output', 'web', 'queue');
const PASSWORD = 'queue test pass phrase';

describe.skipIf(!haveChromium)('the exception queue in Chromium', () => {
  let t: TestDatabase;
  let dir: string;
  let runner: ReportRunner;
  let app: FastifyInstance;
  let browser: Browser;
  let base: string;
  let page: Page;
  const shot = (name: string) => page.screenshot({ path: join(OUT, `${name}.png`), fullPage: true });

  async function signIn(p: Page, username: string): Promise<void> {
    await signInForm(p, base, username, PASSWORD);
  }

  const row = (type: string) => page.locator('tr[data-exception]', { hasText: type });

  beforeAll(async () => {
    await mkdir(OUT, { recursive: true });
    t = await createTestDatabase();
    await seedBefore(t.db);
    await seedPeriod(t.db);
    // Besides the scenario's own (an early release reversed, a late rejection), raised as the ledger does.
    await raiseExceptions(
      t.db,
      [
        { type: 'STUCK', account: 'acme', kind: 'cashout', entityId: '2001', details: {} },
        { type: 'AMOUNT_MISMATCH', account: 'acme', kind: 'deposit', entityId: '1002', details: {} },
        { type: 'UNKNOWN_TRANSACTION', account: 'acme', kind: 'deposit', entityId: '1101', details: {} },
      ],
      new Date(Date.now() - 30 * 3_600_000),
    );
    dir = await mkdtemp(join(tmpdir(), 'payrecon-queue-'));
    runner = new ReportRunner({ db: t.db, dir, timeZone: 'UTC' });
    const passwordHash = await hashPassword(PASSWORD);
    app = await buildWebApp({
      users: [
        { username: 'finance', passwordHash },
        { username: 'ana', passwordHash },
        { username: 'vera', passwordHash, role: 'viewer' },
      ],
      sessionSecret: 'queue-test-secret-0123456789-abcdefghijklmn',
      timeZone: 'UTC',
      services: ledgerWebServices(t.db, runner),
    });
    base = await app.listen({ host: '127.0.0.1', port: 0 });
    browser = await launchChromium();
    page = await (
      await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true })
    ).newPage();
    await signIn(page, 'finance');
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await runner?.idle();
    await t?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('lists the queue within 1280px, with due times, overdue marks and counts per age bucket', async () => {
    await page.goto(`${base}/exceptions`);
    expect(await page.locator('tr[data-exception]').count()).toBe(5);
    // Nothing scrolls sideways at 1280px.
    expect(await page.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(1280);
    // Raised 30 hours ago: a day's service level is past, and they sit in the 1-3 days bucket.
    await expect(row('UNKNOWN_TRANSACTION').locator('.mark.overdue').count()).resolves.toBe(1);
    await expect(page.locator('[data-bucket="1to3d"] strong').textContent()).resolves.toBe('3');
    await expect(page.locator('[data-bucket="lt1d"] strong').textContent()).resolves.toBe('2');
    await expect(row('LATE_REJECTION').locator('.mark.overdue').count()).resolves.toBe(0);
    await shot('01-queue');
  });

  it('assigns, takes, reviews and comments on an exception, each step in its audit trail', async () => {
    await page.goto(`${base}/exceptions`);
    await row('AMOUNT_MISMATCH').locator('a.type').click();
    await page.waitForURL(/\/exceptions\/\d+$/);
    await page.selectOption('select[name=assignee]', 'ana');
    await page.click('button[value=assign]');
    await page.waitForURL(/done=assign/);
    await expect(page.locator('#assignee').textContent()).resolves.toMatch(/^ana/);
    await shot('02-assigned');

    await page.click('button[value=take]');
    await page.waitForURL(/done=take/);
    await expect(page.locator('#assignee').textContent()).resolves.toMatch(/^finance/);
    await page.click('button[value=review]');
    await page.waitForURL(/done=review/);
    await expect(page.locator('#state').textContent()).resolves.toBe('in review');
    await shot('03-taken-in-review');

    await page.fill('textarea[name=note]', 'Asked the provider for the settled amount <b>today</b>');
    await page.click('button[value=comment]');
    await page.waitForURL(/done=comment/);
    const trail = await page.locator('table.trail tbody tr').allTextContents();
    expect(trail).toHaveLength(4);
    expect(trail[0]).toContain('assignee none → ana');
    expect(trail[1]).toContain('assignee ana → finance');
    expect(trail[2]).toContain('open → in_review');
    expect(trail[3]).toContain('Asked the provider for the settled amount <b>today</b>');
    expect(trail.every((r) => r.includes('finance'))).toBe(true);
    await shot('04-commented');
  });

  it('filters by assignee, currency, amount and due, and keeps the input after an error', async () => {
    await page.goto(`${base}/exceptions`);
    await page.selectOption('select[name=assignee]', 'finance');
    await page.click('form.filters button[type=submit]');
    await page.waitForLoadState('load');
    expect(await page.locator('tr[data-exception]').allTextContents()).toHaveLength(1);
    await expect(row('AMOUNT_MISMATCH').locator('.assignee').textContent()).resolves.toBe('@finance');
    // The last comment shows on the row.
    await expect(row('AMOUNT_MISMATCH').textContent()).resolves.toContain('Asked the provider');
    await shot('05-filter-assignee');

    await page.goto(`${base}/exceptions?currency=USD`);
    expect(await page.locator('tr[data-exception]').count()).toBe(1);
    await expect(row('UNKNOWN_TRANSACTION').count()).resolves.toBe(1);
    await page.goto(`${base}/exceptions?min=100&max=400&currency=BRL`);
    // 100.00 to 400.00 BRL: deposit 1003 (200.00) and cashout 2001 (300.00); not 1002 (500.50), not 2003 (80.00).
    const amounts = await page.locator('tr[data-exception] td.num').allTextContents();
    expect(amounts.map((a) => a.trim()).sort()).toEqual(['200.00 BRL', '300.00 BRL']);
    await page.goto(`${base}/exceptions?overdue=true`);
    expect(await page.locator('tr[data-exception] .mark.overdue').count()).toBe(
      await page.locator('tr[data-exception]').count(),
    );

    await page.goto(`${base}/exceptions`);
    await page.fill('input[name=min]', '12,50.999');
    await page.fill('input[name=currency]', 'BRL');
    await page.click('form.filters button[type=submit]');
    await page.waitForLoadState('load');
    await expect(page.locator('[role=alert]').textContent()).resolves.toContain('Amount from');
    expect(await page.inputValue('input[name=min]')).toBe('12,50.999');
    expect(await page.inputValue('input[name=currency]')).toBe('BRL');
    await shot('06-filter-error-keeps-input');
  });

  it('resolves two rows in bulk with one note', async () => {
    await page.goto(`${base}/exceptions`);
    await row('STUCK').locator('input[name=ids]').check();
    await row('UNKNOWN_TRANSACTION').locator('input[name=ids]').check();
    await page.fill('form.bulk input[name=note]', 'Confirmed with the provider on the call');
    await page.click('form.bulk button[value=resolve]');
    await page.waitForURL(/done=bulk-resolve/);
    await expect(page.locator('[role=status]').textContent()).resolves.toBe('2 exceptions resolved.');
    expect(await page.locator('tr[data-exception]').count()).toBe(3);
    const resolved = await t.db
      .selectFrom('exceptions')
      .select(['type', 'state', 'resolved_by', 'resolution_note'])
      .where('state', '=', 'resolved')
      .orderBy('type')
      .execute();
    expect(resolved).toEqual([
      {
        type: 'STUCK',
        state: 'resolved',
        resolved_by: 'finance',
        resolution_note: 'Confirmed with the provider on the call',
      },
      {
        type: 'UNKNOWN_TRANSACTION',
        state: 'resolved',
        resolved_by: 'finance',
        resolution_note: 'Confirmed with the provider on the call',
      },
    ]);
    await shot('07-bulk-resolved');
  });

  it('exports the filtered list as CSV', async () => {
    await page.goto(`${base}/exceptions`);
    await page.selectOption('select[name=state]', 'resolved');
    await page.click('form.filters button[type=submit]');
    await page.waitForLoadState('load');
    await shot('08-export');
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#export')]);
    expect(download.suggestedFilename()).toMatch(/^exceptions-\d{4}-\d{2}-\d{2}\.csv$/);
    const csv = (await readFile((await download.path()) as string, 'utf8')).trimEnd().split('\r\n');
    const header = csv[0]!.split(',');
    expect(header).toEqual(
      expect.arrayContaining(['state', 'assignee', 'due_at', 'overdue', 'age_bucket', 'last_note']),
    );
    expect(csv).toHaveLength(3);
    const state = header.indexOf('state');
    expect(csv.slice(1).map((l) => l.split(',')[state])).toEqual(['resolved', 'resolved']);
  });

  it('shows a viewer the queue without any action', async () => {
    const viewer = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
    await signIn(viewer, 'vera');
    await viewer.goto(`${base}/exceptions`);
    expect(await viewer.locator('tr[data-exception]').count()).toBe(3);
    expect(await viewer.locator('main form[method=post]').count()).toBe(0);
    expect(await viewer.locator('input[name=ids]').count()).toBe(0);
    await viewer.locator('tr[data-exception] a.type').first().click();
    await viewer.waitForURL(/\/exceptions\/\d+$/);
    expect(await viewer.locator('main form[method=post]').count()).toBe(0);
    await viewer.screenshot({ path: join(OUT, '09-viewer.png'), fullPage: true });
    await viewer.context().close();
  });
});
