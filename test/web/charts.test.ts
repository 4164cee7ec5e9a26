/**
 * The balances page's charts in Chromium at 1280x900: traffic fed through the ledger
 * service (the report scenario plus a few dozen deposits and cashouts), then spread over the last twelve
 * days by back-dating its entries, postings and sightings (the immutability triggers lifted for that one
 * update in this throwaway database, the movements summed again) and the daily snapshots taken. The
 * balances page must show each balance's movements today and this month and link to the charts page
 * (`/balances/charts`), which must show a line chart per live balance, count and amount charts per kind, the
 * exceptions by age, each SVG with its accessible name and a table of its figures, and nothing wider
 * than the window. Screenshots under test-output/web/charts.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { takeBalanceSnapshots } from '../../src/db/ledger/balance-snapshots.ts';
import { applyObservations, recordIntents } from '../../src/db/ledger/service.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import type { Intent, Observation } from '../../src/domain/observation.ts';
import { ReportRunner } from '../../src/reports/runs.ts';
import { buildWebApp } from '../../src/web/app.ts';
import { hashPassword } from '../../src/web/auth.ts';
import { ledgerWebServices } from '../../src/web/services.ts';
import { intent, obs } from '../db/fixtures.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { seedBefore, seedPeriod } from '../reports/scenario.ts';
import { haveChromium as chromiumHere, launchChromium, signIn } from './chromium.ts';

const haveChromium = chromiumHere('the charts test');

const OUT = join(process.cwd(), 'test-output', 'web', 'charts');
const PASSWORD = 'charts page pass phrase';
const DEPOSIT_STATUSES = ['COMPLETED', 'COMPLETED', 'COMPLETED', 'EXPIRED', 'CANCELLED', 'PENDING'];

/**
 * Deposits 5000..5047 and cashouts 6000..6015 in a few statuses; two currencies; created and seen in the
 * hour and a half before `before`.
 */
async function traffic(t: TestDatabase, before: number): Promise<void> {
  const intents: Intent[] = [];
  const observations: Observation[] = [];
  const createdAt = new Date(before - 90 * 60_000);
  const seen = (i: number) => ({ observedAt: new Date(before - (80 - i) * 60_000) });
  for (let i = 0; i < 48; i++) {
    const id = String(5000 + i);
    const currency = i % 8 === 7 ? 'USD' : 'BRL';
    const amount = BigInt(10_000 + ((i * 7_919) % 90_000));
    intents.push(intent('deposit', id, amount, { currency, createdAt }));
    observations.push(
      obs('deposit', id, DEPOSIT_STATUSES[i % DEPOSIT_STATUSES.length]!, i, {
        currency,
        amount,
        feeAmount: amount / 50n,
        feeCurrency: currency,
        ...seen(i),
      }),
    );
  }
  for (let i = 0; i < 16; i++) {
    const id = String(6000 + i);
    intents.push(intent('cashout', id, BigInt(5_000 + i * 1_250), { createdAt }));
    observations.push(
      obs('cashout', id, i % 4 === 3 ? 'CANCELLED' : i % 4 === 2 ? 'PENDING' : 'COMPLETED', i, seen(i)),
    );
  }
  await withLedgerTransaction(t.db, (trx) => recordIntents(trx, intents));
  await withLedgerTransaction(t.db, (trx) => applyObservations(trx, observations));
}

/**
 * Moves each entity's entries, postings and sightings back by (its id mod 12) days; exceptions too. The
 * daily snapshots are taken up to `now`.
 */
async function spreadOverDays(t: TestDatabase, now: Date): Promise<void> {
  await t.db.transaction().execute(async (trx) => {
    await sql`ALTER TABLE journal_entries DISABLE TRIGGER journal_entries_immutable_trg`.execute(trx);
    await sql`ALTER TABLE postings DISABLE TRIGGER postings_immutable_trg`.execute(trx);
    const shift = (id: string) => sql`make_interval(days => (abs(hashtext(${sql.ref(id)})) % 12))`;
    await sql`UPDATE postings p SET created_at = p.created_at - ${shift('e.entity_id')}
      FROM journal_entries e WHERE e.id = p.entry_id`.execute(trx);
    await sql`UPDATE journal_entries e SET created_at = e.created_at - ${shift('e.entity_id')}`.execute(trx);
    // The movements the postings' trigger kept follow the postings to their new instants.
    await sql`DELETE FROM ledger_movements`.execute(trx);
    await sql`INSERT INTO ledger_movements (merchant_account, currency, book, account, hours, bucket, effect,
        direction, amount_in, amount_out)
      SELECT p.merchant_account, p.currency, p.book, p.account, g.hours,
        date_trunc(CASE g.hours WHEN 24 THEN 'day' ELSE 'hour' END, p.created_at, 'UTC'), e.effect, e.direction,
        coalesce(sum(p.amount) FILTER (WHERE p.amount > 0), 0), coalesce(sum(p.amount) FILTER (WHERE p.amount < 0), 0)
      FROM postings p JOIN journal_entries e ON e.id = p.entry_id
        CROSS JOIN (VALUES (1::smallint), (24::smallint)) AS g(hours)
      GROUP BY 1, 2, 3, 4, 5, 6, 7, 8`.execute(trx);
    await sql`UPDATE mirrors m SET first_seen_at = coalesce(m.first_seen_at, m.created_at) - ${shift('m.entity_id')}`.execute(
      trx,
    );
    await sql`UPDATE exceptions x SET first_seen_at = x.first_seen_at - ${shift('x.entity_id')}`.execute(trx);
    await sql`ALTER TABLE journal_entries ENABLE TRIGGER journal_entries_immutable_trg`.execute(trx);
    await sql`ALTER TABLE postings ENABLE TRIGGER postings_immutable_trg`.execute(trx);
  });
  await takeBalanceSnapshots(t.db, now);
}

describe.skipIf(!haveChromium)('balances page charts in Chromium', () => {
  let t: TestDatabase;
  let dir: string;
  let runner: ReportRunner;
  let app: FastifyInstance;
  let browser: Browser;
  let base: string;
  let page: Page;
  /**
   * The page's clock and the test's, read once after everything is booked: each window (today, this
   * month, the last 30 days) is the same for the page and the figures it is checked against, even across
   * midnight.
   */
  let now: Date;

  beforeAll(async () => {
    await mkdir(OUT, { recursive: true });
    t = await createTestDatabase();
    await seedBefore(t.db);
    await seedPeriod(t.db);
    await traffic(t, Date.now());
    now = new Date();
    await spreadOverDays(t, now);
    dir = await mkdtemp(join(tmpdir(), 'payrecon-charts-'));
    runner = new ReportRunner({ db: t.db, dir, timeZone: 'UTC' });
    app = await buildWebApp({
      users: [{ username: 'finance', passwordHash: await hashPassword(PASSWORD) }],
      sessionSecret: 'charts-page-secret-0123456789-abcdefghijklm',
      timeZone: 'UTC',
      services: ledgerWebServices(t.db, runner),
      now: () => now,
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

  it("shows each balance with today's and this month's movements beside it", async () => {
    await page.goto(`${base}/balances`);
    const row = page.locator('tr[data-balance="acme|BRL|live"]');
    const cells = await row.locator('td').allTextContents();
    expect(cells).toHaveLength(11);
    // Each movement cell: a signed net, then what went in and out.
    for (const i of [4, 5, 7, 8])
      expect(cells[i]).toMatch(/^[+-]?[\d,]+\.\d\d\s*in [\d,]+\.\d\d\s*out [\d,]+\.\d\d$/);
    // The month's available movement is the balance now minus the balance at the month's start: with all
    // traffic in the last twelve days of a month that began earlier, or all of it this month.
    await page.locator('#movements-by-effect summary').click();
    await expect(page.locator('#movements-by-effect table').isVisible()).resolves.toBe(true);
    expect(
      await page.locator('#movements-by-effect tbody tr', { hasText: 'credit' }).count(),
    ).toBeGreaterThan(0);
    // The charts are on their own page, linked from this one and the header.
    expect(await page.locator('svg.chart').count()).toBe(0);
    await page.click('#charts-link a');
    await page.waitForURL(/\/balances\/charts$/);
    await expect(page.locator('h1').textContent()).resolves.toBe('Charts');
    await expect(page.locator('header a.on').textContent()).resolves.toBe('Charts');
    expect(await page.locator('svg[data-chart=bar]').count()).toBe(7);
    await page.goto(`${base}/balances`);
    await page.screenshot({ path: join(OUT, 'balances-table.png') });
  });

  it('draws a line chart per live balance, volumes per kind and the exceptions by age, each accessible', async () => {
    await page.goto(`${base}/balances`);
    const live = await page.locator('tr[data-balance$="|live"]').count();
    await page.goto(`${base}/balances/charts?days=30&currency=BRL`);
    expect(await page.locator('svg[data-chart=line]').count()).toBe(live);
    // Three kinds, counts and amounts each, plus the exceptions by age.
    expect(await page.locator('svg[data-chart=bar]').count()).toBe(7);
    for (const svg of await page.locator('svg.chart').all()) {
      const labelled = (await svg.getAttribute('aria-labelledby'))?.split(' ') ?? [];
      expect(labelled).toHaveLength(2);
      for (const id of labelled)
        expect((await page.locator(`#${id}`).textContent())?.length).toBeGreaterThan(5);
      const box = await svg.boundingBox();
      expect(box?.width).toBeGreaterThan(400);
    }
    const brl = page.locator('svg#balance-acme-brl');
    // Twelve days of snapshots and the current balance: points for both series.
    expect(await brl.locator('g[data-series=available] circle').count()).toBeGreaterThanOrEqual(12);
    await expect(
      brl.locator('g[data-series=available] circle').last().locator('title').textContent(),
    ).resolves.toMatch(/^available, now: -?[\d,]+\.\d\d$/);
    const deposits = page.locator('svg#volume-count-deposit');
    expect(await deposits.locator('rect[data-series=completed]').count()).toBeGreaterThan(3);
    expect(await deposits.locator('rect[data-series=expired]').count()).toBeGreaterThan(0);
    expect(await page.locator('svg#exceptions-by-age rect[data-series]').count()).toBeGreaterThan(0);
    // Nothing wider than the window: no sideways scrolling.
    const overflow = await page.evaluate<{ page: number; main: number }>(`(() => {
      const main = document.querySelector('main');
      return { page: document.documentElement.scrollWidth, main: main.scrollWidth - main.clientWidth };
    })()`);
    expect(overflow.page).toBeLessThanOrEqual(1280);
    expect(overflow.main).toBeLessThanOrEqual(0);
    await page.screenshot({ path: join(OUT, 'balances-charts.png'), fullPage: true });
  });

  it('gives the figures of a chart as a table, with totals that match its bars', async () => {
    await page.goto(`${base}/balances/charts?days=30&currency=BRL`);
    const figure = page.locator('figure', { has: page.locator('svg#volume-count-deposit') });
    await figure.locator('summary').click();
    const table = figure.locator('table[data-chart-table=volume-count-deposit]');
    await expect(table.isVisible()).resolves.toBe(true);
    const totals = (await table.locator('tbody tr td:last-child').allTextContents()).map((c) => Number(c));
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM mirrors
      WHERE entity_kind = 'deposit' AND NOT test
        AND first_seen_at >= date_trunc('day', ${now}::timestamptz, 'UTC') - interval '29 days'
        AND first_seen_at < ${now}::timestamptz`.execute(t.db);
    // Every deposit of the traffic was first seen in the last twelve days.
    expect(rows[0]!.n).toBeGreaterThanOrEqual(48);
    expect(totals.reduce((a, b) => a + b, 0)).toBe(rows[0]!.n);
    await figure.screenshot({ path: join(OUT, 'deposit-counts-with-table.png') });
  });

  it('shows the amounts of another currency when asked', async () => {
    await page.goto(`${base}/balances/charts?days=7`);
    await page.selectOption('select[name=currency]', 'USD');
    await page.click('form.inline button[type=submit]');
    await page.waitForURL(/currency=USD/);
    await expect(page.locator('svg#volume-amount-deposit title').first().textContent()).resolves.toContain(
      'USD',
    );
    expect(await page.locator('svg#volume-amount-deposit').getAttribute('viewBox')).toBe('0 0 600 260');
    await page.screenshot({ path: join(OUT, 'balances-usd-7-days.png'), fullPage: true });
  });
});
