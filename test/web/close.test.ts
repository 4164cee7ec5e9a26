/**
 * The month close in Chromium: controller ana prepares and signs September 2026 for acme BRL; she is
 * offered no Approve, and her own approval posted all the same is refused on a page in the page's style
 * (403) leading back to the close; an operator sees the close
 * but is offered no action and a posted one is refused; controller bob approves; an entry booked in
 * October with an effect date in September then shows as a post-close adjustment on September's page
 * (whose signed figures and hash stay) and on October's. A screenshot per step under test-output/web/close.
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
import { bookEntry, closeLedger } from '../db/close-fixtures.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { haveChromium as chromiumHere, launchChromium, signIn as signInForm } from './chromium.ts';

const haveChromium = chromiumHere('the month close test');

const OUT = join(process.cwd(), 'test-output', 'web', 'close');
const PASSWORD = 'month close pass phrase';
const SEPTEMBER = '/closes/acme/BRL/2026-09';

describe.skipIf(!haveChromium)('month close in Chromium', () => {
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
    const entry = (...args: Parameters<typeof bookEntry> extends [unknown, ...infer R] ? R : never) =>
      bookEntry(t.db, ...args);
    await entry(
      'deposit',
      '1001',
      'credit',
      [
        ['available', '1000.00'],
        ['deposits', '-1000.00'],
      ],
      '2026-08-10T12:00Z',
    );
    await entry(
      'deposit',
      '1002',
      'credit',
      [
        ['available', '400.00'],
        ['deposits', '-400.00'],
      ],
      '2026-09-05T10:00Z',
    );
    await entry(
      'deposit',
      '1002',
      'fee',
      [
        ['fees', '4.00'],
        ['available', '-4.00'],
      ],
      '2026-09-05T10:00Z',
    );
    await entry(
      'cashout',
      '2001',
      'reserve',
      [
        ['reserved', '300.00'],
        ['available', '-300.00'],
      ],
      '2026-09-20T10:00Z',
    );
    await entry(
      'cashout',
      '2001',
      'settle',
      [
        ['payouts', '300.00'],
        ['reserved', '-300.00'],
      ],
      '2026-10-02T10:00Z',
    );
    // Open at the cut-off: a cashout stuck since 25 September.
    await t.db
      .insertInto('exceptions')
      .values({
        type: 'STUCK',
        merchant_account: 'acme',
        entity_kind: 'cashout',
        entity_id: '2001',
        severity: 'medium',
        first_seen_at: '2026-09-25T10:00Z',
        last_seen_at: '2026-09-25T10:00Z',
        details: {},
      })
      .execute();
    await t.db
      .insertInto('mirrors')
      .values({
        merchant_account: 'acme',
        entity_kind: 'cashout',
        entity_id: '2001',
        currency: 'BRL',
        amount: '300.00',
        details: {},
      })
      .execute();
    dir = await mkdtemp(join(tmpdir(), 'payrecon-close-'));
    runner = new ReportRunner({ db: t.db, dir, timeZone: 'UTC' });
    const passwordHash = await hashPassword(PASSWORD);
    app = await buildWebApp({
      users: [
        { username: 'ana', passwordHash, role: 'controller' },
        { username: 'bob', passwordHash, role: 'controller' },
        { username: 'olga', passwordHash, role: 'operator' },
      ],
      sessionSecret: 'month-close-secret-0123456789-abcdefghijk',
      timeZone: 'UTC',
      services: ledgerWebServices(t.db, runner),
    });
    base = await app.listen({ host: '127.0.0.1', port: 0 });
    browser = await launchChromium();
    for (const user of ['ana', 'bob', 'olga']) pages[user] = await signIn(user);
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await runner?.idle();
    await t?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('lists the months per account and currency and shows September computed now', async () => {
    const ana = pages.ana!;
    await ana.click('header a:text("Closes")');
    await ana.waitForURL(`${base}/closes`);
    await expect(ana.locator(`a[href="${SEPTEMBER}"]`).count()).resolves.toBeGreaterThan(0);
    await shot(ana, '1-list');
    await ana.goto(`${base}${SEPTEMBER}`);
    await expect(ana.locator('#signoff').textContent()).resolves.toContain(
      'computed now from the ledger; not signed',
    );
    await expect(ana.locator('#proof-result').textContent()).resolves.toContain('0.00, it holds');
    const available = await ana.locator('#proof tr:has(td:text-is("available"))').textContent();
    expect(available).toContain('1,000.00'); // opening
    expect(available).toContain('96.00'); // movements: 400 - 4 - 300
    expect(available).toContain('1,096.00'); // closing
    await expect(ana.locator('#in-flight').textContent()).resolves.toContain('cashout 2001');
    const open = (await ana.locator('#exceptions').textContent()) ?? '';
    expect(open).toContain('STUCK');
    expect(open).toMatch(/Total \(1\)\s*300\.00/);
    await shot(ana, '2-september-unsigned');
  });

  it('prepares and signs as ana, and refuses her own approval', async () => {
    const ana = pages.ana!;
    await ana.click('button:text("Prepare and sign")');
    await ana.waitForURL(`${base}${SEPTEMBER}?done=prepare`);
    await expect(ana.locator('.notice').textContent()).resolves.toContain('prepared and signed');
    const signoff = (await ana.locator('#signoff').textContent()) ?? '';
    expect(signoff).toMatch(/Prepared and signed\s*ana/);
    expect(signoff).toMatch(/[0-9a-f]{64}\s*matches the stored figures/);
    await shot(ana, '3-prepared-by-ana');
    // The preparer is offered no Approve; a posted approval is refused on a page leading back to the close.
    await expect(ana.locator('button:text("Approve")').count()).resolves.toBe(0);
    const csrf = (await ana.locator('header input[name=_csrf]').getAttribute('value')) ?? '';
    await ana.evaluate(`(() => {
      const form = document.createElement('form');
      form.method = 'post';
      form.action = ${JSON.stringify(`${base}${SEPTEMBER}/approve`)};
      const input = document.createElement('input');
      input.type = 'hidden';
      input.name = '_csrf';
      input.value = ${JSON.stringify(csrf)};
      form.append(input);
      document.body.append(form);
      form.submit();
    })()`);
    await ana.waitForURL(`${base}${SEPTEMBER}/approve`);
    await ana.waitForLoadState('load');
    await expect(ana.locator('section.problem').getAttribute('data-status')).resolves.toBe('403');
    await expect(ana.locator('h1').textContent()).resolves.toBe('Not allowed');
    await expect(ana.locator('[role=alert]').textContent()).resolves.toContain(
      'a different controller must approve it',
    );
    await expect(ana.locator('section.problem a').getAttribute('href')).resolves.toBe(SEPTEMBER);
    await shot(ana, '4-self-approval-refused');
  });

  it('lets an operator see the close but not act on it', async () => {
    const olga = pages.olga!;
    await olga.goto(`${base}${SEPTEMBER}`);
    await expect(olga.locator('form.actions').count()).resolves.toBe(0);
    await expect(olga.locator('main').textContent()).resolves.toContain(
      'Only a controller can prepare or approve',
    );
    await shot(olga, '5-operator-view');
    // A posted approval (with the operator's own form token) is refused all the same.
    const csrf = await olga.locator('header input[name=_csrf]').getAttribute('value');
    const status = await olga.evaluate(
      async ([url, token]) =>
        (
          await fetch(url as string, {
            method: 'POST',
            headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
            body: `_csrf=${encodeURIComponent(token as string)}`,
          })
        ).status,
      [`${base}${SEPTEMBER}/approve`, csrf],
    );
    expect(status).toBe(403);
  });

  it('approves as bob', async () => {
    const bob = pages.bob!;
    await bob.goto(`${base}${SEPTEMBER}`);
    await bob.click('button:text("Approve")');
    await bob.waitForURL(`${base}${SEPTEMBER}?done=approve`);
    await expect(bob.locator('h1 .badge').textContent()).resolves.toBe('approved');
    await expect(bob.locator('#signoff').textContent()).resolves.toMatch(/Approved\s*bob/);
    await shot(bob, '6-approved-by-bob');
    await bob.goto(`${base}/closes`);
    await expect(bob.locator(`tr:has(a[href="${SEPTEMBER}"])`).first().textContent()).resolves.toContain(
      'approved',
    );
  });

  it('shows an entry booked later with a September effect date as a post-close adjustment', async () => {
    const bob = pages.bob!;
    await bob.goto(`${base}${SEPTEMBER}`);
    const hash = (await bob.locator('#signoff code').textContent()) ?? '';
    const proof = await bob.locator('#proof').textContent();
    await expect(bob.locator('#post-close-none').count()).resolves.toBe(1);
    // A fee on deposit 1002, booked on 10 October with the effect date of 5 September.
    await bookEntry(
      t.db,
      'deposit',
      '1002',
      'fee',
      [
        ['fees', '1.50'],
        ['available', '-1.50'],
      ],
      '2026-10-10T10:00Z',
      'BRL',
      '2026-09-05T10:00Z',
    );
    await bob.reload();
    const late = (await bob.locator('#post-close').textContent()) ?? '';
    expect(late).toContain('deposit 1002');
    expect(late).toContain('-1.50');
    expect(await bob.locator('#signoff code').textContent()).toBe(hash);
    expect(await bob.locator('#proof').textContent()).toBe(proof);
    await expect(bob.locator('#signoff').textContent()).resolves.toContain('matches the stored figures');
    await shot(bob, '7-september-post-close-adjustment');
    await bob.click('.pager a:text("October 2026")');
    await bob.waitForURL(`${base}/closes/acme/BRL/2026-10`);
    const earlier = (await bob.locator('#earlier').textContent()) ?? '';
    expect(earlier).toContain('deposit 1002');
    expect(earlier).toContain('September 2026');
    await expect(bob.locator('#movements').textContent()).resolves.toContain('-1.50');
    await shot(bob, '8-october-with-september-adjustment');
  });
});
