/**
 * The cash leg in the ledger: a settlement report imported books its settlements (a converted one as two
 * entries with the rate on both), importing it again books nothing, a bank credit matched to settlements
 * moves them from in transit to the bank account with the bank's fee, an unmatch reverses it, and the
 * ledger verifies throughout, balances to the cent.
 */
import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bookBankMatch, bookSettlement, reverseBankMatch } from '../../src/db/cash-leg/service.ts';
import { recordImport } from '../../src/db/imports/service.ts';
import type { ImportFile } from '../../src/db/imports/tables.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { balances } from '../../src/db/read-models/balances.ts';
import { getPayment } from '../../src/db/read-models/payments.ts';
import { ledgerAvailable, settlementsOfPeriod } from '../../src/db/read-models/settlements.ts';
import type { BankMatchBooking } from '../../src/domain/cash-leg.ts';
import { parseProviderSettlementsFile, parseProviderTransactionsFile } from '../../src/imports/files.ts';
import { settlementRowRecord, transactionRowRecord } from '../../src/imports/records.ts';
import { ledgerBalanceServices } from '../../src/web/balance-services.ts';
import { paymentPage } from '../../src/web/payment-views.ts';
import { seedBefore } from '../reports/scenario.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';
import { IBAN, SETTLEMENT_HEADER, STL_1, STL_2 } from './settlement-report-fixture.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});

const HEADER = SETTLEMENT_HEADER;
const REPORT = [
  HEADER,
  STL_1,
  STL_2,
  // No merchant account named: stored, not booked.
  'STL-3,,2026-03-01T00:00:00Z,2026-03-02T00:00:00Z,EUR,10.00,0.00,EUR,1,10.00,2026-03-03,REF-3',
].join('\n');

async function reportFile(text: string): Promise<ImportFile> {
  const parsed = await parseProviderSettlementsFile('settlements.csv', text);
  if (!parsed.ok) throw new Error(parsed.refusal.message);
  return {
    kind: 'provider-settlements',
    fileName: 'settlements.csv',
    sha256: createHash('sha256').update(text).digest('hex'),
    profile: null,
    importedBy: 'ana',
    rows: parsed.value.map(settlementRowRecord),
  };
}

/** Live balances of acme as `currency/account: amount` (minor units), zeros left out. */
async function ledger(): Promise<Record<string, bigint>> {
  const rows = await balances(t.db, { merchantAccount: 'acme', book: 'live' });
  return Object.fromEntries(
    rows.filter((r) => r.balance !== 0n).map((r) => [`${r.currency}/${r.account}`, r.balance]),
  );
}

const entryCount = async () =>
  Number(
    (await sql<{ n: string }>`SELECT count(*)::text AS n FROM journal_entries`.execute(t.db)).rows[0]!.n,
  );

async function verified(): Promise<void> {
  const full = await verifyLedger(t.db);
  expect(full.failures).toEqual([]);
  const recent = await verifyLedger(t.db, { since: new Date(Date.now() - 3_600_000) });
  expect(recent.failures).toEqual([]);
}

const MATCH: BankMatchBooking = {
  matchId: 'M-1',
  bankAccount: IBAN,
  account: 'acme',
  currency: 'EUR',
  // 998.50 + 1123.85 = 2122.35 settled; the bank took 2.00.
  credited: 212_035n,
  bankLineIdentity: 'line-1',
  settlements: [
    { settlementId: 'STL-1', currency: 'EUR', net: 99_850n },
    { settlementId: 'STL-2', currency: 'EUR', net: 112_385n },
  ],
};

describe('the cash leg', () => {
  it('books the settlements of an imported report, once however often it is imported', async () => {
    const file = await reportFile(REPORT);
    const first = await recordImport(t.db, file);
    expect(first.settlements).toEqual({ booked: 2, already: 0, noAccount: 1 });
    const entries = await entryCount();
    expect(entries).toBe(3);
    expect(await ledger()).toEqual({
      'EUR/available': -100_000n,
      'EUR/settlements_in_transit': 99_850n + 112_385n,
      'EUR/settlement_fees': 150n + 250n,
      'EUR/fx_conversion': -112_635n,
      'USD/available': -123_456n,
      'USD/fx_conversion': 123_456n,
    });

    const again = await recordImport(t.db, file);
    expect(again).toMatchObject({ new: 0, settlements: { booked: 0, already: 2, noAccount: 1 } });
    // Booking a stored row directly adds nothing either.
    const row = await t.db
      .selectFrom('provider_settlement_rows')
      .selectAll()
      .where('settlement_id', '=', 'STL-1')
      .executeTakeFirstOrThrow();
    expect(await bookSettlement(t.db, row)).toEqual({ status: 'already' });
    expect(await entryCount()).toBe(entries);
    await verified();
  });

  it('books a converted settlement as two entries, one per currency, the rate on both', async () => {
    const { rows } = await sql<{
      idempotency_key: string;
      currency: string;
      amount: string;
      fee_amount: string | null;
      rate: string | null;
    }>`SELECT idempotency_key, currency, amount::text, fee_amount::text, rate::text FROM journal_entries
       WHERE entity_kind = 'settlement' AND entity_id = 'STL-2' ORDER BY id`.execute(t.db);
    expect(rows).toEqual([
      {
        idempotency_key: 'settlement:acme:STL-2:settlement_fx_source',
        currency: 'USD',
        amount: '1234.56',
        fee_amount: null,
        rate: '0.9123456789',
      },
      {
        idempotency_key: 'settlement:acme:STL-2:settlement_fx_target',
        currency: 'EUR',
        amount: '1126.35',
        fee_amount: '2.50',
        rate: '0.9123456789',
      },
    ]);
    const sums = await sql<{ entry_id: string; currency: string; total: string }>`
      SELECT p.entry_id::text, p.currency, sum(p.amount)::text AS total FROM postings p
      JOIN journal_entries e ON e.id = p.entry_id WHERE e.entity_id = 'STL-2'
      GROUP BY p.entry_id, p.currency`.execute(t.db);
    expect(sums.rows.map((r) => r.total)).toEqual(['0.00', '0.00']);
  });

  it('moves a matched bank credit from in transit to the bank, the difference to bank fees', async () => {
    expect(await bookBankMatch(t.db, MATCH)).toEqual({ status: 'booked' });
    expect(await bookBankMatch(t.db, MATCH)).toEqual({ status: 'already' });
    await expect(bookBankMatch(t.db, { ...MATCH, credited: 212_000n })).rejects.toThrow(
      /bank match M-1 is booked with other amounts/,
    );
    const after = await ledger();
    expect(after['EUR/settlements_in_transit']).toBeUndefined();
    expect(after[`EUR/bank:${IBAN}`]).toBe(212_035n);
    expect(after['EUR/bank_fees']).toBe(200n);
    await verified();
  });

  it('reverses a match on unmatch, once, and books it again after', async () => {
    expect(await reverseBankMatch(t.db, 'M-1')).toEqual({ status: 'reversed' });
    expect(await reverseBankMatch(t.db, 'M-1')).toEqual({ status: 'not-booked' });
    expect(await reverseBankMatch(t.db, 'M-unknown')).toEqual({ status: 'not-booked' });
    let now = await ledger();
    expect(now['EUR/settlements_in_transit']).toBe(212_235n);
    expect(now[`EUR/bank:${IBAN}`]).toBeUndefined();
    expect(now['EUR/bank_fees']).toBeUndefined();
    await verified();

    // Matched again, exactly this time: its second application.
    expect(await bookBankMatch(t.db, { ...MATCH, credited: 212_235n })).toEqual({ status: 'booked' });
    const keys = await sql<{ idempotency_key: string }>`
      SELECT idempotency_key FROM journal_entries WHERE entity_kind = 'bank_match' ORDER BY id`.execute(t.db);
    expect(keys.rows.map((r) => r.idempotency_key)).toEqual([
      'bank_match:acme:M-1:bank_match',
      'bank_match:acme:M-1:bank_match:reversal:1',
      'bank_match:acme:M-1:bank_match:2',
    ]);
    now = await ledger();
    expect(now).toEqual({
      'EUR/available': -100_000n,
      'EUR/settlement_fees': 400n,
      'EUR/fx_conversion': -112_635n,
      [`EUR/bank:${IBAN}`]: 212_235n,
      'USD/available': -123_456n,
      'USD/fx_conversion': 123_456n,
    });
    await verified();
  });

  it('books a settlement the match names that was not booked yet, from its stored row', async () => {
    const file = await reportFile(
      [
        HEADER,
        'STL-4,acme,2026-03-02T00:00:00Z,2026-03-03T00:00:00Z,EUR,50.00,0.50,EUR,1,49.50,2026-03-04,REF-4',
      ].join('\n'),
    );
    // Stored without booking (as before the cash leg existed), then named by a match.
    await t.db
      .insertInto('imports')
      .values({
        kind: 'provider-settlements',
        file_name: 'old.csv',
        sha256: '0'.repeat(64),
        profile: null,
        imported_by: 'ana',
        lines: 1,
        new_lines: 1,
      })
      .execute();
    const { id } = await t.db
      .selectFrom('imports')
      .select('id')
      .where('file_name', '=', 'old.csv')
      .executeTakeFirstOrThrow();
    if (file.kind !== 'provider-settlements') throw new Error('not a settlement file');
    await t.db
      .insertInto('provider_settlement_rows')
      .values(file.rows.map((r) => ({ ...r, import_id: id })))
      .execute();
    expect((await verifyLedger(t.db)).failures).toEqual([
      'cash leg differs from its reports: settlement acme/STL-4 is reported but not booked',
    ]);
    await bookBankMatch(t.db, {
      ...MATCH,
      matchId: 'M-2',
      credited: 4_950n,
      bankLineIdentity: 'line-2',
      settlements: [{ settlementId: 'STL-4', currency: 'EUR', net: 4_950n }],
    });
    const now = await ledger();
    expect(now['EUR/available']).toBe(-105_000n);
    expect(now['EUR/settlements_in_transit']).toBeUndefined();
    expect(now[`EUR/bank:${IBAN}`]).toBe(212_235n + 4_950n);
    await verified();
  });

  it('books a match once when two book it at the same time, and a settlement once when two imports race', async () => {
    const booking: BankMatchBooking = {
      ...MATCH,
      matchId: 'M-race',
      credited: 100n,
      bankLineIdentity: 'line-race',
      settlements: [{ settlementId: 'STL-race', currency: 'EUR', net: 100n }],
    };
    const results = await Promise.all([bookBankMatch(t.db, booking), bookBankMatch(t.db, booking)]);
    expect(results.map((r) => r.status).sort()).toEqual(['already', 'booked']);
    const reversed = await Promise.all([reverseBankMatch(t.db, 'M-race'), reverseBankMatch(t.db, 'M-race')]);
    expect(reversed.map((r) => r.status).sort()).toEqual(['not-booked', 'reversed']);
    const file = await reportFile(
      [HEADER, 'STL-5,acme,,,EUR,20.00,0.00,EUR,1,20.00,2026-03-05,REF-5'].join('\n'),
    );
    const imports = await Promise.all([recordImport(t.db, file), recordImport(t.db, file)]);
    expect(imports.map((r) => r.settlements!.booked).sort()).toEqual([0, 1]);
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM journal_entries WHERE entity_id IN ('STL-5', 'M-race')`.execute(t.db);
    expect(rows[0]!.n).toBe(3);
    await verified();
  });

  it('reads the ledger available at an instant and the period settlements with their booking', async () => {
    expect(await ledgerAvailable(t.db, { merchantAccount: 'acme' })).toEqual([
      { merchantAccount: 'acme', currency: 'EUR', available: -107_000n },
      { merchantAccount: 'acme', currency: 'USD', available: -123_456n },
    ]);
    const before = await ledgerAvailable(t.db, { at: new Date('2026-01-01T00:00:00Z') });
    expect(before.every((b) => b.available === 0n)).toBe(true);
    // The balances page's cash leg, per account and currency.
    expect(await ledgerBalanceServices(t.db).cashLeg(new Date())).toEqual([
      {
        account: 'acme',
        currency: 'EUR',
        inTransit: 2_000n,
        settlementFees: 450n,
        fxConversion: -112_635n,
        banks: [{ id: IBAN, balance: 212_235n + 4_950n }],
        bankFees: 0n,
      },
      {
        account: 'acme',
        currency: 'USD',
        inTransit: 0n,
        settlementFees: 0n,
        fxConversion: 123_456n,
        banks: [],
        bankFees: 0n,
      },
    ]);
    const rows = await settlementsOfPeriod(t.db, '2026-03-01', '2026-03-31', null);
    expect(rows.map((r) => [r.settlementId, r.account, r.booked, r.net])).toEqual([
      ['STL-1', 'acme', true, 99_850n],
      ['STL-2', 'acme', true, 112_385n],
      ['STL-3', null, false, 1_000n],
      ['STL-4', 'acme', true, 4_950n],
      ['STL-5', 'acme', true, 2_000n],
    ]);
  });

  it('names the settlement a payment went out in on its page, from the transactions report', async () => {
    await seedBefore(t.db);
    const tx = [
      'transaction_id,type,status,external_id,invoice_id,currency,gross,fee,net,created_at,updated_at,settlement_id',
      '1001,deposit,COMPLETED,,ref-1001,BRL,100.00,1.50,98.50,2026-03-01T10:00:00Z,2026-03-01T10:05:00Z,STL-1',
    ].join('\n');
    const parsed = await parseProviderTransactionsFile('tx.csv', tx);
    if (!parsed.ok) throw new Error(parsed.refusal.message);
    await recordImport(t.db, {
      kind: 'provider-transactions',
      fileName: 'tx.csv',
      sha256: createHash('sha256').update(tx).digest('hex'),
      profile: null,
      importedBy: 'ana',
      rows: parsed.value.map(transactionRowRecord),
    });
    const detail = await getPayment(t.db, 'acme', 'deposit', '1001');
    expect(detail?.settlements).toEqual([
      {
        settlementId: 'STL-1',
        status: 'COMPLETED',
        net: 9_850n,
        currency: 'BRL',
        settlement: expect.objectContaining({
          valueDate: '2026-03-03',
          bankReference: 'REF-1',
          booked: true,
        }),
      },
    ]);
    const page = paymentPage({ base: '', username: 'finance', csrf: 'x', timeZone: 'UTC' }, detail!).value;
    expect(page).toContain('<tr data-settlement="STL-1"><td>STL-1</td><td>COMPLETED</td>');
    expect(page).toContain('<td>2026-03-03</td><td>REF-1</td>');
    // Its match names a bank line never imported here: not matched to a line.
    expect(page).toContain('<td>yes</td><td><span class="muted">not matched</span></td>');
    const cashout = await getPayment(t.db, 'acme', 'cashout', '2001');
    expect(cashout?.settlements).toEqual([]);
    expect(
      paymentPage({ base: '', username: 'finance', csrf: 'x', timeZone: 'UTC' }, cashout!).value,
    ).toContain('In no imported transactions report with a settlement.');
  });
});
