import { describe, expect, it } from 'vitest';
import { type BankFeed, reconciliationListPage } from './reconciliation-views.ts';

const ctx = { base: '', username: 'finance', csrf: 'x', timeZone: 'UTC' };
const text = (html: string) =>
  html
    .replace(/<[^>]+>/g, '')
    .replace(/\s+/g, ' ')
    .trim();
const feed = (over: Partial<BankFeed>): BankFeed => ({
  source: 'sandbox',
  schedule: '*/2 * * * *',
  nextRun: new Date('2026-11-29T04:02:00Z'),
  lastRun: { finishedAt: new Date('2026-11-29T04:00:00Z'), error: null },
  // Two sandbox hours before its midnight at 60 times real time: two real minutes.
  sandbox: { now: new Date('2026-11-29T22:00:00Z'), speed: 60, timeZone: 'UTC' },
  ...over,
});
const bank = { id: 'NL13SBOX8374343556', currency: 'BRL', account: 'sandbox', name: 'sandbox (BRL)' };

describe('the Reconciliation list says where the bank accounts and statements come from', () => {
  it("before the sandbox's first settlement: no bank account yet, and when it comes", () => {
    const page = text(String(reconciliationListPage(ctx, [], feed({}))));
    expect(page).not.toContain('No bank account is configured');
    expect(page).toContain("Bank accounts: the sandbox's settlement accounts, one per currency it settles");
    expect(page).toContain(
      'None yet: the sandbox opens them with its first settlement, at the end of its first day (in about 2 minutes)',
    );
    expect(page).toContain('every 2 minutes, each day');
    expect(page).toContain('(last 2026-11-29 04:00, next 2026-11-29 04:02)');
    expect(page).toContain(
      'Sandbox time: 2026-11-29 22:00, 60× real time; its day 2026-11-29 ends in about 2 minutes.',
    );
  });

  it('with the bank accounts and no statement yet; a failed fetch is said', () => {
    const rows = [{ bank, latestDay: null, lines: 0, unmatchedLines: 0, openSettlements: 1 }];
    const page = text(
      String(
        reconciliationListPage(
          ctx,
          rows,
          feed({
            lastRun: { finishedAt: new Date('2026-11-29T04:00:00Z'), error: 'GET /clock: HTTP 503' },
            schedule: '15 * * * *',
            sandbox: { now: new Date('2026-11-30T23:59:50Z'), speed: 60, timeZone: 'UTC' },
          }),
        ),
      ),
    );
    expect(page).not.toContain('None yet');
    expect(page).toContain('no statement yet');
    expect(page).toContain('on the schedule 15 * * * * (PAYRECON_CRON_SETTLEMENT_FETCH)');
    expect(page).toContain('last 2026-11-29 04:00 (failed: GET /clock: HTTP 503)');
    expect(page).toContain('its day 2026-11-30 ends within a minute');
  });

  it('configured bank accounts: none configured says so', () => {
    const page = text(
      String(reconciliationListPage(ctx, [], feed({ source: 'configured', schedule: null, sandbox: null }))),
    );
    expect(page).toContain('No bank account is configured (PAYRECON_BANK_ACCOUNTS).');
    expect(page).not.toContain('sandbox');
    expect(text(String(reconciliationListPage(ctx, [])))).toContain('No bank account is configured');
  });
});
