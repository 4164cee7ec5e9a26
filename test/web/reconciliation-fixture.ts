/**
 * A reconciled sandbox for the Reconciliation tests: a sandbox settles for eight days with planted bank
 * anomalies (unrelated lines, a credit that never arrives, ...); its settlement report and each day's
 * camt.053 are imported into a fresh database, matching runs as of the ninth day, and each bank match is
 * booked in the ledger's cash leg (`bookBankMatch`), so `bank:<id>` holds the matched credits.
 */
import { createHash } from 'node:crypto';
import { bookBankMatch } from '../../src/db/cash-leg/service.ts';
import { recordImport } from '../../src/db/imports/service.ts';
import { runMatching } from '../../src/db/matching/service.ts';
import type { ReconciliationBankAccount } from '../../src/db/read-models/reconciliation.ts';
import { DEFAULT_MATCH_RULES } from '../../src/domain/matching.ts';
import { parseBankStatementFile, parseProviderSettlementsFile } from '../../src/imports/files.ts';
import { settlementRowRecord, statementRecord } from '../../src/imports/records.ts';
import { ManualClock } from '../../src/sandbox/clock.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { control, startTestSandbox } from '../sandbox/helpers.ts';
import { cents, groundTruth, paidDeposit } from '../sandbox/settlement-helpers.ts';

const MONDAY = Date.UTC(2026, 2, 2, 10, 0, 0);
export const DAYS = 8;
const dayStart = (n: number) => Date.UTC(2026, 2, 2 + n, 0, 0, 1);
export const dateOf = (n: number) => new Date(Date.UTC(2026, 2, 2 + n)).toISOString().slice(0, 10);
/** The matching run's (and the page's) now: noon of the day after the last statement. */
export const NOW = new Date(Date.UTC(2026, 2, 2 + DAYS, 12, 0, 0));

export interface Reconciled {
  t: TestDatabase;
  banks: ReconciliationBankAccount[];
  truth: Awaited<ReturnType<typeof groundTruth>>;
}

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

async function download(url: string): Promise<Uint8Array> {
  const res = await fetch(url);
  if (res.status !== 200) throw new Error(`${url}: ${res.status}`);
  return new Uint8Array(await res.arrayBuffer());
}

function accepted<T>(result: { ok: true; value: T } | { ok: false; refusal: { message: string } }): T {
  if (!result.ok) throw new Error(`refused: ${result.refusal.message}`);
  return result.value;
}

export async function reconciledSandbox(seed = 40): Promise<Reconciled> {
  const s = await startTestSandbox({
    clock: new ManualClock(MONDAY),
    seed,
    bank: {
      lateCreditRate: 0.2,
      batchedCreditRate: 0.2,
      bankFeeRate: 0.2,
      missingCreditRate: 0.2,
      returnedCreditRate: 0.1,
      unrelatedLineRate: 0.6,
    },
  });
  const t = await createTestDatabase();
  try {
    for (let n = 0; n <= DAYS; n++) {
      await paidDeposit(s.url, Number(((15_000 + n * 1_337) / 100).toFixed(2)));
      await s.clock.set(dayStart(n + 1) + 3600_000);
    }
    const truth = await groundTruth(s.url);
    const base = `${s.url}/_sandbox`;
    const report = await download(`${base}/reports/settlements?account=sandbox&format=csv`);
    await recordImport(t.db, {
      kind: 'provider-settlements',
      fileName: 'settlements.csv',
      sha256: sha256(report),
      profile: null,
      importedBy: 'test',
      rows: accepted(await parseProviderSettlementsFile('settlements.csv', report)).map(settlementRowRecord),
    });
    const listed = (await control(s.url, '/bank-accounts')).json as {
      id: string;
      account: string;
      currency: string;
    }[];
    const banks = listed
      .filter((b) => b.account === 'sandbox')
      .map((b) => ({ id: b.id, account: b.account, currency: b.currency, name: `Settlement ${b.currency}` }));
    for (let n = 0; n < DAYS; n++) {
      for (const bank of banks) {
        const name = `${dateOf(n)}-${bank.currency}.xml`;
        const bytes = await download(
          `${base}/bank-statements?account=sandbox&date=${dateOf(n)}&currency=${bank.currency}&format=camt.053.001.08`,
        );
        const statements = accepted(await parseBankStatementFile(name, bytes));
        if (statements.length === 0) continue;
        await recordImport(t.db, {
          kind: 'bank-statement',
          fileName: name,
          sha256: sha256(bytes),
          profile: null,
          importedBy: 'test',
          statements: statements.map(statementRecord),
        });
      }
    }
    const run = await runMatching(t.db, DEFAULT_MATCH_RULES, {
      now: NOW,
      bankAccounts: banks,
      settlementGraceDays: 2,
    });
    for (const m of run.bankMatches) {
      const line = await t.db
        .selectFrom('bank_statement_lines')
        .select(['bank_account', 'currency', 'amount'])
        .where('identity', '=', m.bankLineIdentity)
        .executeTakeFirstOrThrow();
      const bank = banks.find((b) => b.id === line.bank_account)!;
      const settlements = await t.db
        .selectFrom('provider_settlement_rows')
        .select(['settlement_id', 'settlement_currency', 'net'])
        .where('settlement_id', 'in', m.settlementIds)
        .execute();
      await bookBankMatch(t.db, {
        matchId: m.matchId,
        bankAccount: bank.id,
        account: bank.account,
        currency: bank.currency,
        credited: cents(String(line.amount)),
        bankLineIdentity: m.bankLineIdentity,
        settlements: settlements.map((x) => ({
          settlementId: x.settlement_id,
          currency: x.settlement_currency,
          net: cents(String(x.net)),
        })),
      });
    }
    return { t, banks, truth };
  } catch (err) {
    await t.drop();
    throw err;
  } finally {
    await s.close();
  }
}
