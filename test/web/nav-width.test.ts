/**
 * Every page of the navigation at 1280x800 in Chromium, and the first page each one links into (a report
 * run, an exception, a close, a payment): nothing scrolls sideways, neither the page nor its main area.
 * A screenshot per page under test-output/web/nav-width.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordImport } from '../../src/db/imports/service.ts';
import { localDate } from '../../src/domain/zoned-time.ts';
import { importService } from '../../src/import-service.ts';
import { ReportRunner } from '../../src/reports/runs.ts';
import { buildWebApp } from '../../src/web/app.ts';
import { hashPassword } from '../../src/web/auth.ts';
import { ledgerImportServices } from '../../src/web/import-services.ts';
import { ledgerWebServices } from '../../src/web/services.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { seedBefore, seedPeriod } from '../reports/scenario.ts';
import { haveChromium, launchChromium, signIn } from './chromium.ts';

const withChromium = haveChromium('the page width test');

const OUT = join(process.cwd(), 'test-output', 'web', 'nav-width');
const PASSWORD = 'nav width pass phrase';
const TZ = 'UTC';

/** Bank accounts named as the sandbox names them (IBANs), one per currency. */
const BANKS = ['BRL', 'CLP', 'COP', 'MXN', 'PEN'].map((currency, i) => ({
  id: `NL${13 + i}SBOX83743435${50 + i}`,
  currency,
  account: 'sandbox',
  name: `sandbox settlement account (${currency})`,
}));

/** Imports as the settlement fetch brings them: long file names, a statement of five bank accounts. */
async function seedImports(db: TestDatabase['db']): Promise<void> {
  await recordImport(db, {
    kind: 'provider-transactions',
    fileName: 'transactions-sandbox-2026-11-28-2026-11-29.csv',
    sha256: 'd'.repeat(64),
    profile: null,
    importedBy: 'job:settlement-fetch',
    rows: [],
  });
  await recordImport(db, {
    kind: 'bank-statement',
    fileName: 'statement-sandbox-2026-12-05.xml',
    sha256: 'e'.repeat(64),
    profile: null,
    importedBy: 'job:settlement-fetch',
    statements: BANKS.map((b, i) => ({
      statementId: `STMT-${b.id}-2026-12-05`,
      format: 'camt.053.001.08',
      bankAccount: b.id,
      currency: b.currency,
      opening: '65477.93',
      closing: '65881.59',
      credits: '403.66',
      debits: '0.00',
      booked: 1,
      pending: 0,
      closingDate: '2026-12-05',
      lines: [
        {
          identity: `line-${i}`,
          content_hash: `h-${i}`,
          bank_account: b.id,
          currency: b.currency,
          reference: `BK00000000${30 + i}`,
          booking_date: '2026-12-05',
          value_date: '2026-12-05',
          amount: '403.66',
          reversal: false,
          end_to_end_ids: [],
          counterparty: 'Smith & Sons Lettings <Unit 4>',
          description: 'Own account transfer',
          transactions: [],
        },
      ],
    })),
  });
}

interface Widths {
  path: string;
  page: number;
  window: number;
  main: number;
  mainVisible: number;
}

describe.skipIf(!withChromium)('every page at 1280x800', () => {
  let t: TestDatabase;
  let dir: string;
  let runner: ReportRunner;
  let app: FastifyInstance;
  let browser: Browser;
  let base: string;
  let page: Page;

  async function widths(path: string): Promise<Widths> {
    await page.goto(`${base}${path}`);
    // An expression, not a function: this project's TypeScript has no DOM types.
    const w = (await page.evaluate(`({
      page: document.documentElement.scrollWidth,
      window: document.documentElement.clientWidth,
      main: document.querySelector('main')?.scrollWidth ?? 0,
      mainVisible: document.querySelector('main')?.clientWidth ?? 0,
    })`)) as Omit<Widths, 'path'>;
    await page.screenshot({
      path: join(OUT, `${path.replace(/^\//, '').replace(/[^a-z0-9]+/gi, '-') || 'root'}.png`),
      fullPage: true,
    });
    return { path, ...w };
  }

  beforeAll(async () => {
    await rm(OUT, { recursive: true, force: true });
    await mkdir(OUT, { recursive: true });
    t = await createTestDatabase();
    await seedBefore(t.db);
    await seedPeriod(t.db);
    await seedImports(t.db);
    dir = await mkdtemp(join(tmpdir(), 'payrecon-nav-width-'));
    runner = new ReportRunner({ db: t.db, dir, timeZone: TZ });
    const today = localDate(new Date(), TZ);
    const run = await runner.start(
      { kind: 'settlement', from: today, to: today, account: null },
      { trigger: 'demand', requestedBy: 'finance' },
    );
    await run?.done;
    app = await buildWebApp({
      users: [{ username: 'finance', passwordHash: await hashPassword(PASSWORD), role: 'controller' }],
      sessionSecret: 'nav-width-test-secret-0123456789-abcdefgh',
      timeZone: TZ,
      services: {
        ...ledgerWebServices(t.db, runner, undefined, { accounts: () => BANKS }),
        imports: ledgerImportServices(t.db, { run: importService(t.db, BANKS), maxBytes: 1024 * 1024 }),
      },
    });
    base = await app.listen({ host: '127.0.0.1', port: 0 });
    browser = await launchChromium();
    page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
    await signIn(page, base, 'finance', PASSWORD);
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await runner?.idle();
    await t?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('scrolls no page sideways, nor its main area', async () => {
    const hrefs = async (selector: string) =>
      Promise.all(
        (await page.locator(selector).all()).map(
          async (a) => new URL((await a.getAttribute('href')) ?? '', base).pathname,
        ),
      );
    const nav = await hrefs('header > a[href]');
    expect(nav.length).toBeGreaterThanOrEqual(4);
    const paths = [...nav];
    for (const p of nav) {
      await page.goto(`${base}${p}`);
      // The first link of the page's main area one level down (a run, an exception, a close).
      const inner = (await hrefs('main a[href]')).find(
        (h) => h.startsWith(`${p}/`) && !h.includes('/download/') && !h.endsWith('/export'),
      );
      if (inner) paths.push(inner);
    }
    paths.push('/payments/acme/cashout/2003', '/payments?q=no-such-id');
    const measured: Widths[] = [];
    for (const p of paths) measured.push(await widths(p));
    const wide = measured.filter((w) => w.page > w.window || w.main > w.mainVisible);
    expect(wide, JSON.stringify(measured, null, 1)).toEqual([]);
    expect(measured.length).toBeGreaterThanOrEqual(nav.length + 2);
  });
});
