/**
 * `payrecon close show | prepare` with a bank account configured: show prints the bank proof (the
 * statement against the ledger and what explains the difference, the bank lines not in the ledger and
 * the settlements in transit with their notes); prepare refuses in one line
 * naming the items without a note above PAYRECON_CLOSE_UNMATCHED_NOTE_ABOVE (exit code 1, like the
 * close's other refusals), and signs once they have notes. A bad amount is one line, exit code 2.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { actingEnv } from '../cli/web-users.ts';
import { BANK, bankProofMonth, commentOn } from './bank-proof-fixtures.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

const run = promisify(execFile);
let t: TestDatabase;
let users: Record<string, string>;
let exceptions: Record<string, string>;
beforeAll(async () => {
  t = await createTestDatabase();
  users = await actingEnv({ ana: 'controller', bob: 'controller' });
  exceptions = await bankProofMonth(t.db);
});
afterAll(async () => {
  await t?.drop();
});

async function cli(env: Record<string, string>, ...args: string[]) {
  const scope = ['--account', 'acme', '--currency', 'BRL', '--period', '2026-09', '--database-url', t.url];
  try {
    const r = await run('node', ['bin/payrecon.mjs', 'close', ...args, ...scope], {
      env: {
        ...process.env,
        ...users,
        LOG_LEVEL: 'silent',
        PAYRECON_TIMEZONE: 'UTC',
        PAYRECON_BANK_ACCOUNTS: JSON.stringify([BANK]),
        PAYRECON_CLOSE_UNMATCHED_NOTE_ABOVE: '1.00',
        ...env,
      },
    });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('payrecon close with a bank proof', () => {
  it('shows the bank proof, refuses to prepare in one line, prepares once noted', async () => {
    const shown = await cli({}, 'show');
    expect(shown.code).toBe(0);
    const lines = shown.stdout.split('\n');
    expect(lines).toContain(
      'bank BR00ACME: statement S-0930 of 2026-09-29 closing 470.50; ledger bank:BR00ACME 500.00; difference -29.50; explained by: opening before the first statement 0.00 (S-0930 of 2026-09-12), bank lines not in the ledger -29.50 (2); unexplained 0.00',
    );
    expect(lines).toContain(
      '  bank lines not in the ledger at the cut-off: 2 booked on or before 2026-09-29 (-29.50)',
    );
    expect(lines).toContain(
      '  settlements in transit, not seen in the bank (no part of the bank difference): 1 (200.00)',
    );
    expect(lines).toContain(
      `    bank_line L-RENT -30.00 of 2026-09-28, 2 days: no note (exception ${exceptions['L-RENT']})`,
    );
    expect(lines).toContain(
      `    settlement ST-2 200.00 of 2026-09-29, 1 day: no note (exception ${exceptions['ST-2']})`,
    );

    const refused = await cli({}, 'prepare', '--user', 'ana');
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe('');
    expect(refused.stderr.trim().split('\n')).toEqual([
      'payrecon: 2 unmatched items above 1.00 at the cut-off have no note: bank_line L-RENT (-30.00), settlement ST-2 (200.00); add a note on their exception (PAYRECON_CLOSE_UNMATCHED_NOTE_ABOVE)',
    ]);

    await commentOn(t.db, exceptions['L-RENT']!, 'rent');
    await commentOn(t.db, exceptions['ST-2']!, 'credited on 2 October');
    const prepared = await cli({}, 'prepare', '--user', 'ana');
    expect(prepared.stderr).toBe('');
    expect(prepared.code).toBe(0);
    expect(prepared.stdout).toMatch(/^close 2026-09 acme BRL: prepared; prepared and signed by ana/);
    expect(prepared.stdout).toContain('    bank_line L-RENT -30.00 of 2026-09-28, 2 days: noted');
    expect(prepared.stdout).toContain('    bank_line L-SMALL 0.50 of 2026-09-29, 1 day: no note');
  });

  it('refuses a bad amount in one line with exit code 2', async () => {
    const bad = await cli({ PAYRECON_CLOSE_UNMATCHED_NOTE_ABOVE: '-5' }, 'show');
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim().split('\n')).toHaveLength(1);
    expect(bad.stderr).toContain('PAYRECON_CLOSE_UNMATCHED_NOTE_ABOVE');
  });
});
