/**
 * Four eyes, tried as an attacker would from the command line (the real bin) against a real ledger
 * database: a month close prepared or approved as a user the command cannot authenticate (unknown,
 * wrong password, no password, a password file others can read), as a viewer or an operator, or for an
 * account or currency the ledger does not have, is refused in one line with exit code 2 and writes
 * nothing; a configured controller with PAYRECON_PASSWORD signs, and another approves. A decision that
 * re-books the ledger, proposed by an operator, books nothing until a different controller approves it;
 * the proposer cannot approve their own; the audit trail names both.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyObservations } from '../../src/db/ledger/service.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import type { Observation } from '../../src/domain/observation.ts';
import { BIN, payrecon, type Result } from '../cli/payrecon.ts';
import { CLI_PASSWORD, webUsersJson } from '../cli/web-users.ts';
import { bookEntry, closeLedger } from '../db/close-fixtures.ts';
import { obs } from '../db/fixtures.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';

let t: TestDatabase;
let dir = '';
/** PAYRECON_WEB_USERS: two controllers, an operator and a viewer, all with CLI_PASSWORD. */
let users = '';

beforeAll(async () => {
  t = await createTestDatabase();
  dir = await mkdtemp(join(tmpdir(), 'payrecon-four-eyes-'));
  users = await webUsersJson({ carla: 'controller', dora: 'controller', otto: 'operator', vera: 'viewer' });
  await closeLedger(t.db);
  await bookEntry(
    t.db,
    'deposit',
    'd1',
    'credit',
    [
      ['available', '80.00'],
      ['deposits', '-80.00'],
    ],
    '2026-09-03T10:00Z',
  );
});

afterAll(async () => {
  await t?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** The real bin on the test database, with the configured users and `env`. */
function run(args: string[], env: Record<string, string> = {}): Promise<Result> {
  return payrecon(dir, args, {
    DATABASE_URL: t.url,
    PAYRECON_TIMEZONE: 'UTC',
    PAYRECON_WEB_USERS: users,
    ...env,
  });
}

const close = (action: 'prepare' | 'approve', user: string, scope = ['acme', 'BRL', '2026-09']) => [
  'close',
  action,
  '--account',
  scope[0]!,
  '--currency',
  scope[1]!,
  '--period',
  scope[2]!,
  '--user',
  user,
];

const password = { PAYRECON_PASSWORD: CLI_PASSWORD };

/** One line on stderr, exit code 2, nothing on stdout. */
function expectRefused(r: Result, line: RegExp): void {
  const lines = r.stderr.split('\n').filter((l) => l.trim() !== '');
  expect(lines, r.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(line);
  expect(r.stdout).toBe('');
  expect(r.code).toBe(2);
}

async function closeCount(): Promise<number> {
  const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM closes`.execute(t.db);
  return rows[0]!.n;
}

describe('a month close from the command line', () => {
  it('refuses a user it cannot authenticate, or whose role may not sign, in one line; nothing written', async () => {
    const cases: [string, string[], Record<string, string>, RegExp][] = [
      [
        'unknown user',
        close('prepare', 'zed'),
        password,
        /^payrecon: --user: zed: no such user in PAYRECON_WEB_USERS$/,
      ],
      [
        'wrong password',
        close('prepare', 'carla'),
        { PAYRECON_PASSWORD: 'guess' },
        /^payrecon: --user: carla: wrong password$/,
      ],
      [
        'no password (stdin is not a terminal)',
        close('prepare', 'carla'),
        {},
        /^payrecon: password: none given for carla: set PAYRECON_PASSWORD, give --password-file FILE, or run at a terminal$/,
      ],
      [
        'a viewer',
        close('prepare', 'vera'),
        password,
        /^payrecon: --user: vera is a viewer: close prepare needs a controller$/,
      ],
      [
        'an operator',
        close('prepare', 'otto'),
        password,
        /^payrecon: --user: otto is an operator: close prepare needs a controller$/,
      ],
      [
        'an operator approving',
        close('approve', 'otto'),
        password,
        /^payrecon: --user: otto is an operator: close approve needs a controller$/,
      ],
      [
        'no users configured',
        close('prepare', 'carla'),
        { ...password, PAYRECON_WEB_USERS: '' },
        /^payrecon: PAYRECON_WEB_USERS: no users configured: close prepare acts as a configured user/,
      ],
      [
        'unknown account',
        close('prepare', 'carla', ['nosuch', 'BRL', '2026-09']),
        password,
        /^payrecon: --account: no merchant account nosuch in the ledger \(known: acme\)$/,
      ],
      [
        'unknown currency',
        close('prepare', 'carla', ['acme', 'XXX', '2026-09']),
        password,
        /^payrecon: --currency: acme has no ledger in XXX \(known: BRL, USD\)$/,
      ],
      [
        'unknown account, approving',
        close('approve', 'carla', ['nosuch', 'XXX', '2026-09']),
        password,
        /^payrecon: --account: no merchant account nosuch in the ledger/,
      ],
      [
        'not a month',
        close('prepare', 'carla', ['acme', 'BRL', '2026-13']),
        password,
        /^payrecon: --period: must be a month YYYY-MM \(got 2026-13\)$/,
      ],
    ];
    for (const [what, args, env, line] of cases) {
      const r = await run(args, env);
      expect.soft(r.code, what).toBe(2);
      expectRefused(r, line);
    }
    expect(await closeCount()).toBe(0);
  }, 180_000);

  it('takes the password from a file only the owner can read', async () => {
    const file = join(dir, 'carla.pass');
    await writeFile(file, `${CLI_PASSWORD}\n`);
    await chmod(file, 0o644);
    expectRefused(
      await run([...close('prepare', 'carla'), '--password-file', file]),
      /^payrecon: --password-file: .*carla\.pass: readable by others \(mode 644\): chmod 600 it$/,
    );
    expect(await closeCount()).toBe(0);
    await chmod(file, 0o600);
    // The file wins over a wrong PAYRECON_PASSWORD.
    const signed = await run([...close('prepare', 'carla'), '--password-file', file], {
      PAYRECON_PASSWORD: 'wrong',
    });
    expect(signed.stderr).toBe('');
    expect(signed.code).toBe(0);
    expect(signed.stdout).toMatch(/^close 2026-09 acme BRL: prepared; prepared and signed by carla/);
  }, 60_000);

  it.skipIf(!existsSync('/usr/bin/script'))(
    'asks for the password at a terminal without echoing it',
    async () => {
      /** The bin under a pseudo-terminal (util-linux `script`); the password typed once the prompt shows. */
      const atTerminal = (typed: string) =>
        new Promise<{ code: number | null; out: string }>((done, reject) => {
          const env: Record<string, string> = {};
          for (const [k, v] of Object.entries(process.env)) {
            if (v !== undefined && !/^(PAYRECON_|DATABASE_URL|LOG_LEVEL)/.test(k)) env[k] = v;
          }
          const command = [process.execPath, BIN, ...close('prepare', 'carla', ['acme', 'BRL', '2026-08'])]
            .map((a) => `'${a}'`)
            .join(' ');
          const child = spawn('script', ['-qec', command, '/dev/null'], {
            cwd: dir,
            env: {
              ...env,
              DATABASE_URL: t.url,
              PAYRECON_TIMEZONE: 'UTC',
              PAYRECON_WEB_USERS: users,
              PAYRECON_DATA_DIR: join(dir, 'data'),
            },
            stdio: ['pipe', 'pipe', 'pipe'],
          });
          let out = '';
          let sent = false;
          child.stdout.on('data', (c) => {
            out += c;
            if (!sent && out.includes('password of carla: ')) {
              sent = true;
              child.stdin.write(`${typed}\r`);
            }
          });
          child.on('error', reject);
          child.on('close', (code) => done({ code, out }));
        });
      const closes = await closeCount();
      const wrong = await atTerminal('not-her-password');
      expect(wrong.out).toContain('payrecon: --user: carla: wrong password');
      expect(wrong.out).not.toContain('not-her-password');
      // The right password passes; the month before the first entry is then refused on its own merits.
      const right = await atTerminal(CLI_PASSWORD);
      expect(right.out).not.toContain(CLI_PASSWORD);
      expect(right.out).toContain('acme BRL has no entries before 2026-09: 2026-08 has no figures to sign');
      expect(await closeCount()).toBe(closes);
    },
    60_000,
  );

  it('lets a different controller approve, never the preparer', async () => {
    const own = await run(close('approve', 'carla'), password);
    expect([own.code, own.stderr]).toEqual([
      1,
      'payrecon: You prepared and signed 2026-09 of acme BRL, so a different controller must approve it.\n',
    ]);
    const approved = await run(close('approve', 'dora'), password);
    expect([approved.code, approved.stderr]).toEqual([0, '']);
    const rows = await t.db.selectFrom('closes').select(['prepared_by', 'approved_by', 'status']).execute();
    expect(rows).toEqual([{ prepared_by: 'carla', approved_by: 'dora', status: 'approved' }]);
  }, 60_000);
});

describe('a decision that re-books the ledger', () => {
  const account = 'shop';
  const dep = (status: string, minute: number) =>
    ({ ...obs('deposit', 's1', status, minute), account }) as Observation;

  async function available(): Promise<string> {
    const { rows } = await sql<{ balance: string }>`
      SELECT coalesce(sum(balance), 0)::text AS balance FROM ledger_balances
      WHERE merchant_account = ${account} AND account = 'available'`.execute(t.db);
    return rows[0]!.balance;
  }

  it('books nothing until a controller who did not propose it approves; the trail names both', async () => {
    await withLedgerTransaction(t.db, (trx) =>
      applyObservations(trx, [dep('COMPLETED', 1), dep('PENDING', 2)]),
    );
    const ex = await t.db
      .selectFrom('exceptions')
      .select('id')
      .where('merchant_account', '=', account)
      .where('type', '=', 'ILLEGAL_TRANSITION')
      .executeTakeFirstOrThrow();
    const before = await available();
    const entries = async () =>
      (
        await sql<{
          n: number;
        }>`SELECT count(*)::int AS n FROM journal_entries WHERE merchant_account = ${account}`.execute(t.db)
      ).rows[0]!.n;
    const entriesBefore = await entries();
    const decide = (user: string, env: Record<string, string> = password) =>
      run(['exception', 'decide', ex.id, '--accept-provider', '--note', 'chargeback', '--user', user], env);

    // A viewer may not propose; a wrong password proposes nothing.
    expectRefused(
      await decide('vera'),
      /^payrecon: --user: vera is a viewer: exception decide needs an operator or a controller$/,
    );
    expectRefused(
      await decide('otto', { PAYRECON_PASSWORD: 'guess' }),
      /^payrecon: --user: otto: wrong password$/,
    );

    const proposed = await decide('otto');
    expect([proposed.code, proposed.stderr]).toEqual([0, '']);
    expect(proposed.stdout).toMatch(
      /^exception \d+ proposed to accept the provider's status PENDING \(ledger has COMPLETED\); nothing booked until a controller/,
    );
    expect([await available(), await entries()]).toEqual([before, entriesBefore]);

    const approve = (user: string) => run(['exception', 'approve', ex.id, '--user', user], password);
    // An operator cannot approve; the proposer cannot approve their own (a controller's own, below).
    expectRefused(
      await approve('otto'),
      /^payrecon: --user: otto is an operator: exception approve needs a controller$/,
    );
    expect([await available(), await entries()]).toEqual([before, entriesBefore]);

    const approved = await approve('carla');
    expect([approved.code, approved.stderr]).toEqual([0, '']);
    expect(approved.stdout).toMatch(
      /^exception \d+ resolved: accepted the provider's status PENDING .*, \d+ entries booked\n$/,
    );
    expect(await entries()).toBeGreaterThan(entriesBefore);
    expect(await available()).not.toBe(before);

    const trail = await t.db
      .selectFrom('exception_events')
      .select(['actor', 'action', 'at'])
      .where('exception_id', '=', ex.id)
      .orderBy('id')
      .execute();
    expect(trail.map((e) => [e.actor, e.action])).toEqual([
      ['otto', 'propose'],
      ['carla', 'approve'],
      ['carla', 'state'],
    ]);
    for (const e of trail) expect(e.at).toBeInstanceOf(Date);
    const row = await t.db
      .selectFrom('exceptions')
      .select(['state', 'decision', 'proposal'])
      .where('id', '=', ex.id)
      .executeTakeFirstOrThrow();
    expect(row).toMatchObject({
      state: 'resolved',
      proposal: null,
      decision: { by: 'carla', proposedBy: 'otto' },
    });
  }, 120_000);

  it("refuses a controller's approval of their own proposal, and the database refuses it too", async () => {
    const other = 'shop-own';
    await withLedgerTransaction(t.db, (trx) =>
      applyObservations(trx, [
        { ...obs('deposit', 'o1', 'COMPLETED', 1), account: other },
        { ...obs('deposit', 'o1', 'PENDING', 2), account: other },
      ] as Observation[]),
    );
    const ex = await t.db
      .selectFrom('exceptions')
      .select('id')
      .where('merchant_account', '=', other)
      .executeTakeFirstOrThrow();
    const proposed = await run(
      ['exception', 'decide', ex.id, '--accept-provider', '--note', 'n', '--user', 'dora'],
      password,
    );
    expect(proposed.code).toBe(0);
    const own = await run(['exception', 'approve', ex.id, '--user', 'dora'], password);
    expect([own.code, own.stderr]).toEqual([
      1,
      `payrecon: You proposed the decision on exception ${ex.id}, so a different controller must approve it.\n`,
    ]);
    const rejected = await run(
      ['exception', 'reject', ex.id, '--note', 'not a chargeback', '--user', 'carla'],
      password,
    );
    expect([rejected.code, rejected.stderr]).toEqual([0, '']);
    const trail = await t.db
      .selectFrom('exception_events')
      .select(['actor', 'action'])
      .where('exception_id', '=', ex.id)
      .orderBy('id')
      .execute();
    expect(trail.map((e) => [e.actor, e.action])).toEqual([
      ['dora', 'propose'],
      ['carla', 'reject'],
    ]);
    // Proposed again, then an operator keeps the ledger's: resolved at once, the proposal ended and said.
    expect(
      (
        await run(
          ['exception', 'decide', ex.id, '--accept-provider', '--note', 'again', '--user', 'dora'],
          password,
        )
      ).code,
    ).toBe(0);
    const kept = await run(
      [
        'exception',
        'decide',
        ex.id,
        '--keep-ledger',
        '--note',
        'statement shows no reversal',
        '--user',
        'otto',
      ],
      password,
    );
    expect([kept.code, kept.stderr]).toEqual([0, '']);
    const resolved = await t.db
      .selectFrom('exceptions')
      .select(['state', 'proposal', 'resolution_note'])
      .where('id', '=', ex.id)
      .executeTakeFirstOrThrow();
    expect(resolved).toMatchObject({ state: 'resolved', proposal: null });
    expect(resolved.resolution_note).toContain(
      "statement shows no reversal (ends dora's proposal to accept the provider's status PENDING",
    );
    expect(
      (
        await sql<{
          n: number;
        }>`SELECT count(*)::int AS n FROM journal_entries WHERE merchant_account = ${other} AND memo IS NOT NULL`.execute(
          t.db,
        )
      ).rows[0]!.n,
    ).toBe(0);
    // Written around the code, the database still refuses a decision approved by its proposer.
    await expect(
      sql`UPDATE exceptions SET decision = '{"by": "dora", "proposedBy": "dora"}'::jsonb WHERE id = ${ex.id}`.execute(
        t.db,
      ),
    ).rejects.toMatchObject({ constraint: 'exceptions_decision_approver_ck' });
  }, 120_000);
});
