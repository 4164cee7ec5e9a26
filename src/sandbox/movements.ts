/**
 * The merchant balance's movements, read from the entities' histories with the same effect table as
 * `computeBalances` (ground-truth.ts): every status change that changes what a deposit, cashout or
 * refund adds to `available` is one movement at the instant of the change. A cashout created and later
 * returned is two movements (out, then back in). The settlements sweep these, and the transactions
 * report lists them; their sum up to an instant is `available` at that instant.
 */
import type { Minor } from '../domain/money.ts';
import type { SandboxEngine } from './engine.ts';
import type { AnyRecord, CashoutRecord, DepositRecord, RefundRecord } from './entities.ts';
import { merchantFee } from './ground-truth.ts';

export type MovementType = 'deposit' | 'cashout' | 'refund';

export interface Movement {
  type: MovementType;
  record: AnyRecord;
  account: string;
  currency: string;
  /** Sandbox time of the change, ms. */
  at: number;
  /** Signed effect on the balance before fees (deposit +, cashout and refund -, a return +). */
  gross: Minor;
  /** Fee taken from the balance (deposits not paid by the payer; negative when a credit is undone). */
  fee: Minor;
  /** Status the record moved into. */
  to: string;
}

const OUTFLOW_HELD: ReadonlySet<string> = new Set([
  'PENDING',
  'ON_HOLD',
  'DELIVERED',
  'INCORRECT_DETAILS',
  'COMPLETED',
]);

function depositCounts(d: DepositRecord, status: string): boolean {
  return !d.test && d.crypto === null && (status === 'COMPLETED' || status === 'EARLY_RELEASED');
}

function walk(
  record: AnyRecord,
  type: MovementType,
  counts: (status: string) => boolean,
  gross: Minor,
  fee: Minor,
  out: Movement[],
): void {
  let counted = false;
  for (const h of record.history) {
    const now = counts(h.to);
    if (now === counted) continue;
    const sign = now ? 1n : -1n;
    out.push({
      type,
      record,
      account: record.account,
      currency: (record as DepositRecord | CashoutRecord | RefundRecord).currency,
      at: Date.parse(h.at),
      gross: sign * gross,
      fee: sign * fee,
      to: h.to,
    });
    counted = now;
  }
}

/** Every movement of `account` (all accounts when undefined), in time order. */
export function balanceMovements(engine: SandboxEngine, account?: string): Movement[] {
  const out: Movement[] = [];
  const keep = (r: AnyRecord) => account === undefined || r.account === account;
  for (const d of engine.deposits.values()) {
    if (keep(d)) walk(d, 'deposit', (s) => depositCounts(d, s), d.amount, merchantFee(d), out);
  }
  for (const c of engine.cashouts.values()) {
    if (keep(c)) walk(c, 'cashout', (s) => OUTFLOW_HELD.has(s), -c.amount, 0n, out);
  }
  for (const r of engine.refunds.values()) {
    // A refund of a test deposit moves no real money (it stays in the test book).
    if (keep(r) && !engine.deposits.get(r.depositId)?.test) {
      walk(r, 'refund', (s) => OUTFLOW_HELD.has(s), -r.amount, 0n, out);
    }
  }
  return out.sort((a, b) => a.at - b.at || a.record.id - b.record.id);
}

/** Net effect of a movement on `available`. */
export const movementNet = (m: Movement): Minor => m.gross - m.fee;
