/**
 * The close's bank proof in Chromium: controller ana opens September 2026 of acme BRL with bank
 * account BR00ACME configured and sees the statement against the ledger (470.50 against 500.00), the
 * difference explained (the opening before the first statement, 0.00, and the bank lines not in the
 * ledger, -29.50: nothing unexplained), the bank lines and the settlement in transit in their own tables,
 * linked to their exceptions and reconciliation days, and nothing scrolling sideways at 1000 px;
 * preparing is refused (409) in one line naming the items without a note above 1.00; she comments on the
 * rent line's exception (reached from the close), the settlement gets its note too, and she prepares:
 * the signed page shows the frozen bank proof. A close signed in version 1 reads as it was signed. A
 * screenshot per step under test-output/web/close-bank-proof.
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
import { BANK, bankProofMonth, commentOn, SIGNED_V1, storeSignedV1 } from '../db/bank-proof-fixtures.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { haveChromium as chromiumHere, launchChromium, signIn as signInForm } from './chromium.ts';

const haveChromium = chromiumHere('the close bank proof test');

const OUT = join(process.cwd(), 'test-output', 'web', 'close-bank-proof');
const PASSWORD = 'bank proof pass phrase';
const SEPTEMBER = '/closes/acme/BRL/2026-09';

describe.skipIf(!haveChromium)('the close bank proof in Chromium', () => {
  let t: TestDatabase;
  let dir: string;
  let runner: ReportRunner;
  let app: FastifyInstance;
  let browser: Browser;
  let base: string;
  let ana: Page;
  let exceptions: Record<string, string>;

  const shot = (page: Page, name: string) =>
    page.screenshot({ path: join(OUT, `${name}.png`), fullPage: true });

  beforeAll(async () => {
    await mkdir(OUT, { recursive: true });
    t = await createTestDatabase();
    exceptions = await bankProofMonth(t.db);
    dir = await mkdtemp(join(tmpdir(), 'payrecon-bank-proof-'));
    runner = new ReportRunner({ db: t.db, dir, timeZone: 'UTC' });
    const passwordHash = await hashPassword(PASSWORD);
    app = await buildWebApp({
      users: [{ username: 'ana', passwordHash, role: 'controller' }],
      sessionSecret: 'bank-proof-secret-0123456789-abcdefghijklm',
      timeZone: 'UTC',
      services: ledgerWebServices(t.db, runner, undefined, { accounts: () => [BANK], noteAbove: 100n }),
    });
    base = await app.listen({ host: '127.0.0.1', port: 0 });
    browser = await launchChromium();
    ana = await (await browser.newContext({ viewport: { width: 1360, height: 900 } })).newPage();
    await signInForm(ana, base, 'ana', PASSWORD);
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await runner?.idle();
    await t?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** Nothing scrolls sideways at `width`, neither the page nor its main area. */
  async function fitsAt(page: Page, width: number): Promise<void> {
    await page.setViewportSize({ width, height: 900 });
    const w = (await page.evaluate(`(() => {
      const main = document.querySelector('main');
      return { page: document.documentElement.scrollWidth, window: window.innerWidth,
        main: main.scrollWidth, mainVisible: main.clientWidth };
    })()`)) as { page: number; window: number; main: number; mainVisible: number };
    expect(w.page, `page at ${width}`).toBeLessThanOrEqual(w.window);
    expect(w.main, `main at ${width}`).toBeLessThanOrEqual(w.mainVisible);
  }

  it('shows the statement against the ledger, the difference explained and the two groups with their links', async () => {
    await ana.goto(`${base}${SEPTEMBER}`);
    const proof = (await ana.locator('#bank-BR00ACME').textContent()) ?? '';
    expect(proof).toContain('S-0930 of 2026-09-29');
    expect(proof).toMatch(/Statement closing balance.*470\.50/s);
    expect(proof).toMatch(/Ledger bank:BR00ACME at the cut-off\s*500\.00/);
    expect(proof).toMatch(/Difference.*-29\.50/s);
    expect(proof).toMatch(
      /Balance before the first imported statement.*S-0930, first line booked 2026-09-12\s*0\.00/s,
    );
    expect(proof).toMatch(/Bank lines not in the ledger \(2\).*-29\.50/s);
    await expect(ana.locator('#bank-BR00ACME-unexplained').textContent()).resolves.toBe('0.00');
    await expect(ana.locator('#bank-BR00ACME-unexplained').getAttribute('class')).resolves.toContain('even');
    // The settlement is in transit, in its own table, no part of the bank difference.
    await expect(ana.locator('#lines-BR00ACME').textContent()).resolves.not.toContain('ST-2');
    await expect(ana.locator('#in-transit-BR00ACME tr:has-text("ST-2")').textContent()).resolves.toContain(
      'needs a note',
    );
    await expect(ana.locator('#lines-BR00ACME tr.total').textContent()).resolves.toMatch(
      /Total booked on or before 2026-09-29 \(2\): explains the difference\s*-29\.50/,
    );
    await expect(ana.locator('#in-transit-BR00ACME tr.total').textContent()).resolves.toMatch(
      /Total \(1\): in settlements in transit, no part of the bank difference\s*200\.00/,
    );
    await expect(ana.locator('text=Total (3)').count()).resolves.toBe(0);
    const rent = ana.locator('#lines-BR00ACME tr:has-text("L-RENT")');
    await expect(rent.locator('a').first().getAttribute('href')).resolves.toBe(
      `/exceptions/${exceptions['L-RENT']}`,
    );
    await expect(rent.locator('a').nth(1).getAttribute('href')).resolves.toBe(
      '/reconciliation/BR00ACME/2026-09-28',
    );
    await expect(rent.textContent()).resolves.toContain('needs a note');
    await expect(ana.locator('#lines-BR00ACME tr:has-text("L-SMALL")').textContent()).resolves.toContain(
      'at or below the amount',
    );
    await expect(ana.locator('#bank-proof-result').textContent()).resolves.toContain(
      '2 unmatched items above 1.00 at the cut-off have no note',
    );
    await ana.locator('#bank-proof').scrollIntoViewIfNeeded();
    await shot(ana, '1-bank-proof-unsigned');
    await ana.setViewportSize({ width: 1000, height: 900 });
    await ana.locator('#bank-proof').scrollIntoViewIfNeeded();
    await shot(ana, '1-bank-proof-unsigned-1000px');
    await fitsAt(ana, 1000);
    await ana.setViewportSize({ width: 1360, height: 900 });
  });

  it('refuses to prepare in one line, then prepares once the items have notes', async () => {
    await ana.click('button:text("Prepare and sign")');
    await ana.waitForURL(`${base}${SEPTEMBER}/prepare`);
    await expect(ana.locator('section.problem').getAttribute('data-status')).resolves.toBe('409');
    await expect(ana.locator('[role=alert]').textContent()).resolves.toContain(
      '2 unmatched items above 1.00 at the cut-off have no note: bank_line L-RENT (-30.00), settlement ST-2 (200.00)',
    );
    await shot(ana, '2-prepare-refused');
    // The rent line's note from its exception's page, reached from the close; the settlement's as a row.
    await ana.goto(`${base}${SEPTEMBER}`);
    await ana.click('#lines-BR00ACME tr:has-text("L-RENT") a:text("L-RENT")');
    await ana.waitForURL(`${base}/exceptions/${exceptions['L-RENT']}`);
    await ana.fill('textarea[name=note]', 'rent of October, paid early');
    await ana.click('button:text("Add comment")');
    await ana.waitForLoadState('load');
    await expect(ana.locator('table.trail').textContent()).resolves.toContain('rent of October, paid early');
    await shot(ana, '3-note-on-the-rent-line');
    await commentOn(t.db, exceptions['ST-2']!, 'credited on 2 October');
    await ana.goto(`${base}${SEPTEMBER}`);
    await expect(ana.locator('#bank-proof-result').textContent()).resolves.toContain(
      'Every unmatched item above 1.00 has a note',
    );
    await ana.click('button:text("Prepare and sign")');
    await ana.waitForURL(`${base}${SEPTEMBER}?done=prepare`);
    await expect(ana.locator('#signoff').textContent()).resolves.toMatch(
      /[0-9a-f]{64}\s*matches the stored figures/,
    );
    await expect(ana.locator('#lines-BR00ACME tr:has-text("L-RENT")').textContent()).resolves.toContain(
      'noted',
    );
    await expect(ana.locator('#bank-BR00ACME-unexplained').textContent()).resolves.toBe('0.00');
    await shot(ana, '4-prepared-with-bank-proof');
  });

  it('reads a close signed in version 1 as it was signed', async () => {
    await storeSignedV1(t.db);
    await ana.goto(`${base}/closes/acme/BRL/${SIGNED_V1.period}`);
    await expect(ana.locator('#signoff').textContent()).resolves.toMatch(
      new RegExp(`${SIGNED_V1.sha256}\\s*matches the stored figures`),
    );
    const proof = (await ana.locator('#bank-BR00OLD').textContent()) ?? '';
    expect(proof).toMatch(/Difference\s*-29\.50/);
    await expect(ana.locator('#unmatched-BR00OLD tr.total').textContent()).resolves.toMatch(
      /Total \(2\)\s*170\.00/,
    );
    await expect(ana.locator('#bank-proof').textContent()).resolves.toContain(
      'Signed before the bank proof explained its difference',
    );
    await ana.locator('#bank-proof').scrollIntoViewIfNeeded();
    await shot(ana, '5-signed-in-version-1');
  });
});
