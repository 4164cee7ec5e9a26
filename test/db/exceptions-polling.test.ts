import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listQueue } from '../../src/db/exceptions/queue.ts';
import { changeQueueItem } from '../../src/db/exceptions/queue-service.ts';
import { sweepExceptions } from '../../src/db/exceptions/sweep.ts';
import { applyObservations, recordIntents } from '../../src/db/ledger/service.ts';
import { entitiesDueForPolling } from '../../src/db/polling/schedule.ts';
import { inFlight, movements } from '../../src/db/read-models/balances.ts';
import { claimRun, finishRun, lastSucceededStart } from '../../src/db/runs/job-runs.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import { DEFAULT_SLA_TABLE } from '../../src/domain/exception-sla.ts';
import type { Observation } from '../../src/domain/observation.ts';
import { intent, mirrorsWithPolls, obs } from './fixtures.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});

const apply = (o: Observation[]) => withLedgerTransaction(t.db, (trx) => applyObservations(trx, o));
const minute = (m: number) => new Date(Date.UTC(2026, 10, 1) + m * 60_000);

async function exceptionsOf(entityId: string) {
  return t.db
    .selectFrom('exceptions')
    .selectAll()
    .where('entity_id', '=', entityId)
    .orderBy('type')
    .execute();
}

describe('sweepExceptions', () => {
  it('raises STUCK once past the deadline; resolved, it stays resolved while the same status stays stuck', async () => {
    await apply([obs('cashout', 'stuck1', 'ON_HOLD', 0, { source: 'webhook' })]);
    await withLedgerTransaction(t.db, (trx) => recordIntents(trx, [intent('cashout', 'stuck1', 100n)]));
    const early = await sweepExceptions(t.db, minute(60));
    expect(early.stuck).toBe(0);
    const late = minute(3 * 24 * 60 + 1);
    expect((await sweepExceptions(t.db, late)).stuck).toBe(1);
    await sweepExceptions(t.db, late);
    let rows = (await exceptionsOf('stuck1')).filter((e) => e.type === 'STUCK');
    expect(rows.map((r) => [r.count, r.state])).toEqual([[1, 'open']]);
    expect(
      await changeQueueItem(
        t.db,
        rows[0]!.id,
        { kind: 'state', state: 'resolved', note: 'called the bank' },
        'ana',
        new Date(),
      ),
    ).toBe('changed');
    await sweepExceptions(t.db, late);
    rows = (await exceptionsOf('stuck1')).filter((e) => e.type === 'STUCK');
    expect(rows.map((r) => [r.count, r.state])).toEqual([[1, 'resolved']]);
    // A new fact: back to PENDING, then ON_HOLD again, and stuck again past the new deadline.
    await apply([
      obs('cashout', 'stuck1', 'PENDING', 3 * 24 * 60 + 2, { source: 'webhook' }),
      obs('cashout', 'stuck1', 'ON_HOLD', 3 * 24 * 60 + 3, { source: 'webhook' }),
    ]);
    await sweepExceptions(t.db, minute(6 * 24 * 60 + 4));
    rows = (await exceptionsOf('stuck1')).filter((e) => e.type === 'STUCK');
    expect(rows.map((r) => [r.count, r.state, r.resolution_note, r.resolved_by])).toEqual([
      [2, 'open', 'called the bank', 'ana'],
    ]);
    expect(rows[0]!.reopen_reason).toMatch(/^was: .*; now: /);
    expect(rows[0]!.previous).toMatchObject({ resolutionNote: 'called the bank', resolvedBy: 'ana' });
  });

  it('raises MISSED_NOTIFICATION for a change seen only by polling, after the grace', async () => {
    await apply([
      obs('deposit', 'poll1', 'PENDING', 0, { source: 'webhook' }),
      obs('deposit', 'poll1', 'COMPLETED', 5, { source: 'poll' }),
      obs('deposit', 'hook1', 'COMPLETED', 5, { source: 'webhook' }),
    ]);
    await sweepExceptions(t.db, new Date(Date.now() + 60_000));
    expect((await exceptionsOf('poll1')).map((e) => e.type)).not.toContain('MISSED_NOTIFICATION');
    await sweepExceptions(t.db, new Date(Date.now() + 31 * 60_000));
    expect((await exceptionsOf('poll1')).map((e) => e.type)).toContain('MISSED_NOTIFICATION');
    expect((await exceptionsOf('hook1')).map((e) => e.type)).not.toContain('MISSED_NOTIFICATION');
  });

  it('looks only at changes read by polling whose grace ended in the last day, not at every mirror', async () => {
    await apply([
      obs('deposit', 'poll2', 'PENDING', 0, { source: 'webhook' }),
      obs('deposit', 'poll2', 'COMPLETED', 5, { source: 'poll' }),
    ]);
    // Two days after its grace ended (no sweep ran meanwhile): out of the sweep's look-back.
    await sweepExceptions(t.db, new Date(Date.now() + 2 * 86_400_000));
    expect((await exceptionsOf('poll2')).map((e) => e.type)).not.toContain('MISSED_NOTIFICATION');
    // The first sweep after its grace raises it.
    await sweepExceptions(t.db, new Date(Date.now() + 31 * 60_000));
    expect((await exceptionsOf('poll2')).map((e) => e.type)).toContain('MISSED_NOTIFICATION');
  });

  it('reaches back to the last sweep that succeeded when it is older than a day', async () => {
    await apply([
      obs('deposit', 'poll3', 'PENDING', 0, { source: 'webhook' }),
      obs('deposit', 'poll3', 'COMPLETED', 5, { source: 'poll' }),
    ]);
    // Three days on, the last sweep that succeeded ran just before the change: the sweep raises it.
    await sweepExceptions(t.db, new Date(Date.now() + 3 * 86_400_000), undefined, {
      lastSweepAt: new Date(Date.now() - 60_000),
    });
    expect((await exceptionsOf('poll3')).map((e) => e.type)).toContain('MISSED_NOTIFICATION');
  });

  it('names the start of the last stuck sweep that succeeded', async () => {
    expect(await lastSucceededStart(t.db, 'stuck-sweep')).toBeNull();
    expect(await claimRun(t.db, 'stuck-sweep:2026-11-26T05:00', { job: 'stuck-sweep', owner: 'a' })).toBe(
      true,
    );
    await finishRun(t.db, 'stuck-sweep:2026-11-26T05:00', 'a', null);
    expect(await claimRun(t.db, 'stuck-sweep:2026-11-26T05:15', { job: 'stuck-sweep', owner: 'a' })).toBe(
      true,
    );
    await finishRun(t.db, 'stuck-sweep:2026-11-26T05:15', 'a', 'failed on purpose');
    const at = await lastSucceededStart(t.db, 'stuck-sweep');
    expect(at).toBeInstanceOf(Date);
    const { rows } = await sql<{ started_at: Date }>`
      SELECT started_at FROM job_runs WHERE run_key = 'stuck-sweep:2026-11-26T05:00'`.execute(t.db);
    expect(at!.getTime()).toBe(rows[0]!.started_at.getTime());
  });

  it('raises UNKNOWN_TRANSACTION for an observed entity with no intent after the grace', async () => {
    await apply([obs('deposit', 'unk1', 'PENDING', 0, { source: 'webhook' })]);
    await sweepExceptions(t.db, minute(10));
    expect((await exceptionsOf('unk1')).map((e) => e.type)).not.toContain('UNKNOWN_TRANSACTION');
    await sweepExceptions(t.db, minute(16));
    expect((await exceptionsOf('unk1')).map((e) => e.type)).toContain('UNKNOWN_TRANSACTION');
    // stuck1 has its intent.
    expect((await exceptionsOf('stuck1')).map((e) => e.type)).not.toContain('UNKNOWN_TRANSACTION');
    const open = await listQueue(
      t.db,
      { type: 'UNKNOWN_TRANSACTION' },
      minute(60),
      DEFAULT_SLA_TABLE,
      500,
      null,
    );
    expect(open.map((e) => e.entityId)).toContain('unk1');
  });

  it('raises immediate exceptions: amount mismatch, missing at provider, duplicate invoice, over-refund', async () => {
    await withLedgerTransaction(t.db, (trx) =>
      recordIntents(trx, [intent('deposit', 'mm1', 9_999n), intent('deposit', 'gone1', 100n)]),
    );
    await apply([
      obs('deposit', 'mm1', 'COMPLETED', 1),
      obs('deposit', 'gone1', null, 1),
      obs('deposit', 'dup1', 'PENDING', 1, { externalRef: 'inv-same' }),
    ]);
    await apply([obs('deposit', 'dup2', 'PENDING', 2, { externalRef: 'inv-same' })]);
    await apply([
      obs('refund', 'r1', 'PENDING', 3, { parentDepositId: 'mm1', amount: 6_000n }),
      obs('refund', 'r2', 'PENDING', 3, { parentDepositId: 'mm1', amount: 6_000n }),
    ]);
    expect((await exceptionsOf('mm1')).map((e) => e.type)).toEqual(['AMOUNT_MISMATCH', 'OVER_REFUNDED']);
    expect((await exceptionsOf('gone1')).map((e) => e.type)).toEqual(['MISSING_AT_PROVIDER']);
    expect((await exceptionsOf('dup2')).map((e) => e.type)).toEqual(['DUPLICATE_INVOICE']);
    const alerts = await t.db.selectFrom('outbox').select('alert_id').execute();
    expect(alerts.map((a) => a.alert_id)).toEqual(
      expect.arrayContaining(['AMOUNT_MISMATCH:deposit:acme:mm1:1', 'OVER_REFUNDED:deposit:acme:mm1:1']),
    );
    const refunds = await inFlight(t.db, 'acme');
    expect(refunds.filter((r) => r.kind === 'refund').map((r) => r.amount)).toEqual([6_000n, 6_000n]);
    const moved = await movements(
      t.db,
      new Date(Date.now() - 3_600_000),
      new Date(Date.now() + 3_600_000),
      'acme',
    );
    const reserve = moved.filter((m) => m.effect === 'reserve' && m.account === 'reserved');
    expect(reserve.reduce((s, m) => s + m.amount, 0n)).toBe(12_100n);
  });
});

describe('raiseExceptions', () => {
  const outboxOf = async (entityId: string) =>
    (await t.db.selectFrom('outbox').select('alert_id').orderBy('id').execute())
      .map((r) => r.alert_id)
      .filter((id) => id.includes(`:${entityId}:`) || id.endsWith(`:${entityId}`));

  it('alerts an exception when it opens, not again each time it is seen while open', async () => {
    await withLedgerTransaction(t.db, (trx) => recordIntents(trx, [intent('deposit', 'amm1', 10_000n)]));
    const cancelled = (at: number, source: 'webhook' | 'poll') =>
      obs('deposit', 'amm1', 'CANCELLED', at, { source, statusReason: 'AMOUNT_MISMATCH' });
    await apply([obs('deposit', 'amm1', 'PENDING', 0, { source: 'webhook' })]);
    // The webhook's CANCELLED, the poller's reading of it, and a duplicated webhook: three sightings.
    await apply([cancelled(1, 'webhook')]);
    await apply([cancelled(2, 'poll')]);
    await apply([cancelled(3, 'webhook')]);
    let row = (await exceptionsOf('amm1')).find((e) => e.type === 'PROVIDER_AMOUNT_MISMATCH')!;
    expect([row.count, row.state]).toEqual([3, 'open']);
    expect(await outboxOf('amm1')).toEqual(['PROVIDER_AMOUNT_MISMATCH:deposit:acme:amm1:1']);

    // Resolved, then the same fact seen again (re-polls, a backfill): it stays resolved, no new alert.
    expect(
      await changeQueueItem(
        t.db,
        row.id,
        { kind: 'state', state: 'resolved', note: 'customer paid the rest' },
        'ana',
        new Date(),
      ),
    ).toBe('changed');
    await apply([cancelled(4, 'poll')]);
    await apply([cancelled(5, 'backfill' as 'poll')]);
    row = (await exceptionsOf('amm1')).find((e) => e.type === 'PROVIDER_AMOUNT_MISMATCH')!;
    expect([row.state, row.resolution_note, row.resolved_by]).toEqual([
      'resolved',
      'customer paid the rest',
      'ana',
    ]);
    expect(await outboxOf('amm1')).toEqual(['PROVIDER_AMOUNT_MISMATCH:deposit:acme:amm1:1']);
    // The facts it carries: ids, intent and provider amounts, status and reason, the rule.
    expect(row.details).toMatchObject({
      facts: {
        entity: 'deposit:amm1',
        externalRef: 'ref-amm1',
        intentAmount: '100.00',
        intentCurrency: 'BRL',
        status: 'CANCELLED',
        statusReason: 'AMOUNT_MISMATCH',
        rule: expect.stringMatching(/paid a different amount/),
      },
    });
    // No intent-versus-provider mismatch where the amounts agree.
    expect((await exceptionsOf('amm1')).map((e) => e.type)).not.toContain('AMOUNT_MISMATCH');
  });

  it('reopens a resolved exception on a new fact only, saying what changed; note and resolver stay', async () => {
    await withLedgerTransaction(t.db, (trx) => recordIntents(trx, [intent('deposit', 'amm2', 10_000n)]));
    const pending = (at: number, amount: bigint) =>
      obs('deposit', 'amm2', 'PENDING', at, { source: 'poll', amount, currency: 'BRL' });
    await apply([pending(0, 9_000n)]);
    let row = (await exceptionsOf('amm2')).find((e) => e.type === 'AMOUNT_MISMATCH')!;
    expect(row.details).toMatchObject({ intent: '10000', provider: '9000' });
    expect(
      await changeQueueItem(
        t.db,
        row.id,
        { kind: 'state', state: 'resolved', note: 'provider confirmed a partial payment' },
        'bea',
        new Date(),
      ),
    ).toBe('changed');
    await apply([pending(1, 9_000n)]);
    row = (await exceptionsOf('amm2')).find((e) => e.type === 'AMOUNT_MISMATCH')!;
    expect(row.state).toBe('resolved');
    await apply([pending(2, 8_000n)]);
    row = (await exceptionsOf('amm2')).find((e) => e.type === 'AMOUNT_MISMATCH')!;
    expect([row.state, row.resolution_note, row.resolved_by]).toEqual([
      'open',
      'provider confirmed a partial payment',
      'bea',
    ]);
    expect(row.reopen_reason).toBe('was: intent 10000 provider 9000; now: intent 10000 provider 8000');
    expect(row.details).toMatchObject({ facts: { intentAmount: '100.00', providerAmount: '80.00' } });
    expect(await outboxOf('amm2')).toEqual([
      'AMOUNT_MISMATCH:deposit:acme:amm2:1',
      'AMOUNT_MISMATCH:deposit:acme:amm2:3',
    ]);
  });
});

describe('polling schedule', () => {
  it('backs off while unchanged, resets on a change, stops when final', async () => {
    await apply([obs('refund', 'p1', 'PENDING', 100)]);
    expect((await entitiesDueForPolling(t.db, minute(100), 100)).map((d) => d.entityId)).not.toContain('p1');
    const due = await entitiesDueForPolling(t.db, minute(101), 1000);
    expect(due.find((d) => d.entityId === 'p1')).toMatchObject({ nextPollAt: minute(101), pollAttempts: 0 });
    await apply([obs('refund', 'p1', 'PENDING', 101)]);
    await apply([obs('refund', 'p1', 'PENDING', 103)]);
    const p1 = () =>
      mirrorsWithPolls(t.db)
        .select('m.poll_attempts')
        .where('m.entity_id', '=', 'p1')
        .executeTakeFirstOrThrow();
    let m = await p1();
    expect([m.poll_attempts, m.next_poll_at]).toEqual([2, minute(107)]);
    await apply([obs('refund', 'p1', 'CANCELLED', 104)]);
    m = await p1();
    expect(m.next_poll_at).toBeNull();
  });

  it('schedules an intent-only entity from its creation', async () => {
    await withLedgerTransaction(t.db, (trx) => recordIntents(trx, [intent('cashout', 'new1', 50n)]));
    const due = await entitiesDueForPolling(t.db, minute(1), 1000);
    expect(due.find((d) => d.entityId === 'new1')).toMatchObject({ status: null, kind: 'cashout' });
  });
});
