/**
 * Decisions on an ILLEGAL_TRANSITION or FACTS_CHANGED: accepting the provider's status is proposed
 * (nothing booked) and booked once another person approves it, with who proposed, who approved and why
 * on the entries; keeping the ledger's books nothing at once; both resolve the exception, stay in its
 * history, and the same refused move read again does not reopen it.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approveDecision, decideException } from '../../src/db/exceptions/decisions.ts';
import { applyObservations } from '../../src/db/ledger/service.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { balances } from '../../src/db/read-models/balances.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import type { Observation } from '../../src/domain/observation.ts';
import { actingEnv } from '../cli/web-users.ts';
import { mirrorsWithPolls, obs } from './fixtures.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});

const apply = (o: Observation[]) => withLedgerTransaction(t.db, (trx) => applyObservations(trx, o));
const dep = (account: string, status: string, minute: number) =>
  ({ ...obs('deposit', 'd1', status, minute), account }) as Observation;

async function balanceMap(account: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const r of await balances(t.db, { merchantAccount: account })) {
    if (r.balance !== 0n) out[`${r.account}/${r.currency}`] = r.balance.toString();
  }
  return out;
}

const illegalOf = (account: string) =>
  t.db
    .selectFrom('exceptions')
    .selectAll()
    .where('merchant_account', '=', account)
    .where('type', '=', 'ILLEGAL_TRANSITION')
    .executeTakeFirstOrThrow();

const eventsOf = (id: string) =>
  t.db.selectFrom('exception_events').selectAll().where('exception_id', '=', id).orderBy('id').execute();

async function expectVerified() {
  expect((await verifyLedger(t.db)).failures).toEqual([]);
}

describe('deciding an illegal transition', () => {
  it("accepting the provider's status books the ledger to match, saying who and why", async () => {
    const a = 'decide-accept';
    await apply([dep(a, 'COMPLETED', 1), dep(a, 'PENDING', 2)]);
    expect(await balanceMap(a)).toEqual({ 'available/BRL': '10000', 'deposits/BRL': '-10000' });
    const ex = await illegalOf(a);
    const proposed = await decideException(t.db, {
      id: ex.id,
      decision: 'accept-provider',
      by: 'ana',
      note: 'the provider reopened the payment after a chargeback',
    });
    expect(proposed).toMatchObject({ outcome: 'proposed', status: 'COMPLETED', entriesBooked: 0 });
    // Proposed: nothing booked, the exception open with its proposal; the proposer cannot approve it.
    expect(await balanceMap(a)).toEqual({ 'available/BRL': '10000', 'deposits/BRL': '-10000' });
    expect(await illegalOf(a)).toMatchObject({ state: 'open', proposal: { by: 'ana' } });
    await expect(approveDecision(t.db, { id: ex.id, by: 'ana' })).rejects.toMatchObject({
      code: 'FORBIDDEN',
    });
    const result = await approveDecision(t.db, { id: ex.id, by: 'bob' });
    expect(result).toMatchObject({
      outcome: 'decided',
      status: 'PENDING',
      ledgerStatus: 'COMPLETED',
      providerStatus: 'PENDING',
    });
    expect(result.entriesBooked).toBeGreaterThan(0);
    expect(await balanceMap(a)).toEqual({});
    const m = await t.db
      .selectFrom('mirrors')
      .select('status')
      .where('merchant_account', '=', a)
      .executeTakeFirstOrThrow();
    expect(m.status).toBe('PENDING');
    const entries = await t.db
      .selectFrom('journal_entries')
      .select(['effect', 'direction', 'memo'])
      .where('merchant_account', '=', a)
      .where('direction', '=', -1)
      .execute();
    expect(entries.length).toBeGreaterThan(0);
    for (const e of entries) {
      expect(e.memo).toMatchObject({
        decision: 'accept-provider',
        by: 'bob',
        proposedBy: 'ana',
        exceptionId: ex.id,
      });
    }
    const after = await illegalOf(a);
    expect([after.state, after.resolved_by, after.proposal]).toEqual(['resolved', 'bob', null]);
    expect(after.resolution_note).toMatch(/accepted the provider's status PENDING.*chargeback/);
    expect(after.decision).toMatchObject({ decision: 'accept-provider', by: 'bob', proposedBy: 'ana' });
    expect((await eventsOf(ex.id)).map((e) => [e.actor, e.action, e.from_state, e.to_state])).toEqual([
      ['ana', 'propose', null, null],
      ['bob', 'approve', null, null],
      ['bob', 'state', 'open', 'resolved'],
    ]);
    // Readings after the decision follow the accepted status: a later COMPLETED is a legal move again.
    await apply([dep(a, 'COMPLETED', 10)]);
    expect(await balanceMap(a)).toEqual({ 'available/BRL': '10000', 'deposits/BRL': '-10000' });
    await expectVerified();
  });

  it("keeping the ledger's status books nothing; the same move read again stays resolved, a new one reopens", async () => {
    const a = 'decide-keep';
    await apply([dep(a, 'COMPLETED', 1), dep(a, 'PENDING', 2)]);
    const before = await balanceMap(a);
    const ex = await illegalOf(a);
    const result = await decideException(t.db, {
      id: ex.id,
      decision: 'keep-ledger',
      by: 'bea',
      note: 'a provider glitch, support confirmed COMPLETED',
    });
    expect(result).toMatchObject({ status: 'COMPLETED', entriesBooked: 0 });
    expect(await balanceMap(a)).toEqual(before);
    // The poller reads the same PENDING again, twice: the exception stays resolved, the note visible.
    await apply([dep(a, 'PENDING', 3)]);
    await apply([dep(a, 'PENDING', 4)]);
    let row = await illegalOf(a);
    expect([row.state, row.resolved_by]).toEqual(['resolved', 'bea']);
    expect(row.resolution_note).toMatch(/kept the ledger's status COMPLETED.*support confirmed/);
    // A new fact: the provider now says CANCELLED (another illegal move): it reopens and says what changed.
    await apply([dep(a, 'CANCELLED', 5)]);
    row = await illegalOf(a);
    expect(row.state).toBe('open');
    expect(row.reopen_reason).toBe('was: COMPLETED->PENDING; now: COMPLETED->CANCELLED');
    expect([row.resolved_by, row.resolution_note]).toEqual([
      'bea',
      expect.stringMatching(/support confirmed/),
    ]);
    expect(row.previous).toMatchObject({ decision: { decision: 'keep-ledger', by: 'bea' } });
    expect((await eventsOf(ex.id)).map((e) => [e.actor, e.from_state, e.to_state])).toEqual([
      ['bea', 'open', 'resolved'],
      ['payrecon', 'resolved', 'open'],
    ]);
    expect(await balanceMap(a)).toEqual(before);
    await expectVerified();
  });

  it('refuses what it cannot decide: unknown, other types, already resolved, no note', async () => {
    const a = 'decide-refuse';
    await apply([dep(a, 'COMPLETED', 1), dep(a, 'PENDING', 2)]);
    const ex = await illegalOf(a);
    const decide = (id: string, note = 'why') =>
      decideException(t.db, { id, decision: 'keep-ledger', by: 'ana', note });
    await expect(decide('999999999')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(decide(ex.id, '  ')).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    await decide(ex.id);
    await expect(decide(ex.id)).rejects.toMatchObject({ code: 'CONFLICT' });
  });
});

const factsOf = (account: string) =>
  t.db
    .selectFrom('exceptions')
    .selectAll()
    .where('merchant_account', '=', account)
    .where('type', '=', 'FACTS_CHANGED')
    .executeTakeFirstOrThrow();

describe('deciding a FACTS_CHANGED exception', () => {
  it("accepting the provider's new facts unfreezes the entity and rebooks it consistently, saying who and why", async () => {
    const a = 'facts-accept';
    // Completed in BRL, then read as completed in MXN for another amount: frozen on the BRL booking.
    await apply([dep(a, 'COMPLETED', 1)]);
    await apply([{ ...dep(a, 'COMPLETED', 2), currency: 'MXN', amount: 25_000n }]);
    expect(await balanceMap(a)).toEqual({ 'available/BRL': '10000', 'deposits/BRL': '-10000' });
    const ex = await factsOf(a);
    await decideException(t.db, {
      id: ex.id,
      decision: 'accept-provider',
      by: 'ana',
      note: 'the provider corrected the currency; confirmed by its support',
    });
    expect(await balanceMap(a)).toEqual({ 'available/BRL': '10000', 'deposits/BRL': '-10000' });
    const result = await approveDecision(t.db, { id: ex.id, by: 'bob' });
    expect(result.entriesBooked).toBeGreaterThan(0);
    // The BRL booking reversed, the MXN one booked; the ledger verifies.
    expect(await balanceMap(a)).toEqual({ 'available/MXN': '25000', 'deposits/MXN': '-25000' });
    await expectVerified();
    const entries = await t.db
      .selectFrom('journal_entries')
      .select(['memo'])
      .where('merchant_account', '=', a)
      .where('memo', 'is not', null)
      .execute();
    expect(entries.length).toBeGreaterThan(0);
    for (const e of entries) {
      expect(e.memo).toMatchObject({
        decision: 'accept-provider',
        by: 'bob',
        proposedBy: 'ana',
        exceptionId: ex.id,
      });
    }
    const resolved = await factsOf(a);
    expect(resolved).toMatchObject({ state: 'resolved', resolved_by: 'bob' });
    expect(resolved.resolution_note).toContain("accepted the provider's facts");
    expect((await eventsOf(ex.id)).map((e) => e.to_state)).toContain('resolved');
    // Polling resumes; the same MXN reading again changes nothing and raises nothing.
    const mirror = await mirrorsWithPolls(t.db)
      .select(['m.currency'])
      .where('m.merchant_account', '=', a)
      .executeTakeFirstOrThrow();
    expect(mirror.currency).toBe('MXN');
    await apply([{ ...dep(a, 'COMPLETED', 3), currency: 'MXN', amount: 25_000n }]);
    expect(await balanceMap(a)).toEqual({ 'available/MXN': '25000', 'deposits/MXN': '-25000' });
    expect(await factsOf(a)).toMatchObject({ state: 'resolved' });
    await expectVerified();
  });

  it("keeping the ledger's facts leaves the bookings and the freeze, and resolves the exception", async () => {
    const a = 'facts-keep';
    await apply([dep(a, 'COMPLETED', 1)]);
    await apply([{ ...dep(a, 'COMPLETED', 2), currency: 'MXN' }]);
    const before = await balanceMap(a);
    expect(before).toEqual({ 'available/BRL': '10000', 'deposits/BRL': '-10000' });
    const ex = await factsOf(a);
    const result = await decideException(t.db, {
      id: ex.id,
      decision: 'keep-ledger',
      by: 'rui',
      note: 'a provider bug; its support will fix the reading',
    });
    expect(result.entriesBooked).toBe(0);
    expect(await balanceMap(a)).toEqual(before);
    const resolved = await factsOf(a);
    expect(resolved).toMatchObject({ state: 'resolved', resolved_by: 'rui' });
    expect(resolved.resolution_note).toContain("kept the ledger's facts");
    // The same changed reading again does not reopen it.
    await apply([{ ...dep(a, 'COMPLETED', 3), currency: 'MXN' }]);
    expect(await factsOf(a)).toMatchObject({ state: 'resolved' });
    expect(await balanceMap(a)).toEqual(before);
    await expectVerified();
  });
});

/** The real bin, with a clean environment and the test database. */
async function payrecon(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const users = await actingEnv({ 'cli-user': 'operator', 'cli-controller': 'controller', u: 'operator' });
  const dir = await mkdtemp(join(tmpdir(), 'payrecon-decide-'));
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !/^(PAYRECON_|DATABASE_URL|KAFKA_|SCHEMA_REGISTRY_URL|LOG_LEVEL)/.test(k))
      env[k] = v;
  }
  try {
    return await new Promise((done, reject) => {
      const child = spawn(
        process.execPath,
        [resolve(import.meta.dirname, '../../bin/payrecon.mjs'), ...args],
        {
          cwd: dir,
          env: { ...env, ...users, PAYRECON_DATA_DIR: join(dir, 'data'), DATABASE_URL: t.url },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (c) => {
        stdout += c;
      });
      child.stderr.on('data', (c) => {
        stderr += c;
      });
      child.on('error', reject);
      child.on('close', (code) => done({ code, stdout, stderr }));
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

describe('payrecon exception decide', () => {
  it("accepts the provider's status from the command line, and refuses bad usage with one line", async () => {
    const a = 'decide-cli';
    await apply([dep(a, 'COMPLETED', 1), dep(a, 'PENDING', 2)]);
    const ex = await illegalOf(a);
    const both = await payrecon([
      'exception',
      'decide',
      ex.id,
      '--accept-provider',
      '--keep-ledger',
      '--note',
      'x',
    ]);
    expect([both.code, both.stderr.trim()]).toEqual([
      2,
      'payrecon: exception decide: give exactly one of --accept-provider or --keep-ledger',
    ]);
    const ok = await payrecon([
      'exception',
      'decide',
      ex.id,
      '--accept-provider',
      '--note',
      'chargeback',
      '--user',
      'cli-user',
    ]);
    expect(ok.stderr).toBe('');
    expect(ok.code).toBe(0);
    expect(ok.stdout).toBe(
      `exception ${ex.id} proposed to accept the provider's status PENDING (ledger has COMPLETED); nothing booked until a controller who did not propose it approves (payrecon exception approve ${ex.id})\n`,
    );
    const approved = await payrecon(['exception', 'approve', ex.id, '--user', 'cli-controller']);
    expect([approved.code, approved.stderr]).toEqual([0, '']);
    expect(approved.stdout).toBe(
      `exception ${ex.id} resolved: accepted the provider's status PENDING (ledger had COMPLETED), 1 entries booked\n`,
    );
    expect((await illegalOf(a)).decision).toMatchObject({
      decision: 'accept-provider',
      by: 'cli-controller',
      proposedBy: 'cli-user',
    });
    const again = await payrecon([
      'exception',
      'decide',
      ex.id,
      '--keep-ledger',
      '--note',
      'x',
      '--user',
      'u',
    ]);
    expect([again.code, again.stderr.trim()]).toEqual([1, `payrecon: exception ${ex.id}: already resolved`]);
  }, 60_000);

  it("keeps the ledger's facts of a FACTS_CHANGED from the command line; refuses a type that takes no decision", async () => {
    const a = 'decide-cli-facts';
    await apply([dep(a, 'COMPLETED', 1)]);
    await apply([{ ...dep(a, 'COMPLETED', 2), currency: 'MXN' }]);
    const before = await balanceMap(a);
    const ex = await factsOf(a);
    const kept = await payrecon([
      'exception',
      'decide',
      ex.id,
      '--keep-ledger',
      '--note',
      'provider bug, ticket 4411',
      '--user',
      'cli-user',
    ]);
    expect([kept.code, kept.stderr]).toEqual([0, '']);
    expect(kept.stdout).toBe(
      `exception ${ex.id} resolved: kept the ledger's facts (provider reported currency BRL -> MXN)\n`,
    );
    const row = await factsOf(a);
    expect([row.state, row.resolved_by]).toEqual(['resolved', 'cli-user']);
    expect(row.decision).toMatchObject({
      decision: 'keep-ledger',
      by: 'cli-user',
      note: 'provider bug, ticket 4411',
    });
    expect((await eventsOf(ex.id)).map((e) => [e.actor, e.to_state, e.note])).toEqual([
      [
        'cli-user',
        'resolved',
        "kept the ledger's facts (provider reported currency BRL -> MXN): provider bug, ticket 4411",
      ],
    ]);
    expect(await balanceMap(a)).toEqual(before);
    // An exception that is not an illegal move or changed facts takes no decision: one line, exit 1.
    await apply([
      { ...obs('deposit', 'cli-third', 'CANCELLED', 3), account: a, statusReason: 'THIRD_PARTY_PAYER' },
    ]);
    const other = await t.db
      .selectFrom('exceptions')
      .select('id')
      .where('entity_id', '=', 'cli-third')
      .where('type', '=', 'THIRD_PARTY_PAYER')
      .executeTakeFirstOrThrow();
    const refused = await payrecon([
      'exception',
      'decide',
      other.id,
      '--accept-provider',
      '--note',
      'x',
      '--user',
      'u',
    ]);
    expect([refused.code, refused.stderr.trim()]).toEqual([
      1,
      `payrecon: exception ${other.id}: is THIRD_PARTY_PAYER, only ILLEGAL_TRANSITION and FACTS_CHANGED take a decision`,
    ]);
    const unknown = await payrecon([
      'exception',
      'decide',
      '98765432',
      '--keep-ledger',
      '--note',
      'x',
      '--user',
      'u',
    ]);
    expect([unknown.code, unknown.stderr.trim()]).toEqual([
      1,
      'payrecon: exception 98765432: no such exception',
    ]);
    await expectVerified();
  }, 90_000);

  it('lists the queue from the command line: one line each, with what the provider said; the id decide takes', async () => {
    const a = 'list-cli';
    await apply([dep(a, 'COMPLETED', 1), dep(a, 'PENDING', 2)]);
    const ex = await illegalOf(a);
    const listed = await payrecon(['exception', 'list', '--type', 'ILLEGAL_TRANSITION', '--account', a]);
    expect([listed.code, listed.stderr]).toEqual([0, '']);
    expect(listed.stdout).toBe(
      `${ex.id}  ILLEGAL_TRANSITION  medium  open  deposit ${a}/d1  100.00 BRL  COMPLETED  provider said COMPLETED → PENDING (not applied)\n` +
        '1 exception(s), not resolved\n',
    );
    // The decision made above from the command line, among the resolved ones.
    const resolved = await payrecon([
      'exception',
      'list',
      '--state',
      'resolved',
      '--account',
      'decide-cli-facts',
    ]);
    expect(resolved.code).toBe(0);
    expect(resolved.stdout).toMatch(
      /^\d+ {2}FACTS_CHANGED {2}critical {2}resolved {2}deposit decide-cli-facts\/d1 {2}100\.00 BRL {2}COMPLETED {2}provider said currency BRL → MXN\n1 exception\(s\), resolved\n$/,
    );
    const bad = await payrecon(['exception', 'list', '--state', 'closed']);
    expect([bad.code, bad.stderr.trim()]).toEqual([
      2,
      'payrecon: --state: must be one of open, in_review, acknowledged, resolved',
    ]);
  }, 90_000);
});
