/**
 * The one error path, table-driven: the real `payrecon` bin with each class of bad input (arguments,
 * configuration, period and time zone, connection refused, missing file, port in use, a data directory
 * in use, a schema behind the code, an unknown account) answers one line `payrecon: <what>: <rule or
 * cause>` on stderr, no stack, and exits 2 for usage errors and 1 otherwise; `--verbose` and
 * LOG_LEVEL=debug add the stack.
 */
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { type Result, payrecon as run } from './payrecon.ts';

let dir = '';
let busy: Server;
let busyPort = 0;
let closedPort = 0;
let migrated: TestDatabase;
let unmigrated: TestDatabase;

/** Runs the bin in the test's folder with a clean environment. */
function payrecon(args: string[], env: Record<string, string> = {}, stdin = ''): Promise<Result> {
  return run(dir, args, env, stdin);
}

function freePort(): Promise<number> {
  return new Promise((resolvePort) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const address = s.address();
      s.close(() => resolvePort(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'payrecon-cli-errors-'));
  // The data directory is below it: as root, the embedded PostgreSQL (run as `postgres`) must pass through.
  await chmod(dir, 0o711);
  busy = createServer();
  await new Promise<void>((r) => busy.listen(0, '127.0.0.1', () => r()));
  const address = busy.address();
  busyPort = typeof address === 'object' && address ? address.port : 0;
  closedPort = await freePort();
  migrated = await createTestDatabase();
  unmigrated = await createTestDatabase({ migrate: false });
  await writeFile(join(dir, 'exists.xlsx'), 'not a workbook');
});

afterAll(async () => {
  busy?.close();
  await migrated?.drop();
  await unmigrated?.drop();
  await rm(dir, { recursive: true, force: true });
});

const report = (...extra: string[]) => [
  'report',
  'settlement',
  '--from',
  '2026-11-01',
  '--to',
  '2026-11-30',
  '--out',
  'out.xlsx',
  '--quiet',
  ...extra,
];

/** [class, args, env, stdin, exit code, the line]. */
type Case = [
  string,
  () => string[],
  Record<string, string> | (() => Record<string, string>),
  string,
  1 | 2,
  RegExp,
];

const CASES: Case[] = [
  // usage
  ['unknown command', () => ['nosuch'], {}, '', 2, /^payrecon: unknown command 'nosuch'$/],
  ['unknown option', () => ['db', 'verify', '--nosuch'], {}, '', 2, /^payrecon: unknown option '--nosuch'$/],
  [
    'missing required option',
    () => ['report', 'settlement', '--to', '2026-11-30', '--out', 'x.xlsx'],
    {},
    '',
    2,
    /^payrecon: required option '--from <date>' not specified$/,
  ],
  // period, time zone, cut-off, output
  [
    'impossible date',
    () => ['report', 'settlement', '--from', '2026-13-45', '--to', '2026-11-30', '--out', 'x.xlsx'],
    {},
    '',
    2,
    /^payrecon: --from: must be a date YYYY-MM-DD \(got 2026-13-45\)$/,
  ],
  [
    '--from after --to',
    () => ['report', 'exceptions', '--from', '2026-12-01', '--to', '2026-11-30', '--out', 'x.xlsx'],
    {},
    '',
    2,
    /^payrecon: --from: 2026-12-01 is after --to 2026-11-30$/,
  ],
  [
    'unknown time zone',
    () => report('--time-zone', 'Mars/Olympus'),
    {},
    '',
    2,
    /^payrecon: --time-zone: must be an IANA time zone/,
  ],
  [
    'impossible cut-off',
    () => report('--cutoff', '25:99'),
    {},
    '',
    2,
    /^payrecon: --cutoff: must be a time HH:MM/,
  ],
  [
    'existing output without --force',
    () => ['report', 'settlement', '--from', '2026-11-01', '--to', '2026-11-30', '--out', 'exists.xlsx'],
    {},
    '',
    2,
    /^payrecon: .*exists\.xlsx: exists; pass --force to overwrite$/,
  ],
  // configuration
  [
    'invalid LOG_LEVEL',
    () => ['relay'],
    { LOG_LEVEL: 'loud' },
    '',
    2,
    /^payrecon: LOG_LEVEL: must be one of /,
  ],
  [
    'malformed DATABASE_URL',
    () => ['db', 'verify'],
    { DATABASE_URL: 'postgres://user:p@ss@host:port:5432/db' },
    '',
    2,
    /^payrecon: DATABASE_URL: must be a valid URL postgres:\/\/user:password@host:port\/database/,
  ],
  [
    'malformed --url',
    () => ['db', 'migrate', '--url', 'postgres://x:y@:99999'],
    {},
    '',
    2,
    /^payrecon: --url: must be a valid URL/,
  ],
  [
    'invalid web port',
    () => ['relay'],
    { PAYRECON_WEB_PORT: 'eighty' },
    '',
    2,
    /^payrecon: PAYRECON_WEB_PORT: /,
  ],
  [
    'reconcile without Kafka',
    () => ['reconcile'],
    {},
    '',
    2,
    /^payrecon: KAFKA_BROKERS: must be set for this command/,
  ],
  [
    'relay without Kafka',
    () => ['relay'],
    {},
    '',
    2,
    /^payrecon: KAFKA_BROKERS: must be set for this command/,
  ],
  [
    'alerts without Kafka',
    () => ['alerts'],
    {},
    '',
    2,
    /^payrecon: KAFKA_BROKERS: must be set for this command/,
  ],
  [
    'alerts without the registry',
    () => ['alerts'],
    { KAFKA_BROKERS: '127.0.0.1:9' },
    '',
    2,
    /^payrecon: SCHEMA_REGISTRY_URL: must be set for this command/,
  ],
  [
    'fetch without accounts',
    () => ['fetch'],
    {},
    '',
    2,
    /^payrecon: PAYRECON_ACCOUNTS: must list at least one/,
  ],
  ['web without users', () => ['web'], {}, '', 2, /^payrecon: PAYRECON_WEB_USERS: no users/],
  [
    'short password',
    () => ['web', 'hash-password'],
    {},
    'short\n',
    2,
    /^payrecon: password: at least 8 characters$/,
  ],
  // the outside world
  [
    'connection refused',
    () => ['db', 'verify', '--url', `postgres://postgres@127.0.0.1:${closedPort}/postgres`],
    {},
    '',
    1,
    /^payrecon: 127\.0\.0\.1:\d+: connection refused/,
  ],
  [
    'missing intent file',
    () => ['intent', 'record', '--file', 'nosuch.json'],
    {},
    '',
    2,
    /^payrecon: --file: nosuch\.json: no such file$/,
  ],
  [
    'missing CSV file',
    () => ['backfill', 'intents', '--csv', 'nosuch.csv'],
    {},
    '',
    2,
    /^payrecon: --csv: nosuch\.csv: no such file$/,
  ],
  [
    'port in use (registry)',
    () => ['registry', '--port', String(busyPort), '--data-dir', 'reg'],
    {},
    '',
    1,
    /^payrecon: 127\.0\.0\.1:\d+: port in use/,
  ],
  [
    'port in use (payrecon up)',
    () => ['up', '--traffic', '0'],
    () => ({ PAYRECON_WEB_PORT: String(busyPort) }),
    '',
    1,
    /^payrecon: 127\.0\.0\.1:\d+: port in use/,
  ],
  [
    'port in use (sandbox)',
    () => ['sandbox', '--port', String(busyPort)],
    {},
    '',
    1,
    /^payrecon: 127\.0\.0\.1:\d+: port in use/,
  ],
  // the database
  [
    'schema behind the code',
    () => report('--database-url', unmigrated.url),
    {},
    '',
    1,
    /^payrecon: database: schema behind the code \(\d+ migration\(s\) pending, first \w+\); run `payrecon db migrate`$/,
  ],
  [
    'unknown account',
    () => report('--database-url', migrated.url, '--account', 'nosuch'),
    {},
    '',
    2,
    /^payrecon: --account: no merchant account nosuch in the ledger/,
  ],
];

describe('every expected failure is one line and an exit code', () => {
  it.each(CASES)(
    '%s',
    async (_name, args, env, stdin, code, line) => {
      const r = await payrecon(args(), typeof env === 'function' ? env() : env, stdin);
      const lines = r.stderr.split('\n').filter((l) => l.trim() !== '');
      expect(lines, r.stderr).toHaveLength(1);
      expect(lines[0]).toMatch(line);
      expect(r.stderr).not.toMatch(/^\s+at /m);
      expect(r.code).toBe(code);
    },
    180_000,
  );

  it('a report neither migrates a schema behind the code nor writes a file', async () => {
    expect(existsSync(join(dir, 'out.xlsx'))).toBe(false);
    const rows = await unmigrated.db
      .selectNoFrom((eb) => eb.fn<string | null>('to_regclass', [eb.val('kysely_migration')]).as('t'))
      .execute();
    expect(rows[0]?.t ?? null).toBeNull();
  });

  it('--verbose and LOG_LEVEL=debug add the stack', async () => {
    for (const [args, env] of [
      [['--verbose', ...report('--time-zone', 'Mars/Olympus')], {}],
      [report('--time-zone', 'Mars/Olympus'), { LOG_LEVEL: 'debug' }],
    ] as const) {
      const r = await payrecon([...args], env);
      const lines = r.stderr.split('\n').filter((l) => l.trim() !== '');
      expect(lines[0]).toMatch(/^payrecon: --time-zone: must be an IANA time zone/);
      expect(r.stderr).toMatch(/^\s+at /m);
      expect(r.code).toBe(2);
    }
  });

  it('a live payrecon up on the data directory: a second up is one line naming it', async () => {
    const data = join(dir, 'live');
    const { mkdir } = await import('node:fs/promises');
    await mkdir(data, { recursive: true });
    // This test process stands in for the running `up`.
    await writeFile(
      join(data, 'endpoints.json'),
      JSON.stringify({
        pid: process.pid,
        startedAt: new Date().toISOString(),
        databaseUrl: migrated.url,
        brokers: ['127.0.0.1:9'],
        registryUrl: 'http://127.0.0.1:9',
        web: 'http://127.0.0.1:8080',
      }),
      { mode: 0o600 },
    );
    const r = await payrecon(['up'], { PAYRECON_DATA_DIR: data });
    const lines = r.stderr.split('\n').filter((l) => l.trim() !== '');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      new RegExp(
        `^payrecon: .*live: in use by a running payrecon up \\(pid ${process.pid}, http://127\\.0\\.0\\.1:8080\\)`,
      ),
    );
    expect(r.code).toBe(1);
    // Commands that need the database find it there.
    const verify = await payrecon(['db', 'verify'], { PAYRECON_DATA_DIR: data });
    expect(verify.stdout).toMatch(/^ledger verified: /);
    expect(verify.code).toBe(0);
  });

  it('a stale endpoints file (its process gone) is removed with one line', async () => {
    const data = join(dir, 'stale');
    const { mkdir } = await import('node:fs/promises');
    await mkdir(data, { recursive: true });
    const file = join(data, 'endpoints.json');
    await writeFile(file, JSON.stringify({ pid: 2 ** 22 + 17, databaseUrl: 'postgres://x@127.0.0.1:9/x' }));
    const r = await payrecon(['relay'], { PAYRECON_DATA_DIR: data });
    const lines = r.stderr.split('\n').filter((l) => l.trim() !== '');
    expect(lines[0]).toMatch(
      /^payrecon: .*endpoints\.json: stale \(payrecon up, pid \d+, is gone\), removed$/,
    );
    expect(lines[1]).toMatch(/^payrecon: KAFKA_BROKERS: must be set/);
    expect(existsSync(file)).toBe(false);
  });
});
