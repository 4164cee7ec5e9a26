/**
 * The topic catalog: every topic payrecon publishes, declared once with its key, its Avro schema file
 * (`schemas/`), its partition count and the retry policy its consumers follow. Each topic has a
 * `<topic>.dlq` companion with the same partition count, carrying `DlqEnvelope` values.
 *
 * Keys: every topic is keyed by entity and account, `<kind>:<account>:<entity id>` (for example
 * `deposit:main:3000000001`), so all events of one entity land on one partition and stay in order.
 * The account is part of the key because provider ids are only unique within one provider account.
 * An intent whose creation gave no provider id yet is keyed by its merchant reference
 * (`deposit:main:ref:INV-42`); an alert about no entity by its own id (`alert:main:<alert id>`).
 * Imported lines are no entity's events: a batch is keyed `<import kind>:<import id>:<batch>`
 * (`bank-statement:42:1`), which spreads a large import over the partitions (matching does not depend
 * on the lines' order).
 */

import type { ImportKind } from '../domain/imports.ts';
import type { Intent, Observation } from '../domain/observation.ts';
import { intentKind } from '../domain/observation.ts';
import type { EntityKind } from '../domain/statuses.ts';
import type {
  AlertRaised,
  DlqEnvelope,
  ImportedBankLine,
  ImportedLines,
  ImportedProviderSettlement,
  ImportedProviderTransaction,
  NotificationReceived,
} from './payloads.ts';

/** How a consumer retries a batch whose handler failed with a retryable error. */
export interface RetryPolicy {
  /** Total tries of a batch, the first included. */
  attempts: number;
  /** Wait before the second try; doubles (times `factor`) on each further try. */
  initialBackoffMs: number;
  maxBackoffMs: number;
  factor: number;
}

export interface TopicSpec<T> {
  name: string;
  /** File name under `schemas/`. */
  schemaFile: string;
  partitions: number;
  retry: RetryPolicy;
  /** The partition key of a value. */
  key(value: T): string;
  description: string;
}

/** The value type of each topic. */
export interface TopicValues {
  'provider.notification.received.v1': NotificationReceived;
  'provider.status.observed.v1': Observation;
  'merchant.intent.recorded.v1': Intent;
  'recon.alert.raised.v1': AlertRaised;
  'imports.bank-lines.v1': ImportedLines<ImportedBankLine>;
  'imports.provider-transactions.v1': ImportedLines<ImportedProviderTransaction>;
  'imports.provider-settlements.v1': ImportedLines<ImportedProviderSettlement>;
}

export type TopicName = keyof TopicValues;

/** Each topic by its role: the names the publishing and consuming code uses (never redeclared there). */
export const NOTIFICATION_TOPIC = 'provider.notification.received.v1' satisfies TopicName;
export const OBSERVATION_TOPIC = 'provider.status.observed.v1' satisfies TopicName;
export const INTENT_TOPIC = 'merchant.intent.recorded.v1' satisfies TopicName;
export const ALERT_TOPIC = 'recon.alert.raised.v1' satisfies TopicName;
/** The topic of each import kind's new lines. */
export const IMPORT_TOPICS = {
  'bank-statement': 'imports.bank-lines.v1',
  'provider-transactions': 'imports.provider-transactions.v1',
  'provider-settlements': 'imports.provider-settlements.v1',
} as const satisfies Record<ImportKind, TopicName>;
export type ImportTopicName = (typeof IMPORT_TOPICS)[ImportKind];
export const IMPORT_TOPIC_NAMES: readonly ImportTopicName[] = Object.values(IMPORT_TOPICS);
/** Lines per message of an import topic. */
export const IMPORT_BATCH_LINES = 1000;
export type DlqTopicName = `${TopicName}.dlq`;
export type AnyTopicName = TopicName | DlqTopicName;
/** The value type of a topic or of a DLQ companion. */
export type ValueOf<T extends AnyTopicName> = T extends TopicName ? TopicValues[T] : DlqEnvelope;

export const DLQ_SCHEMA_FILE = 'dlq-envelope.v1.avsc';

const DEFAULT_RETRY: RetryPolicy = { attempts: 5, initialBackoffMs: 200, maxBackoffMs: 10_000, factor: 2 };

/** `<import kind>:<import id>:<batch>`: the key of a batch of imported lines. */
export function importTopicKey(v: ImportedLines<unknown>): string {
  return `${v.kind}:${v.importId}:${v.batch}`;
}

/** `<kind>:<account>:<id>`: the key of every entity event. */
export function entityTopicKey(kind: EntityKind, account: string, entityId: string): string {
  return `${kind}:${account}:${entityId}`;
}

export const TOPICS: { readonly [N in TopicName]: TopicSpec<TopicValues[N]> } = {
  'provider.notification.received.v1': {
    name: 'provider.notification.received.v1',
    schemaFile: 'provider.notification.received.v1.avsc',
    partitions: 3,
    retry: DEFAULT_RETRY,
    key: (v) => entityTopicKey(v.kind, v.account, v.entityId),
    description: 'Webhooks as received; the status fetcher turns each into a status call.',
  },
  'provider.status.observed.v1': {
    name: 'provider.status.observed.v1',
    schemaFile: 'provider.status.observed.v1.avsc',
    partitions: 6,
    retry: DEFAULT_RETRY,
    key: (v) => entityTopicKey(v.kind, v.account, v.entityId),
    description: 'Readings of entity state at the provider; the reconciler applies them to the ledger.',
  },
  'merchant.intent.recorded.v1': {
    name: 'merchant.intent.recorded.v1',
    schemaFile: 'merchant.intent.recorded.v1.avsc',
    partitions: 3,
    retry: DEFAULT_RETRY,
    key: (v) =>
      v.entityId === null
        ? `${intentKind(v.operation)}:${v.account}:ref:${v.externalRef}`
        : entityTopicKey(intentKind(v.operation), v.account, v.entityId),
    description: "The merchant's own creation records; the reconciler matches them to observations.",
  },
  'recon.alert.raised.v1': {
    name: 'recon.alert.raised.v1',
    schemaFile: 'recon.alert.raised.v1.avsc',
    partitions: 3,
    // Alert delivery goes to an outside webhook: retry longer before giving up.
    retry: { attempts: 8, initialBackoffMs: 500, maxBackoffMs: 30_000, factor: 2 },
    key: (v) =>
      v.entityKind !== null && v.entityId !== null
        ? entityTopicKey(v.entityKind, v.account, v.entityId)
        : `alert:${v.account}:${v.alertId}`,
    description: 'Alerts from the reconciler and jobs; the alert dispatcher delivers them.',
  },
  'imports.bank-lines.v1': {
    name: 'imports.bank-lines.v1',
    schemaFile: 'imports.bank-lines.v1.avsc',
    partitions: 3,
    retry: DEFAULT_RETRY,
    key: importTopicKey,
    description: 'Bank statement lines an import brought first; the match consumer matches them.',
  },
  'imports.provider-transactions.v1': {
    name: 'imports.provider-transactions.v1',
    schemaFile: 'imports.provider-transactions.v1.avsc',
    partitions: 3,
    retry: DEFAULT_RETRY,
    key: importTopicKey,
    description:
      'Provider transactions report rows an import brought first; the match consumer matches them.',
  },
  'imports.provider-settlements.v1': {
    name: 'imports.provider-settlements.v1',
    schemaFile: 'imports.provider-settlements.v1.avsc',
    partitions: 3,
    retry: DEFAULT_RETRY,
    key: importTopicKey,
    description: 'Provider settlement report rows an import brought first; the match consumer matches them.',
  },
};

export const TOPIC_NAMES = Object.keys(TOPICS) as TopicName[];

export function dlqTopicOf(topic: TopicName): DlqTopicName {
  return `${topic}.dlq`;
}

export function isTopicName(name: string): name is TopicName {
  return Object.hasOwn(TOPICS, name);
}

export function isDlqTopicName(name: string): name is DlqTopicName {
  return name.endsWith('.dlq') && isTopicName(name.slice(0, -'.dlq'.length));
}

/** The schema registry subject of a topic's values (Confluent's TopicNameStrategy). */
export function valueSubject(topic: AnyTopicName): string {
  return `${topic}-value`;
}

/** Wait before try number `attempt` (2 for the first retry), per the policy. */
export function backoffMs(policy: RetryPolicy, attempt: number): number {
  const exponent = Math.max(0, attempt - 2);
  return Math.min(policy.maxBackoffMs, policy.initialBackoffMs * policy.factor ** exponent);
}
