/**
 * The secret that signs the page's session cookies. `PAYRECON_SESSION_SECRET` wins when set; otherwise
 * a random secret is created once under the data directory (`web-session-secret`, mode 0600) and read
 * back at every start, so signed-in users stay signed in across a restart.
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { AppError } from '../domain/errors.ts';

export const SESSION_SECRET_FILE = 'web-session-secret';

export async function resolveSessionSecret(configured: string | null, dataDir: string): Promise<string> {
  if (configured) return configured;
  const path = join(dataDir, SESSION_SECRET_FILE);
  const existing = await readFile(path, 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return null;
    throw err;
  });
  if (existing !== null) {
    const secret = existing.trim();
    if (secret.length < 32) {
      throw new AppError('CONFIG_INVALID', `${path}: at least 32 characters (delete it to create a new one)`);
    }
    // A file someone made readable (a copy, a restore) is closed again: the secret signs every session.
    await chmod(path, 0o600);
    return secret;
  }
  await mkdir(dataDir, { recursive: true });
  const secret = randomBytes(32).toString('base64url');
  try {
    // 'wx': two processes starting at once do not overwrite each other's secret.
    await writeFile(path, `${secret}\n`, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return resolveSessionSecret(null, dataDir);
    throw err;
  }
  await chmod(path, 0o600);
  return secret;
}
