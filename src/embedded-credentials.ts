/**
 * The credentials of the embedded broker (SASL SCRAM) and schema registry (HTTP basic auth) that
 * `payrecon up` starts: random, made once per data directory and kept in
 * `<data dir>/embedded-credentials.json` beside the PostgreSQL password (`pg.password`), mode 0600 at
 * every start whatever an earlier file had, and reused at every start. `up` writes them into its
 * endpoints file (mode 0600 too), where every other command finds them. They never reach a log.
 */
import { randomBytes } from 'node:crypto';
import { chmod, link, mkdir, readFile, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { AppError } from './domain/errors.ts';

export const EMBEDDED_CREDENTIALS_FILE = 'embedded-credentials.json';

/** The user payrecon's clients authenticate as, to the broker and to the registry. */
export const EMBEDDED_USER = 'payrecon';

/** What a Kafka client presents to the embedded broker (kafkajs' `sasl` setting). */
export interface BrokerCredentials {
  readonly mechanism: 'scram-sha-512';
  readonly username: string;
  readonly password: string;
}

/** What a registry client presents to the embedded registry (HTTP basic auth). */
export interface RegistryCredentials {
  readonly username: string;
  readonly password: string;
}

export interface EmbeddedCredentials {
  readonly kafka: BrokerCredentials;
  readonly registry: RegistryCredentials;
}

export function embeddedCredentialsFile(dataDir: string): string {
  return join(dataDir, EMBEDDED_CREDENTIALS_FILE);
}

const secret = () => randomBytes(24).toString('base64url');

function parse(text: string, file: string): EmbeddedCredentials {
  const unusable = () =>
    new AppError('CONFIG_INVALID', `${file}: not payrecon's credentials file (delete it to make new ones)`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw unusable();
  }
  const pair = (v: unknown): v is { username: string; password: string } =>
    typeof v === 'object' &&
    v !== null &&
    typeof (v as { username?: unknown }).username === 'string' &&
    typeof (v as { password?: unknown }).password === 'string' &&
    (v as { username: string }).username !== '' &&
    !(v as { username: string }).username.includes(':') &&
    (v as { password: string }).password.length >= 16;
  const { kafka, registry } = (value ?? {}) as { kafka?: unknown; registry?: unknown };
  if (!pair(kafka) || !pair(registry)) throw unusable();
  return {
    kafka: { mechanism: 'scram-sha-512', username: kafka.username, password: kafka.password },
    registry: { username: registry.username, password: registry.password },
  };
}

/**
 * The data directory's credentials: read (and closed to others again) when the file exists, else made
 * and written. Two processes starting at once agree: the file appears whole or not at all, and the
 * second reads the first's.
 */
export async function embeddedCredentials(dataDir: string): Promise<EmbeddedCredentials> {
  const file = embeddedCredentialsFile(dataDir);
  const existing = await readFile(file, 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return null;
    throw err;
  });
  if (existing !== null) {
    const credentials = parse(existing, file);
    // A file someone made readable (a copy, a restore) is closed again.
    await chmod(file, 0o600);
    return credentials;
  }
  await mkdir(dataDir, { recursive: true });
  const made = {
    kafka: { username: EMBEDDED_USER, password: secret() },
    registry: { username: EMBEDDED_USER, password: secret() },
  };
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    await writeFile(tmp, `${JSON.stringify(made, null, 2)}\n`, { mode: 0o600, flag: 'wx' });
    await chmod(tmp, 0o600);
    // link, not rename: it never replaces a file another process has just made.
    await link(tmp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return embeddedCredentials(dataDir);
    throw err;
  } finally {
    await unlink(tmp).catch(() => undefined);
  }
  return parse(JSON.stringify(made), file);
}
