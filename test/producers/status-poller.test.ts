import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProviderAccount } from '../../src/config.ts';
import { applyObservations, recordIntents } from '../../src/db/ledger/service.ts';
import { NO_FACTS, type Observation } from '../../src/domain/observation.ts';
import type { EntityKind } from '../../src/domain/statuses.ts';
import { type PollingClients, pollingClients, startStatusPoller } from '../../src/producers/status-poller.ts';
import { createProviderClient, type ProviderClient } from '../../src/provider/client.ts';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/main.ts';
import { mirrorsWithPolls } from '../db/fixtures.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { waitFor } from '../helpers/wait.ts';
import {
  type Collector,
  collect,
  type Infra,
  move,
  PAYER,
  quiet,
  sandboxAccount,
  startInfra,
  uniqueRef,
} from './helpers.ts';

let infra: Infra;
let sandbox: RunningSandbox;
let database: TestDatabase;
let account: ProviderAccount;
let client: ProviderClient;
let clients: PollingClients;
let observed: Collector<Observation>;
const seeded: { kind: EntityKind; id: string }[] = [];
let changedDeposit = '';

function seedObservation(
  kind: EntityKind,
  entityId: string,
  status: string,
  externalRef: string | null,
): Observation {
  return {
    eventId: randomUUID(),
    kind,
    account: 'main',
    entityId,
    externalRef,
    status,
    observedAt: new Date(Date.now() - 60_000),
    source: 'webhook',
    currency: 'BRL',
    amount: kind === 'cashout' ? null : 10_00n,
    ...NO_FACTS,
    details: {},
  };
}

async function makeAllDue(): Promise<void> {
  await sql`
    INSERT INTO poll_schedule (merchant_account, entity_kind, entity_id, next_poll_at)
    SELECT merchant_account, entity_kind, entity_id, now() - interval '1 minute' FROM mirrors
    ON CONFLICT (merchant_account, entity_kind, entity_id) DO UPDATE SET next_poll_at = excluded.next_poll_at`.execute(
    database.db,
  );
}

async function nextPolls(): Promise<Map<string, Date | null>> {
  const rows = await mirrorsWithPolls(database.db).select(['m.entity_kind', 'm.entity_id']).execute();
  return new Map(rows.map((r) => [`${r.entity_kind}:${r.entity_id}`, r.next_poll_at]));
}

beforeAll(async () => {
  infra = await startInfra();
  sandbox = await startSandbox({ seed: 5 });
  database = await createTestDatabase();
  account = sandboxAccount(sandbox, { name: 'main' });
  client = createProviderClient(account, { retries: 0, logger: quiet });
  clients = pollingClients([account], { retries: 0, logger: quiet });
  observed = await collect(infra, 'provider.status.observed.v1');

  const deposit = await client.createDeposit({
    invoice_id: uniqueRef('inv'),
    country: 'BR',
    currency: 'BRL',
    amount: 10_00n,
    payment_method: 'IX',
    payer: PAYER,
  });
  changedDeposit = String(deposit.deposit_id);
  const externalId = uniqueRef('ext');
  const cashout = await client.createCashout({
    external_id: externalId,
    country: 'BR',
    currency: 'BRL',
    amount: 5_00n,
    document_id: '12345678909',
    beneficiary_name: 'Ana',
    bank_code: '341',
    bank_account: '123456-7',
    bank_branch: '0001',
    account_type: 'C',
    notification_url: 'https://merchant.example/webhooks/main/cashouts',
  });
  const observations = [
    seedObservation('deposit', changedDeposit, 'PENDING', deposit.merchant_invoice_id),
    seedObservation('cashout', String(cashout.cashout_id), 'PENDING', externalId),
    seedObservation('deposit', '999999999', 'PENDING', 'inv-gone'),
  ];
  for (const o of observations) seeded.push({ kind: o.kind, id: o.entityId });
  await database.db.transaction().execute((trx) => applyObservations(trx, observations));
  // The change the provider never notified: only polling can see it.
  await move(sandbox.url, 'deposit', changedDeposit, 'COMPLETED');
}, 90_000);

afterAll(async () => {
  await observed?.stop();
  await clients?.close();
  await sandbox?.close();
  await database?.drop();
  await infra?.close();
});

describe('status poller', () => {
  it('publishes an observation (source poll) per due entity and defers them first', async () => {
    await makeAllDue();
    const poller = startStatusPoller(
      {
        db: database.db,
        clientFor: clients.clientFor,
        lastRetryAfterMs: clients.lastRetryAfterMs,
        publisher: infra.publisher,
        leaseMs: 120_000,
        logger: quiet,
      },
      { loop: false },
    );
    const before = observed.values.length;
    const startedAt = Date.now();
    const result = await poller.pollOnce();
    expect(result).toMatchObject({ due: 3, published: 3, failed: 0, rateLimited: 0, paused: false });
    const values = (await observed.waitFor(before + 3)).slice(before);
    expect(values.every((o) => o.source === 'poll')).toBe(true);
    const byId = new Map(values.map((o) => [o.entityId, o]));
    expect(byId.get(changedDeposit)).toMatchObject({ kind: 'deposit', status: 'COMPLETED', amount: 10_00n });
    expect(byId.get('999999999')?.status).toBeNull();
    const cashout = seeded.find((s) => s.kind === 'cashout')!;
    expect(byId.get(cashout.id)).toMatchObject({ status: 'PENDING', amount: null });

    // Deferred by the lease: a second round finds nothing due.
    const polls = await nextPolls();
    for (const s of seeded)
      expect(polls.get(`${s.kind}:${s.id}`)!.getTime()).toBeGreaterThan(startedAt + 100_000);
    expect((await poller.pollOnce()).due).toBe(0);
    await poller.stop();
  }, 60_000);

  it('honours 429: pauses the whole poller by Retry-After and asks again only then', async () => {
    await makeAllDue();
    const poller = startStatusPoller(
      {
        db: database.db,
        clientFor: clients.clientFor,
        lastRetryAfterMs: clients.lastRetryAfterMs,
        publisher: infra.publisher,
        concurrency: 8,
        logger: quiet,
      },
      { loop: false },
    );
    const before = observed.values.length;
    sandbox.control.deps.faults.set({ endpoints: { '*': { rateLimitRate: 1, retryAfterSeconds: 3 } } });
    let limited: Awaited<ReturnType<typeof poller.pollOnce>>;
    const at = Date.now();
    try {
      limited = await poller.pollOnce();
    } finally {
      sandbox.control.deps.faults.set({});
    }
    expect(limited.published).toBe(0);
    expect(limited.rateLimited).toBe(3);
    const pausedFor = limited.pausedUntil!.getTime() - at;
    expect(pausedFor).toBeGreaterThan(2_000);
    expect(pausedFor).toBeLessThan(5_000);

    // Paused: no round runs, though the faults are gone.
    const paused = await poller.pollOnce();
    expect(paused).toMatchObject({ paused: true, due: 0 });
    // The unread entities are due again exactly when the pause ends.
    const polls = await nextPolls();
    for (const s of seeded)
      expect(polls.get(`${s.kind}:${s.id}`)!.getTime()).toBe(limited.pausedUntil!.getTime());

    await waitFor('the pause to end', () => Date.now() > limited.pausedUntil!.getTime() + 50, 10_000);
    const resumed = await poller.pollOnce();
    expect(resumed).toMatchObject({ due: 3, published: 3, paused: false });
    await observed.waitFor(before + 3);
    await poller.stop();
  }, 60_000);

  it('runs as a loop until stopped', async () => {
    await makeAllDue();
    const before = observed.values.length;
    const rounds: number[] = [];
    const poller = startStatusPoller({
      db: database.db,
      clientFor: clients.clientFor,
      publisher: infra.publisher,
      idleMs: 100,
      logger: quiet,
      onRound: (r) => rounds.push(r.due),
    });
    await observed.waitFor(before + 3);
    await poller.stop();
    const count = rounds.length;
    // A poller still running, with the same idle time, makes two more rounds: the stopped one had the
    // time for its next round.
    const witnessed: number[] = [];
    const witness = startStatusPoller({
      db: database.db,
      clientFor: clients.clientFor,
      publisher: infra.publisher,
      idleMs: 100,
      logger: quiet,
      onRound: (r) => witnessed.push(r.due),
    });
    await waitFor('two rounds of a poller still running', () => witnessed.length >= 2, 20_000);
    await witness.stop();
    expect(rounds.length).toBe(count);
    expect(rounds[0]).toBe(3);
  }, 60_000);

  it('looks up by external_id the cashouts recorded with an unknown outcome past the grace', async () => {
    const intentsTopic = await collect(infra, 'merchant.intent.recorded.v1');
    try {
      // One cashout the provider created though the merchant never got the answer, one it never got.
      const held = uniqueRef('unk-ext');
      const created = await client.createCashout({
        external_id: held,
        country: 'BR',
        currency: 'BRL',
        amount: 7_00n,
        document_id: '12345678909',
        beneficiary_name: 'Ana',
        bank_code: '341',
        bank_account: '123456-7',
        bank_branch: '0001',
        account_type: 'C',
        notification_url: 'https://merchant.example/webhooks/main/cashouts',
      });
      const missing = uniqueRef('unk-ext');
      const pending = (externalRef: string) => ({
        intentId: randomUUID(),
        operation: 'cashout' as const,
        account: 'main',
        externalRef,
        entityId: null,
        currency: 'BRL',
        amount: 7_00n,
        expectedFee: null,
        test: false,
        crypto: false,
        feeOnPayer: false,
        parentDepositId: null,
        outcome: 'unknown' as const,
        createdAt: new Date(Date.now() - 3_600_000),
        request: { external_id: externalRef },
        response: { error: 'PROVIDER_TIMEOUT' },
      });
      const [a, b] = [pending(held), pending(missing)];
      await database.db
        .transaction()
        .execute((trx) =>
          recordIntents(trx, [a, b, { ...pending(uniqueRef('young')), createdAt: new Date() }]),
        );
      const poller = startStatusPoller(
        {
          db: database.db,
          clientFor: clients.clientFor,
          publisher: infra.publisher,
          outcomeUnknownGraceMs: 30 * 60_000,
          leaseMs: 120_000,
          logger: quiet,
        },
        { loop: false },
      );
      const before = observed.values.length;
      const result = await poller.pollOnce();
      expect(result.cashoutsSettled).toBe(2);
      const seen = (await observed.waitFor(before + 1)).slice(before);
      expect(seen).toHaveLength(1);
      expect(seen[0]).toMatchObject({
        kind: 'cashout',
        entityId: String(created.cashout_id),
        externalRef: held,
        status: 'PENDING',
      });
      const completed = await intentsTopic.waitFor(1);
      expect(completed).toHaveLength(1);
      expect(completed[0]).toMatchObject({ intentId: b.intentId, outcome: 'declined', externalRef: missing });
      // Asked once per lease: the next round looks nothing up (the young one is not past the grace).
      expect((await poller.pollOnce()).cashoutsSettled).toBeUndefined();
      // Applied, the reading links the pending intent by external_id.
      await database.db.transaction().execute((trx) => applyObservations(trx, seen));
      const mirror = await database.db
        .selectFrom('mirrors')
        .select(['intent_id'])
        .where('entity_kind', '=', 'cashout')
        .where('entity_id', '=', String(created.cashout_id))
        .executeTakeFirstOrThrow();
      expect(mirror.intent_id).toBe(a.intentId);
      await poller.stop();
    } finally {
      await intentsTopic.stop();
    }
  }, 60_000);
});
