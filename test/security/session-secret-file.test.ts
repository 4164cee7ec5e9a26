/**
 * The page's session secret file is closed to others at every start, whatever mode it was found in (a
 * copy or a restore may have opened it): the secret signs every session cookie.
 */
import { chmod, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveSessionSecret, SESSION_SECRET_FILE } from '../../src/web/session-secret.ts';

describe('the session secret file', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it('is created 0600 and set back to 0600 when found readable by others', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'payrecon-secret-'));
    dirs.push(dir);
    const path = join(dir, SESSION_SECRET_FILE);
    const first = await resolveSessionSecret(null, dir);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    await chmod(path, 0o644);
    expect(await resolveSessionSecret(null, dir)).toBe(first);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
  });

  it('keeps an existing secret and closes it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'payrecon-secret-'));
    dirs.push(dir);
    const path = join(dir, SESSION_SECRET_FILE);
    await writeFile(path, `${'s'.repeat(40)}\n`, { mode: 0o644 });
    await chmod(path, 0o644);
    expect(await resolveSessionSecret(null, dir)).toBe('s'.repeat(40));
    expect((await stat(path)).mode & 0o777).toBe(0o600);
  });
});
