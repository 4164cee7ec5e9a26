/**
 * Each test file gets its own database `payrecon_t_<random>` on the run's PostgreSQL server, migrated,
 * and dropped after. The server is chosen once per run by the global setup (test/setup/database.ts):
 * `TEST_DATABASE_URL`, else 127.0.0.1:5432 when it answers, else one embedded PostgreSQL.
 */
import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import pg from 'pg';
import { inject } from 'vitest';
import { createDb, migrateToLatest } from '../../src/db/connection.ts';
import type { Database } from '../../src/db/schema.ts';

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
