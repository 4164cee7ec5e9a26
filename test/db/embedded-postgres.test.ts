/**
 * The embedded PostgreSQL path: start it in a temporary directory (as root here, so through the
 * unprivileged postgres user), migrate, run a ledger batch and verify, stop, start again on the same data.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createDb, migrateToLatest } from '../../src/db/connection.ts';
import { applyObservations, recordIntents, withLedgerTransaction } from '../../src/db/ledger-service.ts';
import { balances } from '../../src/db/queries.ts';
import { verifyLedger } from '../../src/db/verify.ts';
import { startEmbeddedPostgres } from '../../src/embedded/postgres.ts';
import { intent, obs } from './fixtures.ts';

let dir = '';
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('embedded PostgreSQL', () => {
  it('starts, runs the ledger, stops, and keeps its data across a restart', async () => {
    dir = await mkdtemp(join(tmpdir(), 'payrecon-pg-'));
    const dataDir = join(dir, 'pg');
    const first = await startEmbeddedPostgres({ dataDir });
    try {
      expect(first.url).toMatch(/^postgres:\/\/postgres:.+@127\.0\.0\.1:\d+\/payrecon$/);
      const db = createDb(first.url, 2);
      try {
        await migrateToLatest(db);
        await withLedgerTransaction(db, (trx) => recordIntents(trx, [intent('cashout', 'ec1', 700n)]));
        await withLedgerTransaction(db, (trx) =>
          applyObservations(trx, [
            obs('cashout', 'ec1', 'PENDING', 1),
            obs('deposit', 'ed1', 'COMPLETED', 1),
          ]),
        );
        expect((await verifyLedger(db)).failures).toEqual([]);
      } finally {
        await db.destroy();
      }
    } finally {
      await first.stop();
    }
    const second = await startEmbeddedPostgres({ dataDir });
    try {
      const db = createDb(second.url, 2);
      try {
        expect(await migrateToLatest(db)).toEqual([]);
        const rows = await balances(db, { merchantAccount: 'acme' });
        expect(rows.find((r) => r.account === 'reserved')?.balance).toBe(700n);
        expect(rows.find((r) => r.account === 'deposits')?.balance).toBe(-10_000n);
      } finally {
        await db.destroy();
      }
    } finally {
      await second.stop();
    }
  }, 120_000);
});
