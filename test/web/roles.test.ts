/**
 * Roles on the page in Chromium: a viewer sees the exception queue without its actions and a form
 * posted anyway (with the viewer's own form token) is refused 403 in the page's style, the exception
 * untouched; an operator resolves it. Screenshots under test-output/web/roles.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ReportRunner } from '../../src/reports/runs.ts';
import { buildWebApp } from '../../src/web/app.ts';
import { hashPassword } from '../../src/web/auth.ts';
import { ledgerWebServices } from '../../src/web/services.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { seedBefore, seedPeriod } from '../reports/scenario.ts';
import { haveChromium as chromiumHere, launchChromium, signIn as signInForm } from './chromium.ts';

const haveChromium = chromiumHere('the roles test');

const OUT = join(process.cwd(), 'test-output', 'web', 'roles');
const PASSWORD = 'roles test pass phrase';

describe.skipIf(!haveChromium)('roles in Chromium', () => {
  let t: TestDatabase;
  let dir: string;
  let runner: ReportRunner;
  let app: FastifyInstance;
  let browser: Browser;
  let base: string;

  async function signIn(page: Page, username: string): Promise<void> {
    await signInForm(page, base, username, PASSWORD);
  }

  const stateOf = async (id: string) =>
    (await sql<{ state: string }>`SELECT state FROM exceptions WHERE id = ${id}`.execute(t.db)).rows[0]
      ?.state;

  beforeAll(async () => {
    await mkdir(OUT, { recursive: true });
    t = await createTestDatabase();
    await seedBefore(t.db);
    await seedPeriod(t.db);
    dir = await mkdtemp(join(tmpdir(), 'payrecon-roles-'));
    runner = new ReportRunner({ db: t.db, dir, timeZone: 'UTC' });
    const hash = await hashPassword(PASSWORD);
    app = await buildWebApp({
      users: [
        { username: 'vera', passwordHash: hash, role: 'viewer' },
        { username: 'otto', passwordHash: hash, role: 'operator' },
      ],
      sessionSecret: 'roles-test-secret-0123456789-abcdefghijklmn',
      timeZone: 'UTC',
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

  it('a viewer reads the queue without actions, and a posted action is refused', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await signIn(page, 'vera');
    await page.goto(`${base}/exceptions`);
    await expect(page.locator('header .who').textContent()).resolves.toContain('vera (viewer)');
    const row = page.locator('tr[data-exception]', { hasText: 'EARLY_RELEASE_REVERSED' });
    const id = (await row.getAttribute('data-exception')) ?? '';
    expect(id).not.toBe('');
    expect(await row.locator('button').count()).toBe(0);
    await page.screenshot({ path: join(OUT, 'viewer-queue.png'), fullPage: true });

    // The viewer's own form token (from the sign-out form), posted by hand: refused by role, not by CSRF.
    const token = await page.locator('header input[name=_csrf]').inputValue();
    const before = await stateOf(id);
    await page.setContent(
      `<form method="post" action="${base}/exceptions/${id}"><input name="_csrf" value="${token}"><input name="action" value="resolve"><button>go</button></form>`,
    );
    const [response] = await Promise.all([page.waitForNavigation(), page.click('button')]);
    expect(response?.status()).toBe(403);
    await expect(page.locator('h1').textContent()).resolves.toBe('Not allowed');
    await expect(page.locator('[role=alert]').textContent()).resolves.toContain('viewer');
    await page.screenshot({ path: join(OUT, 'viewer-refused.png'), fullPage: true });
    expect(await stateOf(id)).toBe(before);
    expect(before).not.toBe('resolved');
    await context.close();
  });

  it('an operator resolves the same exception', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await signIn(page, 'otto');
    await page.goto(`${base}/exceptions`);
    const row = page.locator('tr[data-exception]', { hasText: 'EARLY_RELEASE_REVERSED' });
    const id = (await row.getAttribute('data-exception')) ?? '';
    await row.locator('input[name=note]').fill('Checked with the provider');
    await row.locator('button[value=resolve]').click();
    await page.waitForURL(/\/exceptions\?done=resolve/);
    await page.screenshot({ path: join(OUT, 'operator-resolved.png'), fullPage: true });
    expect(await stateOf(id)).toBe('resolved');
    await context.close();
  });
});
