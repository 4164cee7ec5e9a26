import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProviderAccount } from '../../src/config.ts';
import { createStatusFetcher } from '../../src/consumers/status-fetcher.ts';
import { isRetryableAppError } from '../../src/domain/errors.ts';
import type { Observation } from '../../src/domain/observation.ts';
import type { EntityKind } from '../../src/domain/statuses.ts';
import { type ConsumedMessage, type RunningConsumer, runBatchConsumer } from '../../src/events/kafka.ts';
import type { NotificationReceived } from '../../src/events/payloads.ts';
import { createLogger } from '../../src/logger.ts';
import { webhookIngressPlugin } from '../../src/producers/webhook-ingress.ts';
import { createProviderClient, type ProviderClient } from '../../src/provider/client.ts';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/main.ts';
import { waitFor } from '../helpers/wait.ts';
import {
  type Collector,
  collect,
  type Infra,
  move,
  notificationOf,
  PAYER,
  quiet,
  sandboxAccount,
  startInfra,
  uniqueRef,
} from '../producers/helpers.ts';

let infra: Infra;
let sandbox: RunningSandbox;
let account: ProviderAccount;
let client: ProviderClient;
let observed: Collector<Observation>;
let running: RunningConsumer;
let ingress: FastifyInstance;

const fetcherOf = () =>
  createStatusFetcher({
    clientFor: (name) => (name === account.name ? client : undefined),
    publisher: infra.publisher,
    concurrency: 4,
    logger: quiet,
  });

beforeAll(async () => {
  infra = await startInfra();
  sandbox = await startSandbox({ seed: 11 });
  account = sandboxAccount(sandbox, { name: 'main' });
  client = createProviderClient(account, { retries: 0, logger: quiet });
  observed = await collect(infra, 'provider.status.observed.v1');
  const fetcher = fetcherOf();
  running = await runBatchConsumer({
    kafka: infra.kafka,
    groupId: 'fetcher-test',
    topic: 'provider.notification.received.v1',
    serde: infra.serde,
    dlq: infra.publisher,
    handleBatch: (messages) => fetcher.handleNotifications(messages),
    retry: { attempts: 2, initialBackoffMs: 50, maxBackoffMs: 100 },
    // Warnings stay visible: a consumer that cannot make progress says why.
    logger: createLogger({ level: 'warn' }),
  });
  await running.ready;
}, 60_000);

afterAll(async () => {
  await running?.stop();
  await observed?.stop();
  await ingress?.close();
  await sandbox?.close();
  await infra?.close();
});

function consumed(value: NotificationReceived): ConsumedMessage<NotificationReceived> {
  return {
    topic: 'provider.notification.received.v1',
    partition: 0,
    offset: '0',
    key: null,
    timestamp: '0',
    headers: {},
    value,
  };
}

async function newDeposit(
  amount: bigint,
  extra: Record<string, unknown> = {},
): Promise<{ id: string; invoice: string }> {
  const invoice = uniqueRef('inv');
  const res = await client.createDeposit({
    invoice_id: invoice,
    country: 'BR',
    currency: 'BRL',
    amount,
    payment_method: 'IX',
    payer: PAYER,
    ...extra,
  });
  return { id: String(res.deposit_id), invoice };
}

async function newCashout(amount: bigint): Promise<{ id: string; externalId: string }> {
  const externalId = uniqueRef('ext');
  const res = await client.createCashout({
    external_id: externalId,
    country: 'BR',
    currency: 'BRL',
    amount,
    document_id: '12345678909',
    beneficiary_name: 'Ana',
    beneficiary_lastname: 'Silva',
    bank_code: '341',
    bank_account: '123456-7',
    bank_branch: '0001',
    account_type: 'C',
    notification_url: 'https://merchant.example/webhooks/main/cashouts',
  });
  return { id: String(res.cashout_id), externalId };
}

const observationOf = (kind: EntityKind, id: string) =>
  observed.values.findLast((o) => o.kind === kind && o.entityId === id);

describe('status fetcher, running as a consumer', () => {
  it('maps each kind from the provider status call and turns not-found into status null', async () => {
    const deposit = await newDeposit(123_45n, { test: true });
    await move(sandbox.url, 'deposit', deposit.id, 'COMPLETED');
    const cashout = await newCashout(25_50n);
    await move(sandbox.url, 'cashout', cashout.id, 'DELIVERED');
    await move(sandbox.url, 'cashout', cashout.id, 'COMPLETED');
    const refund = await client.createRefund({
      deposit_id: Number(deposit.id),
      amount: 50_00n,
      bank_account: {
        beneficiary: 'Ana Silva',
        bank_code: '341',
        branch: '0001',
        account_number: '123456-7',
        account_type: 'C',
      },
    });
    const refundId = String(refund.refund_id);

    const before = observed.values.length;
    const startedAt = Date.now();
    await infra.publisher.publish('provider.notification.received.v1', [
      { value: notificationOf('deposit', deposit.id) },
      { value: notificationOf('cashout', cashout.id, cashout.externalId) },
      { value: notificationOf('refund', refundId) },
      { value: notificationOf('deposit', '999999999') },
      { value: notificationOf('cashout', '987654321', 'ext-nobody') },
      { value: notificationOf('refund', '888888888') },
    ]);
    await observed.waitFor(before + 6);

    const d = observationOf('deposit', deposit.id)!;
    expect(d).toMatchObject({
      account: 'main',
      source: 'webhook',
      status: 'COMPLETED',
      externalRef: deposit.invoice,
      currency: 'BRL',
      amount: 123_45n,
      test: true,
      crypto: false,
    });
    expect(d.feeCurrency).toBe('BRL');
    expect(typeof d.feeAmount).toBe('bigint');
    expect(d.observedAt.getTime()).toBeGreaterThanOrEqual(startedAt - 1000);
    expect(JSON.stringify(d.details, (_k, v) => (typeof v === 'bigint' ? String(v) : v))).not.toMatch(
      /ana@example.com|12345678909/,
    );

    const c = observationOf('cashout', cashout.id)!;
    expect(c).toMatchObject({
      status: 'COMPLETED',
      externalRef: cashout.externalId,
      amount: null,
      source: 'webhook',
    });
    // The bank's reference, given by the sandbox when the cashout was delivered.
    expect(c.bankReference).toMatch(new RegExp(`^E[0-9A-F]{8}${cashout.id}$`));
    expect(observationOf('deposit', deposit.id)!.bankReference).toBeNull();

    const r = observationOf('refund', refundId)!;
    expect(r).toMatchObject({ amount: 50_00n, parentDepositId: deposit.id, externalRef: null });
    expect(typeof r.status).toBe('string');

    for (const [kind, id] of [
      ['deposit', '999999999'],
      ['cashout', '987654321'],
      ['refund', '888888888'],
    ] as const) {
      const missing = observationOf(kind, id);
      expect(missing, `${kind} ${id}`).toBeDefined();
      expect(missing!.status).toBeNull();
      expect(missing!.amount).toBeNull();
    }
    // The notification named an external id; the provider knows no such cashout, so no reference.
    expect(observationOf('cashout', '987654321')!.externalRef).toBeNull();
  }, 60_000);

  it('a notification delivered by the sandbox reaches the ingress, the topic and the fetcher', async () => {
    ingress = Fastify({ logger: false, forceCloseConnections: true });
    await ingress.register(
      webhookIngressPlugin({ accounts: [account], publisher: infra.publisher, logger: quiet }),
    );
    await ingress.listen({ host: '127.0.0.1', port: 0 });
    const address = ingress.server.address();
    if (address === null || typeof address === 'string') throw new Error('no address');
    sandbox.control.deps.webhooks.notificationBaseUrl = `http://127.0.0.1:${address.port}`;

    const deposit = await newDeposit(77_00n, {
      notification_url: 'https://merchant.example/webhooks/main/deposits',
    });
    await move(sandbox.url, 'deposit', deposit.id, 'COMPLETED');
    await waitFor(
      'the COMPLETED observation',
      () => observationOf('deposit', deposit.id)?.status === 'COMPLETED',
    );
    const deliveries = sandbox.control.deps.webhooks.log.filter((l) => String(l.entityId) === deposit.id);
    expect(deliveries.some((l) => l.outcome === 'delivered' && l.httpStatus === 200)).toBe(true);
  }, 60_000);
});

describe('status fetcher, called directly', () => {
  it('reads each entity once per batch even when notified twice', async () => {
    const deposit = await newDeposit(10_00n);
    const before = observed.values.length;
    const n = notificationOf('deposit', deposit.id);
    await fetcherOf().handleNotifications([consumed(n), consumed({ ...n, notificationId: randomUUID() })]);
    const values = await observed.drain();
    expect(values.slice(before).filter((o) => o.entityId === deposit.id)).toHaveLength(1);
  }, 30_000);

  it("never takes a cashout notification's bank reference: only the status answer's counts", async () => {
    const pending = await newCashout(14_00n);
    const delivered = await newCashout(15_00n);
    await move(sandbox.url, 'cashout', delivered.id, 'DELIVERED');
    const before = observed.values.length;
    const withRef = (id: string, externalId: string, ref: string) => {
      const n = notificationOf('cashout', id, externalId);
      return consumed({ ...n, fields: { ...n.fields, bank_reference_id: ref } });
    };
    await fetcherOf().handleNotifications([
      withRef(pending.id, pending.externalId, ' E2E-FROM-WEBHOOK '),
      withRef(delivered.id, delivered.externalId, 'E2E-OTHER'),
    ]);
    const values = (await observed.drain()).slice(before);
    const of = (id: string) => values.find((o) => o.entityId === id);
    // PENDING: the status answer has no reference yet; the notification's is not trusted.
    expect(of(pending.id)?.bankReference).toBeNull();
    expect(of(pending.id)?.externalRef).toBe(pending.externalId);
    // DELIVERED: the status answer's own reference.
    expect(of(delivered.id)?.bankReference).toMatch(new RegExp(`^E[0-9A-F]{8}${delivered.id}$`));
  }, 30_000);

  it('throws a retryable error on a transient provider failure and publishes nothing', async () => {
    const deposit = await newDeposit(11_00n);
    sandbox.control.deps.faults.set({ endpoints: { 'deposit.status': { errorRate: 1, errorStatus: 503 } } });
    const before = observed.values.length;
    try {
      const error = await fetcherOf()
        .handleNotifications([consumed(notificationOf('deposit', deposit.id))])
        .then(
          () => null,
          (err: unknown) => err,
        );
      expect(error).not.toBeNull();
      expect(isRetryableAppError(error)).toBe(true);
    } finally {
      sandbox.control.deps.faults.set({});
    }
    const values = await observed.drain();
    expect(values.length).toBe(before);
  }, 30_000);

  it('on the last try hands what the provider would not answer to the poller and publishes the rest', async () => {
    const answered = await newDeposit(12_00n);
    const cashout = await newCashout(13_00n);
    sandbox.control.deps.faults.set({ endpoints: { 'cashout.status': { errorRate: 1, errorStatus: 503 } } });
    const handedOver: unknown[][] = [];
    const fetcher = createStatusFetcher({
      clientFor: (name) => (name === account.name ? client : undefined),
      publisher: infra.publisher,
      logger: quiet,
      lastAttempt: 3,
      handOver: async (entities) => {
        handedOver.push([...entities]);
      },
    });
    const batch = [
      consumed(notificationOf('deposit', answered.id)),
      consumed(notificationOf('cashout', cashout.id, cashout.externalId)),
    ];
    const before = observed.values.length;
    try {
      // Before the last try the batch still fails, retryable, and publishes nothing.
      const early = await fetcher.handleNotifications(batch, { attempt: 2 }).then(
        () => null,
        (err: unknown) => err,
      );
      expect(isRetryableAppError(early)).toBe(true);
      expect(handedOver).toEqual([]);
      await fetcher.handleNotifications(batch, { attempt: 3 });
    } finally {
      sandbox.control.deps.faults.set({});
    }
    expect(handedOver).toEqual([
      // The notification's external id is not handed on: the poller asks by the cashout id.
      [{ kind: 'cashout', account: 'main', entityId: cashout.id, externalRef: null }],
    ]);
    const values = (await observed.drain()).slice(before);
    expect(values.map((o) => [o.kind, o.entityId])).toEqual([['deposit', answered.id]]);
  }, 30_000);

  it('throws a non-retryable error for an account that is not configured', async () => {
    const error = await fetcherOf()
      .handleNotifications([consumed({ ...notificationOf('deposit', '1'), account: 'elsewhere' })])
      .then(
        () => null,
        (err: unknown) => err,
      );
    expect(error).not.toBeNull();
    expect(isRetryableAppError(error)).toBe(false);
  });
});
