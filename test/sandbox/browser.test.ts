import { existsSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/wait.ts';
import { cardBody, signed, startReceiver, startTestSandbox } from './helpers.ts';

const CHROMIUM = '/usr/bin/chromium';
const available = existsSync(CHROMIUM);
if (!available && process.env.PAYRECON_REQUIRE_TOOLS === '1') {
  throw new Error(`${CHROMIUM} is missing (install it with: apt-get install chromium)`);
}
if (!available) {
  console.warn(
    `skipping the sandbox browser test: ${CHROMIUM} is missing (install it with: apt-get install chromium)`,
  );
}

describe.skipIf(!available)('checkout pages in Chromium', () => {
  let browser: Browser;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let sb: Awaited<ReturnType<typeof startTestSandbox>>;

  beforeAll(async () => {
    receiver = await startReceiver();
    sb = await startTestSandbox({ notificationBaseUrl: receiver.url });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
      ],
    });
  });
  afterAll(async () => {
    await browser?.close();
    await sb?.close();
    await receiver?.close();
  });

  const hooksFor = (id: number) => receiver.received.filter((r) => r.body === `{"deposit_id":${id}}`);

  it('completes a HOSTED deposit: fills the missing payer data, picks a method, pays; the webhook arrives', async () => {
    const created = await signed(sb.url, '/v3/deposits', {
      body: {
        country: 'BR',
        currency: 'BRL',
        amount: 150,
        description: 'Gift card',
        notification_url: 'https://merchant.example/hooks/deposits',
        success_url: 'https://merchant.example/thanks',
      },
    });
    expect(created.json.checkout_type).toBe('HOSTED');
    const id = created.json.deposit_id as number;
    const page = await browser.newPage();
    await page.goto(created.json.redirect_url);
    await expect(page.locator('h1').textContent()).resolves.toBe('Complete your payment');
    // First the method and the payer; SJ also needs the account holder's name, asked on the next step.
    const fillPayer = async (email: string) => {
      await page.selectOption('select[name="payment_method"]', 'SJ');
      await page.fill('input[name="payer.document"]', '12345678909');
      await page.fill('input[name="payer.email"]', email);
      await page.fill('input[name="payer.first_name"]', 'Ana');
      await page.fill('input[name="payer.last_name"]', 'Silva');
      await page.click('#continue');
    };
    await fillPayer('not-an-email');
    await expect(page.locator('[role="alert"]').textContent()).resolves.toContain('E-mail');
    await fillPayer('ana@example.com');
    await expect(page.locator('input[name="payer.email"]').count()).resolves.toBe(0);
    await page.fill('input[name="reported_info.bank_beneficiary"]', 'Ana Silva');
    await page.click('#continue');
    await expect(page.locator('h1').textContent()).resolves.toBe('Pay your deposit');
    await page.click('#pay');
    await expect(page.locator('h1').textContent()).resolves.toBe('Payment received');
    await expect(page.locator('#status').textContent()).resolves.toBe('COMPLETED');
    await page.close();

    await waitFor('two notifications', () => hooksFor(id).length >= 2, { ms: 5000, every: 10 });
    expect(hooksFor(id).every((h) => h.path === '/hooks/deposits')).toBe(true);
    const status = await signed(sb.url, `/v3/deposits/${id}`);
    expect(status.json).toMatchObject({
      status: 'COMPLETED',
      payment_method: 'SJ',
      payer: { email: 'ana@example.com', document: '12345678909', first_name: 'Ana', last_name: 'Silva' },
    });
  });

  it('passes 3DS authentication of a card deposit; the webhook arrives', async () => {
    const created = await signed(sb.ccUrl, '/v3/deposits', { body: cardBody('4000000000000069') });
    const id = created.json.deposit_id as number;
    sb.control.deps.accounts.all()[0]!.notificationUrl = 'https://merchant.example/hooks/cards';
    const page = await browser.newPage();
    await page.goto(created.json.authentication_url);
    await expect(page.locator('h1').textContent()).resolves.toBe('Card authentication');
    await page.click('#authenticate');
    await expect(page.locator('h1').textContent()).resolves.toBe('Payment authorized');
    await page.close();
    await waitFor('the card notification', () => hooksFor(id).some((h) => h.path === '/hooks/cards'), {
      ms: 5000,
      every: 10,
    });
    const status = await signed(sb.url, `/v3/deposits/${id}`);
    expect(status.json.status).toBe('COMPLETED');
    expect(status.json.card_detail.transaction_result).toBe('SUCCESS');
  });

  it('fails 3DS authentication: the deposit is DECLINED', async () => {
    const created = await signed(sb.ccUrl, '/v3/deposits', { body: cardBody('5100000000000065') });
    const page = await browser.newPage();
    await page.goto(created.json.authentication_url);
    await page.click('#fail');
    await expect(page.locator('h1').textContent()).resolves.toBe('Payment not authorized');
    await page.close();
    expect((await signed(sb.url, `/v3/deposits/${created.json.deposit_id}`)).json.status).toBe('DECLINED');
  });
});
