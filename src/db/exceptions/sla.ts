/**
 * The exception queue's service levels in SQL (src/domain/exception-sla.ts): the minutes an exception is
 * allowed, as an expression over an exception row `x` and its entity's mirror `m` (amount, currency).
 * The strictest matching rule wins, else the default. Every reader of a due time (the queue list and its
 * filters, the page, the API, the CSV export, the exception workbook, the overdue metric) uses these, so
 * a due time is computed in one place.
 */
import { type RawBuilder, sql } from 'kysely';
import { UNRESOLVED_STATES } from '../../domain/exception-queue.ts';
import type { SlaTable } from '../../domain/exception-sla.ts';
import { formatAmount } from '../../domain/money.ts';

/** The minutes allowed to the exception `x` (entity mirror `m`), an integer expression. */
/**
 * The unresolved states (`UNRESOLVED_STATES`) as SQL literals: the partial index of unresolved exceptions
 * (`exceptions_unresolved_ix`) is matched by its predicate's text.
 */
export const UNRESOLVED_LITERALS = sql.join(UNRESOLVED_STATES.map((s) => sql.lit(s)));

export function slaMinutesSql(table: SlaTable): RawBuilder<number> {
  const r = table.rules;
  if (r.length === 0) return sql<number>`${table.defaultMinutes}::int`;
  return sql<number>`coalesce((
    SELECT min(s.minutes) FROM unnest(${r.map((x) => x.type ?? null)}::text[], ${r.map((x) => x.severity ?? null)}::text[],
      ${r.map((x) => x.currency ?? null)}::text[],
      ${r.map((x) => (x.minAmount === undefined ? null : formatAmount(x.minAmount)))}::numeric[],
      ${r.map((x) => x.minutes)}::int[]) AS s(type, severity, currency, min_amount, minutes)
    WHERE (s.type IS NULL OR s.type = x.type) AND (s.severity IS NULL OR s.severity = x.severity)
      AND (s.currency IS NULL OR s.currency = m.currency)
      AND (s.min_amount IS NULL OR m.amount >= s.min_amount)), ${table.defaultMinutes}::int)`;
}

/** When the exception `x` is due: first seen plus its service level. */
export function dueAtSql(table: SlaTable): RawBuilder<Date> {
  return sql<Date>`(x.first_seen_at + make_interval(mins => ${slaMinutesSql(table)}))`;
}

/** True when `x` is unresolved and past its due time at `at`. */
export function overdueSql(table: SlaTable, at: Date): RawBuilder<boolean> {
  return sql<boolean>`(x.state IN (${UNRESOLVED_LITERALS}) AND ${dueAtSql(table)} < ${at}::timestamptz)`;
}

/**
 * The amount and currency an exception `x` is about: its payment's (the mirror `m`), or for a bank line or
 * a settlement (which have no mirror) the line's amount or the settlement's net its details carry.
 */
export const EXCEPTION_AMOUNT = sql`(CASE WHEN x.entity_kind = 'bank_line' THEN (x.details->>'amount')::numeric
  WHEN x.entity_kind = 'settlement' THEN (x.details->>'net')::numeric ELSE m.amount END)`;
export const EXCEPTION_CURRENCY = sql`(CASE WHEN x.entity_kind IN ('bank_line', 'settlement')
  THEN x.details->>'currency' ELSE m.currency END)`;

/** The join giving `m` (the entity's mirror) to an exception `x`. */
export const MIRROR_OF_EXCEPTION = sql`LEFT JOIN mirrors m ON m.merchant_account = x.merchant_account
  AND m.entity_kind = x.entity_kind AND m.entity_id = x.entity_id`;
