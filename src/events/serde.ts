/**
 * Avro serialisation of every topic value through `@kafkajs/confluent-schema-registry`, in the
 * Confluent wire format (byte 0, the schema id as a big-endian int32, the Avro payload).
 *
 * `registerSchemas(registry)` registers each topic's schema under the subject `<topic>-value` (and the
 * DLQ envelope under `<topic>.dlq-value`) with BACKWARD compatibility, at start-up, and answers the
 * `Serde` that encodes and decodes with those ids. Decoding reads with the current schema as reader
 * schema, so a message written with an older compatible version still decodes. A message that is not
 * in the wire format, names an unknown schema id, or does not fit its schema raises
 * `AppError('SCHEMA_INVALID')` naming the field: consumers send such messages straight to the DLQ.
 */
import { readFileSync } from 'node:fs';
import { Agent as HttpsAgent } from 'node:https';
import { COMPATIBILITY, SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry';
import avsc from 'avsc';
import { AppError } from '../domain/errors.ts';
import { type AvroRecord, fromRecord, schemaInvalid, toRecord } from './records.ts';
import {
  type AnyTopicName,
  DLQ_SCHEMA_FILE,
  dlqTopicOf,
  isDlqTopicName,
  TOPIC_NAMES,
  TOPICS,
  type ValueOf,
  valueSubject,
} from './topics.ts';

const SCHEMAS_DIR = new URL('../../schemas/', import.meta.url);

/** The text of a schema file under `schemas/`. */
export function readSchemaFile(file: string): string {
  return readFileSync(new URL(file, SCHEMAS_DIR), 'utf8');
}

function schemaFileOf(topic: AnyTopicName): string {
  return isDlqTopicName(topic) ? DLQ_SCHEMA_FILE : TOPICS[topic].schemaFile;
}

export interface Serde {
  /** Encodes a value of `topic` in the wire format with the registered schema id. */
  encode<T extends AnyTopicName>(topic: T, value: ValueOf<T>): Promise<Buffer>;
  /** Decodes a message of `topic`; SCHEMA_INVALID (naming the field) when it does not fit. */
  decode<T extends AnyTopicName>(topic: T, buffer: Buffer | null): Promise<ValueOf<T>>;
  /** The registered schema id of each topic (and DLQ topic). */
  readonly ids: ReadonlyMap<AnyTopicName, number>;
}

/** Where the schema registry is and how to authenticate (SCHEMA_REGISTRY_* settings). */
export interface RegistryClientSettings {
  readonly url: string;
  /** HTTP basic auth (Confluent Cloud: the API key and secret); both or neither. */
  readonly username: string | null;
  readonly password: string | null;
  /** PEM CA bundle for an https URL; null keeps the system's trusted CAs. */
  readonly caFile: string | null;
}

/** The one way payrecon makes a registry client: basic auth and the CA from the settings. */
export function createRegistryClient(
  settings: RegistryClientSettings,
  options: { retries?: number } = {},
): SchemaRegistry {
  const auth =
    settings.username !== null && settings.password !== null
      ? { username: settings.username, password: settings.password }
      : undefined;
  const agent =
    settings.caFile && settings.url.startsWith('https:')
      ? new HttpsAgent({ ca: readFileSync(settings.caFile, 'utf8'), keepAlive: true })
      : undefined;
  return new SchemaRegistry({
    host: settings.url,
    ...(auth ? { auth } : {}),
    // mappersmith takes an http.Agent; an https.Agent is one.
    ...(agent ? { agent: agent as unknown as import('node:http').Agent } : {}),
    ...(options.retries === undefined ? {} : { retry: { retries: options.retries } }),
  });
}

/** Every topic of the catalog and its DLQ companion. */
export function allTopicNames(): AnyTopicName[] {
  return TOPIC_NAMES.flatMap((t) => [t, dlqTopicOf(t)] as AnyTopicName[]);
}

/**
 * Registers every schema under BACKWARD compatibility (idempotent: the same schema answers the same
 * id) and answers the serde. A schema change that breaks compatibility fails here, at start-up.
 */
export async function registerSchemas(registry: SchemaRegistry): Promise<Serde> {
  const ids = new Map<AnyTopicName, number>();
  const readers = new Map<AnyTopicName, avsc.Type>();
  for (const topic of allTopicNames()) {
    const text = readSchemaFile(schemaFileOf(topic));
    let id: number;
    try {
      ({ id } = await registry.register(
        { type: SchemaType.AVRO, schema: text },
        { subject: valueSubject(topic), compatibility: COMPATIBILITY.BACKWARD },
      ));
    } catch (err) {
      const refused = registryRefusal(err);
      if (refused) throw new AppError('CONFIG_INVALID', refused, { cause: err });
      throw new AppError(
        'CONFIG_INVALID',
        `registering ${schemaFileOf(topic)} under ${valueSubject(topic)} failed: ${errorMessage(err)}`,
        { cause: err, retryable: isUnreachable(err) },
      );
    }
    ids.set(topic, id);
    readers.set(topic, avsc.Type.forSchema(JSON.parse(text) as avsc.Schema));
  }
  return new RegistrySerde(registry, ids, readers);
}

class RegistrySerde implements Serde {
  private readonly writers = new Map<number, Promise<avsc.Type>>();
  private readonly resolvers = new Map<string, avsc.Resolver | null>();

  constructor(
    private readonly registry: SchemaRegistry,
    readonly ids: ReadonlyMap<AnyTopicName, number>,
    private readonly readers: ReadonlyMap<AnyTopicName, avsc.Type>,
  ) {}

  private reader(topic: AnyTopicName): avsc.Type {
    const type = this.readers.get(topic);
    if (!type) throw schemaInvalid(topic, '(topic)', 'not in the topic catalog');
    return type;
  }

  async encode<T extends AnyTopicName>(topic: T, value: ValueOf<T>): Promise<Buffer> {
    const type = this.reader(topic);
    const id = this.ids.get(topic)!;
    const record = toRecord(topic, value);
    const bad = invalidPaths(type, record);
    if (bad.length > 0) throw schemaInvalid(topic, bad.join(', '), 'does not match the schema');
    return this.registry.encode(id, record);
  }

  async decode<T extends AnyTopicName>(topic: T, buffer: Buffer | null): Promise<ValueOf<T>> {
    const reader = this.reader(topic);
    if (buffer === null) throw schemaInvalid(topic, '(value)', 'message has no value');
    if (buffer.length < 5) throw schemaInvalid(topic, '(wire header)', `only ${buffer.length} bytes`);
    if (buffer[0] !== 0) throw schemaInvalid(topic, '(wire header)', `magic byte ${buffer[0]}, expected 0`);
    const id = buffer.readInt32BE(1);
    const writer = await this.writer(topic, id);
    const resolver = this.resolver(topic, id, reader, writer);
    const payload = buffer.subarray(5);
    let record: AvroRecord;
    try {
      record = (resolver ? reader.fromBuffer(payload, resolver) : reader.fromBuffer(payload)) as AvroRecord;
    } catch (err) {
      const field = locateFault(writer, payload);
      throw schemaInvalid(topic, field, `cannot be decoded with schema id ${id}: ${errorMessage(err)}`, err);
    }
    const bad = invalidPaths(reader, record);
    if (bad.length > 0) throw schemaInvalid(topic, bad.join(', '), `invalid value under schema id ${id}`);
    return fromRecord(topic, record);
  }

  private writer(topic: AnyTopicName, id: number): Promise<avsc.Type> {
    let pending = this.writers.get(id);
    if (!pending) {
      pending = this.registry.getSchema(id).then(
        (schema) => schema as unknown as avsc.Type,
        (err: unknown) => {
          this.writers.delete(id);
          if ((err as { status?: number }).status === 404) {
            throw schemaInvalid(topic, '(schema id)', `schema id ${id} is unknown to the registry`, err);
          }
          // The registry being down is worth retrying, unlike a bad message.
          throw new AppError('INTERNAL', `schema registry lookup of id ${id} failed: ${errorMessage(err)}`, {
            cause: err,
            retryable: true,
          });
        },
      );
      this.writers.set(id, pending);
    }
    return pending;
  }

  private resolver(
    topic: AnyTopicName,
    id: number,
    reader: avsc.Type,
    writer: avsc.Type,
  ): avsc.Resolver | null {
    const key = `${topic}#${id}`;
    if (this.resolvers.has(key)) return this.resolvers.get(key)!;
    let resolver: avsc.Resolver | null = null;
    if (id !== this.ids.get(topic)) {
      try {
        resolver = reader.createResolver(writer);
      } catch (err) {
        throw schemaInvalid(
          topic,
          '(schema id)',
          `schema id ${id} cannot be read as ${topic}: ${errorMessage(err)}`,
        );
      }
    }
    this.resolvers.set(key, resolver);
    return resolver;
  }
}

/** Paths (`amount`, `details`) of the record that do not match the type. */
function invalidPaths(type: avsc.Type, record: unknown): string[] {
  const paths: string[] = [];
  type.isValid(record, { errorHook: (path: string[]) => paths.push(path.join('.') || '(value)') });
  return paths;
}

/**
 * The first top-level field of a record payload that cannot be read: decodes field after field with
 * the writer schema, so a corrupted message names where it breaks.
 */
function locateFault(writer: avsc.Type, payload: Buffer): string {
  const fields = (writer as unknown as { fields?: { name: string; type: avsc.Type }[] }).fields;
  if (!fields) return '(value)';
  let pos = 0;
  for (const field of fields) {
    try {
      const { value, offset } = field.type.decode(payload, pos);
      if (offset < 0) return `${field.name} (truncated)`;
      if (!field.type.isValid(value)) return field.name;
      pos = offset;
    } catch {
      return field.name;
    }
  }
  return pos === payload.length ? '(value)' : '(trailing bytes)';
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** A registry that refused the credentials or a certificate not trusted: one line naming the variable. */
function registryRefusal(err: unknown): string | null {
  const status = (err as { status?: number } | null)?.status;
  if (status === 401 || status === 403) {
    return `SCHEMA_REGISTRY_USERNAME/SCHEMA_REGISTRY_PASSWORD: the schema registry refused the credentials (HTTP ${status})`;
  }
  let cause: unknown = err;
  for (let depth = 0; cause && depth < 4; depth++) {
    const code = (cause as { code?: unknown }).code;
    if (typeof code === 'string' && /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|UNABLE_TO_GET_ISSUER/.test(code)) {
      return `SCHEMA_REGISTRY_CA_FILE: the certificate of the schema registry is not trusted (${code})`;
    }
    cause = (cause as { cause?: unknown }).cause;
  }
  const text = errorMessage(err);
  const m =
    /(SELF_SIGNED_CERT_IN_CHAIN|DEPTH_ZERO_SELF_SIGNED_CERT|UNABLE_TO_VERIFY_LEAF_SIGNATURE|self[- ]signed certificate[^,)]*|unable to verify the first certificate)/i.exec(
      text,
    );
  return m
    ? `SCHEMA_REGISTRY_CA_FILE: the certificate of the schema registry is not trusted (${m[1]})`
    : null;
}

function isUnreachable(err: unknown): boolean {
  const status = (err as { status?: number } | null)?.status;
  return status === undefined || status >= 500;
}
