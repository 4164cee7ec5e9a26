/**
 * Each test file gets its own database `payrecon_t_<random>` on the run's PostgreSQL server, migrated,
 * and dropped after. The server is chosen once per run by the global setup (test/setup/database.ts):
 * `TEST_DATABASE_URL`, else 127.0.0.1:5432 when it answers, else one embedded PostgreSQL.
 */
import { randomBytes } from 'node:crypto';
import { type Kysely, sql } from 'kysely';
import pg from 'pg';
import { inject } from 'vitest';
import { createDb, migrateToLatest } from '../../src/db/connection.ts';
import type { Database } from '../../src/db/schema.ts';
import { waitFor } from '../helpers/wait.ts';

/** postgres:// URL of the run's server (its `postgres` database), a role that may create databases. */
export const ADMIN_URL: string = inject('databaseUrl');

export function urlFor(database: string, base = ADMIN_URL): string {
  const url = new URL(base);
  url.pathname = `/${database}`;
  return url.toString();
}

export interface TestDatabase {
  name: string;
  url: string;
  db: Kysely<Database>;
  drop(): Promise<void>;
}

export async function createTestDatabase(options: { migrate?: boolean } = {}): Promise<TestDatabase> {
  const base = ADMIN_URL;
  const name = `payrecon_t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = urlFor(name, base);
  const db = createDb(url, 6);
  if (options.migrate !== false) await migrateToLatest(db);
  return {
    name,
    url,
    db,
    async drop() {
      await db.destroy();
      const c = new pg.Client({ connectionString: base });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

/**
 * Resolves once a backend of `db`'s database waits for a lock (`wait_event_type = 'Lock'`): the marker that
 * a concurrent transaction a test set up is blocked. `waitEvent` and `query` (a LIKE pattern of its
 * statement) narrow it down. Throws after `ms`.
 */
export async function someoneWaitsForALock(
  db: Kysely<Database>,
  options: { waitEvent?: string; query?: string; ms?: number } = {},
): Promise<void> {
  await waitFor(
    'a backend of this database to wait for a lock',
    async () => {
      const { rows } = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock'
          AND (${options.waitEvent ?? null}::text IS NULL OR wait_event = ${options.waitEvent ?? null})
          AND (${options.query ?? null}::text IS NULL OR query LIKE ${options.query ?? null})`.execute(db);
      return (rows[0]?.n ?? 0) > 0;
    },
    { ms: options.ms ?? 10_000, every: 20 },
  );
}

/** The names of a table's indexes in the current schema, sorted. */
export async function indexesOf(db: Kysely<Database>, table: string): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`
    SELECT indexname AS name FROM pg_indexes WHERE tablename = ${table} AND schemaname = current_schema()
    ORDER BY 1`.execute(db);
  return rows.map((r) => r.name);
}

/**
 * Holds matching's advisory lock (src/db/matching/service.ts) from a connection of its own until
 * `release`: a matching run started meanwhile waits for it, and `dropWaitingRun` ends that run's
 * connection as a database going away would (the run fails; what it waited to write is not written).
 */
export async function holdMatchingLock(t: TestDatabase): Promise<{
  dropWaitingRun(): Promise<void>;
  release(): Promise<void>;
}> {
  const holder = new pg.Client({ connectionString: t.url });
  await holder.connect();
  await holder.query('BEGIN');
  await holder.query(`SELECT pg_advisory_xact_lock(hashtext('payrecon.matching'))`);
  return {
    async dropWaitingRun() {
      const query = '%payrecon.matching%';
      await someoneWaitsForALock(t.db, { query });
      await sql`
        SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE ${query}`.execute(
        t.db,
      );
    },
    async release() {
      await holder.query('COMMIT');
      await holder.end();
    },
  };
}
