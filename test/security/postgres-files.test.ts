/**
 * The embedded PostgreSQL's files: the password file is readable by its owner alone after every start,
 * whatever mode an earlier file had, and no directory above the data directory's own changes mode. As
 * root (how these tests run here) a path the postgres user cannot reach is refused in one line, with
 * nothing changed on the way.
 */
import { chmod, mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmbeddedPostgres } from '../../src/embedded/postgres.ts';

const isRoot = process.getuid?.() === 0;
let base = '';

/** Mode bits of every directory from `dir` up to the root. */
async function modesUpFrom(dir: string): Promise<Map<string, number>> {
  const modes = new Map<string, number>();
  for (let d = dir; ; d = dirname(d)) {
    modes.set(d, (await stat(d)).mode & 0o7777);
    if (d === dirname(d)) break;
  }
  return modes;
}

const modeOf = async (path: string) => (await stat(path)).mode & 0o777;

async function answers(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    expect((await client.query('SELECT 1 AS one')).rows[0].one).toBe(1);
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  base = await mkdtemp(join(tmpdir(), 'payrecon-pgfiles-'));
  // The test's own directory, searchable like any shared parent (/tmp, a project folder).
  await chmod(base, 0o755);
});

afterAll(async () => {
  if (base) await rm(base, { recursive: true, force: true });
});

describe('embedded PostgreSQL files', () => {
  it('the password file is 0600 after a start even when it existed as 0644, at creation and at reuse', async () => {
    const holder = join(base, 'data');
    await mkdir(holder, { mode: 0o755 });
    await chmod(holder, 0o755);
    const dataDir = join(holder, 'pg');
    const passwordFile = `${dataDir}.password`;
    // A stale password file, world-readable, before the cluster exists.
    await writeFile(passwordFile, 'stale-password\n', { mode: 0o644 });
    await chmod(passwordFile, 0o644);
    const above = await modesUpFrom(base);

    const first = await startEmbeddedPostgres({ dataDir });
    try {
      expect(await modeOf(passwordFile)).toBe(0o600);
      expect(first.url).not.toContain('stale-password');
      await answers(first.url);
    } finally {
      await first.stop();
    }
    // Nothing of initdb's password is left beside the data directory.
    expect((await readdir(holder)).sort()).toEqual(['pg', 'pg.password']);

    // Reused with the same password: an existing 0644 file is made 0600 again.
    await chmod(passwordFile, 0o644);
    const second = await startEmbeddedPostgres({ dataDir });
    try {
      expect(await modeOf(passwordFile)).toBe(0o600);
      expect(second.url).toBe(first.url.replace(`:${first.port}/`, `:${second.port}/`));
      await answers(second.url);
    } finally {
      await second.stop();
    }
    expect(await modesUpFrom(base)).toEqual(above);
  }, 120_000);

  it.runIf(isRoot)(
    "as root: only the data directory's own directory gets search permission, nothing above it",
    async () => {
      // A private directory (0700, like mkdtemp's) holding the data directory and its password file.
      const holder = join(base, 'private');
      await mkdir(holder, { mode: 0o700 });
      await chmod(holder, 0o700);
      const above = await modesUpFrom(base);
      const server = await startEmbeddedPostgres({ dataDir: join(holder, 'pg') });
      try {
        await answers(server.url);
        // Search for others added (the postgres user must pass), never read or write.
        expect(await modeOf(holder)).toBe(0o701);
        expect(await modeOf(join(holder, 'pg'))).toBe(0o700);
        expect(await modeOf(join(holder, 'pg.password'))).toBe(0o600);
      } finally {
        await server.stop();
      }
      expect(await modesUpFrom(base)).toEqual(above);
    },
    120_000,
  );

  it.runIf(isRoot)(
    'as root: a data directory under a directory the postgres user cannot search is refused in one line',
    async () => {
      const locked = join(base, 'locked');
      await mkdir(locked, { mode: 0o750 });
      await chmod(locked, 0o750);
      const holder = join(locked, 'data');
      await mkdir(holder, { mode: 0o700 });
      await chmod(holder, 0o700);
      const dataDir = join(holder, 'pg');
      const before = await modesUpFrom(holder);
      const failure = await startEmbeddedPostgres({ dataDir }).then(
        () => null,
        (err: Error) => err,
      );
      expect(failure).toBeInstanceOf(Error);
      expect(failure!.message).toBe(
        `${dataDir}: run as root, PostgreSQL runs as the postgres user, who cannot search ${locked}; put the data directory under directories others can search, or run payrecon as an unprivileged user`,
      );
      expect(failure!.message).not.toContain('\n');
      expect(await modesUpFrom(holder)).toEqual(before);
      // Refused before anything was written: no data directory, no password file.
      expect(await readdir(holder)).toEqual([]);
    },
    60_000,
  );
});
