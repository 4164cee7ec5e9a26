import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { COMPATIBILITY, SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type RunningRegistry, startRegistry } from '../../../src/embedded/registry/registry.ts';

const PAYMENT_V1 = {
  type: 'record',
  name: 'Payment',
  namespace: 'test.registry',
  fields: [
    { name: 'id', type: 'string' },
    { name: 'amount', type: 'string' },
  ],
};
// Adds an optional field with a default: new readers can read old data (BACKWARD).
const PAYMENT_V2 = {
  ...PAYMENT_V1,
  fields: [...PAYMENT_V1.fields, { name: 'currency', type: ['null', 'string'], default: null }],
};
// Adds a required field without a default: cannot read v1 data.
const PAYMENT_BROKEN = {
  ...PAYMENT_V1,
  fields: [...PAYMENT_V1.fields, { name: 'merchant', type: 'string' }],
};

const dirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'payrecon-registry-'));
  dirs.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function avro(schema: object): { type: SchemaType.AVRO; schema: string } {
  return { type: SchemaType.AVRO, schema: JSON.stringify(schema) };
}

/** Raw HTTP against the registry, for the error codes the client hides. */
async function call(registry: RunningRegistry, method: string, path: string, body?: unknown) {
  const res = await fetch(`${registry.url}${path}`, {
    method,
    headers: { 'content-type': 'application/vnd.schemaregistry.v1+json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('embedded schema registry with @kafkajs/confluent-schema-registry', () => {
  let dataDir: string;
  let registry: RunningRegistry;
  let client: SchemaRegistry;

  beforeEach(async () => {
    dataDir = tempDir();
    registry = await startRegistry({ host: '127.0.0.1', port: 0, dataDir });
    client = new SchemaRegistry({ host: registry.url, retry: { retries: 0 } });
  });
  afterEach(async () => {
    await registry.close();
  });

  it('registers, encodes, decodes and fetches by id', async () => {
    const { id } = await client.register(avro(PAYMENT_V1), { subject: 'payments-value' });
    expect(id).toBeGreaterThan(0);

    const value = { id: 'dep-1', amount: '123456789012345678.99' };
    const encoded = await client.encode(id, value);
    expect(encoded[0]).toBe(0);
    expect(encoded.readInt32BE(1)).toBe(id);
    // A fresh client has no cache: decoding must fetch the schema by id over HTTP.
    const other = new SchemaRegistry({ host: registry.url });
    expect(await other.decode(encoded)).toEqual(value);

    const fetched = await other.getSchema(id);
    expect((fetched as { name?: string }).name).toBe('test.registry.Payment');
    expect(await other.getLatestSchemaId('payments-value')).toBe(id);
    expect(await other.getRegistryId('payments-value', 1)).toBe(id);
    expect(await other.getRegistryIdBySchema('payments-value', avro(PAYMENT_V1))).toBe(id);

    const subjects = await call(registry, 'GET', '/subjects');
    expect(subjects.body).toEqual(['payments-value']);
  });

  it('answers the same id for the same schema, and sets the compatibility of a new subject', async () => {
    const first = await client.register(avro(PAYMENT_V1), { subject: 'a-value' });
    const again = await client.register(avro(PAYMENT_V1), { subject: 'a-value' });
    expect(again.id).toBe(first.id);
    const versions = await call(registry, 'GET', '/subjects/a-value/versions');
    expect(versions.body).toEqual([1]);
    // The client set BACKWARD on first registration.
    expect((await call(registry, 'GET', '/config/a-value')).body).toEqual({ compatibilityLevel: 'BACKWARD' });
    // Same schema under another subject: same global id, version 1 there.
    const elsewhere = await client.register(avro(PAYMENT_V1), { subject: 'b-value' });
    expect(elsewhere.id).toBe(first.id);
    // Whitespace does not make a new schema.
    const spaced = await call(registry, 'POST', '/subjects/a-value/versions', {
      schema: JSON.stringify(PAYMENT_V1, null, 2),
    });
    expect(spaced.body).toEqual({ id: first.id });
  });

  it('refuses an incompatible schema with 409 and accepts a compatible evolution', async () => {
    const v1 = await client.register(avro(PAYMENT_V1), { subject: 'evolve-value' });
    await expect(client.register(avro(PAYMENT_BROKEN), { subject: 'evolve-value' })).rejects.toThrow(
      /incompatible/,
    );
    const raw = await call(registry, 'POST', '/subjects/evolve-value/versions', {
      schema: JSON.stringify(PAYMENT_BROKEN),
    });
    expect(raw.status).toBe(409);
    expect(raw.body.error_code).toBe(409);

    const compat = await call(registry, 'POST', '/compatibility/subjects/evolve-value/versions/latest', {
      schema: JSON.stringify(PAYMENT_BROKEN),
    });
    expect(compat.body).toEqual({ is_compatible: false });
    const compatOk = await call(registry, 'POST', '/compatibility/subjects/evolve-value/versions/latest', {
      schema: JSON.stringify(PAYMENT_V2),
    });
    expect(compatOk.body).toEqual({ is_compatible: true });

    const v2 = await client.register(avro(PAYMENT_V2), { subject: 'evolve-value' });
    expect(v2.id).not.toBe(v1.id);
    expect((await call(registry, 'GET', '/subjects/evolve-value/versions')).body).toEqual([1, 2]);

    // Data written with v1 read through v2 as reader schema gets the default.
    const old = await client.encode(v1.id, { id: 'x', amount: '1.00' });
    const read = await client.decode(old, {
      [SchemaType.AVRO]: { readerSchema: PAYMENT_V2 as never },
    });
    expect(read).toEqual({ id: 'x', amount: '1.00', currency: null });
  });

  it('applies per-subject and global compatibility levels', async () => {
    await client.register(avro(PAYMENT_V1), { subject: 'none-value', compatibility: COMPATIBILITY.NONE });
    expect((await call(registry, 'GET', '/config/none-value')).body).toEqual({ compatibilityLevel: 'NONE' });
    // NONE lets the breaking change through.
    await client.register(avro(PAYMENT_BROKEN), { subject: 'none-value', compatibility: COMPATIBILITY.NONE });

    // FORWARD: old readers must read new data; removing a field without default in reader breaks.
    expect((await call(registry, 'PUT', '/config', { compatibility: 'FORWARD' })).body).toEqual({
      compatibility: 'FORWARD',
    });
    expect((await call(registry, 'GET', '/config')).body).toEqual({ compatibilityLevel: 'FORWARD' });
    await call(registry, 'POST', '/subjects/fwd-value/versions', { schema: JSON.stringify(PAYMENT_BROKEN) });
    const dropMerchant = await call(registry, 'POST', '/subjects/fwd-value/versions', {
      schema: JSON.stringify(PAYMENT_V1),
    });
    expect(dropMerchant.status).toBe(409);
    // With defaultToGlobal the subject without its own config reports the global level.
    expect((await call(registry, 'GET', '/config/fwd-value?defaultToGlobal=true')).body).toEqual({
      compatibilityLevel: 'FORWARD',
    });

    const bad = await call(registry, 'PUT', '/config/x', { compatibility: 'SIDEWAYS' });
    expect(bad).toEqual({ status: 422, body: expect.objectContaining({ error_code: 42203 }) });
  });

  it('answers the Confluent error codes', async () => {
    expect((await call(registry, 'GET', '/subjects/missing/versions/latest')).body.error_code).toBe(40401);
    await client.register(avro(PAYMENT_V1), { subject: 'codes-value' });
    expect((await call(registry, 'GET', '/subjects/codes-value/versions/7')).body.error_code).toBe(40402);
    expect((await call(registry, 'GET', '/subjects/codes-value/versions/zero')).body.error_code).toBe(42202);
    expect((await call(registry, 'GET', '/schemas/ids/999')).body.error_code).toBe(40403);
    expect((await call(registry, 'GET', '/config/unknown-subject')).body.error_code).toBe(40408);
    const lookupMissing = await call(registry, 'POST', '/subjects/codes-value', {
      schema: JSON.stringify(PAYMENT_V2),
    });
    expect(lookupMissing).toEqual({ status: 404, body: expect.objectContaining({ error_code: 40403 }) });
    const invalid = await call(registry, 'POST', '/subjects/codes-value/versions', {
      schema: '{"type":"record","name":"X","fields":[{"name":"a","type":"nosuchtype"}]}',
    });
    expect(invalid).toEqual({ status: 422, body: expect.objectContaining({ error_code: 42201 }) });
    const notJson = await call(registry, 'POST', '/subjects/codes-value/versions', { schema: '{oops' });
    expect(notJson.body.error_code).toBe(42201);
    await expect(client.getRegistryIdBySchema('codes-value', avro(PAYMENT_V2))).rejects.toThrow();
    expect((await call(registry, 'GET', '/mode')).body).toEqual({ mode: 'READWRITE' });
    expect((await call(registry, 'GET', '/nothing/here')).status).toBe(404);
  });

  it('keeps subjects, versions, ids and configs across a restart', async () => {
    const v1 = await client.register(avro(PAYMENT_V1), { subject: 'durable-value' });
    const v2 = await client.register(avro(PAYMENT_V2), { subject: 'durable-value' });
    const encoded = await client.encode(v2.id, { id: 'd', amount: '9.99', currency: 'EUR' });
    await registry.close();

    registry = await startRegistry({ host: '127.0.0.1', port: 0, dataDir });
    const fresh = new SchemaRegistry({ host: registry.url });
    expect(await fresh.decode(encoded)).toEqual({ id: 'd', amount: '9.99', currency: 'EUR' });
    expect(await fresh.getRegistryId('durable-value', 1)).toBe(v1.id);
    expect(await fresh.getLatestSchemaId('durable-value')).toBe(v2.id);
    expect((await call(registry, 'GET', '/config/durable-value')).body).toEqual({
      compatibilityLevel: 'BACKWARD',
    });
    // Idempotent after restart, and the compatibility rule still holds.
    expect((await fresh.register(avro(PAYMENT_V1), { subject: 'durable-value' })).id).toBe(v1.id);
    await expect(fresh.register(avro(PAYMENT_BROKEN), { subject: 'durable-value' })).rejects.toThrow();
    // A new schema gets a new id, never one already handed out.
    const next = await fresh.register(avro({ ...PAYMENT_V1, name: 'Other' }), { subject: 'other-value' });
    expect(next.id).toBeGreaterThan(Math.max(v1.id, v2.id));
  });

  it('resolves schema references', async () => {
    const money = {
      type: 'record',
      name: 'Money',
      namespace: 'test.registry',
      fields: [
        { name: 'amount', type: 'string' },
        { name: 'currency', type: 'string' },
      ],
    };
    await client.register(avro(money), { subject: 'money' });
    const order = {
      type: 'record',
      name: 'Order',
      namespace: 'test.registry',
      fields: [
        { name: 'id', type: 'string' },
        { name: 'total', type: 'test.registry.Money' },
      ],
    };
    const { id } = await client.register(
      { ...avro(order), references: [{ name: 'test.registry.Money', subject: 'money', version: 1 }] },
      { subject: 'orders-value' },
    );
    const value = { id: 'o-1', total: { amount: '10.00', currency: 'EUR' } };
    const fresh = new SchemaRegistry({ host: registry.url });
    expect(await fresh.decode(await client.encode(id, value))).toEqual(value);
    expect((await call(registry, 'GET', '/subjects/money/versions/1/referencedby')).body).toEqual([id]);
    // Without the reference the type name is unknown: invalid schema.
    const orphan = await call(registry, 'POST', '/subjects/orphans-value/versions', {
      schema: JSON.stringify(order),
    });
    expect(orphan.body.error_code).toBe(42201);
  });

  it('soft-deletes a subject, keeping its ids', async () => {
    const v1 = await client.register(avro(PAYMENT_V1), { subject: 'gone-value' });
    expect((await call(registry, 'DELETE', '/subjects/gone-value')).body).toEqual([1]);
    expect((await call(registry, 'GET', '/subjects')).body).toEqual([]);
    expect((await call(registry, 'GET', `/schemas/ids/${v1.id}`)).status).toBe(200);
    const again = await call(registry, 'POST', '/subjects/gone-value/versions', {
      schema: JSON.stringify(PAYMENT_V1),
    });
    expect(again.body).toEqual({ id: v1.id });
    expect((await call(registry, 'GET', '/subjects/gone-value/versions')).body).toEqual([2]);
  });
});

describe('registry log', () => {
  it('ignores a torn last line left by a crash', async () => {
    const dataDir = tempDir();
    const first = await startRegistry({ host: '127.0.0.1', port: 0, dataDir });
    const client = new SchemaRegistry({ host: first.url });
    const { id } = await client.register(avro(PAYMENT_V1), { subject: 'torn-value' });
    await first.close();
    appendFileSync(join(dataDir, 'registry.log'), '{"op":"schema","id":9,"subj');

    const second = await startRegistry({ host: '127.0.0.1', port: 0, dataDir });
    try {
      const again = new SchemaRegistry({ host: second.url });
      expect(await again.getLatestSchemaId('torn-value')).toBe(id);
    } finally {
      await second.close();
    }
  });

  it('refuses a second registry on the same data directory, and takes over the lock of a dead owner', async () => {
    const dataDir = tempDir();
    const first = await startRegistry({ host: '127.0.0.1', port: 0, dataDir });
    try {
      await expect(startRegistry({ host: '127.0.0.1', port: 0, dataDir })).rejects.toThrow(
        /in use by process/,
      );
    } finally {
      await first.close();
    }
    // A crash leaves the lock behind with a pid that no longer runs.
    writeFileSync(join(dataDir, 'registry.lock'), '999999999');
    const second = await startRegistry({ host: '127.0.0.1', port: 0, dataDir });
    await second.close();
  });
});
