/**
 * What the Chromium page tests share: Debian's chromium found or the test skipped with an install hint
 * (a failure under PAYRECON_REQUIRE_TOOLS=1), the browser launched headless with the project's flags,
 * and a user signed in through the login form.
 */
import { existsSync } from 'node:fs';
import { type Browser, chromium, type Page } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

/** Whether chromium is here; without it, throws under PAYRECON_REQUIRE_TOOLS=1, else warns `what` is skipped. */
export function haveChromium(what: string): boolean {
  if (existsSync(CHROMIUM)) return true;
  const hint = `install it with apt-get install chromium`;
  if (process.env.PAYRECON_REQUIRE_TOOLS === '1') {
    throw new Error(`${CHROMIUM} is required (PAYRECON_REQUIRE_TOOLS=1): ${hint}`);
  }
  console.warn(`skipping ${what}: ${CHROMIUM} not found (${hint})`);
  return false;
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--no-first-run',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/** Signs in through the login form and waits for the landing page (the balances). */
export async function signIn(page: Page, base: string, username: string, password: string): Promise<void> {
  await page.goto(`${base}/login`);
  await page.fill('input[name=username]', username);
  await page.fill('input[name=password]', password);
  await page.click('button[type=submit]');
  await page.waitForURL(`${base}/balances`);
}
