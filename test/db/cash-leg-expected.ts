/**
 * What the sandbox's ground truth says matching must raise, and what it raised: every planted bank
 * anomaly of the days whose statements are in becomes its exception, and nothing else does. An unrelated
 * line or a returned credit stays a BANK_LINE_UNMATCHED (named by its bank reference); a credit that never
 * arrived leaves its settlement SETTLEMENT_NOT_RECEIVED once its value date plus the grace is past (days
 * counted to today, or to the day after its bank account's last statement when that is later, as
 * runMatching counts them); a late, batched or fee-bearing credit is matched and raises nothing.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import { bankToday } from '../../src/domain/matching.ts';
import type { groundTruth } from '../sandbox/settlement-helpers.ts';

export type GroundTruth = Awaited<ReturnType<typeof groundTruth>>;

/** The exception types matching raises (src/db/matching/exceptions.ts). */
export const RECONCILIATION_TYPES = [
  'BANK_LINE_UNMATCHED',
  'SETTLEMENT_NOT_RECEIVED',
  'PROVIDER_REPORT_UNMATCHED',
  'LEDGER_NOT_IN_REPORT',
  'PROVIDER_REPORT_MISMATCH',
  'PROVIDER_BALANCE_DRIFT',
] as const;

export interface CashExceptions {
  /** Bank references of the lines left unmatched, sorted. */
  unmatchedLines: string[];
  /** Ids of the settlements not received, sorted. */
  notReceived: string[];
}

export interface ExpectedOptions {
  /** The last statement day imported of each bank account (only these accounts' anomalies count). */
  lastDays: ReadonlyMap<string, string>;
  /** The clock of the matching run. */
  now: Date;
  graceDays: number;
}

const dayDiff = (from: string, to: string) =>
  (Date.parse(`${to}T00:00:00Z`) - Date.parse(`${from}T00:00:00Z`)) / 86_400_000;

/** The exceptions the ground truth's anomalies must raise for the statements in. */
export function expectedCashExceptions(truth: GroundTruth, options: ExpectedOptions): CashExceptions {
  const clockDay = options.now.toISOString().slice(0, 10);
  const todayOf = (bank: string) => bankToday(clockDay, options.lastDays.get(bank));
  const valueDate = new Map(truth.settlements.map((s) => [s.settlement_id, s.value_date]));
  const unmatchedLines = truth.bankAnomalies
    .filter((a) => a.kind === 'UNRELATED_LINE' || a.kind === 'RETURNED_CREDIT')
    .filter((a) => {
      const last = options.lastDays.get(a.bankAccount);
      return last !== undefined && a.date <= last;
    })
    .map((a) => a.bankRef!)
    .sort();
  const notReceived = truth.bankAnomalies
    .filter((a) => a.kind === 'MISSING_CREDIT' && options.lastDays.has(a.bankAccount))
    .flatMap((a) => a.settlementIds.map((id) => ({ id, today: todayOf(a.bankAccount) })))
    .filter(({ id, today }) => dayDiff(valueDate.get(id)!, today) > options.graceDays)
    .map(({ id }) => id)
    .sort();
  return { unmatchedLines, notReceived };
}

/** The open reconciliation exceptions: the bank's two kinds by reference and id, and any other kind. */
export async function openCashExceptions(
  db: Kysely<Database>,
): Promise<CashExceptions & { others: { type: string; entity_id: string; details: unknown }[] }> {
  const rows = await db
    .selectFrom('exceptions')
    .select(['type', 'entity_id', 'details'])
    .where('state', '<>', 'resolved')
    .where('type', 'in', [...RECONCILIATION_TYPES])
    .execute();
  return {
    unmatchedLines: rows
      .filter((r) => r.type === 'BANK_LINE_UNMATCHED')
      .map((r) => String((r.details as { reference: string }).reference))
      .sort(),
    notReceived: rows
      .filter((r) => r.type === 'SETTLEMENT_NOT_RECEIVED')
      .map((r) => r.entity_id)
      .sort(),
    others: rows
      .filter((r) => r.type !== 'BANK_LINE_UNMATCHED' && r.type !== 'SETTLEMENT_NOT_RECEIVED')
      .map((r) => ({ type: r.type, entity_id: r.entity_id, details: r.details })),
  };
}
