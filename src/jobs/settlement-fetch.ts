/**
 * The settlement fetch: every few minutes (PAYRECON_CRON_SETTLEMENT_FETCH) it downloads, from a sandbox's
 * control API (`/_sandbox/`), each configured merchant account's transactions and settlement reports
 * for yesterday and today in the account's time zone (the sandbox's clock), and the bank statements of
 * the account's bank accounts for the two last closed days, and imports each file through the one
 * import (src/import-service.ts) as the user `job:settlement-fetch`. Every line is imported once under
 * its identity, so a run that finds nothing new adds 0 lines. A refused file is logged and the others
 * still go in; a download that fails fails the run after the others.
 */

import type { ImportFileFn, ImportKind } from '../domain/imports.ts';
import { addDays, localDate } from '../domain/zoned-time.ts';
import { ImportRefusal } from '../imports/refusal.ts';
import type { Logger } from '../logger.ts';

export const SETTLEMENT_FETCH_USER = 'job:settlement-fetch';

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
  logger?: Logger;
}

export interface SettlementFetchResult {
  files: number;
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
  const result: SettlementFetchResult = { files: 0, lines: 0, newLines: 0, refused: [] };
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

  for (const account of accounts) {
    const today = localDate(new Date(now), account.time_zone);
    const yesterday = addDays(today, -1);
    const q = (more: Record<string, string>) =>
      new URLSearchParams({ account: account.name, ...more }).toString();
    const period = { from: yesterday, to: today, format: 'csv' };
    await importOne(
      'provider-transactions',
      `${base}/reports/transactions?${q(period)}`,
      `transactions-${account.name}-${yesterday}-${today}.csv`,
    );
    await importOne(
      'provider-settlements',
      `${base}/reports/settlements?${q(period)}`,
      `settlements-${account.name}-${yesterday}-${today}.csv`,
    );
    const opened = bankAccounts
      .filter((b) => b.account === account.name)
      .map((b) => b.opened)
      .sort()[0];
    if (opened === undefined) continue;
    // The two last closed days (the one before catches up a missed run); the sandbox's statement of a
    // day holds each of the account's bank accounts.
    for (const date of [addDays(today, -2), yesterday]) {
      if (date < opened) continue;
      await importOne(
        'bank-statement',
        `${base}/bank-statements?${q({ date, format: 'camt.053.001.08' })}`,
        `statement-${account.name}-${date}.xml`,
      );
    }
  }
  if (failures.length > 0) throw new Error(`settlement fetch: ${failures.join('; ')}`);
  return result;
}
