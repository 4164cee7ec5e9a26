/**
 * The settlement fetch: every few minutes (PAYRECON_CRON_SETTLEMENT_FETCH) it downloads, from a sandbox's
 * control API (`/_sandbox/`), each configured merchant account's bank statements of the closed days not
 * imported yet, and its transactions and settlement reports from the first of those days (yesterday when
 * none is missing) to today in the account's time zone (the sandbox's clock), and imports each file
 * through the one import (src/import-service.ts) as the user `job:settlement-fetch`. The days to fetch
 * follow from what is imported (the last statement day of each bank account), so a run missed, a stop
 * of any length or a sandbox clock faster than the schedule leaves no day out: the next run catches up,
 * at most `MAX_DAYS_PER_RUN` days at a time. Before a first statement the reports are fetched from the
 * beginning. A download identical to a file imported before (same SHA-256: a settlement report with no
 * new settlement, the same statement) is not imported again, so the Imports page lists what changed; every
 * line is imported once under its identity anyway. A refused file is logged and the others still go in; a
 * download that fails fails the run after the others.
 */

import { createHash } from 'node:crypto';
import type { ImportFileFn, ImportKind } from '../domain/imports.ts';
import { addDays, localDate } from '../domain/zoned-time.ts';
import { ImportRefusal } from '../imports/refusal.ts';
import type { Logger } from '../logger.ts';

export const SETTLEMENT_FETCH_USER = 'job:settlement-fetch';
/** The most days of statements one run fetches; a longer gap is caught up over the next runs. */
export const MAX_DAYS_PER_RUN = 31;

/** A bank account as the sandbox lists it (`GET /_sandbox/bank-accounts`). */
export interface SandboxBankAccount {
  id: string;
  account: string;
  currency: string;
  /** The local date it was opened. */
  opened: string;
}

export interface SettlementFetchDeps {
  /** The control API's base (`http://host:port/_sandbox`); null: nothing to fetch. */
  controlUrl: () => string | null;
  /** The merchant accounts to fetch; empty: every account the sandbox lists. */
  accounts: () => Promise<readonly string[]> | readonly string[];
  importFile: ImportFileFn;
  /** Told the sandbox's bank accounts before the statements are imported (PAYRECON_BANK_ACCOUNTS derived). */
  onBankAccounts?: (accounts: readonly SandboxBankAccount[]) => void;
  /** The last day each bank account has a statement of (src/db/imports/read.ts); absent: none. */
  lastStatementDays?: () => Promise<ReadonlyMap<string, string>>;
  /** Whether a file with this SHA-256 was imported before (src/db/imports/read.ts); absent: never. */
  importedBefore?: (sha256: string) => Promise<boolean>;
  /** Runs matching once the run's files are in (the waiting report rows get their turn; see runMatching). */
  match?: () => Promise<unknown>;
  logger?: Logger;
}

export interface SettlementFetchResult {
  /** Files imported. */
  files: number;
  /** Files downloaded that were imported before, byte for byte (not imported again). */
  unchanged: number;
  lines: number;
  newLines: number;
  /** One line per refused file. */
  refused: string[];
}

async function getJson<T>(url: string): Promise<T> {
  const res = await fetch(url, { signal: AbortSignal.timeout(30_000) });
  if (!res.ok) throw new Error(`GET ${url}: HTTP ${res.status} ${(await res.text()).slice(0, 200)}`);
  return (await res.json()) as T;
}

export async function fetchSettlementFiles(deps: SettlementFetchDeps): Promise<SettlementFetchResult> {
  const result: SettlementFetchResult = { files: 0, unchanged: 0, lines: 0, newLines: 0, refused: [] };
  const base = deps.controlUrl();
  if (base === null) return result;
  const log = deps.logger;
  const [{ now }, listed, bankAccounts] = await Promise.all([
    getJson<{ now: string }>(`${base}/clock`),
    getJson<{ name: string; time_zone: string }[]>(`${base}/accounts`),
    getJson<SandboxBankAccount[]>(`${base}/bank-accounts`),
  ]);
  deps.onBankAccounts?.(bankAccounts);
  const wanted = new Set(await deps.accounts());
  const accounts = listed.filter((a) => wanted.size === 0 || wanted.has(a.name));
  const failures: string[] = [];

  const importOne = async (kind: ImportKind, url: string, fileName: string): Promise<void> => {
    let bytes: Uint8Array;
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(60_000) });
      // A day the bank has not closed yet has no statement: nothing to import yet.
      if (res.status === 409) return;
      if (!res.ok) throw new Error(`HTTP ${res.status} ${(await res.text()).slice(0, 200)}`);
      bytes = new Uint8Array(await res.arrayBuffer());
    } catch (err) {
      failures.push(`GET ${url}: ${(err as Error).message}`);
      return;
    }
    if (await deps.importedBefore?.(createHash('sha256').update(bytes).digest('hex'))) {
      result.unchanged += 1;
      return;
    }
    try {
      const outcome = await deps.importFile({ kind, fileName, bytes, user: SETTLEMENT_FETCH_USER });
      const s = outcome.summary;
      const counts =
        'statements' in s
          ? s.statements.reduce((a, t) => ({ lines: a.lines + t.booked, fresh: a.fresh + (t.new ?? 0) }), {
              lines: 0,
              fresh: 0,
            })
          : { lines: s.rows, fresh: s.new ?? 0 };
      result.files += 1;
      result.lines += counts.lines;
      result.newLines += counts.fresh;
      if (counts.fresh > 0) {
        log?.info(
          { importId: outcome.id, kind, fileName, new: counts.fresh },
          'settlement fetch imported a file',
        );
      }
    } catch (err) {
      if (!(err instanceof ImportRefusal)) throw err;
      result.refused.push(err.message);
      log?.warn({ kind, fileName, refusal: err.message }, 'settlement fetch: file refused');
    }
  };

  const lastDays = (await deps.lastStatementDays?.()) ?? new Map<string, string>();
  for (const account of accounts) {
    const today = localDate(new Date(now), account.time_zone);
    const yesterday = addDays(today, -1);
    // The first closed day a bank account of the account has no statement of (its opening day when none).
    const banks = bankAccounts.filter((b) => b.account === account.name);
    const firstMissing = banks
      .map((b) => {
        const last = lastDays.get(b.id);
        return last === undefined || last < b.opened ? b.opened : addDays(last, 1);
      })
      .sort()[0];
    const days: string[] = [];
    for (let d = firstMissing ?? today; d <= yesterday && days.length < MAX_DAYS_PER_RUN; d = addDays(d, 1))
      days.push(d);
    const q = (more: Record<string, string>) =>
      new URLSearchParams({ account: account.name, ...more }).toString();
    // Reports from the first day whose statement is still to come (or yesterday), so nothing between two
    // runs is left out; before the first statement, from the beginning (without a bank account, yesterday).
    const imported = banks.some((b) => lastDays.has(b.id));
    const from =
      banks.length === 0
        ? yesterday
        : !imported
          ? null
          : days[0] !== undefined && days[0] < yesterday
            ? days[0]
            : yesterday;
    const period = { ...(from === null ? {} : { from }), to: today, format: 'csv' };
    const label = `${from ?? 'start'}-${today}`;
    await importOne(
      'provider-transactions',
      `${base}/reports/transactions?${q(period)}`,
      `transactions-${account.name}-${label}.csv`,
    );
    await importOne(
      'provider-settlements',
      `${base}/reports/settlements?${q(period)}`,
      `settlements-${account.name}-${label}.csv`,
    );
    // The sandbox's statement of a day holds each of the account's bank accounts.
    for (const date of days) {
      await importOne(
        'bank-statement',
        `${base}/bank-statements?${q({ date, format: 'camt.053.001.08' })}`,
        `statement-${account.name}-${date}.xml`,
      );
    }
  }
  // New lines were matched as they were imported; without any, matching still runs for the rows it let wait.
  if (deps.match && result.newLines === 0) await deps.match();
  if (failures.length > 0) throw new Error(`settlement fetch: ${failures.join('; ')}`);
  return result;
}
