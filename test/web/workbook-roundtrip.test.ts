/**
 * The exception workbook round trip in Chromium: an operator requests the exception workbook on the
 * Reports page and downloads it, fills its Decision and Note columns (exceljs, as a spreadsheet would),
 * and uploads it on the Exceptions page. A row without its note refuses the whole file (the page lists
 * the row and its rule; nothing decided); fixed, keep-ledger resolves one exception and accept-provider
 * proposes the other (nothing booked). A controller downloads a new workbook, approves the proposal in
 * it and uploads it: the ledger books it. A screenshot per step under test-output/web/workbook-roundtrip.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyObservations } from '../../src/db/ledger/service.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { balances } from '../../src/db/read-models/balances.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import type { Observation } from '../../src/domain/observation.ts';
import { ReportRunner } from '../../src/reports/runs.ts';
import { buildWebApp } from '../../src/web/app.ts';
import { hashPassword } from '../../src/web/auth.ts';
import { ledgerWebServices } from '../../src/web/services.ts';
import { obs } from '../db/fixtures.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { fillDecisions, type RowFill } from '../reports/decision-fill.ts';
import { haveChromium as chromiumHere, launchChromium, signIn } from './chromium.ts';

const haveChromium = chromiumHere('the exception workbook round trip');

const OUT = join(process.cwd(), 'test-output', 'web', 'workbook-roundtrip');
const PASSWORD = 'round trip pass phrase';

describe.skipIf(!haveChromium)('the exception workbook round trip in Chromium', () => {
  let t: TestDatabase;
  let dir: string;
  let runner: ReportRunner;
  let app: FastifyInstance;
  let browser: Browser;
  let base: string;
  let operator: Page;
  let controller: Page;
  const ids: Record<string, string> = {};
  const today = new Date().toISOString().slice(0, 10);
  let files = 0;

  const shot = (page: Page, name: string) =>
    page.screenshot({ path: join(OUT, `${name}.png`), fullPage: true });

  const exceptionOf = (account: string) =>
    t.db
      .selectFrom('exceptions')
      .selectAll()
      .where('merchant_account', '=', account)
      .where('type', '=', 'ILLEGAL_TRANSITION')
      .executeTakeFirstOrThrow();

  async function balanceMap(account: string): Promise<Record<string, string>> {
    const out: Record<string, string> = {};
    for (const r of await balances(t.db, { merchantAccount: account })) {
      if (r.balance !== 0n) out[`${r.account}/${r.currency}`] = r.balance.toString();
    }
    return out;
  }

  /** The exception workbook of today, requested on the Reports page and downloaded from its run. */
  async function downloadWorkbook(page: Page, step: string): Promise<Buffer> {
    await page.goto(`${base}/reports`);
    await page.selectOption('select[name=kind]', 'exceptions');
    await page.fill('input[name=from]', today);
    await page.fill('input[name=to]', today);
    await page.click('form.inline button[type=submit]');
    await page.waitForURL(/\/reports\/\d+$/);
    await page.waitForSelector('#status:text("succeeded")', { timeout: 30_000 });
    await shot(page, `${step}-run`);
    const [d] = await Promise.all([
      page.waitForEvent('download'),
      page.click('a[href*="/download/"][href$=".xlsx"]'),
    ]);
    const path = join(dir, `downloaded-${++files}.xlsx`);
    await d.saveAs(path);
    return readFile(path);
  }

  /** Fills the workbook and uploads it on the Exceptions page; the page it lands on. */
  async function upload(page: Page, workbook: Buffer, fills: Record<string, RowFill>, step: string) {
    const filled = await fillDecisions(workbook, fills);
    const path = join(dir, `filled-${++files}.xlsx`);
    await writeFile(path, filled.bytes);
    await page.goto(`${base}/exceptions`);
    await page.setInputFiles('#workbook-upload input[type=file]', path);
    await shot(page, `${step}-upload`);
    await Promise.all([page.waitForLoadState('load'), page.click('#workbook-upload button')]);
    await page.waitForLoadState('load');
    await shot(page, `${step}-after`);
    return filled.rows;
  }

  beforeAll(async () => {
    await rm(OUT, { recursive: true, force: true });
    await mkdir(OUT, { recursive: true });
    t = await createTestDatabase();
    // Three deposits read COMPLETED, then PENDING: an ILLEGAL_TRANSITION each.
    for (const a of ['rt-keep', 'rt-accept', 'rt-left']) {
      await withLedgerTransaction(t.db, (trx) =>
        applyObservations(trx, [
          { ...obs('deposit', `${a}-1`, 'COMPLETED', 1), account: a } as Observation,
          { ...obs('deposit', `${a}-1`, 'PENDING', 2), account: a } as Observation,
        ]),
      );
      ids[a] = (await exceptionOf(a)).id;
    }
    dir = await mkdtemp(join(tmpdir(), 'payrecon-roundtrip-'));
    runner = new ReportRunner({ db: t.db, dir: join(dir, 'runs'), timeZone: 'UTC' });
    const passwordHash = await hashPassword(PASSWORD);
    app = await buildWebApp({
      users: [
        { username: 'finance', passwordHash },
        { username: 'carla', passwordHash, role: 'controller' },
      ],
      sessionSecret: 'roundtrip-test-secret-0123456789-abcdefghij',
      timeZone: 'UTC',
      services: ledgerWebServices(t.db, runner),
    });
    base = await app.listen({ host: '127.0.0.1', port: 0 });
    browser = await launchChromium();
    const context = () =>
      browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
    operator = await (await context()).newPage();
    await signIn(operator, base, 'finance', PASSWORD);
    controller = await (await context()).newPage();
    await signIn(controller, base, 'carla', PASSWORD);
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await runner?.idle();
    await t?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('refuses the whole file when a row breaks a rule, listing the row', async () => {
    const workbook = await downloadWorkbook(operator, '1-operator');
    const rows = await upload(
      operator,
      workbook,
      {
        [ids['rt-keep']!]: { decision: 'keep-ledger', note: 'the provider confirmed the deposit stands' },
        [ids['rt-accept']!]: { decision: 'accept-provider' },
      },
      '2-refused',
    );
    await expect(operator.locator('h1').textContent()).resolves.toBe('Decisions refused');
    expect(await operator.locator('#refused li').allTextContents()).toEqual([
      `Exceptions row ${rows[ids['rt-accept']!]}: Note: required for accept-provider (why the decision is right)`,
    ]);
    for (const a of ['rt-keep', 'rt-accept']) expect((await exceptionOf(a)).state).toBe('open');
  });

  it('keeps one ledger and proposes the other; the controller approves it from a new workbook', async () => {
    const before = await balanceMap('rt-accept');
    const workbook = await downloadWorkbook(operator, '3-operator');
    await upload(
      operator,
      workbook,
      {
        [ids['rt-keep']!]: { decision: 'keep-ledger', note: 'the provider confirmed the deposit stands' },
        [ids['rt-accept']!]: {
          decision: 'accept-provider',
          note: 'the provider reopened it after a chargeback',
        },
      },
      '4-decided',
    );
    expect(operator.url()).toMatch(/\/exceptions\?done=workbook&decided=1&proposed=1/);
    await expect(operator.locator('.notice').first().textContent()).resolves.toContain(
      'Workbook decisions applied: 1 decided, 1 proposed.',
    );
    // The queue: the kept one gone from the unresolved list, the proposed one waiting, the third untouched.
    expect(await operator.locator(`tr[data-exception="${ids['rt-keep']}"]`).count()).toBe(0);
    await expect(
      operator.locator(`tr[data-exception="${ids['rt-accept']}"] .proposed`).textContent(),
    ).resolves.toContain('waiting for approval');
    expect(await operator.locator(`tr[data-exception="${ids['rt-left']}"]`).count()).toBe(1);
    expect(await exceptionOf('rt-keep')).toMatchObject({ state: 'resolved', resolved_by: 'finance' });
    expect(await exceptionOf('rt-accept')).toMatchObject({ state: 'open', proposal: { by: 'finance' } });
    expect(await balanceMap('rt-accept')).toEqual(before);

    const again = await downloadWorkbook(controller, '5-controller');
    await upload(controller, again, { [ids['rt-accept']!]: { decision: 'approve' } }, '6-approved');
    expect(controller.url()).toMatch(/approved=1/);
    expect(await exceptionOf('rt-accept')).toMatchObject({
      state: 'resolved',
      resolved_by: 'carla',
      decision: { decision: 'accept-provider', by: 'carla', proposedBy: 'finance' },
    });
    expect(await balanceMap('rt-accept')).toEqual({});
    expect((await exceptionOf('rt-left')).state).toBe('open');
    await controller.goto(`${base}/exceptions/${ids['rt-accept']}`);
    await shot(controller, '7-approved-exception');
    expect((await verifyLedger(t.db)).failures).toEqual([]);
  });
});
