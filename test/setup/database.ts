/**
 * Vitest global setup: the one PostgreSQL server every database test uses for the whole run.
 *
 * - `TEST_DATABASE_URL` (a postgres:// URL of a role that may create databases) wins;
 * - else the machine's server at 127.0.0.1:5432 when it answers;
 * - else (or with `TEST_DATABASE_URL=embedded`) one embedded PostgreSQL in a temporary directory,
 *   started here and stopped when the run ends.
 *
 * The URL reaches the test files through `inject('databaseUrl')` (see `test/db/helpers.ts`), where each
 * file creates and drops its own database on that server.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres } from '../../src/embedded/postgres.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** postgres:// URL of the tests' server (its `postgres` database); see test/setup/database.ts. */
    databaseUrl: string;
  }
}

export const MACHINE_URL = 'postgres://postgres@127.0.0.1:5432/postgres';

/** True when a PostgreSQL server answers at `url` within two seconds. */
export async function answers(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const configured = process.env.TEST_DATABASE_URL;
  if (configured && configured !== 'embedded') {
    project.provide('databaseUrl', configured);
    return async () => undefined;
  }
  if (configured !== 'embedded' && (await answers(MACHINE_URL))) {
    project.provide('databaseUrl', MACHINE_URL);
    return async () => undefined;
  }
  const dir = await mkdtemp(join(tmpdir(), 'payrecon-test-pg-'));
  const server = await startEmbeddedPostgres({ dataDir: join(dir, 'pg'), database: 'postgres' });
  process.stderr.write(
    `test database: no server at ${MACHINE_URL.replace('postgres@', '')}, using one embedded PostgreSQL on port ${server.port}\n`,
  );
  project.provide('databaseUrl', server.url);
  return async () => {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  };
}
