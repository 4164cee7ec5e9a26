/**
 * The exception queue's service levels: how long an unresolved exception may wait
 * before it is overdue. A table of rules, each naming any of an exception type, a severity, and a
 * currency with an amount threshold (the entity's amount at or above it), and the minutes allowed. An
 * exception is held to the strictest (shortest) service level among the rules it matches; matching none,
 * to the default. The order of the rules does not matter. Configured by PAYRECON_EXCEPTION_SLA (the
 * rules) and PAYRECON_EXCEPTION_SLA_MINUTES (the default), parsed in src/config.ts; applied in SQL by
 * src/db/exception-sla.ts (due time = first seen + the minutes), the one place a due time is computed.
 */
import type { ExceptionType, Severity } from './exception-rules.ts';
import type { Minor } from './money.ts';

export interface SlaRule {
  type?: ExceptionType;
  severity?: Severity;
  /** With `minAmount`: the threshold's currency (amounts of other currencies do not match). */
  currency?: string;
  /** The entity's amount at or above this (minor units); an entity without an amount does not match. */
  minAmount?: Minor;
  minutes: number;
}

export interface SlaTable {
  rules: readonly SlaRule[];
  /** Minutes for an exception no rule matches. */
  defaultMinutes: number;
}

/** A day for everything, tighter for what is worst: critical in 2 hours, high in 8. */
export const DEFAULT_SLA_RULES: readonly SlaRule[] = [
  { severity: 'critical', minutes: 120 },
  { severity: 'high', minutes: 480 },
];

export const DEFAULT_SLA_MINUTES = 1440;

export const DEFAULT_SLA_TABLE: SlaTable = { rules: DEFAULT_SLA_RULES, defaultMinutes: DEFAULT_SLA_MINUTES };
