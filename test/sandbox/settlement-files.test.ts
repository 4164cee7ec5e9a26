/**
 * What the sandbox's settlements produce, over HTTP: the transactions and settlement reports (CSV and
 * XLSX) tied row by row to the ground truth, the bank statements (camt.053 001.02 and 001.08 read with
 * the saxes XML parser, and the bank CSV) whose balances add up, every kind of planted bank anomaly
 * visible in the statements and named in the ground truth, the same for the same seed, and kept across a
 * restart on a data directory.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ExcelJS from 'exceljs';
import { afterEach, describe, expect, it } from 'vitest';
import { formatAmount } from '../../src/domain/money.ts';
import { ManualClock } from '../../src/sandbox/clock.ts';
import { control, get, signed, startTestSandbox } from './helpers.ts';
import {
  cashout,
  cents,
  child,
  children,
  csvOf,
  groundTruth,
  NO_BANK_ANOMALIES,
  paidDeposit,
  parseXml,
  type SettlementJson,
  settlementsOf,
  signedAmount,
  textAt,
  type XmlNode,
} from './settlement-helpers.ts';

const MONDAY = Date.UTC(2026, 2, 2, 10, 0, 0);
const DAY = 86_400_000;
const dayStart = (n: number) => Date.UTC(2026, 2, 2 + n, 0, 0, 1);
const dateOf = (n: number) => new Date(Date.UTC(2026, 2, 2 + n)).toISOString().slice(0, 10);

type Sandbox = Awaited<ReturnType<typeof startTestSandbox>>;
const open: Sandbox[] = [];
const dirs: string[] = [];

afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function start(options: Parameters<typeof startTestSandbox>[0] = {}): Promise<Sandbox> {
  const s = await startTestSandbox({
    clock: new ManualClock(MONDAY),
    seed: 21,
    bank: NO_BANK_ANOMALIES,
    ...options,
  });
  open.push(s);
  return s;
}

const bankAccount = { beneficiary: 'Ana Silva', bank_code: '341', branch: '0001', account_number: '1234-5' };

describe('sandbox settlement reports', () => {
  it('lists every movement with the settlement that swept it, in CSV and in XLSX', async () => {
    const s = await start();
    const tick = () => s.clock.advance(1000);
    const d1 = await paidDeposit(s.url, 100.5);
    await tick();
    const d2 = await paidDeposit(s.url, 200);
    await tick();
    const c1 = await cashout(s.url, 25.5);
    await tick();
    const refund = await signed(s.url, '/v3/refunds', {
      body: { deposit_id: d1, amount: 10, bank_account: bankAccount },
    });
    expect(refund.status).toBe(200);
    await s.clock.set(dayStart(1));
    // The cashout is rejected the next day: its money comes back in the second settlement.
    expect((await control(s.url, `/cashouts/${c1}/deliver`, {})).status).toBe(200);
    expect((await control(s.url, `/cashouts/${c1}/reject`, {})).status).toBe(200);
    await tick();
    const d3 = await paidDeposit(s.url, 300);
    await s.clock.set(dayStart(2));
    const d4 = await paidDeposit(s.url, 50); // not settled yet

    const truth = await groundTruth(s.url);
    expect(truth.settlements.map((x) => x.gross)).toEqual(['260.49', '321.00']);
    const rows = await csvOf(`${s.url}/_sandbox/reports/transactions?account=sandbox&format=csv`);
    const key = (r: Record<string, string>) => `${r.type}:${r.transaction_id}:${r.gross}:${r.settlement_id}`;
    expect(rows.map(key)).toEqual([
      `deposit:${d1}:100.50:7000001`,
      `deposit:${d2}:200.00:7000001`,
      `cashout:${c1}:-25.50:7000001`,
      `refund:${refund.json.refund_id}:-10.00:7000001`,
      'settlement:7000001:-260.49:7000001',
      'fee:FEE-7000001:-1.00:7000001',
      `cashout:${c1}:25.50:7000002`,
      `deposit:${d3}:300.00:7000002`,
      'settlement:7000002:-321.00:7000002',
      'fee:FEE-7000002:-1.00:7000002',
      `deposit:${d4}:50.00:`,
    ]);
    expect(rows[0]).toMatchObject({
      status: 'COMPLETED',
      currency: 'BRL',
      fee: '1.51',
      net: '98.99',
      invoice_id: expect.any(String),
    });
    expect(rows[6]).toMatchObject({ status: 'REJECTED', fee: '0.00', net: '25.50' });
    // Each settlement's gross is the sum of the nets it swept; the unsettled rows are what is left.
    for (const st of truth.settlements) {
      const swept = rows.filter(
        (r) => r.settlement_id === st.settlement_id && !['settlement', 'fee'].includes(r.type!),
      );
      expect(swept.reduce((sum, r) => sum + cents(r.net!), 0n)).toBe(cents(st.gross));
    }
    const brl = truth.balances.find((b) => b.currency === 'BRL')!;
    const movements = rows.filter((r) => !['settlement', 'fee'].includes(r.type!));
    expect(movements.reduce((sum, r) => sum + cents(r.net!), 0n)).toBe(cents(brl.available!));
    expect(movements.filter((r) => r.settlement_id === '').reduce((sum, r) => sum + cents(r.net!), 0n)).toBe(
      cents(brl.unsettled!),
    );

    // A window: the second local day only (the first payout is dated at its cut-off, that day's midnight).
    const second = await csvOf(
      `${s.url}/_sandbox/reports/transactions?account=sandbox&from=2026-03-03&to=2026-03-03`,
    );
    expect(second.map((r) => r.transaction_id)).toEqual(['7000001', 'FEE-7000001', String(c1), String(d3)]);

    const xlsx = await get(`${s.url}/_sandbox/reports/transactions?account=sandbox&format=xlsx`);
    expect(xlsx.status).toBe(200);
    const raw = await fetch(`${s.url}/_sandbox/reports/transactions?account=sandbox&format=xlsx`);
    const workbook = new ExcelJS.Workbook();
    await workbook.xlsx.load(Buffer.from(await raw.arrayBuffer()) as never);
    const sheet = workbook.worksheets[0]!;
    const sheetRows: string[][] = [];
    sheet.eachRow((row) => {
      const cells: string[] = [];
      row.eachCell({ includeEmpty: true }, (cell) => {
        expect(typeof cell.value === 'string' || cell.value === null).toBe(true);
        cells.push(cell.value === null ? '' : String(cell.value));
      });
      sheetRows.push(cells);
    });
    expect(sheetRows[0]).toEqual(Object.keys(rows[0]!));
    expect(sheetRows.slice(1).map((r) => r.slice(0, 11))).toEqual(
      rows.map((r) => Object.values(r).slice(0, 11)),
    );

    const report = await csvOf(`${s.url}/_sandbox/reports/settlements?account=sandbox`);
    expect(report).toEqual(
      truth.settlements.map((x) => ({
        settlement_id: x.settlement_id,
        account: x.account,
        period_start: x.period_start,
        period_end: x.period_end,
        currency: x.currency,
        gross: x.gross,
        fees: x.fees,
        settlement_currency: x.settlement_currency,
        rate: x.rate,
        net: x.net,
        value_date: x.value_date,
        bank_reference: x.bank_reference,
        // The balance left unsettled at the cut-off, all of which the payout takes.
        balance_at_cutoff: formatAmount(cents(x.available) - cents(x.previously_settled)),
        balance_after: '0.00',
      })),
    );
    for (const x of report) expect(x.balance_at_cutoff).toBe(x.gross);
    const reportXlsx = await fetch(`${s.url}/_sandbox/reports/settlements?account=sandbox&format=xlsx`);
    expect(reportXlsx.headers.get('content-type')).toContain('spreadsheetml');
    expect((await get(`${s.url}/_sandbox/reports/settlements`)).status).toBe(400);
    expect((await get(`${s.url}/_sandbox/reports/settlements?account=sandbox&format=pdf`)).status).toBe(400);
  });
});

interface Entry {
  version: string;
  date: string;
  ref: string;
  amount: bigint;
  reversal: boolean;
  txs: { e2e: string; amount: bigint }[];
  charges: bigint;
  sts: string;
  node: XmlNode;
}

/** Reads a camt.053 document: checks each statement's balances and returns its entries. */
function readCamt(xml: string, version: '02' | '08', date: string): Entry[] {
  const doc = parseXml(xml);
  expect(doc.name).toBe('Document');
  expect(doc.attrs.xmlns).toBe(`urn:iso:std:iso:20022:tech:xsd:camt.053.001.${version}`);
  const out: Entry[] = [];
  for (const stmt of children(child(doc, 'BkToCstmrStmt')!, 'Stmt')) {
    const bals = children(stmt, 'Bal');
    const bal = (code: string) => bals.find((b) => textAt(b, 'Tp', 'CdOrPrtry', 'Cd') === code)!;
    const opening = signedAmount(bal('OPBD'));
    const closing = signedAmount(bal('CLBD'));
    expect(textAt(bal('CLBD'), 'Dt', 'Dt')).toBe(date);
    const ntries = children(stmt, 'Ntry');
    expect(Number(textAt(stmt, 'TxsSummry', 'TtlNtries', 'NbOfNtries'))).toBe(ntries.length);
    let sum = 0n;
    for (const n of ntries) {
      const amount = signedAmount(n);
      sum += amount;
      const sts = version === '08' ? textAt(n, 'Sts', 'Cd') : textAt(n, 'Sts');
      const txs = children(child(n, 'NtryDtls')!, 'TxDtls').map((t) => ({
        e2e: textAt(t, 'Refs', 'EndToEndId'),
        amount: cents(textAt(t, 'AmtDtls', 'TxAmt', 'Amt')),
      }));
      if (version === '08') {
        for (const t of children(child(n, 'NtryDtls')!, 'TxDtls')) expect(textAt(t, 'Amt')).not.toBe('');
      }
      const chrgs = child(n, 'Chrgs');
      out.push({
        version,
        date: textAt(n, 'BookgDt', 'Dt'),
        ref: textAt(n, 'AcctSvcrRef'),
        amount,
        reversal: textAt(n, 'RvslInd') === 'true',
        txs,
        charges: chrgs ? cents(version === '08' ? textAt(chrgs, 'Rcrd', 'Amt') : textAt(chrgs, 'Amt')) : 0n,
        sts,
        node: n,
      });
    }
    // The statement's own proof: opening plus its booked entries is its closing balance.
    expect(opening + sum).toBe(closing);
  }
  return out;
}

async function runDays(s: Sandbox, days: number): Promise<void> {
  for (let n = 0; n < days; n++) {
    await paidDeposit(s.url, 100 + n * 7.25);
    if (n % 5 === 4) await cashout(s.url, 60);
    await s.clock.set(dayStart(n + 1) + 3600_000);
  }
}

const PLANTED = {
  lateCreditRate: 0.12,
  batchedCreditRate: 0.12,
  bankFeeRate: 0.12,
  missingCreditRate: 0.1,
  returnedCreditRate: 0.1,
  unrelatedLineRate: 0.5,
};

describe('sandbox bank statements', () => {
  it('plants every kind of bank anomaly, names each in the ground truth, and the statements show exactly that', async () => {
    const days = 45;
    const s = await start({ bank: PLANTED });
    await runDays(s, days);
    const truth = await groundTruth(s.url);
    const kinds = new Set(truth.bankAnomalies.map((a) => a.kind));
    expect([...kinds].sort()).toEqual(
      [
        'BANK_FEE',
        'BATCHED_CREDIT',
        'LATE_CREDIT',
        'MISSING_CREDIT',
        'RETURNED_CREDIT',
        'UNRELATED_LINE',
      ].sort(),
    );
    // A day the bank has not closed has no statement yet.
    const open409 = await get(`${s.url}/_sandbox/bank-statements?account=sandbox&date=${dateOf(days)}`);
    expect(open409.status).toBe(409);

    const entries: Entry[] = [];
    const csvLines: Record<string, string>[] = [];
    for (let n = 0; n < days; n++) {
      const date = dateOf(n);
      const v02 = await get(
        `${s.url}/_sandbox/bank-statements?account=sandbox&date=${date}&format=camt.053.001.02`,
      );
      const v08 = await get(
        `${s.url}/_sandbox/bank-statements?account=sandbox&date=${date}&format=camt.053.001.08`,
      );
      expect(v02.status).toBe(200);
      const e02 = readCamt(v02.text, '02', date);
      const e08 = readCamt(v08.text, '08', date);
      expect(e02.map((e) => [e.ref, e.amount, e.txs])).toEqual(e08.map((e) => [e.ref, e.amount, e.txs]));
      expect(new Set(e02.map((e) => e.sts))).toEqual(new Set(e02.length ? ['BOOK'] : []));
      entries.push(...e08);
      const csv = await csvOf(`${s.url}/_sandbox/bank-statements?account=sandbox&date=${date}&format=csv`);
      expect(csv.map((r) => [r.reference, cents(r.amount!)])).toEqual(e08.map((e) => [e.ref, e.amount]));
      csvLines.push(...csv);
    }
    // The CSV's running balance moves by each line's amount.
    for (let i = 1; i < csvLines.length; i++) {
      if (csvLines[i]!.booking_date === csvLines[i - 1]!.booking_date) {
        expect(cents(csvLines[i]!.balance_after!) - cents(csvLines[i - 1]!.balance_after!)).toBe(
          cents(csvLines[i]!.amount!),
        );
      }
    }

    expect(entries.length).toBeGreaterThan(days);
    const byE2e = (ref: string) => entries.filter((e) => e.txs.some((t) => t.e2e === ref));
    const anomaliesOf = (id: string) => truth.bankAnomalies.filter((a) => a.settlementIds.includes(id));
    const settlements = new Map<string, SettlementJson>(truth.settlements.map((x) => [x.settlement_id, x]));
    const explained = new Set<string>();
    for (const a of truth.bankAnomalies) {
      const st = a.settlementIds.map((id) => settlements.get(id)!);
      switch (a.kind) {
        case 'MISSING_CREDIT':
          expect(byE2e(st[0]!.bank_reference)).toEqual([]);
          break;
        case 'LATE_CREDIT': {
          const [e] = byE2e(st[0]!.bank_reference);
          expect(e).toMatchObject({ ref: a.bankRef, amount: cents(st[0]!.net), date: a.date });
          expect(Date.parse(a.date) - Date.parse(st[0]!.value_date)).toBe(DAY);
          explained.add(e!.ref);
          break;
        }
        case 'BATCHED_CREDIT': {
          const e = entries.find((x) => x.ref === a.bankRef)!;
          expect(e.txs.map((t) => t.e2e)).toEqual(st.map((x) => x.bank_reference));
          expect(e.amount).toBe(st.reduce((sum, x) => sum + cents(x.net), 0n));
          expect(textAt(e.node, 'NtryDtls', 'Btch', 'NbOfTxs')).toBe('2');
          explained.add(e.ref);
          break;
        }
        case 'BANK_FEE': {
          const e = entries.find((x) => x.ref === a.bankRef)!;
          expect(e.charges).toBe(cents(a.amount!));
          expect(e.amount).toBe(cents(st[0]!.net) - cents(a.amount!));
          explained.add(e.ref);
          break;
        }
        case 'RETURNED_CREDIT': {
          const [credit, back] = byE2e(st[0]!.bank_reference);
          expect(credit).toMatchObject({ amount: cents(st[0]!.net), reversal: false });
          expect(back).toMatchObject({
            ref: a.bankRef,
            amount: -cents(st[0]!.net),
            reversal: true,
            date: a.date,
          });
          explained.add(credit!.ref).add(back!.ref);
          break;
        }
        case 'UNRELATED_LINE': {
          const e = entries.find((x) => x.ref === a.bankRef)!;
          expect(e.amount).toBe(cents(a.amount!));
          expect(e.txs.every((t) => !t.e2e.startsWith('STL-'))).toBe(true);
          explained.add(e.ref);
          break;
        }
      }
    }
    // Every other settlement is credited once, in full, on its value date; no other line exists.
    const waiting: string[] = [];
    for (const st of truth.settlements) {
      if (anomaliesOf(st.settlement_id).length > 0) continue;
      const found = byE2e(st.bank_reference);
      if (found.length === 0) {
        waiting.push(st.settlement_id);
        continue;
      }
      expect(found).toHaveLength(1);
      expect(found[0]).toMatchObject({ amount: cents(st.net), date: st.value_date, reversal: false });
      explained.add(found[0]!.ref);
    }
    // Only the last payout may still wait for the one it is to be batched with.
    expect(waiting.length <= 1 && waiting.every((id) => id === truth.settlements.at(-1)!.settlement_id)).toBe(
      true,
    );
    expect(entries.filter((e) => !explained.has(e.ref)).map((e) => e.ref)).toEqual([]);

    // Text is escaped in the XML and read back as written.
    const rent = entries.find(
      (e) =>
        e.node.children.some((c) => c.name === 'NtryDtls') &&
        textAt(e.node, 'NtryDtls', 'TxDtls', 'RltdPties', 'Cdtr', 'Pty', 'Nm').startsWith('Smith'),
    );
    expect(rent && textAt(rent.node, 'NtryDtls', 'TxDtls', 'RltdPties', 'Cdtr', 'Pty', 'Nm')).toBe(
      'Smith & Sons Lettings <Unit 4>',
    );

    // The same seed and the same calls plant the same anomalies.
    const again = await start({ bank: PLANTED });
    await runDays(again, days);
    const truth2 = await groundTruth(again.url);
    expect(truth2.bankAnomalies).toEqual(truth.bankAnomalies);
    expect(truth2.settlements).toEqual(truth.settlements);
  }, 120_000);

  it('keeps settlements, bank entries and anomalies across a restart on a data directory', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sandbox-settle-'));
    dirs.push(dir);
    const first = await start({ dataDir: dir, bank: PLANTED });
    await runDays(first, 6);
    const before = await groundTruth(first.url);
    expect(before.settlements.length).toBeGreaterThan(0);
    const statement = (s: Sandbox) =>
      get(`${s.url}/_sandbox/bank-statements?account=sandbox&date=${dateOf(4)}&format=camt.053.001.08`);
    const xmlBefore = (await statement(first)).text;
    await first.close();
    open.splice(open.indexOf(first), 1);

    const second = await start({ dataDir: dir, bank: NO_BANK_ANOMALIES });
    expect(second.control.restored).not.toBeNull();
    const after = await groundTruth(second.url);
    expect(after.settlements).toEqual(before.settlements);
    expect(after.bankAnomalies).toEqual(before.bankAnomalies);
    expect(after.carryOvers).toEqual(before.carryOvers);
    // The stored bank settings won over the start-up ones.
    expect((await control(second.url, '/bank')).json).toMatchObject(PLANTED);
    expect((await statement(second)).text).toBe(xmlBefore);
    // Settling goes on from where it stopped: the next id, the period from the last cut-off.
    await paidDeposit(second.url, 80);
    await second.clock.set(dayStart(7) + 3600_000);
    const next = (await settlementsOf(second.url)).at(-1)!;
    const last = before.settlements.at(-1)!;
    expect(Number(next.settlement_id)).toBe(Number(last.settlement_id) + 1);
    expect(next.period_start).toBe(last.period_end);
  });
});
