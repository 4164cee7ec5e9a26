/**
 * The importers read what the sandbox writes: every file kind downloaded over HTTP from a sandbox that
 * has settled for several days (deposits, cashouts rejected after a settlement, refunds, planted bank
 * anomalies; one account paid per currency, one converted into USD in another time zone), parsed with
 * the built-in profiles. No refusal; each statement balances; the settlement report holds every
 * settlement of the ground truth with its net; each bank credit names settlements; and one day's
 * statement gives the same line identities in camt.053 001.02, 001.08 and the bank CSV.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  parseBankStatementFile,
  parseProviderSettlementsFile,
  parseProviderTransactionsFile,
} from '../../src/imports/files.ts';
import type { ImportResult } from '../../src/imports/refusal.ts';
import type { BankStatement } from '../../src/imports/statement.ts';
import { ManualClock } from '../../src/sandbox/clock.ts';
import { control, oneShotBody, signed, startTestSandbox } from '../sandbox/helpers.ts';
import { cashout, cents, groundTruth, paidDeposit } from '../sandbox/settlement-helpers.ts';

const MONDAY = Date.UTC(2026, 2, 2, 10, 0, 0);
const DAYS = 12;
const dayStart = (n: number) => Date.UTC(2026, 2, 2 + n, 0, 0, 1);
const dateOf = (n: number) => new Date(Date.UTC(2026, 2, 2 + n)).toISOString().slice(0, 10);

const PLANTED = {
  lateCreditRate: 0.2,
  batchedCreditRate: 0.2,
  bankFeeRate: 0.2,
  missingCreditRate: 0.1,
  returnedCreditRate: 0.15,
  unrelatedLineRate: 0.6,
};

type Sandbox = Awaited<ReturnType<typeof startTestSandbox>>;
const open: Sandbox[] = [];

afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

const bankAccount = { beneficiary: 'Ana Silva', bank_code: '341', branch: '0001', account_number: '1234-5' };

/**
 * Several days of money: deposits, a refund, cashouts of which one is rejected after it was settled, and
 * an early-released deposit that expires after it was settled (its money and its fee go back).
 */
async function runDays(s: Sandbox, days: number, hour: number): Promise<void> {
  let rejectNext: number | null = null;
  for (let n = 0; n < days; n++) {
    if (n % 4 === 0) {
      // Released early, never paid in full: it expires on the clock, after it was settled.
      const early = await signed(s.url, '/v3/deposits', {
        body: oneShotBody({ amount: 70.1, early_release: true }),
      });
      expect(early.status).toBe(200);
      const id = early.json.deposit_id as number;
      expect((await control(s.url, `/deposits/${id}/pay`, {})).status).toBe(200);
    }
    const deposit = await paidDeposit(s.url, Number(((15000 + n * 1337) / 100).toFixed(2)));
    await paidDeposit(s.url, 80.05);
    if (rejectNext !== null) {
      expect((await control(s.url, `/cashouts/${rejectNext}/deliver`, {})).status).toBe(200);
      expect((await control(s.url, `/cashouts/${rejectNext}/reject`, {})).status).toBe(200);
      rejectNext = null;
    }
    if (n % 3 === 1) rejectNext = await cashout(s.url, 40.5);
    if (n % 4 === 2) {
      const refund = await signed(s.url, '/v3/refunds', {
        body: { deposit_id: deposit, amount: 12.3, bank_account: bankAccount },
      });
      expect(refund.status).toBe(200);
    }
    await s.clock.set(dayStart(n + 1) + hour * 3600_000);
  }
}

async function download(url: string): Promise<Uint8Array> {
  const res = await fetch(url);
  expect(res.status, url).toBe(200);
  return new Uint8Array(await res.arrayBuffer());
}

function accepted<T>(result: ImportResult<T>): T {
  if (!result.ok) throw new Error(`refused: ${result.refusal.message}`);
  return result.value;
}

interface BankAccountJson {
  id: string;
  account: string;
  currency: string;
}

async function checkSandbox(s: Sandbox): Promise<{ credits: number; converted: boolean }> {
  const truth = await groundTruth(s.url);
  expect(truth.settlements.length).toBeGreaterThan(DAYS / 2);
  const base = `${s.url}/_sandbox`;

  // Provider reports, CSV and XLSX: the same rows either way.
  const transactions = [];
  for (const format of ['csv', 'xlsx']) {
    const bytes = await download(`${base}/reports/transactions?account=sandbox&format=${format}`);
    transactions.push(accepted(await parseProviderTransactionsFile(`transactions.${format}`, bytes)));
  }
  const [txCsv, txXlsx] = transactions;
  expect(txCsv!.length).toBeGreaterThan(DAYS * 3);
  expect(txXlsx!.map((r) => [r.identity, r.contentHash])).toEqual(
    txCsv!.map((r) => [r.identity, r.contentHash]),
  );
  // A rejected cashout is two rows of one transaction: out, then back; so is an expired early release.
  const twice = txCsv!.filter((r) => r.type === 'cashout' && r.gross > 0n);
  expect(twice.length).toBeGreaterThan(0);
  const undone = txCsv!.filter((r) => r.type === 'deposit' && r.gross < 0n);
  expect(undone.length).toBeGreaterThan(0);
  // Its fee comes back on a row of its own: a fee column is never negative.
  for (const row of undone) {
    const fee = txCsv!.find(
      (r) => r.type === 'fee' && r.transactionId === row.transactionId && r.updatedAt === row.updatedAt,
    );
    expect(fee?.gross).toBeGreaterThan(0n);
    expect(row.fee).toBe(0n);
  }
  // Each settlement's row in the transactions report sweeps the settlement's gross.
  for (const st of truth.settlements) {
    const row = txCsv!.find((r) => r.type === 'settlement' && r.transactionId === st.settlement_id);
    expect(row?.gross).toBe(-cents(st.gross));
    // (The settlement's own fee row is charged in the settlement currency, not swept.)
    const swept = txCsv!.filter(
      (r) =>
        r.settlementId === st.settlement_id &&
        r.type !== 'settlement' &&
        r.transactionId !== `FEE-${st.settlement_id}`,
    );
    expect(swept.reduce((sum, r) => sum + r.net, 0n)).toBe(cents(st.gross));
  }

  const reports = [];
  for (const format of ['csv', 'xlsx']) {
    const bytes = await download(`${base}/reports/settlements?account=sandbox&format=${format}`);
    reports.push(accepted(await parseProviderSettlementsFile(`settlements.${format}`, bytes)));
  }
  const [stCsv, stXlsx] = reports;
  expect(stXlsx).toEqual(stCsv);
  expect(
    stCsv!.map((r) => [
      r.settlementId,
      r.currency,
      r.gross,
      r.rate,
      r.fees,
      r.net,
      r.bankReference,
      r.balanceAtCutoff,
    ]),
  ).toEqual(
    truth.settlements.map((st) => [
      st.settlement_id,
      st.currency,
      cents(st.gross),
      st.rate,
      cents(st.fees),
      cents(st.net),
      st.bank_reference,
      // The provider's balance at the cut-off: what was left unsettled, all of which the payout takes.
      cents(st.available) - cents(st.previously_settled),
    ]),
  );
  const references = new Map(stCsv!.map((r) => [r.bankReference, r.settlementId]));

  // Bank statements: every closed day, in the three formats.
  const bankAccounts = (await control(s.url, '/bank-accounts')).json as BankAccountJson[];
  expect(bankAccounts.length).toBeGreaterThan(0);
  let credits = 0;
  const creditedSettlements = new Set<string>();
  for (let n = 0; n < DAYS; n++) {
    const date = dateOf(n);
    for (const bank of bankAccounts.filter((b) => b.account === 'sandbox')) {
      const query = `${base}/bank-statements?account=sandbox&date=${date}&currency=${bank.currency}`;
      const read = async (format: string, account?: string): Promise<BankStatement[]> =>
        accepted(
          await parseBankStatementFile(
            `${date}.${format}`,
            await download(`${query}&format=${format}`),
            account === undefined ? {} : { account },
          ),
        );
      const v02 = await read('camt.053.001.02');
      const v08 = await read('camt.053.001.08');
      const csv = await read('csv', bank.id);
      expect(v02).toHaveLength(1);
      expect(v08).toHaveLength(1);
      for (const st of [...v02, ...v08]) {
        expect(st).toMatchObject({ account: bank.id, currency: bank.currency, pending: 0 });
        expect(st.opening! + st.credits + st.debits).toBe(st.closing);
      }
      const [a, b] = [v02[0]!, v08[0]!];
      const identities = (st: BankStatement) => st.lines.map((l) => [l.identity, l.amount, l.reversal]);
      expect(identities(b)).toEqual(identities(a));
      expect(b.lines.map((l) => l.endToEndIds)).toEqual(a.lines.map((l) => l.endToEndIds));
      expect([b.opening, b.closing, b.credits, b.debits]).toEqual([
        a.opening,
        a.closing,
        a.credits,
        a.debits,
      ]);
      // The bank CSV has no reversal flag and no statement without entries: same lines otherwise.
      if (a.lines.length === 0) expect(csv).toEqual([]);
      else {
        expect(csv).toHaveLength(1);
        const c = csv[0]!;
        expect(c.lines.map((l) => [l.identity, l.amount])).toEqual(
          a.lines.map((l) => [l.identity, l.amount]),
        );
        expect(c.lines.map((l) => l.endToEndIds)).toEqual(a.lines.map((l) => l.endToEndIds));
        expect([c.opening, c.closing]).toEqual([a.opening, a.closing]);
      }
      for (const line of a.lines) {
        // A credit with an end-to-end id names settlements of the report, one per transaction (the
        // unrelated lines carry NOTPROVIDED, read as none).
        if (line.amount <= 0n || line.endToEndIds.length === 0) continue;
        credits += 1;
        for (const id of line.endToEndIds) {
          const settlement = references.get(id);
          expect(settlement, `${date} ${line.reference} ${id}`).toBeDefined();
          creditedSettlements.add(settlement!);
        }
        const total = line.transactions.reduce((sum, t) => sum + (t.amount ?? 0n), 0n);
        const nets = line.endToEndIds.reduce(
          (sum, id) => sum + stCsv!.find((r) => r.bankReference === id)!.net,
          0n,
        );
        expect(total).toBe(nets);
      }
    }
  }
  // Every settlement is credited by the last day, but for the credits the bank never made.
  const missing = new Set(
    truth.bankAnomalies.filter((x) => x.kind === 'MISSING_CREDIT').flatMap((x) => x.settlementIds),
  );
  for (const st of truth.settlements) {
    if (missing.has(st.settlement_id) || st.value_date >= dateOf(DAYS - 1)) continue;
    expect(creditedSettlements.has(st.settlement_id), st.settlement_id).toBe(true);
  }
  return { credits, converted: stCsv!.some((r) => r.rate !== '1.000000') };
}

describe('the importers read the sandbox files', () => {
  it('reads every file kind of a sandbox paying per currency, with planted bank anomalies', async () => {
    const s = await startTestSandbox({ clock: new ManualClock(MONDAY), seed: 36, bank: PLANTED });
    open.push(s);
    await runDays(s, DAYS + 1, 1);
    const truth = await groundTruth(s.url);
    expect(new Set(truth.bankAnomalies.map((a) => a.kind)).size).toBeGreaterThanOrEqual(4);
    const { credits } = await checkSandbox(s);
    expect(credits).toBeGreaterThan(DAYS / 2);
  }, 120_000);

  it('reads every file kind of a sandbox converting into USD in another time zone', async () => {
    const s = await startTestSandbox({
      clock: new ManualClock(MONDAY),
      seed: 37,
      bank: PLANTED,
      defaultAccountSettlement: {
        timeZone: 'America/Sao_Paulo',
        settlement: { currency: 'USD', spreadBps: 200, fee: { fixed: '0.50', bps: 10 } },
      },
    });
    open.push(s);
    await runDays(s, DAYS + 1, 6);
    const { converted } = await checkSandbox(s);
    expect(converted).toBe(true);
  }, 120_000);
});
