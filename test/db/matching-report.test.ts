/**
 * The transactions report against the ledger: a row matches its payment by transaction id (a cashout
 * out and back: two rows, one match); a row whose payment the ledger lacks raises PROVIDER_REPORT_UNMATCHED
 * until the payment is known; a payment that moved the merchant's balance, first seen inside the report's
 * span, that no row names raises LEDGER_NOT_IN_REPORT (one that never moved it, or moved the test book,
 * has no row to have); an amount or a fee that differs, or a status neither leading to the ledger's nor
 * following from it (a report is a snapshot of its time), raises PROVIDER_REPORT_MISMATCH with both,
 * resolved once the ledger agrees.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordImport } from '../../src/db/imports/service.ts';
import type { TransactionRowRecord } from '../../src/db/imports/tables.ts';
import { runMatching } from '../../src/db/matching/service.ts';
import { DEFAULT_MATCH_RULES } from '../../src/domain/matching.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});

let entrySeq = 0;
/** An entry of the payment in the ledger's `book` (what matching asks: did it move the balance). */
async function booked(kind: string, id: string, book: 'live' | 'test' = 'live') {
  entrySeq++;
  await sql`
    INSERT INTO journal_entries (idempotency_key, merchant_account, entity_kind, entity_id, effect, direction, seq,
      book, currency, amount, effective_at)
    VALUES (${`${kind}:shop:${id}:credit:${entrySeq}`}, 'shop', ${kind}, ${id}, 'credit', 1, 1, ${book}, 'BRL', 1,
      now())`.execute(t.db);
}

const row = (
  identity: string,
  id: string,
  type: string,
  status: string,
  gross: string,
  fee: string,
  at: string,
): TransactionRowRecord => ({
  identity,
  content_hash: identity,
  transaction_id: id,
  type,
  status,
  external_id: null,
  invoice_id: null,
  currency: 'BRL',
  gross,
  fee,
  net: (Number(gross) - Number(fee)).toFixed(2),
  created_at: at,
  updated_at: at,
  settlement_id: 'S1',
});

async function mirror(
  kind: string,
  id: string,
  status: string,
  amount: string,
  fee: string | null,
  day: number,
) {
  await sql`
    INSERT INTO mirrors (merchant_account, entity_kind, entity_id, status, currency, amount, fee_amount, first_seen_at)
    VALUES ('shop', ${kind}, ${id}, ${status}, 'BRL', ${amount}::numeric, ${fee}::numeric,
      ${new Date(Date.UTC(2026, 2, day, 12))}::timestamptz)`.execute(t.db);
}

const open = async () =>
  (
    await t.db
      .selectFrom('exceptions')
      .select(['type', 'entity_kind', 'entity_id', 'details'])
      .where('state', '<>', 'resolved')
      .orderBy('type')
      .orderBy('entity_id')
      .execute()
  ).map((e) => [e.type, `${e.entity_kind}:${e.entity_id}`]);

describe('the transactions report against the ledger', () => {
  it('matches rows to payments and raises what differs or is missing on either side', async () => {
    await mirror('deposit', '1', 'COMPLETED', '100.00', '1.50', 3);
    await mirror('cashout', '2', 'REJECTED', '40.50', null, 4);
    await mirror('deposit', '3', 'DECLINED', '80.00', '1.20', 5);
    await mirror('deposit', '4', 'COMPLETED', '10.00', null, 6);
    await booked('deposit', '4');
    // Inside the span too, but never in a report: a deposit that never completed, a test deposit.
    await mirror('deposit', '6', 'EXPIRED', '12.00', null, 6);
    await mirror('deposit', '7', 'COMPLETED', '13.00', null, 6);
    await booked('deposit', '7', 'test');
    await recordImport(t.db, {
      kind: 'provider-transactions',
      fileName: 'transactions.csv',
      sha256: 'a'.repeat(64),
      profile: null,
      importedBy: 'test',
      rows: [
        row('r1', '1', 'deposit', 'COMPLETED', '100.00', '1.50', '2026-03-03T12:00:00Z'),
        row('r2a', '2', 'cashout', 'REJECTED', '-40.50', '0.00', '2026-03-04T12:00:00Z'),
        row('r2b', '2', 'cashout', 'REJECTED', '40.50', '0.00', '2026-03-06T12:00:00Z'),
        row('r3', '3', 'deposit', 'COMPLETED', '80.00', '1.20', '2026-03-05T12:00:00Z'),
        row('r5', '5', 'deposit', 'COMPLETED', '55.00', '0.80', '2026-03-07T12:00:00Z'),
      ],
    });
    const options = { now: new Date('2026-03-10T00:00:00Z'), reportAccount: 'shop' };
    const first = await runMatching(t.db, DEFAULT_MATCH_RULES, options);
    expect(first.byRule).toEqual({ 'transaction-id': 3 });
    expect(first.unmatched.reportRows).toBe(1);
    expect(await open()).toEqual([
      ['LEDGER_NOT_IN_REPORT', 'deposit:4'],
      ['PROVIDER_REPORT_MISMATCH', 'deposit:3'],
      ['PROVIDER_REPORT_UNMATCHED', 'deposit:5'],
    ]);
    const mismatch = await t.db
      .selectFrom('exceptions')
      .select('details')
      .where('type', '=', 'PROVIDER_REPORT_MISMATCH')
      .executeTakeFirstOrThrow();
    expect((mismatch.details as { differences: unknown }).differences).toEqual([
      { fact: 'status', report: 'COMPLETED', ledger: 'DECLINED' },
    ]);
    const cashout = await t.db
      .selectFrom('match_members')
      .select(['match_id', 'side', 'identity'])
      .where('identity', 'in', ['r2a', 'r2b', 'cashout:shop:2'])
      .execute();
    expect(new Set(cashout.map((m) => m.match_id)).size).toBe(1);
    expect(cashout).toHaveLength(3);

    // The payment becomes known: its row matches and its exception is resolved; a re-run adds nothing.
    await mirror('deposit', '5', 'COMPLETED', '55.00', '0.80', 7);
    const second = await runMatching(t.db, DEFAULT_MATCH_RULES, options);
    expect(second.byRule).toEqual({ 'transaction-id': 1 });
    expect(second.exceptions.resolved).toBe(1);
    expect(await open()).toEqual([
      ['LEDGER_NOT_IN_REPORT', 'deposit:4'],
      ['PROVIDER_REPORT_MISMATCH', 'deposit:3'],
    ]);
    const third = await runMatching(t.db, DEFAULT_MATCH_RULES, options);
    expect(third.byRule).toEqual({});
    expect(third.exceptions.resolved).toBe(0);
  });
  it("compares a row's status as a snapshot, and resolves a difference once the ledger agrees", async () => {
    // The report was made while the cashout was PENDING; the ledger has read DELIVERED since.
    await mirror('cashout', '10', 'DELIVERED', '20.00', null, 8);
    // The report was made after the deposit completed; the ledger has not read COMPLETED yet.
    await mirror('deposit', '11', 'PENDING', '30.00', '0.45', 8);
    // The ledger holds the merchant's amount until it reads the provider's.
    await mirror('deposit', '12', 'COMPLETED', '40.00', '0.60', 8);
    await recordImport(t.db, {
      kind: 'provider-transactions',
      fileName: 'later.csv',
      sha256: 'b'.repeat(64),
      profile: null,
      importedBy: 'test',
      rows: [
        row('r10', '10', 'cashout', 'PENDING', '-20.00', '0.00', '2026-03-08T12:00:00Z'),
        row('r11', '11', 'deposit', 'COMPLETED', '30.00', '0.45', '2026-03-08T13:00:00Z'),
        row('r12', '12', 'deposit', 'COMPLETED', '40.40', '0.60', '2026-03-08T14:00:00Z'),
      ],
    });
    const options = { now: new Date('2026-03-10T00:00:00Z'), reportAccount: 'shop' };
    const run = await runMatching(t.db, DEFAULT_MATCH_RULES, options);
    expect(run.byRule).toEqual({ 'transaction-id': 3 });
    const mismatches = async () =>
      (await open()).filter(([type]) => type === 'PROVIDER_REPORT_MISMATCH').map(([, entity]) => entity);
    expect(await mismatches()).toEqual(['deposit:12', 'deposit:3']);

    // The ledger reads the provider's amount: the next run resolves that difference, not the other.
    await sql`UPDATE mirrors SET amount = 40.40 WHERE entity_kind = 'deposit' AND entity_id = '12'`.execute(
      t.db,
    );
    const again = await runMatching(t.db, DEFAULT_MATCH_RULES, options);
    expect(again.byRule).toEqual({});
    expect(again.exceptions.resolved).toBe(1);
    expect(await mismatches()).toEqual(['deposit:3']);
    const resolved = await t.db
      .selectFrom('exceptions')
      .select(['resolved_by', 'resolution_note'])
      .where('type', '=', 'PROVIDER_REPORT_MISMATCH')
      .where('entity_id', '=', '12')
      .executeTakeFirstOrThrow();
    expect(resolved).toEqual({
      resolved_by: 'payrecon',
      resolution_note: 'agreed: the ledger now holds the payment as the report gives it',
    });
  });
});
