/**
 * Each test file gets its own database `payrecon_t_<random>` on the machine's PostgreSQL
 * (`TEST_DATABASE_URL`, default postgres://postgres@127.0.0.1:5432/postgres), migrated, and dropped after.
 * With `TEST_DATABASE_URL=embedded` the same suite runs against an embedded PostgreSQL started per test
 * file in a temporary directory.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Kysely } from 'kysely';
import pg from 'pg';
import { createDb, migrateToLatest } from '../../src/db/connection.ts';
import type { Database } from '../../src/db/schema.ts';
import { startEmbeddedPostgres } from '../../src/embedded/postgres.ts';

const CONFIGURED = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const ADMIN_URL = CONFIGURED === 'embedded' ? '' : CONFIGURED;

async function serverUrl(): Promise<{ base: string; stop: () => Promise<void> }> {
  if (CONFIGURED !== 'embedded') return { base: CONFIGURED, stop: async () => undefined };
  const dir = await mkdtemp(join(tmpdir(), 'payrecon-test-pg-'));
  const server = await startEmbeddedPostgres({ dataDir: join(dir, 'pg'), database: 'postgres' });
  return {
    base: server.url,
    stop: async () => {
      await server.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

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
  const server = await serverUrl();
  const base = server.base;
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
      await server.stop();
    },
  };
}
