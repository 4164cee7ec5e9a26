/**
 * The Imports page over real HTTP against a real ledger database: an operator signed in uploads a
 * camt.053 statement through the multipart form (its CSRF token among the fields) and sees its counts and
 * what the matching run it started found; the same file again adds 0 lines and starts no run; an upload
 * whose run goes away is shown as not matched yet; a file that does not balance shows its one line and
 * imports nothing; a viewer's upload is refused 403, as is a form without its token. Then Chromium walks
 * the page at 1280x800: upload, the counts and matching, the import's detail, a settlement report whose
 * run matches a bank line by rule, the list's Matching column (the list fits the width), a refusal, a
 * viewer's read-only view; screenshots under test-output/web/imports.
 */
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { importService, matcherFrom } from '../../src/import-service.ts';
import { ReportRunner } from '../../src/reports/runs.ts';
import { buildWebApp } from '../../src/web/app.ts';
import { hashPassword } from '../../src/web/auth.ts';
import { ledgerImportServices } from '../../src/web/import-services.ts';
import { ledgerWebServices } from '../../src/web/services.ts';
import { createTestDatabase, holdMatchingLock, type TestDatabase } from '../db/helpers.ts';
import { haveChromium as chromiumHere, launchChromium, signIn as signInForm } from './chromium.ts';

const OUT = join(process.cwd(), 'test-output', 'web', 'imports');
const PASSWORD = 'imports test pass phrase';
const FIXTURE = join(import.meta.dirname, '../imports/fixtures/camt053-001-08.xml');
const BANK_ACCOUNTS = [
  { id: 'DE89370400440532013000', currency: 'EUR', account: 'acme', name: 'Main account' },
  { id: '0532013001', currency: 'USD', account: 'acme', name: 'Dollar account' },
];

/** The provider's settlements the fixture's batch credit pays (its end-to-end ids STL-S1 and STL-S2). */
const SETTLEMENTS = [
  'settlement_id,account,period_start,period_end,currency,gross,fees,settlement_currency,rate,net,value_date,bank_reference',
  'STL-S1,acme,2026-11-26T00:00:00Z,2026-11-27T00:00:00Z,EUR,1010.00,10.00,EUR,1,1000.00,2026-11-27,',
  'STL-S2,acme,2026-11-26T00:00:00Z,2026-11-27T00:00:00Z,EUR,505.00,5.00,EUR,1,500.00,2026-11-27,',
].join('\n');

let t: TestDatabase;
let dir: string;
let runner: ReportRunner;
let app: FastifyInstance;
let base: string;

/** Cookies of one client, kept across requests. */
class Jar {
  readonly cookies = new Map<string, string>();
  get header(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }
  take(res: Response): Response {
    for (const line of res.headers.getSetCookie()) {
      const [pair = ''] = line.split(';');
      const eq = pair.indexOf('=');
      const value = pair.slice(eq + 1);
      if (value === '' || /Max-Age=0|Expires=Thu, 01 Jan 1970/i.test(line))
        this.cookies.delete(pair.slice(0, eq));
      else this.cookies.set(pair.slice(0, eq), value);
    }
    return res;
  }
}

const csrfOf = (html: string) => /name="_csrf" value="([^"]+)"/.exec(html)?.[1] ?? '';

async function signIn(username: string): Promise<Jar> {
  const jar = new Jar();
  const form = await jar.take(await fetch(`${base}/login`)).text();
  const res = jar.take(
    await fetch(`${base}/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: jar.header, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ _csrf: csrfOf(form), username, password: PASSWORD }).toString(),
    }),
  );
  expect(res.status).toBe(303);
  return jar;
}

async function upload(
  jar: Jar,
  fields: Record<string, string>,
  file: { name: string; bytes: Uint8Array } | null,
  csrf?: string,
): Promise<{ status: number; body: string; url: string }> {
  const page = await (
    await fetch(`${base}/imports`, { headers: { cookie: jar.header, accept: 'text/html' } })
  ).text();
  const form = new FormData();
  form.append('_csrf', csrf ?? csrfOf(page));
  for (const [k, v] of Object.entries(fields)) form.append(k, v);
  if (file) form.append('file', new Blob([file.bytes]), file.name);
  const res = await fetch(`${base}/imports`, {
    method: 'POST',
    headers: { cookie: jar.header, accept: 'text/html' },
    body: form,
  });
  return { status: res.status, body: await res.text(), url: res.url };
}

async function importCount(): Promise<number> {
  const row = await t.db
    .selectFrom('imports')
    .select((eb) => eb.fn.countAll().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

beforeAll(async () => {
  t = await createTestDatabase();
  dir = await mkdtemp(join(tmpdir(), 'payrecon-imports-page-'));
  runner = new ReportRunner({ db: t.db, dir, timeZone: 'UTC' });
  const hash = await hashPassword(PASSWORD);
  app = await buildWebApp({
    users: [
      { username: 'vera', passwordHash: hash, role: 'viewer' },
      { username: 'otto', passwordHash: hash, role: 'operator' },
      { username: 'ana', passwordHash: hash, role: 'controller' },
    ],
    sessionSecret: 'imports-test-secret-0123456789-abcdefghijkl',
    timeZone: 'UTC',
    services: {
      ...ledgerWebServices(t.db, runner),
      imports: ledgerImportServices(t.db, {
        run: importService(t.db, BANK_ACCOUNTS, [], matcherFrom(loadConfig({}))),
        maxBytes: 1024 * 1024,
      }),
    },
  });
  base = await app.listen({ host: '127.0.0.1', port: 0 });
}, 60_000);

afterAll(async () => {
  await app?.close();
  await runner?.idle();
  await t?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('the Imports page over HTTP', () => {
  it('an operator uploads a statement and sees its counts; again adds 0 lines', async () => {
    const bytes = new Uint8Array(await readFile(FIXTURE));
    const jar = await signIn('otto');
    const first = await upload(jar, { kind: 'bank-statement' }, { name: 'camt-08.xml', bytes });
    // Followed from the 303 to the list with the result.
    expect(first.status, first.body.slice(0, 500)).toBe(200);
    expect(first.url).toMatch(/\/imports\?imported=\d+$/);
    expect(first.body).toContain('Imported: camt-08.xml');
    // The statement's balances, exact beyond a double's precision, and its new lines.
    expect(first.body).toContain('12345678901234567.89');
    const news = [...first.body.matchAll(/data-new="(\d+)"/g)].map((m) => Number(m[1]));
    expect(news).toHaveLength(2);
    expect(news.reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
    expect(await importCount()).toBe(1);
    // What the run the new lines started found: no settlement to match yet, so its lines are left and raised.
    expect(first.body).toContain('<h3>Matching after this import</h3>');
    expect(first.body).toContain('No new match.');
    expect(Number(/data-unmatched="bankLines">(\d+)</.exec(first.body)?.[1])).toBeGreaterThan(0);
    expect(first.body).toContain('href="/exceptions?type=BANK_LINE_UNMATCHED"');

    const dry = await upload(jar, { kind: 'bank-statement', dryRun: '1' }, { name: 'dry.xml', bytes });
    expect(dry.status).toBe(200);
    expect(dry.body).toContain('Checked (nothing imported): dry.xml');
    expect(await importCount()).toBe(1);

    const again = await upload(jar, { kind: 'bank-statement' }, { name: 'camt-08-again.xml', bytes });
    expect(again.status).toBe(200);
    expect([...again.body.matchAll(/data-new="(\d+)"/g)].map((m) => m[1])).toEqual(['0', '0']);
    expect(again.body).toContain('No new lines: this import started no matching run.');

    const list = await (
      await fetch(`${base}/imports`, { headers: { cookie: jar.header, accept: 'text/html' } })
    ).text();
    expect(list).toContain('camt-08-again.xml');
    expect(list).toContain('otto');
    const id =
      /href="\/imports\/(\d+)">#\1<\/a><\/td><td>Bank statement<\/td><td class="file">camt-08\.xml</.exec(
        list,
      )?.[1];
    expect(id).toBeDefined();
    const detail = await fetch(`${base}/imports/${id}`, {
      headers: { cookie: jar.header, accept: 'text/html' },
    });
    expect(detail.status).toBe(200);
    const html = await detail.text();
    expect(html).toContain('DE89370400440532013000');
    expect(html).toContain('id="lines"');
    expect(html).toContain('<h2>Matching after this import</h2>');
    expect(html).toMatch(/data-type="BANK_LINE_UNMATCHED">\d+</);
    // The list's Matching column: the first import's counts, the second's "no new lines".
    expect(list).toContain('<th>Matching</th>');
    expect(list).toMatch(
      /<td class="matching"><span>0 matched<\/span> · <span>\d+ unmatched<\/span> · <span>\d+ exceptions<\/span><\/td>/,
    );
    expect(list).toContain('<td class="matching"><span class="muted">no new lines</span></td>');
  });

  it('an upload whose matching run goes away is recorded, shown as not matched yet', async () => {
    const text = (await readFile(FIXTURE, 'utf8'))
      .replaceAll('STMT-20261127-', 'STMT-20261126-')
      .replaceAll('BNK-', 'BNK0-');
    const jar = await signIn('otto');
    const before = await importCount();
    const lock = await holdMatchingLock(t);
    let res: Awaited<ReturnType<typeof upload>>;
    try {
      const uploading = upload(
        jar,
        { kind: 'bank-statement' },
        { name: 'cut-off.xml', bytes: new TextEncoder().encode(text) },
      );
      await lock.dropWaitingRun();
      res = await uploading;
    } finally {
      await lock.release();
    }
    expect(res.status, res.body.slice(0, 500)).toBe(200);
    expect(res.body).toContain('Imported: cut-off.xml');
    expect(res.body).toContain('Not matched yet: the next matching run takes its lines.');
    expect(await importCount()).toBe(before + 1);
    expect(res.body).toMatch(
      /cut-off\.xml<\/td>.*?<td class="matching"><span class="muted" title="Not matched yet: the next matching run takes its lines\.">not matched yet<\/span><\/td>/s,
    );
  });

  it('a file that does not balance shows its one line and imports nothing', async () => {
    const text = (await readFile(FIXTURE, 'utf8')).replace('12345678901234567.89', '12345678901234568.89');
    const jar = await signIn('ana');
    const before = await importCount();
    const res = await upload(
      jar,
      { kind: 'bank-statement' },
      { name: 'bad.xml', bytes: new TextEncoder().encode(text) },
    );
    expect(res.status).toBe(422);
    expect(res.body).toMatch(/Nothing imported\. bad\.xml: statement 1[^<]*balance/);
    expect(await importCount()).toBe(before);
  });

  it('a viewer reads the imports but an upload is refused; a form without its token too', async () => {
    const bytes = new Uint8Array(await readFile(FIXTURE));
    const viewer = await signIn('vera');
    const page = await (
      await fetch(`${base}/imports`, { headers: { cookie: viewer.header, accept: 'text/html' } })
    ).text();
    expect(page).toContain('camt-08.xml');
    expect(page).not.toContain('enctype="multipart/form-data"');
    const before = await importCount();
    const refused = await upload(viewer, { kind: 'bank-statement' }, { name: 'v.xml', bytes });
    expect(refused.status).toBe(403);
    expect(refused.body).toContain('Your role (viewer) cannot do this.');
    const operator = await signIn('otto');
    const noToken = await upload(operator, { kind: 'bank-statement' }, { name: 'o.xml', bytes }, 'forged');
    expect(noToken.status).toBe(403);
    expect(await importCount()).toBe(before);
  });
});

const haveChromium = chromiumHere('the Imports page in Chromium');

describe.skipIf(!haveChromium)('the Imports page in Chromium', () => {
  let browser: Browser;

  beforeAll(async () => {
    await mkdir(OUT, { recursive: true });
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
  });

  it('uploads a statement, shows its counts and matching, and opens its detail', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    await signInForm(page, base, 'otto', PASSWORD);
    await page.click('header a[href="/imports"]');
    await page.waitForURL(`${base}/imports`);
    await page.screenshot({ path: join(OUT, 'imports-list.png'), fullPage: true });

    const text = (await readFile(FIXTURE, 'utf8'))
      .replaceAll('STMT-20261127-', 'STMT-20261128-')
      .replaceAll('BNK-', 'BNK2-');
    await page.selectOption('select[name=kind]', 'bank-statement');
    await page.setInputFiles('input[name=file]', {
      name: 'statement-2026-11-28.xml',
      mimeType: 'application/xml',
      buffer: Buffer.from(text),
    });
    // The upload leads to the list with its result: a reload uploads nothing again.
    await Promise.all([
      page.waitForURL(/\/imports\?imported=\d+$/),
      page.click('form.imports-form button[type=submit]'),
    ]);
    const result = page.locator('#result');
    await expect(result.locator('h2').textContent()).resolves.toContain('Imported: statement-2026-11-28.xml');
    const fresh = await result
      .locator('td[data-new]')
      .evaluateAll((tds) => tds.map((td) => td.getAttribute('data-new')));
    expect(fresh).toHaveLength(2);
    // The matching run at once: nothing to match the credits with yet, so they are left and raised.
    await expect(result.locator('#matching section').first().textContent()).resolves.toContain(
      'No new match.',
    );
    expect(Number(await result.locator('td[data-unmatched=bankLines]').textContent())).toBeGreaterThan(0);
    expect(await result.locator('td[data-type=BANK_LINE_UNMATCHED]').count()).toBe(1);
    await page.screenshot({ path: join(OUT, 'imports-uploaded.png'), fullPage: true });

    await Promise.all([
      page.waitForURL(/\/imports\/\d+$/),
      result.locator('a', { hasText: 'Open import' }).click(),
    ]);
    await expect(page.locator('h1').textContent()).resolves.toContain('statement-2026-11-28.xml');
    expect(await page.locator('#statements tbody tr').count()).toBe(2);
    await expect(page.locator('h2', { hasText: 'Matching after this import' }).count()).resolves.toBe(1);
    expect(await page.locator('#matching td[data-type=BANK_LINE_UNMATCHED]').count()).toBe(1);
    await page.screenshot({ path: join(OUT, 'import-detail.png'), fullPage: true });

    // The provider's settlement report: its run matches a bank credit to the two settlements its
    // end-to-end ids name, by the rule bank-reference, and resolves that line's exception.
    await page.goto(`${base}/imports`);
    await page.selectOption('select[name=kind]', 'provider-settlements');
    await page.setInputFiles('input[name=file]', {
      name: 'settlements-2026-11-27.csv',
      mimeType: 'text/csv',
      buffer: Buffer.from(SETTLEMENTS),
    });
    await Promise.all([
      page.waitForURL(/\/imports\?imported=\d+$/),
      page.click('form.imports-form button[type=submit]'),
    ]);
    await expect(result.locator('td[data-rule=bank-reference]').textContent()).resolves.toBe('1');
    expect(Number(await result.locator('[data-resolved]').textContent())).toBeGreaterThan(0);
    await page.screenshot({ path: join(OUT, 'imports-matched.png'), fullPage: true });
    await Promise.all([
      page.waitForURL(/\/imports\/\d+$/),
      result.locator('a', { hasText: 'Open import' }).click(),
    ]);
    await expect(page.locator('#matched-by-rule td[data-rule=bank-reference]').textContent()).resolves.toBe(
      '1',
    );
    await page.screenshot({ path: join(OUT, 'import-detail-matched.png'), fullPage: true });
    // An exception type leads to the queue filtered by it.
    const typeLink = page.locator('#exceptions-by-type a').first();
    const type = (await typeLink.textContent()) ?? '';
    await Promise.all([page.waitForURL(/\/exceptions\?type=/), typeLink.click()]);
    expect(new URL(page.url()).searchParams.get('type')).toBe(type);

    // The list: a Matching column, each import's run in one short cell, and nothing cut at 1280 px.
    await page.goto(`${base}/imports`);
    const headers = await page.locator('#imports thead th').allTextContents();
    expect(headers).toContain('Matching');
    const cells = await page.locator('#imports tbody td.matching').allTextContents();
    expect(cells[0]).toMatch(/^1 matched · \d+ unmatched · \d+ exceptions$/);
    expect(cells).toContain('no new lines');
    expect(cells).toContain('not matched yet');
    await page.screenshot({ path: join(OUT, 'imports-list-matching.png'), fullPage: true });
    const widths = await page.evaluate<{ page: number; main: number; lastRight: number }>(`(() => {
      const main = document.querySelector('main');
      const last = document.querySelector('#imports thead th:last-child').getBoundingClientRect();
      return { page: document.documentElement.scrollWidth, main: main.scrollWidth - main.clientWidth, lastRight: last.right };
    })()`);
    expect(widths.page).toBeLessThanOrEqual(1280);
    expect(widths.main).toBeLessThanOrEqual(0);
    expect(widths.lastRight).toBeLessThanOrEqual(1280);

    // A refusal in the page: its one line, nothing imported.
    await page.setInputFiles('input[name=file]', {
      name: 'broken.xml',
      mimeType: 'application/xml',
      buffer: Buffer.from(text.slice(0, 300)),
    });
    await page.click('form.imports-form button[type=submit]');
    await expect(page.locator('[role=alert]').textContent()).resolves.toMatch(
      /^Nothing imported\. broken\.xml: /,
    );
    await page.screenshot({ path: join(OUT, 'imports-refused.png'), fullPage: true });
    await context.close();
  }, 60_000);

  it('shows a viewer the imports without the upload form', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    await signInForm(page, base, 'vera', PASSWORD);
    await page.goto(`${base}/imports`);
    expect(await page.locator('form.imports-form').count()).toBe(0);
    await expect(page.locator('main p.muted').first().textContent()).resolves.toContain('Your role (viewer)');
    expect(await page.locator('#imports tbody tr').count()).toBeGreaterThan(0);
    await page.screenshot({ path: join(OUT, 'imports-viewer.png'), fullPage: true });
    await context.close();
  });
});
