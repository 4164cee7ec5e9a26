/**
 * Conversion between the in-code values (bigint minor units, `Date`, objects) and the Avro records of
 * `schemas/*.avsc` (decimal strings such as `"123.45"`, epoch milliseconds for `timestamp-millis`,
 * JSON text for `details`, `request` and `response`). The logical type is declared in the schemas for
 * other readers; payrecon converts the milliseconds itself so no avsc logical-type hook is needed.
 * Any value that cannot be converted raises `AppError('SCHEMA_INVALID')` naming the topic and field.
 */
import { AppError } from '../domain/errors.ts';
import { formatAmount, type Minor, parseAmount } from '../domain/money.ts';
import type { Intent, Observation } from '../domain/observation.ts';
import { ENTITY_KINDS, type EntityKind, isStatus } from '../domain/statuses.ts';
import {
  ALERT_SEVERITIES,
  type AlertRaised,
  type AlertSeverity,
  AUTHENTICITY_RESULTS,
  type Authenticity,
  type DlqEnvelope,
  type NotificationReceived,
} from './payloads.ts';
import { type AnyTopicName, isDlqTopicName, type ValueOf } from './topics.ts';

export type AvroRecord = Record<string, unknown>;

export function schemaInvalid(topic: string, field: string, problem: string, cause?: unknown): AppError {
  return new AppError('SCHEMA_INVALID', `${topic}: field ${field}: ${problem}`, {
    cause,
    details: { topic, field },
  });
}

/** Converts a value to the Avro record of its topic. */
export function toRecord<T extends AnyTopicName>(topic: T, value: ValueOf<T>): AvroRecord {
  const c = new Converter(topic);
  if (isDlqTopicName(topic)) return dlqToRecord(c, value as DlqEnvelope);
  switch (topic) {
    case 'provider.status.observed.v1':
      return observationToRecord(c, value as Observation);
    case 'merchant.intent.recorded.v1':
      return intentToRecord(c, value as Intent);
    case 'provider.notification.received.v1':
      return notificationToRecord(c, value as NotificationReceived);
    case 'recon.alert.raised.v1':
      return alertToRecord(c, value as AlertRaised);
  }
  throw schemaInvalid(topic, '(topic)', 'not in the topic catalog');
}

/** Converts a decoded Avro record back to the value of its topic. */
export function fromRecord<T extends AnyTopicName>(topic: T, record: AvroRecord): ValueOf<T> {
  const c = new Converter(topic);
  if (isDlqTopicName(topic)) return dlqFromRecord(c, record) as ValueOf<T>;
  switch (topic) {
    case 'provider.status.observed.v1':
      return observationFromRecord(c, record) as ValueOf<T>;
    case 'merchant.intent.recorded.v1':
      return intentFromRecord(c, record) as ValueOf<T>;
    case 'provider.notification.received.v1':
      return notificationFromRecord(c, record) as ValueOf<T>;
    case 'recon.alert.raised.v1':
      return alertFromRecord(c, record) as ValueOf<T>;
  }
  throw schemaInvalid(topic, '(topic)', 'not in the topic catalog');
}

/** 0001-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z. */
const MIN_TIME_MS = -62_135_596_800_000;
const MAX_TIME_MS = 253_402_300_799_999;

/** Field conversions that name the field in their errors. */
class Converter {
  constructor(readonly topic: string) {}

  amountOut(field: string, value: Minor | null): string | null {
    if (value === null || value === undefined) return null;
    if (typeof value !== 'bigint')
      throw schemaInvalid(this.topic, field, 'amount must be a bigint of minor units');
    return formatAmount(value);
  }

  amountIn(field: string, text: unknown, allowNegative = false): Minor | null {
    if (text === null || text === undefined) return null;
    if (typeof text !== 'string') throw schemaInvalid(this.topic, field, 'amount must be a decimal string');
    try {
      return parseAmount(text, { field, allowNegative });
    } catch (err) {
      throw schemaInvalid(this.topic, field, err instanceof Error ? err.message : String(err), err);
    }
  }

  requiredAmountIn(field: string, text: unknown): Minor {
    const amount = this.amountIn(field, text);
    if (amount === null) throw schemaInvalid(this.topic, field, 'amount is required');
    return amount;
  }

  timeOut(field: string, value: Date): number;
  timeOut(field: string, value: Date | null): number | null;
  timeOut(field: string, value: Date | null): number | null {
    if (value === null || value === undefined) return null;
    const ms = value instanceof Date ? value.getTime() : Number.NaN;
    if (!Number.isFinite(ms)) throw schemaInvalid(this.topic, field, 'must be a valid Date');
    return ms;
  }

  timeIn(field: string, ms: unknown): Date {
    if (typeof ms !== 'number' || !Number.isSafeInteger(ms)) {
      throw schemaInvalid(this.topic, field, 'must be epoch milliseconds');
    }
    // Years 1 to 9999: what an ISO timestamp and PostgreSQL take (a later year is written "+012345-...",
    // which the database refuses with an error naming no field).
    if (ms < MIN_TIME_MS || ms > MAX_TIME_MS) {
      throw schemaInvalid(this.topic, field, `timestamp ${ms} out of range (years 1 to 9999)`);
    }
    return new Date(ms);
  }

  optionalTimeIn(field: string, ms: unknown): Date | null {
    return ms === null || ms === undefined ? null : this.timeIn(field, ms);
  }

  jsonOut(field: string, value: Record<string, unknown> | null): string | null {
    if (value === null || value === undefined) return null;
    try {
      // bigint amounts inside details travel as decimal text of minor units.
      return JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
    } catch (err) {
      throw schemaInvalid(this.topic, field, 'not serialisable as JSON', err);
    }
  }

  jsonIn(field: string, text: unknown): Record<string, unknown> | null {
    if (text === null || text === undefined) return null;
    if (typeof text !== 'string') throw schemaInvalid(this.topic, field, 'must be JSON text');
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (err) {
      throw schemaInvalid(this.topic, field, 'not valid JSON', err);
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw schemaInvalid(this.topic, field, 'must be a JSON object');
    }
    return parsed as Record<string, unknown>;
  }

  requiredJsonIn(field: string, text: unknown): Record<string, unknown> {
    const value = this.jsonIn(field, text);
    if (value === null) throw schemaInvalid(this.topic, field, 'is required');
    return value;
  }
}

const str = (v: unknown) => v as string;
const optStr = (v: unknown) => (v ?? null) as string | null;

function observationToRecord(c: Converter, v: Observation): AvroRecord {
  return {
    event_id: v.eventId,
    kind: v.kind,
    account: v.account,
    entity_id: v.entityId,
    external_ref: v.externalRef,
    status: v.status,
    observed_at: c.timeOut('observed_at', v.observedAt),
    source: v.source,
    currency: v.currency,
    amount: c.amountOut('amount', v.amount),
    fee_amount: c.amountOut('fee_amount', v.feeAmount),
    fee_currency: v.feeCurrency,
    fee_on_payer: v.feeOnPayer,
    test: v.test,
    crypto: v.crypto,
    status_reason: v.statusReason,
    payer_verification: v.payerVerification,
    rejection_code: v.rejectionCode,
    rejection_reason: v.rejectionReason,
    parent_deposit_id: v.parentDepositId,
    details: c.jsonOut('details', v.details) ?? '{}',
    bank_reference: v.bankReference,
  };
}

function observationFromRecord(c: Converter, r: AvroRecord): Observation {
  // Producers take statuses from the contract's status sets, so any other one is a corrupted message.
  const status = optStr(r.status);
  if (status !== null && !isStatus(r.kind as EntityKind, status)) {
    throw schemaInvalid(c.topic, 'status', `unknown ${String(r.kind)} status ${JSON.stringify(status)}`);
  }
  return {
    eventId: str(r.event_id),
    kind: r.kind as EntityKind,
    account: str(r.account),
    entityId: str(r.entity_id),
    externalRef: optStr(r.external_ref),
    status,
    observedAt: c.timeIn('observed_at', r.observed_at),
    source: r.source as Observation['source'],
    currency: optStr(r.currency),
    amount: c.amountIn('amount', r.amount),
    feeAmount: c.amountIn('fee_amount', r.fee_amount),
    feeCurrency: optStr(r.fee_currency),
    feeOnPayer: (r.fee_on_payer ?? null) as boolean | null,
    test: r.test as boolean,
    crypto: r.crypto as boolean,
    statusReason: optStr(r.status_reason),
    payerVerification: optStr(r.payer_verification),
    rejectionCode: optStr(r.rejection_code),
    rejectionReason: optStr(r.rejection_reason),
    parentDepositId: optStr(r.parent_deposit_id),
    // Absent from records written before the field existed (the schema's default is null).
    bankReference: optStr(r.bank_reference),
    details: c.requiredJsonIn('details', r.details),
  };
}

function intentToRecord(c: Converter, v: Intent): AvroRecord {
  const amount = c.amountOut('amount', v.amount);
  if (amount === null) throw schemaInvalid(c.topic, 'amount', 'amount is required');
  return {
    intent_id: v.intentId,
    operation: v.operation,
    account: v.account,
    external_ref: v.externalRef,
    entity_id: v.entityId,
    currency: v.currency,
    amount,
    expected_fee: c.amountOut('expected_fee', v.expectedFee),
    test: v.test,
    crypto: v.crypto,
    fee_on_payer: v.feeOnPayer,
    parent_deposit_id: v.parentDepositId,
    outcome: v.outcome,
    created_at: c.timeOut('created_at', v.createdAt),
    request: c.jsonOut('request', v.request) ?? '{}',
    response: c.jsonOut('response', v.response),
  };
}

function intentFromRecord(c: Converter, r: AvroRecord): Intent {
  return {
    intentId: str(r.intent_id),
    operation: r.operation as Intent['operation'],
    account: str(r.account),
    externalRef: str(r.external_ref),
    entityId: optStr(r.entity_id),
    currency: str(r.currency),
    amount: c.requiredAmountIn('amount', r.amount),
    expectedFee: c.amountIn('expected_fee', r.expected_fee),
    test: r.test as boolean,
    crypto: r.crypto as boolean,
    feeOnPayer: r.fee_on_payer as boolean,
    parentDepositId: optStr(r.parent_deposit_id),
    outcome: r.outcome as Intent['outcome'],
    createdAt: c.timeIn('created_at', r.created_at),
    request: c.requiredJsonIn('request', r.request),
    response: c.jsonIn('response', r.response),
  };
}

function notificationToRecord(c: Converter, v: NotificationReceived): AvroRecord {
  return {
    notification_id: v.notificationId,
    kind: v.kind,
    account: v.account,
    entity_id: v.entityId,
    external_id: v.externalId,
    notification_date: c.timeOut('notification_date', v.notificationDate),
    received_at: c.timeOut('received_at', v.receivedAt),
    body_sha256: v.bodySha256,
    source_ip: v.sourceIp,
    authenticity: v.authenticity,
    fields: { ...v.fields },
  };
}

function notificationFromRecord(c: Converter, r: AvroRecord): NotificationReceived {
  const authenticity = str(r.authenticity);
  if (!(AUTHENTICITY_RESULTS as readonly string[]).includes(authenticity)) {
    throw schemaInvalid(c.topic, 'authenticity', `unknown value ${JSON.stringify(authenticity)}`);
  }
  return {
    notificationId: str(r.notification_id),
    kind: r.kind as EntityKind,
    account: str(r.account),
    entityId: str(r.entity_id),
    externalId: optStr(r.external_id),
    notificationDate: c.optionalTimeIn('notification_date', r.notification_date),
    receivedAt: c.timeIn('received_at', r.received_at),
    bodySha256: str(r.body_sha256),
    sourceIp: optStr(r.source_ip),
    authenticity: authenticity as Authenticity,
    fields: { ...(r.fields as Record<string, string>) },
  };
}

function alertToRecord(c: Converter, v: AlertRaised): AvroRecord {
  return {
    alert_id: v.alertId,
    type: v.type,
    severity: v.severity,
    account: v.account,
    entity_kind: v.entityKind,
    entity_id: v.entityId,
    amount: c.amountOut('amount', v.amount),
    currency: v.currency,
    message: v.message,
    raised_at: c.timeOut('raised_at', v.raisedAt),
    details: c.jsonOut('details', v.details) ?? '{}',
  };
}

function alertFromRecord(c: Converter, r: AvroRecord): AlertRaised {
  const severity = str(r.severity);
  if (!(ALERT_SEVERITIES as readonly string[]).includes(severity)) {
    throw schemaInvalid(c.topic, 'severity', `unknown severity ${JSON.stringify(severity)}`);
  }
  const entityKind = optStr(r.entity_kind);
  if (entityKind !== null && !(ENTITY_KINDS as readonly string[]).includes(entityKind)) {
    throw schemaInvalid(c.topic, 'entity_kind', `unknown entity kind ${JSON.stringify(entityKind)}`);
  }
  return {
    alertId: str(r.alert_id),
    type: str(r.type),
    severity: severity as AlertSeverity,
    account: str(r.account),
    entityKind: entityKind as EntityKind | null,
    entityId: optStr(r.entity_id),
    // Alert amounts may be differences (a shortfall), so a sign is allowed.
    amount: c.amountIn('amount', r.amount, true),
    currency: optStr(r.currency),
    message: str(r.message),
    raisedAt: c.timeIn('raised_at', r.raised_at),
    details: c.requiredJsonIn('details', r.details),
  };
}

function dlqToRecord(c: Converter, v: DlqEnvelope): AvroRecord {
  return {
    original_topic: v.originalTopic,
    partition: v.partition,
    offset: v.offset,
    key: v.key,
    value: v.value,
    reason: v.reason,
    error_code: v.errorCode,
    failed_at: c.timeOut('failed_at', v.failedAt),
    attempts: v.attempts,
    consumer_group: v.consumerGroup,
    value_size: v.valueSize,
    value_sha256: v.valueSha256,
    value_truncated: v.valueTruncated,
  };
}

function dlqFromRecord(c: Converter, r: AvroRecord): DlqEnvelope {
  return {
    originalTopic: str(r.original_topic),
    partition: r.partition as number,
    offset: str(r.offset),
    key: optStr(r.key),
    value: (r.value ?? null) as Buffer | null,
    reason: str(r.reason),
    errorCode: str(r.error_code),
    failedAt: c.timeIn('failed_at', r.failed_at),
    attempts: r.attempts as number,
    consumerGroup: optStr(r.consumer_group),
    valueSize: r.value_size === null || r.value_size === undefined ? null : Number(r.value_size),
    valueSha256: optStr(r.value_sha256),
    valueTruncated: r.value_truncated === true,
  };
}
