/**
 * CSV and XLSX files through mapping profiles: the built-in profiles read the sandbox's three layouts,
 * a bank's own layout reads through a profile of its own, and every broken row, header or profile is
 * refused with one line naming the file, the row or field, and the rule.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ExcelJS from 'exceljs';
import { afterAll, describe, expect, it } from 'vitest';
import { IMPORT_KINDS } from '../../src/domain/imports.ts';
import { parseCamt053 } from '../../src/imports/camt053.ts';
import {
  parseBankStatementFile,
  parseProviderSettlementsFile,
  parseProviderTransactionsFile,
} from '../../src/imports/files.ts';
import { builtInProfile, parseProfile, readProfileFile } from '../../src/imports/profile.ts';
import { netMatchesRate } from '../../src/imports/profile-rows.ts';
import type { ImportResult } from '../../src/imports/refusal.ts';

const dir = mkdtempSync(join(tmpdir(), 'payrecon-profiles-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function value<T>(result: ImportResult<T>): T {
  if (!result.ok) throw new Error(`refused: ${result.refusal.message}`);
  return result.value;
}

function refusal(result: ImportResult<unknown>): string {
  if (result.ok) throw new Error('accepted, expected a refusal');
  expect(result.refusal.message).not.toMatch(/\n/);
  return result.refusal.message;
}

async function xlsx(rows: unknown[][], sheet = 'Sheet1'): Promise<Uint8Array> {
  const workbook = new ExcelJS.Workbook();
  const worksheet = workbook.addWorksheet(sheet);
  for (const row of rows) worksheet.addRow(row);
  return new Uint8Array(await workbook.xlsx.writeBuffer());
}

const csv = (rows: string[][]) => `${rows.map((r) => r.join(',')).join('\n')}\n`;

const IBAN = 'DE89370400440532013000';
const BANK_HEADER = [
  'booking_date',
  'value_date',
  'amount',
  'currency',
  'reference',
  'end_to_end_id',
  'counterparty',
  'description',
  'balance_after',
];
/** The booked entries of the hand-written camt.053.001.02 statement, as the bank's CSV. */
const BANK_ROWS = [
  [
    '2026-11-27',
    '2026-11-27',
    '1500.00',
    'EUR',
    'BNK-20261127-0001',
    'STL-S1',
    'Payment Provider Ltd',
    'Settlement S1; Settlement S2',
    '12345678901236067.89',
  ],
  [
    '2026-11-27',
    '2026-11-26',
    '-250.00',
    'EUR',
    'BNK-20261127-0002',
    'STL-S0',
    'Payment Provider Ltd',
    'Return of settlement S0',
    '12345678901235817.89',
  ],
  ['2026-11-27', '2026-11-27', '-0.01', 'EUR', '', '', '', 'Account fee', '12345678901235817.88'],
  ['2026-11-27', '2026-11-27', '-0.01', 'EUR', '', '', '', 'Account  fee', '12345678901235817.87'],
];
const BANK_CSV = csv([BANK_HEADER, ...BANK_ROWS]);

describe('bank statements through a profile', () => {
  it('refuses MT940 in one line, with or without the SWIFT block header', async () => {
    const plain =
      ':20:STMT-1\n:25:NL91ABNA0417164300\n:28C:1/1\n:60F:C261128EUR1000,00\n:62F:C261128EUR1000,00\n';
    const wrapped = `{1:F01BANKBEBBAXXX0000000000}{2:I940BANKBEBBXXXXN}{4:\n${plain}-}`;
    for (const content of [plain, wrapped]) {
      expect(refusal(await parseBankStatementFile('statement.sta', content))).toBe(
        'statement.sta: is MT940, which is not read: import the camt.053 or CSV statement of the same account',
      );
    }
  });

  it('reads the sandbox bank CSV: balances from balance_after, signed amounts, lines', async () => {
    const [statement] = value(await parseBankStatementFile('bank.csv', BANK_CSV, { account: IBAN }));
    expect(statement).toMatchObject({
      format: 'csv',
      account: IBAN,
      currency: 'EUR',
      opening: 1234567890123456789n,
      closing: 1234567890123581787n,
      credits: 150000n,
      debits: -25002n,
      booked: 4,
      pending: 0,
    });
    expect(statement?.lines[1]).toMatchObject({
      position: 3,
      reference: 'BNK-20261127-0002',
      bookingDate: '2026-11-27',
      valueDate: '2026-11-26',
      amount: -25000n,
      endToEndIds: ['STL-S0'],
      counterparty: 'Payment Provider Ltd',
    });
  });

  it('gives each line the identity the same entry has in the camt.053 statement', async () => {
    const [fromCsv] = value(await parseBankStatementFile('bank.csv', BANK_CSV, { account: IBAN }));
    const { readFileSync } = await import('node:fs');
    const xml = readFileSync(new URL('./fixtures/camt053-001-02.xml', import.meta.url));
    const [fromCamt] = value(parseCamt053('camt.xml', xml));
    expect(fromCsv?.lines.map((l) => l.identity)).toEqual(fromCamt?.lines.map((l) => l.identity));
  });

  it('reads the same statement from XLSX, amounts as text cells, with the same identities', async () => {
    const file = await xlsx([BANK_HEADER, ...BANK_ROWS]);
    const [fromXlsx] = value(await parseBankStatementFile('bank.xlsx', file, { account: IBAN }));
    const [fromCsv] = value(
      await parseBankStatementFile('bank.csv', Buffer.from(BANK_CSV), { account: IBAN }),
    );
    expect(fromXlsx?.format).toBe('xlsx');
    expect({ ...fromXlsx, format: 'csv' }).toEqual(fromCsv);
  });

  it("reads a bank's own layout: semicolons, DD.MM.YYYY, 1.234,56, a direction column, an account column", async () => {
    const profile = value(
      parseProfile('bank-de.json', {
        kind: 'bank-statement',
        name: 'bank-de',
        dateFormat: 'DD.MM.YYYY',
        number: { decimal: ',', thousands: '.' },
        sign: { convention: 'direction', column: 'S/H', credit: ['H'], debit: ['S'] },
        csv: { delimiter: ';', quote: '"' },
        currency: 'EUR',
        columns: {
          account: 'Konto',
          bookingDate: 'Buchungstag',
          valueDate: 'Valuta',
          amount: 'Betrag',
          reference: 'Referenz',
          description: 'Verwendungszweck',
        },
        identity: ['reference'],
      }),
    );
    const file = [
      'Konto;Buchungstag;Valuta;Betrag;S/H;Referenz;Verwendungszweck',
      `${IBAN};27.11.2026;28.11.2026;1.234.567,89;H;R1;"Gutschrift; Settlement"`,
      `${IBAN};27.11.2026;27.11.2026;12,5;S;R2;Miete`,
      `AT611904300234573201;27.11.2026;27.11.2026;3;H;R3;Zins`,
    ].join('\n');
    const statements = value(await parseBankStatementFile('umsatz.csv', file, { profile }));
    expect(statements.map((s) => [s.account, s.currency, s.opening, s.closing, s.credits, s.debits])).toEqual(
      [
        [IBAN, 'EUR', null, null, 123456789n, -1250n],
        ['AT611904300234573201', 'EUR', null, null, 300n, 0n],
      ],
    );
    expect(statements[0]?.lines.map((l) => [l.bookingDate, l.valueDate, l.description])).toEqual([
      ['2026-11-27', '2026-11-28', 'Gutschrift; Settlement'],
      ['2026-11-27', '2026-11-27', 'Miete'],
    ]);
    expect(
      refusal(await parseBankStatementFile('umsatz.csv', file.replace(';S;R2', ';X;R2'), { profile })),
    ).toBe('umsatz.csv: row 3: "S/H" must be one of H, S (got "X")');
    expect(
      refusal(await parseBankStatementFile('umsatz.csv', file.replace('12,5;S', '-12,5;S'), { profile })),
    ).toBe('umsatz.csv: row 3: Betrag: must not be negative (got "-12.5")');
    expect(
      refusal(
        await parseBankStatementFile('umsatz.csv', file.replace('1.234.567,89', '1.23.567,89'), { profile }),
      ),
    ).toBe('umsatz.csv: row 2: "Betrag" must be a number written as 1.234,56 (got "1.23.567,89")');
  });

  it('refuses a row whose balance is not the previous balance plus its amount', async () => {
    const broken = BANK_CSV.replace('12345678901235817.88', '12345678901235817.80');
    expect(refusal(await parseBankStatementFile('bank.csv', broken, { account: IBAN }))).toBe(
      'bank.csv: row 4: the balance 12345678901235817.80 is not the previous balance ' +
        '12345678901235817.89 plus the amount -0.01',
    );
  });

  it('refuses each broken cell naming its row and column', async () => {
    const cases: [string, string, string][] = [
      ['1500.00', '1500.001', 'bank.csv: row 2: amount: at most 2 decimals for EUR (got "1500.001")'],
      [
        '1500.00',
        '"1,500.00"',
        'bank.csv: row 2: "amount" must be a number written as 1234.56 (got "1,500.00")',
      ],
      ['1500.00', '1.5e3', 'bank.csv: row 2: "amount" must be a number written as 1234.56 (got "1.5e3")'],
      [
        '2026-11-27,2026-11-27,1500',
        '27.11.2026,2026-11-27,1500',
        'bank.csv: row 2: "booking_date" must be a date written as YYYY-MM-DD (got "27.11.2026")',
      ],
      [
        '2026-11-27,2026-11-26',
        '2026-11-27,2026-02-30',
        'bank.csv: row 3: "value_date" must be a date written as YYYY-MM-DD (got "2026-02-30")',
      ],
      [
        '-250.00,EUR',
        '-250.00,EURO',
        'bank.csv: row 3: "currency" must be an ISO 4217 currency code (got "EURO")',
      ],
      ['-250.00,EUR', ',EUR', 'bank.csv: row 3: "amount" is empty'],
    ];
    for (const [from, to, message] of cases) {
      expect(
        refusal(await parseBankStatementFile('bank.csv', BANK_CSV.replace(from, to), { account: IBAN })),
      ).toBe(message);
    }
  });

  it('refuses a file that does not parse, a missing column, a repeated reference and a missing account', async () => {
    expect(
      refusal(await parseBankStatementFile('bank.csv', `${BANK_CSV}2026-11-27,x\n`, { account: IBAN })),
    ).toMatch(/^bank\.csv: does not parse as CSV: Invalid Record Length: .*line 6/);
    expect(
      refusal(
        await parseBankStatementFile('bank.csv', BANK_CSV.replace('balance_after', 'saldo'), {
          account: IBAN,
        }),
      ),
    ).toBe('bank.csv: header: has no column "balance_after" (the profile\'s balanceAfter)');
    expect(
      refusal(
        await parseBankStatementFile('bank.csv', BANK_CSV.replace('BNK-20261127-0002', 'BNK-20261127-0001'), {
          account: IBAN,
        }),
      ),
    ).toBe(
      `bank.csv: account ${IBAN} EUR, row 3: its reference BNK-20261127-0001 repeats row 2: a reference names one entry`,
    );
    expect(refusal(await parseBankStatementFile('bank.csv', BANK_CSV))).toBe(
      'bank.csv: profile: names no account column: the bank account must be given',
    );
    expect(refusal(await parseBankStatementFile('bank.csv', Buffer.from([0xff, 0xfe, 0x00])))).toBe(
      'bank.csv: is not UTF-8 text',
    );
  });

  it('refuses an XLSX amount cell a double does not hold exactly, and reads one it does', async () => {
    const exact = await xlsx([
      BANK_HEADER,
      ['2026-11-27', '2026-11-27', 1500.5, 'EUR', 'R1', '', '', '', '1500.50'],
    ]);
    const [statement] = value(await parseBankStatementFile('bank.xlsx', exact, { account: IBAN }));
    expect(statement?.lines[0]?.amount).toBe(150050n);
    const inexact = await xlsx([
      BANK_HEADER,
      ['2026-11-27', '2026-11-27', '1.00', 'EUR', 'R1', '', '', '', Number('12345678901234567.89')],
    ]);
    expect(refusal(await parseBankStatementFile('bank.xlsx', inexact, { account: IBAN }))).toBe(
      'bank.xlsx: row 2: "balance_after" holds the number 12345678901234568, which a spreadsheet number does ' +
        'not keep exactly: write it as text',
    );
    const dated = await xlsx([
      BANK_HEADER,
      [new Date(Date.UTC(2026, 10, 27)), '2026-11-27', '1.00', 'EUR', 'R1', '', '', '', '1.00'],
    ]);
    const [fromDate] = value(await parseBankStatementFile('bank.xlsx', dated, { account: IBAN }));
    expect(fromDate?.lines[0]?.bookingDate).toBe('2026-11-27');
    const named = value(parseProfile('named.json', { ...builtInProfile('bank-statement'), sheet: 'Umsatz' }));
    expect(refusal(await parseBankStatementFile('bank.xlsx', dated, { account: IBAN, profile: named }))).toBe(
      'bank.xlsx: has no sheet named "Umsatz"',
    );
    expect(refusal(await parseBankStatementFile('bank.xlsx', Buffer.from('PK\x03\x04broken')))).toMatch(
      /^bank\.xlsx: does not parse as XLSX: /,
    );
  });
});

const TX_HEADER =
  'transaction_id,type,status,external_id,invoice_id,currency,gross,fee,net,created_at,updated_at,settlement_id';
const TX_CSV = [
  TX_HEADER,
  'D-1,deposit,COMPLETED,ext-1,inv-1,EUR,98765432109876543.21,2.50,98765432109876540.71,2026-11-27T10:00:00Z,2026-11-27T10:05:00Z,S1',
  'C-1,cashout,COMPLETED,ext-2,,EUR,-40.00,1.00,-41.00,2026-11-27T11:00:00Z,2026-11-27T11:00:00Z,S1',
  'R-1,refund,COMPLETED,ext-3,,EUR,-10.00,0.00,-10.00,2026-11-27T12:00:00+01:00,2026-11-27T12:00:00+01:00,',
  'D-1,fee,COMPLETED,,,EUR,-5.00,0.00,-5.00,2026-11-27T13:00:00Z,2026-11-27T13:00:00Z,S1',
  'S1,settlement,SETTLED,,,EUR,-41.50,0.00,-41.50,2026-11-28T00:00:00Z,2026-11-28T00:00:00Z,S1',
].join('\n');

describe('provider transactions report', () => {
  it('reads the sandbox layout: types, signed gross, fee, net, instants in UTC, settlement ids', async () => {
    const rows = value(await parseProviderTransactionsFile('transactions.csv', TX_CSV));
    expect(rows).toHaveLength(5);
    expect(rows[0]).toMatchObject({
      row: 2,
      transactionId: 'D-1',
      type: 'deposit',
      status: 'COMPLETED',
      externalId: 'ext-1',
      invoiceId: 'inv-1',
      currency: 'EUR',
      gross: 9876543210987654321n,
      fee: 250n,
      net: 9876543210987654071n,
      createdAt: '2026-11-27T10:00:00.000Z',
      updatedAt: '2026-11-27T10:05:00.000Z',
      settlementId: 'S1',
    });
    expect(rows[2]).toMatchObject({
      createdAt: '2026-11-27T11:00:00.000Z',
      settlementId: null,
      invoiceId: null,
    });
    // A deposit and its fee share the transaction id; the identity holds the type too.
    expect(rows[0]?.identity).not.toBe(rows[3]?.identity);
  });

  it('keeps identities across overlapping reports, and tells a changed row by its content hash', async () => {
    const first = value(await parseProviderTransactionsFile('a.csv', TX_CSV));
    const later = TX_CSV.replace('R-1,refund,COMPLETED', 'R-1,refund,FAILED');
    const second = value(await parseProviderTransactionsFile('b.csv', later));
    expect(second.map((r) => r.identity)).toEqual(first.map((r) => r.identity));
    expect(second[2]?.contentHash).not.toBe(first[2]?.contentHash);
    expect(second[0]?.contentHash).toBe(first[0]?.contentHash);
  });

  it('reads the same report from XLSX (text cells) as from CSV', async () => {
    const file = await xlsx(
      TX_CSV.split('\n').map((line) => line.split(',')),
      'Transactions',
    );
    const fromXlsx = value(await parseProviderTransactionsFile('transactions.xlsx', file));
    const fromCsv = value(await parseProviderTransactionsFile('transactions.csv', TX_CSV));
    expect(fromXlsx).toEqual(fromCsv);
  });

  it('refuses a row whose net is not gross minus fee, an unknown type, a repeated identity, a bad instant', async () => {
    expect(refusal(await parseProviderTransactionsFile('t.csv', TX_CSV.replace('-41.00', '-39.00')))).toBe(
      't.csv: row 3: net -39.00 is not gross -40.00 minus fee 1.00',
    );
    expect(
      refusal(await parseProviderTransactionsFile('t.csv', TX_CSV.replace('R-1,refund', 'R-1,chargeback'))),
    ).toBe(
      't.csv: row 4: "type" must be one of deposit, cashout, refund, fee, settlement (got "chargeback")',
    );
    expect(
      refusal(
        await parseProviderTransactionsFile(
          't.csv',
          TX_CSV.replace(
            'C-1,cashout,COMPLETED,ext-2,,EUR,-40.00,1.00,-41.00,2026-11-27T11:00:00Z,2026-11-27T11:00:00Z',
            'D-1,deposit,COMPLETED,ext-2,,EUR,98765432109876543.21,1.00,98765432109876542.21,2026-11-27T11:00:00Z,2026-11-27T10:05:00Z',
          ),
        ),
      ),
    ).toBe('t.csv: row 3: its identity (transactionId, type, updatedAt, gross) repeats row 2');
    // A cashout returned after it was paid out is a second row of the same transaction, gross +.
    const returned = `${TX_CSV}\nC-1,cashout,REJECTED,ext-2,,EUR,40.00,0.00,40.00,2026-11-27T11:00:00Z,2026-11-28T09:00:00Z,`;
    expect(value(await parseProviderTransactionsFile('t.csv', returned))).toHaveLength(6);
    expect(
      refusal(
        await parseProviderTransactionsFile(
          't.csv',
          TX_CSV.replace('2026-11-27T11:00:00Z', '2026-11-27 11:00'),
        ),
      ),
    ).toBe('t.csv: row 3: "created_at" must be an ISO 8601 instant with an offset (got "2026-11-27 11:00")');
    expect(
      refusal(await parseProviderTransactionsFile('t.csv', TX_CSV.replace('1.00,-41.00', '-1.00,-39.00'))),
    ).toBe('t.csv: row 3: fee: must not be negative (got "-1.00")');
    expect(refusal(await parseProviderTransactionsFile('t.csv', TX_CSV.replace('\nC-1,', '\n,')))).toBe(
      't.csv: row 3: "transaction_id" is empty',
    );
  });
});

const STL_CSV = [
  'settlement_id,account,period_start,period_end,currency,gross,fees,settlement_currency,rate,net,value_date,bank_reference',
  'S1,acc-1,2026-11-26T23:00:00Z,2026-11-27T23:00:00Z,EUR,1000.00,0.50,EUR,1.000000,999.50,2026-11-28,STL-S1',
  'S2,acc-1,2026-11-26T23:00:00Z,2026-11-27T23:00:00Z,EUR,1000.00,2.50,USD,1.0843,1081.80,2026-11-28,STL-S2',
  'S3,acc-2,2026-11-26T23:00:00Z,2026-11-27T23:00:00Z,EUR,333.33,0.00,USD,1.5,500.00,2026-11-28,STL-S3',
].join('\n');

describe('provider settlement report', () => {
  it('reads the sandbox layout, a converted settlement with its rate as text', async () => {
    const rows = value(await parseProviderSettlementsFile('settlements.csv', STL_CSV));
    expect(rows[1]).toMatchObject({
      row: 3,
      settlementId: 'S2',
      account: 'acc-1',
      periodStart: '2026-11-26T23:00:00.000Z',
      periodEnd: '2026-11-27T23:00:00.000Z',
      currency: 'EUR',
      gross: 100000n,
      fees: 250n,
      settlementCurrency: 'USD',
      rate: '1.0843',
      net: 108180n,
      valueDate: '2026-11-28',
      bankReference: 'STL-S2',
    });
    expect(new Set(rows.map((r) => r.identity)).size).toBe(3);
  });

  it('checks net = round(gross x rate) - fees on integers, either rounding of an exact half', async () => {
    expect(netMatchesRate(33333n, '1.5', 0n, 50000n)).toBe(true);
    expect(netMatchesRate(33333n, '1.5', 0n, 49999n)).toBe(true);
    expect(netMatchesRate(33333n, '1.5', 0n, 50001n)).toBe(false);
    expect(netMatchesRate(-33333n, '1.5', 0n, -50000n)).toBe(true);
    expect(refusal(await parseProviderSettlementsFile('s.csv', STL_CSV.replace('1081.80', '1081.82')))).toBe(
      's.csv: row 3: net 1081.82 is not gross 1000.00 x rate 1.0843 minus fees 2.50 (to half a minor unit)',
    );
    expect(
      refusal(await parseProviderSettlementsFile('s.csv', STL_CSV.replace('1.0843', '1.08430000001'))),
    ).toBe('s.csv: row 3: "rate" must be a positive decimal with at most 10 decimals (got "1.08430000001")');
    expect(
      refusal(
        await parseProviderSettlementsFile(
          's.csv',
          STL_CSV.replace(',S2,', ',S1,').replace('\nS2,', '\nS1,'),
        ),
      ),
    ).toBe('s.csv: row 3: its identity (settlementId) repeats row 2');
  });
});

describe("provider settlement report: the provider's balance", () => {
  const HEADER = `${STL_CSV.split('\n')[0]},balance_at_cutoff,balance_after`;
  const WITH_BALANCE = [
    HEADER,
    'S1,acc-1,2026-11-26T23:00:00Z,2026-11-27T23:00:00Z,EUR,1000.00,0.50,EUR,1.000000,999.50,2026-11-28,STL-S1,1000.00,0.00',
    'S4,acc-1,2026-11-27T23:00:00Z,2026-11-28T23:00:00Z,EUR,400.00,0.50,EUR,1.000000,399.50,2026-11-29,STL-S4,-25.10,-425.10',
  ].join('\n');

  it('reads the balance at the cut-off in CSV, and a file without the columns reads without a balance', async () => {
    const rows = value(await parseProviderSettlementsFile('settlements.csv', WITH_BALANCE));
    expect(rows.map((r) => r.balanceAtCutoff)).toEqual([100000n, -2510n]);
    // The same settlement from an older file without the columns: same identity, no balance, and the
    // content hash it always had.
    const older = value(await parseProviderSettlementsFile('older.csv', STL_CSV));
    expect(older[0]!.balanceAtCutoff).toBeNull();
    expect(older[0]!.identity).toBe(rows[0]!.identity);
    expect(older[0]!.contentHash).not.toBe(rows[0]!.contentHash);
    // An empty cell gives no balance for that row.
    const empty = WITH_BALANCE.replace(',STL-S1,1000.00,0.00', ',STL-S1,,');
    expect(value(await parseProviderSettlementsFile('s.csv', empty))[0]!.balanceAtCutoff).toBeNull();
  });

  it('reads it in XLSX through the same profile', async () => {
    const file = await xlsx(WITH_BALANCE.split('\n').map((line) => line.split(',')));
    const rows = value(await parseProviderSettlementsFile('settlements.xlsx', file));
    expect(rows.map((r) => [r.settlementId, r.balanceAtCutoff])).toEqual([
      ['S1', 100000n],
      ['S4', -2510n],
    ]);
    const older = await xlsx(STL_CSV.split('\n').map((line) => line.split(',')));
    expect(
      value(await parseProviderSettlementsFile('older.xlsx', older)).map((r) => r.balanceAtCutoff),
    ).toEqual([null, null, null]);
  });

  it('takes either column through a profile of its own, and refuses two that disagree', async () => {
    const base = builtInProfile('provider-settlements');
    const onlyAfter = {
      ...base,
      name: 'after-only',
      columns: { ...base.columns, balanceAtCutoff: undefined },
      optionalColumns: undefined,
    };
    const rows = value(
      await parseProviderSettlementsFile('s.csv', WITH_BALANCE, {
        profile: value(parseProfile('p', onlyAfter)),
      }),
    );
    // What the payout left plus what it took.
    expect(rows.map((r) => r.balanceAtCutoff)).toEqual([100000n, -2510n]);
    // Named but not optional: a file without the column is refused, naming it.
    expect(
      refusal(
        await parseProviderSettlementsFile('old.csv', STL_CSV, {
          profile: value(parseProfile('p', onlyAfter)),
        }),
      ),
    ).toBe('old.csv: header: has no column "balance_after" (the profile\'s balanceAfter)');
    expect(
      refusal(
        await parseProviderSettlementsFile(
          's.csv',
          WITH_BALANCE.replace(',-25.10,-425.10', ',-25.10,-425.00'),
        ),
      ),
    ).toBe(
      's.csv: row 3: the balance after -425.00 is not the balance at the cut-off -25.10 less the gross 400.00',
    );
    expect(
      refusal(
        await parseProviderSettlementsFile('s.csv', WITH_BALANCE.replace(',1000.00,0.00', ',1000.001,0.00')),
      ),
    ).toMatch(/^s\.csv: row 2: "?balance_at_cutoff"?/);
  });

  it('refuses optional columns that name no column or a field every row needs', () => {
    const base = builtInProfile('provider-settlements');
    expect(refusal(parseProfile('p.json', { ...base, optionalColumns: ['net'] }))).toBe(
      'p.json: field optionalColumns.0: names net, which every row needs',
    );
    expect(refusal(parseProfile('p.json', { ...base, optionalColumns: ['settlementId'] }))).toBe(
      'p.json: field optionalColumns.0: names settlementId, which every row needs',
    );
    const noBalance = { ...base, columns: { ...base.columns, balanceAfter: undefined } };
    expect(refusal(parseProfile('p.json', noBalance))).toBe(
      'p.json: field optionalColumns.1: names balanceAfter, which has no column',
    );
  });
});

describe('profiles', () => {
  it('loads a built-in profile for each kind', () => {
    for (const kind of IMPORT_KINDS) expect(builtInProfile(kind).kind).toBe(kind);
  });

  it('refuses a bad profile with one line naming the field and the rule', async () => {
    const good = { ...builtInProfile('bank-statement') } as Record<string, unknown>;
    const cases: [Record<string, unknown>, string][] = [
      [
        { ...good, number: { decimal: '.', thousands: '.' } },
        'p.json: field number.thousands: must differ from the decimal separator',
      ],
      [
        { ...good, dateFormat: 'DD/MM/YY' },
        'p.json: field dateFormat: must hold YYYY, MM and DD once each (e.g. YYYY-MM-DD, DD.MM.YYYY)',
      ],
      [
        { ...good, identity: ['endToEndId', 'account'] },
        'p.json: field identity.1: names account, which has no column',
      ],
      [
        { ...good, columns: { amount: 'amount', currency: 'currency' } },
        'p.json: field columns.bookingDate: Invalid input: expected string, received undefined',
      ],
      [
        { ...good, sign: { convention: 'direction', column: 'dc', credit: [], debit: ['D'] } },
        'p.json: field sign.credit: must list at least one value',
      ],
      [
        { ...good, kind: 'bank' },
        "p.json: field kind: Invalid discriminator value. Expected 'bank-statement' | 'provider-transactions' | 'provider-settlements'",
      ],
      [{ ...good, extra: 1 }, 'p.json: profile: Unrecognized key: "extra"'],
    ];
    for (const [profile, message] of cases) expect(refusal(parseProfile('p.json', profile))).toBe(message);
    const path = join(dir, 'broken.json');
    writeFileSync(path, '{"kind": ');
    expect(refusal(await readProfileFile(path))).toMatch(/^.*broken\.json: is not JSON: /);
    expect(refusal(await readProfileFile(join(dir, 'missing.json')))).toMatch(
      /missing\.json: cannot be read \(ENOENT\)$/,
    );
    const file = join(dir, 'bank.json');
    writeFileSync(file, JSON.stringify(good));
    expect(value(await readProfileFile(file))).toEqual(builtInProfile('bank-statement'));
  });

  it('refuses a profile of another kind than the file', async () => {
    expect(
      refusal(
        await parseProviderTransactionsFile('t.csv', TX_CSV, {
          profile: builtInProfile('provider-settlements'),
        }),
      ),
    ).toBe(
      't.csv: the profile sandbox-provider-settlements reads provider-settlements files, not provider-transactions',
    );
  });
});
