/**
 * Decisions in bulk from the exception workbook, against PostgreSQL: the workbook is written, its
 * Decision and Note columns filled and read back; every row is checked and all are applied or none.
 * keep-ledger resolves, accept-provider is only proposed (nothing booked) until a controller approves it
 * from another workbook; a row of an exception changed since the download is refused, a sighting of the
 * same fact is not a change; formulas, numbers and a touched key are refused, each on its row.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BulkDecisionRefused } from '../../src/db/exceptions/bulk-decisions.ts';
import { changeQueueItem } from '../../src/db/exceptions/queue-service.ts';
import { applyObservations } from '../../src/db/ledger/service.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { balances } from '../../src/db/read-models/balances.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import type { Observation } from '../../src/domain/observation.ts';
import { decideFromWorkbook } from '../../src/reports/decision-workbook.ts';
import { writeExceptionWorkbook } from '../../src/reports/exception-workbook.ts';
import { fillDecisions, type RowFill } from '../reports/decision-fill.ts';
import { obs } from './fixtures.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

let t: TestDatabase;
let dir: string;
let n = 0;

beforeAll(async () => {
  t = await createTestDatabase();
  dir = await mkdtemp(join(tmpdir(), 'payrecon-bulk-decisions-'));
});
afterAll(async () => {
  await t?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const apply = (o: Observation[]) => withLedgerTransaction(t.db, (trx) => applyObservations(trx, o));
const dep = (account: string, status: string, minute: number) =>
  ({ ...obs('deposit', 'd1', status, minute), account }) as Observation;

/** A deposit read COMPLETED, then PENDING: an ILLEGAL_TRANSITION on its own account; its id. */
async function illegal(account: string): Promise<string> {
  await apply([dep(account, 'COMPLETED', 1), dep(account, 'PENDING', 2)]);
  return (await exceptionOf(account)).id;
}

const exceptionOf = (account: string) =>
  t.db
    .selectFrom('exceptions')
    .selectAll()
    .where('merchant_account', '=', account)
    .where('type', '=', 'ILLEGAL_TRANSITION')
    .executeTakeFirstOrThrow();

async function balanceMap(account: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const r of await balances(t.db, { merchantAccount: account })) {
    if (r.balance !== 0n) out[`${r.account}/${r.currency}`] = r.balance.toString();
  }
  return out;
}

/** The exception workbook of today, as downloaded. */
async function download(): Promise<Buffer> {
  const now = new Date();
  const out = join(dir, `exceptions-${++n}.xlsx`);
  const day = now.toISOString().slice(0, 10);
  await writeExceptionWorkbook(t.db, {
    period: {
      from: day,
      to: day,
      start: new Date(now.getTime() - 86_400_000),
      end: new Date(now.getTime() + 60_000),
      timeZone: 'UTC',
      cutoff: '00:00',
    },
    account: null,
    out,
    now: new Date(now.getTime() + 1_000),
  });
  return readFile(out);
}

async function upload(
  fills: Record<string, RowFill>,
  who: { by: string; mayApprove: boolean },
  workbook?: Buffer,
) {
  const filled = await fillDecisions(workbook ?? (await download()), fills);
  return { rows: filled.rows, result: decideFromWorkbook(t.db, filled.bytes, who) };
}

async function refusal(p: Promise<unknown>): Promise<string[]> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(BulkDecisionRefused);
  return (err as BulkDecisionRefused).lines;
}

describe('decisions from the exception workbook', () => {
  it('applies every row or none: one row without its note refuses them all', async () => {
    const [a, b, c] = [await illegal('wb-a'), await illegal('wb-b'), await illegal('wb-c')];
    const before = await balanceMap('wb-b');
    const { rows, result } = await upload(
      {
        [a]: { decision: 'keep-ledger', note: 'the provider confirmed the deposit stands' },
        [b]: { decision: 'accept-provider', note: 'reopened after a chargeback' },
        [c]: { decision: 'keep-ledger' },
      },
      { by: 'ana', mayApprove: false },
    );
    expect(await refusal(result)).toEqual([
      `Exceptions row ${rows[c]}: Note: required for keep-ledger (why the decision is right)`,
    ]);
    // Nothing decided: all three open, no proposal, no event, nothing booked.
    for (const acc of ['wb-a', 'wb-b', 'wb-c']) {
      expect(await exceptionOf(acc)).toMatchObject({ state: 'open', proposal: null, decision: null });
    }
    const events = await t.db
      .selectFrom('exception_events')
      .selectAll()
      .where('exception_id', 'in', [a, b, c])
      .execute();
    expect(events).toEqual([]);
    expect(await balanceMap('wb-b')).toEqual(before);
  });

  it('keep-ledger resolves; accept-provider is only proposed until a controller approves it from the workbook', async () => {
    const [a, b] = [(await exceptionOf('wb-a')).id, (await exceptionOf('wb-b')).id];
    const before = await balanceMap('wb-b');
    const first = await upload(
      {
        [a]: { decision: 'keep-ledger', note: 'the provider confirmed the deposit stands' },
        [b]: { decision: 'accept-provider', note: 'reopened after a chargeback' },
      },
      { by: 'ana', mayApprove: false },
    );
    const outcomes = await first.result;
    expect(outcomes.map((o) => [o.id, o.decision, o.outcome, o.row])).toEqual([
      [a, 'keep-ledger', 'decided', first.rows[a]],
      [b, 'accept-provider', 'proposed', first.rows[b]],
    ]);
    expect(await exceptionOf('wb-a')).toMatchObject({ state: 'resolved', resolved_by: 'ana' });
    expect(await exceptionOf('wb-b')).toMatchObject({ state: 'open', proposal: { by: 'ana' } });
    expect(await balanceMap('wb-b')).toEqual(before);

    // An operator cannot approve; the proposer cannot approve her own; another controller can.
    const workbook = await download();
    const byOperator = await upload(
      { [b]: { decision: 'approve' } },
      { by: 'olga', mayApprove: false },
      workbook,
    );
    expect(await refusal(byOperator.result)).toEqual([
      `Exceptions row ${byOperator.rows[b]}: approve: a controller approves or rejects a proposal`,
    ]);
    const byProposer = await upload(
      { [b]: { decision: 'approve' } },
      { by: 'ana', mayApprove: true },
      workbook,
    );
    expect((await refusal(byProposer.result))[0]).toMatch(/You proposed the decision on exception/);
    const approved = await upload(
      { [b]: { decision: 'approve' } },
      { by: 'bob', mayApprove: true },
      workbook,
    );
    expect((await approved.result).map((o) => o.outcome)).toEqual(['approved']);
    expect(await exceptionOf('wb-b')).toMatchObject({
      state: 'resolved',
      resolved_by: 'bob',
      decision: { decision: 'accept-provider', by: 'bob', proposedBy: 'ana' },
    });
    expect(await balanceMap('wb-b')).toEqual({});
    expect((await verifyLedger(t.db)).failures).toEqual([]);
  });

  it('refuses a row whose exception changed since the download; the same fact seen again is no change', async () => {
    const who = { by: 'ana', mayApprove: false };
    const c = (await exceptionOf('wb-c')).id;
    const d = await illegal('wb-d');
    const workbook = await download();
    // The poller reads the same refused status again: counted, not a change.
    await apply([dep('wb-d', 'PENDING', 3)]);
    expect((await exceptionOf('wb-d')).count).toBeGreaterThan(1);
    // Someone comments on c after the download: a change.
    expect(
      await changeQueueItem(t.db, c, { kind: 'comment', note: 'asking the provider' }, 'olga', new Date()),
    ).toBe('changed');
    const { rows, result } = await upload(
      {
        [c]: { decision: 'keep-ledger', note: 'kept' },
        [d]: { decision: 'keep-ledger', note: 'kept' },
      },
      { by: 'ana', mayApprove: false },
      workbook,
    );
    expect(await refusal(result)).toEqual([
      `Exceptions row ${rows[c]}: exception ${c} changed since the workbook was made: decide it from a new workbook`,
    ]);
    expect(await exceptionOf('wb-d')).toMatchObject({ state: 'open' });
    // A resolved one (a, decided above) is refused when a workbook names it; d alone is decided.
    const a = (await exceptionOf('wb-a')).id;
    const resolved = await upload({ [a]: { decision: 'keep-ledger', note: 'again' } }, who, workbook);
    expect(await refusal(resolved.result)).toEqual([
      `Exceptions row ${resolved.rows[a]}: exception ${a}: already resolved`,
    ]);
    const fresh = await upload({ [d]: { decision: 'keep-ledger', note: 'kept' } }, who);
    expect((await fresh.result).map((o) => o.outcome)).toEqual(['decided']);
  });

  it('refuses formulas, numbers, unknown decisions, a touched key and a row decided twice, one line per row', async () => {
    const ids = [await illegal('wb-e'), await illegal('wb-f'), await illegal('wb-g'), await illegal('wb-h')];
    const [e, f, g, h] = ids as [string, string, string, string];
    const { rows, result } = await upload(
      {
        [e]: { decision: { formula: '"keep"&"-ledger"' }, note: 'x' },
        [f]: { decision: 'keep-ledger', note: 42 },
        [g]: { decision: 'approve-all', note: 'x', key: `${g}@1.00000000x` },
        [h]: { decision: 'keep-ledger', note: { formula: 'HYPERLINK("http://x","y")' } },
      },
      { by: 'ana', mayApprove: false },
    );
    expect(await refusal(result)).toEqual([
      `Exceptions row ${rows[e]}: Decision: a formula, not one of keep-ledger, accept-provider, approve, reject`,
      `Exceptions row ${rows[f]}: Note: a number; write the note as text`,
      `Exceptions row ${rows[g]}: Decision: "approve-all" is not one of keep-ledger, accept-provider, approve, reject; Key: missing or changed (the hidden column the workbook was downloaded with)`,
      `Exceptions row ${rows[h]}: Note: a formula; write the note as text`,
    ]);
    for (const acc of ['wb-e', 'wb-f', 'wb-g', 'wb-h'])
      expect(await exceptionOf(acc)).toMatchObject({ state: 'open' });
    // A workbook with no decision filled in is refused as a whole.
    await expect(
      decideFromWorkbook(t.db, await download(), { by: 'ana', mayApprove: false }),
    ).rejects.toThrow(/no row has a decision/);
    // Not a workbook at all.
    await expect(
      decideFromWorkbook(t.db, Buffer.from('Id,Decision\n1,keep-ledger\n'), { by: 'ana', mayApprove: false }),
    ).rejects.toThrow(/^file: not an xlsx workbook/);
  });

  it('two uploads deciding the same exception at once: one decides it, the other is refused', async () => {
    const id = await illegal('wb-race');
    const filled = await fillDecisions(await download(), { [id]: { decision: 'keep-ledger', note: 'kept' } });
    const results = await Promise.allSettled([
      decideFromWorkbook(t.db, filled.bytes, { by: 'ana', mayApprove: false }),
      decideFromWorkbook(t.db, filled.bytes, { by: 'olga', mayApprove: false }),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
    const refused = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
    expect((refused.reason as BulkDecisionRefused).lines).toEqual([
      `Exceptions row ${filled.rows[id]}: exception ${id}: already resolved`,
    ]);
    const events = await t.db
      .selectFrom('exception_events')
      .select(['actor', 'to_state'])
      .where('exception_id', '=', id)
      .execute();
    expect(events).toHaveLength(1);
  });
});
