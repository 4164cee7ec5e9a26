/**
 * A move after a settlement flows into the next one and matches there, end to end: on a sandbox day a
 * cashout is paid out and settled (settlement 1 sweeps it), and a deposit expires; the next day the
 * beneficiary's bank returns the cashout (REJECTED, 826) and the provider completes the expired deposit
 * by hand. The ledger reads every status through the provider client as the status fetcher does; each
 * day's transactions report, settlement report and bank statement are imported and matched as they come.
 * Settlement 2's gross carries the returned cashout and the late deposit; the transactions report keeps
 * the cashout's row in settlement 1 and adds its return in settlement 2, matched to the ledger's late
 * reversal; both settlements are booked and their bank credits matched; what the ledger has not settled
 * is the ground truth's unsettled balance, and the ledger verifies.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { recordImport } from '../../src/db/imports/service.ts';
import { applyObservations, recordIntents } from '../../src/db/ledger/service.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { runMatching } from '../../src/db/matching/service.ts';
import { balances } from '../../src/db/read-models/balances.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import { DEFAULT_MATCH_RULES } from '../../src/domain/matching.ts';
import type { Intent } from '../../src/domain/observation.ts';
import type { EntityKind } from '../../src/domain/statuses.ts';
import { fromRecord, toRecord } from '../../src/events/records.ts';
import { OBSERVATION_TOPIC } from '../../src/events/topics.ts';
import {
  parseBankStatementFile,
  parseProviderSettlementsFile,
  parseProviderTransactionsFile,
} from '../../src/imports/files.ts';
import { settlementRowRecord, statementRecord, transactionRowRecord } from '../../src/imports/records.ts';
import { createProviderClient, type ProviderClient } from '../../src/provider/client.ts';
import { readStatus } from '../../src/provider/to-observation.ts';
import { LATE_REJECTION_CODE } from '../../src/sandbox/automatic.ts';
import { ManualClock } from '../../src/sandbox/clock.ts';
import { quiet, sandboxAccount } from '../producers/helpers.ts';
import {
  cashoutBody,
  cashoutCall,
  control,
  oneShotBody,
  signed,
  startTestSandbox,
} from '../sandbox/helpers.ts';
import { cents, csvOf, groundTruth, NO_BANK_ANOMALIES } from '../sandbox/settlement-helpers.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';
import { accepted, sha256 } from './sandbox-cash-files.ts';

const ACCOUNT = 'sandbox';
/** Monday 2026-03-02, 10:00 UTC (the account settles daily at midnight UTC, value date T+1). */
const MONDAY = Date.UTC(2026, 2, 2, 10, 0, 0);
const at = (day: number, hour: number, minute = 0) => Date.UTC(2026, 2, 2 + day, hour, minute, 0);
const dateOf = (day: number) => new Date(Date.UTC(2026, 2, 2 + day)).toISOString().slice(0, 10);

let t: TestDatabase;
let sandbox: Awaited<ReturnType<typeof startTestSandbox>>;
let client: ProviderClient;
let bankAccounts: { id: string; account: string; currency: string }[] = [];

beforeEach(async () => {
  t = await createTestDatabase();
  sandbox = await startTestSandbox({ clock: new ManualClock(MONDAY), seed: 36, bank: NO_BANK_ANOMALIES });
  client = createProviderClient(sandboxAccount(sandbox, { name: ACCOUNT }), { retries: 0, logger: quiet });
  bankAccounts = [];
}, 60_000);

afterEach(async () => {
  await sandbox?.close();
  await t?.drop();
});

const now = () => new Date(sandbox.clock.now());

/** The ledger reads the entity's status from the provider, as the status fetcher does on a webhook. */
async function observe(kind: EntityKind, id: number, externalRef: string | null = null): Promise<void> {
  const observation = await readStatus(
    client,
    { kind, account: ACCOUNT, entityId: String(id), externalRef },
    'webhook',
    now,
  );
  // As it travels on its topic: through the Avro record and back.
  const consumed = fromRecord(OBSERVATION_TOPIC, toRecord(OBSERVATION_TOPIC, observation));
  await withLedgerTransaction(t.db, (trx) => applyObservations(trx, [consumed]));
}

/** The merchant's record of what it created (the ledger takes a cashout's amount from it). */
async function recordIntent(kind: EntityKind, id: number, ref: string, amount: bigint): Promise<void> {
  const intent: Intent = {
    intentId: `intent-${kind}-${id}`,
    operation: kind,
    account: ACCOUNT,
    externalRef: ref,
    entityId: String(id),
    currency: 'BRL',
    amount,
    expectedFee: null,
    test: false,
    crypto: false,
    feeOnPayer: false,
    parentDepositId: null,
    outcome: 'created',
    createdAt: now(),
    request: {},
    response: null,
  };
  await withLedgerTransaction(t.db, (trx) => recordIntents(trx, [intent]));
}

async function deposit(amount: number): Promise<{ id: number; ref: string }> {
  const ref = `inv-${amount}-${sandbox.clock.now()}`;
  const created = await signed(sandbox.url, '/v3/deposits', {
    body: oneShotBody({ amount, invoice_id: ref }),
  });
  expect(created.status, created.text).toBe(200);
  const id = Number(created.json.deposit_id);
  await recordIntent('deposit', id, ref, cents(amount.toFixed(2)));
  await observe('deposit', id);
  return { id, ref };
}

async function act(kind: 'deposits' | 'cashouts', id: number, action: string, body: object = {}) {
  const res = await control(sandbox.url, `/${kind}/${id}/${action}`, body);
  expect(res.status, res.text).toBe(200);
}

async function tick(ms: number): Promise<void> {
  await sandbox.clock.set(sandbox.clock.now() + ms);
}

async function download(path: string): Promise<Uint8Array> {
  const res = await fetch(`${sandbox.url}/_sandbox${path}`);
  expect(res.status, path).toBe(200);
  return new Uint8Array(await res.arrayBuffer());
}

/** Imports the transactions report of `day`, the whole settlement report and the day's statement. */
async function importDay(files: { transactions?: number; statement?: number }): Promise<void> {
  if (files.transactions !== undefined) {
    const day = dateOf(files.transactions);
    const bytes = await download(`/reports/transactions?account=${ACCOUNT}&from=${day}&to=${day}&format=csv`);
    await recordImport(t.db, {
      kind: 'provider-transactions',
      fileName: `transactions-${day}.csv`,
      sha256: sha256(bytes),
      profile: null,
      importedBy: 'test',
      rows: accepted(await parseProviderTransactionsFile('t.csv', bytes)).map(transactionRowRecord),
    });
  }
  const report = await download(`/reports/settlements?account=${ACCOUNT}&format=csv`);
  await recordImport(t.db, {
    kind: 'provider-settlements',
    fileName: 'settlements.csv',
    sha256: sha256(report),
    profile: null,
    importedBy: 'test',
    rows: accepted(await parseProviderSettlementsFile('s.csv', report)).map(settlementRowRecord),
  });
  if (files.statement !== undefined) {
    const day = dateOf(files.statement);
    bankAccounts = ((await control(sandbox.url, '/bank-accounts')).json as typeof bankAccounts)
      .filter((b) => b.account === ACCOUNT)
      .map((b) => ({ id: b.id, account: b.account, currency: b.currency }));
    for (const bank of bankAccounts) {
      const bytes = await download(
        `/bank-statements?account=${ACCOUNT}&date=${day}&currency=${bank.currency}&format=camt.053.001.08`,
      );
      await recordImport(t.db, {
        kind: 'bank-statement',
        fileName: `${day}.xml`,
        sha256: sha256(bytes),
        profile: null,
        importedBy: 'test',
        statements: accepted(await parseBankStatementFile(`${day}.xml`, bytes)).map(statementRecord),
      });
    }
  }
}

const match = () =>
  runMatching(t.db, DEFAULT_MATCH_RULES, {
    now: now(),
    bankAccounts,
    settlementGraceDays: 2,
    reportAccount: ACCOUNT,
  });

const MATCHING_TYPES = [
  'BANK_LINE_UNMATCHED',
  'SETTLEMENT_NOT_RECEIVED',
  'PROVIDER_REPORT_UNMATCHED',
  'LEDGER_NOT_IN_REPORT',
  'PROVIDER_REPORT_MISMATCH',
];

async function openMatchingExceptions() {
  const rows = await t.db
    .selectFrom('exceptions')
    .select(['type', 'entity_kind', 'entity_id', 'details'])
    .where('state', '<>', 'resolved')
    .where('type', 'in', MATCHING_TYPES)
    .execute();
  return rows.map((r) => `${r.type} ${r.entity_kind}:${r.entity_id} ${JSON.stringify(r.details)}`);
}

async function ledger(): Promise<Record<string, bigint>> {
  const rows = await balances(t.db, { merchantAccount: ACCOUNT, book: 'live' });
  return Object.fromEntries(rows.filter((r) => r.currency === 'BRL').map((r) => [r.account, r.balance]));
}

/** The live match members of a match that names this member. */
async function matchOf(side: string, identity: string): Promise<string[]> {
  const member = await t.db
    .selectFrom('match_members')
    .select('match_id')
    .where('side', '=', side as 'provider_row')
    .where('identity', '=', identity)
    .where('live', '=', true)
    .executeTakeFirst();
  if (!member) return [];
  const all = await t.db
    .selectFrom('match_members')
    .select(['side', 'identity'])
    .where('match_id', '=', member.match_id)
    .execute();
  return all.map((m) => `${m.side}:${m.identity}`).sort();
}

describe('a move after a settlement', () => {
  // The ledger reads the return before the report shows it, or after (the report shows it first, and the
  // row's status differs from the ledger's until the ledger reads it: the next run finds them agreeing).
  it.each([
    ['the ledger reads the return first', false],
    ['the report shows the return first', true],
  ])(
    'flows into the next settlement, shows in its report rows and matches there: %s',
    async (_, reportFirst) => {
      // Day 0: a deposit paid, a deposit left to expire, a cashout paid out.
      const paid = await deposit(500);
      await act('deposits', paid.id, 'pay');
      await observe('deposit', paid.id);
      await tick(60_000);
      const expired = await deposit(80);
      await tick(60_000);
      const body = cashoutBody({ amount: 120 });
      const externalId = String(body.external_id);
      const created = await cashoutCall(sandbox.url, '/v3/cashout', body);
      expect(created.status, created.text).toBe(200);
      const cashoutId = Number(created.json.cashout_id);
      await recordIntent('cashout', cashoutId, externalId, 12_000n);
      await observe('cashout', cashoutId, externalId);
      await tick(60_000);
      await act('cashouts', cashoutId, 'deliver');
      await act('cashouts', cashoutId, 'confirm');
      await observe('cashout', cashoutId, externalId);
      await tick(60_000);
      await act('deposits', expired.id, 'expire');
      await observe('deposit', expired.id);

      // Day 1, 01:00: settlement 1 swept day 0; its reports are imported and matched.
      await sandbox.clock.set(at(1, 1));
      let truth = await groundTruth(sandbox.url);
      expect(truth.settlements).toHaveLength(1);
      const first = truth.settlements[0]!;
      const depositFee = async (id: number) => {
        const res = await control(sandbox.url, `/deposits/${id}`);
        return cents(String(res.json.fee_amount ?? res.json.feeAmount));
      };
      const paidFee = await depositFee(paid.id);
      expect(cents(first.gross)).toBe(50_000n - paidFee - 12_000n);
      await importDay({ transactions: 0 });
      await match();
      expect(await openMatchingExceptions()).toEqual([]);

      // Day 1, 10:00: the beneficiary's bank returns the cashout; the provider completes the expired deposit.
      await sandbox.clock.set(at(1, 10));
      await act('cashouts', cashoutId, 'return', { code: LATE_REJECTION_CODE });
      if (!reportFirst) await observe('cashout', cashoutId, externalId);
      await tick(60_000);
      await act('deposits', expired.id, 'late-payment');
      await observe('deposit', expired.id);
      const lateFee = await depositFee(expired.id);
      const ledgerReadTheReturn = async () => {
        const mirror = await t.db
          .selectFrom('mirrors')
          .select(['status'])
          .where('entity_kind', '=', 'cashout')
          .where('entity_id', '=', String(cashoutId))
          .executeTakeFirstOrThrow();
        expect(mirror.status).toBe('REJECTED');
        const reversal = await t.db
          .selectFrom('journal_entries')
          .select(['effect', 'amount'])
          .where('entity_kind', '=', 'cashout')
          .where('entity_id', '=', String(cashoutId))
          .where('effect', '=', 'late_reversal')
          .execute();
        expect(reversal.map((r) => [r.effect, cents(String(r.amount))])).toEqual([
          ['late_reversal', 12_000n],
        ]);
      };
      if (!reportFirst) await ledgerReadTheReturn();

      // Day 2, 01:00: settlement 2 swept day 1: the returned cashout and the late deposit.
      await sandbox.clock.set(at(2, 1));
      truth = await groundTruth(sandbox.url);
      expect(truth.settlements).toHaveLength(2);
      const second = truth.settlements[1]!;
      expect(cents(second.previously_settled)).toBe(cents(first.gross));
      expect(cents(second.gross)).toBe(12_000n + 8_000n - lateFee);
      expect(cents(second.available)).toBe(cents(first.gross) + cents(second.gross));
      await importDay({ transactions: 1, statement: 1 });
      await match();
      if (reportFirst) {
        // The return's row says REJECTED while the ledger still holds the cashout COMPLETED: a report is a
        // snapshot of its time and COMPLETED can still turn REJECTED, so that is no difference; the
        // late-rejection watch reads the return.
        expect(await openMatchingExceptions()).toEqual([]);
        await observe('cashout', cashoutId, externalId);
        await ledgerReadTheReturn();
        await match();
      }
      expect(await openMatchingExceptions()).toEqual([]);

      // Day 3, 01:00: settlement 2's credit is in the day-2 statement.
      await sandbox.clock.set(at(3, 1));
      await importDay({ transactions: 2, statement: 2 });
      await match();
      expect(await openMatchingExceptions()).toEqual([]);

      // The transactions report: the cashout's row stays in settlement 1, its return is a row of settlement
      // 2; the late deposit is a row of settlement 2.
      const rows = await csvOf(`${sandbox.url}/_sandbox/reports/transactions?account=${ACCOUNT}&format=csv`);
      const cashoutRows = rows.filter((r) => r.type === 'cashout' && r.transaction_id === String(cashoutId));
      expect(cashoutRows.map((r) => [r.gross, r.settlement_id])).toEqual([
        ['-120.00', first.settlement_id],
        ['120.00', second.settlement_id],
      ]);
      const lateRows = rows.filter((r) => r.transaction_id === String(expired.id));
      expect(lateRows.map((r) => [r.type, r.gross, r.settlement_id])).toEqual([
        ['deposit', '80.00', second.settlement_id],
      ]);
      // Each settlement's rows sum to its gross.
      for (const s of [first, second]) {
        const swept = rows
          .filter((r) => r.settlement_id === s.settlement_id && r.type !== 'settlement' && r.type !== 'fee')
          .reduce((sum, r) => sum + cents(r.net!), 0n);
        expect(swept, s.settlement_id).toBe(cents(s.gross));
      }

      // Both report rows of the cashout matched the ledger's payment: the return with its late reversal.
      const stored = await t.db
        .selectFrom('provider_transaction_rows')
        .select(['identity', 'gross', 'settlement_id', 'status'])
        .where('transaction_id', '=', String(cashoutId))
        .orderBy('updated_at')
        .execute();
      expect(stored.map((r) => [cents(String(r.gross)), r.settlement_id, r.status])).toEqual([
        [-12_000n, first.settlement_id, 'COMPLETED'],
        [12_000n, second.settlement_id, 'REJECTED'],
      ]);
      const payment = `ledger_payment:cashout:${ACCOUNT}:${cashoutId}`;
      for (const row of stored) expect(await matchOf('provider_row', row.identity)).toContain(payment);
      // The whole report again (the cashout's first row now reads REJECTED): no line is new, nothing raised.
      const whole = await download(`/reports/transactions?account=${ACCOUNT}&format=csv`);
      const again = await recordImport(t.db, {
        kind: 'provider-transactions',
        fileName: 'transactions.csv',
        sha256: sha256(whole),
        profile: null,
        importedBy: 'test',
        rows: accepted(await parseProviderTransactionsFile('t.csv', whole)).map(transactionRowRecord),
      });
      expect(again.new).toBe(0);
      expect((await match()).byRule).toEqual({});
      expect(await openMatchingExceptions()).toEqual([]);
      // The ledger's own exceptions: the late moves, each once, in either order.
      const raised = await t.db
        .selectFrom('exceptions')
        .select(['type', 'entity_kind', 'entity_id', 'state', 'resolution_note'])
        .execute();
      expect(raised.map((e) => `${e.type} ${e.entity_kind}:${e.entity_id} ${e.state}`).sort()).toEqual([
        `LATE_COMPLETION deposit:${expired.id} open`,
        `LATE_REJECTION cashout:${cashoutId} open`,
      ]);

      // Both settlements booked and their credits matched: the bank holds both nets, nothing in transit.
      const settlementMatches = await t.db
        .selectFrom('match_members')
        .innerJoin('provider_settlement_rows', 'provider_settlement_rows.identity', 'match_members.identity')
        .select(['provider_settlement_rows.settlement_id'])
        .where('match_members.side', '=', 'settlement')
        .where('match_members.live', '=', true)
        .execute();
      expect(settlementMatches.map((m) => m.settlement_id).sort()).toEqual([
        first.settlement_id,
        second.settlement_id,
      ]);
      const books = await ledger();
      expect(books[`bank:${bankAccounts[0]!.id}`]).toBe(cents(first.net) + cents(second.net));
      expect(books.settlements_in_transit ?? 0n).toBe(0n);
      expect(books.settlement_fees).toBe(cents(first.fees) + cents(second.fees));

      // Day 3, 02:00: one more deposit, not settled yet: the ledger's available is what is left unsettled.
      await sandbox.clock.set(at(3, 2));
      const unsettled = await deposit(33);
      await act('deposits', unsettled.id, 'pay');
      await observe('deposit', unsettled.id);
      truth = await groundTruth(sandbox.url);
      const balance = truth.balances.find((b) => b.account === ACCOUNT && b.currency === 'BRL')!;
      expect(cents(balance.unsettled!)).toBe(3_300n - (await depositFee(unsettled.id)));
      expect((await ledger()).available).toBe(cents(balance.unsettled!));
      expect((await verifyLedger(t.db)).failures).toEqual([]);
    },
    120_000,
  );
});
