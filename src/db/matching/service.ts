/**
 * Matching against PostgreSQL: `runMatching` loads the lines in no live match (incremental), runs the
 * rules (`matchItems`, src/domain/matching.ts), inserts the new matches and runs the exception sweep, in
 * one transaction under an advisory lock, so a re-run adds nothing and two runs never race; a run an import
 * started keeps its result on the import in the same transaction (src/db/imports/matching.ts). Report rows
 * are read in pages of whole transactions (by transaction id) with the ledger payments they name, so a
 * million rows never sit in memory at once.
 *
 * A line a person unmatched is left to persons: the rules no longer take it (it keeps its exception, raised
 * again with the match it left). `manualMatch` and `unmatch` record who and why; both are kept forever.
 */
import { sql } from 'kysely';
import type { BankMatchBooking } from '../../domain/cash-leg.ts';
import { AppError } from '../../domain/errors.ts';
import {
  DEFAULT_EXCEPTION_RULES,
  type ExceptionRules,
  type ExceptionType,
} from '../../domain/exception-rules.ts';
import {
  bankToday,
  daysBetween,
  type Match,
  type MatchPair,
  type MatchRule,
  type MatchSide,
  type MatchSummary,
  matchItems,
  PAIR_SIDES,
} from '../../domain/matching.ts';
import { bookBankMatch, bookNewBankMatches, reverseBankMatch } from '../cash-leg/service.ts';
import type { ExceptionToRaise } from '../exceptions/raise.ts';
import { recordImportMatching } from '../imports/matching.ts';
import { lastStatementDays } from '../imports/read.ts';
import type { Db } from '../schema.ts';
import { inLedgerTransaction, withLedgerTransaction } from '../transaction.ts';
import { checkProviderBalances } from './balance-drift.ts';
import {
  bankLineException,
  ledgerNotInReport,
  raiseMatchingExceptions,
  reportMismatch,
  reportRowException,
  resolveAgreedMismatches,
  resolveMatchedExceptions,
  settlementException,
} from './exceptions.ts';
import {
  type BankLineItem,
  bankMatchLines,
  type LedgerPaymentItem,
  ledgerPayments,
  type MatchBankAccount,
  type ReportRowItem,
  type SettlementItem,
  unmatchedBankLines,
  unmatchedReportRows,
  unmatchedSettlements,
} from './load.ts';
import { endMatch, insertMatches, type MatchToWrite } from './write.ts';

export interface RunMatchingOptions {
  now?: Date;
  bankAccounts?: readonly MatchBankAccount[];
  /** Days past a settlement's value date before SETTLEMENT_NOT_RECEIVED (default 2). */
  settlementGraceDays?: number;
  /**
   * How long a report row that differs from the ledger (no payment, or another status, amount or fee)
   * waits, from its import, for the ledger to catch up before it raises (default 0: no wait). A waiting
   * row is left unmatched for a later run. A difference of the provider's balance from the ledger's raises
   * only once the checks have differed for as long (src/db/matching/balance-drift.ts).
   */
  ledgerWaitMs?: number;
  exceptionRules?: ExceptionRules;
  /** The merchant account the report rows' exceptions are raised under (the reports name none). */
  reportAccount?: string;
  /** Report rows per page (default 10,000). */
  pageSize?: number;
  /** Told the milliseconds of each step, wall and the process's CPU, summed over pages (the bench prints them). */
  trace?: (step: string, ms: number, cpuMs: number) => void;
  /** The import whose new lines start this run: its result is kept on it, in the run's transaction. */
  importId?: string;
}

/** A new match of a bank line to settlements: what the cash leg books. */
export interface BankMatch {
  matchId: string;
  rule: string;
  bankLineIdentity: string;
  settlementIds: string[];
}

export interface MatchingRun {
  bankMatches: BankMatch[];
  /** New matches by rule name. */
  byRule: Record<string, number>;
  unmatched: { bankLines: number; settlements: number; reportRows: number };
  /** Exceptions raised (or still true) by type, and how many were resolved by a match. */
  exceptions: { raised: Partial<Record<ExceptionType, number>>; resolved: number };
}

/** The run as the commands print it: counts by rule, unmatched counts, exceptions by type, resolved. */
export function matchSummary(run: MatchingRun): MatchSummary {
  return {
    matched: run.byRule,
    unmatched: run.unmatched,
    exceptions: run.exceptions.raised,
    resolved: run.exceptions.resolved,
  };
}

const LOCK = sql`SELECT pg_advisory_xact_lock(hashtext('payrecon.matching'))`;

/** The day each settlement's grace counts to: `bankToday` of the bank account it is paid into. */
async function settlementToday(
  db: Db,
  now: Date,
  bankAccounts: readonly MatchBankAccount[],
): Promise<(s: SettlementItem) => string> {
  const today = now.toISOString().slice(0, 10);
  const last = await lastStatementDays(db);
  return (s) => {
    const bank = bankAccounts.find((b) => b.account === s.merchant && b.currency === s.currency);
    return bankToday(today, bank === undefined ? undefined : last.get(bank.id));
  };
}

/** What both halves of a run add to: matches by rule, exceptions to raise, time by step. */
interface RunTally {
  count(rule: string): void;
  raised: ExceptionToRaise[];
  step(name: string): void;
}

export async function runMatching(
  db: Db,
  rules: readonly MatchRule[],
  options: RunMatchingOptions = {},
): Promise<MatchingRun> {
  const now = options.now ?? new Date();
  const exceptionRules = options.exceptionRules ?? DEFAULT_EXCEPTION_RULES;
  const spent = new Map<string, [number, number]>();
  let mark = performance.now();
  let cpuMark = process.cpuUsage();
  const step = (name: string) => {
    const at = performance.now();
    const cpu = process.cpuUsage(cpuMark);
    const [ms, cpuMs] = spent.get(name) ?? [0, 0];
    spent.set(name, [ms + at - mark, cpuMs + (cpu.user + cpu.system) / 1000]);
    mark = at;
    cpuMark = process.cpuUsage();
  };
  return withLedgerTransaction(db, async (tx) => {
    await LOCK.execute(tx);
    // A page's look-ups, priced without the statistics of tables just imported, pass the cost at which
    // PostgreSQL JIT-compiles a statement: about 0.4 s of compiling a page whose statement runs in 0.1 s.
    await sql`SET LOCAL jit = off`.execute(tx);
    spent.clear();
    const byRule: Record<string, number> = {};
    const tally: RunTally = {
      count: (rule) => {
        byRule[rule] = (byRule[rule] ?? 0) + 1;
      },
      raised: [],
      step,
    };
    // Two halves, each holding its lines only while it runs.
    const bank = await matchBankLines(tx, rules, options, now, tally);
    const reportRows = await matchReportRows(tx, rules, options, now, tally);
    const raisedByType = await raiseMatchingExceptions(tx, tally.raised, now, exceptionRules);
    step('raise exceptions');
    const resolved = (await resolveMatchedExceptions(tx, now)) + (await resolveAgreedMismatches(tx, now));
    step('resolve exceptions');
    const balances = await checkProviderBalances(tx, now, exceptionRules, options.ledgerWaitMs ?? 0);
    step('check provider balances');
    if (options.trace) for (const [name, [ms, cpuMs]] of spent) options.trace(name, ms, cpuMs);
    const run: MatchingRun = {
      bankMatches: bank.bankMatches,
      byRule,
      unmatched: { bankLines: bank.openLines, settlements: bank.openSettlements, reportRows },
      exceptions: {
        raised: { ...raisedByType, ...balances.raised },
        resolved: resolved + balances.resolved,
      },
    };
    if (options.importId !== undefined) await recordImportMatching(tx, options.importId, matchSummary(run));
    return run;
  });
}

/** A match a rule made, as written: its left lines on the pair's left side, its right lines on the right. */
function ruleMatchToWrite(pair: MatchPair, m: Match): MatchToWrite {
  const sides = PAIR_SIDES[pair];
  return {
    pair,
    rule: m.rule,
    difference: m.difference,
    createdBy: 'payrecon',
    note: null,
    members: [
      ...m.left.map((identity) => ({ side: sides.left, identity })),
      ...m.right.map((identity) => ({ side: sides.right, identity })),
    ],
  };
}

/**
 * Bank lines against settlements: the new matches written and booked in the cash leg, the exceptions of
 * the lines and settlements left open added to the tally.
 */
async function matchBankLines(
  tx: Db,
  rules: readonly MatchRule[],
  options: RunMatchingOptions,
  now: Date,
  tally: RunTally,
): Promise<{ bankMatches: BankMatch[]; openLines: number; openSettlements: number }> {
  const bankAccounts = options.bankAccounts ?? [];
  const graceDays = options.settlementGraceDays ?? 2;
  const lines = await unmatchedBankLines(tx, bankAccounts);
  const settlements = await unmatchedSettlements(tx, bankAccounts);
  tally.step('load bank lines and settlements');
  const result = matchItems(rules, 'bank-settlement', {
    left: lines.filter((l) => l.credit && l.endedMatch === null),
    right: settlements.filter((s) => s.amount > 0n && s.endedMatch === null),
  });
  const settlementOf = new Map(settlements.map((s) => [s.identity, s.settlementId]));
  const toWrite = result.matches.map((m) => ruleMatchToWrite('bank-settlement', m));
  tally.step('match bank lines');
  const ids = await insertMatches(tx, toWrite, now);
  tally.step('write matches');
  const bankMatches = result.matches.map((m, i) => {
    tally.count(m.rule);
    return {
      matchId: ids[i]!,
      rule: m.rule,
      bankLineIdentity: m.left[0]!,
      settlementIds: m.right.map((identity) => settlementOf.get(identity)!).sort(),
    };
  });
  // The cash leg of each new match, in the same transaction: a match is never without its entries.
  const lineOf = new Map(lines.map((l) => [l.identity, l]));
  const settlementItemOf = new Map(settlements.map((x) => [x.identity, x]));
  const configured = new Set(bankAccounts.map((b) => b.id));
  await bookNewBankMatches(
    tx,
    result.matches.flatMap(
      (m, i) =>
        bankMatchBooking(
          ids[i]!,
          m.left.map((identity) => lineOf.get(identity)!),
          m.right.map((identity) => settlementItemOf.get(identity)!),
          configured,
        ) ?? [],
    ),
  );
  tally.step('book matches');
  const matched = new Set(result.matches.flatMap((m) => [...m.left, ...m.right]));
  const openLines = lines.filter((l) => !matched.has(l.identity));
  for (const line of openLines) tally.raised.push(bankLineException(line));
  const openSettlements = settlements.filter((s) => !matched.has(s.identity) && s.amount > 0n);
  const todayOf = await settlementToday(tx, now, bankAccounts);
  for (const s of openSettlements) {
    if (s.date !== null && daysBetween(s.date, todayOf(s)) > graceDays)
      tally.raised.push(settlementException(s, graceDays));
  }
  return { bankMatches, openLines: openLines.length, openSettlements: openSettlements.length };
}

/**
 * Report rows against the ledger's payments, a page of whole transactions at a time: the new matches
 * written, the rows' exceptions (and, when the report has rows, the ledger's payments it does not name)
 * added to the tally. Returns the number of rows left unmatched.
 */
async function matchReportRows(
  tx: Db,
  rules: readonly MatchRule[],
  options: RunMatchingOptions,
  now: Date,
  tally: RunTally,
): Promise<number> {
  const reportAccount = options.reportAccount ?? '-';
  const pageSize = options.pageSize ?? 10_000;
  const ledgerWait = options.ledgerWaitMs ?? 0;
  let after: string | null = null;
  let unmatchedRows = 0;
  let anyRows = false;
  for (;;) {
    const page: { rows: ReportRowItem[]; last: string | null } = await unmatchedReportRows(
      tx,
      after,
      pageSize,
    );
    if (page.last === null) break;
    anyRows = true;
    after = page.last;
    tally.step('load report rows');
    if (page.rows.length === 0) continue;
    const payments = await ledgerPayments(
      tx,
      [...new Set(page.rows.map((r) => r.transactionId))],
      [...new Set(page.rows.flatMap((r) => r.keys.externalId ?? []))],
    );
    tally.step('load ledger payments');
    const found = matchItems(rules, 'provider-ledger', { left: page.rows, right: payments });
    tally.step('match report rows');
    const rowOf = new Map(page.rows.map((r) => [r.identity, r]));
    const paymentOf = new Map<string, LedgerPaymentItem>(payments.map((p) => [p.identity, p]));
    // A report is read as the provider saw its payments; the ledger may not have caught up with the
    // moves of the last seconds. Rows that differ wait `ledgerWaitMs` from their import; then they raise.
    const young = (identities: readonly string[]) =>
      ledgerWait > 0 &&
      identities.some((i) => now.getTime() - rowOf.get(i)!.importedAt.getTime() < ledgerWait);
    const kept: typeof found.matches = [];
    const mismatches: ExceptionToRaise[] = [];
    for (const m of found.matches) {
      const mismatch = reportMismatch(
        m.left.map((identity) => rowOf.get(identity)!),
        paymentOf.get(m.right[0]!)!,
      );
      if (mismatch !== null && young(m.left)) continue;
      kept.push(m);
      if (mismatch) mismatches.push(mismatch);
    }
    await insertMatches(
      tx,
      kept.map((m) => ruleMatchToWrite('provider-ledger', m)),
      now,
    );
    tally.step('write matches');
    for (const m of kept) tally.count(m.rule);
    tally.raised.push(...mismatches);
    const byTransaction = new Map<string, ReportRowItem[]>();
    for (const identity of found.unmatchedLeft) {
      const row = rowOf.get(identity)!;
      const key = `${row.type}\u0000${row.transactionId}`;
      const list = byTransaction.get(key);
      if (list) list.push(row);
      else byTransaction.set(key, [row]);
    }
    for (const rows of byTransaction.values()) {
      if (young(rows.map((r) => r.identity))) continue;
      unmatchedRows += rows.length;
      tally.raised.push(reportRowException(reportAccount, rows));
    }
  }
  tally.step('match report rows');
  if (anyRows) tally.raised.push(...(await ledgerNotInReport(tx)));
  tally.step('find payments not in the report');
  return unmatchedRows;
}

export interface ManualMatchInput {
  pair: MatchPair;
  /** Identities of the left side (bank lines, report rows) and of the right side (settlements, payments). */
  left: readonly string[];
  right: readonly string[];
  by: string;
  note: string;
  /** The configured bank accounts (PAYRECON_BANK_ACCOUNTS): a bank match is booked to its merchant's bank. */
  bankAccounts?: readonly MatchBankAccount[];
  now?: Date;
}

const TABLE_OF: Readonly<
  Record<
    Exclude<MatchSide, 'ledger_payment'>,
    'bank_statement_lines' | 'provider_settlement_rows' | 'provider_transaction_rows'
  >
> = {
  bank_line: 'bank_statement_lines',
  settlement: 'provider_settlement_rows',
  provider_row: 'provider_transaction_rows',
};

/**
 * Matches lines by hand: each named line must exist and be in no live match; the match records who and
 * why (a note is required), books its cash leg and resolves the exceptions it covers, all in one
 * transaction: the caller's when `db` is one (src/db/matching/by-hand.ts adds the person's note to the
 * exceptions' trail in it), else its own. Returns the match's id.
 */
export async function manualMatch(db: Db, input: ManualMatchInput): Promise<string> {
  const note = input.note.trim();
  if (note === '') throw new AppError('VALIDATION_FAILED', 'manual match: a note saying why is required');
  if (input.by.trim() === '')
    throw new AppError('VALIDATION_FAILED', 'manual match: who matches is required');
  if (input.left.length === 0 || input.right.length === 0) {
    throw new AppError('VALIDATION_FAILED', 'manual match: name at least one line on each side');
  }
  const now = input.now ?? new Date();
  const sides = PAIR_SIDES[input.pair];
  return inLedgerTransaction(db, async (tx) => {
    await LOCK.execute(tx);
    const amounts: bigint[] = [];
    for (const [side, identities] of [
      [sides.left, input.left],
      [sides.right, input.right],
    ] as const) {
      let total = 0n;
      for (const identity of identities) total += await lineAmount(tx, side, identity);
      amounts.push(total);
      const { rows: taken } = await sql<{ identity: string }>`
        SELECT identity FROM match_members
        WHERE side = ${side} AND live AND identity = ANY(${[...identities]}::text[]) AND side <> 'ledger_payment'`.execute(
        tx,
      );
      if (taken.length > 0) {
        throw new AppError('CONFLICT', `manual match: ${side} ${taken[0]!.identity} is already matched`);
      }
    }
    const [id] = await insertMatches(
      tx,
      [
        {
          pair: input.pair,
          rule: 'manual',
          difference: amounts[0]! - amounts[1]!,
          createdBy: input.by.trim(),
          note,
          members: [
            ...[...new Set(input.left)].map((identity) => ({ side: sides.left, identity })),
            ...[...new Set(input.right)].map((identity) => ({ side: sides.right, identity })),
          ],
        },
      ],
      now,
    );
    if (input.pair === 'bank-settlement') {
      const parts = await bankMatchLines(tx, input.bankAccounts ?? [], input.left, input.right);
      const configured = new Set((input.bankAccounts ?? []).map((b) => b.id));
      const unknown = parts.lines.find((l) => !configured.has(l.bankAccount));
      if (unknown) {
        throw new AppError(
          'VALIDATION_FAILED',
          `manual match: bank account ${unknown.bankAccount} is not configured (PAYRECON_BANK_ACCOUNTS)`,
        );
      }
      const booking = bankMatchBooking(id!, parts.lines, parts.settlements, configured);
      if (booking) await bookBankMatch(tx, booking);
    }
    await resolveMatchedExceptions(tx, now);
    return id!;
  });
}

/**
 * What a bank-to-settlement match books in the cash leg (src/db/cash-leg/service.ts): the credits (one or
 * several lines) against the settlements' nets, the difference to bank fees. Null for lines of a bank
 * account no longer configured: they are matched but not booked, the ledger has no bank account to credit.
 */
function bankMatchBooking(
  matchId: string,
  lines: readonly BankLineItem[],
  settlements: readonly SettlementItem[],
  configured: ReadonlySet<string>,
): BankMatchBooking | null {
  const first = lines[0];
  if (!first || !configured.has(first.bankAccount)) return null;
  return {
    matchId,
    bankAccount: first.bankAccount,
    account: first.merchant,
    currency: first.currency,
    credited: lines.reduce((sum, l) => sum + l.amount, 0n),
    bankLineIdentity: first.identity,
    settlements: settlements.map((x) => ({
      settlementId: x.settlementId,
      currency: x.currency,
      net: x.amount,
    })),
  };
}

/** A line's amount in minor units; refuses a line that does not exist. */
async function lineAmount(db: Db, side: MatchSide, identity: string): Promise<bigint> {
  if (side === 'ledger_payment') {
    const [kind, account, ...rest] = identity.split(':');
    const { rows } = await sql<{ amount: string | null }>`
      SELECT round(amount * 100)::text AS amount FROM mirrors
      WHERE entity_id = ${rest.join(':')} AND entity_kind = ${kind ?? ''} AND merchant_account = ${account ?? ''}`.execute(
      db,
    );
    if (rows.length === 0) throw new AppError('NOT_FOUND', `manual match: no ledger payment ${identity}`);
    return BigInt(rows[0]!.amount ?? '0');
  }
  const column = side === 'bank_line' ? sql`amount` : side === 'settlement' ? sql`net` : sql`gross`;
  const { rows } = await sql<{ amount: string }>`
    SELECT round(${column} * 100)::text AS amount FROM ${sql.table(TABLE_OF[side])}
    WHERE identity = ${identity}`.execute(db);
  if (rows.length === 0)
    throw new AppError('NOT_FOUND', `manual match: no ${side.replace('_', ' ')} ${identity}`);
  return BigInt(rows[0]!.amount);
}

/**
 * Ends a live match (rule or manual) with who and why; its lines are unmatched again, left to persons
 * (the rules do not take them again), and the next matching run raises their exceptions anew. The end and
 * the reversal of its cash leg are one transaction: the caller's when `db` is one, else its own.
 */
export async function unmatch(
  db: Db,
  input: { matchId: string; by: string; note: string; now?: Date },
): Promise<{ id: string; rule: string; members: { side: MatchSide; identity: string }[] }> {
  const note = input.note.trim();
  if (note === '') throw new AppError('VALIDATION_FAILED', 'unmatch: a note saying why is required');
  if (input.by.trim() === '') throw new AppError('VALIDATION_FAILED', 'unmatch: who unmatches is required');
  if (!/^\d{1,18}$/.test(input.matchId))
    throw new AppError('VALIDATION_FAILED', 'unmatch: a match id is a number');
  return inLedgerTransaction(db, async (tx) => {
    await LOCK.execute(tx);
    const ended = await endMatch(tx, input.matchId, input.by.trim(), note, input.now ?? new Date());
    if (!ended) throw new AppError('NOT_FOUND', `unmatch: no live match ${input.matchId}`);
    // Its cash leg is reversed with it (nothing when it was never booked).
    if (ended.members.some((m) => m.side === 'bank_line')) await reverseBankMatch(tx, input.matchId);
    return ended;
  });
}
