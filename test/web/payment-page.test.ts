/**
 * The payment page in Chromium: the search box in the header finds a payment by each id kind (deposit,
 * invoice, cashout, external, refund id, the provider's bank reference) and opens its page with the intent, the provider's view and the
 * ledger's postings side by side and the status history; an unknown id says so (404); an exception's
 * entity id links to its payment. Screenshots under test-output/web/payment-page.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ReportRunner } from '../../src/reports/runs.ts';
import { buildWebApp } from '../../src/web/app.ts';
import { hashPassword } from '../../src/web/auth.ts';
import { ledgerWebServices } from '../../src/web/services.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { seedBefore, seedPeriod } from '../reports/scenario.ts';
import { haveChromium as chromiumHere, launchChromium, signIn } from './chromium.ts';

const haveChromium = chromiumHere('the payment page test');

const OUT = join(process.cwd(), 'test-output', 'web', 'payment-page');
const PASSWORD = 'payment page pass phrase';

describe.skipIf(!haveChromium)('payment page in Chromium', () => {
  let t: TestDatabase;
  let dir: string;
  let runner: ReportRunner;
  let app: FastifyInstance;
  let browser: Browser;
  let base: string;
  let page: Page;

  async function search(q: string): Promise<void> {
    await page.fill('header input[name=q]', q);
    await page.press('header input[name=q]', 'Enter');
    await page.waitForLoadState('load');
  }

  beforeAll(async () => {
    await mkdir(OUT, { recursive: true });
    t = await createTestDatabase();
    await seedBefore(t.db);
    await seedPeriod(t.db);
    dir = await mkdtemp(join(tmpdir(), 'payrecon-payment-page-'));
    runner = new ReportRunner({ db: t.db, dir, timeZone: 'UTC' });
    app = await buildWebApp({
      users: [{ username: 'finance', passwordHash: await hashPassword(PASSWORD) }],
      sessionSecret: 'payment-page-secret-0123456789-abcdefghijk',
      timeZone: 'UTC',
      services: ledgerWebServices(t.db, runner),
    });
    base = await app.listen({ host: '127.0.0.1', port: 0 });
    browser = await launchChromium();
    page = await (await browser.newContext()).newPage();
    await signIn(page, base, 'finance', PASSWORD);
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await runner?.idle();
    await t?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const cases = [
    { kind: 'deposit id', q: '1001', path: '/payments/acme/deposit/1001', h1: /^Deposit 1001/ },
    { kind: 'invoice id', q: 'ref-1001', path: '/payments/acme/deposit/1001', h1: /^Deposit 1001/ },
    { kind: 'cashout id', q: '2001', path: '/payments/acme/cashout/2001', h1: /^Cashout 2001/ },
    { kind: 'external id', q: 'ref-2001', path: '/payments/acme/cashout/2001', h1: /^Cashout 2001/ },
    { kind: 'refund id', q: '3001', path: '/payments/acme/refund/3001', h1: /^Refund 3001/ },
    {
      kind: 'bank reference',
      q: 'E12345678202611250001',
      path: '/payments/acme/cashout/2001',
      h1: /^Cashout 2001/,
    },
  ];
  for (const c of cases) {
    it(`finds a payment by its ${c.kind}`, async () => {
      await search(c.q);
      expect(new URL(page.url()).pathname).toBe(c.path);
      await expect(page.locator('h1').textContent()).resolves.toMatch(c.h1);
      await expect(page.locator('#provider').textContent()).resolves.toContain('Status');
      if (c.path.includes('/cashout/2001')) {
        await expect(page.locator('#bank-reference').textContent()).resolves.toBe('E12345678202611250001');
      }
      await page.screenshot({ path: join(OUT, `by-${c.kind.replace(' ', '-')}.png`), fullPage: true });
    });
  }

  it('shows the intent, the ledger postings and the status history of a completed deposit', async () => {
    await page.goto(`${base}/payments/acme/deposit/1001`);
    await expect(page.locator('#intent').textContent()).resolves.toContain('1,000.00 BRL');
    await expect(page.locator('#provider').textContent()).resolves.toContain('COMPLETED');
    const ledger = (await page.locator('#ledger').textContent()) ?? '';
    expect(ledger).toContain('credit');
    expect(ledger).toMatch(/available/);
    expect(await page.locator('h2:text("Status history") + table tbody tr').count()).toBeGreaterThan(0);
  });

  it('says when no payment has the id', async () => {
    await search('no-such-id-42');
    await expect(page.locator('[role=alert]').textContent()).resolves.toContain(
      'No payment has the id no-such-id-42',
    );
    const res = await page.request.get(`${base}/payments?q=no-such-id-42`, {
      headers: { accept: 'text/html' },
    });
    expect(res.status()).toBe(404);
    await page.screenshot({ path: join(OUT, 'not-found.png'), fullPage: true });
  });

  it('links an exception’s entity id to its payment', async () => {
    await page.goto(`${base}/exceptions`);
    const row = page.locator('tr[data-exception]', { hasText: 'LATE_REJECTION' });
    await row.locator('a', { hasText: '2003' }).click();
    await page.waitForURL(`${base}/payments/acme/cashout/2003`);
    await expect(page.locator('h1').textContent()).resolves.toMatch(/^Cashout 2003/);
    await expect(page.locator('body').textContent()).resolves.toContain('LATE_REJECTION');
    await page.screenshot({ path: join(OUT, 'from-exception.png'), fullPage: true });
  });
});
