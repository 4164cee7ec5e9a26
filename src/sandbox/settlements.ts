/**
 * Settlements: at each cut-off of a merchant account's schedule (local to its time zone) the sandbox
 * pays out what the account's balance gained since the last payout, per currency, converted into the
 * settlement currency at the market rate less a spread, minus a settlement fee. A balance that is
 * negative (or would not cover the fee) is not paid: it carries over into the next cut-off.
 *
 * Each payout reaches the merchant's settlement bank account as a credit, and the bank side behaves as
 * banks do, drawn from the seeded `settlements` stream: a credit a day late, two settlements in one
 * batch credit, a bank fee taken from a credit, a credit that never arrives, a credit returned days
 * later, and lines unrelated to settlements (rent, transfers). Every such anomaly is recorded by name in
 * the ground truth, so a reconciliation can be checked against it exactly.
 *
 * The gross of a settlement is `available` at the cut-off (from the entities' histories, movements.ts)
 * less everything settled before, so the settled grosses plus the balance left unsettled always equal
 * `available`, and a move after a settlement (a cashout returned after its money was paid) flows into
 * the next one. Durable keys: `settlement:<id>`, `bankentry:<ref>` and `settlements` (the rest).
 */
import { createHash } from 'node:crypto';
import { type Minor, parseAmount } from '../domain/money.ts';
import { addDays, isoWeekday, localDate, zonedTimeToInstant } from '../domain/zoned-time.ts';
import type { SandboxAccount } from './accounts.ts';
import type { Clock } from './clock.ts';
import type { SandboxEngine } from './engine.ts';
import { balanceMovements, movementNet } from './movements.ts';
import type { Rng } from './rng.ts';
import {
  type BankSettings,
  bankSettingsSchema,
  RATE_DIGITS,
  type SettlementConfig,
  settlementConfigSchema,
} from './settlement-config.ts';

export interface SettlementRecord {
  id: string;
  account: string;
  /** Balance currency. */
  currency: string;
  /** Previous payout's cut-off (or when settlements began), ms. */
  periodStart: number;
  /** This cut-off, ms: movements before it are swept. */
  periodEnd: number;
  /** Ground-truth `available` at the cut-off, in `currency`. */
  available: Minor;
  /** Swept before this one, in `currency`. */
  previouslySettled: Minor;
  /** Swept now: available - previouslySettled, in `currency`. */
  gross: Minor;
  settlementCurrency: string;
  /** Decimal text, up to 10 decimals (market rate less the spread; 1 when not converted). */
  rate: string;
  /** gross x rate, rounded half up, in the settlement currency. */
  converted: Minor;
  fees: Minor;
  /** converted - fees: what the bank credit should carry. */
  net: Minor;
  valueDate: string;
  bankReference: string;
  bankAccount: string;
  createdAt: number;
}

export type CarryReason = 'NEGATIVE_BALANCE' | 'BELOW_FEE';

/** A cut-off that paid nothing for a currency: the balance carries over. */
export interface CarryRecord {
  account: string;
  currency: string;
  cutoff: number;
  available: Minor;
  previouslySettled: Minor;
  /** What carries over (available - previouslySettled). */
  balance: Minor;
  reason: CarryReason;
}

export interface BankTransaction {
  endToEndId: string;
  amount: Minor;
  settlementId: string | null;
  /** Unstructured remittance information. */
  remittance: string;
}

export interface BankEntry {
  /** The bank's entry reference (AcctSvcrRef). */
  ref: string;
  seq: number;
  bankAccount: string;
  account: string;
  currency: string;
  bookingDate: string;
  valueDate: string;
  /** Signed: credit +, debit -. */
  amount: Minor;
  /** A debit undoing an earlier credit (camt RvslInd). */
  reversal: boolean;
  /** Bank fee taken from the credit (0 when none). */
  fee: Minor;
  txs: BankTransaction[];
  counterparty: string;
  description: string;
}

export type BankAnomalyKind =
  | 'LATE_CREDIT'
  | 'BATCHED_CREDIT'
  | 'BANK_FEE'
  | 'MISSING_CREDIT'
  | 'RETURNED_CREDIT'
  | 'UNRELATED_LINE';

export interface BankAnomaly {
  kind: BankAnomalyKind;
  settlementIds: string[];
  bankAccount: string;
  bankRef?: string;
  amount?: Minor;
  date: string;
  note?: string;
}

export interface BankAccountInfo {
  id: string;
  account: string;
  currency: string;
  /** Local date the sandbox first credited it. */
  opened: string;
  /** Balance before the first entry. */
  opening: Minor;
}

interface AccountState {
  since: number;
  lastCutoff: number;
  /** Swept so far per balance currency. */
  settled: Record<string, Minor>;
  /** Settlement waiting to be paid together with the next one, per settlement currency. */
  batchWaiting: Record<string, string>;
}

export interface SettlementsMeta {
  nextSettlement: number;
  nextEntry: number;
  accounts: Record<string, AccountState>;
  bankAccounts: Record<string, BankAccountInfo>;
  anomalies: BankAnomaly[];
  carries: CarryRecord[];
  bank: BankSettings;
}

const RATE_SCALE = 10n ** BigInt(RATE_DIGITS);
const FIRST_SETTLEMENT_ID = 7_000_001;

/** Parses decimal text into an integer scaled by 10^digits (no float). */
function scaled(text: string, digits: number): bigint {
  const [int = '0', frac = ''] = text.split('.');
  return BigInt(int + frac.padEnd(digits, '0').slice(0, digits));
}

/** a / b rounded half up, for a >= 0 and b > 0. */
function divRound(a: bigint, b: bigint): bigint {
  return (a * 2n + b) / (2n * b);
}

export function formatRate(rate: bigint): string {
  const digits = rate.toString().padStart(RATE_DIGITS + 1, '0');
  const int = digits.slice(0, -RATE_DIGITS);
  const frac = digits.slice(-RATE_DIGITS).replace(/0{1,4}$/, '');
  return `${int}.${frac.padEnd(6, '0')}`;
}

/** A valid IBAN (mod 97) derived from the account and currency, so defaults are stable across runs. */
export function generatedIban(account: string, currency: string): string {
  const hash = createHash('sha256').update(`${account}\u0000${currency}`).digest();
  const bban = `SBOX${(hash.readBigUInt64BE(0) % 10n ** 10n).toString().padStart(10, '0')}`;
  const numeric = `${bban}NL00`.replace(/[A-Z]/g, (c) => String(c.charCodeAt(0) - 55));
  const check = 98n - (BigInt(numeric) % 97n);
  return `NL${check.toString().padStart(2, '0')}${bban}`;
}

export function settlementConfigOf(account: SandboxAccount): SettlementConfig {
  return settlementConfigSchema.parse(account.settlement ?? {});
}

export const timeZoneOf = (account: SandboxAccount): string => account.timeZone ?? 'UTC';

/** The first cut-off of the schedule strictly after `after`. */
export function nextCutoff(after: number, config: SettlementConfig, timeZone: string): number {
  const start = localDate(new Date(after), timeZone);
  for (let i = -1; i < 16; i++) {
    const day = addDays(start, i);
    if (config.schedule === 'weekly' && isoWeekday(day) !== config.weekday) continue;
    const at = zonedTimeToInstant(day, config.cutoff, timeZone).getTime();
    if (at > after) return at;
  }
  throw new Error('no cut-off within 16 days');
}

export interface SettlementsOptions {
  engine: SandboxEngine;
  clock: Clock;
  rng: Rng;
  bank?: unknown;
}

export class Settlements {
  readonly settlements = new Map<string, SettlementRecord>();
  readonly entries = new Map<string, BankEntry>();
  meta: SettlementsMeta;
  /** Told every key that changed (the durable store writes them). */
  onDirty: (key: string) => void = () => {};
  private readonly engine: SandboxEngine;
  private readonly clock: Clock;
  private readonly rng: Rng;
  private readonly timers = new Map<string, () => void>();

  constructor(options: SettlementsOptions) {
    this.engine = options.engine;
    this.clock = options.clock;
    this.rng = options.rng;
    this.meta = {
      nextSettlement: FIRST_SETTLEMENT_ID,
      nextEntry: 1,
      accounts: {},
      bankAccounts: {},
      anomalies: [],
      carries: [],
      bank: bankSettingsSchema.parse(options.bank ?? {}),
    };
  }

  setBank(settings: unknown): BankSettings {
    this.meta.bank = bankSettingsSchema.parse(settings);
    this.onDirty('settlements');
    return this.meta.bank;
  }

  restore(meta: SettlementsMeta | undefined, records: SettlementRecord[], entries: BankEntry[]): void {
    if (meta) this.meta = { ...meta, bank: bankSettingsSchema.parse(meta.bank ?? {}) };
    for (const r of records) this.settlements.set(r.id, r);
    for (const e of entries) this.entries.set(e.ref, e);
  }

  /** Plans each account's next cut-off (at start, and after a restore: missed cut-offs run at once). */
  start(): void {
    for (const account of this.engine.accounts.all()) {
      const config = settlementConfigOf(account);
      if (!config.enabled) continue;
      let state = this.meta.accounts[account.name];
      if (!state) {
        const now = this.clock.now();
        state = { since: now, lastCutoff: now, settled: {}, batchWaiting: {} };
        this.meta.accounts[account.name] = state;
        this.onDirty('settlements');
      }
      this.plan(account, config, state);
    }
  }

  private plan(account: SandboxAccount, config: SettlementConfig, state: AccountState): void {
    const at = nextCutoff(state.lastCutoff, config, timeZoneOf(account));
    this.timers.get(account.name)?.();
    this.timers.set(
      account.name,
      this.clock.at(at, () => {
        this.settle(account, config, state, at);
        this.plan(account, config, state);
      }),
    );
  }

  /** Market rate from `from` into `to` less the spread, scaled by 10^10. */
  rate(config: SettlementConfig, from: string, to: string): bigint {
    if (from === to) return RATE_SCALE;
    let market: bigint;
    const given = config.rates[from];
    if (given !== undefined) market = scaled(given, RATE_DIGITS);
    else {
      const usd = this.engine.catalogue.currencies;
      const a = usd[from]?.usdRate;
      const b = usd[to]?.usdRate;
      if (a === undefined || b === undefined) throw new Error(`no rate from ${from} to ${to}`);
      market = (scaled(a, RATE_DIGITS) * RATE_SCALE) / scaled(b, RATE_DIGITS);
    }
    return (market * BigInt(10_000 - config.spreadBps)) / 10_000n;
  }

  private settle(
    account: SandboxAccount,
    config: SettlementConfig,
    state: AccountState,
    cutoff: number,
  ): void {
    const tz = timeZoneOf(account);
    const available = new Map<string, Minor>();
    for (const m of balanceMovements(this.engine, account.name)) {
      if (m.at >= cutoff) continue;
      available.set(m.currency, (available.get(m.currency) ?? 0n) + movementNet(m));
    }
    const currencies = [...new Set([...available.keys(), ...Object.keys(state.settled)])].sort();
    const valueDate = addDays(localDate(new Date(cutoff - 1), tz), config.valueDays);
    const fixedFee = parseAmount(config.fee.fixed);
    for (const currency of currencies) {
      const avail = available.get(currency) ?? 0n;
      const before = state.settled[currency] ?? 0n;
      const balance = avail - before;
      if (balance === 0n) continue;
      const carry = (reason: CarryReason) =>
        this.meta.carries.push({
          account: account.name,
          currency,
          cutoff,
          available: avail,
          previouslySettled: before,
          balance,
          reason,
        });
      if (balance < 0n) {
        carry('NEGATIVE_BALANCE');
        continue;
      }
      const settlementCurrency = config.currency ?? currency;
      const rate = this.rate(config, currency, settlementCurrency);
      const converted = divRound(balance * rate, RATE_SCALE);
      const fees = fixedFee + divRound(converted * BigInt(config.fee.bps), 10_000n);
      if (converted <= fees) {
        carry('BELOW_FEE');
        continue;
      }
      const id = String(this.meta.nextSettlement++);
      const previous = [...this.settlements.values()]
        .filter((s) => s.account === account.name && s.currency === currency)
        .reduce((last, s) => Math.max(last, s.periodEnd), state.since);
      const record: SettlementRecord = {
        id,
        account: account.name,
        currency,
        periodStart: previous,
        periodEnd: cutoff,
        available: avail,
        previouslySettled: before,
        gross: balance,
        settlementCurrency,
        rate: formatRate(rate),
        converted,
        fees,
        net: converted - fees,
        valueDate,
        bankReference: `STL-${id}`,
        bankAccount: this.bankAccount(account, config, settlementCurrency).id,
        createdAt: this.clock.now(),
      };
      state.settled[currency] = avail;
      this.settlements.set(id, record);
      this.onDirty(`settlement:${id}`);
      this.credit(account, state, record);
    }
    this.unrelatedLines(account, valueDate);
    state.lastCutoff = cutoff;
    this.onDirty('settlements');
  }

  private bankAccount(account: SandboxAccount, config: SettlementConfig, currency: string): BankAccountInfo {
    const id = config.bankAccounts[currency] ?? generatedIban(account.name, currency);
    let info = this.meta.bankAccounts[id];
    if (!info) {
      info = {
        id,
        account: account.name,
        currency,
        opened: localDate(new Date(this.clock.now()), timeZoneOf(account)),
        opening: BigInt(this.rng.int(500_000, 5_000_000)),
      };
      this.meta.bankAccounts[id] = info;
    }
    return info;
  }

  /** A booking date never in a day the bank has already closed. */
  private bookingDay(account: SandboxAccount, date: string): string {
    const today = localDate(new Date(this.clock.now()), timeZoneOf(account));
    return date < today ? today : date;
  }

  private addEntry(entry: Omit<BankEntry, 'ref' | 'seq'>): BankEntry {
    const seq = this.meta.nextEntry++;
    const full: BankEntry = { ...entry, ref: `BK${String(seq).padStart(10, '0')}`, seq };
    this.entries.set(full.ref, full);
    this.onDirty(`bankentry:${full.ref}`);
    return full;
  }

  private creditEntry(records: SettlementRecord[], bookingDate: string, fee: Minor): BankEntry {
    const first = records[0]!;
    const total = records.reduce((s, r) => s + r.net, 0n);
    return this.addEntry({
      bankAccount: first.bankAccount,
      account: first.account,
      currency: first.settlementCurrency,
      bookingDate,
      valueDate: bookingDate,
      amount: total - fee,
      reversal: false,
      fee,
      txs: records.map((r) => ({
        endToEndId: r.bankReference,
        amount: r.net,
        settlementId: r.id,
        remittance: `Settlement ${r.id} ${r.currency} ${r.valueDate}`,
      })),
      counterparty: 'Payment Service Provider Ltd',
      description:
        records.length > 1
          ? `Settlements ${records.map((r) => r.id).join(', ')}`
          : `Settlement ${first.id} ${first.currency}`,
    });
  }

  private anomaly(a: BankAnomaly): void {
    this.meta.anomalies.push(a);
  }

  private credit(account: SandboxAccount, state: AccountState, record: SettlementRecord): void {
    const bank = this.meta.bank;
    const day = this.bookingDay(account, record.valueDate);
    const base = { bankAccount: record.bankAccount };
    const waiting = state.batchWaiting[record.settlementCurrency];
    if (waiting !== undefined) {
      delete state.batchWaiting[record.settlementCurrency];
      const earlier = this.settlements.get(waiting)!;
      const entry = this.creditEntry([earlier, record], day, 0n);
      this.anomaly({
        ...base,
        kind: 'BATCHED_CREDIT',
        settlementIds: [earlier.id, record.id],
        bankRef: entry.ref,
        amount: entry.amount,
        date: day,
      });
      return;
    }
    const draw = this.rng.next();
    let edge = 0;
    const hit = (rate: number) => {
      const inside = draw >= edge && draw < edge + rate;
      edge += rate;
      return inside;
    };
    const ids = [record.id];
    if (hit(bank.lateCreditRate)) {
      const late = addDays(day, 1);
      const entry = this.creditEntry([record], late, 0n);
      this.anomaly({
        ...base,
        kind: 'LATE_CREDIT',
        settlementIds: ids,
        bankRef: entry.ref,
        amount: entry.amount,
        date: late,
      });
    } else if (hit(bank.batchedCreditRate)) {
      state.batchWaiting[record.settlementCurrency] = record.id;
    } else if (hit(bank.bankFeeRate)) {
      const [lo, hi] = bank.bankFee.map((t) => parseAmount(t));
      const drawn = BigInt(this.rng.int(Number(lo!), Number(hi!)));
      const fee = drawn < record.net ? drawn : 0n;
      const entry = this.creditEntry([record], day, fee);
      if (fee > 0n)
        this.anomaly({
          ...base,
          kind: 'BANK_FEE',
          settlementIds: ids,
          bankRef: entry.ref,
          amount: fee,
          date: day,
        });
    } else if (hit(bank.missingCreditRate)) {
      this.anomaly({ ...base, kind: 'MISSING_CREDIT', settlementIds: ids, amount: record.net, date: day });
    } else if (hit(bank.returnedCreditRate)) {
      const credit = this.creditEntry([record], day, 0n);
      const back = addDays(day, this.rng.int(1, 3));
      const reversal = this.addEntry({
        bankAccount: record.bankAccount,
        account: record.account,
        currency: record.settlementCurrency,
        bookingDate: back,
        valueDate: back,
        amount: -credit.amount,
        reversal: true,
        fee: 0n,
        txs: [
          {
            endToEndId: record.bankReference,
            amount: credit.amount,
            settlementId: record.id,
            remittance: `Return of settlement ${record.id}`,
          },
        ],
        counterparty: credit.counterparty,
        description: `Return of ${credit.ref}: account closed (AC04)`,
      });
      this.anomaly({
        ...base,
        kind: 'RETURNED_CREDIT',
        settlementIds: ids,
        bankRef: reversal.ref,
        amount: credit.amount,
        date: back,
        note: `reverses ${credit.ref}`,
      });
    } else {
      this.creditEntry([record], day, 0n);
    }
  }

  private unrelatedLines(account: SandboxAccount, valueDate: string): void {
    const rate = this.meta.bank.unrelatedLineRate;
    const day = this.bookingDay(account, valueDate);
    const accounts = Object.values(this.meta.bankAccounts)
      .filter((b) => b.account === account.name)
      .sort((a, b) => a.id.localeCompare(b.id));
    for (const bankAccount of accounts) {
      if (!this.rng.chance(rate)) continue;
      const kind = this.rng.pick(['rent', 'transfer-in', 'transfer-out'] as const);
      const cents = BigInt(this.rng.int(5_000, 400_000));
      const line =
        kind === 'rent'
          ? {
              amount: -cents,
              counterparty: 'Smith & Sons Lettings <Unit 4>',
              description: `Rent ${day.slice(0, 7)} "office"`,
            }
          : kind === 'transfer-in'
            ? { amount: cents, counterparty: `${account.name} treasury`, description: 'Own account transfer' }
            : {
                amount: -cents,
                counterparty: `${account.name} treasury`,
                description: 'Transfer to reserve account',
              };
      const entry = this.addEntry({
        bankAccount: bankAccount.id,
        account: account.name,
        currency: bankAccount.currency,
        bookingDate: day,
        valueDate: day,
        reversal: false,
        fee: 0n,
        txs: [{ endToEndId: 'NOTPROVIDED', amount: cents, settlementId: null, remittance: line.description }],
        ...line,
      });
      this.anomaly({
        kind: 'UNRELATED_LINE',
        settlementIds: [],
        bankAccount: bankAccount.id,
        bankRef: entry.ref,
        amount: entry.amount,
        date: day,
        note: kind,
      });
    }
  }

  /** Settlements of an account (all when undefined), in id order. */
  list(account?: string): SettlementRecord[] {
    return [...this.settlements.values()]
      .filter((s) => account === undefined || s.account === account)
      .sort((a, b) => Number(a.id) - Number(b.id));
  }
}
