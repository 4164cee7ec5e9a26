/**
 * The in-code shapes of the topic values that are not already domain types (`Observation` and `Intent`
 * live in `src/domain/observation.ts`). Amounts are bigint minor units and times are `Date` here; the
 * Avro records (`schemas/*.avsc`) carry decimal strings and epoch milliseconds, and `records.ts`
 * converts between the two.
 */
import { SEVERITIES, type Severity } from '../domain/exception-rules.ts';
import type { ImportKind } from '../domain/imports.ts';
import type { Minor } from '../domain/money.ts';
import type { EntityKind } from '../domain/statuses.ts';

export const AUTHENTICITY_RESULTS = ['verified', 'failed', 'unchecked'] as const;
export type Authenticity = (typeof AUTHENTICITY_RESULTS)[number];

/**
 * A webhook as received (`provider.notification.received.v1`). It never carries the signature, the
 * cashout `control` value or any credential: only a hash of the raw body and its non-secret fields.
 */
export interface NotificationReceived {
  /** Unique id given at receipt (a UUID). */
  notificationId: string;
  kind: EntityKind;
  account: string;
  /** The provider id the notification names: deposit_id, cashout_id or refund_id, as text. */
  entityId: string;
  /** external_id of a cashout notification, when present. */
  externalId: string | null;
  /** The notification's own date (the cashout `date` field), when it has one. */
  notificationDate: Date | null;
  receivedAt: Date;
  /** Lower-case hex SHA-256 of the raw body. */
  bodySha256: string;
  sourceIp: string | null;
  /** Outcome of the signature or control check, never the value checked. */
  authenticity: Authenticity;
  /** Non-secret body fields (bank_reference_id, comments, status_reason ...). */
  fields: Record<string, string>;
}

/** Alerts use the exception severities of the ledger rules (one scale everywhere). */
export const ALERT_SEVERITIES = SEVERITIES;
export type AlertSeverity = Severity;

/** An alert raised by the reconciler or a job (`recon.alert.raised.v1`). */
export interface AlertRaised {
  alertId: string;
  /** Exception or alert type, e.g. LATE_REJECTION. */
  type: string;
  severity: AlertSeverity;
  account: string;
  entityKind: EntityKind | null;
  entityId: string | null;
  amount: Minor | null;
  currency: string | null;
  message: string;
  raisedAt: Date;
  details: Record<string, unknown>;
}

/** A message a consumer gave up on, as published to `<topic>.dlq` (same key as the original). */
export interface DlqEnvelope {
  originalTopic: string;
  partition: number;
  /** Kafka offset as decimal text (int64). */
  offset: string;
  key: string | null;
  /** The original value bytes, verbatim (so a corrupted message is kept as it was); see `valueTruncated`. */
  value: Buffer | null;
  reason: string;
  /** AppError code, e.g. SCHEMA_INVALID. */
  errorCode: string;
  failedAt: Date;
  attempts: number;
  consumerGroup: string | null;
  /** Size of the original value in bytes (null in envelopes written before the field existed). */
  valueSize: number | null;
  /** SHA-256 of the original value, hex. */
  valueSha256: string | null;
  /** The original exceeded `DLQ_VALUE_LIMIT` and `value` holds only its start. */
  valueTruncated: boolean;
}

/**
 * A batch of the lines one import brought for the first time (`imports.*.v1`): up to 1,000 lines of
 * one kind, each with its identity and its fields. Amounts and rates stay decimal text as imported
 * (major units, exact), dates `YYYY-MM-DD`.
 */
export interface ImportedLines<L> {
  importId: string;
  kind: ImportKind;
  /** This batch's number within the import, from 1. */
  batch: number;
  importedAt: Date;
  lines: L[];
}

export interface ImportedBankLine {
  identity: string;
  contentHash: string;
  bankAccount: string;
  currency: string;
  reference: string | null;
  bookingDate: string;
  valueDate: string | null;
  /** Signed: a credit positive, a debit negative. */
  amount: string;
  reversal: boolean;
  endToEndIds: string[];
  counterparty: string | null;
  description: string | null;
  transactions: Record<string, unknown>[];
}

export interface ImportedProviderTransaction {
  identity: string;
  contentHash: string;
  transactionId: string;
  type: string;
  status: string;
  externalId: string | null;
  invoiceId: string | null;
  currency: string;
  gross: string;
  fee: string;
  net: string;
  createdAt: Date;
  updatedAt: Date | null;
  settlementId: string | null;
}

export interface ImportedProviderSettlement {
  identity: string;
  contentHash: string;
  settlementId: string;
  account: string | null;
  periodStart: Date | null;
  periodEnd: Date | null;
  currency: string;
  gross: string;
  fees: string;
  settlementCurrency: string;
  rate: string;
  net: string;
  valueDate: string;
  bankReference: string | null;
  /** The provider's balance at the cut-off (decimal text), when the report gives one. */
  balanceAtCutoff: string | null;
}
