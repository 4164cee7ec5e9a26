/**
 * `payrecon registry`: runs the embedded schema registry in the foreground until SIGINT or SIGTERM.
 * Prints one line with the URL (and so the chosen port when `--port 0`).
 */
import { readFileSync } from 'node:fs';
import { startRegistry } from './registry.ts';

export interface RegistryCliOptions {
  host: string;
  port: string;
  dataDir: string;
  /** JSON file of user name to password: basic auth required. */
  users?: string;
  tlsCert?: string;
  tlsKey?: string;
}

function readOption(file: string, name: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(
      `--${name}: must name a readable file (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
    );
  }
}

function usersOf(file: string): Record<string, string> {
  let users: unknown;
  try {
    users = JSON.parse(readOption(file, 'users'));
  } catch (err) {
    if ((err as Error).message.startsWith('--')) throw err;
    throw new Error('--users: must be a JSON object of user name to password');
  }
  const ok =
    typeof users === 'object' &&
    users !== null &&
    !Array.isArray(users) &&
    Object.keys(users).length > 0 &&
    Object.entries(users).every(
      ([u, p]) => u !== '' && !u.includes(':') && typeof p === 'string' && p !== '',
    );
  if (!ok) {
    throw new Error('--users: must be a JSON object of user name (no colon) to non-empty password');
  }
  return users as Record<string, string>;
}

export async function runRegistryCli(opts: RegistryCliOptions): Promise<void> {
  const port = Number(opts.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`--port must be an integer between 0 and 65535 (got ${opts.port})`);
  }
  if ((opts.tlsCert === undefined) !== (opts.tlsKey === undefined)) {
    throw new Error('--tls-cert and --tls-key: must be given together');
  }
  const registry = await startRegistry({
    host: opts.host,
    port,
    dataDir: opts.dataDir,
    ...(opts.users === undefined ? {} : { users: usersOf(opts.users) }),
    ...(opts.tlsCert !== undefined && opts.tlsKey !== undefined
      ? { tls: { cert: readOption(opts.tlsCert, 'tls-cert'), key: readOption(opts.tlsKey, 'tls-key') } }
      : {}),
  });
  process.stdout.write(`schema registry listening on ${registry.url} (port ${registry.port})\n`);
  const stop = () => {
    registry.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
