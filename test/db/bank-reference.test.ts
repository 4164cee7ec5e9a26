/**
 * The provider's bank reference of a cashout: kept on the mirror from the reading that
 * names it, not lost when a later reading names none, found by `lookupPayments` as its own id kind and
 * among "any id", shown by `getPayment`.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyObservations, recordIntents } from '../../src/db/ledger/service.ts';
import { getPayment, lookupPayments } from '../../src/db/read-models/payments.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import { intent, obs } from './fixtures.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

let t: TestDatabase;

beforeAll(async () => {
  t = await createTestDatabase();
  await withLedgerTransaction(t.db, (trx) =>
    recordIntents(trx, [intent('cashout', '7001', 30_000n), intent('cashout', '7002', 5_000n)]),
  );
  // Each reading in its own batch, in order: the reference appears at DELIVERED only.
  for (const o of [
    obs('cashout', '7001', 'PENDING', 1),
    obs('cashout', '7001', 'DELIVERED', 2, { bankReference: 'E1234ABCD7001' }),
    obs('cashout', '7001', 'COMPLETED', 3),
    obs('cashout', '7002', 'PENDING', 4),
  ]) {
    await withLedgerTransaction(t.db, (trx) => applyObservations(trx, [o]));
  }
});

afterAll(async () => {
  await t?.drop();
});

const mirrorRef = async (id: string) =>
  (
    await t.db
      .selectFrom('mirrors')
      .select('bank_reference')
      .where('entity_kind', '=', 'cashout')
      .where('entity_id', '=', id)
      .executeTakeFirstOrThrow()
  ).bank_reference;

describe('bank reference', () => {
  it('is kept on the mirror after a later reading that names none', async () => {
    expect(await mirrorRef('7001')).toBe('E1234ABCD7001');
    expect(await mirrorRef('7002')).toBeNull();
  });

  it('finds the cashout by its bank reference, as its own id kind and as any id', async () => {
    for (const kind of ['bank_reference', undefined] as const) {
      const rows = await lookupPayments(t.db, 'E1234ABCD7001', kind);
      expect(
        rows.map((r) => [r.kind, r.entityId, r.bankReference]),
        String(kind),
      ).toEqual([['cashout', '7001', 'E1234ABCD7001']]);
    }
    expect(await lookupPayments(t.db, 'ref-7001', 'bank_reference')).toEqual([]);
    expect(await lookupPayments(t.db, 'E1234ABCD7001', 'external_id')).toEqual([]);
    const detail = await getPayment(t.db, 'acme', 'cashout', '7001');
    expect(detail?.payment.bankReference).toBe('E1234ABCD7001');
    expect(detail?.payment.status).toBe('COMPLETED');
  });

  it('the look-up by bank reference uses its index', async () => {
    await sql`ANALYZE mirrors`.execute(t.db);
    const plan = await t.db.transaction().execute(async (trx) => {
      // Four rows: without this the planner rightly prefers a sequential scan.
      await sql`SET LOCAL enable_seqscan = off`.execute(trx);
      const { rows } = await sql<{ 'QUERY PLAN': string }>`
        EXPLAIN SELECT entity_id FROM mirrors WHERE bank_reference = ${'E1234ABCD7001'}`.execute(trx);
      return rows.map((r) => r['QUERY PLAN']).join('\n');
    });
    expect(plan).toContain('mirrors_bank_reference_ix');
  });
});
