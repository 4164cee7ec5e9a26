/**
 * Imported lines as events over the real embedded broker (kafkajs over TCP), the real registry (HTTP) and
 * a real PostgreSQL database: an import writes its new lines to the outbox in its transaction, the relay
 * publishes them in batches of 1,000 to the kind's topic, importing again publishes nothing, the match
 * consumer matches them, and a message that does not fit goes to the topic's DLQ with the reason.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SchemaRegistry } from '@kafkajs/confluent-schema-registry';
import type { Admin, Kafka, Producer } from 'kafkajs';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type MatchConsumer, startMatchConsumer } from '../../src/consumers/matcher.ts';
import { IMPORT_EVENT_TOPICS } from '../../src/db/imports/events.ts';
import { recordImport } from '../../src/db/imports/service.ts';
import type { TransactionRowRecord } from '../../src/db/imports/tables.ts';
import { DEFAULT_MATCH_RULES } from '../../src/domain/matching.ts';
import { type RunningBroker, startBroker } from '../../src/embedded/kafka/broker.ts';
import { type RunningRegistry, startRegistry } from '../../src/embedded/registry/registry.ts';
import { createKafka, createPublisher, ensureTopics, type Publisher } from '../../src/events/kafka.ts';
import type { DlqEnvelope, ImportedBankLine, ImportedLines } from '../../src/events/payloads.ts';
import { registerSchemas, type Serde } from '../../src/events/serde.ts';
import {
  type AnyTopicName,
  dlqTopicOf,
  IMPORT_BATCH_LINES,
  IMPORT_TOPICS,
  type ValueOf,
} from '../../src/events/topics.ts';
import { createLogger } from '../../src/logger.ts';
import { type OutboxRelay, startOutboxRelay } from '../../src/producers/outbox-relay.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { waitFor } from '../helpers/wait.ts';

const logger = createLogger({ level: 'silent' });
const dirs: string[] = [];
const tempDir = (p: string) => {
  const d = mkdtempSync(join(tmpdir(), `payrecon-${p}-`));
  dirs.push(d);
  return d;
};

const TX_TOPIC = IMPORT_TOPICS['provider-transactions'];

const row = (i: number): TransactionRowRecord => ({
  identity: `r${i}`,
  content_hash: `h${i}`,
  transaction_id: String(i === 0 ? 1 : 100_000 + i),
  type: 'deposit',
  status: 'COMPLETED',
  external_id: null,
  invoice_id: null,
  currency: 'BRL',
  gross: '100.00',
  fee: '1.50',
  net: '98.50',
  created_at: '2026-03-03T12:00:00.000Z',
  updated_at: null,
  settlement_id: 'S1',
});

describe('imported lines as events', () => {
  let tdb: TestDatabase;
  let registry: RunningRegistry;
  let broker: RunningBroker;
  let kafka: Kafka;
  let admin: Admin;
  let serde: Serde;
  let publisher: Publisher;
  let raw: Producer;
  let relay: OutboxRelay;
  let matcher: MatchConsumer | undefined;

  beforeAll(async () => {
    tdb = await createTestDatabase();
    registry = await startRegistry({ host: '127.0.0.1', port: 0, dataDir: tempDir('registry') });
    broker = await startBroker({ host: '127.0.0.1', port: 0, dataDir: tempDir('broker') });
    kafka = createKafka({ brokers: [`127.0.0.1:${broker.port}`], clientId: 'import-events-test', logger });
    admin = kafka.admin();
    await admin.connect();
    await ensureTopics(admin, logger);
    serde = await registerSchemas(new SchemaRegistry({ host: registry.url }));
    publisher = await createPublisher(kafka, serde);
    raw = kafka.producer();
    await raw.connect();
    // Relayed by hand (`relayOnce`), so each step's messages are known.
    relay = startOutboxRelay({ db: tdb.db, publisher, logger }, { loop: false });
  }, 120_000);

  afterAll(async () => {
    await matcher?.stop();
    await relay?.stop();
    await raw?.disconnect();
    await publisher?.disconnect();
    await admin?.disconnect();
    await broker?.close();
    await registry?.close();
    await tdb?.drop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  /** Every message of `topic` so far, decoded with the registry, with its key. */
  async function readTopic<T extends AnyTopicName>(
    topic: T,
    count: number,
  ): Promise<{ key: string; value: ValueOf<T> }[]> {
    const consumer = kafka.consumer({ groupId: `reader-${randomUUID()}`, maxWaitTimeInMs: 200 });
    const got: { key: string; value: ValueOf<T> }[] = [];
    await consumer.connect();
    try {
      await consumer.subscribe({ topics: [topic], fromBeginning: true });
      await consumer.run({
        eachMessage: async ({ message }) => {
          got.push({
            key: message.key?.toString('utf8') ?? '',
            value: await serde.decode(topic, message.value),
          });
        },
      });
      await waitFor(
        () => `${count} messages on ${topic} (have ${got.length})`,
        () => got.length >= count,
        30_000,
      );
    } finally {
      await consumer.disconnect();
    }
    return got;
  }

  const file = (rows: TransactionRowRecord[], sha: string) => ({
    kind: 'provider-transactions' as const,
    fileName: 'transactions.csv',
    sha256: sha.repeat(64),
    profile: null,
    importedBy: 'test',
    rows,
  });

  it('publishes only the new lines of an import, in batches, and nothing for an import adding nothing', async () => {
    expect(IMPORT_EVENT_TOPICS).toEqual(IMPORT_TOPICS);
    expect(IMPORT_BATCH_LINES).toBe(1_000);

    const rows = Array.from({ length: 1_500 }, (_, i) => row(i));
    const first = await recordImport(tdb.db, file(rows, 'a'));
    expect(first.new).toBe(1_500);
    // One outbox row for the import; the relay publishes its lines in two messages.
    expect(
      await tdb.db
        .selectFrom('outbox')
        .select(['topic', 'key'])
        .where('topic', 'like', 'imports.%')
        .execute(),
    ).toEqual([{ topic: TX_TOPIC, key: `provider-transactions:${first.id}` }]);
    expect(await relay.relayOnce()).toBe(1);
    const published = await readTopic(TX_TOPIC, 2);
    published.sort((a, b) => a.value.batch - b.value.batch);
    expect(published.map((m) => m.key)).toEqual([
      `provider-transactions:${first.id}:1`,
      `provider-transactions:${first.id}:2`,
    ]);
    expect(published.map((m) => m.value.lines.length)).toEqual([1_000, 500]);
    const lines = published.flatMap((m) => m.value.lines);
    expect(lines.map((l) => l.identity).sort()).toEqual(rows.map((r) => r.identity).sort());
    expect(lines.find((l) => l.identity === 'r0')).toEqual({
      identity: 'r0',
      contentHash: 'h0',
      transactionId: '1',
      type: 'deposit',
      status: 'COMPLETED',
      externalId: null,
      invoiceId: null,
      currency: 'BRL',
      gross: '100.00',
      fee: '1.50',
      net: '98.50',
      createdAt: new Date('2026-03-03T12:00:00.000Z'),
      updatedAt: null,
      settlementId: 'S1',
    });
    expect(published[0]!.value).toMatchObject({
      importId: first.id,
      kind: 'provider-transactions',
      batch: 1,
    });

    // The same file again adds nothing and publishes nothing; a file with two more lines publishes those.
    const again = await recordImport(tdb.db, file(rows, 'b'));
    expect(again.new).toBe(0);
    expect(await relay.relayOnce()).toBe(0);
    const more = await recordImport(tdb.db, file([...rows, row(1_500), row(1_501)], 'c'));
    expect(more.new).toBe(2);
    expect(await relay.relayOnce()).toBe(1);
    const after = await readTopic(TX_TOPIC, 3);
    const last = after.find((m) => m.value.importId === more.id)!;
    expect(last.value.lines.map((l) => l.identity)).toEqual(['r1500', 'r1501']);
    expect(after.filter((m) => m.value.importId === again.id)).toEqual([]);
  }, 60_000);

  it('publishes bank lines and settlements with their fields, exact', async () => {
    const line = (identity: string, amount: string) => ({
      identity,
      content_hash: `h-${identity}`,
      bank_account: 'DE89370400440532013000',
      currency: 'EUR',
      reference: `ref-${identity}`,
      booking_date: '2026-03-04',
      value_date: '2026-03-05',
      amount,
      reversal: false,
      end_to_end_ids: ['E2E-1', 'E2E-2'],
      counterparty: 'Provider Ltd',
      description: 'settlement',
      transactions: [{ endToEndId: 'E2E-1' }],
    });
    const bank = await recordImport(tdb.db, {
      kind: 'bank-statement',
      fileName: 'camt.xml',
      sha256: 'd'.repeat(64),
      profile: null,
      importedBy: 'test',
      statements: [
        {
          statementId: 'STMT-1',
          format: 'camt.053.001.08',
          bankAccount: 'DE89370400440532013000',
          currency: 'EUR',
          opening: '0.00',
          closing: '12345678901234567.89',
          credits: '12345678901234568.89',
          debits: '-1.00',
          booked: 2,
          pending: 0,
          lines: [line('b1', '12345678901234568.89'), line('b2', '-1.00')],
        },
      ],
    });
    const settlements = await recordImport(tdb.db, {
      kind: 'provider-settlements',
      fileName: 'settlements.csv',
      sha256: 'e'.repeat(64),
      profile: null,
      importedBy: 'test',
      rows: [
        {
          identity: 's1',
          content_hash: 'hs1',
          settlement_id: 'STL-1',
          account: null,
          period_start: '2026-03-01T00:00:00.000Z',
          period_end: '2026-03-02T00:00:00.000Z',
          currency: 'BRL',
          gross: '1000.00',
          fees: '10.00',
          settlement_currency: 'EUR',
          rate: '0.18123456',
          net: '179.42',
          value_date: '2026-03-03',
          bank_reference: 'E2E-1',
          balance_at_cutoff: '-25.10',
        },
      ],
    });
    expect(await relay.relayOnce()).toBe(1);
    expect(await relay.relayOnce()).toBe(1);
    const [b] = await readTopic(IMPORT_TOPICS['bank-statement'], 1);
    expect(b!.key).toBe(`bank-statement:${bank.id}:1`);
    const amounts = Object.fromEntries(b!.value.lines.map((l) => [l.identity, l]));
    expect(amounts.b1).toMatchObject({
      amount: '12345678901234568.89',
      bookingDate: '2026-03-04',
      valueDate: '2026-03-05',
      endToEndIds: ['E2E-1', 'E2E-2'],
      transactions: [{ endToEndId: 'E2E-1' }],
    });
    expect(amounts.b2!.amount).toBe('-1.00');
    const [st] = await readTopic(IMPORT_TOPICS['provider-settlements'], 1);
    expect(st!.value.importId).toBe(settlements.id);
    expect(st!.value.lines).toEqual([
      {
        identity: 's1',
        contentHash: 'hs1',
        settlementId: 'STL-1',
        account: null,
        periodStart: new Date('2026-03-01T00:00:00.000Z'),
        periodEnd: new Date('2026-03-02T00:00:00.000Z'),
        currency: 'BRL',
        gross: '1000.00',
        fees: '10.00',
        settlementCurrency: 'EUR',
        rate: '0.18123456',
        net: '179.42',
        valueDate: '2026-03-03',
        bankReference: 'E2E-1',
        balanceAtCutoff: '-25.10',
      },
    ]);
  }, 60_000);

  it('matches the published lines, and dead-letters a message that does not fit with the reason', async () => {
    // The payment the report's first row names, in the ledger's mirror.
    await sql`
      INSERT INTO mirrors (merchant_account, entity_kind, entity_id, status, currency, amount, fee_amount, first_seen_at)
      VALUES ('shop', 'deposit', '1', 'COMPLETED', 'BRL', 100.00, 1.50, '2026-03-03T12:00:00Z')`.execute(
      tdb.db,
    );
    const runs: { lines: number; byRule: Record<string, number> }[] = [];
    matcher = await startMatchConsumer({
      kafka,
      serde,
      dlq: publisher,
      db: tdb.db,
      logger,
      rules: DEFAULT_MATCH_RULES,
      options: { now: new Date('2026-03-10T00:00:00Z'), reportAccount: 'shop' },
      retry: { attempts: 1 },
      onRun: (run, lines) => runs.push({ lines, byRule: run.byRule }),
    });
    await matcher.ready;
    const matched = await waitFor(
      'the first row matched to its payment',
      async () => {
        const m = await tdb.db
          .selectFrom('match_members')
          .innerJoin('matches', 'matches.id', 'match_members.match_id')
          .select(['matches.rule', 'match_members.identity'])
          .where('match_members.identity', '=', 'r0')
          .where('matches.ended_at', 'is', null)
          .executeTakeFirst();
        return m ?? false;
      },
      60_000,
    );
    expect(matched.rule).toBe('transaction-id');
    // Every line consumed was seen by a run (how runs coalesce: test/consumers/matcher.test.ts).
    await waitFor(
      () => `runs over the 1,505 lines (${JSON.stringify(runs)})`,
      () => runs.reduce((n, r) => n + r.lines, 0) === 1_505,
      30_000,
    );

    // A message whose line breaks its schema's rules (an amount that is no decimal) and one that is not Avro.
    const bad: ImportedLines<ImportedBankLine> = {
      importId: '999',
      kind: 'bank-statement',
      batch: 1,
      importedAt: new Date(),
      lines: [
        {
          identity: 'x1',
          contentHash: 'x1',
          bankAccount: 'DE00',
          currency: 'EUR',
          reference: null,
          bookingDate: '2026-03-03',
          valueDate: null,
          amount: '1,50',
          reversal: false,
          endToEndIds: [],
          counterparty: null,
          description: null,
          transactions: [],
        },
      ],
    };
    const bankTopic = IMPORT_TOPICS['bank-statement'];
    await publisher.publish(bankTopic, [{ value: bad }]);
    await raw.send({
      topic: bankTopic,
      messages: [{ key: 'bank-statement:998:1', value: Buffer.from('junk') }],
    });
    const dead = await readTopic(dlqTopicOf(bankTopic), 2);
    const byKey = new Map(dead.map((d) => [d.key, d.value as DlqEnvelope]));
    const invalid = byKey.get('bank-statement:999:1')!;
    expect(invalid.errorCode).toBe('SCHEMA_INVALID');
    expect(invalid.reason).toContain('lines[0].amount');
    expect(invalid.originalTopic).toBe(bankTopic);
    expect(byKey.get('bank-statement:998:1')!.errorCode).toBe('SCHEMA_INVALID');
  }, 120_000);
});
