/**
 * An entity's history and booked entries as the ledger's reads return them: JSON built by the server,
 * read with the native parser, amounts as decimal text made bigint minor units here (never JavaScript
 * numbers).
 */
import { sql } from 'kysely';
import type { AppliedEntry, Book, Effect, HistoryItem } from '../../domain/effects.ts';
import { LEDGER_NUMERIC, type Minor, parseMinor, parseMinorOrNull } from '../../domain/money.ts';
import type { HistorySource } from '../../domain/observation.ts';
import { keyOf } from './keys.ts';

/** A stored amount (non-negative, at most 18 integer digits). */
export const amountOf = (v: string): Minor => parseMinor(v);

/** Numeric text of the ledger (signed; sums may exceed 18 integer digits) or null. */
const ledgerMinor = (v: string | null): Minor | null => parseMinorOrNull(v, LEDGER_NUMERIC);

/**
 * Per entity, its history as a JSON array of arrays (one per observation, in `decodeHistory`'s column
 * order) and its booked entries likewise (`decodeApplied`). The server builds the JSON and the client
 * reads it with the native parser: a batch costs one `JSON.parse` per entity instead of per-column
 * conversions of thousands of rows. Timestamps travel as epoch milliseconds, amounts as decimal text.
 * Both are correlated subqueries on `r` (the refs source): one index probe per entity.
 */
export const HISTORY_JSON = sql`(
  SELECT coalesce(json_agg(json_build_array(h.event_id, h.to_status,
    floor(extract(epoch FROM h.observed_at) * 1000)::bigint, h.source, h.external_ref, h.currency, h.amount::text,
    h.fee_currency, h.fee_amount::text, h.fee_on_payer, h.test, h.crypto, h.status_reason, h.payer_verification,
    h.rejection_code, h.rejection_reason, h.parent_deposit_id)), '[]'::json)
  FROM status_history h WHERE ${keyOf('h')})`;

export const APPLIED_JSON = sql`(
  SELECT coalesce(json_agg(json_build_array(j.effect, j.direction, j.seq, j.book, j.currency, j.amount::text,
    j.fee_currency, j.fee_amount::text)), '[]'::json)
  FROM journal_entries j WHERE ${keyOf('j')})`;

export type Json = string | number | boolean | null;

export function decodeHistory(rows: readonly Json[][]): HistoryItem[] {
  return rows.map((h) => ({
    eventId: h[0] as string,
    status: h[1] as string | null,
    observedAt: new Date(h[2] as number),
    source: h[3] as HistorySource,
    externalRef: h[4] as string | null,
    currency: h[5] as string | null,
    amount: ledgerMinor(h[6] as string | null),
    feeCurrency: h[7] as string | null,
    feeAmount: ledgerMinor(h[8] as string | null),
    feeOnPayer: h[9] as boolean | null,
    test: h[10] as boolean,
    crypto: h[11] as boolean,
    statusReason: h[12] as string | null,
    payerVerification: h[13] as string | null,
    rejectionCode: h[14] as string | null,
    rejectionReason: h[15] as string | null,
    parentDepositId: h[16] as string | null,
  }));
}

export function decodeApplied(rows: readonly Json[][]): AppliedEntry[] {
  return rows.map((e) => ({
    effect: e[0] as Effect,
    direction: e[1] === -1 ? -1 : 1,
    seq: e[2] as number,
    book: e[3] as Book,
    currency: e[4] as string,
    amount: amountOf(e[5] as string),
    feeCurrency: e[6] as string | null,
    feeAmount: e[7] === null ? null : amountOf(e[7] as string),
  }));
}
