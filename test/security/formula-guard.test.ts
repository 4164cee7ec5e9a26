/**
 * Spreadsheet formula injection through every CSV and workbook writer: text chosen by a merchant (its
 * invoice and external ids), by the provider (status and rejection reasons) or by a user (an exception's
 * assignee and comment) that starts like a formula comes out as inert text, read back from the files
 * (CSV text parsed, workbook cells read with exceljs), while strict decimal amounts stay numbers.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ExcelJS from 'exceljs';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listQueue } from '../../src/db/exceptions/queue.ts';
import { changeQueueItem } from '../../src/db/exceptions/queue-service.ts';
import { recordImport } from '../../src/db/imports/service.ts';
import { applyObservations, recordIntents } from '../../src/db/ledger/service.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import { DEFAULT_SLA_TABLE } from '../../src/domain/exception-sla.ts';
import type { Minor } from '../../src/domain/money.ts';
import { type Intent, NO_FACTS, type Observation } from '../../src/domain/observation.ts';
import type { EntityKind } from '../../src/domain/statuses.ts';
import { localDate } from '../../src/domain/zoned-time.ts';
import { queueCsv } from '../../src/reports/exception-csv.ts';
import { writeExceptionWorkbook } from '../../src/reports/exception-workbook.ts';
import type { Period } from '../../src/reports/period.ts';
import { writeSettlementWorkbook } from '../../src/reports/settlement-workbook.ts';
import { csvField, inertText, TableSheet, workbookWriter } from '../../src/reports/sheet-writer.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';

/** Formula payloads: each must come out as text a spreadsheet will not evaluate. */
const PAYLOADS = [
  '=1+1',
  '+cmd',
  "-1+cmd|' /C calc'!A0",
  '@SUM(1)',
  '\t=1+1',
  '\r=1+1',
  '-2+3',
  '=HYPERLINK("x")',
];
const FORMULA_START = /^[=+\-@\t\r]/;
const STRICT_NUMBER = /^-?\d+(\.\d+)?$/;

/** A cell text a spreadsheet would evaluate: starts like a formula and is not a strict number. */
const live = (text: string) => FORMULA_START.test(text) && !STRICT_NUMBER.test(text);

/** RFC 4180 fields of a CSV document (quoted fields may hold commas, quotes and line breaks). */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let i = 0;
  let quoted = false;
  while (i < text.length) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i += 2;
        continue;
      }
      if (c === '"') quoted = false;
      else field += c;
      i++;
      continue;
    }
    if (c === '"' && field === '') quoted = true;
    else if (c === ',') {
      row.push(field);
      field = '';
    } else if (c === '\r' && text[i + 1] === '\n') {
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
      i++;
    } else field += c;
    i++;
  }
  if (field !== '' || row.length > 0) {
    row.push(field);
    rows.push(row);
  }
  return rows;
}

/** Every text a workbook holds (string cells and link texts), with where it is; formulas apart. */
function workbookTexts(wb: ExcelJS.Workbook): { texts: string[]; formulas: string[]; numbers: number[] } {
  const texts: string[] = [];
  const formulas: string[] = [];
  const numbers: number[] = [];
  for (const ws of wb.worksheets) {
    ws.eachRow((row) => {
      row.eachCell((cell) => {
        const v = cell.value;
        if (typeof v === 'string') texts.push(v);
        else if (typeof v === 'number') numbers.push(v);
        else if (v && typeof v === 'object' && 'formula' in v) formulas.push(String(v.formula));
        else if (v && typeof v === 'object' && 'hyperlink' in v) texts.push(String(v.text));
      });
    });
  }
  return { texts, formulas, numbers };
}

function expectNoLiveText(texts: readonly string[], where: string): void {
  const offenders = texts.filter(live);
  expect(offenders, where).toEqual([]);
}

/**
 * Each payload is present, neutralised (a leading apostrophe, the rest intact). XML reads a carriage
 * return in text as a line feed, so a workbook gives `\r` back as `\n`.
 */
function expectPayloadsNeutralised(
  texts: readonly string[],
  payloads: readonly string[],
  where: string,
): void {
  const xml = where.includes('.xlsx');
  for (const p of payloads) {
    const written = `'${xml ? p.replace(/\r/g, '\n') : p}`;
    const found = texts.some((t) => t.includes(written));
    expect(found, `${where}: ${JSON.stringify(p)} written as '${JSON.stringify(p)}`).toBe(true);
  }
}

describe('the formula guard', () => {
  it('defuses every formula start and passes strict decimal numbers alone', () => {
    for (const p of PAYLOADS) {
      expect(inertText(p)).toBe(`'${p}`);
      expect(csvField(p).replace(/^"|"$/g, '').replace(/""/g, '"')).toBe(`'${p}`);
    }
    for (const n of ['-12.50', '-3', '0', '12.50', '-0.01', '123456789012345678.99']) {
      expect(inertText(n)).toBe(n);
      expect(csvField(n)).toBe(n);
    }
    // Looser numeric forms are not strict numbers.
    for (const loose of ['-1e3', '+5', '-1.', '-.5', '-1,5', '- 1', '-0x10', '-1\n']) {
      expect(inertText(loose)).toBe(`'${loose}`);
    }
    // Text not starting like a formula is left as it is.
    expect(inertText('acme =1+1')).toBe('acme =1+1');
    expect(inertText('')).toBe('');
  });

  it('every row a workbook writer adds, as an array or by column key, with links, is defused', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'payrecon-guard-'));
    try {
      const out = join(dir, 'rows.xlsx');
      const wb = workbookWriter(out);
      const ws = wb.addWorksheet('Rows');
      ws.columns = [{ key: 'a' }, { key: 'b' }, { key: 'c' }];
      for (const p of PAYLOADS) {
        ws.addRow([p, { text: p, hyperlink: 'https://payrecon.example/p' }, -12.5]).commit();
        ws.addRow({ a: p, b: '-12.50', c: { formula: 'A1', result: 0 } }).commit();
      }
      ws.commit();
      await wb.commit();
      const read = new ExcelJS.Workbook();
      await read.xlsx.readFile(out);
      const { texts, formulas, numbers } = workbookTexts(read);
      expectNoLiveText(texts, 'rows.xlsx');
      expectPayloadsNeutralised(texts, PAYLOADS, 'rows.xlsx');
      expect(texts.filter((t) => t === '-12.50')).toHaveLength(PAYLOADS.length);
      expect(numbers.filter((n) => n === -12.5)).toHaveLength(PAYLOADS.length);
      expect(formulas).toEqual(PAYLOADS.map(() => 'A1'));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('TableSheet: text cells of the workbook and its CSV are defused, amounts stay numbers', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'payrecon-guard-'));
    try {
      interface Row {
        text: string;
        amount: Minor;
        count: number;
      }
      const out = join(dir, 'table.xlsx');
      const wb = workbookWriter(out);
      const sheet = new TableSheet<Row>(
        wb,
        'Table',
        [
          { header: 'Text', key: 'text', type: 'text', cell: (r) => r.text, link: () => '/payments/1' },
          { header: 'Currency', key: 'currency', type: 'text', cell: (r) => r.text },
          { header: 'Amount', key: 'amount', type: 'money', total: true, cell: (r) => r.amount },
          { header: 'Count', key: 'count', type: 'int', total: true, cell: (r) => r.count },
        ],
        {
          timeZone: 'UTC',
          csvPath: join(dir, 'table.csv'),
          preamble: PAYLOADS,
          currencyKey: 'currency',
          linkBase: 'https://payrecon.example',
          print: { report: 'guard', period: 'now' },
        },
      );
      for (const text of PAYLOADS) sheet.add({ text, amount: -1250n, count: -3 });
      await sheet.finish();
      await wb.commit();

      const read = new ExcelJS.Workbook();
      await read.xlsx.readFile(out);
      const { texts, formulas, numbers } = workbookTexts(read);
      expectNoLiveText(texts, 'table.xlsx');
      expectPayloadsNeutralised(texts, PAYLOADS, 'table.xlsx');
      // The totals' SUMIF names each currency as an escaped string literal, never as formula text.
      for (const f of formulas) expect(f).toMatch(/^(SUMIF\([^"]*,"([^"]|"")*",[^"]*\)\+?)+$|^SUM\(/);
      expect(numbers).toContain(-12.5);
      expect(numbers).toContain(-3);

      const csv = parseCsv(await readFile(join(dir, 'table.csv'), 'utf8'));
      const fields = csv.flat();
      expectNoLiveText(fields, 'table.csv');
      expectPayloadsNeutralised(fields, PAYLOADS, 'table.csv');
      expect(csv.slice(1).map((r) => r[2])).toEqual(PAYLOADS.map(() => '-12.50'));
      expect(csv.slice(1).map((r) => r[3])).toEqual(PAYLOADS.map(() => '-3'));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('formula payloads through the report writers', () => {
  let t: TestDatabase;
  let dir: string;
  let period: Period;
  const ACCOUNT = 'acme';
  let seq = 0;

  const ob = (kind: EntityKind, entityId: string, status: string, extra: Partial<Observation> = {}) => {
    seq += 1;
    return {
      eventId: randomUUID(),
      kind,
      account: ACCOUNT,
      entityId,
      externalRef: null,
      status,
      observedAt: new Date(Date.now() - 600_000 + seq * 1000),
      source: 'webhook',
      currency: 'BRL',
      amount: null,
      ...NO_FACTS,
      feeOnPayer: false,
      details: {},
      ...extra,
    } satisfies Observation;
  };
  const intent = (kind: EntityKind, entityId: string, externalRef: string, amount: Minor): Intent => ({
    intentId: randomUUID(),
    operation: kind,
    account: ACCOUNT,
    externalRef,
    entityId,
    currency: 'BRL',
    amount,
    expectedFee: null,
    test: false,
    crypto: false,
    feeOnPayer: false,
    parentDepositId: null,
    outcome: 'created',
    createdAt: new Date(Date.now() - 900_000),
    request: {},
    response: null,
  });

  beforeAll(async () => {
    t = await createTestDatabase();
    dir = await mkdtemp(join(tmpdir(), 'payrecon-guard-'));
    const start = (await sql<{ now: Date }>`SELECT clock_timestamp() AS now`.execute(t.db)).rows[0]!.now;
    const intents: Intent[] = [];
    const first: Observation[] = [];
    const second: Observation[] = [];
    PAYLOADS.forEach((p, i) => {
      // A deposit whose invoice id is the payload, released early then cancelled with the payload as its
      // reason (an exception the queue lists), and a cashout of -12.50 rejected with the payload.
      const deposit = String(9001 + i);
      const cashout = String(9101 + i);
      intents.push(intent('deposit', deposit, p, 10_000n), intent('cashout', cashout, p, 1_250n));
      const dep = { externalRef: p, amount: 10_000n, feeAmount: 100n, feeCurrency: 'BRL' };
      first.push(ob('deposit', deposit, 'EARLY_RELEASED', dep));
      second.push(ob('deposit', deposit, 'CANCELLED', { ...dep, statusReason: p }));
      first.push(ob('cashout', cashout, 'PENDING', { externalRef: p }));
      second.push(
        ob('cashout', cashout, 'REJECTED', { externalRef: p, rejectionCode: p, rejectionReason: p }),
      );
    });
    await withLedgerTransaction(t.db, (trx) => recordIntents(trx, intents));
    await withLedgerTransaction(t.db, (trx) => applyObservations(trx, first));
    await withLedgerTransaction(t.db, (trx) => applyObservations(trx, second));
    const { rows } = await sql<{ id: string }>`SELECT id::text AS id FROM exceptions ORDER BY id`.execute(
      t.db,
    );
    expect(rows.length).toBeGreaterThan(0);
    for (const [i, r] of rows.entries()) {
      const p = PAYLOADS[i % PAYLOADS.length]!;
      await changeQueueItem(t.db, r.id, { kind: 'assign', assignee: p, note: null }, p, new Date());
      await changeQueueItem(t.db, r.id, { kind: 'comment', note: p }, p, new Date());
    }
    // A settlement per payload, the payload its id and its bank reference, booked by its import.
    const valueDate = localDate(new Date(), 'UTC');
    await recordImport(t.db, {
      kind: 'provider-settlements',
      fileName: 'settlements.csv',
      sha256: '0'.repeat(64),
      profile: null,
      importedBy: 'guard',
      rows: PAYLOADS.map((p, i) => ({
        identity: `guard-${i}`,
        content_hash: `guard-${i}`,
        settlement_id: p,
        account: 'acme',
        period_start: null,
        period_end: null,
        currency: 'BRL',
        gross: '10.00',
        fees: '0.50',
        settlement_currency: 'BRL',
        rate: '1',
        net: '9.50',
        value_date: valueDate,
        bank_reference: p,
      })),
    });
    const end = (await sql<{ now: Date }>`SELECT clock_timestamp() AS now`.execute(t.db)).rows[0]!.now;
    const today = localDate(end, 'UTC');
    period = { from: today, to: today, start, end, timeZone: 'UTC', cutoff: '00:00' };
  });

  afterAll(async () => {
    await t?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  async function readCsvs(csvDir: string): Promise<Map<string, string[][]>> {
    const out = new Map<string, string[][]>();
    for (const f of await readdir(csvDir)) out.set(f, parseCsv(await readFile(join(csvDir, f), 'utf8')));
    return out;
  }

  it('settlement workbook and its CSVs', async () => {
    const out = join(dir, 'settlement.xlsx');
    await writeSettlementWorkbook(t.db, {
      period,
      account: null,
      out,
      csvDir: join(dir, 'settlement-csv'),
      links: 'https://payrecon.example',
    });
    const wb = new ExcelJS.Workbook();
    await wb.xlsx.readFile(out);
    const { texts, numbers } = workbookTexts(wb);
    expectNoLiveText(texts, 'settlement.xlsx');
    expectPayloadsNeutralised(texts, PAYLOADS, 'settlement.xlsx');
    // The cashouts' reservation of 12.50 is a number in the journal, with its sign.
    expect(numbers).toContain(-12.5);
    const csvs = await readCsvs(join(dir, 'settlement-csv'));
    expect([...csvs.keys()].sort()).toEqual(
      [
        'cashouts.csv',
        'crypto-journal.csv',
        'deposits.csv',
        'journal.csv',
        'refunds.csv',
        'settlements.csv',
        'test-journal.csv',
      ].sort(),
    );
    const all = [...csvs.values()].flat(2);
    expectNoLiveText(all, 'settlement CSVs');
    expectPayloadsNeutralised(all, PAYLOADS, 'settlement CSVs');
    expect(all).toContain('-12.50');
    expectPayloadsNeutralised(csvs.get('cashouts.csv')!.flat(), PAYLOADS, 'cashouts.csv');
    expectPayloadsNeutralised(csvs.get('deposits.csv')!.flat(), PAYLOADS, 'deposits.csv');
    expectPayloadsNeutralised(csvs.get('settlements.csv')!.flat(), PAYLOADS, 'settlements.csv');
  });

  it('exception workbook and its CSVs', async () => {
    const out = join(dir, 'exceptions.xlsx');
    await writeExceptionWorkbook(t.db, {
      period,
      account: null,
      out,
      csvDir: join(dir, 'exception-csv'),
      now: new Date(),
      links: 'https://payrecon.example',
    });
    const wb = new ExcelJS.Workbook();
    await wb.xlsx.readFile(out);
    const { texts } = workbookTexts(wb);
    expectNoLiveText(texts, 'exceptions.xlsx');
    expectPayloadsNeutralised(texts, PAYLOADS, 'exceptions.xlsx');
    const csvs = await readCsvs(join(dir, 'exception-csv'));
    expect(csvs.size).toBeGreaterThan(0);
    const all = [...csvs.values()].flat(2);
    expectNoLiveText(all, 'exception CSVs');
    expectPayloadsNeutralised(all, PAYLOADS, 'exception CSVs');
  });

  it('the exception queue export (page and API)', async () => {
    const now = new Date();
    const rows = await listQueue(t.db, {}, now, DEFAULT_SLA_TABLE, 10_000, null);
    expect(rows.length).toBeGreaterThan(0);
    const csv = parseCsv(queueCsv(rows, now).toString('utf8'));
    const fields = csv.flat();
    expectNoLiveText(fields, 'queue CSV');
    // Assignee, last comment and its author carry the payloads.
    expectPayloadsNeutralised(fields, PAYLOADS, 'queue CSV');
    const header = csv[0]!;
    const amount = header.indexOf('amount');
    for (const r of csv.slice(1)) expect(r[amount]).toMatch(STRICT_NUMBER);
  });
});
