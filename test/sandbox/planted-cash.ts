/**
 * What payrecon must hold once it has imported and matched the sandbox's cash files, derived from the
 * sandbox's own records (its settlements, its bank's entries and the anomalies it planted), never from
 * payrecon: the reconciliation exceptions (exactly the planted anomalies the imported days show), the bank
 * fees, and the cash leg's balances per merchant account, currency and ledger account. The matching tests
 * (test/db/matching-sandbox.test.ts) and the chaos soak (test/chaos/soak.ts) check payrecon against these.
 */
import { daysBetween } from '../../src/domain/matching.ts';
import type {
  BankAccountInfo,
  BankAnomaly,
  BankEntry,
  SettlementRecord,
  Settlements,
} from '../../src/sandbox/settlements.ts';

/** Bank-side settings (`PUT /_sandbox/bank`) that plant every kind of anomaly often. */
export const PLANTED = {
  lateCreditRate: 0.2,
  batchedCreditRate: 0.2,
  bankFeeRate: 0.2,
  missingCreditRate: 0.15,
  returnedCreditRate: 0.15,
  unrelatedLineRate: 0.6,
};

/** A copy of what the sandbox's settlements hold. */
export interface CashTruth {
  settlements: SettlementRecord[];
  entries: BankEntry[];
  anomalies: BankAnomaly[];
  bankAccounts: BankAccountInfo[];
}

export function cashTruthOf(settlements: Settlements): CashTruth {
  return {
    settlements: settlements.list().map((s) => ({ ...s })),
    entries: [...settlements.entries.values()]
      .map((e) => ({ ...e, txs: e.txs.map((t) => ({ ...t })) }))
      .sort((a, b) => a.seq - b.seq),
    anomalies: settlements.meta.anomalies.map((a) => ({ ...a, settlementIds: [...a.settlementIds] })),
    bankAccounts: Object.values(settlements.meta.bankAccounts).map((b) => ({ ...b })),
  };
}

/** A credit of settlements (not a reversal, not an unrelated line). */
const isSettlementCredit = (e: BankEntry) =>
  !e.reversal && e.amount > 0n && e.txs.some((t) => t.settlementId !== null);

/** The booking day of each settlement's credit, for the settlements the bank has credited. */
export function creditDays(truth: CashTruth): Map<string, string> {
  const days = new Map<string, string>();
  for (const e of truth.entries.filter(isSettlementCredit)) {
    for (const t of e.txs) if (t.settlementId !== null) days.set(t.settlementId, e.bookingDate);
  }
  return days;
}

/**
 * BANK_LINE_UNMATCHED: the planted lines no rule may match (the unrelated lines and the debits returning
 * a credit) booked by `lastDay`, the last day whose statement is imported; by bank reference, sorted.
 */
export function expectedUnmatchedLines(
  truth: CashTruth,
  lastDay: string,
  bankAccounts?: ReadonlySet<string>,
): string[] {
  return truth.anomalies
    .filter((a) => (a.kind === 'UNRELATED_LINE' || a.kind === 'RETURNED_CREDIT') && a.date <= lastDay)
    .filter((a) => bankAccounts === undefined || bankAccounts.has(a.bankAccount))
    .map((a) => a.bankRef!)
    .sort();
}

/**
 * SETTLEMENT_NOT_RECEIVED as a matching run at `today` raises it: each settlement of a positive net whose
 * credit is in no statement up to `lastDay` (a credit that never arrives, one still waiting to be batched
 * with the next settlement, one booked later) once more than `graceDays` past its value date; by id.
 */
export function expectedNotReceived(
  truth: CashTruth,
  o: { lastDay: string; today: string; graceDays: number },
): string[] {
  const credited = creditDays(truth);
  return truth.settlements
    .filter((s) => s.net > 0n && !((credited.get(s.id) ?? '9999-12-31') <= o.lastDay))
    .filter((s) => daysBetween(s.valueDate, o.today) > o.graceDays)
    .map((s) => s.id)
    .sort((a, b) => Number(a) - Number(b));
}

/** The fees the bank took from the credits booked by `lastDay`. */
export function plantedBankFees(truth: CashTruth, lastDay: string): bigint {
  return truth.anomalies
    .filter((a) => a.kind === 'BANK_FEE' && a.date <= lastDay)
    .reduce((total, a) => total + a.amount!, 0n);
}

/** A cash-leg cell: `<merchant account>|<currency>|<ledger account>`. */
export const cashCell = (account: string, currency: string, ledgerAccount: string) =>
  `${account}|${currency}|${ledgerAccount}`;

/**
 * The cash leg of the ledger, from the sandbox's records (src/domain/cash-leg.ts's table applied to them):
 * - each settlement whose report row is imported (`reported`): `available` less its gross in its balance
 *   currency (the change to `available`; the caller adds the provider's balance before settlements);
 *   unconverted, settlements in transit plus its net and settlement fees plus its fee; converted,
 *   `fx_conversion` plus the gross in the balance currency and less the converted amount (net + fee) in
 *   the settlement currency, settlements in transit and settlement fees in the settlement currency;
 * - each credit of settlements booked by `lastDay` whose settlements are all reported (what matching
 *   matches): settlements in transit less their nets, `bank:<id>` plus the amount credited, bank fees
 *   plus what the bank kept (the nets less the credit).
 * Cells are `cashCell` keys; cells never touched are absent.
 */
export function expectedCashLeg(
  truth: CashTruth,
  o: { lastDay: string; reported: (settlementId: string) => boolean },
): Map<string, bigint> {
  const cells = new Map<string, bigint>();
  const add = (account: string, currency: string, ledgerAccount: string, amount: bigint) => {
    const k = cashCell(account, currency, ledgerAccount);
    cells.set(k, (cells.get(k) ?? 0n) + amount);
  };
  const byId = new Map(truth.settlements.map((s) => [s.id, s]));
  for (const s of truth.settlements) {
    if (!o.reported(s.id)) continue;
    add(s.account, s.currency, 'available', -s.gross);
    if (s.currency !== s.settlementCurrency) {
      add(s.account, s.currency, 'fx_conversion', s.gross);
      add(s.account, s.settlementCurrency, 'fx_conversion', -(s.net + s.fees));
    }
    add(s.account, s.settlementCurrency, 'settlements_in_transit', s.net);
    add(s.account, s.settlementCurrency, 'settlement_fees', s.fees);
  }
  for (const e of truth.entries) {
    if (!isSettlementCredit(e) || e.bookingDate > o.lastDay) continue;
    const ids = e.txs.flatMap((t) => (t.settlementId === null ? [] : [t.settlementId]));
    if (!ids.every((id) => byId.has(id) && o.reported(id))) continue;
    const nets = ids.reduce((total, id) => total + byId.get(id)!.net, 0n);
    add(e.account, e.currency, 'settlements_in_transit', -nets);
    add(e.account, e.currency, `bank:${e.bankAccount}`, e.amount);
    add(e.account, e.currency, 'bank_fees', nets - e.amount);
  }
  return cells;
}
