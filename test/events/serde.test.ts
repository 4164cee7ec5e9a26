import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry';
import avsc from 'avsc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '../../src/domain/errors.ts';
import { type RunningRegistry, startRegistry } from '../../src/embedded/registry/registry.ts';
import { toRecord } from '../../src/events/records.ts';
import { allTopicNames, readSchemaFile, registerSchemas, type Serde } from '../../src/events/serde.ts';
import { TOPICS } from '../../src/events/topics.ts';
import { sampleAlert, sampleDlq, sampleIntent, sampleNotification, sampleObservation } from './fixtures.ts';

const OBSERVED = 'provider.status.observed.v1';

let dataDir: string;
let registry: RunningRegistry;
let client: SchemaRegistry;
let serde: Serde;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'payrecon-serde-'));
  registry = await startRegistry({ host: '127.0.0.1', port: 0, dataDir });
  client = new SchemaRegistry({ host: registry.url, retry: { retries: 0 } });
  serde = await registerSchemas(client);
});
afterAll(async () => {
  await registry.close();
  rmSync(dataDir, { recursive: true, force: true });
});

async function expectSchemaInvalid(promise: Promise<unknown>, field: RegExp): Promise<AppError> {
  const err = await promise.then(
    () => {
      throw new Error('expected SCHEMA_INVALID');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AppError);
  expect((err as AppError).code).toBe('SCHEMA_INVALID');
  expect((err as AppError).retryable).toBe(false);
  expect((err as AppError).message).toMatch(field);
  return err as AppError;
}

/** Encodes a record with the registered schema id but no conversion: to build bad messages. */
function rawMessage(id: number, schemaText: string, record: Record<string, unknown>): Buffer {
  const body = avsc.Type.forSchema(JSON.parse(schemaText) as avsc.Schema).toBuffer(record);
  const header = Buffer.alloc(5);
  header.writeInt32BE(id, 1);
  return Buffer.concat([header, body]);
}

describe('registerSchemas', () => {
  it('registers every topic and DLQ subject under BACKWARD', async () => {
    const subjects = (await (await fetch(`${registry.url}/subjects`)).json()) as string[];
    expect(subjects.sort()).toEqual(
      allTopicNames()
        .map((t) => `${t}-value`)
        .sort(),
    );
    for (const topic of allTopicNames()) {
      const config = await (await fetch(`${registry.url}/config/${topic}-value`)).json();
      expect(config).toEqual({ compatibilityLevel: 'BACKWARD' });
    }
    // All DLQ companions share one schema, so one id.
    const dlqIds = new Set(
      allTopicNames()
        .filter((t) => t.endsWith('.dlq'))
        .map((t) => serde.ids.get(t)),
    );
    expect(dlqIds.size).toBe(1);
  });

  it('is idempotent: a second start-up answers the same ids', async () => {
    const again = await registerSchemas(new SchemaRegistry({ host: registry.url }));
    expect([...again.ids.entries()]).toEqual([...serde.ids.entries()]);
  });

  it('fails at start-up when a subject holds an incompatible schema', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'payrecon-serde-broken-'));
    const other = await startRegistry({ host: '127.0.0.1', port: 0, dataDir: dir });
    try {
      const c = new SchemaRegistry({ host: other.url, retry: { retries: 0 } });
      // An earlier StatusObserved whose event_id was an int: the catalog's string event_id cannot read it.
      const earlier = JSON.parse(readSchemaFile(TOPICS[OBSERVED].schemaFile)) as {
        fields: { name: string; type: unknown }[];
      };
      for (const f of earlier.fields) if (f.name === 'event_id') f.type = 'int';
      await c.register(
        { type: SchemaType.AVRO, schema: JSON.stringify(earlier) },
        { subject: `${OBSERVED}-value` },
      );
      const err = await registerSchemas(c).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(AppError);
      expect((err as AppError).code).toBe('CONFIG_INVALID');
      expect((err as AppError).message).toMatch(/provider\.status\.observed\.v1-value/);
    } finally {
      await other.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('encode and decode', () => {
  it.each([
    ['provider.status.observed.v1', sampleObservation()],
    ['merchant.intent.recorded.v1', sampleIntent()],
    ['provider.notification.received.v1', sampleNotification()],
    ['recon.alert.raised.v1', sampleAlert()],
    ['recon.alert.raised.v1.dlq', sampleDlq()],
  ] as const)('round-trips %s through the wire format', async (topic, value) => {
    const buffer = await serde.encode(topic, value as never);
    expect(buffer[0]).toBe(0);
    expect(buffer.readInt32BE(1)).toBe(serde.ids.get(topic));
    expect(await serde.decode(topic, buffer)).toEqual(value);
    // Any Confluent client reading it sees decimal strings, not numbers.
    const plain = (await client.decode(buffer)) as Record<string, unknown>;
    if ('amount' in plain && plain.amount !== null) expect(typeof plain.amount).toBe('string');
  });

  it('decodes in a fresh serde that has never seen the id', async () => {
    const buffer = await serde.encode(OBSERVED, sampleObservation());
    const fresh = await registerSchemas(new SchemaRegistry({ host: registry.url }));
    expect(await fresh.decode(OBSERVED, buffer)).toEqual(sampleObservation());
  });

  it('refuses to encode a value that does not fit, naming the field', async () => {
    await expectSchemaInvalid(
      serde.encode(OBSERVED, sampleObservation({ kind: 'transfer' as never })),
      /field kind/,
    );
    await expectSchemaInvalid(
      serde.encode(OBSERVED, sampleObservation({ eventId: 42 as never })),
      /event_id/,
    );
  });

  it('names the field of a corrupted message', async () => {
    const good = await serde.encode(OBSERVED, sampleObservation());
    // Cut inside `account`, the third field (event_id is 36 chars + 1 length byte, kind 1 byte).
    const truncated = good.subarray(0, 5 + 37 + 1 + 2);
    await expectSchemaInvalid(serde.decode(OBSERVED, truncated), /field account/);
    // An out-of-range union branch index for `external_ref` (after entity_id).
    const record = toRecord(OBSERVED, sampleObservation());
    const writer = avsc.Type.forSchema(
      JSON.parse(readSchemaFile(TOPICS[OBSERVED].schemaFile)) as avsc.Schema,
    );
    const body = writer.toBuffer(record);
    const prefix = 37 + 1 + 5 + 11; // event_id, kind, account "main", entity_id "3000000001"
    const corrupted = Buffer.from(good);
    expect(body[prefix]).toBe(2); // zig-zag 1: the string branch
    corrupted[5 + prefix] = 0x7e; // branch 63
    await expectSchemaInvalid(serde.decode(OBSERVED, corrupted), /field external_ref/);
  });

  it('names the field of a schema-valid message with a bad amount or JSON', async () => {
    const id = serde.ids.get(OBSERVED)!;
    const text = readSchemaFile(TOPICS[OBSERVED].schemaFile);
    const record = toRecord(OBSERVED, sampleObservation());
    await expectSchemaInvalid(
      serde.decode(OBSERVED, rawMessage(id, text, { ...record, amount: '12.345' })),
      /field amount/,
    );
    await expectSchemaInvalid(
      serde.decode(OBSERVED, rawMessage(id, text, { ...record, amount: '1e400' })),
      /field amount/,
    );
    await expectSchemaInvalid(
      serde.decode(OBSERVED, rawMessage(id, text, { ...record, details: 'nope' })),
      /field details/,
    );
  });

  it('refuses a wrong header, an unknown id and a schema of another topic', async () => {
    await expectSchemaInvalid(serde.decode(OBSERVED, Buffer.from('hello world')), /wire header/);
    await expectSchemaInvalid(serde.decode(OBSERVED, Buffer.from([0, 0])), /wire header/);
    await expectSchemaInvalid(serde.decode(OBSERVED, null), /value/);
    const unknown = Buffer.from(await serde.encode(OBSERVED, sampleObservation()));
    unknown.writeInt32BE(99_999, 1);
    await expectSchemaInvalid(serde.decode(OBSERVED, unknown), /schema id/);
    const alert = await serde.encode('recon.alert.raised.v1', sampleAlert());
    await expectSchemaInvalid(serde.decode(OBSERVED, alert), /schema id/);
  });

  it('reports an unreachable registry as retryable, not as a bad message', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'payrecon-serde-down-'));
    const other = await startRegistry({ host: '127.0.0.1', port: 0, dataDir: dir });
    try {
      // A message written by another producer with an older schema version, unknown to this serde.
      const writer = new SchemaRegistry({ host: other.url });
      const current = JSON.parse(readSchemaFile(TOPICS[OBSERVED].schemaFile)) as {
        fields: { name: string }[];
      };
      const older = { ...current, fields: current.fields.filter((f) => f.name !== 'crypto') };
      const { id: oldId } = await writer.register(
        { type: SchemaType.AVRO, schema: JSON.stringify(older) },
        { subject: `${OBSERVED}-value` },
      );
      const { crypto: _c, ...oldRecord } = toRecord(OBSERVED, sampleObservation());
      const message = await writer.encode(oldId, oldRecord);
      const s = await registerSchemas(new SchemaRegistry({ host: other.url, retry: { retries: 0 } }));
      await other.close();
      const err = await s.decode(OBSERVED, message).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(AppError);
      expect((err as AppError).code).not.toBe('SCHEMA_INVALID');
      expect((err as AppError).retryable).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reads a message written with an older compatible version of the schema', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'payrecon-serde-evolve-'));
    const other = await startRegistry({ host: '127.0.0.1', port: 0, dataDir: dir });
    try {
      const c = new SchemaRegistry({ host: other.url });
      const current = JSON.parse(readSchemaFile(TOPICS[OBSERVED].schemaFile)) as {
        fields: { name: string }[];
      };
      const older = {
        ...current,
        fields: current.fields.filter((f) => !['crypto', 'details'].includes(f.name)),
      };
      const { id: oldId } = await c.register(
        { type: SchemaType.AVRO, schema: JSON.stringify(older) },
        { subject: `${OBSERVED}-value` },
      );
      const {
        crypto: _c,
        details: _d,
        ...oldRecord
      } = toRecord(OBSERVED, sampleObservation({ crypto: true }));
      const oldMessage = await c.encode(oldId, oldRecord);

      const evolved = await registerSchemas(c);
      expect(evolved.ids.get(OBSERVED)).not.toBe(oldId);
      expect(await evolved.decode(OBSERVED, oldMessage)).toEqual(
        sampleObservation({ crypto: false, details: {} }),
      );
    } finally {
      await other.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
