/**
 * PostgreSQL over TLS: a throwaway server (the machine's PostgreSQL binaries, `ssl=on`, pg_hba accepting
 * only TLS) and payrecon's configuration: `sslmode` in DATABASE_URL is honoured and DATABASE_SSL_CA_FILE
 * gives the CA; an untrusted certificate fails at once (not waited out as an outage), and a client
 * without TLS is refused. Skips with a hint when the PostgreSQL server binaries or openssl are missing
 * (fails instead with PAYRECON_REQUIRE_TOOLS=1).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { createDb, databaseTlsFailure, isDatabaseOutage, migrateWhenReady } from '../../src/db/connection.ts';
import { hasOpenssl, makeTestPki, OPENSSL_HINT, type TestPki } from '../helpers/tls.ts';

const required = process.env.PAYRECON_REQUIRE_TOOLS === '1';
const BIN = (() => {
  const root = '/usr/lib/postgresql';
  if (!fs.existsSync(root)) return null;
  const versions = fs.readdirSync(root).sort((a, b) => Number(b) - Number(a));
  for (const v of versions)
    if (fs.existsSync(path.join(root, v, 'bin', 'initdb'))) return path.join(root, v, 'bin');
  return null;
})();
const PG_HINT = 'PostgreSQL server binaries not found (install them with: sudo apt-get install postgresql)';
const available = BIN !== null && hasOpenssl;
if (!available && !required) console.warn(`PostgreSQL TLS tests skipped: ${BIN ? OPENSSL_HINT : PG_HINT}`);

/** initdb and postgres refuse to run as root: run them as the postgres system user then. */
const asRoot = process.getuid?.() === 0;
function pg(tool: string, args: string[]): void {
  const command = path.join(BIN!, tool);
  if (asRoot) execFileSync('runuser', ['-u', 'postgres', '--', command, ...args], { stdio: 'pipe' });
  else execFileSync(command, args, { stdio: 'pipe' });
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as net.AddressInfo).port;
      server.close(() => resolve(port));
    });
  });
}

describe.skipIf(!available && !required)('PostgreSQL over TLS through the configuration', () => {
  let pki: TestPki;
  let dir: string;
  let data: string;
  let port: number;

  beforeAll(async () => {
    if (!available) throw new Error(`PAYRECON_REQUIRE_TOOLS=1 but ${BIN ? OPENSSL_HINT : PG_HINT}`);
    pki = makeTestPki();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'payrecon-pgtls-'));
    data = path.join(dir, 'data');
    if (asRoot) execFileSync('chown', ['postgres:postgres', dir]);
    pg('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '--encoding=UTF8']);
    for (const [from, to] of [
      [pki.certFile, 'server.pem'],
      [pki.keyFile, 'server.key'],
    ] as const) {
      fs.copyFileSync(from, path.join(data, to));
      fs.chmodSync(path.join(data, to), 0o600);
      if (asRoot) execFileSync('chown', ['postgres:postgres', path.join(data, to)]);
    }
    fs.writeFileSync(
      path.join(data, 'pg_hba.conf'),
      'hostssl all all 127.0.0.0/8 trust\nhostnossl all all 127.0.0.0/8 reject\n',
    );
    port = await freePort();
    pg('pg_ctl', [
      '-D',
      data,
      '-w',
      '-l',
      path.join(data, 'server.log'),
      '-o',
      `-p ${port} -c listen_addresses=127.0.0.1,127.0.0.2 -c unix_socket_directories= -c ssl=on -c ssl_cert_file=server.pem -c ssl_key_file=server.key -c fsync=off`,
      'start',
    ]);
  }, 120_000);

  afterAll(() => {
    try {
      if (data) pg('pg_ctl', ['-D', data, '-m', 'immediate', 'stop']);
    } catch {
      // already stopped
    }
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
    pki?.remove();
  });

  const url = (query: string) => `postgres://postgres@127.0.0.1:${port}/postgres${query}`;

  async function sslInUse(databaseUrl: string): Promise<boolean> {
    const db = createDb(databaseUrl, 1);
    try {
      const row = await sql<{
        ssl: boolean;
      }>`SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()`.execute(db);
      return row.rows[0]!.ssl;
    } finally {
      await db.destroy();
    }
  }

  async function failure(databaseUrl: string): Promise<Error> {
    const db = createDb(databaseUrl, 1);
    try {
      await sql`SELECT 1`.execute(db);
    } catch (err) {
      return err as Error;
    } finally {
      await db.destroy();
    }
    throw new Error('expected the connection to fail');
  }

  it('connects with sslmode=verify-full and DATABASE_SSL_CA_FILE, over TLS', async () => {
    const config = loadConfig({
      DATABASE_URL: url('?sslmode=verify-full'),
      DATABASE_SSL_CA_FILE: pki.caFile,
    });
    expect(await sslInUse(config.database.url!)).toBe(true);
  });

  it('turns TLS on (verified) with DATABASE_SSL_CA_FILE alone, and honours sslrootcert in the URL', async () => {
    expect(
      await sslInUse(loadConfig({ DATABASE_URL: url(''), DATABASE_SSL_CA_FILE: pki.caFile }).database.url!),
    ).toBe(true);
    const inUrl = url(`?sslmode=verify-ca&sslrootcert=${encodeURIComponent(pki.caFile)}`);
    expect(await sslInUse(loadConfig({ DATABASE_URL: inUrl }).database.url!)).toBe(true);
  });

  it('refuses a server whose certificate is not trusted, at once rather than as an outage to wait out', async () => {
    const config = loadConfig({
      DATABASE_URL: url('?sslmode=verify-full'),
      DATABASE_SSL_CA_FILE: pki.otherCaFile,
    });
    const err = await failure(config.database.url!);
    expect(err.message).toMatch(/certificate/i);
    expect(isDatabaseOutage(err)).toBe(false);
    const db = createDb(config.database.url!, 1);
    const started = Date.now();
    try {
      await expect(migrateWhenReady(db, { maxWaitMs: 60_000 })).rejects.toThrow(
        /^DATABASE_SSL_CA_FILE: the certificate of the PostgreSQL server is not trusted \([A-Z_]+\)$/,
      );
    } finally {
      await db.destroy();
    }
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('is refused without TLS (sslmode=disable) by a server that requires it', async () => {
    const err = await failure(loadConfig({ DATABASE_URL: url('?sslmode=disable') }).database.url!);
    expect(err.message).toMatch(/no encryption|pg_hba\.conf rejects/);
  });

  it('names DATABASE_URL when the certificate is for another host', async () => {
    const other = `postgres://postgres@127.0.0.2:${port}/postgres?sslmode=verify-full`;
    const err = await failure(
      loadConfig({ DATABASE_URL: other, DATABASE_SSL_CA_FILE: pki.caFile }).database.url!,
    ).catch((e: Error) => e);
    // 127.0.0.2 is loopback on Linux but not in the certificate (IP:127.0.0.1, DNS:localhost).
    expect(databaseTlsFailure(err)).toMatch(
      /^DATABASE_URL: the PostgreSQL server's certificate does not name this host/,
    );
  });
});
