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
    INSERT INTO mirrors (merchant_account, entity_kind, entity_id, status, currency, amount, fee_amount, first_seen_at,
      ever_completed)
    VALUES ('shop', ${kind}, ${id}, ${status}, 'BRL', ${amount}::numeric, ${fee}::numeric,
      ${new Date(Date.UTC(2026, 2, day, 12))}::timestamptz, ${status === 'COMPLETED'})`.execute(t.db);
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

  it('lets rows that differ wait for the ledger; a status the ledger can still reach or has moved on from is no difference', async () => {
    const w = await createTestDatabase();
    try {
      const insertMirror = (kind: string, id: string, status: string) =>
        sql`INSERT INTO mirrors (merchant_account, entity_kind, entity_id, status, currency, amount, fee_amount, first_seen_at)
          VALUES ('shop', ${kind}, ${id}, ${status}, 'BRL', 20.00, NULL, ${new Date('2026-03-01T00:00:00Z')}::timestamptz)`.execute(
          w.db,
        );
      const history = (id: string, from: string | null, to: string) =>
        sql`INSERT INTO status_history (event_id, merchant_account, entity_kind, entity_id, from_status, to_status, source, observed_at)
          VALUES (${`e-${id}-${to}`}, 'shop', 'deposit', ${id}, ${from}, ${to}, 'webhook', now())`.execute(
          w.db,
        );
      // The ledger lags: PENDING while the report says COMPLETED; deposit 7 it does not hold yet.
      await insertMirror('deposit', '6', 'PENDING');
      await history('6', null, 'PENDING');
      // The ledger moved on after the report was read: it held PENDING, now COMPLETED.
      await insertMirror('deposit', '8', 'COMPLETED');
      await history('8', null, 'PENDING');
      await history('8', 'PENDING', 'COMPLETED');
      // Moved on through moves the ledger did not all see: it never held PENDING, but COMPLETED follows it.
      await insertMirror('deposit', '11', 'COMPLETED');
      await recordImport(w.db, {
        kind: 'provider-transactions',
        fileName: 'now.csv',
        sha256: 'b'.repeat(64),
        profile: null,
        importedBy: 'test',
        rows: [
          row('r6', '6', 'deposit', 'COMPLETED', '20.00', '0.00', '2026-03-02T12:00:00Z'),
          row('r7', '7', 'deposit', 'COMPLETED', '20.00', '0.00', '2026-03-02T12:00:00Z'),
          row('r8', '8', 'deposit', 'PENDING', '20.00', '0.00', '2026-03-02T12:00:00Z'),
          row('r11', '11', 'deposit', 'PENDING', '20.00', '0.00', '2026-03-02T12:00:00Z'),
        ],
      });
      const waitMs = 60_000;
      const openOf = async () =>
        (
          await w.db
            .selectFrom('exceptions')
            .select(['type', 'entity_id'])
            .where('state', '<>', 'resolved')
            .orderBy('entity_id')
            .execute()
        ).map((e) => `${e.type} ${e.entity_id}`);
      const run = (now: Date) =>
        runMatching(w.db, DEFAULT_MATCH_RULES, { now, reportAccount: 'shop', ledgerWaitMs: waitMs });
      // Just imported: 6, 8 and 11 match (a report is a snapshot: the ledger may lag it or have moved on);
      // 7, which the ledger does not hold yet, waits, raising nothing.
      const first = await run(new Date());
      expect(first.byRule).toEqual({ 'transaction-id': 3 });
      expect(await openOf()).toEqual([]);
      // The ledger learns of 7 within the wait: it matches, nothing raised.
      await insertMirror('deposit', '7', 'COMPLETED');
      const second = await run(new Date());
      expect(second.byRule).toEqual({ 'transaction-id': 1 });
      expect(await openOf()).toEqual([]);

      // A difference that outlives the wait raises.
      await insertMirror('deposit', '9', 'PENDING');
      await recordImport(w.db, {
        kind: 'provider-transactions',
        fileName: 'later.csv',
        sha256: 'c'.repeat(64),
        profile: null,
        importedBy: 'test',
        rows: [
          row('r9', '9', 'deposit', 'PENDING', '25.00', '0.00', '2026-03-03T12:00:00Z'),
          row('r10', '10', 'deposit', 'COMPLETED', '20.00', '0.00', '2026-03-03T12:00:00Z'),
        ],
      });
      expect((await run(new Date())).byRule).toEqual({});
      expect(await openOf()).toEqual([]);
      const late = await run(new Date(Date.now() + waitMs + 1_000));
      expect(late.byRule).toEqual({ 'transaction-id': 1 });
      expect(await openOf()).toEqual(['PROVIDER_REPORT_UNMATCHED 10', 'PROVIDER_REPORT_MISMATCH 9']);
    } finally {
      await w.drop();
    }
  });

  it('expects in the report only payments that moved money, seen before the report was imported', async () => {
    const w = await createTestDatabase();
    try {
      const day = 86_400_000;
      const insert = async (
        id: string,
        status: string,
        seen: Date,
        flags: { completed?: boolean; test?: boolean },
      ) => {
        await sql`INSERT INTO mirrors (merchant_account, entity_kind, entity_id, status, currency, amount, first_seen_at,
            ever_completed, test)
          VALUES ('shop', 'deposit', ${id}, ${status}, 'BRL', 10.00, ${seen}::timestamptz,
            ${flags.completed ?? false}, ${flags.test ?? false})`.execute(w.db);
        // A completed deposit moved money: its credit is booked (in the test book for a test deposit).
        if (flags.completed) {
          await sql`INSERT INTO journal_entries (idempotency_key, merchant_account, entity_kind, entity_id, effect,
              direction, seq, book, currency, amount, effective_at)
            VALUES (${`deposit:shop:${id}:credit:1`}, 'shop', 'deposit', ${id}, 'credit', 1, 1,
              ${flags.test ? 'test' : 'live'}, 'BRL', 1, now())`.execute(w.db);
        }
      };
      // The report's rows span from a year ago to a provider time far ahead (a sandbox's fast clock).
      await recordImport(w.db, {
        kind: 'provider-transactions',
        fileName: 'ahead.csv',
        sha256: 'f'.repeat(64),
        profile: null,
        importedBy: 'test',
        rows: [
          row(
            'a1',
            '100',
            'deposit',
            'COMPLETED',
            '10.00',
            '0.00',
            new Date(Date.now() - 365 * day).toISOString(),
          ),
          row('a2', '101', 'deposit', 'COMPLETED', '10.00', '0.00', '2099-01-01T00:00:00Z'),
        ],
      });
      await insert('100', 'COMPLETED', new Date(Date.now() - 300 * day), { completed: true });
      await insert('101', 'COMPLETED', new Date(Date.now() - 300 * day), { completed: true });
      // Moved money, seen before the report was imported, in no row: missing from the report.
      await insert('102', 'COMPLETED', new Date(Date.now() - day), { completed: true });
      // Expired (moved nothing), a test deposit, and one seen after the report was imported: not expected.
      await insert('103', 'EXPIRED', new Date(Date.now() - day), {});
      await insert('104', 'COMPLETED', new Date(Date.now() - day), { completed: true, test: true });
      await insert('105', 'COMPLETED', new Date(Date.now() + 3_600_000), { completed: true });
      await runMatching(w.db, DEFAULT_MATCH_RULES, { now: new Date(), reportAccount: 'shop' });
      const open = await w.db
        .selectFrom('exceptions')
        .select(['type', 'entity_id'])
        .where('state', '<>', 'resolved')
        .execute();
      expect(open.map((e) => `${e.type} ${e.entity_id}`)).toEqual(['LEDGER_NOT_IN_REPORT 102']);
    } finally {
      await w.drop();
    }
  });
});
