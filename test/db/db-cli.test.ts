/**
 * `payrecon db migrate | verify | rollback` as a process: exit codes and named failures; rollback never
 * reverts the baseline (every table); `verify --since`
 * reads only its period (an old snapshot changed by hand is for the full verification) and refuses a bad
 * value in one line naming the flag and the rule, with exit code 2, before opening any database.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSince } from '../../src/db/cli.ts';
import { MIGRATIONS, migrateToLatest } from '../../src/db/connection.ts';
import { SETTLE_MS, takeBalanceSnapshots } from '../../src/db/ledger/balance-snapshots.ts';
import { applyObservations } from '../../src/db/ledger/service.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import { obs, postAt, watchMirrors } from './fixtures.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

const run = promisify(execFile);
let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase({ migrate: false });
});
afterAll(async () => {
  await t?.drop();
});

async function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await run('node', ['bin/payrecon.mjs', 'db', ...args, '--url', t.url], {
      env: { ...process.env, LOG_LEVEL: 'silent' },
    });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('payrecon db', () => {
  it('migrates, verifies, names each failure, and rolls back', async () => {
    const migrated = await cli('migrate');
    expect(migrated.code).toBe(0);
    expect(migrated.stdout).toContain(`${Object.keys(MIGRATIONS)[0]}: Success`);
    await withLedgerTransaction(t.db, (trx) =>
      applyObservations(trx, [obs('deposit', 'v1', 'COMPLETED', 1)]),
    );
    const ok = await cli('verify');
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain('all invariants hold');
    // Break two invariants behind the service's back: an in-flight cashout with no reserve booked (its
    // mirror and side row written as the service would, less the entries).
    await sql`INSERT INTO mirrors (merchant_account, entity_kind, entity_id, status, currency, amount)
      VALUES ('acme', 'cashout', 'broken', 'PENDING', 'BRL', 5.00)`.execute(t.db);
    await watchMirrors(t.db);
    const bad = await cli('verify');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain(
      'reserved differs from in-flight cashouts and refunds: acme BRL: reserved 0, in flight 5.00',
    );
    // Every migration after the baseline rolls back, newest first, and migrates again.
    const later = Object.keys(MIGRATIONS).slice(1).reverse();
    for (const name of later) {
      expect(await cli('rollback')).toEqual({ code: 0, stdout: `Down ${name}: Success\n`, stderr: '' });
    }
    // The baseline is the whole schema: reverting it would drop every table, so it is refused.
    const rolled = await cli('rollback');
    expect(rolled).toEqual({
      code: 2,
      stdout: '',
      stderr: `payrecon: db rollback: the latest migration is the baseline ${Object.keys(MIGRATIONS)[0]}; reverting it would drop every table, so it is never rolled back\n`,
    });
    const kept = await sql<{ n: number }>`SELECT count(*)::int AS n FROM journal_entries`.execute(t.db);
    expect(kept.rows[0]?.n).toBeGreaterThan(0);
    const again = await cli('migrate');
    expect(again.code).toBe(0);
    for (const name of later) expect(again.stdout).toContain(`${name}: Success`);
  }, 90_000);

  it('verify --since checks only its period', async () => {
    const DAY = 86_400_000;
    const today = Math.floor((Date.now() - SETTLE_MS) / DAY) * DAY;
    await migrateToLatest(t.db);
    await sql`DELETE FROM mirrors WHERE entity_id = 'broken'`.execute(t.db);
    await watchMirrors(t.db);
    for (let d = 4; d >= 1; d--) {
      await postAt(t.db, `old${d}`, 1_000n + BigInt(d), new Date(today - d * DAY + 60_000));
    }
    expect(await takeBalanceSnapshots(t.db)).toBeGreaterThan(0);
    // The oldest snapshot (three days) changed by hand: outside the last day, found by the full verification.
    const old = new Date(today - 3 * DAY);
    await sql`UPDATE ledger_balance_snapshots SET balance = balance + 1
      WHERE account = 'available' AND currency = 'BRL' AND at = ${old}`.execute(t.db);
    const named = `balance snapshot differs from postings: acme BRL live/available at ${old.toISOString()}`;
    const [recent, full] = await Promise.all([cli('verify', '--since', '24h'), cli('verify')]);
    expect(recent).toMatchObject({ code: 0, stderr: '' });
    expect(recent.stdout).toMatch(
      /^ledger verified since \d{4}-\d\d-\d\dT[\d:.]+Z: \d+ entries, \d+ entities, all invariants hold\n$/,
    );
    expect(full.code).toBe(1);
    expect(full.stderr).toContain(named);
    // A period reaching back over that snapshot's day names it too.
    const wide = await verifyLedger(t.db, { since: parseSince('3d') });
    expect(wide.failures).toContain(`${named}: snapshot 11.04, postings before it sum to 10.04`);
  }, 120_000);

  it('verify --since refuses a bad value in one line with exit code 2, before opening a database', async () => {
    const r = await cli('verify', '--since', 'yesterday');
    expect(r).toEqual({
      code: 2,
      stdout: '',
      stderr:
        'payrecon: --since: must be an ISO 8601 instant with offset (2026-11-24T10:00:00Z) or a duration back ' +
        'from now: a whole number followed by s, m, h or d, e.g. 90m, 24h, 7d (got "yesterday")\n',
    });
  }, 60_000);

  it('parses --since as an instant or a duration back from now, and names the rule a bad one breaks', () => {
    const now = new Date('2026-11-25T12:00:00.000Z');
    expect(parseSince('90m', now).toISOString()).toBe('2026-11-25T10:30:00.000Z');
    expect(parseSince('24h', now).toISOString()).toBe('2026-11-24T12:00:00.000Z');
    expect(parseSince('7d', now).toISOString()).toBe('2026-11-18T12:00:00.000Z');
    expect(parseSince('30s', now).toISOString()).toBe('2026-11-25T11:59:30.000Z');
    expect(parseSince('2026-11-24T10:00:00Z', now).toISOString()).toBe('2026-11-24T10:00:00.000Z');
    expect(parseSince('2026-11-24T10:00:00.250-03:00', now).toISOString()).toBe('2026-11-24T13:00:00.250Z');
    expect(parseSince('2026-11-25T12:00Z', now).toISOString()).toBe('2026-11-25T12:00:00.000Z');
    for (const [value, rule] of [
      ['yesterday', 'must be an ISO 8601 instant with offset'],
      ['24', 'must be an ISO 8601 instant with offset'],
      ['-1h', 'must be an ISO 8601 instant with offset'],
      ['1.5h', 'must be an ISO 8601 instant with offset'],
      ['2026-11-24T10:00:00', 'must be an ISO 8601 instant with offset'],
      ['2026-11-24', 'must be an ISO 8601 instant with offset'],
      ['2026-02-30T00:00:00Z', 'not a valid date and time'],
      ['2026-11-24T24:30:00Z', 'not a valid date and time'],
      ['2026-11-25T12:00:01Z', 'must not be in the future'],
      ['99999999d', 'must be at most 100 years back'],
    ] as const) {
      expect(() => parseSince(value, now)).toThrow(`--since: ${rule}`);
      expect(() => parseSince(value, now)).toThrow(`(got ${JSON.stringify(value)})`);
    }
  });
});
