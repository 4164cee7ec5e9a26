/**
 * Recording imports: every import is recorded (who, the file's SHA-256, counts), each line is stored once
 * under its identity: a file imported twice adds nothing the second time, two statements that overlap add
 * the shared lines once, and a failing import leaves nothing behind.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordImport } from '../../src/db/imports/service.ts';
import type { ImportFile } from '../../src/db/imports/tables.ts';
import {
  parseBankStatementFile,
  parseProviderSettlementsFile,
  parseProviderTransactionsFile,
} from '../../src/imports/files.ts';
import { settlementRowRecord, statementRecord, transactionRowRecord } from '../../src/imports/records.ts';
import type { ImportResult } from '../../src/imports/refusal.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});

const sha256 = (text: string | Uint8Array) => createHash('sha256').update(text).digest('hex');

function value<T>(result: ImportResult<T>): T {
  if (!result.ok) throw new Error(result.refusal.message);
  return result.value;
}

async function bankFile(name: string, content: string | Uint8Array, account?: string): Promise<ImportFile> {
  const statements = value(
    await parseBankStatementFile(name, content, account === undefined ? {} : { account }),
  );
  return {
    kind: 'bank-statement',
    fileName: name,
    sha256: sha256(content),
    profile: null,
    importedBy: 'ana',
    statements: statements.map(statementRecord),
  };
}

const count = async (
  table: 'bank_statement_lines' | 'provider_transaction_rows' | 'provider_settlement_rows',
) =>
  Number(
    (
      await t.db
        .selectFrom(table)
        .select((eb) => eb.fn.countAll().as('n'))
        .executeTakeFirstOrThrow()
    ).n,
  );

const HEADER =
  'booking_date,value_date,amount,currency,reference,end_to_end_id,counterparty,description,balance_after';
const ROWS = [
  '2026-03-02,2026-03-02,100.00,EUR,B-1,STL-1,Provider,Payout,1100.00',
  '2026-03-02,2026-03-02,-20.50,EUR,B-2,NOTPROVIDED,Landlord,Rent,1079.50',
  '2026-03-03,2026-03-03,250.25,EUR,B-3,STL-2;STL-3,Provider,Payout batch,1329.75',
  '2026-03-04,2026-03-04,-0.25,EUR,B-4,,Bank,Fee,1329.50',
];
const csv = (rows: string[]) => `${[HEADER, ...rows].join('\n')}\n`;

describe('recording imports', () => {
  it('records a camt.053 file imported twice once per import, its lines once', async () => {
    const xml = await readFile(new URL('../imports/fixtures/camt053-001-08.xml', import.meta.url));
    const file = await bankFile('statement.xml', xml);
    const booked = file.kind === 'bank-statement' ? file.statements.reduce((s, x) => s + x.booked, 0) : 0;
    expect(booked).toBeGreaterThan(2);
    const first = await recordImport(t.db, file);
    expect(first).toMatchObject({ lines: booked, new: booked });
    const second = await recordImport(t.db, file);
    expect(second).toMatchObject({ lines: booked, new: 0 });
    expect(second.id).not.toBe(first.id);
    expect(await count('bank_statement_lines')).toBe(booked);

    const db = t.db;
    const imports = await db
      .selectFrom('imports')
      .selectAll()
      .where('id', 'in', [first.id, second.id])
      .orderBy('id')
      .execute();
    expect(imports.map((i) => [i.kind, i.file_name, i.sha256, i.imported_by, i.lines, i.new_lines])).toEqual([
      ['bank-statement', 'statement.xml', sha256(xml), 'ana', booked, booked],
      ['bank-statement', 'statement.xml', sha256(xml), 'ana', booked, 0],
    ]);
    const statements = await db
      .selectFrom('import_statements')
      .select(['import_id', 'bank_account', 'opening', 'closing', 'booked', 'new_lines'])
      .where('import_id', '=', second.id)
      .execute();
    expect(statements[0]).toMatchObject({ bank_account: 'DE89370400440532013000', new_lines: 0 });
    // Amounts beyond a double's precision stay exact.
    expect(statements[0]?.opening).toBe('12345678901234567.89');
    // The lines stay with the import that first brought them.
    const owners = await db.selectFrom('bank_statement_lines').select('import_id').distinct().execute();
    expect(owners.map((o) => o.import_id)).toEqual([first.id]);
  });

  it('imports the shared lines of two overlapping statements once', async () => {
    const before = await count('bank_statement_lines');
    const a = await recordImport(t.db, await bankFile('a.csv', csv(ROWS.slice(0, 3)), 'NL91ABNA0417164300'));
    const b = await recordImport(t.db, await bankFile('b.csv', csv(ROWS.slice(1)), 'NL91ABNA0417164300'));
    expect([a.new, b.new]).toEqual([3, 1]);
    expect(b.statements).toEqual([{ new: 1 }]);
    expect(await count('bank_statement_lines')).toBe(before + 4);
    const line = await t.db
      .selectFrom('bank_statement_lines')
      .select(['amount', 'end_to_end_ids', 'transactions'])
      .where('reference', '=', 'B-3')
      .executeTakeFirstOrThrow();
    expect(line).toMatchObject({ amount: '250.25', end_to_end_ids: ['STL-2', 'STL-3'], transactions: [] });
    // The same lines under another bank account are other lines.
    const other = await recordImport(t.db, await bankFile('c.csv', csv(ROWS), 'NL20INGB0001234567'));
    expect(other.new).toBe(4);
  });

  it('imports provider rows once, and a failing import leaves nothing', async () => {
    const tx = [
      'transaction_id,type,status,external_id,invoice_id,currency,gross,fee,net,created_at,updated_at,settlement_id',
      '11,deposit,COMPLETED,,inv-1,BRL,100.00,1.50,98.50,2026-03-02T10:00:00Z,2026-03-02T10:05:00Z,7000001',
      '12,cashout,REJECTED,c-1,,BRL,-40.00,0.00,-40.00,2026-03-02T11:00:00Z,2026-03-02T11:00:00Z,7000001',
      '12,cashout,REJECTED,c-1,,BRL,40.00,0.00,40.00,2026-03-02T11:00:00Z,2026-03-03T09:00:00Z,',
    ].join('\n');
    const rows = value(await parseProviderTransactionsFile('tx.csv', tx)).map(transactionRowRecord);
    const file: ImportFile = {
      kind: 'provider-transactions',
      fileName: 'tx.csv',
      sha256: sha256(tx),
      profile: 'sandbox-provider-transactions',
      importedBy: 'ana',
      rows,
    };
    expect((await recordImport(t.db, file)).new).toBe(3);
    expect((await recordImport(t.db, { ...file, rows: rows.slice(1) })).new).toBe(0);
    expect(await count('provider_transaction_rows')).toBe(3);

    const st = [
      'settlement_id,account,period_start,period_end,currency,gross,fees,settlement_currency,rate,net,value_date,bank_reference',
      '7000001,sandbox,2026-03-02T00:00:00Z,2026-03-03T00:00:00Z,BRL,58.50,1.00,BRL,1.000000,57.50,2026-03-04,STL-7000001',
    ].join('\n');
    const settlements = value(await parseProviderSettlementsFile('st.csv', st)).map(settlementRowRecord);
    const stFile: ImportFile = {
      kind: 'provider-settlements',
      fileName: 'st.csv',
      sha256: sha256(st),
      profile: null,
      importedBy: 'ana',
      rows: settlements,
    };
    expect((await recordImport(t.db, stFile)).new).toBe(1);
    expect((await recordImport(t.db, stFile)).new).toBe(0);

    // All or nothing: a row the table refuses (a negative rate) rolls back the import and its rows.
    const importsBefore = await t.db
      .selectFrom('imports')
      .select((eb) => eb.fn.countAll().as('n'))
      .executeTakeFirstOrThrow();
    const bad: ImportFile = {
      ...stFile,
      rows: [
        { ...settlements[0]!, identity: 'fresh-1', settlement_id: '7000002' },
        { ...settlements[0]!, identity: 'fresh-2', rate: '-1' },
      ],
    };
    await expect(recordImport(t.db, bad)).rejects.toThrow(/provider_settlement_rows_rate_check/);
    expect(await count('provider_settlement_rows')).toBe(1);
    const importsAfter = await t.db
      .selectFrom('imports')
      .select((eb) => eb.fn.countAll().as('n'))
      .executeTakeFirstOrThrow();
    expect(importsAfter.n).toBe(importsBefore.n);
  });
});
