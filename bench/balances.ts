/**
 * bench:balances — the balance reads at a year's size of postings (the journal part of bench:scale
 * only: no mirrors, history or exceptions). It books
 * `BALANCE_ENTRIES` entries (default 2,000,000: deposits' credits and fees, 4,000,000 postings) spread
 * evenly over the last 365 days, over 5 merchant accounts x 2 currencies x 3 ledger accounts, straight in
 * PostgreSQL with generate_series (the postings' triggers check balance and keep the running balances),
 * then writes a year of daily snapshots and measures, each the median of `REPEAT` (default 5) reads:
 *
 * - the balances now (`balances`, the running balances) against the same read summing every posting (the
 *   query before the running balances);
 * - the balances at an instant half a year back (latest snapshot + the postings since) against the sum of
 *   every posting up to it;
 * - the incremental verification of the last day, and once the full verification (FULL=0 skips it).
 *
 * Targets (at 10,000,000 payments): balances under 20 ms; incremental verification under 30 s.
 *
 *   BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres), BENCH_KEEP=1 keeps the database
 */
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import pg from 'pg';
import { createDb, migrateToLatest } from '../src/db/connection.ts';
import { takeBalanceSnapshots } from '../src/db/ledger/balance-snapshots.ts';
import { verifyLedger } from '../src/db/ledger/verify.ts';
import { balances } from '../src/db/read-models/balances.ts';
import type { Db } from '../src/db/schema.ts';
import { loadAverage, medianMs } from './timing.ts';

const ADMIN = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const ENTRIES = Number(process.env.BALANCE_ENTRIES ?? 2_000_000);
const REPEAT = Math.max(1, Number(process.env.REPEAT ?? 5));
const FULL = process.env.FULL !== '0';
const DAY = 86_400_000;

const load = loadAverage;

const median = (fn: () => Promise<unknown>) => medianMs(fn, REPEAT, 0);

/** The balances summed over every posting (up to `at`): the read before the running balances. */
async function summedBalances(db: Db, at: Date | null): Promise<string[]> {
  const { rows } = await sql<{ balance: string }>`
    SELECT coalesce((SELECT sum(p.amount) FROM postings p
        WHERE p.merchant_account = a.merchant_account AND p.currency = a.currency AND p.book = a.book
          AND p.account = a.name AND (${at}::timestamptz IS NULL OR p.created_at <= ${at})), 0)::text AS balance
    FROM ledger_accounts a
    ORDER BY a.merchant_account, a.currency, a.book, a.name`.execute(db);
  return rows.map((r) => r.balance);
}

async function main(): Promise<void> {
  const name = `payrecon_bench_bal_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: ADMIN });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(ADMIN);
  url.pathname = `/${name}`;
  const db = createDb(url.toString(), 4);
  const lines: string[] = [];
  const out = (s: string) => {
    lines.push(s);
    process.stdout.write(`${s}\n`);
  };
  try {
    await migrateToLatest(db);
    const version = await sql<{ v: string }>`SELECT split_part(version(), ' ', 2) AS v`.execute(db);
    out(
      `bench:balances  PostgreSQL ${version.rows[0]!.v}  ${ENTRIES} entries (${2 * ENTRIES} postings) over 365 days, ` +
        `load ${load()}`,
    );
    await sql`
      INSERT INTO merchant_accounts (name) SELECT 'm' || g FROM generate_series(1, 5) g;
      INSERT INTO ledger_accounts (merchant_account, currency, book, name)
      SELECT 'm' || g, c, 'live', n FROM generate_series(1, 5) g, unnest(ARRAY['BRL', 'USD']) c,
        unnest(ARRAY['available', 'deposits', 'fees']) n`.execute(db);
    const start = Date.now() - 365 * DAY;
    const step = (365 * DAY) / ENTRIES;
    const t0 = performance.now();
    const chunk = 200_000;
    for (let from = 1; from <= ENTRIES; from += chunk) {
      const to = Math.min(ENTRIES, from + chunk - 1);
      await db.transaction().execute(async (trx) => {
        // Odd entries a deposit's credit (available +, deposits -), even ones its fee (fees +, available -).
        await sql`
          INSERT INTO journal_entries (id, idempotency_key, merchant_account, entity_kind, entity_id, effect, direction,
            seq, book, currency, amount, effective_at, created_at)
          SELECT g, 'deposit:m' || (g % 5 + 1) || ':' || (g / 2) || CASE WHEN g % 2 = 1 THEN ':credit' ELSE ':fee' END,
            'm' || (g % 5 + 1), 'deposit', (g / 2)::text, CASE WHEN g % 2 = 1 THEN 'credit' ELSE 'fee' END, 1, 1, 'live',
            CASE WHEN g % 7 = 0 THEN 'USD' ELSE 'BRL' END,
            CASE WHEN g % 2 = 1 THEN ((g * 7919) % 10000000) / 100.0 + 1 ELSE ((g * 31) % 500) / 100.0 + 0.01 END,
            to_timestamp((${start}::float8 + g * ${step}::float8) / 1000), to_timestamp((${start}::float8 + g * ${step}::float8) / 1000)
          FROM generate_series(${from}::bigint, ${to}::bigint) g`.execute(trx);
        await sql`
          INSERT INTO postings (entry_id, merchant_account, currency, book, account, amount, created_at)
          SELECT e.id, e.merchant_account, e.currency, 'live', a.account,
            CASE WHEN a.sign > 0 THEN e.amount ELSE -e.amount END, e.created_at
          FROM journal_entries e
          JOIN (VALUES ('credit', 'available', 1), ('credit', 'deposits', -1), ('fee', 'fees', 1), ('fee', 'available', -1))
            a(effect, account, sign) ON a.effect = e.effect
          WHERE e.id BETWEEN ${from} AND ${to}
          ORDER BY e.id, a.account`.execute(trx);
      });
    }
    await sql`SELECT setval('journal_entries_id_seq', ${ENTRIES})`.execute(db);
    await sql`ANALYZE`.execute(db);
    out(`booked:                  ${((performance.now() - t0) / 1000).toFixed(1)} s`);

    let t = performance.now();
    const written = await takeBalanceSnapshots(db);
    out(`snapshots (a year):      ${written} rows in ${((performance.now() - t) / 1000).toFixed(2)} s`);
    t = performance.now();
    await takeBalanceSnapshots(db);
    out(`snapshots (next hour):   ${(performance.now() - t).toFixed(1)} ms (nothing new to write)`);

    const mid = new Date(start + 182.5 * DAY);
    // Same figures both ways, or the comparison means nothing.
    const [now1, mid1] = [await balances(db), await balances(db, { at: mid })];
    const sums = await sql<{ k: string; now: string; mid: string }>`
      SELECT merchant_account || currency || account AS k, sum(amount)::text AS now,
        coalesce(sum(amount) FILTER (WHERE created_at <= ${mid}), 0)::text AS mid
      FROM postings GROUP BY 1`.execute(db);
    const byKey = new Map(sums.rows.map((r) => [r.k, r]));
    for (const [rows, field] of [
      [now1, 'now'],
      [mid1, 'mid'],
    ] as const) {
      for (const r of rows) {
        const s = byKey.get(r.merchantAccount + r.currency + r.account);
        const want = s ? BigInt(s[field].replace('.', '')) : 0n;
        if (r.balance !== want)
          throw new Error(`balance ${field} of ${r.account} is ${r.balance}, postings ${want}`);
      }
    }

    const running = await median(() => balances(db));
    const summedNow = await median(() => summedBalances(db, null));
    const atSnapshot = await median(() => balances(db, { at: mid }));
    const summedMid = await median(() => summedBalances(db, mid));
    out(
      `balances now:            ${running.toFixed(1)} ms (running balances)  vs  ${summedNow.toFixed(1)} ms summing every posting  [target < 20 ms]`,
    );
    out(
      `balances at mid-year:    ${atSnapshot.toFixed(1)} ms (snapshot + postings since)  vs  ${summedMid.toFixed(1)} ms summing every posting up to it  [target < 20 ms]`,
    );

    t = performance.now();
    const inc = await verifyLedger(db, { since: new Date(Date.now() - 25 * 3_600_000) });
    const incSeconds = (performance.now() - t) / 1000;
    out(
      `incremental verification: ${incSeconds.toFixed(2)} s, ${inc.entries} entries of the last 25 h, ` +
        `${inc.ok ? 'all invariants hold' : `FAILED: ${inc.failures.join('; ')}`}  [target < 30 s]`,
    );
    if (FULL) {
      t = performance.now();
      const full = await verifyLedger(db);
      out(
        `full verification:       ${((performance.now() - t) / 1000).toFixed(1)} s, ${full.entries} entries, ` +
          `${full.ok ? 'all invariants hold' : `FAILED: ${full.failures.join('; ')}`}`,
      );
    }
    const met = running < 20 && atSnapshot < 20 && incSeconds < 30 && inc.ok;
    out(`load average at the end: ${load()}`);
    out(`targets: ${met ? 'met' : 'NOT met'}`);
  } finally {
    await db.destroy();
    if (process.env.BENCH_KEEP !== '1') await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}

main().catch((err) => {
  process.stderr.write(
    `bench:balances: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exitCode = 1;
});
