/**
 * bench:match — provider transaction report rows and bank statement lines imported through the import
 * recording path (`recordImport`, in files) and matched (`runMatching`, the built-in rules), at two sizes
 * in one run, each on a fresh database: 100,000 rows and 10,000 bank lines, then 1,000,000 rows and
 * 100,000 bank lines (with as many settlements as bank lines). Targets: the large size under 180 s and
 * 500 MB peak RSS, and the cost per line flat from the small size to the large.
 *
 *   npm run bench:match                     # 100,000 then 1,000,000 rows
 *   SIZES=20000,200000 npm run bench:match  # other sizes (bank lines: a tenth of the rows)
 *   BENCH_DATABASE_URL=postgres://... (default postgres://postgres@127.0.0.1:5432/postgres), BENCH_KEEP=1,
 *   BENCH_WARMUP=10000, BENCH_TRACE=1
 *
 * The data. The ledger holds a payment for each report row but one in a thousand (seeded with SQL, not
 * timed: the ledger's side is given); one in a thousand payments has another status than its row. Bank
 * lines: 96 % name their settlement by end-to-end id, 2 % carry a bank fee of 2.50, 1 % pay two
 * settlements in one credit, 1 % name nothing (matched by amount and date); settlements over 30 value
 * dates, one merchant account and currency. Files: report rows 50,000 a file, one statement per day.
 *
 * Each size prints its wall time, the CPU seconds of this process and of the server process behind its
 * one connection (from /proc: what the other load on the machine does not move), and the load average
 * at its start and end. An untimed size of BENCH_WARMUP rows (default 10,000; 0 for none) runs first, so
 * the process is warm (its code compiled) when the small size is timed, as a long-running one is.
 *
 * Peak RSS is the process's maximum so far (`process.resourceUsage().maxRSS`), so the sizes run smallest
 * first and each peak is its own. The script runs node with `--max-semi-space-size=2` (as `payrecon
 * report`) and `--max-old-space-size=384`: with V8's defaults the heap grew to 1.5 GB of garbage at
 * 1,000,000 rows before a full collection, though what is live stays near 200 MB. BENCH_TRACE=1 prints
 * the time of each step of the matching run, wall and process CPU.
 */
import { createHash, randomBytes } from 'node:crypto';
import { cpus } from 'node:os';
import { sql } from 'kysely';
import pg from 'pg';
import { createDb, migrateToLatest } from '../src/db/connection.ts';
import { recordImport } from '../src/db/imports/service.ts';
import type { BankLineRecord, SettlementRowRecord, TransactionRowRecord } from '../src/db/imports/tables.ts';
import { runMatching } from '../src/db/matching/service.ts';
import { DEFAULT_MATCH_RULES } from '../src/domain/matching.ts';
import { formatAmount } from '../src/domain/money.ts';
import { loadAverage, processCpuSeconds } from './timing.ts';

const SIZES = (process.env.SIZES ?? '100000,1000000').split(',').map((s) => Number(s.trim()));
const WARMUP = Number(process.env.BENCH_WARMUP ?? 10_000);
const ADMIN = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const FILE_ROWS = 50_000;
const DAYS = 30;
const BANK = 'BENCH-EUR-001';

function urlFor(name: string): string {
  const u = new URL(ADMIN);
  u.pathname = `/${name}`;
  return u.toString();
}

const peakMb = () => process.resourceUsage().maxRSS / 1024;
const hash = (s: string) => createHash('sha256').update(s).digest('hex');
const txId = (i: number) => `T${String(i).padStart(9, '0')}`;
const dateOf = (day: number) => new Date(Date.UTC(2026, 0, 1 + day)).toISOString().slice(0, 10);
/** A settlement's net in minor units: spread, never equal for two neighbours. */
const netOf = (i: number) => 100_000n + BigInt((i * 7_919) % 9_000_000);

async function seedLedger(db: ReturnType<typeof createDb>, rows: number): Promise<void> {
  // A payment per row but one in a thousand; one in a thousand with another status.
  await sql`
    INSERT INTO mirrors (merchant_account, entity_kind, entity_id, status, currency, amount, fee_amount,
      first_seen_at, created_at)
    SELECT 'bench', 'deposit', 'T' || lpad(i::text, 9, '0'),
      CASE WHEN i % 1000 = 7 THEN 'CANCELLED' ELSE 'COMPLETED' END, 'EUR',
      (1000 + i % 50000) / 100.0, 1.50,
      timestamptz '2026-01-01T00:00:00Z' + (i % ${DAYS}) * interval '1 day',
      timestamptz '2026-01-01T00:00:00Z' + (i % ${DAYS}) * interval '1 day'
    FROM generate_series(0, ${rows - 1}) AS i WHERE i % 1000 <> 3`.execute(db);
}

function reportRows(from: number, to: number): TransactionRowRecord[] {
  const out: TransactionRowRecord[] = [];
  for (let i = from; i < to; i++) {
    const gross = BigInt(1000 + (i % 50_000));
    const at = new Date(Date.UTC(2026, 0, 1 + (i % DAYS), 0, 0, 1)).toISOString();
    out.push({
      identity: hash(`row:${i}`),
      content_hash: hash(`content:${i}`),
      transaction_id: txId(i),
      type: 'deposit',
      status: 'COMPLETED',
      external_id: null,
      invoice_id: `INV-${i}`,
      currency: 'EUR',
      gross: formatAmount(gross),
      fee: '1.50',
      net: formatAmount(gross - 150n),
      created_at: at,
      updated_at: at,
      settlement_id: `S${i % DAYS}`,
    });
  }
  return out;
}

interface BankData {
  settlements: SettlementRowRecord[];
  byDay: BankLineRecord[][];
}

function bankData(lines: number): BankData {
  const settlements: SettlementRowRecord[] = [];
  const byDay: BankLineRecord[][] = Array.from({ length: DAYS }, () => []);
  let s = 0;
  for (let i = 0; i < lines; i++) {
    const day = i % DAYS;
    const valueDate = dateOf(day);
    const kind = i % 100;
    const ids = kind === 2 ? [s, s + 1] : [s];
    s += ids.length;
    for (const id of ids) {
      const net = formatAmount(netOf(id));
      settlements.push({
        identity: hash(`settlement:${id}`),
        content_hash: hash(`settlement-content:${id}`),
        settlement_id: `ST${id}`,
        account: 'bench',
        period_start: null,
        period_end: null,
        currency: 'EUR',
        gross: net,
        fees: '0.00',
        settlement_currency: 'EUR',
        rate: '1',
        net,
        value_date: valueDate,
        bank_reference: `REF${id}`,
      });
    }
    const total = ids.reduce((sum, id) => sum + netOf(id), 0n);
    const amount = kind === 1 ? total - 250n : total;
    byDay[day]!.push({
      identity: hash(`line:${i}`),
      content_hash: hash(`line-content:${i}`),
      bank_account: BANK,
      currency: 'EUR',
      reference: `BK${i}`,
      booking_date: valueDate,
      value_date: valueDate,
      amount: formatAmount(amount),
      reversal: false,
      end_to_end_ids: kind === 3 ? [] : ids.map((id) => `REF${id}`),
      counterparty: 'Payment Service Provider Ltd',
      description: `Settlement ${ids.join(', ')}`,
      transactions: [],
    });
  }
  return { settlements, byDay };
}

/** CPU seconds so far of this process and of the server process behind the bench's one connection. */
function cpuNow(backendPid: number): { client: number; server: number } {
  const own = process.cpuUsage();
  return { client: (own.user + own.system) / 1e6, server: processCpuSeconds(backendPid) ?? Number.NaN };
}

interface SizeResult {
  rows: number;
  lines: number;
  settlements: number;
  importSeconds: number;
  matchSeconds: number;
  /** CPU seconds of the import and of the matching, client and server. */
  importCpu: { client: number; server: number };
  matchCpu: { client: number; server: number };
  load: string;
  peakMb: number;
  matched: Record<string, number>;
  exceptions: Record<string, number>;
}

async function runSize(rows: number, trace = process.env.BENCH_TRACE === '1'): Promise<SizeResult> {
  const lines = Math.round(rows / 10);
  const name = `payrecon_bench_match_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: ADMIN });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  // One connection: the run is sequential, and the server process's CPU time can be read from /proc.
  const db = createDb(urlFor(name), 1);
  try {
    await migrateToLatest(db);
    await seedLedger(db, rows);
    // Let go once imported, as an import lets go of the file it parsed: the matching run holds its own.
    let bank: BankData | null = bankData(lines);
    const { rows: pidRows } = await sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.execute(db);
    const backendPid = pidRows[0]!.pid;
    const loadBefore = loadAverage();
    const cpuStarted = cpuNow(backendPid);
    const started = performance.now();
    for (let from = 0; from < rows; from += FILE_ROWS) {
      await recordImport(db, {
        kind: 'provider-transactions',
        fileName: `transactions-${from}.csv`,
        sha256: hash(`file:${from}`),
        profile: null,
        importedBy: 'bench',
        rows: reportRows(from, Math.min(rows, from + FILE_ROWS)),
      });
    }
    await recordImport(db, {
      kind: 'provider-settlements',
      fileName: 'settlements.csv',
      sha256: hash('settlements'),
      profile: null,
      importedBy: 'bench',
      rows: bank.settlements,
    });
    for (const [day, dayLines] of bank.byDay.entries()) {
      const credits = dayLines.reduce((sum, l) => sum + BigInt(l.amount.replace('.', '')), 0n);
      await recordImport(db, {
        kind: 'bank-statement',
        fileName: `statement-${dateOf(day)}.xml`,
        sha256: hash(`statement:${day}`),
        profile: null,
        importedBy: 'bench',
        statements: [
          {
            statementId: `STMT-${day}`,
            format: 'camt.053.001.08',
            bankAccount: BANK,
            currency: 'EUR',
            opening: null,
            closing: null,
            credits: formatAmount(credits),
            debits: '0.00',
            booked: dayLines.length,
            pending: 0,
            lines: dayLines,
          },
        ],
      });
    }
    const imported = performance.now();
    const cpuImported = cpuNow(backendPid);
    const settlements = bank.settlements.length;
    bank = null;
    if (trace)
      console.log(
        `  after import: peak ${peakMb().toFixed(0)} MB, heap ${(process.memoryUsage().heapUsed / 1048576).toFixed(0)} MB`,
      );
    const run = await runMatching(db, DEFAULT_MATCH_RULES, {
      now: new Date(Date.UTC(2026, 1, 15)),
      bankAccounts: [{ id: BANK, account: 'bench', currency: 'EUR' }],
      reportAccount: 'bench',
      trace: (step, ms, cpuMs) => {
        if (trace)
          console.log(`  ${step}: ${(ms / 1000).toFixed(2)} s (process CPU ${(cpuMs / 1000).toFixed(2)} s)`);
      },
    });
    const matched = performance.now();
    const cpuMatched = cpuNow(backendPid);
    const spent = (a: typeof cpuStarted, b: typeof cpuStarted) => ({
      client: b.client - a.client,
      server: b.server - a.server,
    });
    return {
      rows,
      lines,
      settlements,
      importSeconds: (imported - started) / 1000,
      matchSeconds: (matched - imported) / 1000,
      importCpu: spent(cpuStarted, cpuImported),
      matchCpu: spent(cpuImported, cpuMatched),
      load: `${loadBefore} at the start, ${loadAverage()} at the end`,
      peakMb: peakMb(),
      matched: run.byRule,
      exceptions: run.exceptions.raised as Record<string, number>,
    };
  } finally {
    await db.destroy();
    if (process.env.BENCH_KEEP !== '1') {
      const c = new pg.Client({ connectionString: ADMIN });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    }
  }
}

const results: SizeResult[] = [];
const linesOf = (r: SizeResult) => r.rows + r.lines + r.settlements;
const cpuOf = (r: SizeResult) =>
  r.importCpu.client + r.importCpu.server + r.matchCpu.client + r.matchCpu.server;
if (WARMUP > 0) {
  // The process warm (its code compiled) before the first timed size, as a long-running one is.
  await runSize(WARMUP, false);
  console.log(`warm-up: ${WARMUP} rows, not counted`);
}
for (const rows of SIZES) {
  const r = await runSize(rows);
  results.push(r);
  const total = r.importSeconds + r.matchSeconds;
  const perLine = (total * 1e6) / linesOf(r);
  const cpu = (c: { client: number; server: number }) =>
    `${c.client.toFixed(1)} + ${c.server.toFixed(1)} CPU s`;
  console.log(
    `${r.rows} rows + ${r.lines} bank lines + ${r.settlements} settlements: import ${r.importSeconds.toFixed(1)} s, ` +
      `match ${r.matchSeconds.toFixed(1)} s, total ${total.toFixed(1)} s, ${perLine.toFixed(1)} µs a line, ` +
      `peak ${r.peakMb.toFixed(0)} MB`,
  );
  console.log(
    `  client + server: import ${cpu(r.importCpu)}, match ${cpu(r.matchCpu)}; ` +
      `${((cpuOf(r) * 1e6) / linesOf(r)).toFixed(1)} CPU µs a line`,
  );
  console.log(`  load ${r.load}`);
  console.log(`  matched ${JSON.stringify(r.matched)}; exceptions ${JSON.stringify(r.exceptions)}`);
}
if (results.length >= 2) {
  const cost = (r: SizeResult) => (r.importSeconds + r.matchSeconds) / linesOf(r);
  const cpuCost = (r: SizeResult) => cpuOf(r) / linesOf(r);
  const [small, large] = [results[0]!, results[results.length - 1]!];
  console.log(
    `cost per line, ${large.rows} over ${small.rows} rows: ${(cost(large) / cost(small)).toFixed(2)} ` +
      `(CPU seconds a line: ${(cpuCost(large) / cpuCost(small)).toFixed(2)})`,
  );
}
console.log(`machine: ${cpus().length} CPUs, ${cpus()[0]?.model ?? 'unknown'}`);
