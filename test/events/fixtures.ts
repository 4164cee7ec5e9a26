import type { Intent, Observation } from '../../src/domain/observation.ts';
import type { AlertRaised, DlqEnvelope, NotificationReceived } from '../../src/events/payloads.ts';

/** An observation with every optional field filled and an 18-digit amount. */
export function sampleObservation(overrides: Partial<Observation> = {}): Observation {
  return {
    eventId: '6f1c1c8e-1c2b-4d59-9d0e-2f1a3b4c5d6e',
    kind: 'deposit',
    account: 'main',
    entityId: '3000000001',
    externalRef: 'INV-42',
    status: 'COMPLETED',
    observedAt: new Date('2026-11-21T10:15:30.123Z'),
    source: 'webhook',
    currency: 'BRL',
    amount: 123456789012345678_99n,
    feeAmount: 150n,
    feeCurrency: 'BRL',
    feeOnPayer: false,
    test: false,
    crypto: false,
    statusReason: null,
    payerVerification: 'MATCH',
    rejectionCode: null,
    rejectionReason: null,
    parentDepositId: null,
    bankReference: 'E2E-20261121-0001',
    details: { payment_type: 'PIX', nested: { n: 1 } },
    ...overrides,
  };
}

export function sampleIntent(overrides: Partial<Intent> = {}): Intent {
  return {
    intentId: 'intent-1',
    operation: 'cashout',
    account: 'main',
    externalRef: 'ext-42',
    entityId: '777',
    currency: 'BRL',
    amount: 10_000n,
    expectedFee: null,
    test: false,
    crypto: false,
    feeOnPayer: false,
    parentDepositId: null,
    outcome: 'created',
    createdAt: new Date('2026-11-21T09:00:00.000Z'),
    request: { amount: '100.00', country: 'BR' },
    response: { cashout_id: 777 },
    ...overrides,
  };
}

export function sampleNotification(overrides: Partial<NotificationReceived> = {}): NotificationReceived {
  return {
    notificationId: 'n-1',
    kind: 'cashout',
    account: 'main',
    entityId: '777',
    externalId: 'ext-42',
    notificationDate: new Date('2026-11-21T10:00:00.000Z'),
    receivedAt: new Date('2026-11-21T10:00:01.500Z'),
    bodySha256: 'ab'.repeat(32),
    sourceIp: '127.0.0.1',
    authenticity: 'verified',
    fields: { bank_reference_id: 'B-1', status_reason: '' },
    ...overrides,
  };
}

export function sampleAlert(overrides: Partial<AlertRaised> = {}): AlertRaised {
  return {
    alertId: 'a-1',
    type: 'LATE_REJECTION',
    severity: 'critical',
    account: 'main',
    entityKind: 'cashout',
    entityId: '777',
    amount: -2_500n,
    currency: 'BRL',
    message: 'cashout 777 rejected after completion',
    raisedAt: new Date('2026-11-21T11:00:00.000Z'),
    details: { code: 'R1' },
    ...overrides,
  };
}

export function sampleDlq(overrides: Partial<DlqEnvelope> = {}): DlqEnvelope {
  return {
    originalTopic: 'provider.status.observed.v1',
    partition: 2,
    offset: '9007199254740993',
    key: 'deposit:main:1',
    value: Buffer.from([0, 1, 2, 255]),
    reason: 'field amount: bad',
    errorCode: 'SCHEMA_INVALID',
    failedAt: new Date('2026-11-21T11:00:00.000Z'),
    attempts: 1,
    consumerGroup: 'reconciler',
    valueSize: 4,
    valueSha256: '3d1f57c984978ef98a18378c8166c1cb8ede02c03eeb6aee7e2f121dfeee3e56',
    valueTruncated: false,
    ...overrides,
  };
}
