/**
 * The merchant's intent is written ahead of the creation call (recordingClient): a recorder killed with
 * SIGKILL after the provider answered and before it recorded the answer leaves the pending intent, keyed
 * by the merchant's reference; after a restart the entity's first reading carries that reference and finds
 * it. Nothing doubled (one entity per creation at the sandbox, one intent per creation), nothing missing
 * (the cashout is booked with the intent's amount), and no false exception (UNKNOWN_TRANSACTION swept a
 * day later, no mismatch). Real parts: the sandbox over HTTP, PostgreSQL, the recorder a child process.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { outcomeUnknownEntityId, sweepExceptions } from '../../src/db/exceptions/sweep.ts';
import { applyObservations, recordIntents } from '../../src/db/ledger/service.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { balances } from '../../src/db/read-models/balances.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import { refundWriteAheadRef } from '../../src/domain/intent.ts';
import type { Intent } from '../../src/domain/observation.ts';
import { fromRecord, toRecord } from '../../src/events/records.ts';
import { OBSERVATION_TOPIC } from '../../src/events/topics.ts';
import { createProviderClient } from '../../src/provider/client.ts';
import { type EntityToRead, readStatus } from '../../src/provider/to-observation.ts';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/main.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { move, quiet, sandboxAccount, uniqueRef } from './helpers.ts';

const repo = join(import.meta.dirname, '../..');
let tdb: TestDatabase;
let sandbox: RunningSandbox;
const children = new Set<ChildProcess>();

beforeAll(async () => {
  tdb = await createTestDatabase();
  sandbox = await startSandbox({ seed: 17 });
});

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await sandbox?.close();
  await tdb?.drop();
});

/** Runs the recorder child; resolves with its output once `until` is printed (or it exits). */
function recorder(
  args: {
    deposits: string[];
    cashouts: string[];
    refunds?: { depositId: number; amount: string }[];
    hangOn: string | null;
  },
  until: RegExp,
): Promise<{ child: ChildProcess; out: string; match: RegExpExecArray }> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'test/producers/write-ahead-child.ts',
      JSON.stringify({ databaseUrl: tdb.url, url: sandbox.url, ccUrl: sandbox.ccUrl, ...args }),
    ],
    { cwd: repo, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.add(child);
  let out = '';
  return new Promise((resolve, reject) => {
    const look = () => {
      const match = until.exec(out);
      if (match) resolve({ child, out, match });
    };
    child.stdout!.on('data', (c) => {
      out += c;
      look();
    });
    child.stderr!.on('data', (c) => {
      out += c;
    });
    child.once('exit', (code) => reject(new Error(`recorder exited ${code} before ${until}: ${out}`)));
  });
}

describe('write-ahead intent', () => {
  it('survives a SIGKILL between the provider answer and the record: no doubled, missing or false exception', async () => {
    const [inv1, inv2, ext1, ext2] = [
      uniqueRef('wa-inv'),
      uniqueRef('wa-inv'),
      uniqueRef('wa-ext'),
      uniqueRef('wa-ext'),
    ];
    const killed = await recorder({ deposits: [inv1], cashouts: [ext1], hangOn: ext1 }, /ANSWERED (\d+)/);
    const exited = new Promise((r) => killed.child.once('exit', r));
    killed.child.kill('SIGKILL');
    await exited;
    const cashoutId = killed.match[1]!;

    // The restart: the recorder runs again (new creations), then every entity is read at the provider.
    await recorder({ deposits: [inv2], cashouts: [ext2], hangOn: null }, /DONE/);
    const engine = sandbox.control.deps.engine;
    expect([...engine.deposits.values()].map((d) => d.invoiceId).sort()).toEqual([inv1, inv2].sort());
    expect([...engine.cashouts.values()].map((c) => c.externalId).sort()).toEqual([ext1, ext2].sort());
    for (const d of engine.deposits.values()) await move(sandbox.url, 'deposit', d.id, 'COMPLETED');
    for (const c of engine.cashouts.values()) {
      await move(sandbox.url, 'cashout', c.id, 'DELIVERED');
      await move(sandbox.url, 'cashout', c.id, 'COMPLETED');
    }
    const client = createProviderClient(sandboxAccount(sandbox), { retries: 0, logger: quiet });
    const readings = [
      ...[...engine.deposits.values()].map((d) => ({ kind: 'deposit' as const, id: d.id, ref: d.invoiceId })),
      ...[...engine.cashouts.values()].map((c) => ({
        kind: 'cashout' as const,
        id: c.id,
        ref: c.externalId,
      })),
    ];
    for (const r of readings) {
      const o = await readStatus(
        client,
        { kind: r.kind, account: 'main', entityId: String(r.id), externalRef: r.ref },
        'poll',
      );
      // As the reconciler receives it: through the topic's record form.
      const received = fromRecord(OBSERVATION_TOPIC, toRecord(OBSERVATION_TOPIC, o));
      await withLedgerTransaction(tdb.db, (trx) => applyObservations(trx, [received]));
    }
    await sweepExceptions(tdb.db, new Date(Date.now() + 24 * 3_600_000));

    // One intent per creation; the killed one still pending, linked to its cashout by external_id.
    const intents = await tdb.db
      .selectFrom('intents')
      .select(['intent_id', 'external_ref', 'entity_id', 'outcome'])
      .orderBy('external_ref')
      .execute();
    expect(intents.map((i) => i.external_ref).sort()).toEqual([inv1, inv2, ext1, ext2].sort());
    const pending = intents.find((i) => i.external_ref === ext1)!;
    expect(pending).toMatchObject({ entity_id: null, outcome: 'unknown' });
    for (const i of intents.filter((x) => x.external_ref !== ext1)) expect(i.outcome).toBe('created');
    const mirrors = await tdb.db
      .selectFrom('mirrors')
      .select(['entity_kind', 'entity_id', 'intent_id', 'status'])
      .execute();
    expect(mirrors, JSON.stringify(mirrors)).toHaveLength(4);
    for (const m of mirrors) expect(m.intent_id, `${m.entity_kind} ${m.entity_id}`).not.toBeNull();
    expect(mirrors.find((m) => m.entity_kind === 'cashout' && m.entity_id === cashoutId)?.intent_id).toBe(
      pending.intent_id,
    );
    const exceptions = await tdb.db.selectFrom('exceptions').select(['type', 'entity_id']).execute();
    expect(exceptions).toEqual([]);
    // Both cashouts paid out at the intent's amount, both deposits credited; the ledger verifies.
    const payouts = (await balances(tdb.db)).filter((b) => b.account === 'payouts' && b.currency === 'BRL');
    expect(payouts.reduce((s, b) => s + b.balance, 0n)).toBe(80_00n);
    expect((await verifyLedger(tdb.db)).failures).toEqual([]);
  }, 120_000);

  it('completes a pending intent whatever the order its two records arrive in (two partitions)', async () => {
    const base = {
      operation: 'deposit' as const,
      account: 'main',
      currency: 'BRL',
      amount: 12_00n,
      expectedFee: null,
      test: false,
      crypto: false,
      feeOnPayer: false,
      parentDepositId: null,
      createdAt: new Date(),
      request: {},
    };
    const pair = (n: number) => {
      const ref = uniqueRef('wa-order');
      const pending = {
        ...base,
        intentId: `wa-${n}-${ref}`,
        externalRef: ref,
        entityId: null,
        outcome: 'unknown' as const,
        response: null,
      };
      const done = {
        ...pending,
        entityId: `39000000${n}`,
        outcome: 'created' as const,
        response: { deposit_id: n },
      };
      return { ref, pending, done };
    };
    const record = (intents: Parameters<typeof recordIntents>[1]) =>
      withLedgerTransaction(tdb.db, (trx) => recordIntents(trx, intents));
    const a = pair(1); // pending, then its completion
    await record([a.pending]);
    await record([a.done]);
    const b = pair(2); // the completion first, the pending record after it
    await record([b.done]);
    await record([b.pending]);
    const c = pair(3); // both in one batch, the pending one last
    await record([c.done, c.pending]);
    const rows = await tdb.db
      .selectFrom('intents')
      .select(['external_ref', 'entity_id', 'outcome'])
      .where('external_ref', 'in', [a.ref, b.ref, c.ref])
      .orderBy('entity_id')
      .execute();
    expect(rows).toEqual([
      { external_ref: a.ref, entity_id: '390000001', outcome: 'created' },
      { external_ref: b.ref, entity_id: '390000002', outcome: 'created' },
      { external_ref: c.ref, entity_id: '390000003', outcome: 'created' },
    ]);
  });

  it('writes a refund ahead under its deposit and amount: a SIGKILL after the answer loses nothing', async () => {
    const invoice = uniqueRef('wa-rf');
    await recorder({ deposits: [invoice], cashouts: [], hangOn: null }, /DONE/);
    const deposit = [...sandbox.control.deps.engine.deposits.values()].find((d) => d.invoiceId === invoice)!;
    await move(sandbox.url, 'deposit', deposit.id, 'COMPLETED');
    await observe({ kind: 'deposit', account: 'main', entityId: String(deposit.id), externalRef: invoice });

    const hangOn = refundWriteAheadRef(String(deposit.id), 60_00n);
    const killed = await recorder(
      { deposits: [], cashouts: [], refunds: [{ depositId: deposit.id, amount: '6000' }], hangOn },
      /ANSWERED (\d+)/,
    );
    const exited = new Promise((r) => killed.child.once('exit', r));
    killed.child.kill('SIGKILL');
    await exited;
    const refundId = killed.match[1]!;
    // The provider has one refund of the deposit; the ledger only its pending intent.
    const refunds = [...sandbox.control.deps.engine.refunds.values()].filter(
      (r) => r.depositId === deposit.id,
    );
    expect(refunds.map((r) => String(r.id))).toEqual([refundId]);
    const pending = await tdb.db
      .selectFrom('intents')
      .select(['intent_id', 'external_ref', 'entity_id', 'outcome', 'parent_deposit_id'])
      .where('operation', '=', 'refund')
      .where('parent_deposit_id', '=', String(deposit.id))
      .execute();
    expect(pending).toEqual([
      expect.objectContaining({ external_ref: hangOn, entity_id: null, outcome: 'unknown' }),
    ]);

    // Its first reading (no merchant reference) finds the intent by deposit and amount.
    await observe({ kind: 'refund', account: 'main', entityId: refundId, externalRef: null });
    const mirror = await tdb.db
      .selectFrom('mirrors')
      .select(['intent_id', 'status'])
      .where('entity_kind', '=', 'refund')
      .where('entity_id', '=', refundId)
      .executeTakeFirstOrThrow();
    expect(mirror.intent_id).toBe(pending[0]!.intent_id);
    await sweepExceptions(tdb.db, new Date(Date.now() + 24 * 3_600_000));
    const exceptions = await tdb.db.selectFrom('exceptions').select(['type', 'entity_id']).execute();
    expect(exceptions).toEqual([]);
    const reserved = (await balances(tdb.db)).filter((b) => b.account === 'reserved' && b.currency === 'BRL');
    expect(reserved.reduce((s, b) => s + b.balance, 0n)).toBe(60_00n);
    expect((await verifyLedger(tdb.db)).failures).toEqual([]);
  }, 120_000);

  it('raises OUTCOME_UNKNOWN for a creation left unanswered past the grace, and resolves it once observed', async () => {
    const invoice = uniqueRef('wa-unk');
    const base: Intent = {
      intentId: `wa-unk-${invoice}`,
      operation: 'deposit',
      account: 'main',
      externalRef: invoice,
      entityId: null,
      currency: 'BRL',
      amount: 77_70n,
      expectedFee: null,
      test: false,
      crypto: false,
      feeOnPayer: false,
      parentDepositId: null,
      outcome: 'unknown',
      createdAt: new Date(),
      request: { invoice_id: invoice },
      response: null,
    };
    const cashout: Intent = {
      ...base,
      intentId: `wa-unk-c-${invoice}`,
      operation: 'cashout',
      externalRef: `c-${invoice}`,
    };
    await withLedgerTransaction(tdb.db, (trx) =>
      recordIntents(trx, [base, { ...base, response: { error: 'PROVIDER_TIMEOUT' } }, cashout]),
    );
    const typed = () =>
      tdb.db.selectFrom('exceptions').selectAll().where('type', '=', 'OUTCOME_UNKNOWN').execute();
    // Within the grace: nothing.
    await sweepExceptions(tdb.db, new Date(Date.now() + 10 * 60_000));
    expect(await typed()).toEqual([]);
    const late = new Date(Date.now() + 31 * 60_000);
    const swept = await sweepExceptions(tdb.db, late);
    expect(swept.outcomeUnknown).toBe(1);
    const [raised, ...others] = await typed();
    // The cashout is the poller's to look up by external_id: no exception for it.
    expect(others).toEqual([]);
    expect(raised).toMatchObject({
      entity_kind: 'deposit',
      entity_id: outcomeUnknownEntityId(invoice),
      state: 'open',
      severity: 'high',
    });
    const details = raised!.details as Record<string, unknown> & { facts: Record<string, unknown> };
    expect(details).toMatchObject({ intentId: base.intentId, externalRef: invoice, amount: '77.70' });
    expect(details.facts).toMatchObject({
      externalRef: invoice,
      intentAmount: '77.70',
      intentCurrency: 'BRL',
    });
    expect(String(details.facts.rule)).toMatch(/may hold this payment: look it up in its back office/);
    // Alerted once, with its facts.
    const alerts = await tdb.db.selectFrom('outbox').select(['payload']).execute();
    const alert = alerts
      .map((a) => a.payload as { type?: string; details?: { facts?: Record<string, unknown> } })
      .filter((p) => p.type === 'OUTCOME_UNKNOWN');
    expect(alert).toHaveLength(1);
    expect(alert[0]!.details?.facts).toMatchObject({ intentAmount: '77.70', intentCurrency: 'BRL' });
    // Swept again unchanged: counted once, not reopened.
    await sweepExceptions(tdb.db, new Date(late.getTime() + 60_000));
    expect((await typed())[0]).toMatchObject({ count: 1, state: 'open' });

    // The provider had created it after all: its first reading carries the invoice, and the next sweep
    // resolves the exception, as payrecon, saying what was observed.
    const client = createProviderClient(sandboxAccount(sandbox), { retries: 0, logger: quiet });
    const created = await client.createDeposit({
      invoice_id: invoice,
      country: 'BR',
      currency: 'BRL',
      amount: 77_70n,
      payment_method: 'IX',
      payer: { email: 'ana@example.com', document: '12345678909', first_name: 'Ana', last_name: 'Silva' },
    });
    await observe({
      kind: 'deposit',
      account: 'main',
      entityId: String(created.deposit_id),
      externalRef: invoice,
    });
    const after = await sweepExceptions(tdb.db, new Date(late.getTime() + 120_000));
    expect(after).toMatchObject({ outcomeUnknown: 0, outcomeSettled: 1 });
    const [resolved] = await typed();
    expect(resolved).toMatchObject({ state: 'resolved', resolved_by: 'payrecon' });
    expect(resolved!.resolution_note).toBe(
      `settled: the provider's deposit ${created.deposit_id} was observed`,
    );
    const events = await tdb.db
      .selectFrom('exception_events')
      .select(['actor', 'from_state', 'to_state', 'note'])
      .where('exception_id', '=', resolved!.id)
      .execute();
    expect(events).toEqual([
      { actor: 'payrecon', from_state: 'open', to_state: 'resolved', note: resolved!.resolution_note },
    ]);
    // No alert for the resolution, no second exception.
    expect((await tdb.db.selectFrom('outbox').select(['id']).execute()).length).toBe(alerts.length);
  }, 60_000);
});

/** Reads one entity at the sandbox and applies it, as the reconciler would receive it. */
async function observe(entity: EntityToRead): Promise<void> {
  const client = createProviderClient(sandboxAccount(sandbox), { retries: 0, logger: quiet });
  const o = await readStatus(client, entity, 'poll');
  const received = fromRecord(OBSERVATION_TOPIC, toRecord(OBSERVATION_TOPIC, o));
  await withLedgerTransaction(tdb.db, (trx) => applyObservations(trx, [received]));
}
