/**
 * Report runs cannot starve the ledger: they generate on a pool of their own, at most
 * PAYRECON_REPORT_CONCURRENCY at once (the others wait in request order), and a period longer than
 * PAYRECON_REPORT_MAX_DAYS is refused. Twenty runs started at once while ledger batches are applied.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/api/app.ts';
import { loadConfig } from '../../src/config.ts';
import { applyObservations, recordIntents } from '../../src/db/ledger/service.ts';
import { namingPool } from '../../src/db/ledger/statements.ts';
import type { Database } from '../../src/db/schema.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import { createApiToken } from '../../src/domain/api-tokens.ts';
import { type Intent, NO_FACTS, type Observation } from '../../src/domain/observation.ts';
import { type DatabaseInfrastructure, openDatabaseInfrastructure } from '../../src/infrastructure.ts';
import { logger } from '../../src/logger.ts';
import { ReportRunner } from '../../src/reports/runs.ts';
import { buildServer } from '../../src/server.ts';
import { createServices } from '../../src/services.ts';
import { payrecon } from '../cli/payrecon.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { ACCOUNT, seedCurrencies } from '../reports/scenario.ts';

const RUNS = 20;
const LIMIT = 2;

let t: TestDatabase;
let dir: string;
let infra: DatabaseInfrastructure;
let runner: ReportRunner;

const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);

/** A deposit's intent and its completion, for the ledger's batches while the reports run. */
function deposit(id: string): { intent: Intent; observation: Observation } {
  const amount = 10_000n + BigInt(Number(id) % 5_000);
  return {
    intent: {
      intentId: randomUUID(),
      operation: 'deposit',
      account: ACCOUNT,
      externalRef: `ref-${id}`,
      entityId: id,
      currency: 'BRL',
      amount,
      expectedFee: null,
      test: false,
      crypto: false,
      feeOnPayer: false,
      parentDepositId: null,
      outcome: 'created',
      createdAt: new Date(Date.now() - 60_000),
      request: {},
      response: null,
    },
    observation: {
      eventId: randomUUID(),
      kind: 'deposit',
      account: ACCOUNT,
      entityId: id,
      externalRef: `ref-${id}`,
      status: 'COMPLETED',
      observedAt: new Date(Date.now() - 30_000),
      source: 'webhook',
      currency: 'BRL',
      amount,
      ...NO_FACTS,
      feeAmount: 100n,
      feeCurrency: 'BRL',
      feeOnPayer: false,
      details: {},
    },
  };
}

beforeAll(async () => {
  t = await createTestDatabase();
  dir = await mkdtemp(join(tmpdir(), 'payrecon-report-limits-'));
  await seedCurrencies(t.db, ['BRL', 'USD', 'EUR'], 1_500, 300);
  const config = loadConfig({
    DATABASE_URL: t.url,
    PAYRECON_DATA_DIR: dir,
    PAYRECON_TIMEZONE: 'UTC',
    PAYRECON_REPORT_CONCURRENCY: String(LIMIT),
  });
  infra = await openDatabaseInfrastructure(config, async () => ({ url: t.url, stop: async () => {} }), {
    schema: 'require',
    logger: logger.child({}, { level: 'silent' }),
  });
  runner = createServices(infra).reports;
}, 300_000);

afterAll(async () => {
  await infra?.lifecycle.stopAll();
  await t?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('report runs under load', () => {
  it('runs on a pool of its own, at most the limit at once, while the ledger keeps its pace', async () => {
    expect(infra.reportsDb).toBeDefined();
    expect(runner.db).toBe(infra.reportsDb);
    expect(runner.db).not.toBe(infra.db);
    expect(runner.concurrency).toBe(LIMIT);

    // The ledger's own pool, as the reconciler has it: its waiting count shows any starvation.
    const ledgerPool = new pg.Pool({ connectionString: t.url, max: 2, pipeline: true } as pg.PoolConfig);
    const ledger = new Kysely<Database>({ dialect: new PostgresDialect({ pool: namingPool(ledgerPool) }) });

    // Baseline: the ledger's time per batch with no report running.
    const batch = async (n: number) => {
      const items = Array.from({ length: 50 }, (_, i) => deposit(String(90_000_000 + n * 100 + i)));
      const started = performance.now();
      await withLedgerTransaction(ledger, (trx) =>
        recordIntents(
          trx,
          items.map((d) => d.intent),
        ),
      );
      await withLedgerTransaction(ledger, (trx) =>
        applyObservations(
          trx,
          items.map((d) => d.observation),
        ),
      );
      return performance.now() - started;
    };
    const baseline: number[] = [];
    for (let n = 0; n < 5; n++) baseline.push(await batch(n));

    let maxRunning = 0;
    let maxRowsRunning = 0;
    let maxLedgerWaiting = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        maxRunning = Math.max(maxRunning, runner.load().running);
        maxLedgerWaiting = Math.max(maxLedgerWaiting, ledgerPool.waitingCount);
        const { rows } = await sql<{ n: number }>`
          SELECT count(*)::int AS n FROM report_runs WHERE status = 'running'`.execute(t.db);
        maxRowsRunning = Math.max(maxRowsRunning, rows[0]!.n);
        await new Promise((r) => setTimeout(r, 5));
      }
    })();

    const started = performance.now();
    const order: number[] = [];
    const runs = Array.from({ length: RUNS }, (_, i) =>
      runner
        .run({ kind: i % 2 === 0 ? 'settlement' : 'exceptions', from: day(-1), to: day(0), account: null })
        .then((outcome) => {
          order.push(i);
          return outcome;
        }),
    );
    const during: number[] = [];
    let n = 5;
    let allDone = false;
    const finished = Promise.all(runs).finally(() => {
      allDone = true;
    });
    while (!allDone) {
      during.push(await batch(n++));
      maxLedgerWaiting = Math.max(maxLedgerWaiting, ledgerPool.waitingCount);
    }
    const outcomes = await finished;
    const elapsed = performance.now() - started;
    sampling = false;
    await sampler;
    await ledger.destroy();

    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const figures = {
      runs: RUNS,
      limit: LIMIT,
      maxRunningInProcess: maxRunning,
      maxRunningRows: maxRowsRunning,
      reportsSeconds: Number((elapsed / 1000).toFixed(1)),
      ledgerBatchesDuring: during.length,
      ledgerBatchMsBaselineMedian: Number(median(baseline).toFixed(1)),
      ledgerBatchMsDuringMedian: Number(median(during).toFixed(1)),
      ledgerBatchMsDuringMax: Number(Math.max(...during).toFixed(1)),
      ledgerPoolMaxWaiting: maxLedgerWaiting,
    };
    process.stdout.write(`report limits: ${JSON.stringify(figures)}\n`);

    expect(outcomes.every((o) => o?.run.status === 'succeeded')).toBe(true);
    expect(outcomes.every((o) => (o?.run.rowCount ?? 0) > 0)).toBe(true);
    expect(maxRunning).toBe(LIMIT);
    expect(maxRowsRunning).toBeLessThanOrEqual(LIMIT);
    expect(maxLedgerWaiting).toBe(0);
    expect(during.length).toBeGreaterThan(0);
    // Shared CPUs slow everything down; what must not happen is a batch waiting on the reports.
    expect(median(during)).toBeLessThan(Math.max(5 * median(baseline), 500));
    expect(Math.max(...during)).toBeLessThan(5_000);
    const { rows } = await sql<{ status: string; n: number }>`
      SELECT status, count(*)::int AS n FROM report_runs GROUP BY status`.execute(t.db);
    expect(rows).toEqual([{ status: 'succeeded', n: RUNS }]);
  }, 600_000);

  it('takes waiting runs in the order they were asked for', async () => {
    // Two at a time: the last two asked for are never among the first two to start, nor to finish.
    const finished: number[] = [];
    const runs = Array.from({ length: 6 }, (_, i) =>
      runner.run({ kind: 'exceptions', from: day(-1), to: day(0), account: null }).then((o) => {
        finished.push(i);
        return o;
      }),
    );
    const outcomes = await Promise.all(runs);
    expect(finished.slice(0, 2)).not.toContain(4);
    expect(finished.slice(0, 2)).not.toContain(5);
    // A run's row is written when it takes a slot, so the four that waited have ids above the first two
    // (two slots freed at once write their rows concurrently: their order between them is the server's).
    const ids = outcomes.map((o) => Number(o!.run.id));
    expect(Math.min(...ids.slice(2))).toBeGreaterThan(Math.max(ids[0]!, ids[1]!));

    // One slot: each run starts when the one before it ends, so the order is fully the requests' order.
    const single = new ReportRunner({ db: runner.db, dir, timeZone: 'UTC', concurrency: 1 });
    const order: number[] = [];
    const serial = await Promise.all(
      Array.from({ length: 5 }, (_, i) =>
        single.run({ kind: 'exceptions', from: day(-1), to: day(0), account: null }).then((o) => {
          order.push(i);
          return o;
        }),
      ),
    );
    expect(order).toEqual([0, 1, 2, 3, 4]);
    const serialIds = serial.map((o) => Number(o!.run.id));
    expect(serialIds).toEqual([...serialIds].sort((a, b) => a - b));
  }, 300_000);

  it('waits in idle() for queued runs too, so a shutdown never closes the pool under one', async () => {
    const { rows: before } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM report_runs`.execute(
      t.db,
    );
    const runs = Array.from({ length: 5 }, () =>
      runner.start({ kind: 'exceptions', from: day(-1), to: day(0), account: null }),
    );
    await runner.idle();
    expect(runner.load()).toEqual({ running: 0, queued: 0 });
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM report_runs WHERE status = 'succeeded'`.execute(t.db);
    expect(rows[0]!.n).toBe(before[0]!.n + 5);
    await Promise.all(runs);
  }, 120_000);

  it('refuses a period longer than PAYRECON_REPORT_MAX_DAYS with one line naming the limit', async () => {
    const { rows: before } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM report_runs`.execute(
      t.db,
    );
    await expect(
      runner.start({ kind: 'settlement', from: '2000-01-01', to: '2099-12-31', account: null }),
    ).rejects.toThrow(/^period: at most 366 days \(PAYRECON_REPORT_MAX_DAYS\), got 36525/);
    await expect(
      runner.start({ kind: 'settlement', from: '2024-01-01', to: '2025-01-01', account: null }),
    ).rejects.toThrow(/at most 366 days/);
    const { rows: after } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM report_runs`.execute(
      t.db,
    );
    expect(after[0]!.n).toBe(before[0]!.n);
    const ok = await runner.run({ kind: 'exceptions', from: '2024-01-01', to: '2024-12-31', account: null });
    expect(ok?.run.status).toBe('succeeded');
  }, 120_000);

  it('refuses a longer period on the CLI with exit code 2 and one line, writing nothing', async () => {
    const { rows: before } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM report_runs`.execute(
      t.db,
    );
    const r = await payrecon(
      dir,
      ['report', 'settlement', '--from', '2024-01-01', '--to', '2025-12-31', '--out', 'long.xlsx', '--quiet'],
      { DATABASE_URL: t.url, PAYRECON_DATA_DIR: join(dir, 'cli'), PAYRECON_REPORT_MAX_DAYS: '400' },
    );
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^payrecon: period: at most 400 days \(PAYRECON_REPORT_MAX_DAYS\), got 731 /);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    const { rows: after } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM report_runs`.execute(
      t.db,
    );
    expect(after[0]!.n).toBe(before[0]!.n);
  }, 120_000);

  it('refuses a longer period on the API with a 400 naming the limit, writing nothing', async () => {
    const { token, entry } = await createApiToken('reports', ['reports:write']);
    const config = loadConfig({
      DATABASE_URL: t.url,
      PAYRECON_DATA_DIR: dir,
      PAYRECON_TIMEZONE: 'UTC',
      PAYRECON_API_TOKENS: JSON.stringify([entry]),
    });
    const quiet = logger.child({}, { level: 'silent' });
    const app = await buildServer(
      { config, logger: quiet, dataDir: dir, db: infra.db },
      createServices(infra),
      {
        accounts: [],
        metrics: infra.metrics,
        page: true,
        webhooks: false,
        intents: false,
      },
    );
    try {
      const { rows: before } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM report_runs`.execute(
        t.db,
      );
      const res = await app.inject({
        method: 'POST',
        url: `${API_PREFIX}/reports`,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        payload: JSON.stringify({ kind: 'settlement', from: '2000-01-01', to: '2030-12-31' }),
      });
      expect(res.statusCode, res.body).toBe(400);
      expect(JSON.parse(res.body).detail).toMatch(/period: at most 366 days \(PAYRECON_REPORT_MAX_DAYS\)/);
      const { rows: after } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM report_runs`.execute(
        t.db,
      );
      expect(after[0]!.n).toBe(before[0]!.n);
    } finally {
      await app.close();
    }
  }, 60_000);
});
