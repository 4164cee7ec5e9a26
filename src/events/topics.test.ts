import { describe, expect, it } from 'vitest';
import {
  sampleAlert,
  sampleIntent,
  sampleNotification,
  sampleObservation,
} from '../../test/events/fixtures.ts';
import {
  backoffMs,
  dlqTopicOf,
  IMPORT_BATCH_LINES,
  IMPORT_TOPICS,
  isDlqTopicName,
  isTopicName,
  TOPIC_NAMES,
  TOPICS,
  valueSubject,
} from './topics.ts';

describe('topic catalog', () => {
  it('declares the topics with a schema, partitions and a retry policy', () => {
    expect(TOPIC_NAMES).toEqual([
      'provider.notification.received.v1',
      'provider.status.observed.v1',
      'merchant.intent.recorded.v1',
      'recon.alert.raised.v1',
      'imports.bank-lines.v1',
      'imports.provider-transactions.v1',
      'imports.provider-settlements.v1',
    ]);
    for (const name of TOPIC_NAMES) {
      const spec = TOPICS[name];
      expect(spec.name).toBe(name);
      expect(spec.schemaFile).toBe(`${name}.avsc`);
      expect(spec.partitions).toBeGreaterThan(0);
      expect(spec.retry.attempts).toBeGreaterThan(0);
    }
  });

  it('keys every value by entity and account', () => {
    expect(TOPICS['provider.status.observed.v1'].key(sampleObservation())).toBe('deposit:main:3000000001');
    expect(TOPICS['provider.notification.received.v1'].key(sampleNotification())).toBe('cashout:main:777');
    expect(TOPICS['merchant.intent.recorded.v1'].key(sampleIntent())).toBe('cashout:main:777');
    expect(
      TOPICS['merchant.intent.recorded.v1'].key(
        sampleIntent({ operation: 'card_deposit', entityId: null, externalRef: 'INV-9' }),
      ),
    ).toBe('deposit:main:ref:INV-9');
    expect(TOPICS['recon.alert.raised.v1'].key(sampleAlert())).toBe('cashout:main:777');
    expect(TOPICS['recon.alert.raised.v1'].key(sampleAlert({ entityKind: null, entityId: null }))).toBe(
      'alert:main:a-1',
    );
  });

  it('keys a batch of imported lines by kind, import and batch; one topic per import kind', () => {
    const batch = {
      importId: '42',
      kind: 'bank-statement' as const,
      batch: 3,
      importedAt: new Date(),
      lines: [],
    };
    expect(TOPICS['imports.bank-lines.v1'].key(batch)).toBe('bank-statement:42:3');
    expect(Object.values(IMPORT_TOPICS)).toEqual(TOPIC_NAMES.filter((t) => t.startsWith('imports.')));
    expect(IMPORT_BATCH_LINES).toBe(1000);
  });

  it('names DLQ companions and subjects', () => {
    expect(dlqTopicOf('recon.alert.raised.v1')).toBe('recon.alert.raised.v1.dlq');
    expect(isDlqTopicName('recon.alert.raised.v1.dlq')).toBe(true);
    expect(isDlqTopicName('other.dlq')).toBe(false);
    expect(isTopicName('recon.alert.raised.v1')).toBe(true);
    expect(isTopicName('toString')).toBe(false);
    expect(valueSubject('provider.status.observed.v1.dlq')).toBe('provider.status.observed.v1.dlq-value');
  });

  it('backs off exponentially up to the cap', () => {
    const policy = { attempts: 6, initialBackoffMs: 100, maxBackoffMs: 350, factor: 2 };
    expect([2, 3, 4, 5].map((a) => backoffMs(policy, a))).toEqual([100, 200, 350, 350]);
  });
});
