/**
 * The cash leg of the ledger (docs/architecture.md, "The cash leg"), as pure rules: what a settlement the
 * provider reports and a bank credit matched to settlements book, as a table of events and their postings
 * (debit positive, each entry summing to zero in its one currency), like the effect table of
 * `effects.ts`.
 *
 * Accounts, all in the live book of the settlement's merchant account: `settlements_in_transit` (paid out by
 * the provider, not yet seen in the bank), `settlement_fees`, `fx_conversion` (one per currency, as every
 * ledger account is: a converted settlement is two entries, one per currency), `bank_fees`, and one `bank`
 * account per configured bank account, named `bank:<bank account id>` (the id as statements name it, an
 * IBAN or another id: `bank:NL91ABNA0417164300`).
 *
 * | event | entry (currency) | postings |
 * |---|---|---|
 * | settlement reported, same currency | `settlement` | available -gross; settlements_in_transit +net; settlement_fees +fee |
 * | settlement reported, converted | `settlement_fx_source` (source) | available -gross; fx_conversion +gross |
 * | | `settlement_fx_target` (settlement) | fx_conversion -(net + fee); settlements_in_transit +net; settlement_fees +fee |
 * | bank credit matched to settlements | `bank_match` (bank) | settlements_in_transit -sum of nets; bank +credited; bank_fees +difference |
 *
 * Entries are keyed `<kind>:<merchant account>:<id>:<effect>[:<seq>|:reversal:<seq>]` like every other
 * entry (`settlement:acme:STL-1:settlement`, `bank_match:acme:M-7:bank_match`), so booking twice adds
 * nothing; an unmatch books the mirror image of the match under its own key.
 */
import { AppError } from './errors.ts';
import { type Minor, parseAmount } from './money.ts';

/** The cash leg's accounts of the live book (each per merchant account and currency, as every account). */
export const CASH_LEG_ACCOUNTS = [
  'settlements_in_transit',
  'settlement_fees',
  'fx_conversion',
  'bank_fees',
] as const;
export type CashLegAccount = (typeof CASH_LEG_ACCOUNTS)[number];

/** The prefix of a bank ledger account: `bank:` then the bank account's id. */
export const BANK_ACCOUNT_PREFIX = 'bank:';

/** The ledger account of a configured bank account (`PAYRECON_BANK_ACCOUNTS`' `id`). */
export function bankLedgerAccount(bankAccountId: string): string {
  if (bankAccountId.trim() === '')
    throw new AppError('VALIDATION_FAILED', 'bank account id must not be empty');
  return `${BANK_ACCOUNT_PREFIX}${bankAccountId}`;
}

/** The bank account id a ledger account name stands for, or null when it is not a bank account. */
export function bankAccountOf(ledgerAccount: string): string | null {
  return ledgerAccount.startsWith(BANK_ACCOUNT_PREFIX) && ledgerAccount.length > BANK_ACCOUNT_PREFIX.length
    ? ledgerAccount.slice(BANK_ACCOUNT_PREFIX.length)
    : null;
}

/** True for the accounts of the cash leg, bank accounts included. */
export function isCashLegAccount(ledgerAccount: string): boolean {
  return (
    (CASH_LEG_ACCOUNTS as readonly string[]).includes(ledgerAccount) || bankAccountOf(ledgerAccount) !== null
  );
}

/** What a journal entry of the cash leg is about (its `entity_kind`). */
export const CASH_LEG_KINDS = ['settlement', 'bank_match'] as const;
export type CashLegKind = (typeof CASH_LEG_KINDS)[number];

/** The cash leg's effects (a journal entry's `effect`). */
export const CASH_LEG_EFFECTS = [
  'settlement',
  'settlement_fx_source',
  'settlement_fx_target',
  'bank_match',
] as const;
export type CashLegEffect = (typeof CASH_LEG_EFFECTS)[number];

export interface CashPosting {
  account: string;
  currency: string;
  /** Signed minor units, debit positive. */
  amount: Minor;
}

/** One journal entry of the cash leg, in one currency of the live book. */
export interface CashEntry {
  idempotencyKey: string;
  kind: CashLegKind;
  /** The merchant account. */
  account: string;
  /** The settlement id or the match id. */
  entityId: string;
  effect: CashLegEffect;
  direction: 1 | -1;
  seq: number;
  currency: string;
  /** The entry's amount (gross, converted or credited; never negative). */
  amount: Minor;
  /** The settlement fee, or the bank fee (the difference a bank match leaves), when not zero. */
  feeAmount: Minor | null;
  /** The settlement's rate (decimal text) on both entries of a converted settlement; null otherwise. */
  rate: string | null;
  postings: CashPosting[];
}

/** The key of a cash-leg entry, the ledger's `<kind>:<account>:<id>:<effect>[:<seq>|:reversal:<seq>]`. */
export function cashEntryKey(
  kind: CashLegKind,
  account: string,
  entityId: string,
  effect: CashLegEffect,
  direction: 1 | -1 = 1,
  seq = 1,
): string {
  const base = `${kind}:${account}:${entityId}:${effect}`;
  if (direction === -1) return `${base}:reversal:${seq}`;
  return seq === 1 ? base : `${base}:${seq}`;
}

/** Drops zero lines (a posting is never zero). */
function nonZero(lines: CashPosting[]): CashPosting[] {
  return lines.filter((l) => l.amount !== 0n);
}

// ---------------------------------------------------------------- settlements

/** A settlement as its report gives it, amounts in minor units. */
export interface SettlementFacts {
  settlementId: string;
  /** The merchant account. */
  account: string;
  /** The balance currency swept. */
  currency: string;
  /** Swept from `available`, in `currency`. */
  gross: Minor;
  /** The settlement fee, in the settlement currency. */
  fees: Minor;
  settlementCurrency: string;
  /** Decimal text, as reported (1 when not converted). */
  rate: string;
  /** Paid out, in the settlement currency. */
  net: Minor;
}

const RATE = /^(?:0|[1-9]\d*)(?:\.\d+)?$/;

function refuse(s: SettlementFacts, rule: string): never {
  throw new AppError('VALIDATION_FAILED', `settlement ${s.settlementId} (${s.account}): ${rule}`, {
    details: { settlementId: s.settlementId, account: s.account },
  });
}

/**
 * The entries a reported settlement books: one in its currency when it is not converted, two (one per
 * currency, the rate on both) when it is. Refused, naming the settlement and the rule: a negative gross,
 * fee or net, a rate that is not a positive decimal, and a same-currency settlement whose gross is not its
 * net plus its fee. A settlement of nothing (gross, fee and net all zero) books nothing.
 */
export function settlementEntries(s: SettlementFacts): CashEntry[] {
  if (s.gross < 0n) refuse(s, 'gross must not be negative');
  if (s.fees < 0n) refuse(s, 'fees must not be negative');
  if (s.net < 0n) refuse(s, 'net must not be negative');
  if (!RATE.test(s.rate) || /^0(?:\.0*)?$/.test(s.rate)) refuse(s, 'rate must be a positive decimal');
  if (s.gross === 0n && s.fees === 0n && s.net === 0n) return [];
  const entry = (
    effect: CashLegEffect,
    currency: string,
    amount: Minor,
    feeAmount: Minor | null,
    rate: string | null,
    postings: CashPosting[],
  ): CashEntry => ({
    idempotencyKey: cashEntryKey('settlement', s.account, s.settlementId, effect),
    kind: 'settlement',
    account: s.account,
    entityId: s.settlementId,
    effect,
    direction: 1,
    seq: 1,
    currency,
    amount,
    feeAmount: feeAmount === 0n ? null : feeAmount,
    rate,
    postings: nonZero(postings),
  });
  if (s.currency === s.settlementCurrency) {
    if (s.gross !== s.net + s.fees) refuse(s, 'gross must equal net plus fees in one currency');
    const c = s.currency;
    return [
      entry('settlement', c, s.gross, s.fees, s.rate, [
        { account: 'available', currency: c, amount: -s.gross },
        { account: 'settlements_in_transit', currency: c, amount: s.net },
        { account: 'settlement_fees', currency: c, amount: s.fees },
      ]),
    ];
  }
  const converted = s.net + s.fees;
  const source = s.currency;
  const target = s.settlementCurrency;
  return [
    entry('settlement_fx_source', source, s.gross, null, s.rate, [
      { account: 'available', currency: source, amount: -s.gross },
      { account: 'fx_conversion', currency: source, amount: s.gross },
    ]),
    entry('settlement_fx_target', target, converted, s.fees, s.rate, [
      { account: 'fx_conversion', currency: target, amount: -converted },
      { account: 'settlements_in_transit', currency: target, amount: s.net },
      { account: 'settlement_fees', currency: target, amount: s.fees },
    ]),
  ].filter((e) => e.postings.length > 0);
}

/** A settlement report row as stored (amounts numeric text in major units) to the facts the table takes. */
export function settlementFactsOf(row: {
  settlement_id: string;
  account: string;
  currency: string;
  gross: string;
  fees: string;
  settlement_currency: string;
  rate: string;
  net: string;
}): SettlementFacts {
  const amount = (text: string, field: string) => parseAmount(text, { field, allowNegative: true });
  return {
    settlementId: row.settlement_id,
    account: row.account,
    currency: row.currency,
    gross: amount(row.gross, 'gross'),
    fees: amount(row.fees, 'fees'),
    settlementCurrency: row.settlement_currency,
    rate: row.rate,
    net: amount(row.net, 'net'),
  };
}

// ---------------------------------------------------------------- bank matches

/** A bank credit matched to settlements, as the matcher books it (`bookBankMatch`). */
export interface BankMatchBooking {
  matchId: string;
  bankAccount: string;
  account: string;
  currency: string;
  credited: bigint;
  bankLineIdentity: string;
  settlements: { settlementId: string; currency: string; net: bigint }[];
}

/**
 * The entry of a bank credit matched to settlements (application `seq`, 1 for the first): settlements in
 * transit less the sum of their nets, the bank account plus what was credited, bank fees plus the
 * difference (a fee the bank took; an amount credited above the nets makes it negative). Refused: no
 * settlement, a settlement in another currency than the credit, a credit that is not positive.
 */
export function bankMatchEntry(b: BankMatchBooking, seq = 1): CashEntry {
  const refuseMatch = (rule: string): never => {
    throw new AppError('VALIDATION_FAILED', `bank match ${b.matchId}: ${rule}`, {
      details: { matchId: b.matchId },
    });
  };
  if (b.settlements.length === 0) refuseMatch('names no settlement');
  if (b.credited <= 0n) refuseMatch('the amount credited must be positive');
  for (const s of b.settlements) {
    if (s.currency !== b.currency) {
      refuseMatch(`settlement ${s.settlementId} is in ${s.currency}, the credit in ${b.currency}`);
    }
  }
  const nets = b.settlements.reduce((sum, s) => sum + s.net, 0n);
  const difference = nets - b.credited;
  const c = b.currency;
  return {
    idempotencyKey: cashEntryKey('bank_match', b.account, b.matchId, 'bank_match', 1, seq),
    kind: 'bank_match',
    account: b.account,
    entityId: b.matchId,
    effect: 'bank_match',
    direction: 1,
    seq,
    currency: c,
    amount: b.credited,
    feeAmount: difference === 0n ? null : difference,
    rate: null,
    postings: nonZero([
      { account: 'settlements_in_transit', currency: c, amount: -nets },
      { account: bankLedgerAccount(b.bankAccount), currency: c, amount: b.credited },
      { account: 'bank_fees', currency: c, amount: difference },
    ]),
  };
}

/** The mirror image of an entry (an unmatch), under its reversal key `seq`. */
export function reversalOf(entry: CashEntry, seq: number): CashEntry {
  return {
    ...entry,
    idempotencyKey: cashEntryKey(entry.kind, entry.account, entry.entityId, entry.effect, -1, seq),
    direction: -1,
    seq,
    postings: entry.postings.map((p) => ({ ...p, amount: -p.amount })),
  };
}

/** Sum of an entry's postings per currency (zero for every currency of a sound entry). */
export function sumsByCurrency(postings: readonly CashPosting[]): Map<string, Minor> {
  const out = new Map<string, Minor>();
  for (const p of postings) out.set(p.currency, (out.get(p.currency) ?? 0n) + p.amount);
  return out;
}
