/**
 * The embedded PostgreSQL path: start it in a temporary directory (as root here, so through the
 * unprivileged postgres user), migrate, run a ledger batch and verify, stop, start again on the same data.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createDb, migrateToLatest } from '../../src/db/connection.ts';
import { applyObservations, recordIntents } from '../../src/db/ledger/service.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { balances } from '../../src/db/read-models/balances.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import { startEmbeddedPostgres } from '../../src/embedded/postgres.ts';
import { waitFor } from '../helpers/wait.ts';
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

  it('takes over a server left running by a payrecon that was killed, and stops it when done', async () => {
    if (!dir) dir = await mkdtemp(join(tmpdir(), 'payrecon-pg-'));
    const dataDir = join(dir, 'pg-orphan');
    // A payrecon that starts the server (detached, as `up` does) and is then SIGKILLed.
    const module = resolve(import.meta.dirname, '../../src/embedded/postgres.ts');
    const holder = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        '-e',
        `const { startEmbeddedPostgres } = await import(${JSON.stringify(module)});
         await startEmbeddedPostgres({ dataDir: ${JSON.stringify(dataDir)} });
         console.log('ready'); setInterval(() => {}, 1000);`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    await new Promise<void>((ready, failed) => {
      holder.stdout?.on('data', (c: Buffer) => c.toString().includes('ready') && ready());
      holder.once('exit', (code) => failed(new Error(`holder exited ${code}`)));
    });
    holder.kill('SIGKILL');
    await new Promise((r) => holder.once('exit', r));
    const pid = Number((await readFile(join(dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0]);
    const isAlive = (p: number) => {
      try {
        process.kill(p, 0);
        return true;
      } catch {
        return false;
      }
    };
    // Handed to init once its parent died.
    await waitFor('the orphaned PostgreSQL to be handed to init', async () =>
      (await readFile(`/proc/${pid}/stat`, 'utf8')).includes(') S 1 '),
    );
    expect(isAlive(pid)).toBe(true);
    const notices: string[] = [];
    const adopted = await startEmbeddedPostgres({ dataDir, onNotice: (l) => notices.push(l) });
    expect(adopted.owned).toBe(true);
    expect(notices).toEqual([
      `${dataDir}: PostgreSQL (pid ${pid}) left running by a payrecon that is gone: taking it over (stopped at the end)`,
    ]);
    const db = createDb(adopted.url, 1);
    try {
      expect((await migrateToLatest(db)).length).toBeGreaterThan(0);
    } finally {
      await db.destroy();
    }
    await adopted.stop();
    expect(isAlive(pid)).toBe(false);
    // A server whose payrecon is alive is still not ours: this process's own, met again, is left running.
    const own = await startEmbeddedPostgres({ dataDir });
    try {
      const again = await startEmbeddedPostgres({ dataDir });
      expect(again.owned).toBe(false);
      await again.stop();
      const ownPid = Number((await readFile(join(dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0]);
      expect(isAlive(ownPid)).toBe(true);
    } finally {
      await own.stop();
    }
  }, 120_000);
});
