/**
 * The sandbox's cash-leg files for the matching and bank-proof tests: a sandbox settles for twelve days of
 * March 2026 with planted bank anomalies (seed 40); its settlement report and each day's statement of each
 * bank account (camt.053 001.02, 001.08 and the bank CSV, by turns) are downloaded and parsed, ready for
 * `recordImport`, with the ground truth and the sandbox's own records of its settlements and bank; the
 * same files as downloaded, ready for `importFile`.
 */
import { createHash } from 'node:crypto';
import { expect } from 'vitest';
import type { ImportFile } from '../../src/db/imports/tables.ts';
import { type MatchingRun, runMatching } from '../../src/db/matching/service.ts';
import type { ImportRequest } from '../../src/domain/imports.ts';
import { DEFAULT_MATCH_RULES } from '../../src/domain/matching.ts';
import { parseBankStatementFile, parseProviderSettlementsFile } from '../../src/imports/files.ts';
import { settlementRowRecord, statementRecord } from '../../src/imports/records.ts';
import type { ImportResult } from '../../src/imports/refusal.ts';
import { ManualClock } from '../../src/sandbox/clock.ts';
import { control, startTestSandbox } from '../sandbox/helpers.ts';
import { type CashTruth, cashTruthOf, PLANTED } from '../sandbox/planted-cash.ts';
import { groundTruth, paidDeposit } from '../sandbox/settlement-helpers.ts';
import type { TestDatabase } from './helpers.ts';

export const MONDAY = Date.UTC(2026, 2, 2, 10, 0, 0);
export const DAYS = 12;
export const GRACE = 2;
export const dayStart = (n: number) => Date.UTC(2026, 2, 2 + n, 0, 0, 1);
export const dateOf = (n: number) => new Date(Date.UTC(2026, 2, 2 + n)).toISOString().slice(0, 10);
export const NOW = new Date(Date.UTC(2026, 2, 2 + DAYS, 12, 0, 0));

export function accepted<T>(result: ImportResult<T>): T {
  if (!result.ok) throw new Error(`refused: ${result.refusal.message}`);
  return result.value;
}

async function download(url: string): Promise<Uint8Array> {
  const res = await fetch(url);
  expect(res.status, url).toBe(200);
  return new Uint8Array(await res.arrayBuffer());
}

export const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

/** A seeded shuffle (a linear congruential generator), so a failure can be replayed. */
export function shuffled<T>(xs: readonly T[], seed: number): T[] {
  const out = [...xs];
  let s = seed;
  for (let i = out.length - 1; i > 0; i--) {
    s = (s * 1_103_515_245 + 12_345) % 2_147_483_648;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** A file as downloaded, as the page, the API and the command bring it to `importFile`. */
export type Upload = Pick<ImportRequest, 'kind' | 'fileName' | 'bytes' | 'account'>;

export interface Setup {
  files: ImportFile[];
  /** The same files, in the same order, as downloaded. */
  uploads: Upload[];
  bankAccounts: { id: string; account: string; currency: string }[];
  truth: Awaited<ReturnType<typeof groundTruth>>;
  /** The sandbox's settlements, bank entries and planted anomalies (test/sandbox/planted-cash.ts). */
  cash: CashTruth;
}

export async function sandboxFiles(): Promise<Setup> {
  const s = await startTestSandbox({ clock: new ManualClock(MONDAY), seed: 40, bank: PLANTED });
  try {
    for (let n = 0; n <= DAYS; n++) {
      await paidDeposit(s.url, Number(((15_000 + n * 1_337) / 100).toFixed(2)));
      await paidDeposit(s.url, 80.05);
      await s.clock.set(dayStart(n + 1) + 3600_000);
    }
    const truth = await groundTruth(s.url);
    const base = `${s.url}/_sandbox`;
    const files: ImportFile[] = [];
    const uploads: Upload[] = [];
    const common = (name: string, bytes: Uint8Array) => ({
      fileName: name,
      sha256: sha256(bytes),
      profile: null,
      importedBy: 'test',
    });
    const report = await download(`${base}/reports/settlements?account=sandbox&format=csv`);
    files.push({
      ...common('settlements.csv', report),
      kind: 'provider-settlements',
      rows: accepted(await parseProviderSettlementsFile('settlements.csv', report)).map(settlementRowRecord),
    });
    uploads.push({ kind: 'provider-settlements', fileName: 'settlements.csv', bytes: report });
    const bankAccounts = (
      (await control(s.url, '/bank-accounts')).json as { id: string; account: string; currency: string }[]
    ).filter((b) => b.account === 'sandbox');
    const formats = ['camt.053.001.02', 'camt.053.001.08', 'csv'];
    for (let n = 0; n < DAYS; n++) {
      for (const bank of bankAccounts) {
        const format = formats[n % 3]!;
        const name = `${dateOf(n)}-${bank.currency}.${format}`;
        const bytes = await download(
          `${base}/bank-statements?account=sandbox&date=${dateOf(n)}&currency=${bank.currency}&format=${format}`,
        );
        const statements = accepted(
          await parseBankStatementFile(name, bytes, format === 'csv' ? { account: bank.id } : {}),
        );
        if (statements.length === 0) continue;
        files.push({
          ...common(name, bytes),
          kind: 'bank-statement',
          statements: statements.map(statementRecord),
        });
        uploads.push({
          kind: 'bank-statement',
          fileName: name,
          bytes,
          ...(format === 'csv' ? { account: bank.id } : {}),
        });
      }
    }
    return { files, uploads, bankAccounts, truth, cash: cashTruthOf(s.control.deps.settlements) };
  } finally {
    await s.close();
  }
}

export const run = (t: TestDatabase, setup: Setup): Promise<MatchingRun> =>
  runMatching(t.db, DEFAULT_MATCH_RULES, {
    now: NOW,
    bankAccounts: setup.bankAccounts,
    settlementGraceDays: GRACE,
  });
