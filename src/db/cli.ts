/**
 * `payrecon db migrate | verify | rollback` on the database the CLI chooses (`--url`, DATABASE_URL, the
 * running `payrecon up`'s, else the embedded PostgreSQL under `<data dir>/pg`; see src/endpoints.ts).
 * `verify` exits non-zero and names each failed invariant.
 */
import { createDb, migrateDown, migrateToLatest } from './connection.ts';
import { verifyLedger } from './verify.ts';

/** The command's database (chosen by the CLI: option, environment, running instance, embedded). */
export type OpenDatabase = () => Promise<{ url: string; stop(): Promise<void> }>;

export type DbAction = 'migrate' | 'verify' | 'rollback';

export async function runDbCli(action: DbAction, open: OpenDatabase): Promise<void> {
  const database = await open();
  const db = createDb(database.url, 4);
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
    await database.stop();
  }
}
