/**
 * An operator's decisions in Chromium (accepting the provider's is proposed by the operator and
 * approved by a controller on her own page): an ILLEGAL_TRANSITION (a deposit read COMPLETED,
 * then PENDING) and a FACTS_CHANGED (a deposit completed in BRL, then read completed in MXN for another
 * amount) are each decided from their page, once by accepting the provider's status or facts and once by
 * keeping the ledger's, with a note. Afterwards the page shows the state, who and why, in its resolution
 * and its audit trail; the ledger booked to match on "accept" (every entry booked names who and why, on the
 * payment's page too) and nothing on "keep"; `db verify` (verifyLedger) stays clean; the same refused
 * reading seen again leaves the decision standing, and a new one reopens it saying what changed. A
 * screenshot per step under test-output/web/decisions.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyObservations, recordIntents } from '../../src/db/ledger/service.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { balances } from '../../src/db/read-models/balances.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import type { Observation } from '../../src/domain/observation.ts';
import { ReportRunner } from '../../src/reports/runs.ts';
import { buildWebApp } from '../../src/web/app.ts';
import { hashPassword } from '../../src/web/auth.ts';
import { ledgerWebServices } from '../../src/web/services.ts';
import { intent, obs } from '../db/fixtures.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { haveChromium as chromiumHere, launchChromium, signIn } from './chromium.ts';

const haveChromium = chromiumHere('the exception decisions test');

const OUT = join(process.cwd(), 'test-output', 'web', 'decisions');
const PASSWORD = 'decisions pass phrase';

describe.skipIf(!haveChromium)("an operator's decisions in Chromium", () => {
  let t: TestDatabase;
  let dir: string;
  let runner: ReportRunner;
  let app: FastifyInstance;
  let browser: Browser;
  let base: string;
  let page: Page;
  /** The controller's page (carla), who approves what finance proposes. */
  let controllerPage: Page;
  const shot = (name: string) => page.screenshot({ path: join(OUT, `${name}.png`), fullPage: true });
  const apply = (o: Observation[]) => withLedgerTransaction(t.db, (trx) => applyObservations(trx, o));

  /** Each entity's own account, so its balances are its own. */
  const dep = (
    account: string,
    id: string,
    status: string,
    minute: number,
    extra: Partial<Observation> = {},
  ) => ({ ...obs('deposit', id, status, minute, extra), account }) as Observation;

  async function balanceMap(account: string): Promise<Record<string, string>> {
    const out: Record<string, string> = {};
    for (const r of await balances(t.db, { merchantAccount: account })) {
      if (r.balance !== 0n) out[`${r.account}/${r.currency}`] = r.balance.toString();
    }
    return out;
  }

  const exceptionOf = (account: string, type: string) =>
    t.db
      .selectFrom('exceptions')
      .selectAll()
      .where('merchant_account', '=', account)
      .where('type', '=', type)
      .executeTakeFirstOrThrow();

  const statusOf = async (account: string) =>
    (
      await t.db
        .selectFrom('mirrors')
        .select(['status', 'currency', 'amount'])
        .where('merchant_account', '=', account)
        .executeTakeFirstOrThrow()
    ).status;

  const memosOf = (account: string) =>
    t.db
      .selectFrom('journal_entries')
      .select(['effect', 'direction', 'currency', 'memo'])
      .where('merchant_account', '=', account)
      .where('memo', 'is not', null)
      .orderBy('id')
      .execute();

  async function expectVerified(): Promise<void> {
    expect((await verifyLedger(t.db)).failures).toEqual([]);
  }

  /**
   * Opens the exception's page, writes the note and clicks the decision; the page it lands on. Accepting
   * the provider's is proposed by the operator, then approved by the controller on her own page.
   */
  async function decide(id: string, decision: 'accept-provider' | 'keep-ledger', note: string, name: string) {
    await page.goto(`${base}/exceptions/${id}`);
    await page.fill(`form:has(button[value="${decision}"]) input[name=note]`, note);
    await shot(`${name}-1-before`);
    await page.click(`button[value="${decision}"]`);
    if (decision === 'keep-ledger') {
      await page.waitForURL(new RegExp(`/exceptions/${id}\\?done=${decision}$`));
      await shot(`${name}-2-after`);
      return;
    }
    await page.waitForURL(new RegExp(`/exceptions/${id}\\?done=proposed$`));
    await expect(page.locator('#proposal').textContent()).resolves.toContain('finance');
    expect(await page.locator('button[value=approve]').count()).toBe(0);
    await shot(`${name}-2-proposed`);
    await controllerPage.goto(`${base}/exceptions/${id}`);
    await controllerPage.click('button[value="approve"]');
    await controllerPage.waitForURL(new RegExp(`/exceptions/${id}\\?done=approve$`));
    await controllerPage.screenshot({ path: join(OUT, `${name}-3-approved.png`), fullPage: true });
    await page.goto(`${base}/exceptions/${id}`);
  }

  /** What the page says afterwards: state, resolution (who and why), and the audit trail. */
  async function expectResolvedPage(id: string, by: string, words: RegExp, note: string): Promise<void> {
    await expect(page.locator('#state').textContent()).resolves.toBe('resolved');
    const resolution = (await page.locator('#resolution').textContent()) ?? '';
    expect(resolution).toContain(`by ${by}`);
    expect(resolution).toMatch(words);
    expect(resolution).toContain(note);
    const trail = await page.locator('table.trail tbody tr').allTextContents();
    // An approved decision: proposed by finance, approved by the controller, then resolved.
    if (by === 'carla') {
      expect(trail).toHaveLength(3);
      expect(trail[0]).toContain('finance');
      expect(trail[0]).toContain('decision proposed');
      expect(trail[1]).toContain('carla');
      expect(trail[1]).toContain('decision approved');
    } else {
      expect(trail).toHaveLength(1);
    }
    const last = trail.at(-1) ?? '';
    expect(last).toContain(by);
    expect(last).toContain('open → resolved');
    expect(last).toMatch(words);
    expect(last).toContain(note);
    // Nothing left to do: no decision button stays.
    expect(await page.locator('button[value=accept-provider], button[value=keep-ledger]').count()).toBe(0);
    // The queue's resolved list shows it with its note.
    await page.goto(`${base}/exceptions?state=resolved`);
    const row = page.locator(`tr[data-exception="${id}"]`);
    await expect(row.count()).resolves.toBe(1);
    await expect(row.textContent()).resolves.toContain(note);
    await page.goto(`${base}/exceptions/${id}`);
  }

  beforeAll(async () => {
    await mkdir(OUT, { recursive: true });
    t = await createTestDatabase();
    // Two deposits read COMPLETED, then PENDING (no document allows it), and two completed in BRL, then
    // read completed in MXN for another amount (a fact that cannot change), each with its intent.
    for (const a of ['illegal-accept', 'illegal-keep', 'facts-accept', 'facts-keep']) {
      const id = `${a.startsWith('illegal') ? 1 : 2}${a.endsWith('accept') ? '01' : '02'}`;
      await withLedgerTransaction(t.db, (trx) =>
        recordIntents(trx, [{ ...intent('deposit', id, 10_000n), account: a, intentId: `in-${a}` }]),
      );
      if (a.startsWith('illegal')) {
        await apply([dep(a, id, 'COMPLETED', 1), dep(a, id, 'PENDING', 2)]);
      } else {
        await apply([dep(a, id, 'COMPLETED', 1)]);
        await apply([dep(a, id, 'COMPLETED', 2, { currency: 'MXN', amount: 25_000n })]);
      }
    }
    dir = await mkdtemp(join(tmpdir(), 'payrecon-decisions-'));
    runner = new ReportRunner({ db: t.db, dir, timeZone: 'UTC' });
    app = await buildWebApp({
      users: [
        { username: 'finance', passwordHash: await hashPassword(PASSWORD) },
        { username: 'carla', passwordHash: await hashPassword(PASSWORD), role: 'controller' },
      ],
      sessionSecret: 'decisions-test-secret-0123456789-abcdefghij',
      timeZone: 'UTC',
      services: ledgerWebServices(t.db, runner),
    });
    base = await app.listen({ host: '127.0.0.1', port: 0 });
    browser = await launchChromium();
    page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
    await signIn(page, base, 'finance', PASSWORD);
    controllerPage = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
    await signIn(controllerPage, base, 'carla', PASSWORD);
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await runner?.idle();
    await t?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('lists both exceptions with their facts, what the provider said, and their two decisions', async () => {
    await page.goto(`${base}/exceptions`);
    for (const [a, said] of [
      ['illegal-accept', 'COMPLETED → PENDING (not applied)'],
      ['facts-accept', 'currency BRL → MXN'],
    ] as const) {
      const type = a.startsWith('illegal') ? 'ILLEGAL_TRANSITION' : 'FACTS_CHANGED';
      const ex = await exceptionOf(a, type);
      const row = page.locator(`tr[data-exception="${ex.id}"]`);
      await row.locator('summary').click();
      const text = (await row.textContent()) ?? '';
      expect(text).toContain(type);
      expect(text).toContain(said);
      expect(text).toContain('100.00 BRL');
      expect(await row.locator('button[value=accept-provider]').count()).toBe(1);
      expect(await row.locator('button[value=keep-ledger]').count()).toBe(1);
    }
    await shot('0-queue');
    // Nothing scrolls sideways at 1280px.
    expect(await page.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(1280);
  });

  it('refuses a decision without a note, and the exception stays open', async () => {
    const ex = await exceptionOf('illegal-accept', 'ILLEGAL_TRANSITION');
    await page.goto(`${base}/exceptions/${ex.id}`);
    await page.click('button[value="accept-provider"]');
    await page.waitForLoadState('load');
    await expect(page.locator('body').textContent()).resolves.toContain('A note is required');
    await shot('illegal-accept-0-no-note');
    expect((await exceptionOf('illegal-accept', 'ILLEGAL_TRANSITION')).state).toBe('open');
    expect(await statusOf('illegal-accept')).toBe('COMPLETED');
  });

  it("ILLEGAL_TRANSITION, accept the provider's status: the ledger books to match, saying who and why", async () => {
    const a = 'illegal-accept';
    expect(await balanceMap(a)).toEqual({ 'available/BRL': '10000', 'deposits/BRL': '-10000' });
    const ex = await exceptionOf(a, 'ILLEGAL_TRANSITION');
    const note = 'the provider reopened the payment after a chargeback';
    await decide(ex.id, 'accept-provider', note, 'illegal-accept');
    await expectResolvedPage(
      ex.id,
      'carla',
      /accepted the provider's status PENDING \(ledger had COMPLETED\)/,
      note,
    );
    // The ledger follows: PENDING, the credit reversed, each entry booked names who and why.
    expect(await statusOf(a)).toBe('PENDING');
    expect(await balanceMap(a)).toEqual({});
    const memos = await memosOf(a);
    expect(memos.length).toBeGreaterThan(0);
    for (const m of memos) {
      expect(m.direction).toBe(-1);
      expect(m.memo).toMatchObject({
        decision: 'accept-provider',
        by: 'carla',
        proposedBy: 'finance',
        note,
        exceptionId: ex.id,
      });
    }
    const stored = await exceptionOf(a, 'ILLEGAL_TRANSITION');
    expect(stored.decision).toMatchObject({
      decision: 'accept-provider',
      by: 'carla',
      proposedBy: 'finance',
      note,
      providerStatus: 'PENDING',
      ledgerStatus: 'COMPLETED',
      entriesBooked: memos.length,
    });
    await expectVerified();
    // The payment's page shows the reversal and who decided it, linked to the exception.
    await page.goto(`${base}/payments/${a}/deposit/101`);
    const ledger = (await page.locator('#ledger').textContent()) ?? '';
    expect(ledger).toContain('(reversal)');
    expect(ledger).toContain(
      `decided by carla on finance's proposal (exception #${ex.id}, accept-provider): ${note}`,
    );
    await shot('illegal-accept-3-payment');
  });

  it("ILLEGAL_TRANSITION, keep the ledger's status: nothing booked; the same refused move again changes nothing", async () => {
    const a = 'illegal-keep';
    const before = await balanceMap(a);
    const ex = await exceptionOf(a, 'ILLEGAL_TRANSITION');
    const note = 'a provider glitch; its support confirmed COMPLETED';
    await decide(ex.id, 'keep-ledger', note, 'illegal-keep');
    await expect(page.locator('.notice').textContent()).resolves.toContain(
      "the ledger's status and bookings are kept",
    );
    await expectResolvedPage(
      ex.id,
      'finance',
      /kept the ledger's status COMPLETED \(provider reported PENDING\)/,
      note,
    );
    expect(await statusOf(a)).toBe('COMPLETED');
    expect(await balanceMap(a)).toEqual(before);
    expect(await memosOf(a)).toEqual([]);
    await expectVerified();
    // A re-poll and a redelivered webhook read the same PENDING: the decision stands, nothing reopens.
    await apply([dep(a, '102', 'PENDING', 3), dep(a, '102', 'PENDING', 4, { source: 'webhook' })]);
    await page.goto(`${base}/exceptions/${ex.id}`);
    await expect(page.locator('#state').textContent()).resolves.toBe('resolved');
    await expect(page.locator('#resolution').textContent()).resolves.toContain(note);
    expect(await page.locator('table.trail tbody tr').count()).toBe(1);
    expect((await exceptionOf(a, 'ILLEGAL_TRANSITION')).state).toBe('resolved');
    expect(await balanceMap(a)).toEqual(before);
    await shot('illegal-keep-3-seen-again');
    // A new fact (the provider now says CANCELLED, another refused move) reopens it: the page says what
    // changed, the earlier decision's note and resolver stay visible, and the decision buttons are back.
    await apply([dep(a, '102', 'CANCELLED', 5)]);
    await page.goto(`${base}/exceptions/${ex.id}`);
    await expect(page.locator('#state').textContent()).resolves.toBe('open');
    const facts = (await page.locator('.detail section').first().textContent()) ?? '';
    expect(facts).toContain('on a new fact: was: COMPLETED->PENDING; now: COMPLETED->CANCELLED');
    expect(facts).toContain('Resolved before by finance');
    expect(facts).toContain(note);
    expect(facts).toContain('COMPLETED → CANCELLED (not applied)');
    expect(await page.locator('button[value=keep-ledger]').count()).toBe(1);
    const trail = await page.locator('table.trail tbody tr').allTextContents();
    expect(trail.map((r) => r.includes('resolved → open'))).toEqual([false, true]);
    await shot('illegal-keep-4-reopened');
  });

  it("FACTS_CHANGED, accept the provider's facts: the BRL booking reversed, the MXN one booked, who and why on each", async () => {
    const a = 'facts-accept';
    expect(await balanceMap(a)).toEqual({ 'available/BRL': '10000', 'deposits/BRL': '-10000' });
    const ex = await exceptionOf(a, 'FACTS_CHANGED');
    await page.goto(`${base}/exceptions/${ex.id}`);
    await expect(page.locator('dd.refused').textContent()).resolves.toBe(
      'currency BRL → MXN; amount 100.00 → 250.00',
    );
    const note = 'the provider corrected the currency; its support confirmed';
    await decide(ex.id, 'accept-provider', note, 'facts-accept');
    await expectResolvedPage(ex.id, 'carla', /accepted the provider's facts \(currency BRL -> MXN/, note);
    expect(await balanceMap(a)).toEqual({ 'available/MXN': '25000', 'deposits/MXN': '-25000' });
    const memos = await memosOf(a);
    expect(memos.map((m) => [m.currency, m.direction])).toEqual(
      expect.arrayContaining([
        ['BRL', -1],
        ['MXN', 1],
      ]),
    );
    for (const m of memos) {
      expect(m.memo).toMatchObject({ decision: 'accept-provider', by: 'carla', note, exceptionId: ex.id });
    }
    await expectVerified();
    // The same MXN reading again: nothing more booked, nothing raised.
    await apply([dep(a, '201', 'COMPLETED', 3, { currency: 'MXN', amount: 25_000n })]);
    expect(await balanceMap(a)).toEqual({ 'available/MXN': '25000', 'deposits/MXN': '-25000' });
    expect((await exceptionOf(a, 'FACTS_CHANGED')).state).toBe('resolved');
    await page.goto(`${base}/payments/${a}/deposit/201`);
    const ledger = (await page.locator('#ledger').textContent()) ?? '';
    expect(ledger).toContain(
      `decided by carla on finance's proposal (exception #${ex.id}, accept-provider): ${note}`,
    );
    await shot('facts-accept-3-payment');
    await expectVerified();
  });

  it("FACTS_CHANGED, keep the ledger's facts: the bookings and the freeze stay; the same reading again changes nothing", async () => {
    const a = 'facts-keep';
    const before = await balanceMap(a);
    expect(before).toEqual({ 'available/BRL': '10000', 'deposits/BRL': '-10000' });
    const ex = await exceptionOf(a, 'FACTS_CHANGED');
    const note = 'a provider bug; its support will fix the reading';
    await decide(ex.id, 'keep-ledger', note, 'facts-keep');
    await expectResolvedPage(
      ex.id,
      'finance',
      /kept the ledger's facts \(provider reported currency BRL -> MXN/,
      note,
    );
    expect(await balanceMap(a)).toEqual(before);
    expect(await memosOf(a)).toEqual([]);
    await expectVerified();
    await apply([dep(a, '202', 'COMPLETED', 3, { currency: 'MXN', amount: 25_000n })]);
    await page.goto(`${base}/exceptions/${ex.id}`);
    await expect(page.locator('#state').textContent()).resolves.toBe('resolved');
    expect(await balanceMap(a)).toEqual(before);
    await shot('facts-keep-3-seen-again');
    await expectVerified();
  });
});
