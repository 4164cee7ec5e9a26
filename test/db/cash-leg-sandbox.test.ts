/**
 * The cash leg from what the sandbox writes: a sandbox converting an account's BRL balance into USD settles
 * for several days with planted bank anomalies; its settlement report, downloaded over HTTP and imported
 * (twice), books every settlement of its ground truth; its camt.053 statements imported, each credit
 * naming settlements is matched to them, and the bank fees the ledger then holds are exactly the fees the
 * ground truth says the bank took. The ledger verifies throughout, balances to the cent.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bookBankMatch, reverseBankMatch } from '../../src/db/cash-leg/service.ts';
import { recordImport } from '../../src/db/imports/service.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { balances } from '../../src/db/read-models/balances.ts';
import { settlementsOfPeriod } from '../../src/db/read-models/settlements.ts';
import { parseBankStatementFile, parseProviderSettlementsFile } from '../../src/imports/files.ts';
import { settlementRowRecord, statementRecord } from '../../src/imports/records.ts';
import type { ImportResult } from '../../src/imports/refusal.ts';
import { ManualClock } from '../../src/sandbox/clock.ts';
import { control, startTestSandbox } from '../sandbox/helpers.ts';
import { cents, groundTruth, paidDeposit } from '../sandbox/settlement-helpers.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

const MONDAY = Date.UTC(2026, 2, 2, 10, 0, 0);
const DAYS = 8;
const dayStart = (n: number) => Date.UTC(2026, 2, 2 + n, 0, 0, 1);
const dateOf = (n: number) => new Date(Date.UTC(2026, 2, 2 + n)).toISOString().slice(0, 10);

let t: TestDatabase;
let sandbox: Awaited<ReturnType<typeof startTestSandbox>>;

beforeAll(async () => {
  t = await createTestDatabase();
  sandbox = await startTestSandbox({
    clock: new ManualClock(MONDAY),
    seed: 41,
    bank: {
      lateCreditRate: 0.2,
      batchedCreditRate: 0.2,
      bankFeeRate: 0.5,
      missingCreditRate: 0.1,
      returnedCreditRate: 0,
      unrelatedLineRate: 0.5,
    },
    defaultAccountSettlement: {
      timeZone: 'America/Sao_Paulo',
      settlement: { currency: 'USD', spreadBps: 200, fee: { fixed: '0.50', bps: 10 } },
    },
  });
  for (let n = 0; n <= DAYS; n++) {
    await paidDeposit(sandbox.url, Number(((15000 + n * 1337) / 100).toFixed(2)));
    await paidDeposit(sandbox.url, 80.05);
    await sandbox.clock.set(dayStart(n + 1) + 6 * 3600_000);
  }
}, 120_000);

afterAll(async () => {
  await sandbox?.close();
  await t?.drop();
});

function accepted<T>(result: ImportResult<T>): T {
  if (!result.ok) throw new Error(`refused: ${result.refusal.message}`);
  return result.value;
}

async function download(path: string): Promise<Uint8Array> {
  const res = await fetch(`${sandbox.url}/_sandbox${path}`);
  expect(res.status, path).toBe(200);
  return new Uint8Array(await res.arrayBuffer());
}

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

async function ledger(): Promise<Record<string, bigint>> {
  const rows = await balances(t.db, { merchantAccount: 'sandbox', book: 'live' });
  return Object.fromEntries(rows.map((r) => [`${r.currency}/${r.account}`, r.balance]));
}

async function verified(): Promise<void> {
  expect((await verifyLedger(t.db)).failures).toEqual([]);
}

describe('the cash leg from the sandbox files', () => {
  it('books every settlement of the report, converted at its rate, once however often imported', async () => {
    const truth = await groundTruth(sandbox.url);
    expect(truth.settlements.length).toBeGreaterThan(DAYS / 2);
    expect(truth.settlements.every((s) => s.currency === 'BRL' && s.settlement_currency === 'USD')).toBe(
      true,
    );
    const bytes = await download('/reports/settlements?account=sandbox&format=csv');
    const rows = accepted(await parseProviderSettlementsFile('settlements.csv', bytes)).map(
      settlementRowRecord,
    );
    const file = {
      kind: 'provider-settlements' as const,
      fileName: 'settlements.csv',
      sha256: sha256(bytes),
      profile: null,
      importedBy: 'ana',
      rows,
    };
    expect((await recordImport(t.db, file)).settlements).toEqual({
      booked: truth.settlements.length,
      already: 0,
      noAccount: 0,
    });
    expect((await recordImport(t.db, file)).settlements).toEqual({
      booked: 0,
      already: truth.settlements.length,
      noAccount: 0,
    });
    const sum = (pick: (s: (typeof truth.settlements)[number]) => string) =>
      truth.settlements.reduce((total, s) => total + cents(pick(s)), 0n);
    const now = await ledger();
    expect(now['BRL/available']).toBe(-sum((s) => s.gross));
    expect(now['BRL/fx_conversion']).toBe(sum((s) => s.gross));
    expect(now['USD/fx_conversion']).toBe(-sum((s) => s.converted));
    expect(now['USD/settlements_in_transit']).toBe(sum((s) => s.net));
    expect(now['USD/settlement_fees']).toBe(sum((s) => s.fees));
    await verified();
  });

  it('matches each bank credit to the settlements it names: the bank fees are the ground truth’s', async () => {
    const truth = await groundTruth(sandbox.url);
    const byReference = new Map(truth.settlements.map((s) => [s.bank_reference, s]));
    const bankAccounts = (await control(sandbox.url, '/bank-accounts')).json as {
      id: string;
      currency: string;
    }[];
    expect(bankAccounts.map((b) => b.currency)).toEqual(['USD']);
    const matched = new Set<string>();
    let credited = 0n;
    let nets = 0n;
    for (let n = 0; n < DAYS; n++) {
      for (const bank of bankAccounts) {
        const bytes = await download(
          `/bank-statements?account=sandbox&date=${dateOf(n)}&currency=${bank.currency}&format=camt.053.001.08`,
        );
        const statements = accepted(await parseBankStatementFile(`${dateOf(n)}.xml`, bytes));
        await recordImport(t.db, {
          kind: 'bank-statement',
          fileName: `${dateOf(n)}.xml`,
          sha256: sha256(bytes),
          profile: null,
          importedBy: 'ana',
          statements: statements.map(statementRecord),
        });
        for (const statement of statements) {
          for (const line of statement.lines) {
            if (line.amount <= 0n || line.reversal || line.endToEndIds.length === 0) continue;
            const settlements = line.endToEndIds.map((ref) => byReference.get(ref)!);
            expect(settlements.every(Boolean), line.reference ?? '').toBe(true);
            const booking = {
              matchId: `line:${line.identity}`,
              bankAccount: statement.account,
              account: 'sandbox',
              currency: line.currency,
              credited: line.amount,
              bankLineIdentity: line.identity,
              settlements: settlements.map((s) => ({
                settlementId: s.settlement_id,
                currency: s.settlement_currency,
                net: cents(s.net),
              })),
            };
            expect(await bookBankMatch(t.db, booking)).toEqual({ status: 'booked' });
            expect(await bookBankMatch(t.db, booking)).toEqual({ status: 'already' });
            for (const s of settlements) matched.add(s.settlement_id);
            credited += line.amount;
            nets += booking.settlements.reduce((total, s) => total + s.net, 0n);
          }
        }
      }
    }
    expect(matched.size).toBeGreaterThan(2);
    const fees = truth.bankAnomalies
      .filter((a) => a.kind === 'BANK_FEE' && a.settlementIds.every((id) => matched.has(id)))
      .reduce((total, a) => total + cents(a.amount!), 0n);
    expect(fees).toBeGreaterThan(0n);
    const allNets = truth.settlements.reduce((total, s) => total + cents(s.net), 0n);
    const now = await ledger();
    const bankAccount = `USD/bank:${bankAccounts[0]!.id}`;
    expect(now[bankAccount]).toBe(credited);
    expect(now['USD/bank_fees']).toBe(fees);
    expect(nets - credited).toBe(fees);
    expect(now['USD/settlements_in_transit']).toBe(allNets - nets);
    await verified();

    // An unmatch puts a credit's settlements back in transit, and its fee out of bank fees.
    const { rows } = await t.db
      .selectFrom('journal_entries')
      .select(['entity_id', 'amount', 'fee_amount'])
      .where('entity_kind', '=', 'bank_match')
      .where('fee_amount', 'is not', null)
      .orderBy('id')
      .execute()
      .then((r) => ({ rows: r }));
    const withFee = rows[0]!;
    // Each matched settlement names its bank line (the settlement workbook's and the payment page's read).
    const period = await settlementsOfPeriod(t.db, dateOf(0), dateOf(DAYS + 2), 'sandbox');
    expect(
      period
        .filter((s) => s.bankLine !== null)
        .map((s) => s.settlementId)
        .sort(),
    ).toEqual([...matched].sort());
    const lineOf = (id: string) => period.find((s) => s.settlementId === id)!.bankLine;
    const unmatched = truth.bankAnomalies.find(
      (a) => a.kind === 'BANK_FEE' && a.settlementIds.every((id) => matched.has(id)),
    )!;
    expect(lineOf(unmatched.settlementIds[0]!)).toMatchObject({ reference: unmatched.bankRef });
    expect(await reverseBankMatch(t.db, withFee.entity_id)).toEqual({ status: 'reversed' });
    const after = await ledger();
    expect(after['USD/bank_fees']).toBe(fees - cents(withFee.fee_amount!));
    expect(after[bankAccount]).toBe(credited - cents(withFee.amount));
    const unmatchedNow = await settlementsOfPeriod(t.db, dateOf(0), dateOf(DAYS + 2), 'sandbox');
    expect(unmatchedNow.filter((s) => s.bankLine !== null).length).toBeLessThan(matched.size);
    await verified();
  });
});
