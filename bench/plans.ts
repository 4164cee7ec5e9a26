/**
 * bench:plans — "no interactive query scans a table whose size grows with history",
 * checked on a year's database: every route of the page (src/web/*routes.ts, src/web/app.ts) and of the API
 * (src/api/app.ts) and the reads of the jobs and of `/metrics` run once against a database kept by
 * `BENCH_KEEP=1 npm run bench:scale`, each statement they send is recorded (Kysely's query log), then
 * re-run under `EXPLAIN (ANALYZE, BUFFERS)` inside a transaction that is rolled back (the jobs' writes
 * included). Per route it prints the statements, the request's median time, the server's time and
 * the rows each statement read from tables that grow with history; a statement that scans such a table
 * (Seq Scan) or reads more than `PLANS_ROWS` (default 20,000) of its rows is named with its plan's nodes.
 *
 *   PLANS_DATABASE (required: the kept database's name or URL), REPEAT (default 5),
 *   PLANS_ROWS (default 20000), PLANS_ONLY (a substring of the routes to run), PLANS_VERBOSE=1 (every plan),
 *   BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres)
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { sweepExceptions } from '../src/db/exceptions/sweep.ts';
import { takeBalanceSnapshots } from '../src/db/ledger/balance-snapshots.ts';
import { entitiesDueForPolling, scheduleLateRejectionChecks } from '../src/db/polling/schedule.ts';
import { exceptionFigures, pollBacklog } from '../src/db/read-models/metrics.ts';
import type { Database, Db } from '../src/db/schema.ts';
import { DEFAULT_EXCEPTION_RULES } from '../src/domain/exception-rules.ts';
import { DEFAULT_SLA_TABLE } from '../src/domain/exception-sla.ts';
import { signedInApi, signedInWeb } from './signed-in.ts';
import { loadAverage, medianMs } from './timing.ts';

const ADMIN = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const TARGET = process.env.PLANS_DATABASE ?? '';
const REPEAT = Math.max(1, Number(process.env.REPEAT ?? 5));
const ROWS = Number(process.env.PLANS_ROWS ?? 20_000);
const ONLY = process.env.PLANS_ONLY ?? '';
const VERBOSE = process.env.PLANS_VERBOSE === '1';
const out = (s: string) => process.stdout.write(`${s}\n`);

/** Tables whose size does not grow with history (one row per account, not per payment or day). */
const FIXED = new Set(['merchant_accounts', 'ledger_accounts', 'ledger_balances', 'kysely_migration']);

interface Captured {
  sql: string;
  parameters: readonly unknown[];
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  Plans?: PlanNode[];
}

interface Read {
  node: string;
  table: string;
  rows: number;
}

/** The scans of tables that grow with history in a plan, with the rows each read (over all its loops). */
function growingReads(node: PlanNode, acc: Read[] = []): Read[] {
  const table = node['Relation Name'];
  if (table && !FIXED.has(table)) {
    const loops = node['Actual Loops'] ?? 1;
    const rows =
      ((node['Actual Rows'] ?? 0) +
        (node['Rows Removed by Filter'] ?? 0) +
        (node['Rows Removed by Index Recheck'] ?? 0)) *
      loops;
    const how = node['Index Name'] ? `${node['Node Type']} using ${node['Index Name']}` : node['Node Type'];
    acc.push({ node: `${how} on ${table}`, table, rows });
  }
  for (const child of node.Plans ?? []) growingReads(child, acc);
  return acc;
}

function urlFor(target: string): string {
  if (target.includes('://')) return target;
  const u = new URL(ADMIN);
  u.pathname = `/${target}`;
  return u.toString();
}

async function main(): Promise<void> {
  if (!TARGET) {
    process.stderr.write(
      'bench:plans: PLANS_DATABASE: must name a database kept by BENCH_KEEP=1 npm run bench:scale\n',
    );
    process.exitCode = 2;
    return;
  }
  const url = urlFor(TARGET);
  let capture: Captured[] | null = null;
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  const db: Db = new Kysely<Database>({
    dialect: new PostgresDialect({ pool }),
    log: (event) => {
      if (capture && event.level === 'query')
        capture.push({ sql: event.query.sql, parameters: event.query.parameters });
    },
  });
  const explain = new pg.Client({ connectionString: url });
  await explain.connect();
  const dir = await mkdtemp(join(tmpdir(), 'payrecon-plans-'));
  const web = await signedInWeb(db, dir);
  const api = await signedInApi(db, dir);
  let offenders = 0;
  try {
    const count = await sql<{ n: string }>`SELECT count(*)::text AS n FROM mirrors`.execute(db);
    out(
      `bench:plans  ${TARGET}: ${Number(count.rows[0]!.n).toLocaleString('en')} payments, load ${loadAverage()}`,
    );

    // Ids to look up: from the middle of a year's history (scale-synth numbers payments from 1000000000),
    // of each kind; on a smaller database, the first of the kind.
    const pick = async (kind: string) => {
      for (const from of ['1000500000', '']) {
        const r = await sql<{
          merchant_account: string;
          entity_id: string;
          external_ref: string | null;
          intent_id: string | null;
        }>`
          SELECT merchant_account, entity_id, external_ref, intent_id FROM mirrors
          WHERE entity_kind = ${kind} AND entity_id >= ${from} ORDER BY entity_id LIMIT 1`.execute(db);
        if (r.rows[0]) return r.rows[0];
      }
      throw new Error(`bench:plans: no ${kind} in ${TARGET}`);
    };
    const deposit = await pick('deposit');
    const cashout = await pick('cashout');
    const refund = await pick('refund');
    const exception = await sql<{ id: string }>`
      SELECT id::text FROM exceptions WHERE state = 'open' ORDER BY id LIMIT 1`.execute(db);
    const exceptionId = exception.rows[0]?.id ?? '1';
    const now = new Date();
    const day = (d: Date) => d.toISOString().slice(0, 10);
    const lastMonth = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 1, 1));
    const period = lastMonth.toISOString().slice(0, 7);
    const todayStart = new Date(`${day(now)}T00:00:00Z`);
    const yesterdayNoon = new Date(todayStart.getTime() - 12 * 3_600_000);

    const page = (path: string) => async () => {
      const res = await web.app.inject({
        method: 'GET',
        url: path,
        headers: { accept: 'text/html', cookie: web.cookie },
      });
      if (res.statusCode >= 500) throw new Error(`${path} answered ${res.statusCode}`);
      return res.body;
    };
    const apiGet = (path: string) => async () => {
      const res = await api.app.inject({
        method: 'GET',
        url: `${api.prefix}${path}`,
        headers: { authorization: api.authorization },
      });
      if (res.statusCode >= 500) throw new Error(`${path} answered ${res.statusCode}: ${res.body}`);
      return res.body;
    };
    /** A job's work inside a transaction that is rolled back: what it reads, nothing kept. */
    const rolledBack = (work: (trx: Db) => Promise<unknown>) => async () => {
      await db
        .transaction()
        .execute(async (trx) => {
          await work(trx);
          throw new RolledBack();
        })
        .catch((err: unknown) => {
          if (!(err instanceof RolledBack)) throw err;
        });
    };
    const cursorOf = async (path: string) => {
      const body = JSON.parse(await apiGet(path)()) as { nextCursor: string | null };
      return body.nextCursor ?? '';
    };
    const paymentsCursor = await cursorOf('/payments?limit=50');
    const exceptionsCursor = await cursorOf('/exceptions?limit=50');
    const exceptionsAfter = /[?&]after=(\d+)/.exec(await page('/exceptions')())?.[1] ?? '';

    const routes: [string, () => Promise<unknown>, { once?: boolean }?][] = [
      ['page GET /balances', page('/balances')],
      ['page GET /balances/charts', page('/balances/charts')],
      ['page GET /balances/charts?days=90', page('/balances/charts?days=90')],
      ['page GET /payments?q= (an invoice id)', page(`/payments?q=${deposit.external_ref}`)],
      ['page GET /payments?q= (a deposit id)', page(`/payments?q=${deposit.entity_id}`)],
      [
        'page GET /payments/:account/:kind/:id',
        page(`/payments/${deposit.merchant_account}/deposit/${deposit.entity_id}`),
      ],
      ['page GET /exceptions', page('/exceptions')],
      ['page GET /exceptions, next page', page(`/exceptions?after=${exceptionsAfter}`)],
      ['page GET /exceptions?type=LATE_REJECTION', page('/exceptions?type=LATE_REJECTION')],
      ['page GET /exceptions?state=resolved', page('/exceptions?state=resolved')],
      ['page GET /exceptions?age=gt7d', page('/exceptions?age=gt7d')],
      ['page GET /exceptions/:id', page(`/exceptions/${exceptionId}`)],
      ['page GET /exceptions/export?state=open', page('/exceptions/export?state=open')],
      ['page GET /closes', page('/closes')],
      ['page GET /closes/:account/:currency/:period', page(`/closes/m1/BRL/${period}`)],
      ['page GET /reports', page('/reports')],
      ['api GET /balances', apiGet('/balances')],
      ['api GET /balances?at= (yesterday noon)', apiGet(`/balances?at=${yesterdayNoon.toISOString()}`)],
      [
        'api GET /movements (today)',
        apiGet(`/movements?from=${todayStart.toISOString()}&to=${now.toISOString()}`),
      ],
      ...(
        [
          ['deposit_id', deposit.entity_id],
          ['invoice_id', deposit.external_ref ?? ''],
          ['cashout_id', cashout.entity_id],
          ['external_id', cashout.external_ref ?? ''],
          ['refund_id', refund.entity_id],
          ['intent_id', deposit.intent_id ?? ''],
          ['bank_reference', 'E00000000202611260000000000000'],
        ] as const
      ).map(
        ([kind, id]) =>
          [`api GET /payments/lookup?idKind=${kind}`, apiGet(`/payments/lookup?id=${id}&idKind=${kind}`)] as [
            string,
            () => Promise<unknown>,
          ],
      ),
      ['api GET /payments/lookup (any id kind)', apiGet(`/payments/lookup?id=${deposit.entity_id}`)],
      ['api GET /payments', apiGet('/payments?limit=50')],
      ['api GET /payments, next page', apiGet(`/payments?limit=50&cursor=${paymentsCursor}`)],
      [
        'api GET /payments?kind=cashout&status=PENDING',
        apiGet('/payments?limit=50&kind=cashout&status=PENDING'),
      ],
      ['api GET /payments?account=m3&currency=USD', apiGet('/payments?limit=50&account=m3&currency=USD')],
      [
        'api GET /payments?from=&to= (a day a month ago)',
        apiGet(
          `/payments?limit=50&from=${new Date(todayStart.getTime() - 30 * 86_400_000).toISOString()}&to=${new Date(todayStart.getTime() - 29 * 86_400_000).toISOString()}`,
        ),
      ],
      [
        'api GET /payments/{account}/{kind}/{id}',
        apiGet(`/payments/${cashout.merchant_account}/cashout/${cashout.entity_id}`),
      ],
      ['api GET /exceptions', apiGet('/exceptions?limit=50')],
      ['api GET /exceptions, next page', apiGet(`/exceptions?limit=50&cursor=${exceptionsCursor}`)],
      [
        'api GET /exceptions?type=FEE_MISMATCH&state=open',
        apiGet('/exceptions?limit=50&type=FEE_MISMATCH&state=open'),
      ],
      ['api GET /exceptions?account=m2&currency=BRL', apiGet('/exceptions?limit=50&account=m2&currency=BRL')],
      ['api GET /exceptions/{id}', apiGet(`/exceptions/${exceptionId}`)],
      ['api GET /reports', apiGet('/reports?limit=20')],
      ['api GET /closes', apiGet('/closes')],
      ['job metrics: exceptions by type and state', () => exceptionFigures(db, DEFAULT_SLA_TABLE, now)],
      ['job metrics: poll backlog', () => pollBacklog(db, now)],
      ['job poll: entities due', () => entitiesDueForPolling(db, now, 500)],
      [
        'job late-rejection-sweep (rolled back)',
        rolledBack((trx) => scheduleLateRejectionChecks(trx, now, DEFAULT_EXCEPTION_RULES.polling)),
      ],
      ['job ledger-verify: snapshots (rolled back)', rolledBack((trx) => takeBalanceSnapshots(trx))],
      [
        // Once, and only its reads explained: on a synthesized year it raises every condition the history holds.
        'job stuck-sweep (rolled back, once)',
        rolledBack((trx) => sweepExceptions(trx, now, DEFAULT_EXCEPTION_RULES)),
        { once: true },
      ],
    ];

    for (const [name, run, options] of routes) {
      if (ONLY && !name.includes(ONLY)) continue;
      const once = options?.once === true;
      let ms: number;
      capture = [];
      if (once) {
        const t0 = performance.now();
        await run();
        ms = performance.now() - t0;
      } else {
        await run();
        ms = await medianMs(run, REPEAT, 0);
        capture = [];
        await run();
      }
      const statements: Captured[] = capture;
      capture = null;
      let serverMs = 0;
      const lines: string[] = [];
      let worst = 0;
      for (const [i, s] of statements.entries()) {
        if (/^\s*(begin|commit|rollback|savepoint|release)/i.test(s.sql)) continue;
        if (/^\s*set\s+local/i.test(s.sql)) continue;
        if (once && !/^\s*(select|with)/i.test(s.sql)) continue;
        await explain.query('BEGIN');
        let plan: { Plan: PlanNode; 'Execution Time': number };
        try {
          const r = await explain.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${s.sql}`, [
            ...s.parameters,
          ]);
          plan = (r.rows[0] as { 'QUERY PLAN': { Plan: PlanNode; 'Execution Time': number }[] })[
            'QUERY PLAN'
          ][0]!;
        } finally {
          await explain.query('ROLLBACK');
        }
        serverMs += plan['Execution Time'];
        const reads = growingReads(plan.Plan);
        const read = reads.reduce((a, r) => a + r.rows, 0);
        worst = Math.max(worst, read);
        const bad = reads.filter((r) => r.node.startsWith('Seq Scan') || r.rows > ROWS);
        if (bad.length > 0 || VERBOSE) {
          lines.push(
            `    ${bad.length ? 'SCANS' : 'reads'} #${i + 1} (${plan['Execution Time'].toFixed(1)} ms, ` +
              `${read.toLocaleString('en')} rows of growing tables): ${s.sql.replace(/\s+/g, ' ').slice(0, 160)}`,
          );
          for (const r of reads) lines.push(`      ${r.node}: ${r.rows.toLocaleString('en')} rows`);
        }
        if (bad.length > 0) offenders++;
      }
      out(
        `${name.padEnd(58)} ${String(statements.length).padStart(2)} statements  ${ms.toFixed(1).padStart(7)} ms  ` +
          `server ${serverMs.toFixed(1).padStart(7)} ms  most rows read ${worst.toLocaleString('en')}`,
      );
      for (const l of lines) out(l);
    }
    out(`load average at the end: ${loadAverage()}`);
    out(
      offenders === 0 ? 'no statement scans a growing table' : `${offenders} statements scan growing tables`,
    );
    if (offenders > 0) process.exitCode = 1;
  } finally {
    await web.app.close();
    await api.app.close();
    await explain.end();
    await db.destroy();
    await rm(dir, { recursive: true, force: true });
  }
}

class RolledBack extends Error {}

main().catch((err) => {
  process.stderr.write(`bench:plans: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
