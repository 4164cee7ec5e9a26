/**
 * The settlement fetch against a real sandbox over HTTP: after days of money the sandbox has settled
 * and its bank has booked the credits; the job downloads each account's transactions and settlement
 * reports and the bank statements of the closed days not imported yet from the control API and imports them as
 * `job:settlement-fetch`. Without the bank accounts known the statements are refused (one line each)
 * and the reports still go in; with the sandbox's bank accounts (as `payrecon up` derives them) the
 * statements go in; a second run adds 0 lines. The job is in the catalog on its cron.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JOBS_OFF, loadConfig } from '../../src/config.ts';
import { lastStatementDays } from '../../src/db/imports/read.ts';
import type { ImportFileFn } from '../../src/domain/imports.ts';
import { importFile } from '../../src/import-service.ts';
import type { KnownBankAccount } from '../../src/imports/bank-accounts.ts';
import { Lifecycle } from '../../src/infrastructure.ts';
import { buildJobCatalog } from '../../src/jobs/catalog.ts';
import { fetchSettlementFiles, type SandboxBankAccount } from '../../src/jobs/settlement-fetch.ts';
import { logger } from '../../src/logger.ts';
import { createMetrics } from '../../src/metrics.ts';
import type { ReportRunner } from '../../src/reports/runs.ts';
import { ManualClock } from '../../src/sandbox/clock.ts';
import { upSandboxStart } from '../../src/sandbox-part.ts';
import { createServices, sandboxBankAccounts } from '../../src/services.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { startTestSandbox } from '../sandbox/helpers.ts';
import { paidDeposit } from '../sandbox/settlement-helpers.ts';

const MONDAY = Date.UTC(2026, 2, 2, 10, 0, 0);
const dayStart = (n: number) => Date.UTC(2026, 2, 2 + n, 0, 0, 1);

let t: TestDatabase;
let sandbox: Awaited<ReturnType<typeof startTestSandbox>>;
let known: KnownBankAccount[] = [];
const run: ImportFileFn = (request) => importFile({ db: t.db, bankAccounts: known }, request);

async function count(
  table: 'imports' | 'bank_statement_lines' | 'provider_transaction_rows' | 'provider_settlement_rows',
): Promise<number> {
  const row = await t.db
    .selectFrom(table)
    .select((eb) => eb.fn.countAll().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

beforeAll(async () => {
  t = await createTestDatabase();
  sandbox = await startTestSandbox({ clock: new ManualClock(MONDAY), seed: 11 });
  for (let n = 0; n < 3; n++) {
    await paidDeposit(sandbox.url, 200 + n);
    await paidDeposit(sandbox.url, 31.9);
    await sandbox.clock.set(dayStart(n + 1) + 3 * 3600_000);
  }
}, 60_000);

afterAll(async () => {
  await sandbox?.close();
  await t?.drop();
});

describe('the settlement fetch', () => {
  const controlUrl = () => `${sandbox.url}/_sandbox`;

  it('imports the reports, and refuses statements of bank accounts it does not know', async () => {
    const result = await fetchSettlementFiles({ controlUrl, accounts: () => [], importFile: run });
    expect(result.files).toBe(2);
    expect(result.newLines).toBeGreaterThan(0);
    expect(result.refused.length).toBeGreaterThan(0);
    for (const line of result.refused) {
      expect(line).toMatch(
        /^statement-sandbox-2026-03-0\d\.xml: statement 1.* is not one of PAYRECON_BANK_ACCOUNTS$/,
      );
    }
    expect(await count('provider_transaction_rows')).toBeGreaterThan(0);
    expect(await count('provider_settlement_rows')).toBeGreaterThan(0);
    expect(await count('bank_statement_lines')).toBe(0);
  });

  it("with the sandbox's bank accounts imports the statements; a second run adds 0 lines", async () => {
    let listed: readonly SandboxBankAccount[] = [];
    const onBankAccounts = (accounts: readonly SandboxBankAccount[]) => {
      listed = accounts;
      known = sandboxBankAccounts(accounts);
    };
    const first = await fetchSettlementFiles({
      controlUrl,
      accounts: () => ['sandbox'],
      importFile: run,
      onBankAccounts,
    });
    expect(listed.length).toBeGreaterThan(0);
    expect(first.refused).toEqual([]);
    // Two reports and the statements of the two last closed days.
    expect(first.files).toBe(4);
    expect(first.newLines).toBeGreaterThan(0);
    const bankLines = await count('bank_statement_lines');
    expect(bankLines).toBeGreaterThan(0);
    const before = {
      bank: bankLines,
      transactions: await count('provider_transaction_rows'),
      settlements: await count('provider_settlement_rows'),
    };

    const second = await fetchSettlementFiles({
      controlUrl,
      accounts: () => ['sandbox'],
      importFile: run,
      onBankAccounts,
    });
    expect(second.files).toBe(4);
    expect(second.lines).toBeGreaterThan(0);
    expect(second.newLines).toBe(0);
    expect({
      bank: await count('bank_statement_lines'),
      transactions: await count('provider_transaction_rows'),
      settlements: await count('provider_settlement_rows'),
    }).toEqual(before);
    const who = await t.db.selectFrom('imports').select('imported_by').distinct().execute();
    expect(who.map((w) => w.imported_by)).toEqual(['job:settlement-fetch']);
  });

  it('catches up every closed day after the last statement imported, however many passed', async () => {
    // Five sandbox days pass between two runs (a stop, or a sandbox clock faster than the schedule).
    const days = async () =>
      (
        await t.db
          .selectFrom('import_statements')
          .select(sql<string>`closing_date::text`.as('day'))
          .distinct()
          .orderBy('day')
          .execute()
      ).map((r) => r.day);
    const before = await days();
    for (let n = 3; n < 8; n++) {
      await paidDeposit(sandbox.url, 40 + n);
      await sandbox.clock.set(dayStart(n + 1) + 3 * 3600_000);
    }
    const files: string[] = [];
    const result = await fetchSettlementFiles({
      controlUrl,
      accounts: () => ['sandbox'],
      importFile: (request) => {
        files.push(request.fileName);
        return run(request);
      },
      lastStatementDays: () => lastStatementDays(t.db),
    });
    expect(result.refused).toEqual([]);
    // The statements of the days after the last one in, through yesterday (2026-03-09), each once; the
    // reports from the first of them.
    const last = before[before.length - 1]!;
    expect(last).toBe('2026-03-04');
    expect(files).toEqual([
      'transactions-sandbox-2026-03-05-2026-03-10.csv',
      'settlements-sandbox-2026-03-05-2026-03-10.csv',
      ...['05', '06', '07', '08', '09'].map((d) => `statement-sandbox-2026-03-${d}.xml`),
    ]);
    expect(await days()).toEqual([
      ...before,
      '2026-03-05',
      '2026-03-06',
      '2026-03-07',
      '2026-03-08',
      '2026-03-09',
    ]);
    // Each settlement of those days is in, once.
    const settlements = await t.db.selectFrom('provider_settlement_rows').select('settlement_id').execute();
    const listed = (await (await fetch(`${sandbox.url}/_sandbox/settlements?account=sandbox`)).json()) as {
      settlement_id: string;
    }[];
    expect(settlements.map((r) => r.settlement_id).sort()).toEqual(listed.map((r) => r.settlement_id).sort());
  });

  it('runs as `payrecon up` schedules it: the embedded sandbox, its bank accounts derived', async () => {
    const fresh = await createTestDatabase();
    const dataDir = mkdtempSync(join(tmpdir(), 'payrecon-fetch-up-'));
    try {
      const services = createServices({
        config: loadConfig({ ...JOBS_OFF, LOG_LEVEL: 'silent', PAYRECON_DATA_DIR: dataDir }),
        logger,
        dataDir,
        db: fresh.db,
        lifecycle: new Lifecycle(logger),
        metrics: createMetrics(),
      });
      expect(services.imports.bankAccounts()).toEqual([]);
      await services.imports.useEmbeddedSandbox(`${sandbox.url}/_sandbox/`);
      const listed = (await (
        await fetch(`${sandbox.url}/_sandbox/bank-accounts`)
      ).json()) as SandboxBankAccount[];
      expect(services.imports.bankAccounts()).toEqual(sandboxBankAccounts(listed));
      const scheduler = services.jobScheduler();
      // biome-ignore lint/complexity/useLiteralKeys: the scheduler's jobs are private; one tick of this one runs
      const job = scheduler['jobs'].find((j) => j.name === 'settlement-fetch');
      expect(job).toBeDefined();
      const first = await scheduler.tick(job!, new Date());
      expect(first.ran).toHaveLength(1);
      expect(first.failed).toEqual([]);
      const rows = await fresh.db
        .selectFrom('imports')
        .select(['kind', 'imported_by', 'new_lines'])
        .orderBy('id')
        .execute();
      // A fresh database: the reports from the beginning, a statement of every day from the bank accounts'
      // opening (2026-03-03) through yesterday (2026-03-09).
      expect(rows.map((r) => r.kind)).toEqual([
        'provider-transactions',
        'provider-settlements',
        ...Array.from({ length: 7 }, () => 'bank-statement'),
      ]);
      expect(rows.every((r) => r.imported_by === 'job:settlement-fetch')).toBe(true);
      expect(rows.reduce((n, r) => n + r.new_lines, 0)).toBeGreaterThan(0);
      // The next run fetches the reports from the day after the statements now in (other files); the
      // one after downloads the same files again: nothing changed, nothing is recorded again.
      expect((await scheduler.tick(job!, new Date(Date.now() + 60_000))).ran).toHaveLength(1);
      const imports = await fresh.db.selectFrom('imports').select('id').execute();
      expect((await scheduler.tick(job!, new Date(Date.now() + 120_000))).ran).toHaveLength(1);
      expect(await fresh.db.selectFrom('imports').select('id').execute()).toEqual(imports);
    } finally {
      await fresh.drop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('is in the job catalog, every two minutes unless configured', () => {
    const deps = {
      timeZone: 'UTC',
      settlementCutoff: '00:00',
      reports: {} as ReportRunner,
      accounts: async () => [],
      fetchSettlementFiles: async () => undefined,
    };
    expect(buildJobCatalog(deps).find((j) => j.name === 'settlement-fetch')?.cron).toBe('*/2 * * * *');
    const configured = buildJobCatalog({ ...deps, cron: { 'settlement-fetch': '*/5 * * * *' } });
    expect(configured.find((j) => j.name === 'settlement-fetch')?.cron).toBe('*/5 * * * *');
    const { fetchSettlementFiles: _none, ...without } = deps;
    expect(buildJobCatalog(without).some((j) => j.name === 'settlement-fetch')).toBe(false);
  });

  it('under `payrecon up` the sandbox starts two real minutes of its time before its first cut-off', () => {
    // At speed 60 two real minutes are two sandbox hours: the clock starts at 22:00 UTC.
    expect(new Date(upSandboxStart(Date.UTC(2026, 10, 29, 0, 7), 60)).toISOString()).toBe(
      '2026-11-29T22:00:00.000Z',
    );
    // Already within them: now (sandbox time never goes back).
    const late = Date.UTC(2026, 10, 29, 23, 30);
    expect(upSandboxStart(late, 60)).toBe(late);
  });
});
