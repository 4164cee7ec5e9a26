/**
 * The close's bank proof over the sandbox's files: a sandbox settles for twelve days of March 2026 with
 * planted bank anomalies; its settlement report and daily statements (camt.053 001.02, 001.08, bank CSV)
 * are imported and matched. March's bank proof per bank account names the last statement of the month
 * with its closing balance, and its unmatched bank lines are exactly those matching raised
 * BANK_LINE_UNMATCHED for; every SETTLEMENT_NOT_RECEIVED settlement is among its unmatched settlements,
 * each item linked to its exception.
 */
import { createHash } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { closeDocument } from '../../src/db/closes/document.ts';
import { recordImport } from '../../src/db/imports/service.ts';
import type { ImportFile } from '../../src/db/imports/tables.ts';
import { type MatchingRun, runMatching } from '../../src/db/matching/service.ts';
import { DEFAULT_MATCH_RULES } from '../../src/domain/matching.ts';
import { parseBankStatementFile, parseProviderSettlementsFile } from '../../src/imports/files.ts';
import { settlementRowRecord, statementRecord } from '../../src/imports/records.ts';
import type { ImportResult } from '../../src/imports/refusal.ts';
import { closeScope } from '../../src/reports/close.ts';
import { ManualClock } from '../../src/sandbox/clock.ts';
import { control, startTestSandbox } from '../sandbox/helpers.ts';
import { paidDeposit } from '../sandbox/settlement-helpers.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

const MONDAY = Date.UTC(2026, 2, 2, 10, 0, 0);
const DAYS = 12;
const GRACE = 2;
const dayStart = (n: number) => Date.UTC(2026, 2, 2 + n, 0, 0, 1);
const dateOf = (n: number) => new Date(Date.UTC(2026, 2, 2 + n)).toISOString().slice(0, 10);
const NOW = new Date(Date.UTC(2026, 2, 2 + DAYS, 12, 0, 0));

const PLANTED = {
  lateCreditRate: 0.2,
  batchedCreditRate: 0.2,
  bankFeeRate: 0.2,
  missingCreditRate: 0.15,
  returnedCreditRate: 0.15,
  unrelatedLineRate: 0.6,
};

const databases: TestDatabase[] = [];
afterAll(async () => {
  for (const t of databases.splice(0)) await t.drop();
});

function accepted<T>(result: ImportResult<T>): T {
  if (!result.ok) throw new Error(`refused: ${result.refusal.message}`);
  return result.value;
}

async function download(url: string): Promise<Uint8Array> {
  const res = await fetch(url);
  expect(res.status, url).toBe(200);
  return new Uint8Array(await res.arrayBuffer());
}

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

interface Setup {
  files: ImportFile[];
  bankAccounts: { id: string; account: string; currency: string }[];
}

async function sandboxFiles(): Promise<Setup> {
  const s = await startTestSandbox({ clock: new ManualClock(MONDAY), seed: 40, bank: PLANTED });
  try {
    for (let n = 0; n <= DAYS; n++) {
      await paidDeposit(s.url, Number(((15_000 + n * 1_337) / 100).toFixed(2)));
      await paidDeposit(s.url, 80.05);
      await s.clock.set(dayStart(n + 1) + 3600_000);
    }
    const base = `${s.url}/_sandbox`;
    const files: ImportFile[] = [];
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
      }
    }
    return { files, bankAccounts };
  } finally {
    await s.close();
  }
}

const run = (t: TestDatabase, setup: Setup): Promise<MatchingRun> =>
  runMatching(t.db, DEFAULT_MATCH_RULES, {
    now: NOW,
    bankAccounts: setup.bankAccounts,
    settlementGraceDays: GRACE,
  });

describe('the close bank proof over the sandbox files', () => {
  it("lists what matching left unmatched, with the month's last statement", async () => {
    const setup = await sandboxFiles();
    const t = await createTestDatabase();
    databases.push(t);
    for (const file of setup.files) await recordImport(t.db, file);
    await run(t, setup);
    const exceptions = await t.db
      .selectFrom('exceptions')
      .select(['id', 'type', 'entity_id'])
      .where('state', '<>', 'resolved')
      .execute();
    const raised = (type: string) =>
      new Map(exceptions.filter((x) => x.type === type).map((x) => [x.entity_id, String(x.id)]));
    const unmatchedLines = raised('BANK_LINE_UNMATCHED');
    const notReceived = raised('SETTLEMENT_NOT_RECEIVED');
    expect(unmatchedLines.size).toBeGreaterThan(0);
    expect(notReceived.size).toBeGreaterThan(0);
    const lines: string[] = [];
    const settlements: string[] = [];
    for (const currency of [...new Set(setup.bankAccounts.map((b) => b.currency))]) {
      const doc = await closeDocument(
        t.db,
        closeScope('sandbox', currency, '2026-03', 'UTC', '00:00', {
          accounts: setup.bankAccounts,
          noteAbove: 0n,
        }),
      );
      for (const p of doc.bankProof ?? []) {
        // The last statement of the month: the last day imported, its closing balance as in the file.
        expect(p.statement?.date, p.bankAccount).toBe(dateOf(DAYS - 1));
        const last = setup.files
          .filter((f) => f.kind === 'bank-statement')
          .flatMap((f) => (f.kind === 'bank-statement' ? f.statements : []))
          .filter((s) => s.bankAccount === p.bankAccount && s.closingDate === dateOf(DAYS - 1));
        expect(last.map((s) => s.closing)).toContain(p.statementClosing);
        for (const u of p.unmatched) {
          expect(u.noted).toBe(false);
          if (u.kind === 'bank_line') {
            lines.push(u.id);
            expect(u.exceptionId).toBe(unmatchedLines.get(u.id));
          } else {
            settlements.push(u.id);
            expect(u.exceptionId).toBe(notReceived.get(u.id) ?? null);
          }
        }
      }
    }
    expect(lines.sort()).toEqual([...unmatchedLines.keys()].sort());
    for (const id of notReceived.keys()) expect(settlements).toContain(id);
  });
});
