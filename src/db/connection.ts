/**
 * Opens the ledger database (Kysely over `pg`) and runs its migrations. The migrations are listed in
 * code (no directory scan), so they work from any working directory and under tsx.
 */
import { Kysely, type Migration, type MigrationResultSet, Migrator, PostgresDialect } from 'kysely';
import pg from 'pg';
import { AppError } from '../domain/errors.ts';
import * as m20261121T1040 from './migrations/20261121T1040_ledger.ts';
import * as m20261121T1200 from './migrations/20261121T1200_report_runs_detail.ts';
import * as m20261121T1300 from './migrations/20261121T1300_alert_deliveries.ts';
import * as m20261121T1400 from './migrations/20261121T1400_ledger_set_checks.ts';
import type { Database } from './schema.ts';

export const MIGRATIONS: Readonly<Record<string, Migration>> = {
  '20261121T1040_ledger': m20261121T1040,
  '20261121T1200_report_runs_detail': m20261121T1200,
  '20261121T1300_alert_deliveries': m20261121T1300,
  '20261121T1400_ledger_set_checks': m20261121T1400,
};

export interface OpenDatabaseOptions {
  /** postgres:// URL. */
  url: string;
  /** Pool size (default 10). */
  max?: number;
}

/** A Kysely instance over a `pg` pool; `db.destroy()` closes the pool. */
export function createDb(url: string, max = 10): Kysely<Database> {
  const pool = new pg.Pool({ connectionString: url, max });
  // An idle client's error (server restart) must not crash the process; the next query reconnects.
  pool.on('error', () => undefined);
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
}

export function openDatabase(options: OpenDatabaseOptions): Kysely<Database> {
  return createDb(options.url, options.max);
}

function migrator(db: Kysely<Database>): Migrator {
  return new Migrator({
    db,
    provider: { getMigrations: async () => ({ ...MIGRATIONS }) },
    migrationTableName: 'kysely_migration',
    migrationLockTableName: 'kysely_migration_lock',
  });
}

function check(result: MigrationResultSet, what: string): string[] {
  if (result.error) {
    throw new AppError('DATABASE_UNAVAILABLE', `${what} failed: ${String(result.error)}`, {
      cause: result.error,
      retryable: false,
    });
  }
  return (result.results ?? []).map((r) => `${r.direction} ${r.migrationName}: ${r.status}`);
}

/** Applies every pending migration; returns one line per migration run. */
export async function migrateToLatest(db: Kysely<Database>): Promise<string[]> {
  return check(await migrator(db).migrateToLatest(), 'migration');
}

/** Reverts the latest migration (`payrecon db rollback`). */
export async function migrateDown(db: Kysely<Database>): Promise<string[]> {
  return check(await migrator(db).migrateDown(), 'rollback');
}
