/**
 * Page basics in Chromium (playwright-core): the default period is this month up to today; after an
 * invalid period the form keeps what was typed; an unknown path shows the page's own 404 (a JSON
 * client still gets JSON); a session survives a restart of the server on the same data directory,
 * whose secret file is mode 0600. Each flow saves a screenshot under test-output/web/page-basics.
 */
import { mkdir, mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localDate } from '../../src/domain/zoned-time.ts';
import { ReportRunner } from '../../src/reports/runs.ts';
import { buildWebApp } from '../../src/web/app.ts';
import { hashPassword, type WebUser } from '../../src/web/auth.ts';
import { ledgerWebServices } from '../../src/web/services.ts';
import { resolveSessionSecret, SESSION_SECRET_FILE } from '../../src/web/session-secret.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { haveChromium as chromiumHere, launchChromium, signIn as signInForm } from './chromium.ts';

const haveChromium = chromiumHere('the page-basics test');

const TZ = 'America/Sao_Paulo';
const OUT = join(process.cwd(), 'test-output', 'web', 'page-basics');
const PASSWORD = 'page basics pass phrase';

describe.skipIf(!haveChromium)('page basics in Chromium', () => {
  let t: TestDatabase;
  let dataDir: string;
  let runner: ReportRunner;
  let users: WebUser[];
  let app: FastifyInstance | undefined;
  let browser: Browser;

  /** Starts the page the way `payrecon web` does: the session secret resolved from the data directory. */
  async function start(): Promise<string> {
    app = await buildWebApp({
      users,
      sessionSecret: await resolveSessionSecret(null, dataDir),
      timeZone: TZ,
      services: ledgerWebServices(t.db, runner),
    });
    return app.listen({ host: '127.0.0.1', port: 0 });
  }

  async function stop(): Promise<void> {
    await app?.close();
    app = undefined;
  }

  async function signIn(page: Page, base: string): Promise<void> {
    await signInForm(page, base, 'finance', PASSWORD);
  }

  const shot = (page: Page, name: string) =>
    page.screenshot({ path: join(OUT, `${name}.png`), fullPage: true });

  beforeAll(async () => {
    await mkdir(OUT, { recursive: true });
    t = await createTestDatabase();
    dataDir = await mkdtemp(join(tmpdir(), 'payrecon-page-basics-'));
    runner = new ReportRunner({ db: t.db, dir: join(dataDir, 'reports'), timeZone: TZ });
    users = [{ username: 'finance', passwordHash: await hashPassword(PASSWORD) }];
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await runner?.idle();
    await t?.drop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it('defaults the period to this month up to today and keeps a bad period as typed', async () => {
    const base = await start();
    const context = await browser.newContext();
    const page = await context.newPage();
    await signIn(page, base);
    await page.goto(`${base}/reports`);
    const today = localDate(new Date(), TZ);
    expect(await page.inputValue('input[name=from]')).toBe(`${today.slice(0, 8)}01`);
    expect(await page.inputValue('input[name=to]')).toBe(today);

    await page.selectOption('select[name=kind]', 'exceptions');
    await page.fill('input[name=from]', '2026-10-20');
    await page.fill('input[name=to]', '2026-10-05');
    await page.click('form.inline button[type=submit]');
    await expect(page.locator('[role=alert]').textContent()).resolves.toContain(
      'the first not after the second',
    );
    expect(await page.inputValue('input[name=from]')).toBe('2026-10-20');
    expect(await page.inputValue('input[name=to]')).toBe('2026-10-05');
    expect(await page.inputValue('select[name=kind]')).toBe('exceptions');
    await shot(page, 'bad-period-keeps-input');
    await context.close();
    await stop();
  });

  it('shows an unknown path as the page’s own 404, signed in or not; a JSON client gets JSON', async () => {
    const base = await start();
    const context = await browser.newContext();
    const page = await context.newPage();
    const anonymous = await page.goto(`${base}/no/such/page`);
    expect(anonymous?.status()).toBe(404);
    await expect(page.locator('h1').textContent()).resolves.toBe('Page not found');
    await signIn(page, base);
    const signedIn = await page.goto(`${base}/nowhere?x=1`);
    expect(signedIn?.status()).toBe(404);
    expect(signedIn?.headers()['content-type']).toContain('text/html');
    await expect(page.locator('h1').textContent()).resolves.toBe('Page not found');
    // The page's style sheet and header apply: the 404 is a page of the site, not raw JSON.
    await expect(page.locator('header a', { hasText: 'Reports' }).count()).resolves.toBe(1);
    const background = await page.evaluate<string>(
      "getComputedStyle(document.querySelector('header')).backgroundColor",
    );
    expect(background).toBe('rgb(29, 42, 68)');
    await shot(page, 'not-found');

    const missingRun = await page.goto(`${base}/reports/424242`);
    expect(missingRun?.status()).toBe(404);
    await expect(page.locator('h1').textContent()).resolves.toBe('Report not found');

    const json = await context.request.get(`${base}/no/such/page`, {
      headers: { accept: 'application/json' },
    });
    expect(json.status()).toBe(404);
    expect(await json.json()).toMatchObject({ statusCode: 404, error: 'Not Found' });
    await context.close();
    await stop();
  });

  it('keeps a session across a restart on the same data directory; the secret file is 0600', async () => {
    let base = await start();
    const context = await browser.newContext();
    const page = await context.newPage();
    await signIn(page, base);
    const info = await stat(join(dataDir, SESSION_SECRET_FILE));
    expect(info.mode & 0o777).toBe(0o600);
    await stop();

    base = await start();
    await page.goto(`${base}/balances`);
    expect(new URL(page.url()).pathname).toBe('/balances');
    await expect(page.locator('h1').textContent()).resolves.toBe('Balances');
    await expect(page.locator('header .who').textContent()).resolves.toContain('finance');
    await shot(page, 'session-after-restart');

    // A configured secret still wins: the cookie signed with the file's secret is then refused.
    await stop();
    app = await buildWebApp({
      users,
      sessionSecret: await resolveSessionSecret('a-configured-secret-that-wins-0123456789', dataDir),
      timeZone: TZ,
      services: ledgerWebServices(t.db, runner),
    });
    base = await app.listen({ host: '127.0.0.1', port: 0 });
    await page.goto(`${base}/balances`);
    expect(new URL(page.url()).pathname).toBe('/login');
    await context.close();
  });
});
