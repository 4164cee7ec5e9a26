import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { arrayLiteral } from '../../bench/array-literal.ts';
import { applyObservations, recordIntents } from '../../src/db/ledger/service.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { balances } from '../../src/db/read-models/balances.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import type { Observation } from '../../src/domain/observation.ts';
import { intent, obs } from './fixtures.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});

const apply = (o: Observation[]) => withLedgerTransaction(t.db, (trx) => applyObservations(trx, o));

async function balanceOf(account: string, name: string, currency = 'BRL'): Promise<bigint> {
  const rows = await balances(t.db, { merchantAccount: account });
  return rows.find((r) => r.account === name && r.currency === currency)?.balance ?? 0n;
}

async function expectVerified() {
  const v = await verifyLedger(t.db);
  expect(v.failures).toEqual([]);
}

describe('applyObservations', () => {
  it('credits a completed deposit with its fee, once however often replayed', async () => {
    const batch = [
      obs('deposit', 'd1', 'PENDING', 1),
      obs('deposit', 'd1', 'COMPLETED', 2, { feeAmount: 300n, feeCurrency: 'BRL' }),
    ];
    const first = await apply(batch);
    expect(first.entriesBooked).toBe(2);
    const again = await apply(batch);
    expect(again.entriesBooked).toBe(0);
    expect(again.recorded).toBe(0);
    expect(await balanceOf('acme', 'available')).toBe(9_700n);
    expect(await balanceOf('acme', 'deposits')).toBe(-10_000n);
    expect(await balanceOf('acme', 'fees')).toBe(300n);
    await expectVerified();
  });

  it('waits for the intent before reserving a cashout, then converges on a late rejection', async () => {
    const r = await apply([obs('cashout', 'c1', 'PENDING', 1, { source: 'webhook' })]);
    expect(r.waiting).toBe(1);
    expect(r.entriesBooked).toBe(0);
    await withLedgerTransaction(t.db, (trx) => recordIntents(trx, [intent('cashout', 'c1', 5_000n)]));
    expect(await balanceOf('acme', 'reserved')).toBe(5_000n);
    // REJECTED seen first: reserve + release.
    await apply([obs('cashout', 'c1', 'REJECTED', 10)]);
    expect(await balanceOf('acme', 'reserved')).toBe(0n);
    // A stale COMPLETED arrives: it is now the late-rejection case; release is reversed.
    await apply([obs('cashout', 'c1', 'COMPLETED', 5)]);
    expect(await balanceOf('acme', 'payouts')).toBe(0n);
    expect(await balanceOf('acme', 'reserved')).toBe(0n);
    const entries = await t.db
      .selectFrom('journal_entries')
      .select(['idempotency_key'])
      .where('entity_id', '=', 'c1')
      .orderBy('id')
      .execute();
    expect(entries.map((e) => e.idempotency_key)).toEqual([
      'cashout:acme:c1:reserve',
      'cashout:acme:c1:release',
      'cashout:acme:c1:release:reversal:1',
      'cashout:acme:c1:settle',
      'cashout:acme:c1:late_reversal',
    ]);
    const ex = await t.db.selectFrom('exceptions').selectAll().where('entity_id', '=', 'c1').execute();
    expect(ex.map((e) => e.type)).toEqual(['LATE_REJECTION']);
    const alerts = await t.db
      .selectFrom('outbox')
      .select('alert_id')
      .where('key', '=', 'cashout:c1')
      .execute();
    expect(alerts.map((a) => a.alert_id)).toEqual(['LATE_REJECTION:cashout:acme:c1']);
    const hist = await t.db
      .selectFrom('status_history')
      .select(['to_status', 'stale', 'illegal'])
      .where('entity_id', '=', 'c1')
      .orderBy('id')
      .execute();
    expect(hist.at(-1)).toEqual({ to_status: 'COMPLETED', stale: true, illegal: false });
    await expectVerified();
  });

  it('records an illegal move without applying it, and raises ILLEGAL_TRANSITION', async () => {
    await apply([obs('deposit', 'd2', 'COMPLETED', 1), obs('deposit', 'd2', 'PENDING', 2)]);
    const m = await t.db
      .selectFrom('mirrors')
      .selectAll()
      .where('entity_id', '=', 'd2')
      .executeTakeFirstOrThrow();
    expect(m.status).toBe('COMPLETED');
    const ex = await t.db.selectFrom('exceptions').selectAll().where('entity_id', '=', 'd2').execute();
    expect(ex.map((e) => [e.type, e.count])).toContainEqual(['ILLEGAL_TRANSITION', 1]);
    await expectVerified();
  });

  it('keeps test deposits in the test book and crypto deposits away from available', async () => {
    const before = await balanceOf('acme', 'available');
    await apply([
      obs('deposit', 'dt', 'COMPLETED', 1, { test: true, feeAmount: 100n, feeCurrency: 'BRL' }),
      obs('deposit', 'dc', 'APPROVED', 1, { crypto: true }),
      obs('deposit', 'dc', 'COMPLETED', 2, { crypto: true }),
    ]);
    expect(await balanceOf('acme', 'available')).toBe(before);
    expect(await balanceOf('acme', 'test_available')).toBe(9_900n);
    expect(await balanceOf('acme', 'crypto_customer_wallets')).toBe(10_000n);
    expect(await balanceOf('acme', 'crypto_in_transit')).toBe(0n);
    await expectVerified();
  });

  it('books a refund of a test deposit in the test book, live money untouched', async () => {
    const live = await balanceOf('acme', 'available');
    const refunds = await balanceOf('acme', 'refunds');
    await apply([obs('deposit', 'dtr', 'COMPLETED', 1, { test: true })]);
    const testAvailable = await balanceOf('acme', 'test_available');
    const refund = { parentDepositId: 'dtr', amount: 4_000n };
    await apply([obs('refund', 'rt1', 'PENDING', 2, refund)]);
    expect(await balanceOf('acme', 'test_reserved')).toBe(4_000n);
    await expectVerified();
    await apply([obs('refund', 'rt1', 'COMPLETED', 3, refund)]);
    expect(await balanceOf('acme', 'test_available')).toBe(testAvailable - 4_000n);
    expect(await balanceOf('acme', 'test_refunds')).toBe(4_000n);
    expect(await balanceOf('acme', 'test_reserved')).toBe(0n);
    await apply([obs('refund', 'rt1', 'REJECTED', 4, refund)]);
    expect(await balanceOf('acme', 'test_available')).toBe(testAvailable);
    expect(await balanceOf('acme', 'available')).toBe(live);
    expect(await balanceOf('acme', 'refunds')).toBe(refunds);
    await expectVerified();
  });

  it('moves a refund booked live to the test book once its deposit is known as test', async () => {
    const live = await balanceOf('acme', 'available');
    const refund = { parentDepositId: 'dlate', amount: 2_500n };
    // The refund arrives before anything about its deposit: booked live.
    await apply([obs('refund', 'rt2', 'PENDING', 1, refund)]);
    expect(await balanceOf('acme', 'available')).toBe(live - 2_500n);
    await apply([obs('deposit', 'dlate', 'COMPLETED', 2, { test: true })]);
    // Verification names the refund booked in the wrong book.
    expect((await verifyLedger(t.db)).failures.join('\n')).toMatch(
      /test book mixed with others.*refund:acme:rt2/s,
    );
    // The refund's next reading moves it: live reserve reversed, test reserve posted.
    await apply([obs('refund', 'rt2', 'COMPLETED', 3, refund)]);
    expect(await balanceOf('acme', 'available')).toBe(live);
    expect(await balanceOf('acme', 'test_refunds')).toBeGreaterThanOrEqual(2_500n);
    await expectVerified();
  });

  it('reverses an early-released deposit that is then cancelled, and alerts once', async () => {
    await apply([obs('deposit', 'de', 'EARLY_RELEASED', 1, { feeAmount: 200n, feeCurrency: 'BRL' })]);
    const credited = await balanceOf('acme', 'available');
    await apply([obs('deposit', 'de', 'CANCELLED', 2, { feeAmount: 200n, feeCurrency: 'BRL' })]);
    expect(await balanceOf('acme', 'available')).toBe(credited - 9_800n);
    const ex = await t.db.selectFrom('exceptions').select('type').where('entity_id', '=', 'de').execute();
    expect(ex.map((e) => e.type)).toEqual(['EARLY_RELEASE_REVERSED']);
    await expectVerified();
  });

  it('writes awkward text, big amounts and instants exactly as given (array parameters)', async () => {
    const awkward = ['a"b', 'back\\slash', 'c,d', '{e}', 'NULL', '', ' sp ', 'é 中 \u{1F600}', 'q\\"x'];
    const { rows } = await sql<{
      v: string | null;
    }>`SELECT unnest(${arrayLiteral([...awkward, null])}::text[]) AS v`.execute(t.db);
    expect(rows.map((r) => r.v)).toEqual([...awkward, null]);

    const at = new Date(Date.UTC(2026, 10, 1, 12, 34, 56, 789));
    const big = 999_999_999_999_999_999_99n;
    const details = { note: 'say "hi" \\ {x, y}', nested: { list: [1, 'NULL', null] } };
    await apply([
      obs('deposit', 'dq"1', 'COMPLETED', 1, {
        eventId: 'ev,{"awkward"}\\1',
        externalRef: 'inv "7", {8}',
        amount: big,
        feeAmount: 1n,
        feeCurrency: 'BRL',
        statusReason: 'NULL',
        rejectionReason: '',
        payerVerification: 'é 中',
        observedAt: at,
        details,
      }),
    ]);
    const h = await t.db
      .selectFrom('status_history')
      .select([
        'event_id',
        'external_ref',
        'amount',
        'fee_amount',
        'status_reason',
        'rejection_reason',
        'payer_verification',
        'observed_at',
        'details',
      ])
      .where('entity_id', '=', 'dq"1')
      .executeTakeFirstOrThrow();
    expect(h).toEqual({
      event_id: 'ev,{"awkward"}\\1',
      external_ref: 'inv "7", {8}',
      amount: '999999999999999999.99',
      fee_amount: '0.01',
      status_reason: 'NULL',
      rejection_reason: '',
      payer_verification: 'é 中',
      observed_at: at,
      details,
    });
    const m = await t.db
      .selectFrom('mirrors')
      .select(['external_ref', 'amount', 'status_reason', 'status_since', 'details'])
      .where('entity_id', '=', 'dq"1')
      .executeTakeFirstOrThrow();
    expect(m).toEqual({
      external_ref: 'inv "7", {8}',
      amount: '999999999999999999.99',
      status_reason: 'NULL',
      status_since: at,
      details,
    });
    const e = await t.db
      .selectFrom('journal_entries')
      .select(['idempotency_key', 'amount', 'effective_at'])
      .where('entity_id', '=', 'dq"1')
      .orderBy('id')
      .execute();
    expect(e).toEqual([
      { idempotency_key: 'deposit:acme:dq"1:credit', amount: '999999999999999999.99', effective_at: at },
      { idempotency_key: 'deposit:acme:dq"1:fee', amount: '0.01', effective_at: at },
    ]);
    expect(await balanceOf('acme', 'deposits')).toBeLessThanOrEqual(-big);
    await expectVerified();
  });
});
