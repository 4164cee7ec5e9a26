/**
 * `payrecon import` run as a user runs it (the real bin) on files a settled sandbox wrote: a dry run
 * touches no database, an import records each line once (again: 0 new, the same day's bank CSV: 0 new)
 * and prints beside its statements the matching run its new lines started, every refusal is one line
 * naming the file, where and the rule, exit code 2, nothing imported, and an import whose matching run
 * goes away stays recorded with one line saying so, exit code 1.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/sandbox/clock.ts';
import { createTestDatabase, holdMatchingLock, type TestDatabase } from '../db/helpers.ts';
import { control, startTestSandbox } from '../sandbox/helpers.ts';
import { NO_BANK_ANOMALIES, paidDeposit } from '../sandbox/settlement-helpers.ts';
import { type Result, payrecon as runPayrecon } from './payrecon.ts';
import { actingEnv } from './web-users.ts';

const MONDAY = Date.UTC(2026, 2, 2, 10, 0, 0);
const dayStart = (n: number) => Date.UTC(2026, 2, 2 + n, 0, 0, 1);

let dir = '';
let t: TestDatabase;
let bankId = '';
let bankAccounts = '';
/** The day whose statement holds a settlement's credit. */
const DAY = '2026-03-04';
const NEXT_DAY = '2026-03-05';

/** The real bin's `import`, with this test's bank accounts. */
const payrecon = (args: string[], env: Record<string, string> = {}): Promise<Result> =>
  runPayrecon(dir, ['import', ...args], { PAYRECON_BANK_ACCOUNTS: bankAccounts, ...env });

const withDb = (args: string[], env: Record<string, string> = {}) =>
  payrecon(args, { DATABASE_URL: t.url, ...env });

async function counts() {
  const db = t.db;
  const n = async (
    table: 'imports' | 'bank_statement_lines' | 'provider_transaction_rows' | 'provider_settlement_rows',
  ) =>
    Number(
      (
        await db
          .selectFrom(table)
          .select((eb) => eb.fn.countAll().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );
  return {
    imports: await n('imports'),
    bank: await n('bank_statement_lines'),
    transactions: await n('provider_transaction_rows'),
    settlements: await n('provider_settlement_rows'),
  };
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'payrecon-import-'));
  t = await createTestDatabase();
  const s = await startTestSandbox({ clock: new ManualClock(MONDAY), seed: 5, bank: NO_BANK_ANOMALIES });
  try {
    for (let n = 0; n < 4; n++) {
      await paidDeposit(s.url, 100 + n);
      await paidDeposit(s.url, 55.55);
      await s.clock.set(dayStart(n + 1) + 3600_000);
    }
    const accounts = (await control(s.url, '/bank-accounts')).json as { id: string; currency: string }[];
    bankId = accounts[0]!.id;
    bankAccounts = JSON.stringify([
      { id: bankId, currency: accounts[0]!.currency, account: 'sandbox', name: 'Settlement account' },
    ]);
    const files: [string, string][] = [
      ['statement.xml', `bank-statements?account=sandbox&date=${DAY}&format=camt.053.001.08`],
      ['statement-02.xml', `bank-statements?account=sandbox&date=${DAY}&format=camt.053.001.02`],
      ['statement.csv', `bank-statements?account=sandbox&date=${DAY}&format=csv`],
      ['next-day.xml', `bank-statements?account=sandbox&date=${NEXT_DAY}&format=camt.053.001.08`],
      ['transactions.csv', 'reports/transactions?account=sandbox&format=csv'],
      ['transactions.xlsx', 'reports/transactions?account=sandbox&format=xlsx'],
      ['settlements.csv', 'reports/settlements?account=sandbox&format=csv'],
    ];
    for (const [name, path] of files) {
      const res = await fetch(`${s.url}/_sandbox/${path}`);
      expect(res.status, path).toBe(200);
      await writeFile(join(dir, name), new Uint8Array(await res.arrayBuffer()));
    }
  } finally {
    await s.close();
  }
}, 60_000);

afterAll(async () => {
  await t?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('payrecon import', () => {
  it('checks a file without a database on --dry-run', async () => {
    const dry = await payrecon(['bank-statement', 'statement.xml', '--dry-run', '--json'], {
      DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none',
    });
    expect(dry.stderr).toBe('');
    expect(dry.code).toBe(0);
    const out = JSON.parse(dry.stdout) as { statements: Record<string, unknown>[]; matching: unknown };
    // The shape, and beside it the matching run: none on a dry run.
    expect(Object.keys(out)).toEqual(['statements', 'matching']);
    expect(out.matching).toBeNull();
    expect(out.statements).toHaveLength(1);
    expect(out.statements[0]).toMatchObject({ account: bankId, currency: 'BRL', pending: 0, new: null });
    expect(out.statements[0]!.booked).toBeGreaterThan(0);
    expect(typeof out.statements[0]!.closing).toBe('string');
    expect((await counts()).imports).toBe(0);
  }, 60_000);

  it('imports each line once: again, or the same day in another format, adds nothing', async () => {
    // As a configured user, authenticated; the other imports name the system user (cli:<user>).
    const first = await withDb(
      ['bank-statement', 'statement.xml', '--json', '--user', 'ana'],
      await actingEnv({ ana: 'operator' }),
    );
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    const firstOut = JSON.parse(first.stdout) as {
      statements: Record<string, number>[];
      matching: { matched: Record<string, number>; unmatched: Record<string, number>; resolved: number };
    };
    const [statement] = firstOut.statements;
    expect(statement!.new).toBe(statement!.booked);
    // The run its new lines started, in counts: no settlement yet, so the day's lines are left unmatched.
    expect(firstOut.matching).toMatchObject({
      matched: {},
      unmatched: { bankLines: statement!.booked, settlements: 0, reportRows: 0 },
      resolved: 0,
    });
    const stored = await t.db.selectFrom('imports').select('matching').executeTakeFirstOrThrow();
    expect(stored.matching).toEqual(firstOut.matching);
    const again = await withDb(['bank-statement', 'statement.xml', '--json']);
    expect(JSON.parse(again.stdout).statements[0].new).toBe(0);
    // No line new: no run.
    expect(JSON.parse(again.stdout).matching).toBeNull();
    const older = await withDb(['bank-statement', 'statement-02.xml', '--json']);
    expect(JSON.parse(older.stdout).statements[0].new).toBe(0);
    const csv = await withDb(['bank-statement', 'statement.csv', '--account', bankId]);
    expect(csv.code).toBe(0);
    expect(csv.stdout).toMatch(/, 0 new\n$/);
    expect(await counts()).toMatchObject({ imports: 4, bank: statement!.booked });

    const tx = await withDb(['provider-transactions', 'transactions.csv', '--json']);
    const txOut = JSON.parse(tx.stdout) as {
      rows: number;
      new: number;
      matching: { unmatched: { reportRows: number } };
    };
    expect(txOut.rows).toBeGreaterThan(8);
    expect(txOut.new).toBe(txOut.rows);
    expect(Number.isInteger(txOut.matching.unmatched.reportRows)).toBe(true);
    const txXlsx = await withDb(['provider-transactions', 'transactions.xlsx', '--json']);
    expect(JSON.parse(txXlsx.stdout)).toEqual({
      kind: 'provider-transactions',
      rows: txOut.rows,
      new: 0,
      matching: null,
    });
    const st = await withDb(['provider-settlements', 'settlements.csv']);
    // New lines are matched at once: the day's credit to its settlement, by its end-to-end id.
    expect(st.stdout).toMatch(
      /^settlements\.csv: \d+ rows, \d+ new\nsettlements\.csv: matched: bank-reference 1(, transaction-id \d+)?; unmatched: /,
    );
    const st2 = await withDb(['provider-settlements', 'settlements.csv']);
    expect(st2.stdout).toMatch(/, 0 new\n$/);
    // Nothing is left to match: a run adds nothing; one line and exit 2 on a bad rule list.
    const match = await runPayrecon(dir, ['match', '--json'], {
      PAYRECON_BANK_ACCOUNTS: bankAccounts,
      DATABASE_URL: t.url,
    });
    expect(match.stderr).toBe('');
    expect(JSON.parse(match.stdout)).toMatchObject({ matched: {}, unmatched: { bankLines: 0 } });
    // By hand: the rule's match ended with a note, then the same lines matched by a person.
    const made = await t.db
      .selectFrom('matches')
      .innerJoin('match_members', 'match_members.match_id', 'matches.id')
      .select(['matches.id', 'match_members.side', 'match_members.identity'])
      .where('matches.rule', '=', 'bank-reference')
      .execute();
    const matchId = made[0]!.id;
    const side = (name: string) => made.filter((m) => m.side === name).map((m) => m.identity);
    // By hand acts as a configured user, authenticated, who may work exceptions.
    const env = {
      PAYRECON_BANK_ACCOUNTS: bankAccounts,
      DATABASE_URL: t.url,
      ...(await actingEnv({ ana: 'operator', bo: 'controller', vi: 'viewer' })),
    };
    const noNote = await runPayrecon(dir, ['match', '--undo', matchId], env);
    expect([noNote.code, noNote.stderr]).toEqual([2, 'payrecon: --note: is required: say why\n']);
    const viewer = await runPayrecon(
      dir,
      ['match', '--undo', matchId, '--note', 'checking', '--user', 'vi'],
      env,
    );
    expect([viewer.code, viewer.stderr]).toEqual([
      2,
      'payrecon: --user: vi is a viewer: match by hand needs an operator or a controller\n',
    ]);
    const wrong = await runPayrecon(dir, ['match', '--undo', matchId, '--note', 'checking', '--user', 'bo'], {
      ...env,
      PAYRECON_PASSWORD: 'not the password',
    });
    expect([wrong.code, wrong.stderr]).toEqual([2, 'payrecon: --user: bo: wrong password\n']);
    const undone = await runPayrecon(
      dir,
      ['match', '--undo', matchId, '--note', 'checking', '--user', 'bo'],
      env,
    );
    expect(undone.stdout).toBe(`match ${matchId} (bank-reference): ended by bo, 2 lines unmatched\n`);
    const redo = await runPayrecon(
      dir,
      [
        'match',
        '--line',
        ...side('bank_line'),
        '--with',
        ...side('settlement'),
        '--note',
        'checked',
        '--json',
      ],
      { ...env, USER: 'ana' },
    );
    expect(redo.stderr).toBe('');
    const { matchId: manualId } = JSON.parse(redo.stdout) as { matchId: string };
    const manual = await t.db
      .selectFrom('matches')
      .selectAll()
      .where('id', '=', manualId)
      .executeTakeFirstOrThrow();
    expect(manual).toMatchObject({ rule: 'manual', note: 'checked' });
    const ended = await t.db
      .selectFrom('matches')
      .selectAll()
      .where('id', '=', matchId)
      .executeTakeFirstOrThrow();
    expect(ended).toMatchObject({ ended_by: 'bo', end_note: 'checking' });
    const bad = await runPayrecon(dir, ['match'], {
      DATABASE_URL: t.url,
      PAYRECON_MATCH_RULES: '[{"name":"x","pair":"bank-settlement","cardinality":"all"}]',
    });
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim().split('\n')).toHaveLength(1);
    expect(bad.stderr).toMatch(/PAYRECON_MATCH_RULES/);
    const who = await t.db.selectFrom('imports').select(['imported_by', 'file_name']).orderBy('id').execute();
    expect(who[0]).toEqual({ imported_by: 'ana', file_name: 'statement.xml' });
    expect(who[1]!.imported_by).toMatch(/^cli:./);
  }, 120_000);

  it('refuses with one line, exit 2 and nothing imported', async () => {
    const xml = await readFile(join(dir, 'statement.xml'), 'utf8');
    const closing = /<Cd>CLBD<\/Cd>[\s\S]*?<Amt Ccy="BRL">([\d.]+)<\/Amt>/.exec(xml)!;
    await writeFile(
      join(dir, 'unbalanced.xml'),
      xml.replace(closing[0], closing[0].replace(`>${closing[1]}<`, '>1.00<')),
    );
    await writeFile(join(dir, 'broken.xml'), xml.replace('</BkToCstmrStmt>', ''));
    const csv = await readFile(join(dir, 'transactions.csv'), 'utf8');
    const lines = csv.split('\n');
    lines[2] = lines[2]!.replace(/,(-?\d+\.\d{2}),/, ',12.3.4,');
    await writeFile(join(dir, 'bad-row.csv'), lines.join('\n'));
    await writeFile(join(dir, 'profile.json'), JSON.stringify({ kind: 'bank-statement', name: 'x' }));
    const builtIn = JSON.parse(
      await readFile(
        resolve(import.meta.dirname, '../../src/imports/profiles/sandbox-bank-csv.json'),
        'utf8',
      ),
    );
    await writeFile(join(dir, 'bank-profile.json'), JSON.stringify({ ...builtIn, name: 'bank' }));
    const before = await counts();
    const cases: [string[], Record<string, string>, RegExp][] = [
      [
        ['bank-statement', 'unbalanced.xml'],
        {},
        /^payrecon: unbalanced\.xml: statement 1 \(Id [^)]+\), account \S+: the booked entries take the opening balance [\d.-]+ to [\d.-]+, not to the closing balance 1\.00\n$/,
      ],
      [['bank-statement', 'broken.xml'], {}, /^payrecon: broken\.xml: does not parse as XML: .*\d+:\d+.*\n$/],
      [
        ['bank-statement', 'statement.xml'],
        { PAYRECON_BANK_ACCOUNTS: '[]' },
        new RegExp(
          `^payrecon: statement\\.xml: statement 1 \\(Id [^)]+\\): the bank account "${bankId}" is not one of PAYRECON_BANK_ACCOUNTS\\n$`,
        ),
      ],
      [
        ['bank-statement', 'statement.csv', '--account', 'NL91ABNA0417164300'],
        {},
        /^payrecon: statement\.csv: statement 1: the bank account "NL91ABNA0417164300" is not one of PAYRECON_BANK_ACCOUNTS\n$/,
      ],
      [
        ['provider-transactions', 'bad-row.csv'],
        {},
        /^payrecon: bad-row\.csv: row 3: "(gross|fee|net)" must be a number written as 1234\.56 \(got "12\.3\.4"\)\n$/,
      ],
      [
        ['provider-transactions', 'transactions.csv', '--profile', 'profile.json'],
        {},
        /^payrecon: profile\.json: field \S+: .+\n$/,
      ],
      [['bank-statement', 'missing.xml'], {}, /^payrecon: FILE: missing\.xml: no such file\n$/],
      [
        ['bank-statement', 'statement.xml', '--profile', 'bank-profile.json'],
        {},
        /^payrecon: statement\.xml: is camt\.053 XML: the profile bank reads CSV or XLSX files\n$/,
      ],
      [
        ['payouts', 'statement.xml'],
        {},
        /^payrecon: kind: must be one of bank-statement, provider-transactions, provider-settlements\n$/,
      ],
      [
        ['bank-statement', 'statement.xml'],
        { PAYRECON_BANK_ACCOUNTS: '[{"id":"X"}]' },
        /^payrecon: PAYRECON_BANK_ACCOUNTS\[0\]\.currency: .+\n$/,
      ],
    ];
    for (const [args, env, message] of cases) {
      const run = await withDb(args, env);
      expect(run.stderr, args.join(' ')).toMatch(message);
      expect(run.code, args.join(' ')).toBe(2);
      expect(run.stdout).toBe('');
    }
    expect(await counts()).toEqual(before);
  }, 180_000);

  it('keeps an import whose matching run goes away: matching null, one line on stderr, exit 1', async () => {
    const lock = await holdMatchingLock(t);
    let run: Result;
    try {
      const importing = withDb(['bank-statement', 'next-day.xml', '--json']);
      await lock.dropWaitingRun();
      run = await importing;
    } finally {
      await lock.release();
    }
    const out = JSON.parse(run.stdout) as { statements: { new: number }[]; matching: unknown };
    expect(out.statements[0]!.new).toBeGreaterThan(0);
    expect(out.matching).toBeNull();
    expect(run.stderr).toMatch(
      /^payrecon: next-day\.xml: imported as \d+, but matching did not finish \(.+\): the next matching run takes its lines\n$/,
    );
    expect(run.code).toBe(1);
    const row = await t.db
      .selectFrom('imports')
      .select(['new_lines', 'matching'])
      .where('file_name', '=', 'next-day.xml')
      .executeTakeFirstOrThrow();
    expect(row.new_lines).toBe(out.statements[0]!.new);
    expect(row.matching).toBeNull();
  }, 60_000);
});
