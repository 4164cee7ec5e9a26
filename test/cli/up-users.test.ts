/**
 * The commands that act as a user accept the page's sandbox users beside a running `payrecon up` against
 * the sandbox (PAYRECON_WEB_USERS unset): `finance` (operator), `ana` and `bob` (controllers), password
 * `sandbox`, with the page's roles and the usual password rules (PAYRECON_PASSWORD or a 0600
 * `--password-file`, never an option holding the password). Only on that instance's database, and only
 * while it runs.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Endpoints } from '../../src/endpoints.ts';
import { reportCsv, TRANSACTION_COLUMNS } from '../../src/sandbox/provider-reports.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { waitFor } from '../helpers/wait.ts';
import { BIN, commandEnv, payrecon } from './payrecon.ts';

const dir = mkdtempSync(join(tmpdir(), 'payrecon-up-users-'));
let tdb: TestDatabase;
let up: ChildProcess | null = null;
let output = '';

beforeAll(async () => {
  tdb = await createTestDatabase();
  up = spawn(process.execPath, [BIN, 'up', '--traffic', '0'], {
    cwd: dir,
    env: commandEnv(dir, {
      DATABASE_URL: tdb.url,
      PAYRECON_WEB_PORT: '0',
      PAYRECON_METRICS_PORT: '0',
      LOG_LEVEL: 'error',
    }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  up.stdout!.on('data', (c) => {
    output += c;
  });
  up.stderr!.on('data', (c) => {
    output += c;
  });
  await waitFor(
    () => `payrecon up to start: ${output}`,
    () => output.includes('  endpoints ') || up!.exitCode !== null,
    { ms: 120_000, every: 100 },
  );
  if (!output.includes('  endpoints ')) throw new Error(`payrecon up did not start: ${output}`);
}, 150_000);

afterAll(async () => {
  if (up && up.exitCode === null && up.signalCode === null) {
    const exited = new Promise((r) => up!.once('exit', r));
    up.kill('SIGKILL');
    await exited;
  }
  await tdb?.drop();
  rmSync(dir, { recursive: true, force: true });
});

/** A transactions report of one deposit, to import as a user. */
function reportFile(name: string, id: string): string {
  const at = '2026-03-02T10:00:00Z';
  const file = join(dir, name);
  writeFileSync(
    file,
    reportCsv(TRANSACTION_COLUMNS, [
      [id, 'deposit', 'COMPLETED', '', `INV-${id}`, 'BRL', '10.00', '0.15', '9.85', at, at, ''],
    ]),
  );
  return file;
}

const PASSWORD = { PAYRECON_PASSWORD: 'sandbox' };

describe('the sandbox users of payrecon up on the command line', () => {
  it('acts as them with their roles, on the instance’s database, while it runs', async () => {
    const endpoints = JSON.parse(readFileSync(join(dir, 'data', 'endpoints.json'), 'utf8')) as Endpoints;
    expect(endpoints.sandboxUsers).toBe(true);

    // The operator imports (the database is the instance's, found in its endpoints file).
    const imported = await payrecon(
      dir,
      ['import', 'provider-transactions', reportFile('one.csv', '900001'), '--user', 'finance', '--json'],
      PASSWORD,
    );
    expect(imported.stderr).toBe('');
    expect(imported.code).toBe(0);
    const row = await tdb.db
      .selectFrom('imports')
      .select(['imported_by', 'new_lines'])
      .where('file_name', '=', 'one.csv')
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ imported_by: 'finance', new_lines: 1 });

    // A controller from a 0600 password file matches by hand: authenticated, the match is looked up.
    const passwordFile = join(dir, 'ana.pass');
    writeFileSync(passwordFile, 'sandbox\n');
    chmodSync(passwordFile, 0o600);
    const undo = await payrecon(dir, [
      'match',
      '--undo',
      '999',
      '--note',
      'checking',
      '--user',
      'ana',
      '--password-file',
      passwordFile,
    ]);
    expect(undo.stderr.trim()).toBe('payrecon: unmatch: no live match 999');

    // The page's roles: the operator does not prepare a close.
    const close = await payrecon(
      dir,
      [
        'close',
        'prepare',
        '--account',
        'sandbox',
        '--currency',
        'BRL',
        '--period',
        '2026-10',
        '--user',
        'finance',
      ],
      PASSWORD,
    );
    expect(close.code).toBe(2);
    expect(close.stderr.trim()).toBe(
      'payrecon: --user: finance is an operator: close prepare needs a controller',
    );

    // A wrong password, an unknown user, no password at all: one line, exit 2, nothing imported.
    const refusals = [
      [['--user', 'bob'], { PAYRECON_PASSWORD: 'not it' }, 'payrecon: --user: bob: wrong password'],
      [
        ['--user', 'zed'],
        PASSWORD,
        /^payrecon: --user: zed: no such user in the sandbox's users of payrecon up/,
      ],
      [
        ['--user', 'bob'],
        {},
        'payrecon: password: none given for bob: set PAYRECON_PASSWORD, give --password-file FILE, or run at a terminal',
      ],
    ] as const;
    for (const [user, env, line] of refusals) {
      const r = await payrecon(
        dir,
        ['import', 'provider-transactions', reportFile('two.csv', '900002'), ...user],
        env,
      );
      expect(r.code).toBe(2);
      expect(r.stderr.trim()).toMatch(line);
    }

    // Against another database the page's users are not that database's: refused as before.
    const other = await createTestDatabase();
    try {
      const elsewhere = await payrecon(
        dir,
        ['import', 'provider-transactions', reportFile('two.csv', '900002'), '--user', 'finance'],
        { ...PASSWORD, DATABASE_URL: other.url },
      );
      expect(elsewhere.code).toBe(2);
      expect(elsewhere.stderr).toMatch(/^payrecon: PAYRECON_WEB_USERS: no users configured/);
    } finally {
      await other.drop();
    }

    // Once the instance stops, so do its users.
    const exited = new Promise((r) => up!.once('exit', r));
    up!.kill('SIGTERM');
    expect(await exited).toBe(0);
    const after = await payrecon(
      dir,
      ['import', 'provider-transactions', reportFile('two.csv', '900002'), '--user', 'finance'],
      { ...PASSWORD, DATABASE_URL: tdb.url },
    );
    expect(after.code).toBe(2);
    expect(after.stderr).toMatch(/^payrecon: PAYRECON_WEB_USERS: no users configured/);
    const two = await tdb.db.selectFrom('imports').select('id').where('file_name', '=', 'two.csv').execute();
    expect(two).toEqual([]);
  }, 240_000);
});
