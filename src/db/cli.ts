/**
 * `payrecon db migrate | verify | rollback`. With DATABASE_URL set, that server; without it, the embedded
 * PostgreSQL under `<data dir>/pg`, whose starter the CLI hands in (the app never imports src/embedded/).
 * `verify` exits non-zero and names each failed invariant.
 */
import { join } from 'node:path';
import { loadConfig } from '../config.ts';
import { createDb, migrateDown, migrateToLatest } from './connection.ts';
import { verifyLedger } from './verify.ts';

export type StartEmbeddedPostgres = (options: {
  dataDir: string;
}) => Promise<{ url: string; stop(): Promise<void> }>;

export type DbAction = 'migrate' | 'verify' | 'rollback';

export async function runDbCli(
  action: DbAction,
  opts: { url?: string },
  startEmbedded: () => Promise<StartEmbeddedPostgres>,
): Promise<void> {
  const config = loadConfig();
  let url = opts.url ?? config.database.url;
  let stop: (() => Promise<void>) | null = null;
  if (!url) {
    const start = await startEmbedded();
    const server = await start({ dataDir: join(config.dataDir, 'pg') });
    url = server.url;
    stop = () => server.stop();
  }
  const db = createDb(url, 4);
  try {
    if (action === 'migrate') {
      const lines = await migrateToLatest(db);
      process.stdout.write(lines.length ? `${lines.join('\n')}\n` : 'database is up to date\n');
    } else if (action === 'rollback') {
      const lines = await migrateDown(db);
      process.stdout.write(lines.length ? `${lines.join('\n')}\n` : 'nothing to roll back\n');
    } else {
      const result = await verifyLedger(db);
      if (result.ok) {
        process.stdout.write(
          `ledger verified: ${result.entries} entries, ${result.entities} entities, all invariants hold\n`,
        );
      } else {
        process.stderr.write(`ledger verification failed (${result.failures.length}):\n`);
        for (const f of result.failures) process.stderr.write(`  - ${f}\n`);
        process.exitCode = 1;
      }
    }
  } finally {
    await db.destroy();
    if (stop) await stop();
  }
}
