/**
 * Conversion between the in-code values (bigint minor units, `Date`, objects) and the Avro records of
 * `schemas/*.avsc` (decimal strings such as `"123.45"`, epoch milliseconds for `timestamp-millis`,
 * JSON text for `details`, `request` and `response`). The logical type is declared in the schemas for
 * other readers; payrecon converts the milliseconds itself so no avsc logical-type hook is needed.
 * Any value that cannot be converted raises `AppError('SCHEMA_INVALID')` naming the topic and field.
 */
import { AppError } from '../domain/errors.ts';
import { IMPORT_KINDS, type ImportKind } from '../domain/imports.ts';
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
  type ImportedBankLine,
  type ImportedLines,
  type ImportedProviderSettlement,
  type ImportedProviderTransaction,
  type NotificationReceived,
} from './payloads.ts';
import { type AnyTopicName, IMPORT_TOPICS, isDlqTopicName, type ValueOf } from './topics.ts';

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
    case 'imports.bank-lines.v1':
      return importedToRecord(c, value as ImportedLines<ImportedBankLine>, bankLineToRecord);
    case 'imports.provider-transactions.v1':
      return importedToRecord(c, value as ImportedLines<ImportedProviderTransaction>, transactionToRecord);
    case 'imports.provider-settlements.v1':
      return importedToRecord(c, value as ImportedLines<ImportedProviderSettlement>, settlementToRecord);
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
    case 'imports.bank-lines.v1':
      return importedFromRecord(c, record, bankLineFromRecord) as ValueOf<T>;
    case 'imports.provider-transactions.v1':
      return importedFromRecord(c, record, transactionFromRecord) as ValueOf<T>;
    case 'imports.provider-settlements.v1':
      return importedFromRecord(c, record, settlementFromRecord) as ValueOf<T>;
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

// ---- imported lines (`imports.*.v1`): amounts stay exact decimal text, checked, never a number

const DECIMAL = /^-?\d{1,30}(\.\d{1,18})?$/;
const DATE = /^\d{4}-\d{2}-\d{2}$/;

function decimalIn(c: Converter, field: string, v: unknown): string {
  if (typeof v !== 'string' || !DECIMAL.test(v)) {
    throw schemaInvalid(c.topic, field, `not a decimal string: ${JSON.stringify(v)}`);
  }
  return v;
}

function dateIn(c: Converter, field: string, v: unknown): string {
  if (typeof v !== 'string' || !DATE.test(v) || Number.isNaN(Date.parse(`${v}T00:00:00Z`))) {
    throw schemaInvalid(c.topic, field, `not a date YYYY-MM-DD: ${JSON.stringify(v)}`);
  }
  return v;
}

function nonEmpty(c: Converter, field: string, v: unknown): string {
  if (typeof v !== 'string' || v.length === 0) throw schemaInvalid(c.topic, field, 'must be non-empty text');
  return v;
}

function importedToRecord<L>(
  c: Converter,
  v: ImportedLines<L>,
  line: (c: Converter, l: L) => AvroRecord,
): AvroRecord {
  return {
    import_id: v.importId,
    kind: v.kind,
    batch: v.batch,
    imported_at: c.timeOut('imported_at', v.importedAt),
    lines: v.lines.map((l) => line(c, l)),
  };
}

function importedFromRecord<L>(
  c: Converter,
  r: AvroRecord,
  line: (c: Converter, r: AvroRecord, at: string) => L,
): ImportedLines<L> {
  const kind = str(r.kind);
  if (!(IMPORT_KINDS as readonly string[]).includes(kind)) {
    throw schemaInvalid(c.topic, 'kind', `unknown import kind ${JSON.stringify(kind)}`);
  }
  if (IMPORT_TOPICS[kind as ImportKind] !== c.topic) {
    throw schemaInvalid(c.topic, 'kind', `${kind} lines do not belong on this topic`);
  }
  const batch = r.batch as number;
  if (!(batch >= 1)) throw schemaInvalid(c.topic, 'batch', `batch ${batch} is not 1 or more`);
  const lines = r.lines as AvroRecord[];
  return {
    importId: nonEmpty(c, 'import_id', r.import_id),
    kind: kind as ImportKind,
    batch,
    importedAt: c.timeIn('imported_at', r.imported_at),
    lines: lines.map((l, i) => line(c, l, `lines[${i}]`)),
  };
}

function bankLineToRecord(_c: Converter, l: ImportedBankLine): AvroRecord {
  return {
    identity: l.identity,
    content_hash: l.contentHash,
    bank_account: l.bankAccount,
    currency: l.currency,
    reference: l.reference,
    booking_date: l.bookingDate,
    value_date: l.valueDate,
    amount: l.amount,
    reversal: l.reversal,
    end_to_end_ids: [...l.endToEndIds],
    counterparty: l.counterparty,
    description: l.description,
    transactions: JSON.stringify(l.transactions),
  };
}

function bankLineFromRecord(c: Converter, r: AvroRecord, at: string): ImportedBankLine {
  let transactions: unknown;
  try {
    transactions = JSON.parse(str(r.transactions));
  } catch (err) {
    throw schemaInvalid(c.topic, `${at}.transactions`, 'not valid JSON', err);
  }
  if (!Array.isArray(transactions))
    throw schemaInvalid(c.topic, `${at}.transactions`, 'must be a JSON array');
  const valueDate = optStr(r.value_date);
  return {
    identity: nonEmpty(c, `${at}.identity`, r.identity),
    contentHash: str(r.content_hash),
    bankAccount: nonEmpty(c, `${at}.bank_account`, r.bank_account),
    currency: nonEmpty(c, `${at}.currency`, r.currency),
    reference: optStr(r.reference),
    bookingDate: dateIn(c, `${at}.booking_date`, r.booking_date),
    valueDate: valueDate === null ? null : dateIn(c, `${at}.value_date`, valueDate),
    amount: decimalIn(c, `${at}.amount`, r.amount),
    reversal: r.reversal as boolean,
    endToEndIds: [...(r.end_to_end_ids as string[])],
    counterparty: optStr(r.counterparty),
    description: optStr(r.description),
    transactions: transactions as Record<string, unknown>[],
  };
}

function transactionToRecord(c: Converter, l: ImportedProviderTransaction): AvroRecord {
  return {
    identity: l.identity,
    content_hash: l.contentHash,
    transaction_id: l.transactionId,
    type: l.type,
    status: l.status,
    external_id: l.externalId,
    invoice_id: l.invoiceId,
    currency: l.currency,
    gross: l.gross,
    fee: l.fee,
    net: l.net,
    created_at: c.timeOut('created_at', l.createdAt),
    updated_at: c.timeOut('updated_at', l.updatedAt),
    settlement_id: l.settlementId,
  };
}

function transactionFromRecord(c: Converter, r: AvroRecord, at: string): ImportedProviderTransaction {
  return {
    identity: nonEmpty(c, `${at}.identity`, r.identity),
    contentHash: str(r.content_hash),
    transactionId: nonEmpty(c, `${at}.transaction_id`, r.transaction_id),
    type: str(r.type),
    status: str(r.status),
    externalId: optStr(r.external_id),
    invoiceId: optStr(r.invoice_id),
    currency: nonEmpty(c, `${at}.currency`, r.currency),
    gross: decimalIn(c, `${at}.gross`, r.gross),
    fee: decimalIn(c, `${at}.fee`, r.fee),
    net: decimalIn(c, `${at}.net`, r.net),
    createdAt: c.timeIn(`${at}.created_at`, r.created_at),
    updatedAt: c.optionalTimeIn(`${at}.updated_at`, r.updated_at),
    settlementId: optStr(r.settlement_id),
  };
}

function settlementToRecord(c: Converter, l: ImportedProviderSettlement): AvroRecord {
  return {
    identity: l.identity,
    content_hash: l.contentHash,
    settlement_id: l.settlementId,
    account: l.account,
    period_start: c.timeOut('period_start', l.periodStart),
    period_end: c.timeOut('period_end', l.periodEnd),
    currency: l.currency,
    gross: l.gross,
    fees: l.fees,
    settlement_currency: l.settlementCurrency,
    rate: l.rate,
    net: l.net,
    value_date: l.valueDate,
    bank_reference: l.bankReference,
    balance_at_cutoff: l.balanceAtCutoff,
  };
}

function settlementFromRecord(c: Converter, r: AvroRecord, at: string): ImportedProviderSettlement {
  return {
    identity: nonEmpty(c, `${at}.identity`, r.identity),
    contentHash: str(r.content_hash),
    settlementId: nonEmpty(c, `${at}.settlement_id`, r.settlement_id),
    account: optStr(r.account),
    periodStart: c.optionalTimeIn(`${at}.period_start`, r.period_start),
    periodEnd: c.optionalTimeIn(`${at}.period_end`, r.period_end),
    currency: nonEmpty(c, `${at}.currency`, r.currency),
    gross: decimalIn(c, `${at}.gross`, r.gross),
    fees: decimalIn(c, `${at}.fees`, r.fees),
    settlementCurrency: nonEmpty(c, `${at}.settlement_currency`, r.settlement_currency),
    rate: decimalIn(c, `${at}.rate`, r.rate),
    net: decimalIn(c, `${at}.net`, r.net),
    valueDate: dateIn(c, `${at}.value_date`, r.value_date),
    bankReference: optStr(r.bank_reference),
    balanceAtCutoff:
      r.balance_at_cutoff === null || r.balance_at_cutoff === undefined
        ? null
        : decimalIn(c, `${at}.balance_at_cutoff`, r.balance_at_cutoff),
  };
}
