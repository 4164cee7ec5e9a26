/**
 * `payrecon close prepare | approve | show` as a process, as configured controllers: prepare signs September 2026 of acme BRL, the
 * preparer's own approval fails in one line with exit code 1, another user approves, and show prints the
 * signed figures with the hash matching. A month before the first entry has nothing to close (show says
 * so, prepare refuses); a month without entries says so.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { actingEnv } from '../cli/web-users.ts';
import { bookEntry, closeLedger } from './close-fixtures.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

const run = promisify(execFile);
let t: TestDatabase;
let users: Record<string, string>;
beforeAll(async () => {
  t = await createTestDatabase();
  users = await actingEnv({ ana: 'controller', bob: 'controller' });
  await closeLedger(t.db);
  await bookEntry(
    t.db,
    'deposit',
    'd1',
    'credit',
    [
      ['available', '80.00'],
      ['deposits', '-80.00'],
    ],
    '2026-09-03T10:00Z',
  );
});
afterAll(async () => {
  await t?.drop();
});

async function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return cliOf('2026-09', ...args);
}

async function cliOf(
  period: string,
  ...args: string[]
): Promise<{ code: number; stdout: string; stderr: string }> {
  const scope = ['--account', 'acme', '--currency', 'BRL', '--period', period, '--database-url', t.url];
  try {
    const r = await run('node', ['bin/payrecon.mjs', 'close', ...args, ...scope], {
      env: { ...process.env, ...users, LOG_LEVEL: 'silent', PAYRECON_TIMEZONE: 'UTC' },
    });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('payrecon close', () => {
  it('prepares, refuses the self-approval in one line, approves and shows', async () => {
    const prepared = await cli('prepare', '--user', 'ana');
    expect(prepared.stderr).toBe('');
    expect(prepared.stdout).toMatch(/^close 2026-09 acme BRL: prepared; prepared and signed by ana/);
    expect(prepared.stdout).toContain(
      'live/available: opening 0.00 + movements 80.00 - closing 80.00 = 0.00',
    );
    const self = await cli('approve', '--user', 'ana');
    expect(self.code).toBe(1);
    expect(self.stderr.trim().split('\n')).toEqual([
      'payrecon: You prepared and signed 2026-09 of acme BRL, so a different controller must approve it.',
    ]);
    const approved = await cli('approve', '--user', 'bob');
    expect(approved.code).toBe(0);
    const shown = await cli('show');
    expect(shown.stdout).toMatch(/approved by bob at .*; sha256 [0-9a-f]{64} matches the stored figures/);
    expect(shown.stdout).toContain('proof 0.00');
  });

  it('says a month before the first entry has nothing to close, and refuses to sign it in one line', async () => {
    const shown = await cliOf('2026-08', 'show');
    expect(shown.code).toBe(0);
    expect(shown.stdout.trim().split('\n').at(-1)).toBe(
      'nothing to close: acme BRL has no entries before 2026-09',
    );
    const prepared = await cliOf('2026-08', 'prepare', '--user', 'ana');
    expect(prepared.code).toBe(1);
    expect(prepared.stderr).toBe(
      'payrecon: acme BRL has no entries before 2026-09: 2026-08 has no figures to sign\n',
    );
    const quiet = await cliOf('2026-10', 'show');
    expect(quiet.stdout.trim().split('\n').at(-1)).toBe(
      'no entries booked in the month: the closing balances are the opening ones',
    );
  });
});
