/**
 * Every `payrecon` command given an unknown type, account, currency or period, a missing input file or
 * a folder that does not exist answers one line naming it, exits 2 and creates nothing (no folder, no
 * file, no row), table-driven over the commands of `payrecon --help` that take such an option. Then two
 * reports into one folder under two `--out` names: their CSVs are named after each workbook.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXCEPTION_TYPES } from '../../src/domain/exception-rules.ts';
import { closeLedger } from '../db/close-fixtures.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { payrecon } from './payrecon.ts';
import { actingEnv } from './web-users.ts';

let dir = '';
let t: TestDatabase;
/** A folder that does not exist, under the test's own. */
let missing = '';
/** The environment of a command acting as `ana`, a configured controller with her password. */
let controller: Record<string, string> = {};

beforeAll(async () => {
  controller = await actingEnv({ ana: 'controller' });
  dir = await mkdtemp(join(tmpdir(), 'payrecon-cli-unknowns-'));
  missing = join(dir, 'missing');
  t = await createTestDatabase();
  await closeLedger(t.db);
});

afterAll(async () => {
  await t?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const ACCOUNT = JSON.stringify([
  {
    name: 'main',
    baseUrl: 'http://127.0.0.1:9/',
    cardBaseUrl: 'http://127.0.0.1:9/',
    depositLogin: 'login',
    depositSecret: 'secret',
    cashoutLogin: 'login',
    cashoutPass: 'pass',
    cashoutSecret: 'secret',
    readOnlyKey: 'key',
  },
]);

const db = () => ['--database-url', t.url];
const report = (kind: string, ...extra: string[]) => [
  'report',
  kind,
  '--from',
  '2026-11-01',
  '--to',
  '2026-11-30',
  '--out',
  'out.xlsx',
  '--quiet',
  ...db(),
  ...extra,
];
const close = (action: string, account: string, currency: string, period: string) => [
  'close',
  action,
  '--account',
  account,
  '--currency',
  currency,
  '--period',
  period,
  ...(action === 'show' ? [] : ['--user', 'ana']),
  ...db(),
];
const noFolder = () =>
  new RegExp(`the folder ${missing.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} does not exist$`);

/** [command, what is unknown, args, env, the line after `payrecon: `]. */
type Case = [string, string, () => string[], () => Record<string, string>, () => RegExp];
const none = () => ({});

const CASES: Case[] = [
  [
    'registry',
    'folder',
    () => ['registry', '--port', '0', '--data-dir', join(missing, 'reg')],
    none,
    noFolder,
  ],
  [
    'registry',
    'file',
    () => ['registry', '--port', '0', '--users', 'nosuch.json'],
    none,
    () => /^--users: nosuch\.json: no such file$/,
  ],
  ['broker', 'folder', () => ['broker', '--port', '0', '--data-dir', join(missing, 'b')], none, noFolder],
  [
    'broker',
    'file',
    () => ['broker', '--port', '0', '--sasl-users', 'nosuch.json'],
    none,
    () => /^--sasl-users: nosuch\.json: no such file$/,
  ],
  [
    'sandbox',
    'folder',
    () => ['sandbox', '--port', '0', '--cc-port', '0', '--data-dir', join(missing, 's')],
    none,
    noFolder,
  ],
  [
    'sandbox',
    'file',
    () => ['sandbox', '--port', '0', '--cc-port', '0', '--accounts', 'nosuch.json'],
    none,
    () => /^--accounts: nosuch\.json: no such file$/,
  ],
  [
    'sandbox',
    'file',
    () => ['sandbox', '--port', '0', '--cc-port', '0', '--faults', 'nosuch.json'],
    none,
    () => /^--faults: nosuch\.json: no such file$/,
  ],
  [
    'db verify',
    'period',
    () => ['db', 'verify', '--since', 'yesterday', '--url', t.url],
    none,
    () => /^--since: must be an ISO 8601 instant/,
  ],
  [
    'exception list',
    'type',
    () => ['exception', 'list', '--type', 'NOPE', ...db()],
    none,
    () => new RegExp(`^--type: no exception type NOPE \\(known: ${EXCEPTION_TYPES.join(', ')}\\)$`),
  ],
  [
    'exception list',
    'state',
    () => ['exception', 'list', '--state', 'nope', ...db()],
    none,
    () => /^--state: must be one of open, /,
  ],
  [
    'exception list',
    'account',
    () => ['exception', 'list', '--account', 'nosuch', ...db()],
    none,
    () => /^--account: no merchant account nosuch in the ledger \(known: acme\)$/,
  ],
  [
    'api token create',
    'type',
    () => ['api', 'token', 'create', '--name', 'x', '--scopes', 'nope'],
    none,
    () => /^--scopes: .*\(unknown: nope\)$/,
  ],
  [
    'report settlement',
    'folder',
    () => report('settlement', '--out', join(missing, 'x.xlsx')),
    none,
    () => new RegExp(`^--out: ${noFolder().source}`),
  ],
  [
    'report exceptions',
    'folder',
    () => report('exceptions', '--csv-dir', missing),
    none,
    () => new RegExp(`^--csv-dir: ${noFolder().source}`),
  ],
  [
    'report settlement',
    'period',
    () => report('settlement', '--to', '2026-02-30'),
    none,
    () => /^--to: must be a date YYYY-MM-DD \(got 2026-02-30\)$/,
  ],
  [
    'report exceptions',
    'account',
    () => report('exceptions', '--account', 'nosuch'),
    none,
    () => /^--account: no merchant account nosuch in the ledger \(known: acme\)$/,
  ],
  ...(['prepare', 'approve', 'show'] as const).flatMap((action): Case[] => [
    [
      `close ${action}`,
      'account',
      () => close(action, 'nosuch', 'BRL', '2026-09'),
      () => controller,
      () => /^--account: no merchant account nosuch in the ledger \(known: acme\)$/,
    ],
    [
      `close ${action}`,
      'currency',
      () => close(action, 'acme', 'XXX', '2026-09'),
      () => controller,
      () => /^--currency: acme has no ledger in XXX \(known: BRL, USD\)$/,
    ],
    [
      `close ${action}`,
      'period',
      () => close(action, 'acme', 'BRL', '2026-13'),
      () => controller,
      () => /^--period: must be a month YYYY-MM \(got 2026-13\)$/,
    ],
  ]),
  [
    'intent record',
    'file',
    () => ['intent', 'record', '--file', 'nosuch.json'],
    none,
    () => /^--file: nosuch\.json: no such file$/,
  ],
  [
    'backfill intents',
    'file',
    () => ['backfill', 'intents', '--csv', 'nosuch.csv'],
    none,
    () => /^--csv: nosuch\.csv: no such file$/,
  ],
  [
    'backfill poll',
    'period',
    () => ['backfill', 'poll', '--from', '2026-13-01', '--to', '2026-11-02'],
    none,
    () => /^--from: must be a date YYYY-MM-DD/,
  ],
  [
    'backfill poll',
    'account',
    () => ['backfill', 'poll', '--from', '2026-11-01', '--to', '2026-11-02', '--account', 'nosuch'],
    () => ({ PAYRECON_ACCOUNTS: ACCOUNT }),
    () => /^--account: no provider account nosuch in PAYRECON_ACCOUNTS \(known: main\)$/,
  ],
];

describe('an unknown name, a missing file or folder: one line, exit 2, nothing created', () => {
  it.each(CASES)(
    '%s: %s',
    async (_command, _what, args, env, line) => {
      const r = await payrecon(dir, args(), env());
      const lines = r.stderr.split('\n').filter((l) => l.trim() !== '');
      expect(lines, r.stderr).toHaveLength(1);
      expect(lines[0]).toMatch(/^payrecon: /);
      expect(lines[0]!.slice('payrecon: '.length)).toMatch(line());
      expect(r.stdout).toBe('');
      expect(r.code).toBe(2);
      expect(existsSync(missing)).toBe(false);
      expect(existsSync(join(dir, 'out.xlsx'))).toBe(false);
      expect(existsSync(join(dir, 'data'))).toBe(false);
    },
    60_000,
  );

  it('wrote nothing to the ledger database', async () => {
    const { rows } = await sql<{ closes: number; runs: number }>`
      SELECT (SELECT count(*)::int FROM closes) AS closes, (SELECT count(*)::int FROM report_runs) AS runs`.execute(
      t.db,
    );
    expect(rows[0]).toEqual({ closes: 0, runs: 0 });
    expect((await readdir(dir)).sort()).toEqual([]);
  });
});

describe('two reports into one folder', () => {
  it('names the CSVs after each --out, so a second report under another name is written', async () => {
    const first = await payrecon(dir, report('settlement', '--out', 'november.xlsx'));
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    const second = await payrecon(dir, report('settlement', '--out', 'december.xlsx'));
    expect(second.stderr).toBe('');
    expect(second.code).toBe(0);
    const files = (await readdir(dir)).sort();
    expect(files).toContain('november.xlsx');
    expect(files).toContain('december.xlsx');
    const csv = files.filter((f) => f.endsWith('.csv'));
    expect(csv.length).toBeGreaterThan(0);
    expect(csv.filter((f) => f.startsWith('december-')).length * 2).toBe(csv.length);
    expect(first.stdout).toContain(join(dir, 'november-deposits.csv'));
    expect(second.stdout).toContain(join(dir, 'december-deposits.csv'));
    // The same --out again is refused until --force, naming the workbook.
    const again = await payrecon(dir, report('settlement', '--out', 'november.xlsx'));
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/november\.xlsx: exists \(and \d+ more\); pass --force to overwrite\n$/);
  }, 120_000);
});
