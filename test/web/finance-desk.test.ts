/**
 * The pages a finance desk opens, in Chromium at 1280x900: the landing page after sign-in (the balances);
 * the balances grouped live then test, by currency, with a total per book and currency where several
 * accounts hold it and in-flight columns that say they count; a cashout the bank rejected with its code
 * and text; a fully refunded deposit with its refunds; a deposit the customer paid with another amount
 * (AMOUNT_MISMATCH), with the amount paid beside the intent's and the provider's, on its page and in the
 * queue, whose codes wrap only after an underscore; the charts' "awaiting status" for a deposit known
 * only from its intent. The provider's answers go through the provider schemas and
 * `depositObservation`/`cashoutObservation`, as the status fetcher reads them. Screenshots under
 * test-output/web/finance-desk.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyObservations, recordIntents } from '../../src/db/ledger/service.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import type { Intent, Observation } from '../../src/domain/observation.ts';
import { parseProviderJson } from '../../src/provider/json.ts';
import { cashoutStatusResponseSchema, depositSchema } from '../../src/provider/schemas.ts';
import { cashoutObservation, depositObservation } from '../../src/provider/to-observation.ts';
import { ReportRunner } from '../../src/reports/runs.ts';
import { buildWebApp } from '../../src/web/app.ts';
import { hashPassword } from '../../src/web/auth.ts';
import { ledgerWebServices } from '../../src/web/services.ts';
import { intent, obs } from '../db/fixtures.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { haveChromium as chromiumHere, launchChromium, signIn } from './chromium.ts';

const haveChromium = chromiumHere('the finance desk test');

const OUT = join(process.cwd(), 'test-output', 'web', 'finance-desk');
const PASSWORD = 'finance desk pass phrase';
const at = (minute: number) => new Date(Date.now() - 3_600_000 + minute * 60_000);

/** A deposit status answer as the provider sends it, read as the status fetcher reads it. */
function depositAnswer(body: Record<string, unknown>, minute: number): Observation {
  const parsed = depositSchema.parse(parseProviderJson(JSON.stringify(body)));
  return depositObservation(parsed, { account: 'acme', source: 'webhook', observedAt: at(minute) });
}

function cashoutAnswer(body: Record<string, unknown>, minute: number): Observation {
  const parsed = cashoutStatusResponseSchema.parse(parseProviderJson(JSON.stringify(body)));
  return cashoutObservation(parsed, { account: 'acme', source: 'poll', observedAt: at(minute) });
}

/**
 * acme BRL live: deposit 7001 (500.00) refunded in full by 7101 and 7102; bravo BRL live: deposit 8001;
 * acme USD live: deposit 8101; acme BRL test: deposit 8201; cashout 5001 rejected 800
 * ERROR_ACCOUNT_INCORRECT; PEN deposit 6001 of 1,124.70 paid with 562.35 (AMOUNT_MISMATCH); deposit
 * 9001 known only from its intent.
 */
async function seed(t: TestDatabase): Promise<void> {
  const intents: Intent[] = [
    intent('deposit', '7001', 50_000n),
    intent('refund', '7101', 30_000n, { parentDepositId: '7001' }),
    intent('refund', '7102', 20_000n, { parentDepositId: '7001' }),
    intent('deposit', '8001', 40_000n, { account: 'bravo' }),
    intent('deposit', '8101', 12_000n, { currency: 'USD' }),
    intent('deposit', '8201', 9_900n, { test: true }),
    intent('cashout', '5001', 25_000n),
    intent('deposit', '6001', 112_470n, { currency: 'PEN', externalRef: 'inv-6001' }),
    intent('deposit', '9001', 7_700n, { createdAt: new Date() }),
  ];
  const first: Observation[] = [
    obs('deposit', '7001', 'COMPLETED', 0, { amount: 50_000n, observedAt: at(1) }),
    obs('deposit', '8001', 'COMPLETED', 0, { account: 'bravo', amount: 40_000n, observedAt: at(1) }),
    obs('deposit', '8101', 'COMPLETED', 0, { currency: 'USD', amount: 12_000n, observedAt: at(1) }),
    obs('deposit', '8201', 'COMPLETED', 0, { test: true, amount: 9_900n, observedAt: at(1) }),
    cashoutAnswer({ cashout_id: 5001, external_id: 'ref-5001', cashout_status: 0 }, 2),
    depositAnswer(
      {
        user_id: 'u-6001',
        deposit_id: 6001,
        invoice_id: 'inv-6001',
        currency: 'PEN',
        amount: 1124.7,
        status: 'PENDING',
      },
      2,
    ),
  ];
  const second: Observation[] = [
    obs('refund', '7101', 'PENDING', 0, { amount: 30_000n, parentDepositId: '7001', observedAt: at(3) }),
    obs('refund', '7102', 'PENDING', 0, { amount: 20_000n, parentDepositId: '7001', observedAt: at(3) }),
    cashoutAnswer(
      {
        cashout_id: 5001,
        external_id: 'ref-5001',
        cashout_status: 3,
        cashout_status_description: 'Rejected',
        rejection_code: 800,
        rejection_reason: 'ERROR_ACCOUNT_INCORRECT',
      },
      4,
    ),
    depositAnswer(
      {
        user_id: 'u-6001',
        deposit_id: 6001,
        invoice_id: 'inv-6001',
        currency: 'PEN',
        amount: 1124.7,
        status: 'CANCELLED',
        status_reason: 'AMOUNT_MISMATCH',
        paid_amount: 562.35,
      },
      4,
    ),
  ];
  const third: Observation[] = [
    obs('refund', '7101', 'COMPLETED', 0, { amount: 30_000n, parentDepositId: '7001', observedAt: at(5) }),
    obs('refund', '7102', 'COMPLETED', 0, { amount: 20_000n, parentDepositId: '7001', observedAt: at(6) }),
  ];
  await withLedgerTransaction(t.db, (trx) => recordIntents(trx, intents));
  for (const batch of [first, second, third]) {
    await withLedgerTransaction(t.db, (trx) => applyObservations(trx, batch));
  }
}

/** An element's text with its spaces as plain spaces (a no-break space keeps a code with its text). */
const textOf = async (page: Page, selector: string) =>
  ((await page.locator(selector).first().textContent()) ?? '').replace(/\s+/g, ' ').trim();

/** A money cell as minor units: `-1,234.56` is -123456n. */
const minor = (text: string | null | undefined): bigint => {
  const shown = (text ?? '').trim().split(/\s/)[0] ?? '';
  return BigInt(shown.replace(/[,.+]/g, ''));
};

describe.skipIf(!haveChromium)('the finance desk in Chromium', () => {
  let t: TestDatabase;
  let dir: string;
  let runner: ReportRunner;
  let app: FastifyInstance;
  let browser: Browser;
  let base: string;
  let page: Page;

  beforeAll(async () => {
    await mkdir(OUT, { recursive: true });
    t = await createTestDatabase();
    await seed(t);
    dir = await mkdtemp(join(tmpdir(), 'payrecon-finance-desk-'));
    runner = new ReportRunner({ db: t.db, dir, timeZone: 'UTC' });
    app = await buildWebApp({
      users: [{ username: 'finance', passwordHash: await hashPassword(PASSWORD), role: 'operator' }],
      sessionSecret: 'finance-desk-secret-0123456789-abcdefghijk',
      timeZone: 'UTC',
      services: ledgerWebServices(t.db, runner),
    });
    base = await app.listen({ host: '127.0.0.1', port: 0 });
    browser = await launchChromium();
    page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
    await signIn(page, base, 'finance', PASSWORD);
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await runner?.idle();
    await t?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('lands on the balances after sign-in, and the root leads there too', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${base}/`);
    expect(new URL(page.url()).pathname).toBe('/login');
    await page.fill('input[name=username]', 'finance');
    await page.fill('input[name=password]', PASSWORD);
    await page.click('button[type=submit]');
    await page.waitForURL(`${base}/balances`);
    await expect(page.locator('h1').textContent()).resolves.toBe('Balances');
    await expect(page.locator('header a.on').textContent()).resolves.toBe('Balances');
    await page.goto(`${base}/`);
    expect(new URL(page.url()).pathname).toBe('/balances');
    await page.goto(`${base}/login`);
    expect(new URL(page.url()).pathname).toBe('/balances');
    await page.screenshot({ path: join(OUT, 'landing-balances.png') });
    await context.close();
  });

  it('groups the balances live then test, by currency, with a total per book and currency', async () => {
    await page.goto(`${base}/balances`);
    const books = await page
      .locator('#balances tbody[data-book]')
      .evaluateAll((els) => els.map((e) => e.getAttribute('data-book')));
    expect(books).toEqual(['live', 'test']);
    const order = await page
      .locator('#balances tr[data-balance]')
      .evaluateAll((rows) => rows.map((r) => r.getAttribute('data-balance')));
    expect(order).toEqual(['acme|BRL|live', 'bravo|BRL|live', 'acme|USD|live', 'acme|BRL|test']);
    // Two accounts hold live BRL: a total row sums them, column by column; one account is its own total.
    const cellsOf = async (selector: string) => page.locator(selector).locator('td').allTextContents();
    const acme = await cellsOf('tr[data-balance="acme|BRL|live"]');
    const bravo = await cellsOf('tr[data-balance="bravo|BRL|live"]');
    const total = await cellsOf('tr[data-total="BRL|live"]');
    await expect(page.locator('tr[data-total="BRL|live"] th').textContent()).resolves.toBe(
      'Total BRL, live (2 accounts)',
    );
    // Total cells: available, today, month, reserved, today, month, cashouts, refunds in flight.
    expect(total).toHaveLength(8);
    for (const [i, j] of [
      [0, 3],
      [3, 6],
    ] as const) {
      expect(minor(total[i])).toBe(minor(acme[j]) + minor(bravo[j]));
    }
    expect(minor(total[0])).toBe(40_000n); // 500.00 + 400.00 credited, 500.00 refunded from acme
    expect(Number(total[6])).toBe(Number(acme[9]) + Number(bravo[9]));
    expect(await page.locator('tr[data-total="USD|live"]').count()).toBe(0);
    expect(await page.locator('tr[data-total$="|test"]').count()).toBe(0);
    const heads = (await page.locator('#balances thead th').allTextContents()).map((h) => h.trim());
    expect(heads).toContain('In flight (count)');
    expect(heads).toContain('Available (amount)');
    expect(heads).toContain('Reserved (amount)');
    await expect(page.locator('#balances tbody[data-book=test] tr.book th').textContent()).resolves.toContain(
      'Test book',
    );
    await page.screenshot({ path: join(OUT, 'balances-grouped.png'), fullPage: true });
  });

  it('shows the bank’s rejection of a cashout with its code and text', async () => {
    await page.goto(`${base}/payments/acme/cashout/5001`);
    await expect(page.locator('#status').textContent()).resolves.toBe('REJECTED');
    await expect(textOf(page, '#reason')).resolves.toBe('800 ERROR_ACCOUNT_INCORRECT');
    await expect(page.locator('#provider dt', { hasText: 'External id' }).count()).resolves.toBe(1);
    const rejected = page.locator('h2:text("Status history") + table tbody tr', { hasText: 'REJECTED' });
    await expect(rejected.locator('td').nth(5).textContent()).resolves.toBe(
      '800\u00a0ERROR_ACCOUNT_INCORRECT',
    );
    await page.screenshot({ path: join(OUT, 'cashout-rejected.png'), fullPage: true });
  });

  it('lists the refunds of a fully refunded deposit, with links, amounts and statuses', async () => {
    await page.goto(`${base}/payments/acme/deposit/7001`);
    const labels = await page.locator('#provider dt').allTextContents();
    expect(labels).toContain('Invoice');
    expect(labels).not.toContain('Reference');
    await expect(page.locator('#reference').textContent()).resolves.toBe('ref-7001');
    const rows = page.locator('#refunds tbody tr');
    expect(await rows.count()).toBe(2);
    const cells = async (i: number) =>
      (await rows.nth(i).locator('td').allTextContents()).map((c) => c.trim());
    expect((await cells(0)).filter((_, j) => j !== 2)).toEqual(['7101', 'COMPLETED', '300.00 BRL']);
    expect((await cells(1)).filter((_, j) => j !== 2)).toEqual(['7102', 'COMPLETED', '200.00 BRL']);
    await expect(page.locator('#refunds tfoot td').textContent()).resolves.toBe('500.00 BRL');
    await expect(page.locator('#refunds tfoot th').textContent()).resolves.toBe(
      'Refunded (completed, the whole deposit)',
    );
    await page.screenshot({ path: join(OUT, 'deposit-refunded.png'), fullPage: true });
    await rows.nth(1).locator('a').click();
    await page.waitForURL(`${base}/payments/acme/refund/7102`);
    await expect(page.locator('h1').textContent()).resolves.toMatch(/^Refund 7102/);
  });

  it('shows what the customer paid beside the intent’s and the provider’s amounts', async () => {
    await page.goto(`${base}/payments/acme/deposit/6001`);
    await expect(page.locator('#intent').textContent()).resolves.toContain('1,124.70 PEN');
    await expect(page.locator('#provider dt', { hasText: 'Amount asked' }).count()).resolves.toBe(1);
    await expect(page.locator('#paid').textContent()).resolves.toBe('562.35 PEN');
    await expect(page.locator('#reason').textContent()).resolves.toBe('AMOUNT_MISMATCH');
    await expect(page.locator('#reference').textContent()).resolves.toBe('inv-6001');
    await page.screenshot({ path: join(OUT, 'deposit-amount-mismatch.png'), fullPage: true });

    await page.goto(`${base}/exceptions?type=PROVIDER_AMOUNT_MISMATCH`);
    const row = page.locator('tr[data-exception]', { hasText: '6001' });
    await row.locator('summary').click();
    const facts = row.locator('dl.facts');
    const pairs = Object.fromEntries(
      await facts
        .locator('dt')
        .evaluateAll((dts) => dts.map((dt) => [dt.textContent, dt.nextElementSibling?.textContent])),
    );
    expect(pairs).toMatchObject({
      Invoice: 'inv-6001',
      Intent: '1,124.70 PEN',
      Provider: '1,124.70 PEN',
      Paid: '562.35 PEN',
      Status: 'CANCELLED',
      Reason: 'AMOUNT_MISMATCH',
    });
    // Every code in the queue wraps only after an underscore: each rendered line of it is a whole part.
    const codeLines = () =>
      page.evaluate<string[][]>(`(() =>
      [...document.querySelectorAll('table.queue .code')].map((code) => {
        const range = document.createRange();
        const byTop = new Map();
        const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
          const text = node.textContent ?? '';
          for (let i = 0; i < text.length; i++) {
            range.setStart(node, i);
            range.setEnd(node, i + 1);
            const top = Math.round(range.getBoundingClientRect().top);
            byTop.set(top, (byTop.get(top) ?? '') + text[i]);
          }
        }
        return [...byTop.values()];
      }))()`);
    const wrapsAtUnderscores = (lines: string[][]) => {
      expect(lines.length).toBeGreaterThan(0);
      for (const parts of lines) for (const line of parts.slice(0, -1)) expect(line).toMatch(/_$/);
    };
    wrapsAtUnderscores(await codeLines());
    await page.screenshot({ path: join(OUT, 'queue-amount-mismatch.png'), fullPage: true });
    // In a narrower window the codes do wrap, still only after an underscore.
    await page.setViewportSize({ width: 1000, height: 900 });
    const narrow = await codeLines();
    wrapsAtUnderscores(narrow);
    expect(narrow.some((parts) => parts.length > 1)).toBe(true);
    await page.screenshot({ path: join(OUT, 'queue-amount-mismatch-1000px.png'), fullPage: true });
    await page.setViewportSize({ width: 1280, height: 900 });

    await row.locator('a.type').click();
    await page.waitForURL(/\/exceptions\/\d+$/);
    await expect(page.locator('.detail dd.paid').textContent()).resolves.toBe('562.35 PEN');
    await page.screenshot({ path: join(OUT, 'exception-amount-mismatch.png'), fullPage: true });
  });

  it('labels deposits the provider has not reported on yet as awaiting status in the charts', async () => {
    await page.goto(`${base}/balances/charts?days=7&currency=BRL`);
    const deposits = page.locator('svg#volume-count-deposit');
    expect(await deposits.locator('rect[data-series="awaiting status"]').count()).toBeGreaterThan(0);
    expect(await page.locator('svg.chart', { hasText: 'no status' }).count()).toBe(0);
    await page
      .locator('figure', { has: deposits })
      .screenshot({ path: join(OUT, 'charts-awaiting-status.png') });
  });
});
