/**
 * The month close on a young ledger, in Chromium: acme's BRL ledger first booked two months ago and its
 * USD ledger only this month, so the list offers BRL's two complete months and no earlier one, and says
 * USD has nothing to close yet; the month before the first entry says there is nothing to close and
 * offers no Prepare; a complete month without entries says so beside its Prepare. The preparer is
 * offered no Approve, and her posted approval is refused on a page leading back to the close; another
 * controller approves. Beside the close: the site's icon, and a report whose file was removed answers
 * a page (410) in the site's layout leading back to the report. Screenshots under test-output/web/close-young.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { previousPeriod } from '../../src/domain/close.ts';
import { monthOfInstant } from '../../src/reports/period.ts';
import { ReportRunner } from '../../src/reports/runs.ts';
import { buildWebApp } from '../../src/web/app.ts';
import { hashPassword } from '../../src/web/auth.ts';
import { monthName } from '../../src/web/close-views.ts';
import { ledgerWebServices } from '../../src/web/services.ts';
import { bookEntry, closeLedger } from '../db/close-fixtures.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { haveChromium as chromiumHere, launchChromium, signIn as signInForm } from './chromium.ts';

const haveChromium = chromiumHere('the young ledger close test');

const OUT = join(process.cwd(), 'test-output', 'web', 'close-young');
const PASSWORD = 'young ledger pass phrase';
// Months of the real clock: the session cookies and the close's "is it over" both read it.
const THIS_MONTH = monthOfInstant(new Date(), 'UTC');
const LAST_MONTH = previousPeriod(THIS_MONTH);
const FIRST_MONTH = previousPeriod(LAST_MONTH);
const BEFORE = previousPeriod(FIRST_MONTH);
const path = (period: string, currency = 'BRL') => `/closes/acme/${currency}/${period}`;

describe.skipIf(!haveChromium)('month close on a young ledger in Chromium', () => {
  let t: TestDatabase;
  let dir: string;
  let runner: ReportRunner;
  let app: FastifyInstance;
  let browser: Browser;
  let base: string;
  const pages: Record<string, Page> = {};

  async function signIn(username: string): Promise<Page> {
    const page = await (await browser.newContext({ viewport: { width: 1360, height: 900 } })).newPage();
    await signInForm(page, base, username, PASSWORD);
    return page;
  }
  const shot = (page: Page, name: string) =>
    page.screenshot({ path: join(OUT, `${name}.png`), fullPage: true });

  beforeAll(async () => {
    await mkdir(OUT, { recursive: true });
    t = await createTestDatabase();
    await closeLedger(t.db);
    // BRL: one deposit in the middle of the month before last, nothing since.
    await bookEntry(
      t.db,
      'deposit',
      '1001',
      'credit',
      [
        ['available', '250.00'],
        ['deposits', '-250.00'],
      ],
      `${FIRST_MONTH}-15T12:00Z`,
    );
    // USD: its first entry this month, which is not over.
    await bookEntry(
      t.db,
      'deposit',
      '1002',
      'credit',
      [
        ['available', '40.00'],
        ['deposits', '-40.00'],
      ],
      `${THIS_MONTH}-01T12:00Z`,
      'USD',
    );
    dir = await mkdtemp(join(tmpdir(), 'payrecon-close-young-'));
    runner = new ReportRunner({ db: t.db, dir, timeZone: 'UTC' });
    const passwordHash = await hashPassword(PASSWORD);
    app = await buildWebApp({
      users: [
        { username: 'ana', passwordHash, role: 'controller' },
        { username: 'bob', passwordHash, role: 'controller' },
      ],
      sessionSecret: 'young-ledger-secret-0123456789-abcdefghijk',
      timeZone: 'UTC',
      services: ledgerWebServices(t.db, runner),
    });
    base = await app.listen({ host: '127.0.0.1', port: 0 });
    browser = await launchChromium();
    for (const user of ['ana', 'bob']) pages[user] = await signIn(user);
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await runner?.idle();
    await t?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('lists only the complete months since the first entry, and says what has nothing to close', async () => {
    const ana = pages.ana!;
    await ana.goto(`${base}/closes`);
    const months = await ana.locator('#closes tbody tr td:first-child').allTextContents();
    expect(months).toEqual([monthName(LAST_MONTH), monthName(FIRST_MONTH)]);
    const rows = await ana.locator('#closes tbody tr').allTextContents();
    expect(rows.every((r) => r.includes('acme') && r.includes('BRL') && r.includes('not prepared'))).toBe(
      true,
    );
    await expect(ana.locator('#waiting').textContent()).resolves.toBe(
      `acme USD: first entries in ${monthName(THIS_MONTH)}, which is not over yet; nothing to close.`,
    );
    await expect(ana.locator(`a[href="${path(BEFORE)}"]`).count()).resolves.toBe(0);
    await shot(ana, 'young-1-list');
  });

  it('says the month before the first entry has nothing to close, and offers no Prepare', async () => {
    const ana = pages.ana!;
    await ana.goto(`${base}${path(BEFORE)}`);
    await expect(ana.locator('#no-data').textContent()).resolves.toBe(
      `Nothing to close: acme BRL has no entries before ${monthName(FIRST_MONTH)}, so ${monthName(BEFORE)} has no figures to sign.`,
    );
    await expect(ana.locator('form.actions').count()).resolves.toBe(0);
    await shot(ana, 'young-2-before-first-entry');
    // Posted all the same, it is refused with a way back to the close.
    await postForm(ana, `${base}${path(BEFORE)}/prepare`);
    await expect(ana.locator('section.problem').getAttribute('data-status')).resolves.toBe('409');
    await expect(ana.locator('[role=alert]').textContent()).resolves.toBe(
      `acme BRL has no entries before ${FIRST_MONTH}: ${BEFORE} has no figures to sign`,
    );
    await ana.click('section.problem a:text("Back to the close")');
    await ana.waitForURL(`${base}${path(BEFORE)}`);
  });

  it('says a complete month without entries has none, beside its Prepare', async () => {
    const ana = pages.ana!;
    await ana.goto(`${base}${path(LAST_MONTH)}`);
    await expect(ana.locator('#no-data').textContent()).resolves.toBe(
      `No entries were booked for acme BRL in ${monthName(LAST_MONTH)}: its closing balances are its opening ones, and signing it attests that nothing moved.`,
    );
    await expect(ana.locator('button:text("Prepare and sign")').count()).resolves.toBe(1);
  });

  it('offers the preparer no Approve, refuses her posted approval with a way back, and lets bob approve', async () => {
    const ana = pages.ana!;
    await ana.goto(`${base}${path(FIRST_MONTH)}`);
    await expect(ana.locator('#no-data').count()).resolves.toBe(0);
    await ana.click('button:text("Prepare and sign")');
    await ana.waitForURL(`${base}${path(FIRST_MONTH)}?done=prepare`);
    await expect(ana.locator('button:text("Approve")').count()).resolves.toBe(0);
    await expect(ana.locator('form.actions').count()).resolves.toBe(0);
    await expect(ana.locator('#awaiting-approval').textContent()).resolves.toBe(
      'You prepared and signed this close: a different controller must approve it.',
    );
    await shot(ana, 'young-3-preparer-view');
    await postForm(ana, `${base}${path(FIRST_MONTH)}/approve`);
    await expect(ana.locator('section.problem').getAttribute('data-status')).resolves.toBe('403');
    await expect(ana.locator('[role=alert]').textContent()).resolves.toContain(
      'a different controller must approve it',
    );
    await expect(ana.locator('section.problem a').allTextContents()).resolves.toEqual(['Back to the close']);
    await shot(ana, 'young-4-preparer-approval-refused');
    await ana.click('section.problem a:text("Back to the close")');
    await ana.waitForURL(`${base}${path(FIRST_MONTH)}`);

    const bob = pages.bob!;
    await bob.goto(`${base}${path(FIRST_MONTH)}`);
    await shot(bob, 'young-5-approver-view');
    await bob.click('button:text("Approve")');
    await bob.waitForURL(`${base}${path(FIRST_MONTH)}?done=approve`);
    await expect(bob.locator('h1 .badge').textContent()).resolves.toBe('approved');
  });

  it('answers the site icon, signed in or not', async () => {
    const ana = pages.ana!;
    await expect(ana.locator('head link[rel=icon]').getAttribute('href')).resolves.toBe('/favicon.ico');
    for (const page of [ana, await (await browser.newContext()).newPage()]) {
      const res = await page.request.get(`${base}/favicon.ico`);
      expect(res.status()).toBe(200);
      expect(res.headers()['content-type']).toBe('image/svg+xml');
      expect(await res.text()).toMatch(/^<svg [^>]*viewBox="0 0 32 32"/);
    }
  });

  it('answers a removed report file with a page in the site layout leading back to the report', async () => {
    const outcome = await runner.run({
      kind: 'settlement',
      from: `${FIRST_MONTH}-15`,
      to: `${FIRST_MONTH}-15`,
      account: null,
    });
    const run = outcome!.run;
    await rm(run.files[0]!.path);
    const ana = pages.ana!;
    await ana.goto(`${base}/reports/${run.id}`);
    await ana.click(`a[href$="${run.files[0]!.name}"]`);
    await ana.waitForURL(`${base}/reports/${run.id}/download/${run.files[0]!.name}`);
    await expect(ana.locator('section.problem').getAttribute('data-status')).resolves.toBe('410');
    await expect(ana.locator('header').count()).resolves.toBe(1);
    await expect(ana.locator('[role=alert]').textContent()).resolves.toBe(
      'This file is no longer kept; generate the report again.',
    );
    await shot(ana, 'young-6-report-file-gone');
    // Asked for by a client that takes anything, the answer is the same page.
    const res = await ana.request.get(`${base}/reports/${run.id}/download/${run.files[0]!.name}`, {
      headers: { accept: '*/*' },
    });
    expect(res.status()).toBe(410);
    expect(res.headers()['content-type']).toContain('text/html');
    await ana.click('section.problem a:text("Back to the report")');
    await ana.waitForURL(`${base}/reports/${run.id}`);
  });
});

/** Submits a form of the page's own token to `action`, as a hand-made form would. */
async function postForm(page: Page, action: string): Promise<void> {
  const token = (await page.locator('header input[name=_csrf]').getAttribute('value')) ?? '';
  // The browser's own DOM (this file is type-checked without it).
  await page.evaluate(`(() => {
    const form = document.createElement('form');
    form.method = 'post';
    form.action = ${JSON.stringify(action)};
    const input = document.createElement('input');
    input.type = 'hidden';
    input.name = '_csrf';
    input.value = ${JSON.stringify(token)};
    form.append(input);
    document.body.append(form);
    form.submit();
  })()`);
  await page.waitForURL(action);
  await page.waitForLoadState('load');
}
