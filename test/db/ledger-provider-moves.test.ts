/**
 * The ledger follows the provider: the provider's documented late moves are
 * legal and booked (late completion of an expired or cancelled deposit, EXPIRED to CANCELLED, a late
 * rejection with code 826), and facts that cannot change freeze the entity with FACTS_CHANGED while every
 * invariant stays true.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyObservations, recordIntents } from '../../src/db/ledger/service.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { balances } from '../../src/db/read-models/balances.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import type { Observation } from '../../src/domain/observation.ts';
import type { EntityKind } from '../../src/domain/statuses.ts';
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

/** An observation in its own merchant account, so each case's balances stand alone. */
const at = (
  account: string,
  kind: EntityKind,
  id: string,
  status: string | null,
  minute: number,
  extra = {},
) => ({ ...obs(kind, id, status, minute, extra), account }) as Observation;

async function balanceMap(account: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const r of await balances(t.db, { merchantAccount: account })) {
    if (r.balance !== 0n) out[`${r.book}/${r.account}/${r.currency}`] = r.balance.toString();
  }
  return out;
}

async function exceptionsOf(account: string) {
  return t.db
    .selectFrom('exceptions')
    .selectAll()
    .where('merchant_account', '=', account)
    .orderBy('type')
    .execute();
}

async function expectVerified() {
  const v = await verifyLedger(t.db);
  expect(v.failures).toEqual([]);
}

describe("the provider's documented moves", () => {
  it.each(['EXPIRED', 'CANCELLED'])(
    'books a late completion of a %s deposit as a credit and raises LATE_COMPLETION',
    async (failed) => {
      const a = `late-${failed}`;
      await apply([at(a, 'deposit', 'd1', 'PENDING', 1), at(a, 'deposit', 'd1', failed, 2)]);
      expect(await balanceMap(a)).toEqual({});
      await apply([at(a, 'deposit', 'd1', 'COMPLETED', 3, { source: 'webhook' })]);
      expect(await balanceMap(a)).toEqual({ 'live/available/BRL': '10000', 'live/deposits/BRL': '-10000' });
      const ex = await exceptionsOf(a);
      expect(ex.map((e) => [e.type, e.severity])).toEqual([['LATE_COMPLETION', 'high']]);
      expect(ex[0]!.details).toMatchObject({
        from: failed,
        facts: { entity: 'deposit:d1', status: 'COMPLETED', rule: expect.stringMatching(/completed after/) },
      });
      const history = await t.db
        .selectFrom('status_history')
        .select(['to_status', 'illegal'])
        .where('merchant_account', '=', a)
        .orderBy('observed_at')
        .execute();
      expect(history.map((h) => h.illegal)).toEqual([false, false, false]);
      // Its alert carries the amount it is about.
      const alert = await t.db
        .selectFrom('outbox')
        .select('payload')
        .where('alert_id', 'like', `%:${a}:%`)
        .execute();
      expect(alert[0]?.payload).toMatchObject({
        details: { facts: { providerAmount: '100.00', providerCurrency: 'BRL' } },
      });
      await expectVerified();
    },
  );

  it('takes EXPIRED to CANCELLED seven days later as a legal move, no exception', async () => {
    const a = 'expired-cancelled';
    await apply([at(a, 'deposit', 'd2', 'PENDING', 0), at(a, 'deposit', 'd2', 'EXPIRED', 12 * 60)]);
    await apply([at(a, 'deposit', 'd2', 'CANCELLED', 12 * 60 + 7 * 24 * 60)]);
    expect((await exceptionsOf(a)).map((e) => e.type)).toEqual([]);
    const m = await t.db
      .selectFrom('mirrors')
      .select('status')
      .where('merchant_account', '=', a)
      .executeTakeFirstOrThrow();
    expect(m.status).toBe('CANCELLED');
    await expectVerified();
  });

  it('reverses a completed cashout rejected later with code 826 and says so in the exception', async () => {
    const a = 'late-826';
    await withLedgerTransaction(t.db, (trx) =>
      recordIntents(trx, [{ ...intent('cashout', 'c1', 5_000n), account: a, intentId: `${a}-c1` }]),
    );
    await apply([at(a, 'cashout', 'c1', 'PENDING', 1), at(a, 'cashout', 'c1', 'COMPLETED', 2)]);
    expect(await balanceMap(a)).toEqual({ 'live/available/BRL': '-5000', 'live/payouts/BRL': '5000' });
    await apply([
      at(a, 'cashout', 'c1', 'REJECTED', 3 * 24 * 60, {
        rejectionCode: '826',
        rejectionReason: 'Withdrawal reversed',
      }),
    ]);
    expect(await balanceMap(a)).toEqual({});
    const ex = (await exceptionsOf(a)).find((e) => e.type === 'LATE_REJECTION')!;
    expect(ex.details).toMatchObject({
      facts: {
        entity: 'cashout:c1',
        intentAmount: '50.00',
        intentCurrency: 'BRL',
        status: 'REJECTED',
        rejectionCode: '826',
        rejectionReason: 'Withdrawal reversed',
      },
    });
    const alert = await t.db
      .selectFrom('outbox')
      .select('payload')
      .where('alert_id', 'like', `LATE_REJECTION:%:${a}:%`)
      .execute();
    expect(alert[0]?.payload).toMatchObject({ details: { facts: { intentAmount: '50.00' } } });
    await expectVerified();
  });

  it('keeps an undocumented move (COMPLETED back to PENDING) illegal and unapplied', async () => {
    const a = 'undocumented';
    await apply([at(a, 'deposit', 'd3', 'COMPLETED', 1)]);
    const before = await balanceMap(a);
    await apply([at(a, 'deposit', 'd3', 'PENDING', 2)]);
    expect(await balanceMap(a)).toEqual(before);
    expect((await exceptionsOf(a)).map((e) => [e.type, e.fact])).toEqual([
      ['ILLEGAL_TRANSITION', 'COMPLETED->PENDING'],
    ]);
    await expectVerified();
  });
});

describe('facts that cannot change', () => {
  it.each([
    ['test flag', 'deposit', { test: true }, 'test'],
    ['crypto flag', 'deposit', { crypto: true }, 'crypto'],
    ['currency', 'deposit', { currency: 'USD' }, 'currency'],
    ['amount of a completed deposit', 'deposit', { amount: 12_345n }, 'amount'],
    ['currency of a refund', 'refund', { currency: 'USD' }, 'currency'],
  ] as const)(
    '%s: keeps the last consistent bookings, raises FACTS_CHANGED with both versions',
    async (name, kind, change, fact) => {
      const a = `fc-${name.replaceAll(' ', '-')}`;
      const first = kind === 'deposit' ? 'COMPLETED' : 'PENDING';
      await apply([at(a, kind, 'e1', first, 1, { feeAmount: 100n, feeCurrency: 'BRL' })]);
      const booked = await balanceMap(a);
      expect(Object.keys(booked).length).toBeGreaterThan(0);
      const mirrorBefore = await t.db
        .selectFrom('mirrors')
        .selectAll()
        .where('merchant_account', '=', a)
        .executeTakeFirstOrThrow();
      const result = await apply([at(a, kind, 'e1', 'COMPLETED', 2, { ...change })]);
      expect(result.entriesBooked).toBe(0);
      expect(await balanceMap(a)).toEqual(booked);
      const ex = await exceptionsOf(a);
      expect(ex.map((e) => [e.type, e.severity])).toEqual([['FACTS_CHANGED', 'critical']]);
      expect(ex[0]!.details).toMatchObject({
        changes: [{ fact, before: { eventId: expect.any(String) }, after: { eventId: expect.any(String) } }],
      });
      const m = await mirrorsWithPolls(t.db)
        .selectAll('m')
        .where('m.merchant_account', '=', a)
        .executeTakeFirstOrThrow();
      expect([m.status, m.test, m.crypto, m.currency, m.amount]).toEqual([
        mirrorBefore.status,
        mirrorBefore.test,
        mirrorBefore.crypto,
        mirrorBefore.currency,
        mirrorBefore.amount,
      ]);
      expect(m.next_poll_at).toBeNull();
      // Later readings, even consistent with either version, book nothing; verification stays clean.
      await apply([at(a, kind, 'e1', 'COMPLETED', 3)]);
      expect(await balanceMap(a)).toEqual(booked);
      await expectVerified();
    },
  );

  it("a refund's deposit changing freezes the refund", async () => {
    const a = 'fc-parent';
    await apply([at(a, 'refund', 'r1', 'PENDING', 1, { parentDepositId: 'd1' })]);
    await withLedgerTransaction(t.db, (trx) =>
      recordIntents(trx, [{ ...intent('refund', 'r1', 10_000n), account: a, intentId: `${a}-r1` }]),
    );
    const booked = await balanceMap(a);
    await apply([at(a, 'refund', 'r1', 'COMPLETED', 2, { parentDepositId: 'd2' })]);
    expect(await balanceMap(a)).toEqual(booked);
    expect((await exceptionsOf(a)).map((e) => e.type)).toContain('FACTS_CHANGED');
    await expectVerified();
  });
});
