/**
 * The in-code shapes of the topic values that are not already domain types (`Observation` and `Intent`
 * live in `src/domain/observation.ts`). Amounts are bigint minor units and times are `Date` here; the
 * Avro records (`schemas/*.avsc`) carry decimal strings and epoch milliseconds, and `records.ts`
 * converts between the two.
 */
import { SEVERITIES, type Severity } from '../domain/exception-rules.ts';
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
