/**
 * The status fetcher with the ledger's database, over Kafka with the real runner: a notification whose
 * status the provider will not give (every status call 503) is handed to the poller once the topic's
 * retries are spent — its mirror becomes due now — and nothing reaches the DLQ.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runStatusFetcher } from '../../src/consumers/status-fetcher.ts';
import { dlqTopicOf } from '../../src/events/topics.ts';
import { createProviderClient } from '../../src/provider/client.ts';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/main.ts';
import { mirrorsWithPolls } from '../db/fixtures.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { waitFor } from '../helpers/wait.ts';
import {
  type Infra,
  notificationOf,
  PAYER,
  quiet,
  sandboxAccount,
  startInfra,
  uniqueRef,
} from '../producers/helpers.ts';

let infra: Infra;
let sandbox: RunningSandbox;
let tdb: TestDatabase;

beforeAll(async () => {
  infra = await startInfra();
  sandbox = await startSandbox({ seed: 12 });
  tdb = await createTestDatabase();
}, 60_000);

afterAll(async () => {
  await sandbox?.close();
  await infra?.close();
  await tdb?.drop();
});

describe('status fetcher and a provider that will not answer', () => {
  it('hands the entity to the poller after the last retry and dead-letters nothing', async () => {
    const account = sandboxAccount(sandbox, { name: 'main' });
    const client = createProviderClient(account, { retries: 0, logger: quiet });
    const invoice = uniqueRef('inv');
    const created = await client.createDeposit({
      invoice_id: invoice,
      country: 'BR',
      currency: 'BRL',
      amount: 15_00n,
      payment_method: 'IX',
      payer: PAYER,
    });
    const id = String(created.deposit_id);
    sandbox.control.deps.faults.set({ endpoints: { 'deposit.status': { errorRate: 1, errorStatus: 503 } } });
    const fetcher = await runStatusFetcher({
      kafka: infra.kafka,
      serde: infra.serde,
      accounts: [account],
      providerOptions: { retries: 0, timeoutMs: 2_000 },
      groupId: 'fetcher-handover-test',
      logger: quiet,
      db: tdb.db,
    });
    try {
      await fetcher.ready;
      const sent = new Date();
      await infra.publisher.publish('provider.notification.received.v1', [
        { value: notificationOf('deposit', id, invoice) },
      ]);
      const mirror = async () =>
        mirrorsWithPolls(tdb.db)
          .select(['m.status', 'm.external_ref'])
          .where('m.entity_kind', '=', 'deposit')
          .where('m.entity_id', '=', id)
          .executeTakeFirst();
      // Five tries with back-off (the topic's policy) take a few seconds.
      await waitFor(
        'the mirror row handed to the poller',
        async () => (await mirror()) !== undefined,
        30_000,
      );
      const row = (await mirror())!;
      expect(row.status).toBeNull();
      // The notification's reference is only a hint: the mirror takes a reference from the provider alone.
      expect(row.external_ref).toBeNull();
      expect(row.next_poll_at!.getTime()).toBeGreaterThanOrEqual(sent.getTime());
      expect(row.next_poll_at!.getTime()).toBeLessThanOrEqual(Date.now());
      // The batch was committed, not dead-lettered: once the group's offset passes the notification
      // (a dead letter is published before the commit), the DLQ holds all it ever will for it.
      const admin = infra.kafka.admin();
      await admin.connect();
      try {
        const topic = 'provider.notification.received.v1';
        // Partitions holding messages, and their ends.
        const ends = new Map(
          (await admin.fetchTopicOffsets(topic))
            .filter((p) => BigInt(p.high) > BigInt(p.low))
            .map((p) => [p.partition, p.high]),
        );
        await waitFor(
          'the notification committed',
          async () => {
            const [group] = await admin.fetchOffsets({ groupId: 'fetcher-handover-test', topics: [topic] });
            const committed = new Map((group?.partitions ?? []).map((p) => [p.partition, BigInt(p.offset)]));
            return [...ends].every(([partition, high]) => (committed.get(partition) ?? -1n) >= BigInt(high));
          },
          30_000,
        );
        const dlq = await admin.fetchTopicOffsets(dlqTopicOf(topic));
        expect(dlq.reduce((sum, p) => sum + Number(p.high), 0)).toBe(0);
      } finally {
        await admin.disconnect();
      }
    } finally {
      sandbox.control.deps.faults.set({});
      await fetcher.stop();
    }
  }, 60_000);
});
