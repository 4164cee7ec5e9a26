/**
 * Fuzzing the Avro consumers with corrupted messages, over the real embedded broker (kafkajs over TCP),
 * the real registry (HTTP), PostgreSQL and the sandbox: the reconciler's consumer of
 * provider.status.observed.v1 and the status fetcher's consumer of provider.notification.received.v1,
 * both started by their real start functions. Corrupted messages (random bytes, missing or wrong magic
 * byte, unknown schema id, another topic's schema id, truncated Avro, valid Avro breaking the domain
 * rules, null value, huge value) are produced raw with kafkajs, interleaved with valid ones. Every
 * corrupted message must land in `<topic>.dlq` exactly once with a reason naming what was wrong, every
 * valid one must be processed (booked in the ledger; fetched, then booked), the groups' offsets must
 * move past everything, and the consumers must keep running.
 * The count grows with `FUZZ_REQUESTS` (CI: 2,000 gives 200 messages per topic; `npm run fuzz`: 1,000).
 * `FUZZ_LOG=1` shows the consumers' warnings and errors.
 */

import { createHash, randomUUID } from 'node:crypto';
import avsc from 'avsc';
import fc from 'fast-check';
import type { Consumer, Producer } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RECONCILER_GROUPS, type Reconciler, startReconciler } from '../../src/consumers/reconciler.ts';
import { runStatusFetcher } from '../../src/consumers/status-fetcher.ts';
import type { Observation } from '../../src/domain/observation.ts';
import { isStatus } from '../../src/domain/statuses.ts';
import { DLQ_HEADERS, DLQ_VALUE_LIMIT } from '../../src/events/kafka.ts';
import type { DlqEnvelope, NotificationReceived } from '../../src/events/payloads.ts';
import { type AvroRecord, toRecord } from '../../src/events/records.ts';
import { readSchemaFile } from '../../src/events/serde.ts';
import { type AnyTopicName, dlqTopicOf, TOPICS, type TopicName } from '../../src/events/topics.ts';
import { createLogger } from '../../src/logger.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { sampleIntent } from '../events/fixtures.ts';
import { waitFor } from '../helpers/wait.ts';
import { observation } from '../pipeline/helpers.ts';
import { type Infra, notificationOf, quiet, sandboxAccount, startInfra } from '../producers/helpers.ts';
import { oneShotBody, signed, startTestSandbox } from '../sandbox/helpers.ts';

const REQUESTS = Number(process.env.FUZZ_REQUESTS ?? 2_000);
/** Messages per topic. */
const COUNT = Math.max(100, Math.round(REQUESTS / 10));
const OBSERVED = 'provider.status.observed.v1';
const NOTIFICATIONS = 'provider.notification.received.v1';
const FETCHER_GROUP = 'payrecon-status-fetcher';

interface Fuzzed {
  id: string;
  topic: TopicName;
  category: string;
  key: string;
  value: Buffer | null;
  /** What the DLQ reason must say (corrupted messages only). */
  reason?: RegExp;
  /** x-dlq-error-code. */
  code?: string;
  /** Valid: the event id booked (observations) or the deposit id fetched (notifications). */
  valid?: string;
  /** Valid: the value, encoded through the serde before sending. */
  pending?: Observation | NotificationReceived;
}

const wire = (id: number, payload: Buffer) => {
  const header = Buffer.alloc(5);
  header.writeInt32BE(id, 1);
  return Buffer.concat([header, payload]);
};

describe(`Avro consumers under ${COUNT} corrupted and valid messages per topic`, () => {
  let tdb: TestDatabase;
  let infra: Infra;
  let sb: Awaited<ReturnType<typeof startTestSandbox>>;
  let reconciler: Reconciler;
  let fetcher: Awaited<ReturnType<typeof runStatusFetcher>>;
  let raw: Producer;
  const deposits: string[] = [];

  beforeAll(async () => {
    tdb = await createTestDatabase();
    infra = await startInfra();
    sb = await startTestSandbox();
    // Sandbox deposits the valid notifications name (the fetcher reads their status).
    for (let i = 0; i < Math.ceil(COUNT / 5); i++) {
      const d = await signed(sb.url, '/v3/deposits', { body: oneShotBody({ invoice_id: `avro-fz-${i}` }) });
      expect(d.status, d.text).toBe(200);
      deposits.push(String(d.json.deposit_id));
    }
    reconciler = await startReconciler({
      kafka: infra.kafka,
      serde: infra.serde,
      dlq: infra.publisher,
      db: tdb.db,
      logger: process.env.FUZZ_LOG ? createLogger({ level: 'warn' }) : quiet,
    });
    fetcher = await runStatusFetcher({
      kafka: infra.kafka,
      serde: infra.serde,
      accounts: [sandboxAccount(sb, { name: 'main' })],
      providerOptions: { retries: 0, logger: quiet },
      groupId: FETCHER_GROUP,
      logger: process.env.FUZZ_LOG ? createLogger({ level: 'warn' }) : quiet,
    });
    await Promise.all([reconciler.ready, fetcher.ready]);
    raw = infra.kafka.producer();
    await raw.connect();
  }, 120_000);

  afterAll(async () => {
    await raw?.disconnect();
    await fetcher?.stop();
    await reconciler?.stop();
    await sb?.close();
    await infra?.close();
    await tdb?.drop();
  });

  /** The messages of one topic: corrupted ones of every category, with valid ones interleaved. */
  function messagesOf(topic: TopicName, seed: number): Fuzzed[] {
    const serde = infra.serde;
    const idOf = (t: AnyTopicName) => serde.ids.get(t)!;
    const known = new Set([...serde.ids.values()]);
    const type = avsc.Type.forSchema(JSON.parse(readSchemaFile(TOPICS[topic].schemaFile)) as avsc.Schema);
    let n = 0;
    let d = 0;
    const validObservation = () =>
      observation({
        kind: 'deposit',
        entityId: String(7_000_000_000 + seed * 100_000 + n),
        status: 'COMPLETED',
        source: 'poll',
        currency: 'USD',
        amount: 1_000n,
        feeAmount: 0n,
        feeCurrency: 'USD',
        feeOnPayer: false,
      });
    const validNotification = (entityId: string, account = 'main'): NotificationReceived =>
      notificationOf('deposit', entityId, null, account);
    /** A valid value of the topic as an Avro record (to corrupt field by field). */
    const validRecord = (): AvroRecord =>
      topic === OBSERVED
        ? toRecord(OBSERVED, validObservation())
        : toRecord(NOTIFICATIONS, validNotification(deposits[0]!));
    const encodeRecord = (r: AvroRecord) => wire(idOf(topic), type.toBuffer(r));
    const validBytes = () => encodeRecord(validRecord());
    const other: AnyTopicName[] = [
      ...(Object.keys(TOPICS) as TopicName[]).filter((t) => t !== topic),
      dlqTopicOf(topic),
    ];
    const otherValue = (t: AnyTopicName): Buffer => {
      const envelope: DlqEnvelope = {
        originalTopic: topic,
        partition: 0,
        offset: '1',
        key: null,
        value: Buffer.from('x'),
        reason: 'test',
        errorCode: 'SCHEMA_INVALID',
        failedAt: new Date(),
        attempts: 1,
        consumerGroup: null,
        valueSize: 1,
        valueSha256: null,
        valueTruncated: false,
      };
      const values: Record<string, unknown> = {
        [OBSERVED]: validObservation(),
        [NOTIFICATIONS]: validNotification(deposits[0]!),
        'merchant.intent.recorded.v1': sampleIntent({
          intentId: randomUUID(),
          operation: 'deposit',
          externalRef: 'ref-1',
          entityId: null,
          currency: 'USD',
          amount: 100n,
          createdAt: new Date(),
          request: {},
          response: null,
        }),
        'recon.alert.raised.v1': {
          alertId: randomUUID(),
          type: 'TEST',
          severity: 'high',
          account: 'main',
          entityKind: null,
          entityId: null,
          amount: null,
          currency: null,
          message: 'm',
          raisedAt: new Date(),
          details: {},
        },
        ...Object.fromEntries(
          (
            [
              ['imports.bank-lines.v1', 'bank-statement'],
              ['imports.provider-transactions.v1', 'provider-transactions'],
              ['imports.provider-settlements.v1', 'provider-settlements'],
            ] as const
          ).map(([name, kind]) => [
            name,
            { importId: '1', kind, batch: 1, importedAt: new Date(), lines: [] },
          ]),
        ),
      };
      const value = t.endsWith('.dlq') ? envelope : values[t];
      const schema = t.endsWith('.dlq') ? 'dlq-envelope.v1.avsc' : TOPICS[t as TopicName].schemaFile;
      const record = toRecord(t, value as never);
      return wire(
        idOf(t),
        avsc.Type.forSchema(JSON.parse(readSchemaFile(schema)) as avsc.Schema).toBuffer(record),
      );
    };
    const schemaInvalid = 'SCHEMA_INVALID';
    const corrupt = (category: string, value: Buffer | null, reason: RegExp, code = schemaInvalid) => ({
      category,
      value,
      reason,
      code,
    });
    /** An instant field (epoch milliseconds) outside years 1-9999, which PostgreSQL cannot store. */
    const outsideYears = (field: string) =>
      fc
        .constantFrom(
          253_402_300_800_000,
          1_000_000_000_000_000,
          8_640_000_000_000_000,
          -62_135_596_800_001,
          -8_640_000_000_000_000,
        )
        .map((ms) =>
          corrupt(
            `domain: ${field}`,
            encodeRecord({ ...validRecord(), [field]: ms }),
            new RegExp(`field ${field}`),
          ),
        );
    /** Valid Avro whose values break the domain rules, per topic. */
    const domain: fc.Arbitrary<ReturnType<typeof corrupt>> =
      topic === OBSERVED
        ? fc.oneof(
            fc
              .constantFrom(
                'abc',
                '1.234',
                '12,50',
                '-5.00',
                '',
                '1.2.3',
                'NaN',
                'Infinity',
                '99999999999999999999.00',
              )
              .map((amount) =>
                corrupt('domain: amount', encodeRecord({ ...validRecord(), amount }), /field amount/),
              ),
            fc
              .stringMatching(/^[A-Z_]{1,12}$/)
              .filter((s) => !isStatus('deposit', s))
              .map((status) =>
                corrupt('domain: status', encodeRecord({ ...validRecord(), status }), /field status/),
              ),
            fc
              .constantFrom('not json', '[1,2]', '"text"', '{')
              .map((details) =>
                corrupt('domain: details', encodeRecord({ ...validRecord(), details }), /field details/),
              ),
            outsideYears('observed_at'),
          )
        : fc.oneof(
            fc
              .stringMatching(/^[a-z]{1,10}$/)
              .filter((s) => !['verified', 'failed', 'unchecked'].includes(s))
              .map((authenticity) =>
                corrupt(
                  'domain: authenticity',
                  encodeRecord({ ...validRecord(), authenticity }),
                  /field authenticity/,
                ),
              ),
            outsideYears('received_at'),
            fc
              .stringMatching(/^[a-z]{3,10}$/)
              .filter((a) => a !== 'main')
              .map((account) =>
                corrupt(
                  'domain: account',
                  encodeRecord({ ...validRecord(), account }),
                  /account \S+, which is not configured/,
                  'NOT_FOUND',
                ),
              ),
          );

    const arbitrary = fc.oneof(
      // Valid messages: about one in six.
      {
        weight: 6,
        arbitrary: fc.constant(null).map(() => {
          if (topic === OBSERVED) {
            const o = validObservation();
            return { category: 'valid', value: null as Buffer | null, obs: o, valid: o.eventId };
          }
          const entity = deposits[d++ % deposits.length]!;
          return {
            category: 'valid',
            value: null as Buffer | null,
            notification: validNotification(entity),
            valid: entity,
          };
        }),
      },
      {
        weight: 4,
        arbitrary: fc
          .uint8Array({ minLength: 0, maxLength: 300 })
          .map((b) =>
            corrupt('random-bytes', Buffer.from(b), /wire header|schema id|magic byte|cannot be decoded/),
          ),
      },
      {
        weight: 3,
        arbitrary: fc
          .constant(0)
          .map(() => corrupt('no-magic', validBytes().subarray(1), /magic byte|schema id/)),
      },
      {
        weight: 3,
        arbitrary: fc.integer({ min: 1, max: 255 }).map((m) => {
          const b = validBytes();
          b[0] = m;
          return corrupt('wrong-magic', b, new RegExp(`magic byte ${m}, expected 0`));
        }),
      },
      {
        weight: 3,
        arbitrary: fc
          .integer({ min: -(2 ** 31), max: 2 ** 31 - 1 })
          .filter((id) => !known.has(id))
          .map((id) => {
            const b = validBytes();
            b.writeInt32BE(id, 1);
            return corrupt('unknown-schema-id', b, new RegExp(`schema id ${id} is unknown`));
          }),
      },
      {
        weight: 3,
        arbitrary: fc
          .constantFrom(...other)
          .map((t) =>
            corrupt(
              'other-schema',
              otherValue(t),
              new RegExp(`schema id ${idOf(t)} cannot be read as ${topic}`),
            ),
          ),
      },
      {
        weight: 3,
        arbitrary: fc.double({ min: 0, max: 0.999, noNaN: true }).map((f) => {
          const b = validBytes();
          const cut = 5 + Math.floor(f * (b.length - 5));
          return corrupt('truncated', b.subarray(0, cut), /cannot be decoded|truncated/);
        }),
      },
      { weight: 4, arbitrary: domain },
      { weight: 1, arbitrary: fc.constant(0).map(() => corrupt('null', null, /no value/)) },
      {
        weight: 1,
        arbitrary: fc.integer({ min: 1024 * 1024, max: 3 * 1024 * 1024 }).map((size) => {
          const b = Buffer.alloc(size, 0xee);
          b.writeInt32BE(idOf(topic), 1);
          b[0] = 0;
          return corrupt('huge', b, /cannot be decoded|trailing/);
        }),
      },
    );
    const samples = fc.sample(arbitrary, { numRuns: COUNT, seed });
    const out: Fuzzed[] = [];
    for (const s of samples) {
      n++;
      const id = `${topic}#${n}`;
      const key = `deposit:main:fz-${seed}-${n}`;
      if ('obs' in s && s.obs) {
        out.push({ id, topic, category: 'valid', key, value: null, valid: s.valid, pending: s.obs });
      } else if ('notification' in s && s.notification) {
        out.push({ id, topic, category: 'valid', key, value: null, valid: s.valid, pending: s.notification });
      } else {
        const c = s as ReturnType<typeof corrupt>;
        out.push({ id, topic, category: c.category, key, value: c.value, reason: c.reason, code: c.code });
      }
    }
    return out;
  }

  async function encodePending(list: Fuzzed[]): Promise<void> {
    for (const m of list) {
      if (m.pending === undefined) continue;
      m.value =
        m.topic === OBSERVED
          ? await infra.serde.encode(OBSERVED, m.pending as Observation)
          : await infra.serde.encode(NOTIFICATIONS, m.pending as NotificationReceived);
      delete m.pending;
    }
  }

  /**
   * Every message on the DLQ `topics`. A consumer writes a message to its DLQ before it commits the
   * message's offset, so once both groups' offsets are past every message the DLQ holds all it ever
   * will (a duplicate included): it is read up to its high watermarks of then.
   */
  async function readDlq(
    topics: string[],
  ): Promise<Map<string, { headers: Record<string, string>; value: Buffer | null }[]>> {
    await waitFor(
      'offsets past every message',
      async () =>
        (await lagOf(RECONCILER_GROUPS.observations, OBSERVED)) === 0 &&
        (await lagOf(FETCHER_GROUP, NOTIFICATIONS)) === 0,
      90_000,
    );
    const admin = infra.kafka.admin();
    await admin.connect();
    const highs = new Map<string, bigint>();
    try {
      for (const topic of topics)
        for (const p of await admin.fetchTopicOffsets(topic))
          highs.set(`${topic}:${p.partition}`, BigInt(p.high));
    } finally {
      await admin.disconnect();
    }
    const readUpTo = new Map<string, bigint>();
    const seen = new Map<string, { headers: Record<string, string>; value: Buffer | null }[]>();
    const consumer: Consumer = infra.kafka.consumer({
      groupId: `dlq-reader-${randomUUID()}`,
      maxWaitTimeInMs: 200,
    });
    await consumer.connect();
    await consumer.subscribe({ topics, fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ topic, partition, message }) => {
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(message.headers ?? {}))
          if (v !== undefined) headers[k] = String(v);
        const id = headers['x-fuzz-id'] ?? `(no id) ${headers[DLQ_HEADERS.reason] ?? ''}`;
        const list = seen.get(id) ?? [];
        list.push({ headers, value: message.value });
        seen.set(id, list);
        readUpTo.set(`${topic}:${partition}`, BigInt(message.offset) + 1n);
      },
    });
    try {
      await waitFor(
        'the DLQ read up to its high watermarks',
        () => [...highs].every(([k, high]) => (readUpTo.get(k) ?? 0n) >= high),
        90_000,
      );
    } finally {
      await consumer.disconnect();
    }
    return seen;
  }

  async function lagOf(groupId: string, topic: string): Promise<number> {
    const admin = infra.kafka.admin();
    await admin.connect();
    try {
      const ends = await admin.fetchTopicOffsets(topic);
      const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] });
      return ends.reduce((lag, p) => {
        const c = committed?.partitions.find((x) => x.partition === p.partition)?.offset ?? '-1';
        return lag + (Number(p.high) - Math.max(0, Number(c)));
      }, 0);
    } finally {
      await admin.disconnect();
    }
  }

  it('dead-letters every corrupted message once with its reason, processes every valid one, and keeps consuming', async () => {
    const started = Date.now();
    const all = [...messagesOf(OBSERVED, 1), ...messagesOf(NOTIFICATIONS, 2)];
    await encodePending(all);
    // Interleaved across both topics, in chunks, as a producer would.
    const order = fc.sample(fc.shuffledSubarray(all, { minLength: all.length, maxLength: all.length }), {
      numRuns: 1,
      seed: 3,
    })[0]!;
    for (let i = 0; i < order.length; i += 25) {
      const chunk = order.slice(i, i + 25);
      await raw.sendBatch({
        acks: -1,
        topicMessages: [OBSERVED, NOTIFICATIONS].map((topic) => ({
          topic,
          messages: chunk
            .filter((m) => m.topic === topic)
            .map((m) => ({
              key: m.key,
              value: m.value,
              headers: { 'x-fuzz-id': m.id, 'x-fuzz-category': m.category },
            })),
        })),
      });
    }
    const corrupted = all.filter((m) => m.valid === undefined);
    const valid = all.filter((m) => m.valid !== undefined);

    const dlq = await readDlq([dlqTopicOf(OBSERVED), dlqTopicOf(NOTIFICATIONS)]);
    const problems: string[] = [];
    for (const m of corrupted) {
      const got = dlq.get(m.id) ?? [];
      if (got.length !== 1) {
        problems.push(`${m.id} ${m.category}: ${got.length} DLQ messages`);
        continue;
      }
      const { headers, value } = got[0]!;
      const reason = headers[DLQ_HEADERS.reason] ?? '';
      if (!m.reason!.test(reason))
        problems.push(`${m.id} ${m.category}: reason ${JSON.stringify(reason.slice(0, 200))}`);
      if (headers[DLQ_HEADERS.errorCode] !== m.code)
        problems.push(`${m.id} ${m.category}: code ${headers[DLQ_HEADERS.errorCode]}`);
      if (headers[DLQ_HEADERS.originalTopic] !== m.topic)
        problems.push(`${m.id}: original topic ${headers[DLQ_HEADERS.originalTopic]}`);
      // The envelope keeps the message as it was, byte for byte, up to DLQ_VALUE_LIMIT (then its start,
      // with the whole value's size and SHA-256), so a huge message cannot make the DLQ publish fail.
      const envelope = await infra.serde.decode(dlqTopicOf(m.topic), value);
      const long = m.value !== null && m.value.length > DLQ_VALUE_LIMIT;
      const kept = m.value === null ? null : long ? m.value.subarray(0, DLQ_VALUE_LIMIT) : m.value;
      if (
        envelope.reason !== reason ||
        !(envelope.value === null ? kept === null : kept !== null && envelope.value.equals(kept)) ||
        envelope.valueTruncated !== long ||
        envelope.valueSize !== (m.value === null ? null : m.value.length) ||
        envelope.valueSha256 !==
          (m.value === null ? null : createHash('sha256').update(m.value).digest('hex'))
      ) {
        problems.push(`${m.id} ${m.category}: envelope differs`);
      }
    }
    for (const m of valid)
      if (dlq.has(m.id))
        problems.push(
          `${m.id}: a valid message went to the DLQ: ${dlq.get(m.id)![0]!.headers[DLQ_HEADERS.reason]}`,
        );
    for (const id of dlq.keys())
      if (!all.some((m) => m.id === id)) problems.push(`unexpected DLQ message ${id}`);
    expect(problems.slice(0, 30), `${problems.length} problems`).toEqual([]);

    // Every valid observation booked; every valid notification fetched and its observation booked.
    const events = valid.filter((m) => m.topic === OBSERVED).map((m) => m.valid!);
    const fetched = [...new Set(valid.filter((m) => m.topic === NOTIFICATIONS).map((m) => m.valid!))];
    await waitFor(
      'every valid message processed',
      async () => {
        const booked = await tdb.db
          .selectFrom('status_history')
          .select('event_id')
          .where('event_id', 'in', events)
          .execute();
        const webhooks = await tdb.db
          .selectFrom('status_history')
          .select('entity_id')
          .distinct()
          .where('source', '=', 'webhook')
          .where('entity_id', 'in', fetched)
          .execute();
        return booked.length === events.length && webhooks.length === fetched.length ? true : undefined;
      },
      60_000,
    );
    // The groups' offsets moved past everything.
    await waitFor('offsets past every message', async () =>
      (await lagOf(RECONCILER_GROUPS.observations, OBSERVED)) === 0 &&
      (await lagOf(FETCHER_GROUP, NOTIFICATIONS)) === 0
        ? true
        : undefined,
    );
    // Still consuming: one more valid observation after the storm is booked.
    const last = observation({ kind: 'deposit', entityId: '7999999999', status: 'PENDING', source: 'poll' });
    await infra.publisher.publish(OBSERVED, [{ value: last }]);
    await waitFor('the observation after the storm', async () =>
      (await tdb.db
        .selectFrom('status_history')
        .select('event_id')
        .where('event_id', '=', last.eventId)
        .executeTakeFirst())
        ? true
        : undefined,
    );
    const seconds = (Date.now() - started) / 1000;
    const byCategory: Record<string, Record<string, number>> = {};
    for (const m of all) {
      const t = m.topic === OBSERVED ? 'observed' : 'notifications';
      byCategory[m.category] ??= {};
      byCategory[m.category]![t] = (byCategory[m.category]![t] ?? 0) + 1;
    }
    console.info(
      `avro fuzz: ${all.length} messages (${corrupted.length} corrupted, ${valid.length} valid) in ${seconds.toFixed(1)} s; every corrupted one dead-lettered once; ${JSON.stringify(byCategory)}`,
    );
  }, 600_000);
});
