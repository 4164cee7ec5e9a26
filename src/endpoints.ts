/**
 * The running instance's endpoints: `payrecon up` writes what it listens on (database URL with its
 * password, broker and registry with the credentials of the embedded ones, sandbox, web, webhooks) to
 * `<data dir>/endpoints.json`, mode 0600, and removes it on stop. Every other command takes each address from the environment first, then from this file, then
 * (the database only) from the embedded PostgreSQL it starts itself. A file whose process is gone is
 * stale: it is removed, with one line saying so.
 */
import { chmodSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { AppError } from './domain/errors.ts';
import type { BrokerCredentials, RegistryCredentials } from './embedded-credentials.ts';

export interface Endpoints {
  /** The `payrecon up` process. */
  pid: number;
  startedAt: string;
  databaseUrl: string;
  brokers: string[];
  /** The SCRAM credentials the embedded broker asks for (absent: it asks for none). */
  kafkaSasl?: BrokerCredentials;
  registryUrl: string;
  /** The basic-auth credentials the embedded registry asks for (absent: it asks for none). */
  registryAuth?: RegistryCredentials;
  web: string;
  /** Base URL of the provider's webhook routes (`web` unless they have their own listener). */
  webhooks?: string;
  sandbox?: Record<string, string>;
  /**
   * True when the page signs in the sandbox's users (no provider account and PAYRECON_WEB_USERS unset):
   * the commands that act as a user accept them too, against this instance's database.
   */
  sandboxUsers?: boolean;
}

const credentialsPair = (v: unknown): boolean =>
  v === undefined ||
  (typeof v === 'object' &&
    v !== null &&
    typeof (v as { username?: unknown }).username === 'string' &&
    typeof (v as { password?: unknown }).password === 'string');

export function endpointsFile(dataDir: string): string {
  return join(dataDir, 'endpoints.json');
}

/** True when a process with this id exists (ours or another user's). */
export function processAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Writes the file atomically, readable by its owner only. */
export function writeEndpoints(dataDir: string, endpoints: Endpoints): string {
  const file = endpointsFile(dataDir);
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(endpoints, null, 2)}\n`, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, file);
  return file;
}

/** Removes the file if it is this process's (a later `up` may have replaced it). */
export function removeEndpoints(dataDir: string, pid = process.pid): void {
  const file = endpointsFile(dataDir);
  try {
    const current = JSON.parse(readFileSync(file, 'utf8')) as Partial<Endpoints>;
    if (current.pid !== pid) return;
  } catch {
    return;
  }
  rmSync(file, { force: true });
}

/**
 * The endpoints of the `payrecon up` running on this data directory, or null. A file left by a process
 * that is gone is removed, and `onStale` told.
 */
export function runningEndpoints(dataDir: string, onStale?: (line: string) => void): Endpoints | null {
  const file = endpointsFile(dataDir);
  let parsed: Partial<Endpoints>;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<Endpoints>;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    onStale?.(`${file}: unreadable, ignored`);
    return null;
  }
  if (typeof parsed.pid !== 'number' || !processAlive(parsed.pid) || parsed.pid === process.pid) {
    rmSync(file, { force: true });
    onStale?.(`${file}: stale (payrecon up, pid ${parsed.pid ?? '?'}, is gone), removed`);
    return null;
  }
  if (
    typeof parsed.databaseUrl !== 'string' ||
    !Array.isArray(parsed.brokers) ||
    typeof parsed.registryUrl !== 'string' ||
    typeof parsed.web !== 'string' ||
    !credentialsPair(parsed.kafkaSasl) ||
    !credentialsPair(parsed.registryAuth) ||
    (parsed.sandboxUsers !== undefined && typeof parsed.sandboxUsers !== 'boolean')
  ) {
    onStale?.(`${file}: incomplete, ignored`);
    return null;
  }
  return parsed as Endpoints;
}

function validPostgresUrl(text: string): boolean {
  try {
    const u = new URL(text);
    return /^postgres(ql)?:$/.test(u.protocol) && u.hostname !== '';
  } catch {
    return false;
  }
}

export interface DatabaseChoice {
  url: string;
  /** Where the URL came from. */
  source: 'option' | 'environment' | 'running instance' | 'embedded';
  /** Stops what this command started (the embedded server); nothing otherwise. */
  stop(): Promise<void>;
}

/**
 * The database of a command: `--database-url`, then DATABASE_URL, then the running `payrecon up`'s,
 * then the embedded PostgreSQL under `<data dir>/pg` started by `startEmbedded` (when given).
 */
export async function chooseDatabase(options: {
  option?: string | null | undefined;
  /** The option's name, for its error line (default `--database-url`). */
  optionName?: string;
  environment: string | null;
  dataDir: string;
  startEmbedded?: (dataDir: string) => Promise<{ url: string; stop(): Promise<void> }>;
  /** Told about a stale endpoints file. */
  notice?: (line: string) => void;
  /** Names the command in the error when no database can be found. */
  command: string;
}): Promise<DatabaseChoice> {
  const none = async () => undefined;
  if (options.option) {
    if (!validPostgresUrl(options.option)) {
      throw new AppError(
        'VALIDATION_FAILED',
        `${options.optionName ?? '--database-url'}: must be a valid URL postgres://user:password@host:port/database`,
      );
    }
    return { url: options.option, source: 'option', stop: none };
  }
  if (options.environment) return { url: options.environment, source: 'environment', stop: none };
  const running = runningEndpoints(options.dataDir, options.notice);
  if (running) return { url: running.databaseUrl, source: 'running instance', stop: none };
  if (!options.startEmbedded) {
    throw new AppError(
      'CONFIG_INVALID',
      `DATABASE_URL: must be set for ${options.command} (or start \`payrecon up\` first)`,
    );
  }
  const server = await options.startEmbedded(join(options.dataDir, 'pg'));
  return { url: server.url, source: 'embedded', stop: () => server.stop() };
}
