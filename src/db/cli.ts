/**
 * `payrecon db migrate | verify | rollback | snapshot` on the database the CLI chooses (`--url`, DATABASE_URL, the
 * running `payrecon up`'s, else the embedded PostgreSQL under `<data dir>/pg`; see src/endpoints.ts).
 * `verify` exits non-zero and names each failed invariant.
 */
import { localUser } from '../config.ts';
import { AppError } from '../domain/errors.ts';
import { takeBalanceSnapshots } from './balance-snapshots.ts';
import { createDb, migrateDown, migrateToLatest } from './connection.ts';
import { decideIllegalTransition } from './decisions.ts';
import { verifyLedger } from './verify.ts';

/** The command's database (chosen by the CLI: option, environment, running instance, embedded). */
export type OpenDatabase = () => Promise<{ url: string; stop(): Promise<void> }>;

export type DbAction = 'migrate' | 'verify' | 'rollback' | 'snapshot';

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
    } else if (action === 'snapshot') {
      const written = await takeBalanceSnapshots(db);
      process.stdout.write(`balance snapshots: ${written} written\n`);
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

export interface DecideOptions {
  acceptProvider?: boolean;
  keepLedger?: boolean;
  note?: string;
  by?: string;
}

/**
 * `payrecon exception decide <id> --accept-provider|--keep-ledger --note TEXT --by NAME`: an operator's
 * decision on an ILLEGAL_TRANSITION (src/db/decisions.ts), printed as one line.
 */
export async function runDecideCli(id: string, opts: DecideOptions, open: OpenDatabase): Promise<void> {
  if (Boolean(opts.acceptProvider) === Boolean(opts.keepLedger)) {
    throw new AppError(
      'VALIDATION_FAILED',
      'exception decide: give exactly one of --accept-provider or --keep-ledger',
    );
  }
  const by = opts.by ?? localUser() ?? '';
  const database = await open();
  const db = createDb(database.url, 2);
  try {
    const r = await decideIllegalTransition(db, {
      id,
      decision: opts.acceptProvider ? 'accept-provider' : 'keep-ledger',
      by,
      note: opts.note ?? '',
    });
    process.stdout.write(
      r.decision === 'accept-provider'
        ? `exception ${id} resolved: accepted the provider's status ${r.providerStatus} (was ${r.ledgerStatus ?? 'none'}), ${r.entriesBooked} entries booked\n`
        : `exception ${id} resolved: kept the ledger's status ${r.ledgerStatus ?? 'none'} (provider reported ${r.providerStatus})\n`,
    );
  } finally {
    await db.destroy();
    await database.stop();
  }
}
