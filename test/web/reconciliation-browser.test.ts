/**
 * The Reconciliation page in Chromium, over a reconciled sandbox with planted anomalies
 * (test/web/reconciliation-fixture.ts): operator olga opens the page from the navigation, goes from a
 * planted unrelated line's BANK_LINE_UNMATCHED exception to its day, sees the line unmatched, matches it
 * by hand to an open settlement with a note, sees it matched and the exception resolved, then unmatches
 * it with a note and sees the line unmatched again; at each step the day's reconciliation explains the
 * difference (nothing unexplained), at 1360 and at 1000 px; viewer vera reads the day with no forms. A
 * screenshot per step under test-output/web/reconciliation.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ReconciliationDay, reconciliationDay } from '../../src/db/read-models/reconciliation.ts';
import { ReportRunner } from '../../src/reports/runs.ts';
import { buildWebApp } from '../../src/web/app.ts';
import { hashPassword } from '../../src/web/auth.ts';
import { ledgerWebServices } from '../../src/web/services.ts';
import { haveChromium as chromiumHere, launchChromium, signIn as signInForm } from './chromium.ts';
import { DAYS, dateOf, NOW, type Reconciled, reconciledSandbox } from './reconciliation-fixture.ts';

const haveChromium = chromiumHere('the Reconciliation page test');
const OUT = join(process.cwd(), 'test-output', 'web', 'reconciliation');
const PASSWORD = 'reconciliation browser pass phrase';

describe.skipIf(!haveChromium)('the Reconciliation page in Chromium', () => {
  let r: Reconciled;
  let dir: string;
  let runner: ReportRunner;
  let app: FastifyInstance;
  let browser: Browser;
  let base: string;
  let day: ReconciliationDay;
  let line: ReconciliationDay['unmatched'][number];
  let exceptionId: string;

  const shot = (page: Page, name: string) =>
    page.screenshot({ path: join(OUT, `${name}.png`), fullPage: true });
  async function signIn(username: string): Promise<Page> {
    const page = await (await browser.newContext({ viewport: { width: 1360, height: 900 } })).newPage();
    await signInForm(page, base, username, PASSWORD);
    return page;
  }
  /** Nothing scrolls sideways at `width` (1280 px unless given), neither the page nor its main area. */
  async function fitsAt1280(page: Page, width = 1280): Promise<void> {
    await page.setViewportSize({ width, height: 800 });
    const w = await page.evaluate(`(() => {
      const main = document.querySelector('main');
      return { page: document.documentElement.scrollWidth, window: window.innerWidth,
        main: main.scrollWidth, mainVisible: main.clientWidth };
    })()`);
    const {
      page: pw,
      window: ww,
      main,
      mainVisible,
    } = w as {
      page: number;
      window: number;
      main: number;
      mainVisible: number;
    };
    expect(pw).toBeLessThanOrEqual(ww);
    expect(main).toBeLessThanOrEqual(mainVisible);
    await page.setViewportSize({ width: 1360, height: 900 });
  }
  const dayUrl = () => `${base}/reconciliation/${encodeURIComponent(day.bank.id)}/${day.date}`;

  beforeAll(async () => {
    await mkdir(OUT, { recursive: true });
    r = await reconciledSandbox();
    // The latest day with a planted unrelated line (BANK_LINE_UNMATCHED) and a settlement still open.
    const planted = new Set(
      r.truth.bankAnomalies.filter((a) => a.kind === 'UNRELATED_LINE').map((a) => a.bankRef),
    );
    for (let n = DAYS - 1; n >= 0 && !line; n--) {
      for (const bank of r.banks) {
        const d = await reconciliationDay(r.t.db, bank, dateOf(n), 'UTC', NOW);
        const found = d.unmatched.find((l) => planted.has(l.reference ?? '') && l.amount > 0n);
        if (found && d.openSettlements.length > 0) {
          day = d;
          line = found;
          break;
        }
      }
    }
    expect(line, 'a planted unrelated credit with a settlement open').toBeDefined();
    const exception = await r.t.db
      .selectFrom('exceptions')
      .select('id')
      .where('type', '=', 'BANK_LINE_UNMATCHED')
      .where('entity_id', '=', line.identity)
      .executeTakeFirstOrThrow();
    exceptionId = String(exception.id);
    dir = await mkdtemp(join(tmpdir(), 'payrecon-recon-browser-'));
    runner = new ReportRunner({ db: r.t.db, dir, timeZone: 'UTC' });
    const passwordHash = await hashPassword(PASSWORD);
    app = await buildWebApp({
      users: [
        { username: 'olga', passwordHash, role: 'operator' },
        { username: 'vera', passwordHash, role: 'viewer' },
      ],
      sessionSecret: 'reconciliation-browser-secret-0123456789-abc',
      timeZone: 'UTC',
      services: ledgerWebServices(r.t.db, runner, undefined, { accounts: () => r.banks }),
      now: () => NOW,
    });
    base = await app.listen({ host: '127.0.0.1', port: 0 });
    browser = await launchChromium();
  }, 240_000);

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await runner?.idle();
    await r?.t.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('walks from the navigation and an exception to the day, matches by hand and unmatches', async () => {
    const olga = await signIn('olga');
    await olga.click('header a:text("Reconciliation")');
    await olga.waitForURL(`${base}/reconciliation`);
    const row = (await olga.locator(`#bank-accounts tr[data-bank="${day.bank.id}"]`).textContent()) ?? '';
    expect(row).toContain(dateOf(DAYS - 1));
    await shot(olga, '1-bank-accounts');

    // From the planted line's exception to its day.
    await olga.goto(`${base}/exceptions/${exceptionId}`);
    await olga.click('#reconciliation-day');
    await olga.waitForURL(dayUrl());
    const lineRow = olga.locator(`#unmatched tr[data-line="${line.identity}"]`);
    await expect(lineRow.textContent()).resolves.toContain(line.reference!);
    await expect(olga.locator('#difference').textContent()).resolves.toMatch(/\d/);
    // The difference explained: the opening before the first statement and the lines not in the ledger,
    // among them this line; nothing unexplained, in green.
    await expect(olga.locator('#proof-unexplained').textContent()).resolves.toBe('0.00');
    await expect(olga.locator('#unexplained').getAttribute('class')).resolves.toBe('even');
    await expect(olga.locator('#proof-opening-before').textContent()).resolves.toMatch(/^[\d,]+\.\d\d$/);
    await expect(olga.locator(`#not-in-ledger tr[data-line="${line.identity}"]`).count()).resolves.toBe(1);
    await expect(olga.locator('#share-lines').textContent()).resolves.toMatch(
      new RegExp(`^${day.share.matchedLines} of ${day.share.lines} lines `),
    );
    await shot(olga, '2-day-unmatched-line');
    await olga.setViewportSize({ width: 1000, height: 800 });
    await shot(olga, '2-day-unmatched-line-1000px');
    await fitsAt1280(olga, 1000);

    // Match it by hand to the first open settlement, with a note.
    const settlement = day.openSettlements[0]!;
    await lineRow.locator('summary:text("Match by hand")').click();
    await lineRow.locator(`input[name=with][value="${settlement.identity}"]`).check();
    await lineRow.locator('input[name=note]').fill('the bank booked the settlement under another reference');
    await shot(olga, '3-match-form');
    await fitsAt1280(olga);
    await lineRow.locator('button:text("Match")').click();
    await olga.waitForURL(/\?done=match&match=\d+$/);
    const matchId = /match=(\d+)$/.exec(olga.url())![1]!;
    await expect(olga.locator('.notice').textContent()).resolves.toContain(`Match ${matchId} made by hand`);
    await expect(olga.locator(`#unmatched tr[data-line="${line.identity}"]`).count()).resolves.toBe(0);
    const matchRow = olga.locator(`#matches tr[data-match="${matchId}"]`);
    const matchText = (await matchRow.textContent()) ?? '';
    expect(matchText).toContain('manual');
    expect(matchText).toContain('olga');
    expect(matchText).toContain('the bank booked the settlement under another reference');
    expect(matchText).toContain(settlement.settlementId);
    // Matched: the line is in the ledger on its day, still nothing unexplained.
    await expect(olga.locator(`#not-in-ledger tr[data-line="${line.identity}"]`).count()).resolves.toBe(0);
    await expect(olga.locator('#proof-unexplained').textContent()).resolves.toBe('0.00');
    await shot(olga, '4-matched');
    await fitsAt1280(olga);

    // The exception is resolved, its trail naming the match.
    await olga.goto(`${base}/exceptions/${exceptionId}`);
    await expect(olga.locator('#state').textContent()).resolves.toBe('resolved');
    await expect(olga.locator('#resolution').textContent()).resolves.toContain(
      `matched: match ${matchId} (manual)`,
    );
    await expect(olga.locator('table.trail').textContent()).resolves.toContain(
      `matched by hand (match ${matchId}): the bank booked the settlement under another reference`,
    );
    await shot(olga, '5-exception-resolved');

    // Unmatch with a note: the line is unmatched again.
    await olga.goto(dayUrl());
    const again = olga.locator(`#matches tr[data-match="${matchId}"]`);
    await again.locator('input[name=note]').fill('a second look: the line is the rent');
    await again.locator('button:text("Unmatch")').click();
    await olga.waitForURL(/\?done=unmatch&match=\d+$/);
    await expect(olga.locator('.notice').textContent()).resolves.toContain(`Match ${matchId} ended`);
    await expect(olga.locator(`#unmatched tr[data-line="${line.identity}"]`).count()).resolves.toBe(1);
    // The unmatch's reversal counts from the day it was made: on the line's own day the ledger still
    // holds it, and the proof says so (nothing unexplained).
    await expect(olga.locator('#proof-unexplained').textContent()).resolves.toBe('0.00');
    await expect(olga.locator(`#not-in-ledger tr[data-line="${line.identity}"]`).count()).resolves.toBe(0);
    await expect(
      olga.locator(`#unmatched tr[data-line="${line.identity}"] .mark.carried`).textContent(),
    ).resolves.toContain('in the ledger on this day');
    await shot(olga, '6-unmatched-again');
    const ended = await r.t.db
      .selectFrom('matches')
      .select(['ended_by', 'end_note'])
      .where('id', '=', matchId)
      .executeTakeFirstOrThrow();
    expect(ended).toEqual({ ended_by: 'olga', end_note: 'a second look: the line is the rent' });
  });

  it('shows a viewer the day with no forms, and the day before and after', async () => {
    const vera = await signIn('vera');
    await vera.goto(dayUrl());
    await expect(vera.locator('summary:text("Match by hand")').count()).resolves.toBe(0);
    await expect(vera.locator('button:text("Unmatch")').count()).resolves.toBe(0);
    await expect(vera.locator('main').textContent()).resolves.toContain('but not match or unmatch');
    if (day.previous) {
      await vera.click('#previous-day');
      await vera.waitForURL(`${base}/reconciliation/${encodeURIComponent(day.bank.id)}/${day.previous}`);
    }
    await shot(vera, '7-viewer-day-before');
  });
});
