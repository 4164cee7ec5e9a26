/**
 * The month close's document: the figures of one merchant account, currency and month
 * as plain JSON whose amounts are decimal strings (`"-12.50"`), written canonically (object keys sorted,
 * no spaces) so the same figures always give the same text and the same SHA-256. A signed close stores
 * exactly this text and its hash; the page, the API and the workbook read figures back from it.
 */
import { createHash } from 'node:crypto';

/** Month of a close: `YYYY-MM`. */
export const CLOSE_PERIOD_RE = /^\d{4}-(0[1-9]|1[0-2])$/;

export const CLOSE_STATUSES = ['prepared', 'approved'] as const;
export type CloseStatus = (typeof CLOSE_STATUSES)[number];

/** One ledger account's proof line: opening + movements - closing must be 0. */
export interface CloseAccountLine {
  book: string;
  account: string;
  opening: string;
  movements: string;
  closing: string;
  proof: string;
}

/** Postings booked in the period on one account, per entity kind, effect and direction. */
export interface CloseMovementLine {
  book: string;
  account: string;
  entityKind: string;
  effect: string;
  /** 1: applications; -1: reversals. */
  direction: number;
  amount: string;
  entries: number;
}

/** A cashout or refund holding money in `reserved` at the cut-off. */
export interface CloseInFlightLine {
  kind: string;
  entityId: string;
  externalRef: string | null;
  /** When its reservation was booked (ISO instant). */
  reservedAt: string;
  amount: string;
}

/** An exception open at the cut-off. */
export interface CloseExceptionLine {
  id: string;
  type: string;
  severity: string;
  entityKind: string;
  entityId: string;
  firstSeenAt: string;
  /** The entity's amount in the close's currency; null when unknown. */
  amount: string | null;
}

/** A journal entry booked in one period whose effect date falls in another (earlier) one. */
export interface CloseAdjustmentLine {
  entry: string;
  entityKind: string;
  entityId: string;
  effect: string;
  direction: number;
  book: string;
  /** ISO instants. */
  effectiveAt: string;
  bookedAt: string;
  /** The months (`YYYY-MM`, the close's time zone and cut-off) of the effect date and of the booking. */
  effectPeriod: string;
  bookedPeriod: string;
  /** Net movement of the entry on the live `available` account (or the book's first account). */
  available: string;
  postings: { account: string; amount: string }[];
}

/** Everything a close signs. Version 1. */
export interface CloseDocument {
  v: 1;
  merchantAccount: string;
  currency: string;
  period: string;
  timeZone: string;
  /** The period's instants (ISO), [start, end): the cut-off is `end`. */
  start: string;
  end: string;
  accounts: CloseAccountLine[];
  movements: CloseMovementLine[];
  /** Sum of the accounts' proofs as magnitudes (so two errors cannot cancel); must be 0. */
  proof: string;
  inFlight: CloseInFlightLine[];
  inFlightTotal: string;
  /** The live `reserved` balance at the cut-off (what `inFlightTotal` must equal). */
  reservedAtEnd: string;
  exceptions: CloseExceptionLine[];
  exceptionsTotal: string;
  /** Entries booked in this period whose effect date lies in an earlier period. */
  earlierPeriodAdjustments: CloseAdjustmentLine[];
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value).sort()) {
      const v = (value as Record<string, unknown>)[key];
      if (v !== undefined) out[key] = sortKeys(v);
    }
    return out;
  }
  if (typeof value === 'number' && !Number.isSafeInteger(value)) {
    // Only counts are numbers; an amount is always a decimal string.
    throw new Error(`close documents hold integers only, got ${value}`);
  }
  return value;
}

/** Canonical JSON: keys sorted at every level, no whitespace; undefined members dropped. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

/** Lower-case hex SHA-256 of the UTF-8 text (what PostgreSQL's CHECK computes too). */
export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** The month after `YYYY-MM`. */
export function nextPeriod(period: string): string {
  const [y, m] = period.split('-').map(Number) as [number, number];
  return m === 12 ? `${y + 1}-01` : `${y}-${String(m + 1).padStart(2, '0')}`;
}

/** The month before `YYYY-MM`. */
export function previousPeriod(period: string): string {
  const [y, m] = period.split('-').map(Number) as [number, number];
  return m === 1 ? `${y - 1}-12` : `${y}-${String(m - 1).padStart(2, '0')}`;
}
