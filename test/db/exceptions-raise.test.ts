import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { raiseExceptions } from '../../src/db/exceptions/raise.ts';
import { applyObservations, recordIntents } from '../../src/db/ledger/service.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import { alertId, DEFAULT_EXCEPTION_RULES, EXCEPTION_RULE_TEXT } from '../../src/domain/exception-rules.ts';
import { intent, obs } from './fixtures.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});

const now = new Date(Date.UTC(2026, 10, 2, 12));

async function exceptionOf(type: string, entityId: string) {
  return t.db
    .selectFrom('exceptions')
    .selectAll()
    .where('type', '=', type)
    .where('entity_id', '=', entityId)
    .executeTakeFirstOrThrow();
}

async function alertsOf(entityId: string) {
  return t.db
    .selectFrom('outbox')
    .select(['alert_id', 'key', 'topic', 'payload'])
    .where('key', '=', `deposit:${entityId}`)
    .orderBy('id')
    .execute();
}

describe('raiseExceptions', () => {
  it("writes each raise's facts from the ledger, alerts what opened with the row's details, and counts a raise again", async () => {
    await withLedgerTransaction(t.db, (trx) =>
      applyObservations(trx, [
        obs('deposit', 'rx1', 'PENDING', 1, { amount: 12_345n }),
        obs('deposit', 'rx1', 'CANCELLED', 2, { amount: 12_345n, statusReason: 'THIRD_PARTY_PAYER' }),
      ]),
    );
    await withLedgerTransaction(t.db, (trx) => recordIntents(trx, [intent('deposit', 'rx1', 12_345n)]));
    const raised = await withLedgerTransaction(t.db, (trx) =>
      raiseExceptions(
        trx,
        [
          // Raised twice in one call: the later raise counts, once.
          { type: 'AMOUNT_MISMATCH', account: 'acme', kind: 'deposit', entityId: 'rx1', details: { n: 1 } },
          {
            type: 'UNKNOWN_TRANSACTION',
            account: 'acme',
            kind: 'deposit',
            entityId: 'rx1',
            details: { why: 'test' },
            facts: { intentAmount: '1.00', statusReason: undefined },
          },
          { type: 'AMOUNT_MISMATCH', account: 'acme', kind: 'deposit', entityId: 'rx1', details: { n: 2 } },
          // Below the alert severity: raised, not alerted.
          { type: 'PAYER_UNMATCH', account: 'acme', kind: 'deposit', entityId: 'rx1', details: {} },
        ],
        now,
      ),
    );
    expect(raised).toBe(3);
    const facts = {
      entity: 'deposit:rx1',
      externalRef: 'ref-rx1',
      intentAmount: '123.45',
      intentCurrency: 'BRL',
      providerAmount: '123.45',
      providerCurrency: 'BRL',
      status: 'CANCELLED',
      statusReason: 'THIRD_PARTY_PAYER',
      rejectionCode: null,
      rejectionReason: null,
    };
    const amount = await exceptionOf('AMOUNT_MISMATCH', 'rx1');
    expect(amount.details).toEqual({ n: 2, facts: { ...facts, rule: EXCEPTION_RULE_TEXT.AMOUNT_MISMATCH } });
    expect([amount.count, amount.fact]).toEqual([1, '{"n":2}']);
    const unknown = await exceptionOf('UNKNOWN_TRANSACTION', 'rx1');
    const { statusReason: _dropped, ...kept } = facts;
    expect(unknown.details).toEqual({
      why: 'test',
      facts: { ...kept, intentAmount: '1.00', rule: EXCEPTION_RULE_TEXT.UNKNOWN_TRANSACTION },
    });
    const alerts = await alertsOf('rx1');
    expect(DEFAULT_EXCEPTION_RULES.severity.PAYER_UNMATCH).not.toBe('high');
    // In the order of the exception keys; the payload as the relay publishes it.
    expect(alerts).toEqual(
      [amount, unknown].map((e) => {
        const id = alertId(e.type as 'AMOUNT_MISMATCH', 'deposit', 'acme', 'rx1', 1);
        return {
          alert_id: id,
          key: 'deposit:rx1',
          topic: 'recon.alert.raised.v1',
          payload: {
            alertId: id,
            type: e.type,
            severity: 'high',
            account: 'acme',
            kind: 'deposit',
            entityId: 'rx1',
            count: 1,
            raisedAt: now.toISOString(),
            details: e.details,
          },
        };
      }),
    );

    // Raised again while open: counted, its details (with the facts read now) rewritten, no alert.
    const later = new Date(now.getTime() + 60_000);
    expect(
      await withLedgerTransaction(t.db, (trx) =>
        raiseExceptions(
          trx,
          [{ type: 'AMOUNT_MISMATCH', account: 'acme', kind: 'deposit', entityId: 'rx1', details: { n: 3 } }],
          later,
        ),
      ),
    ).toBe(1);
    const again = await exceptionOf('AMOUNT_MISMATCH', 'rx1');
    expect([again.count, again.last_seen_at, again.fact]).toEqual([2, later, '{"n":3}']);
    expect(again.details).toEqual({ n: 3, facts: { ...facts, rule: EXCEPTION_RULE_TEXT.AMOUNT_MISMATCH } });
    expect(await alertsOf('rx1')).toHaveLength(2);
  });

  it('raises DUPLICATE_INVOICE and OVER_REFUNDED found in one batch, each with its details', async () => {
    await withLedgerTransaction(t.db, (trx) =>
      applyObservations(trx, [
        obs('deposit', 'xd1', 'COMPLETED', 1, { externalRef: 'inv-x', amount: 10_000n }),
        obs('deposit', 'xd2', 'PENDING', 1, { externalRef: 'inv-y' }),
      ]),
    );
    const result = await withLedgerTransaction(t.db, (trx) =>
      applyObservations(trx, [
        obs('deposit', 'xd3', 'PENDING', 2, { externalRef: 'inv-y' }),
        obs('deposit', 'xd4', 'PENDING', 2, { externalRef: 'inv-y' }),
        obs('refund', 'xr1', 'PENDING', 2, { parentDepositId: 'xd1', amount: 6_000n }),
        obs('refund', 'xr2', 'COMPLETED', 2, { parentDepositId: 'xd1', amount: 4_001n }),
      ]),
    );
    expect(result.exceptionsRaised).toBe(3);
    const dup3 = await exceptionOf('DUPLICATE_INVOICE', 'xd3');
    const dup4 = await exceptionOf('DUPLICATE_INVOICE', 'xd4');
    expect([dup3.details.invoiceId, dup3.details.otherDeposits]).toEqual(['inv-y', ['xd2', 'xd4']]);
    expect([dup4.details.invoiceId, dup4.details.otherDeposits]).toEqual(['inv-y', ['xd2', 'xd3']]);
    const over = await exceptionOf('OVER_REFUNDED', 'xd1');
    expect([over.details.depositAmount, over.details.refunded]).toEqual(['100.00', '100.01']);
    expect(
      await t.db.selectFrom('exceptions').select('type').where('entity_id', 'in', ['xd1', 'xd2']).execute(),
    ).toEqual([{ type: 'OVER_REFUNDED' }]);
  });

  it('writes awkward ids and details exactly as given (binary array parameters, trailing NULLs)', async () => {
    const awkward = 'x"1,{é 中}\\NULL';
    const details = { note: 'say "hi" \\ {x, y} \u{1F600}', list: [1, 'NULL', null] };
    const raised = await withLedgerTransaction(t.db, (trx) =>
      raiseExceptions(
        trx,
        [
          // With facts (an `extra` element), then one without: the columns after it end in NULLs.
          {
            type: 'UNKNOWN_TRANSACTION',
            account: 'acme',
            kind: 'deposit',
            entityId: awkward,
            details,
            facts: { intentAmount: '1.00', statusReason: undefined },
          },
          { type: 'PAYER_UNMATCH', account: 'acme', kind: 'deposit', entityId: awkward, details: {} },
        ],
        now,
      ),
    );
    expect(raised).toBe(2);
    const unknown = await exceptionOf('UNKNOWN_TRANSACTION', awkward);
    expect(unknown.details).toMatchObject({ ...details, facts: { intentAmount: '1.00' } });
    expect(unknown.details.facts).not.toHaveProperty('statusReason');
    const payer = await exceptionOf('PAYER_UNMATCH', awkward);
    expect([payer.entity_id, payer.fact, payer.severity]).toEqual([
      awkward,
      '{}',
      DEFAULT_EXCEPTION_RULES.severity.PAYER_UNMATCH,
    ]);
    expect(payer.details.facts).toMatchObject({ entity: `deposit:${awkward}` });
  });
});
