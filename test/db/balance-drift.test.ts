/**
 * PROVIDER_BALANCE_DRIFT against a ledger fed from the sandbox: the sandbox takes deposits and cashouts
 * over four days (a cashout returned the day after it left, another released after the cut-off that
 * still counted it, deposits after a cut-off) and settles each day; the ledger reads every status from
 * the sandbox's API as the pipeline does (source poll, at the sandbox's time), and the reports are
 * downloaded twice (after the second cut-off, after the third), imported the way the settlement fetch
 * does. With the ledger as the provider has it, nothing drifts, and importing again changes nothing; a
 * ledger entry the provider never made, a provider balance edited in the file, and a move the ledger has
 * not read yet each raise exactly one PROVIDER_BALANCE_DRIFT with its facts, which resolves itself once
 * the figures agree again.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordImport } from '../../src/db/imports/service.ts';
import type { ImportFile } from '../../src/db/imports/tables.ts';
import { applyObservations, recordIntents } from '../../src/db/ledger/service.ts';
import { providerBalanceChecks } from '../../src/db/matching/balance-drift.ts';
import { runMatching } from '../../src/db/matching/service.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import { DEFAULT_MATCH_RULES } from '../../src/domain/matching.ts';
import { formatAmount } from '../../src/domain/money.ts';
import { type Intent, NO_FACTS, type Observation } from '../../src/domain/observation.ts';
import type { EntityKind } from '../../src/domain/statuses.ts';
import { parseProviderSettlementsFile, parseProviderTransactionsFile } from '../../src/imports/files.ts';
import { settlementRowRecord, transactionRowRecord } from '../../src/imports/records.ts';
import { createProviderClient } from '../../src/provider/client.ts';
import { readStatus } from '../../src/provider/to-observation.ts';
import { ManualClock } from '../../src/sandbox/clock.ts';
import { quiet, sandboxAccount } from '../producers/helpers.ts';
import { cashoutBody, cashoutCall, control, startTestSandbox } from '../sandbox/helpers.ts';
import { cents, groundTruth, NO_BANK_ANOMALIES, paidDeposit } from '../sandbox/settlement-helpers.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';
import { accepted } from './sandbox-cash-files.ts';

const MONDAY = Date.UTC(2026, 2, 2, 10, 0, 0);
const at = (day: number, hour: number) => Date.UTC(2026, 2, 2 + day, hour, 0, 0);
const ACCOUNT = 'sandbox';

interface Snapshot {
  /** Every reading of the entities, at the sandbox's time, up to the download. */
  observations: Observation[];
  transactions: Uint8Array;
  settlements: Uint8Array;
  /** When the files were downloaded (sandbox time). */
  now: Date;
}

interface Setup {
  intents: Intent[];
  /** After the second cut-off, and after the third. */
  first: Snapshot;
  second: Snapshot;
  truth: Awaited<ReturnType<typeof groundTruth>>;
  /** Deposit 3 (completed on day 1) and the cashout released after the second cut-off. */
  d3: string;
  c2: string;
}

let setup: Setup;
const databases: TestDatabase[] = [];

async function download(url: string): Promise<Uint8Array> {
  const res = await fetch(url);
  expect(res.status, url).toBe(200);
  return new Uint8Array(await res.arrayBuffer());
}

beforeAll(async () => {
  const s = await startTestSandbox({ clock: new ManualClock(MONDAY), seed: 46, bank: NO_BANK_ANOMALIES });
  try {
    const client = createProviderClient(sandboxAccount(s, { name: ACCOUNT }), { retries: 0, logger: quiet });
    const entities: { kind: EntityKind; id: string }[] = [];
    const intents: Intent[] = [];
    const observations: Observation[] = [];
    const deposit = async (amount: number) => {
      const id = String(await paidDeposit(s.url, amount));
      entities.push({ kind: 'deposit', id });
      return id;
    };
    const cashout = async (amount: number) => {
      const body = cashoutBody({ amount });
      const res = await cashoutCall(s.url, '/v3/cashout', body);
      expect(res.status).toBe(200);
      const id = String(res.json.cashout_id);
      entities.push({ kind: 'cashout', id });
      intents.push({
        intentId: `intent-${body.external_id}`,
        operation: 'cashout',
        account: ACCOUNT,
        externalRef: String(body.external_id),
        entityId: id,
        currency: 'BRL',
        amount: cents(amount.toFixed(2)),
        expectedFee: null,
        test: false,
        crypto: false,
        feeOnPayer: false,
        parentDepositId: null,
        outcome: 'created',
        createdAt: new Date(s.clock.now()),
        request: {},
        response: null,
      });
      return id;
    };
    // What the pipeline reads: every entity's status, at the sandbox's time.
    const readAll = async () => {
      for (const e of entities) {
        const reading = await readStatus(
          client,
          { kind: e.kind, account: ACCOUNT, entityId: e.id, externalRef: null },
          'poll',
          () => new Date(s.clock.now()),
        );
        // As the topic carries it: the provider's extra fields are not the ledger's concern here.
        observations.push({ ...reading, details: {} });
      }
    };
    const snapshot = async (): Promise<Snapshot> => {
      await readAll();
      const base = `${s.url}/_sandbox/reports`;
      return {
        observations: [...observations],
        transactions: await download(`${base}/transactions?account=${ACCOUNT}&format=csv`),
        settlements: await download(`${base}/settlements?account=${ACCOUNT}&format=xlsx`),
        now: new Date(s.clock.now()),
      };
    };

    // Day 0: two deposits and a cashout, all swept by the first settlement.
    await deposit(150);
    const c1 = await cashout(25.5);
    await deposit(80.05);
    await readAll();
    await s.clock.set(at(1, 1));
    // Day 1: the cashout is rejected (its money comes back), a deposit, a cashout that leaves.
    expect((await control(s.url, `/cashouts/${c1}/deliver`, {})).status).toBe(200);
    expect((await control(s.url, `/cashouts/${c1}/reject`, {})).status).toBe(200);
    const d3 = await deposit(300);
    const c2 = await cashout(40);
    const c3 = await cashout(33);
    await readAll();
    await s.clock.set(at(2, 1));
    // Day 2, after the second cut-off: the cashout it counted is rejected, a deposit comes in.
    expect((await control(s.url, `/cashouts/${c2}/deliver`, {})).status).toBe(200);
    expect((await control(s.url, `/cashouts/${c2}/reject`, {})).status).toBe(200);
    await deposit(50);
    await s.clock.set(at(2, 3));
    const first = await snapshot();
    // After the first download, another cashout of day 1 is rejected: only the next report lists it.
    await s.clock.set(at(2, 5));
    expect((await control(s.url, `/cashouts/${c3}/deliver`, {})).status).toBe(200);
    expect((await control(s.url, `/cashouts/${c3}/reject`, {})).status).toBe(200);
    await s.clock.set(at(3, 1));
    // Day 3: one more deposit after the third cut-off.
    await deposit(70);
    await s.clock.set(at(3, 2));
    const second = await snapshot();
    const truth = await groundTruth(s.url);
    setup = { intents, first, second, truth, d3, c2 };
  } finally {
    await s.close();
  }
}, 120_000);

afterAll(async () => {
  for (const t of databases.splice(0)) await t.drop();
});

const sha256 = (bytes: Uint8Array | string) => createHash('sha256').update(bytes).digest('hex');

async function transactionFiles(bytes: Uint8Array, parts = 1): Promise<ImportFile[]> {
  const rows = accepted(await parseProviderTransactionsFile('transactions.csv', bytes)).map(
    transactionRowRecord,
  );
  const size = Math.ceil(rows.length / parts);
  const files: ImportFile[] = [];
  for (let i = 0; i < parts; i++) {
    const slice = rows.slice(i * size, (i + 1) * size);
    files.push({
      kind: 'provider-transactions',
      fileName: `transactions-${i + 1}.csv`,
      sha256: sha256(JSON.stringify(slice.map((r) => r.identity))),
      profile: null,
      importedBy: 'test',
      rows: slice,
    });
  }
  return files;
}

async function settlementFile(bytes: Uint8Array): Promise<ImportFile> {
  return {
    kind: 'provider-settlements',
    fileName: 'settlements.xlsx',
    sha256: sha256(bytes),
    profile: null,
    importedBy: 'test',
    rows: accepted(await parseProviderSettlementsFile('settlements.xlsx', bytes)).map(settlementRowRecord),
  };
}

async function freshDb(): Promise<TestDatabase> {
  const t = await createTestDatabase();
  databases.push(t);
  await withLedgerTransaction(t.db, (trx) => recordIntents(trx, setup.intents));
  return t;
}

const apply = (t: TestDatabase, observations: readonly Observation[]) =>
  withLedgerTransaction(t.db, (trx) => applyObservations(trx, [...observations]));

const match = (t: TestDatabase, now: Date) =>
  runMatching(t.db, DEFAULT_MATCH_RULES, { now, reportAccount: ACCOUNT });

/** The ledger as the provider has it at the first download, and that download's files imported. */
async function firstDownload(t: TestDatabase, parts = 1): Promise<void> {
  await apply(t, setup.first.observations);
  for (const file of await transactionFiles(setup.first.transactions, parts)) await recordImport(t.db, file);
  await recordImport(t.db, await settlementFile(setup.first.settlements));
}

async function drifts(t: TestDatabase) {
  return t.db
    .selectFrom('exceptions')
    .selectAll()
    .where('type', '=', 'PROVIDER_BALANCE_DRIFT')
    .orderBy('id')
    .execute();
}

/** The settlement of the n-th cut-off (from 0) as the ground truth has it. */
const settlement = (n: number) => setup.truth.settlements[n]!;

/** A deposit the provider never made, released early at the sandbox's time `when`. */
function phantom(status: string, when: number): Observation {
  return {
    eventId: `phantom-${status}`,
    kind: 'deposit',
    account: ACCOUNT,
    entityId: '990000001',
    externalRef: 'phantom-invoice',
    status,
    observedAt: new Date(when),
    source: 'poll',
    currency: 'BRL',
    amount: 12_34n,
    ...NO_FACTS,
    details: {},
  };
}

describe('the provider balance against the ledger', () => {
  it('finds no drift with the sandbox files, at each cut-off checked, and a reimport changes nothing', async () => {
    expect(setup.truth.settlements).toHaveLength(3);
    const t = await freshDb();
    await firstDownload(t);
    const run = await match(t, setup.first.now);
    expect(run.exceptions.raised.PROVIDER_BALANCE_DRIFT).toBeUndefined();
    const [check] = await providerBalanceChecks(t.db);
    // The latest cut-off the transactions report reaches: the second settlement's.
    expect(check).toMatchObject({
      merchantAccount: ACCOUNT,
      currency: 'BRL',
      settlementId: settlement(1).settlement_id,
      cutoff: new Date(settlement(1).period_end),
      provider: cents(settlement(1).gross),
      difference: 0n,
    });
    // The cashout released and the deposit made after the cut-off are taken back to it; the third
    // settlement is not in this download.
    expect(check!.basis.movedFromCutoff).toBe(4000n + (5000n - 75n));
    expect(check!.basis.settledFromCutoff).toBe(cents(settlement(1).gross));
    expect(check!.basis.notYetReported).toBe(0n);
    // Nothing else differs: every row names its payment and agrees with it.
    const open = await t.db
      .selectFrom('exceptions')
      .select(['type'])
      .where('state', '<>', 'resolved')
      .execute();
    expect(open.filter((e) => e.type !== 'SETTLEMENT_NOT_RECEIVED')).toEqual([]);

    // The ledger reads what happened after the download (a cashout of day 1 released, a deposit of day
    // 3) before the next report lists it: neither is placed before the cut-off.
    await apply(t, setup.second.observations);
    await match(t, setup.second.now);
    const [ahead] = await providerBalanceChecks(t.db);
    expect(ahead).toMatchObject({ settlementId: settlement(1).settlement_id, difference: 0n });
    expect(ahead!.basis.movedFromCutoff).toBe(check!.basis.movedFromCutoff + 3300n);
    expect(ahead!.basis.notYetReported).toBe(7000n - 105n);

    // The later download: the third cut-off is checked, and agrees.
    for (const file of await transactionFiles(setup.second.transactions)) await recordImport(t.db, file);
    await recordImport(t.db, await settlementFile(setup.second.settlements));
    await match(t, setup.second.now);
    const [later] = await providerBalanceChecks(t.db);
    expect(later).toMatchObject({ settlementId: settlement(2).settlement_id, difference: 0n });
    // Every file again, in another order: the same check, no exception.
    await recordImport(t.db, await settlementFile(setup.first.settlements));
    for (const file of await transactionFiles(setup.first.transactions, 2)) await recordImport(t.db, file);
    await recordImport(t.db, await settlementFile(setup.second.settlements));
    const again = await match(t, setup.second.now);
    expect(again.exceptions.raised.PROVIDER_BALANCE_DRIFT).toBeUndefined();
    expect(await providerBalanceChecks(t.db)).toEqual([later]);
    expect(await drifts(t)).toEqual([]);
  }, 60_000);

  it('raises one drift for a ledger entry the provider never made, resolved once the ledger undoes it', async () => {
    const t = await freshDb();
    // Booked before the report was downloaded, named by no row of it: the ledger holds 12.34 BRL more.
    await apply(t, [phantom('EARLY_RELEASED', at(1, 12))]);
    // The report in two files: the ledger's entries precede the last report but one.
    await firstDownload(t, 2);
    const run = await match(t, setup.first.now);
    expect(run.exceptions.raised.PROVIDER_BALANCE_DRIFT).toBe(1);
    const provider = cents(settlement(1).gross);
    const [drift] = await drifts(t);
    expect(drift).toMatchObject({
      merchant_account: ACCOUNT,
      entity_kind: 'settlement',
      entity_id: settlement(1).settlement_id,
      state: 'open',
      severity: 'high',
    });
    expect(drift!.details).toMatchObject({
      settlementId: settlement(1).settlement_id,
      currency: 'BRL',
      cutoff: new Date(settlement(1).period_end).toISOString(),
      provider: formatAmount(provider),
      ledger: formatAmount(provider + 1234n),
      difference: '-12.34',
      ledgerBasis: { notYetReported: '0.00' },
      facts: { providerAmount: formatAmount(provider), providerCurrency: 'BRL' },
    });
    // Another run, the same file again: still the one exception, not counted again.
    await recordImport(t.db, await settlementFile(setup.first.settlements));
    await match(t, setup.first.now);
    const [same] = await drifts(t);
    expect(same).toMatchObject({ id: drift!.id, state: 'open', count: 1 });

    // The provider says the deposit failed: the ledger takes the credit back, and the figures agree.
    await apply(t, [phantom('DECLINED', at(2, 2))]);
    const fixed = await match(t, setup.first.now);
    expect(fixed.exceptions.raised.PROVIDER_BALANCE_DRIFT).toBeUndefined();
    const [resolved] = await drifts(t);
    expect(resolved).toMatchObject({ id: drift!.id, state: 'resolved', resolved_by: 'payrecon' });
    expect(resolved!.resolution_note).toBe(
      `agrees at the cut-off: the ledger's available is the provider's balance, ${formatAmount(provider)} BRL`,
    );
    const trail = await t.db
      .selectFrom('exception_events')
      .select(['actor', 'from_state', 'to_state'])
      .where('exception_id', '=', drift!.id)
      .execute();
    expect(trail).toEqual([{ actor: 'payrecon', from_state: 'open', to_state: 'resolved' }]);
    // Reimported, nothing changes.
    for (const file of await transactionFiles(setup.first.transactions)) await recordImport(t.db, file);
    await recordImport(t.db, await settlementFile(setup.first.settlements));
    await match(t, setup.first.now);
    expect(await drifts(t)).toEqual([resolved]);
    // A payment the ledger first books after the last report but one may be one the next report lists:
    // it is not placed before the cut-off yet.
    await apply(t, [{ ...phantom('EARLY_RELEASED', at(2, 2)), eventId: 'new', entityId: '990000002' }]);
    await match(t, setup.first.now);
    expect(await drifts(t)).toEqual([resolved]);
    expect((await providerBalanceChecks(t.db))[0]).toMatchObject({
      difference: 0n,
      basis: { notYetReported: 1234n },
    });
  }, 60_000);

  it('raises one drift for a balance edited in the file, resolved by the next cut-off that agrees', async () => {
    const t = await freshDb();
    await apply(t, setup.first.observations);
    for (const file of await transactionFiles(setup.first.transactions)) await recordImport(t.db, file);
    const edited = await settlementFile(setup.first.settlements);
    if (edited.kind !== 'provider-settlements') throw new Error('a settlement file');
    const row = edited.rows.find((r) => r.settlement_id === settlement(1).settlement_id)!;
    row.balance_at_cutoff = formatAmount(cents(String(row.balance_at_cutoff)) + 100n);
    await recordImport(t.db, { ...edited, sha256: sha256('edited') });
    await match(t, setup.first.now);
    const [drift] = await drifts(t);
    expect(drift).toMatchObject({ entity_id: settlement(1).settlement_id, state: 'open' });
    expect(drift!.details).toMatchObject({ difference: '1.00', ledgerBasis: { notYetReported: '0.00' } });

    await apply(t, setup.second.observations);
    for (const file of await transactionFiles(setup.second.transactions)) await recordImport(t.db, file);
    await recordImport(t.db, await settlementFile(setup.second.settlements));
    const next = await match(t, setup.second.now);
    expect(next.exceptions.raised.PROVIDER_BALANCE_DRIFT).toBeUndefined();
    const all = await drifts(t);
    expect(all).toHaveLength(1);
    expect(all[0]).toMatchObject({ id: drift!.id, state: 'resolved', resolved_by: 'payrecon' });
    expect(all[0]!.resolution_note).toBe(
      `checked at the later cut-off of settlement ${settlement(2).settlement_id} ` +
        `(${new Date(settlement(2).period_end).toISOString()}): the ledger's available is the provider's ` +
        `balance, ${settlement(2).gross} BRL`,
    );
  }, 60_000);

  it('raises one drift while the ledger has not read a move made before the cut-off, resolved once it has', async () => {
    const t = await freshDb();
    // Deposit 3 completed before the second cut-off, but the ledger read it only as pending.
    const late = setup.first.observations.filter(
      (o) => o.kind === 'deposit' && o.entityId === setup.d3 && o.status !== 'PENDING',
    );
    expect(late.length).toBeGreaterThan(0);
    await apply(t, [
      ...setup.first.observations.filter((o) => !late.includes(o)),
      { ...late[0]!, eventId: 'pending-read', status: 'PENDING' },
    ]);
    for (const file of await transactionFiles(setup.first.transactions)) await recordImport(t.db, file);
    await recordImport(t.db, await settlementFile(setup.first.settlements));
    await match(t, setup.first.now);
    const [drift] = await drifts(t);
    const d3Net = 30000n - 450n;
    expect(drift).toMatchObject({ entity_id: settlement(1).settlement_id, state: 'open' });
    expect(drift!.details).toMatchObject({ difference: formatAmount(d3Net) });

    // The ledger reads it: the next run finds the figures equal.
    await apply(t, late);
    const caught = await match(t, setup.first.now);
    expect(caught.exceptions.resolved).toBeGreaterThan(0);
    expect(await drifts(t)).toMatchObject([{ id: drift!.id, state: 'resolved' }]);
    expect((await providerBalanceChecks(t.db))[0]!.difference).toBe(0n);
  }, 60_000);

  it('raises a drift only once the checks have differed for the ledger wait, and a check that agrees starts it again', async () => {
    const t = await freshDb();
    const late = setup.first.observations.filter(
      (o) => o.kind === 'deposit' && o.entityId === setup.d3 && o.status !== 'PENDING',
    );
    await apply(t, [
      ...setup.first.observations.filter((o) => !late.includes(o)),
      { ...late[0]!, eventId: 'pending-read', status: 'PENDING' },
    ]);
    for (const file of await transactionFiles(setup.first.transactions)) await recordImport(t.db, file);
    await recordImport(t.db, await settlementFile(setup.first.settlements));
    const waitMs = 300_000;
    const t0 = setup.first.now.getTime();
    const runAt = (ms: number) =>
      runMatching(t.db, DEFAULT_MATCH_RULES, {
        now: new Date(t0 + ms),
        reportAccount: ACCOUNT,
        ledgerWaitMs: waitMs,
      });
    const kept = () =>
      t.db.selectFrom('provider_balance_checks').select(['settlement_id', 'differs_since']).execute();

    // Differs from the first check: kept, not raised.
    expect((await runAt(0)).exceptions.raised.PROVIDER_BALANCE_DRIFT).toBeUndefined();
    expect(await kept()).toEqual([
      { settlement_id: settlement(1).settlement_id, differs_since: new Date(t0) },
    ]);
    const [first] = await providerBalanceChecks(t.db);
    expect(
      await t.db.selectFrom('provider_balance_checks').select(['provider', 'ledger']).executeTakeFirst(),
    ).toEqual({ provider: formatAmount(first!.provider), ledger: formatAmount(first!.ledger) });
    expect(first!.difference).toBe(30000n - 450n);
    expect((await runAt(waitMs - 1)).exceptions.raised.PROVIDER_BALANCE_DRIFT).toBeUndefined();
    expect(await drifts(t)).toEqual([]);

    // The ledger reads the move: the checks agree, the wait is over without an exception.
    await apply(t, late);
    await runAt(waitMs);
    expect(await kept()).toEqual([{ settlement_id: settlement(1).settlement_id, differs_since: null }]);
    expect(await drifts(t)).toEqual([]);

    // The provider's balance moves by 1.00 (its report corrected): a new wait starts, and the first run
    // after it raises one drift.
    const edited = await settlementFile(setup.first.settlements);
    if (edited.kind !== 'provider-settlements') throw new Error('a settlement file');
    const row = edited.rows.find((r) => r.settlement_id === settlement(1).settlement_id)!;
    row.balance_at_cutoff = formatAmount(cents(String(row.balance_at_cutoff)) + 100n);
    await t.db
      .deleteFrom('provider_settlement_rows')
      .where('settlement_id', '=', row.settlement_id)
      .execute();
    await recordImport(t.db, { ...edited, sha256: sha256('edited') });
    await runAt(waitMs + 1000);
    expect(await kept()).toEqual([
      { settlement_id: settlement(1).settlement_id, differs_since: new Date(t0 + waitMs + 1000) },
    ]);
    expect(await drifts(t)).toEqual([]);
    const raised = await runAt(2 * waitMs + 1000);
    expect(raised.exceptions.raised.PROVIDER_BALANCE_DRIFT).toBe(1);
    expect(await drifts(t)).toMatchObject([{ state: 'open', details: { difference: '1.00' } }]);
  }, 60_000);
});
