/** `payrecon db migrate | verify | rollback` as a process: exit codes and named failures. */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyObservations, withLedgerTransaction } from '../../src/db/ledger-service.ts';
import { obs } from './fixtures.ts';
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
    expect(migrated.stdout).toContain('20261121T1040_ledger: Success');
    await withLedgerTransaction(t.db, (trx) =>
      applyObservations(trx, [obs('deposit', 'v1', 'COMPLETED', 1)]),
    );
    const ok = await cli('verify');
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain('all invariants hold');
    // Break two invariants behind the service's back: an in-flight cashout with no reserve booked.
    await sql`INSERT INTO mirrors (merchant_account, entity_kind, entity_id, status, currency, amount)
      VALUES ('acme', 'cashout', 'broken', 'PENDING', 'BRL', 5.00)`.execute(t.db);
    const bad = await cli('verify');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain(
      'reserved differs from in-flight cashouts and refunds: acme BRL: reserved 0, in flight 5.00',
    );
    const rolled = await cli('rollback');
    expect(rolled.code).toBe(0);
    expect(rolled.stdout).toMatch(/^Down /);
  }, 60_000);
});
