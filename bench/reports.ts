/**
 * bench:reports — a settlement workbook for 1,000,000 journal lines (postings) read from PostgreSQL
 * through a server-side cursor, against a bare exceljs streaming write of the same rows (same columns,
 * formats and values, generated in memory, no database) as the limit. Each side runs in its own child
 * process so its peak memory (max RSS) is its own. Targets: < 60 s, < 300 MB peak, >= 0.7 of bare.
 *
 *   npm run bench:reports                 # 1,000,000 lines
 *   LINES=200000 npm run bench:reports    # smaller
 *   BENCH_DATABASE_URL=postgres://... (default postgres://postgres@127.0.0.1:5432/postgres)
 *   REPEAT=2 (bare and workbook alternate, best of each), CSV=0 skips the workbook+CSV run
 *
 * The data: 500,000 live BRL deposit credit entries of two postings each, booked in one day, inserted
 * with generate_series (the ledger's balance trigger checks every statement). No mirrors, so the
 * workbook's entity sheets are empty and the comparison is the journal path alone.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type ExcelJS from 'exceljs';
import { sql } from 'kysely';
import pg from 'pg';
import { createDb, migrateToLatest } from '../src/db/connection.ts';
import { minorToCell } from '../src/domain/money.ts';
import { localDate } from '../src/domain/zoned-time.ts';
import { excelDate, type Period } from '../src/reports/period.ts';
import { JOURNAL_COLUMNS, writeSettlementWorkbook } from '../src/reports/settlement-workbook.ts';
import { drainWorksheet, TableSheet, workbookWriter } from '../src/reports/sheet-writer.ts';

const TZ = 'America/Sao_Paulo';
const LINES = Number(process.env.LINES ?? 1_000_000);
const ADMIN = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

interface PhaseResult {
  phase: string;
  seconds: number;
  peakMb: number;
  rows: number;
  bytes: number;
}

function urlFor(name: string): string {
  const u = new URL(ADMIN);
  u.pathname = `/${name}`;
  return u.toString();
}

function peakMb(): number {
  // maxRSS is in kilobytes.
  return process.resourceUsage().maxRSS / 1024;
}

async function seed(url: string): Promise<{ start: Date; end: Date }> {
  const db = createDb(url, 2);
  try {
    await migrateToLatest(db);
    await sql`INSERT INTO merchant_accounts (name) VALUES ('bench')`.execute(db);
    await sql`INSERT INTO ledger_accounts (merchant_account, currency, book, name)
              VALUES ('bench', 'BRL', 'live', 'available'), ('bench', 'BRL', 'live', 'deposits')`.execute(db);
    const entries = Math.ceil(LINES / 2);
    const chunk = 100_000;
    for (let from = 1; from <= entries; from += chunk) {
      const to = Math.min(entries, from + chunk - 1);
      await db.transaction().execute(async (trx) => {
        await sql`
          INSERT INTO journal_entries (id, idempotency_key, merchant_account, entity_kind, entity_id, effect, direction,
                                       seq, book, currency, amount, effective_at)
          SELECT g, 'deposit:bench:' || g || ':credit', 'bench', 'deposit', (1000000 + g)::text, 'credit', 1, 1,
                 'live', 'BRL', ((g * 7919) % 10000000) / 100.0 + 0.01, now()
            FROM generate_series(${from}::bigint, ${to}::bigint) g`.execute(trx);
        await sql`
          INSERT INTO postings (entry_id, merchant_account, currency, book, account, amount)
          SELECT e.id, 'bench', 'BRL', 'live', a.account, CASE WHEN a.account = 'available' THEN e.amount ELSE -e.amount END
            FROM journal_entries e CROSS JOIN (VALUES ('available'), ('deposits')) a(account)
           WHERE e.id BETWEEN ${from} AND ${to}
           ORDER BY e.id, a.account`.execute(trx);
      });
    }
    await sql`SELECT setval('journal_entries_id_seq', ${entries})`.execute(db);
    await sql`ANALYZE journal_entries; ANALYZE postings`.execute(db);
    const { rows } = await sql<{ lo: Date; hi: Date }>`
      SELECT min(created_at) AS lo, max(created_at) AS hi FROM journal_entries`.execute(db);
    return { start: rows[0]!.lo, end: new Date(rows[0]!.hi.getTime() + 1000) };
  } finally {
    await db.destroy();
  }
}

async function phaseWorkbook(
  url: string,
  out: string,
  start: Date,
  end: Date,
  csv: boolean,
): Promise<PhaseResult> {
  const db = createDb(url, 4);
  const day = localDate(start, TZ);
  const period: Period = { from: day, to: day, start, end, timeZone: TZ, cutoff: '00:00' };
  const t0 = performance.now();
  const r = await writeSettlementWorkbook(db, {
    period,
    account: null,
    out,
    csvDir: csv ? `${out}-csv` : null,
  });
  const seconds = (performance.now() - t0) / 1000;
  await db.destroy();
  const proof = r.summaries.every((s) => s.proofAvailable === 0n && s.proofReserved === 0n);
  if (!proof) throw new Error('proof line is not zero');
  return {
    phase: csv ? 'workbook+csv' : 'workbook',
    seconds,
    peakMb: peakMb(),
    rows: r.rowCounts.Journal ?? 0,
    bytes: (await stat(out)).size,
  };
}

/** The limit: the same journal rows written straight to an exceljs streaming workbook, no database. */
async function phaseBare(out: string, start: Date): Promise<PhaseResult> {
  const t0 = performance.now();
  const wb = workbookWriter(out);
  const sheet = new TableSheet(wb, 'Journal', JOURNAL_COLUMNS, {
    timeZone: TZ,
    currencyKey: 'currency',
    print: { report: 'bench', period: 'bench' },
  });
  // Same cell values as the workbook's journal: entry, booked at, account, kind, entity, effect, reversal,
  // ledger account, currency, amount.
  const ws = (sheet as unknown as { parts: { sheet: ExcelJS.Worksheet }[] }).parts[0]!.sheet;
  const booked = excelDate(start, TZ);
  const entries = Math.ceil(LINES / 2);
  let rows = 0;
  for (let g = 1; g <= entries; g++) {
    const minor = BigInt(((g * 7919) % 10_000_000) + 1);
    const amount = minorToCell(minor) as number;
    const id = String(1_000_000 + g);
    ws.addRow([g, booked, 'bench', 'deposit', id, 'credit', null, 'available', 'BRL', amount]).commit();
    ws.addRow([g, booked, 'bench', 'deposit', id, 'credit', null, 'deposits', 'BRL', -amount]).commit();
    rows += 2;
    // Same batch size and backpressure as the workbook's cursor loop, so memory stays flat here too.
    if (rows % 5000 === 0) await drainWorksheet(ws);
  }
  ws.commit();
  await wb.commit();
  const seconds = (performance.now() - t0) / 1000;
  return { phase: 'bare', seconds, peakMb: peakMb(), rows, bytes: (await stat(out)).size };
}

async function child(): Promise<void> {
  const [, , , phase, url, out, start, end] = process.argv;
  const s = new Date(start!);
  const r =
    phase === 'bare'
      ? await phaseBare(out!, s)
      : await phaseWorkbook(url!, out!, s, new Date(end!), phase === 'workbook+csv');
  process.stdout.write(`${JSON.stringify(r)}\n`);
}

function runChild(args: string[]): PhaseResult {
  const res = spawnSync(process.execPath, [...process.execArgv, process.argv[1]!, '--child', ...args], {
    encoding: 'utf8',
    maxBuffer: 16 * 1024 * 1024,
  });
  if (res.status !== 0) throw new Error(`bench child ${args[0]} failed: ${res.stderr}`);
  const line = res.stdout.trim().split('\n').pop()!;
  return JSON.parse(line) as PhaseResult;
}

async function main(): Promise<void> {
  const name = `payrecon_bench_reports_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: ADMIN });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const dir = await mkdtemp(join(tmpdir(), 'payrecon-bench-reports-'));
  try {
    const url = urlFor(name);
    const s0 = performance.now();
    const { start, end } = await seed(url);
    console.log(
      `seeded ${LINES.toLocaleString('en-US')} journal lines in ${((performance.now() - s0) / 1000).toFixed(1)} s`,
    );
    const iso = [start.toISOString(), end.toISOString()];
    if (process.env.SEED_ONLY === '1') {
      // For profiling one phase: tsx bench/reports.ts --child workbook <url> <out.xlsx> <start> <end>
      console.log(`kept ${url} ${iso.join(' ')}`);
      await admin.end();
      return;
    }
    // The machine is shared: bare and workbook runs alternate and each side keeps its best run.
    const repeat = Number(process.env.REPEAT ?? 2);
    const best = (a: PhaseResult | null, b: PhaseResult) =>
      a === null || b.seconds < a.seconds
        ? { ...b, peakMb: Math.max(b.peakMb, a?.peakMb ?? 0) }
        : { ...a, peakMb: Math.max(a.peakMb, b.peakMb) };
    let bare: PhaseResult | null = null;
    let book: PhaseResult | null = null;
    for (let i = 0; i < repeat; i++) {
      bare = best(bare, runChild(['bare', url, join(dir, 'bare.xlsx'), ...iso]));
      book = best(book, runChild(['workbook', url, join(dir, 'settlement.xlsx'), ...iso]));
      console.log(
        `  run ${i + 1}/${repeat}: bare ${bare.seconds.toFixed(1)} s, workbook ${book.seconds.toFixed(1)} s (best so far)`,
      );
    }
    if (!bare || !book) throw new Error('REPEAT must be at least 1');
    const withCsv =
      process.env.CSV === '0'
        ? null
        : runChild(['workbook+csv', url, join(dir, 'settlement-csv.xlsx'), ...iso]);
    const rate = (r: PhaseResult) => r.rows / r.seconds;
    const show = (r: PhaseResult) =>
      `${r.phase.padEnd(13)} ${r.rows.toLocaleString('en-US')} rows  ${r.seconds.toFixed(1).padStart(6)} s  ` +
      `${Math.round(rate(r)).toLocaleString('en-US').padStart(8)} rows/s  peak ${r.peakMb.toFixed(0)} MB  ` +
      `file ${(r.bytes / 1048576).toFixed(1)} MB`;
    console.log(show(bare));
    console.log(show(book));
    if (withCsv) console.log(show(withCsv));
    const ratio = rate(book) / rate(bare);
    console.log(`ratio workbook/bare ${ratio.toFixed(2)} (target >= 0.7)`);
    console.log(
      `targets: seconds ${book.seconds < 60 ? 'ok' : 'MISSED'} (< 60), peak ${book.peakMb < 300 ? 'ok' : 'MISSED'} (< 300 MB), ratio ${ratio >= 0.7 ? 'ok' : 'MISSED'}`,
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
    if (process.env.SEED_ONLY !== '1') {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    }
  }
}

if (process.argv[2] === '--child') await child();
else await main();
