/**
 * Opens the ledger database (Kysely over `pg`) and runs its migrations. The migrations are listed in
 * code (no directory scan), so they work from any working directory and under tsx.
 */
import { Kysely, type Migration, type MigrationResultSet, Migrator, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { AppError } from '../domain/errors.ts';
import { namingPool } from './ledger/statements.ts';
import * as m20261128T205022Z from './migrations/20261128T205022Z_baseline.ts';
import * as m20261128T210451Z from './migrations/20261128T210451Z_mirror_version.ts';
import * as m20261128T215836Z from './migrations/20261128T215836Z_imports.ts';
import * as m20261128T222439Z from './migrations/20261128T222439Z_api_tokens.ts';
import * as m20261128T234806Z from './migrations/20261128T234806Z_web_sessions.ts';
import * as m20261128T234940Z from './migrations/20261128T234940Z_decision_approvals.ts';
import * as m20261128T234945Z from './migrations/20261128T234945Z_cash_leg.ts';
import * as m20261128T235205Z from './migrations/20261128T235205Z_matches.ts';
import * as m20261129T010202Z from './migrations/20261129T010202Z_statement_closing_date.ts';
import * as m20261129T030428Z from './migrations/20261129T030428Z_import_matching.ts';
import * as m20261129T031319Z from './migrations/20261129T031319Z_settlement_balance.ts';
import * as m20261129T043431Z from './migrations/20261129T043431Z_duplicate_line_indexes.ts';
import * as m20261129T063647Z from './migrations/20261129T063647Z_balance_checks.ts';
import type { Database, Db } from './schema.ts';

/**
 * Every migration, in the order it was added. A migration is named `<UTC instant>_<what>`, the instant as
 * `YYYYMMDDTHHMMSSZ` (when it was written, to the second): the names then sort in the order they were
 * added, which is the order the migrator runs them in (test/db/migration-names.test.ts holds it). To add
 * one: a file `src/db/migrations/<instant>_<what>.ts` exporting `up` and `down`, imported above and listed
 * last here. The first, the baseline, is the whole schema as it stood before the first release; a
 * database made by the migrations it replaced is re-created (dropped, then migrated).
 */
export const MIGRATIONS: Readonly<Record<string, Migration>> = {
  '20261128T205022Z_baseline': m20261128T205022Z,
  '20261128T210451Z_mirror_version': m20261128T210451Z,
  '20261128T215836Z_imports': m20261128T215836Z,
  '20261128T222439Z_api_tokens': m20261128T222439Z,
  '20261128T234806Z_web_sessions': m20261128T234806Z,
  '20261128T234940Z_decision_approvals': m20261128T234940Z,
  '20261128T234945Z_cash_leg': m20261128T234945Z,
  '20261128T235205Z_matches': m20261128T235205Z,
  '20261129T010202Z_statement_closing_date': m20261129T010202Z,
  '20261129T030428Z_import_matching': m20261129T030428Z,
  '20261129T031319Z_settlement_balance': m20261129T031319Z,
  '20261129T043431Z_duplicate_line_indexes': m20261129T043431Z,
  '20261129T063647Z_balance_checks': m20261129T063647Z,
};

export interface OpenDatabaseOptions {
  /** postgres:// URL. */
  url: string;
  /** Pool size (default 10). */
  max?: number;
}

/**
 * A Kysely instance over a `pg` pool; `db.destroy()` closes the pool. Statements marked by `prepared`
 * (src/db/prepared.ts) go out as named prepared statements.
 */
export function createDb(url: string, max = 10): Db {
  // Pipeline mode: a query is written as soon as it is issued instead of after the answer to the one
  // before, so `pipelined` sends a batch's independent statements in one round trip. Kysely still awaits
  // every other statement before issuing the next (one at a time per connection, as without it).
  const pool = new pg.Pool({ connectionString: url, max, pipeline: true });
  // An idle client's error (server restart) must not crash the process; the next query reconnects.
  pool.on('error', () => undefined);
  // Nor may a checked-out client's: a server shutdown (57P01) arriving between two queries of a
  // transaction is emitted on the client, which pg-pool only guards while idle. The next query on it
  // fails and the caller's outage handling takes over (found by the restart test).
  pool.on('connect', (client) => {
    client.on('error', () => undefined);
  });
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool: namingPool(pool) }) });
}

export function openDatabase(options: OpenDatabaseOptions): Db {
  return createDb(options.url, options.max);
}

function migrator(db: Db): Migrator {
  return new Migrator({
    db,
    provider: { getMigrations: async () => ({ ...MIGRATIONS }) },
    migrationTableName: 'kysely_migration',
    migrationLockTableName: 'kysely_migration_lock',
  });
}

/**
 * A TLS problem between payrecon and PostgreSQL as one line naming the setting to fix, or null: an
 * untrusted certificate (DATABASE_SSL_CA_FILE), a certificate for another host, or a server without
 * TLS while DATABASE_URL's sslmode asks for it. These are configuration errors, never waited out.
 */
export function databaseTlsFailure(err: unknown): string | null {
  for (
    let e = err as { code?: unknown; message?: unknown; cause?: unknown } | null, depth = 0;
    e && depth < 5;
    depth++
  ) {
    const code = typeof e.code === 'string' ? e.code : '';
    const message = typeof e.message === 'string' ? e.message : '';
    if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
      return `DATABASE_URL: the PostgreSQL server's certificate does not name this host (${code})`;
    }
    if (
      /^(SELF_SIGNED_CERT_IN_CHAIN|DEPTH_ZERO_SELF_SIGNED_CERT|UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT(_LOCALLY)?|CERT_[A-Z_]+)$/.test(
        code,
      )
    ) {
      return `DATABASE_SSL_CA_FILE: the certificate of the PostgreSQL server is not trusted (${code})`;
    }
    if (/server does not support SSL connections/i.test(message)) {
      return 'DATABASE_URL: the PostgreSQL server does not accept TLS, and sslmode (or DATABASE_SSL_CA_FILE) asks for it';
    }
    e = e.cause as typeof e;
  }
  return null;
}

function check(result: MigrationResultSet, what: string): string[] {
  if (result.error) {
    const tls = databaseTlsFailure(result.error);
    if (tls) throw new AppError('CONFIG_INVALID', tls, { cause: result.error, retryable: false });
    const unknown = /previously executed migration (\S+) is missing/.exec(String(result.error))?.[1];
    if (unknown) {
      throw new AppError(
        'CONFLICT',
        `database: it ran migration ${unknown}, which this code does not have (newer code's, or one the ` +
          `baseline ${Object.keys(MIGRATIONS)[0]} replaced: such a database is re-created, dropped and then ` +
          `\`payrecon db migrate\`)`,
        { cause: result.error, retryable: false },
      );
    }
    throw new AppError('DATABASE_UNAVAILABLE', `${what} failed: ${String(result.error)}`, {
      cause: result.error,
      retryable: false,
    });
  }
  return (result.results ?? []).map((r) => `${r.direction} ${r.migrationName}: ${r.status}`);
}

/** Applies every pending migration; returns one line per migration run. */
export async function migrateToLatest(db: Db): Promise<string[]> {
  return check(await migrator(db).migrateToLatest(), 'migration');
}

/** Names of the migrations of this code the database has not run, read without writing anything. */
export async function pendingMigrations(db: Db): Promise<string[]> {
  const table = await sql<{ t: string | null }>`SELECT to_regclass('kysely_migration')::text AS t`.execute(
    db,
  );
  const done = new Set<string>();
  if (table.rows[0]?.t) {
    const rows = await sql<{ name: string }>`SELECT name FROM kysely_migration`.execute(db);
    for (const r of rows.rows) done.add(r.name);
  }
  return Object.keys(MIGRATIONS).filter((name) => !done.has(name));
}

/** Fails with one line when the schema is behind the code (commands that must not migrate). */
export async function requireCurrentSchema(db: Db): Promise<void> {
  const pending = await pendingMigrations(db);
  if (pending.length > 0) {
    throw new AppError(
      'CONFLICT',
      `database: schema behind the code (${pending.length} migration(s) pending, first ${pending[0]}); run \`payrecon db migrate\``,
    );
  }
}

/** Reverts the latest migration (`payrecon db rollback`). */
export async function migrateDown(db: Db): Promise<string[]> {
  return check(await migrator(db).migrateDown(), 'rollback');
}

/**
 * PostgreSQL or socket errors that mean "the server is not there right now" (refused, reset, shutting
 * down, starting up, too many connections), looked for along the `cause` chain.
 */
export function isDatabaseOutage(err: unknown): boolean {
  for (
    let e = err as { code?: unknown; message?: unknown; cause?: unknown } | null, depth = 0;
    e && depth < 5;
    depth++
  ) {
    const code = typeof e.code === 'string' ? e.code : '';
    if (['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN'].includes(code))
      return true;
    // 08: connection exceptions; 57P01-57P03: admin shutdown, crash shutdown, cannot connect now; 53300: too many connections.
    if (/^08/.test(code) || ['57P01', '57P02', '57P03', '53300'].includes(code)) return true;
    const message = typeof e.message === 'string' ? e.message : '';
    if (
      /Connection terminated|connection timeout|Client has encountered a connection error|terminating connection|the database system is (starting up|shutting down)/i.test(
        message,
      )
    ) {
      return true;
    }
    e = e.cause as typeof e;
  }
  return false;
}

export interface OutageWait {
  /** True once the caller is stopping: the outage is then thrown (retryable) instead of waited out. */
  stopping(): boolean;
  /** Called after each wait (a consumer heartbeats so the group keeps it). */
  afterWait(): Promise<void>;
  log: { warn(obj: object, msg: string): void };
  /** Longest wait between tries (default 5 s); waits double from 100 ms. */
  maxBackoffMs?: number;
}

/**
 * Runs `work` until it succeeds, waiting out database outages (`isDatabaseOutage`) with doubling
 * back-off: for a consumer an outage is not a reason to dead-letter good messages. Other errors, and an
 * outage while stopping (as a retryable DATABASE_UNAVAILABLE), propagate.
 */
export async function waitOutDatabaseOutages<T>(work: () => Promise<T>, wait: OutageWait): Promise<T> {
  for (let outage = 0; ; outage++) {
    try {
      return await work();
    } catch (err) {
      if (!isDatabaseOutage(err)) throw err;
      if (wait.stopping()) {
        throw new AppError('DATABASE_UNAVAILABLE', 'database unavailable while stopping', { cause: err });
      }
      const ms = Math.min(wait.maxBackoffMs ?? 5_000, 100 * 2 ** Math.min(outage, 6));
      wait.log.warn({ err, wait: ms, attempt: outage + 1 }, 'database unavailable, batch waits');
      await new Promise((r) => setTimeout(r, ms));
      await wait.afterWait();
    }
  }
}

/**
 * Migrates once the server answers: a process started while PostgreSQL restarts waits (with back-off,
 * up to `maxWaitMs`, default 5 minutes) instead of exiting.
 */
export async function migrateWhenReady(
  db: Db,
  options: { maxWaitMs?: number; onWait?: (err: unknown, attempt: number, waitMs: number) => void } = {},
): Promise<string[]> {
  const deadline = Date.now() + (options.maxWaitMs ?? 300_000);
  for (let attempt = 1; ; attempt++) {
    try {
      return await migrateToLatest(db);
    } catch (err) {
      if (!isDatabaseOutage(err) || Date.now() > deadline) throw err;
      const wait = Math.min(5_000, 100 * 2 ** Math.min(attempt, 6));
      options.onWait?.(err, attempt, wait);
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}

/** Resolves when the database answers a trivial query (readiness checks). */
export async function pingDatabase(db: Db): Promise<void> {
  await sql`SELECT 1`.execute(db);
}
