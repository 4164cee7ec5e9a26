/**
 * The bank matches of a matching run booked together (`bookNewBankMatches`) book what booking them one by
 * one (`bookBankMatch`) books: the same entries under the same keys, the same balances, a settlement the
 * report stored but did not book booked first, a match booked before not booked twice.
 */
import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bookBankMatch, bookNewBankMatches } from '../../src/db/cash-leg/service.ts';
import { recordImport } from '../../src/db/imports/service.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { balances } from '../../src/db/read-models/balances.ts';
import type { BankMatchBooking } from '../../src/domain/cash-leg.ts';
import { parseProviderSettlementsFile } from '../../src/imports/files.ts';
import { settlementRowRecord } from '../../src/imports/records.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';
import { IBAN, SETTLEMENT_HEADER, STL_1, STL_2 } from './settlement-report-fixture.ts';

let oneByOne: TestDatabase;
let together: TestDatabase;
beforeAll(async () => {
  oneByOne = await createTestDatabase();
  together = await createTestDatabase();
});
afterAll(async () => {
  await oneByOne?.drop();
  await together?.drop();
});

const HEADER = SETTLEMENT_HEADER;
const REPORT = [HEADER, STL_1, STL_2].join('\n');
/** Stored without its booking, as a report imported before the cash leg was. */
const UNBOOKED =
  'STL-4,acme,2026-03-02T00:00:00Z,2026-03-03T00:00:00Z,EUR,50.00,0.50,EUR,1,49.50,2026-03-04,REF-4';

async function seed(t: TestDatabase): Promise<void> {
  const parsed = await parseProviderSettlementsFile('settlements.csv', REPORT);
  if (!parsed.ok) throw new Error(parsed.refusal.message);
  await recordImport(t.db, {
    kind: 'provider-settlements',
    fileName: 'settlements.csv',
    sha256: createHash('sha256').update(REPORT).digest('hex'),
    profile: null,
    importedBy: 'ana',
    rows: parsed.value.map(settlementRowRecord),
  });
  const old = await parseProviderSettlementsFile('old.csv', [HEADER, UNBOOKED].join('\n'));
  if (!old.ok) throw new Error(old.refusal.message);
  const { id } = await t.db
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
    .returning('id')
    .executeTakeFirstOrThrow();
  await t.db
    .insertInto('provider_settlement_rows')
    .values(old.value.map((r) => ({ ...settlementRowRecord(r), import_id: id })))
    .execute();
}

const MATCHES: BankMatchBooking[] = [
  {
    matchId: '101',
    bankAccount: IBAN,
    account: 'acme',
    currency: 'EUR',
    // 998.50 + 1123.85 settled; the bank took 2.00.
    credited: 212_035n,
    bankLineIdentity: 'line-1',
    settlements: [
      { settlementId: 'STL-1', currency: 'EUR', net: 99_850n },
      { settlementId: 'STL-2', currency: 'EUR', net: 112_385n },
    ],
  },
  {
    matchId: '102',
    bankAccount: IBAN,
    account: 'acme',
    currency: 'EUR',
    credited: 4_950n,
    bankLineIdentity: 'line-2',
    settlements: [{ settlementId: 'STL-4', currency: 'EUR', net: 4_950n }],
  },
];

/** Live balances of acme as `currency/account: amount` (minor units), zeros left out. */
async function ledger(t: TestDatabase): Promise<Record<string, bigint>> {
  const rows = await balances(t.db, { merchantAccount: 'acme', book: 'live' });
  return Object.fromEntries(
    rows.filter((r) => r.balance !== 0n).map((r) => [`${r.currency}/${r.account}`, r.balance]),
  );
}

async function keys(t: TestDatabase): Promise<string[]> {
  const { rows } = await sql<{ key: string }>`
    SELECT idempotency_key AS key FROM journal_entries ORDER BY idempotency_key`.execute(t.db);
  return rows.map((r) => r.key);
}

describe('bank matches booked together', () => {
  it('book what booking them one by one books, a match booked before once', async () => {
    await seed(oneByOne);
    await seed(together);
    for (const m of MATCHES) await bookBankMatch(oneByOne.db, m);
    // The first booked before the run: left as it is.
    await bookBankMatch(together.db, MATCHES[0]!);
    await together.db.transaction().execute((tx) => bookNewBankMatches(tx, MATCHES));

    expect(await ledger(together)).toEqual(await ledger(oneByOne));
    expect(await ledger(together)).toMatchObject({
      'EUR/available': -105_000n,
      [`EUR/bank:${IBAN}`]: 212_035n + 4_950n,
      'EUR/bank_fees': 200n,
    });
    expect(await keys(together)).toEqual(await keys(oneByOne));
    expect(await keys(together)).toContain('settlement:acme:STL-4:settlement');
    expect((await verifyLedger(together.db)).failures).toEqual([]);
  });
});
