/**
 * Ground truth for reconciliation tests: balances per account and currency computed from the entity
 * states alone, with the effect table of docs/architecture.md (deliberately a separate, simple model: it does
 * not import the ledger it is there to check), and an export of every entity with its full history.
 */
import { formatAmount, type Minor } from '../domain/money.ts';
import type { SandboxEngine } from './engine.ts';
import type { CashoutRecord, DepositRecord, RefundRecord } from './entities.ts';

export interface BalanceRow {
  account: string;
  currency: string;
  /** What the provider owes the merchant. */
  available: Minor;
  /** Held for cashouts and refunds in flight. */
  reserved: Minor;
  deposits: Minor;
  fees: Minor;
  payouts: Minor;
  refunds: Minor;
  testAvailable: Minor;
  cryptoInTransit: Minor;
  cryptoWallets: Minor;
}

function emptyRow(account: string, currency: string): BalanceRow {
  return {
    account,
    currency,
    available: 0n,
    reserved: 0n,
    deposits: 0n,
    fees: 0n,
    payouts: 0n,
    refunds: 0n,
    testAvailable: 0n,
    cryptoInTransit: 0n,
    cryptoWallets: 0n,
  };
}

/** Fee a deposit bears on the merchant's balance (0 when the payer pays it). */
export function merchantFee(d: DepositRecord): Minor {
  return d.feeOnPayer ? 0n : d.feeAmount;
}

function applyDeposit(row: BalanceRow, d: DepositRecord): void {
  // A test deposit moves no real money, a customer's crypto wallet included: test wins over crypto.
  if (d.test) {
    if (d.status === 'COMPLETED' || d.status === 'EARLY_RELEASED')
      row.testAvailable += d.amount - merchantFee(d);
    return;
  }
  if (d.crypto) {
    // Crypto deposits credit the customer's wallet, never the merchant's balance.
    if (d.status === 'APPROVED') row.cryptoInTransit += d.amount;
    if (d.status === 'COMPLETED') row.cryptoWallets += d.amount;
    return;
  }
  // Credited while COMPLETED or EARLY_RELEASED; an early release that then fails is reversed (net 0).
  if (d.status !== 'COMPLETED' && d.status !== 'EARLY_RELEASED') return;
  const fee = merchantFee(d);
  row.available += d.amount - fee;
  row.deposits += d.amount;
  row.fees += fee;
}

function applyOutflow(row: BalanceRow, e: CashoutRecord | RefundRecord, book: 'payouts' | 'refunds'): void {
  switch (e.status) {
    case 'PENDING':
    case 'ON_HOLD':
    case 'DELIVERED':
    case 'INCORRECT_DETAILS':
      row.available -= e.amount;
      row.reserved += e.amount;
      return;
    case 'COMPLETED':
      row.available -= e.amount;
      row[book] += e.amount;
      return;
    // CANCELLED, REJECTED (reserve + release, or reserve + settle + late reversal) and DECLINED: net zero.
    default:
      return;
  }
}

export function computeBalances(engine: SandboxEngine): BalanceRow[] {
  const rows = new Map<string, BalanceRow>();
  const row = (account: string, currency: string): BalanceRow => {
    const key = `${account}\u0000${currency}`;
    let r = rows.get(key);
    if (!r) {
      r = emptyRow(account, currency);
      rows.set(key, r);
    }
    return r;
  };
  for (const d of engine.deposits.values()) applyDeposit(row(d.account, d.currency), d);
  for (const c of engine.cashouts.values()) applyOutflow(row(c.account, c.currency), c, 'payouts');
  for (const r of engine.refunds.values()) {
    const deposit = engine.deposits.get(r.depositId);
    if (deposit?.test) {
      // A refund of a test deposit stays in the test book.
      const shadow = emptyRow(r.account, r.currency);
      applyOutflow(shadow, r, 'refunds');
      row(r.account, r.currency).testAvailable += shadow.available;
    } else applyOutflow(row(r.account, r.currency), r, 'refunds');
  }
  return [...rows.values()].sort((a, b) =>
    a.account === b.account ? a.currency.localeCompare(b.currency) : a.account.localeCompare(b.account),
  );
}

/** Balances as JSON-friendly rows (amounts as decimal text). */
export function balancesJson(engine: SandboxEngine): Record<string, string>[] {
  return computeBalances(engine).map((r) => ({
    account: r.account,
    currency: r.currency,
    available: formatAmount(r.available),
    reserved: formatAmount(r.reserved),
    deposits: formatAmount(r.deposits),
    fees: formatAmount(r.fees),
    payouts: formatAmount(r.payouts),
    refunds: formatAmount(r.refunds),
    test_available: formatAmount(r.testAvailable),
    crypto_in_transit: formatAmount(r.cryptoInTransit),
    crypto_wallets: formatAmount(r.cryptoWallets),
  }));
}

function amountsAsText(value: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (k === 'cachedBody') continue;
    out[k] = typeof v === 'bigint' ? formatAmount(v) : v;
  }
  return out;
}

/** Every entity with its full status history; amounts as decimal text. */
export function exportEntities(engine: SandboxEngine, account?: string) {
  const keep = (r: { account: string }) => account === undefined || r.account === account;
  return {
    generated_at: engine.nowIso(),
    deposits: [...engine.deposits.values()].filter(keep).map((d) => amountsAsText({ ...d })),
    cashouts: [...engine.cashouts.values()].filter(keep).map((c) => amountsAsText({ ...c })),
    refunds: [...engine.refunds.values()].filter(keep).map((r) => amountsAsText({ ...r })),
  };
}
