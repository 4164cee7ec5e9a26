/**
 * bench:scale — a year of history at `SCALE_PAYMENTS` payments (default 10,000,000),
 * synthesized straight in PostgreSQL (bench/scale-synth.ts: deposits, cashouts, refunds, test and crypto
 * deposits, late rejections, exceptions, with intents, mirrors, status history, entries, postings,
 * running balances and daily snapshots that `db verify` accepts), then measured at that size and, where
 * a target compares, against an empty ledger in the same run:
 *
 * - the reconciler (`applyObservations`, batches of 500): observations/s on the full ledger / on an empty one
 *   (two rounds alternating, the better of each);
 * - the balances: the page (`/balances`, signed in) and the API (`GET /api/v1/balances`); the charts page
 *   (`/balances/charts`) beside them, without a target;
 * - payment look-up by each id kind (API `/payments/lookup?idKind=`), and the page's search by any id;
 * - the exceptions page with each filter (type, state, age) and all three;
 * - a month's settlement workbook: `payrecon report settlement` in a child process, its wall time and
 *   peak RSS (/usr/bin/time);
 * - the incremental verification (last 25 h) and the full one (FULL=0 skips it);
 * - database size per million payments.
 *
 * Each read is the median of `REPEAT` (default 5) after one warm-up. Prints each figure beside its target,
 * then `targets: met` or the list not met (exit code 1 then).
 *
 *   SCALE_PAYMENTS (default 10000000), SCALE_OBSERVATIONS (reconciler, default 20000), REPEAT (default 5),
 *   SCALE_LAST_DAY (payments created in the last 24 hours, default their even share: e.g. 27400, a
 *   10,000,000-payment year's day, to measure the incremental verification of such a day on a smaller year),
 *   SCALE_MONTH_PAYMENTS (default 0: an even year; else that many payments in the last whole calendar month,
 *     the workbook's, and the rest over the other eleven: a month as dense as a bigger year's),
 *   SCALE_WORKERS (connections synthesizing side by side, default 2), SCALE_UNLOGGED=0 (load logged tables),
 *   SCALE_REUSE=<database> (measure a database an earlier run kept with BENCH_KEEP=1, without synthesizing;
 *     it is kept), SCALE_ONLY=<parts> (comma list of size, reads, reconciler, workbook, verify; default all),
 *   SCALE_WORKBOOK_PROFILE=<dir> (the workbook's child writes a V8 CPU profile there),
 *   FULL=0 (no full verification), WORKBOOK=0 (no workbook), BENCH_KEEP=1 (keep the database),
 *   BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres)
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import { createDb, migrateToLatest } from '../src/db/connection.ts';
import { applyObservations, recordIntents } from '../src/db/ledger/service.ts';
import { verifyLedger } from '../src/db/ledger/verify.ts';
import type { Db } from '../src/db/schema.ts';
import { withLedgerTransaction } from '../src/db/transaction.ts';
import type { Intent, Observation } from '../src/domain/observation.ts';
import { lastWholeMonth, synthesizeScale } from './scale-synth.ts';
import { signedInApi, signedInWeb } from './signed-in.ts';
import { loadAverage, medianMs } from './timing.ts';

/** A whole-number knob from the environment, or one line naming it and its rule and exit code 2. */
function wholeEnv(name: string, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    process.stderr.write(`bench:scale: ${name} must be a whole number from ${min} to ${max} (got ${text})\n`);
    process.exit(2);
  }
  return n;
}

const ADMIN = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const PAYMENTS = wholeEnv('SCALE_PAYMENTS', 10_000_000, 20);
const MONTH_PAYMENTS = wholeEnv('SCALE_MONTH_PAYMENTS', 0, 0, PAYMENTS);
const LAST_DAY =
  process.env.SCALE_LAST_DAY === undefined ? undefined : wholeEnv('SCALE_LAST_DAY', 0, 1, PAYMENTS - 1);
const WORKERS = wholeEnv('SCALE_WORKERS', 2, 1, 16);
const UNLOGGED = process.env.SCALE_UNLOGGED !== '0';
const OBSERVATIONS = wholeEnv('SCALE_OBSERVATIONS', 20_000, 1);
const REPEAT = wholeEnv('REPEAT', 5, 1);
const FULL = process.env.FULL !== '0';
const REUSE = process.env.SCALE_REUSE ?? '';
if (REUSE !== '' && !/^[a-z_][a-z0-9_]*$/.test(REUSE)) {
  process.stderr.write(
    `bench:scale: SCALE_REUSE must name a database (lower case, digits, _), got ${REUSE}\n`,
  );
  process.exit(2);
}
const PARTS = ['size', 'reads', 'reconciler', 'workbook', 'verify'] as const;
const ONLY = (process.env.SCALE_ONLY ?? PARTS.join(',')).split(',').map((p) => p.trim());
for (const p of ONLY) {
  if (!(PARTS as readonly string[]).includes(p)) {
    process.stderr.write(`bench:scale: SCALE_ONLY must list parts among ${PARTS.join(', ')} (got ${p})\n`);
    process.exit(2);
  }
}
const part = (p: (typeof PARTS)[number]) => ONLY.includes(p);
const WORKBOOK = process.env.WORKBOOK !== '0' && part('workbook');
const PROFILE = process.env.SCALE_WORKBOOK_PROFILE ?? '';
/** What a kept database remembers of its synthesis (its COMMENT), for SCALE_REUSE. */
const COMMENT_PREFIX = 'payrecon bench:scale ';
const BATCH = 500;
const DAY = 86_400_000;

const load = loadAverage;
const out = (s: string) => process.stdout.write(`${s}\n`);
const fmt = (ms: number) => (ms < 100 ? ms.toFixed(1) : ms.toFixed(0));

function urlFor(name: string): string {
  const u = new URL(ADMIN);
  u.pathname = `/${name}`;
  return u.toString();
}

const median = (fn: () => Promise<unknown>) => medianMs(fn, REPEAT, 1);

interface Row {
  what: string;
  figure: string;
  target: string;
  met: boolean | null;
}
const rows: Row[] = [];
function report(what: string, figure: string, target: string, met: boolean | null): void {
  rows.push({ what, figure, target, met });
  out(
    `${what.padEnd(44)} ${figure.padEnd(34)} ${target ? `[target ${target}: ${met ? 'met' : 'NOT met'}]` : ''}`,
  );
}

/**
 * Readings of `entities` new payments of merchant account m1 (ids above the synthesized ones): deposits
 * completing, cashouts settling or cancelled, refunds of the new deposits; three or four readings each,
 * spread over several batches. Same set for the empty and the full ledger.
 */
function readings(total: number, base: number): { observations: Observation[]; intents: Intent[] } {
  const observations: { key: number; o: Observation }[] = [];
  const intents: Intent[] = [];
  const t0 = Date.now() - 3_600_000;
  const entities = Math.ceil(total / 3);
  for (let i = 0; i < entities; i++) {
    const kind = i % 10 < 6 ? 'deposit' : i % 10 < 9 ? 'cashout' : 'refund';
    const id = String(base + i);
    const amount = BigInt(1_000 + ((i * 7919) % 500_000));
    const fee = kind === 'deposit' ? (amount * 3n) / 100n : null;
    const path =
      kind === 'deposit'
        ? ['PENDING', 'COMPLETED', 'COMPLETED']
        : i % 2 === 0
          ? ['PENDING', 'DELIVERED', 'COMPLETED']
          : ['PENDING', 'CANCELLED', 'CANCELLED'];
    path.forEach((status, step) => {
      observations.push({
        key: i + step * 400,
        o: {
          eventId: `scale-${id}-${step}`,
          kind,
          account: 'm1',
          entityId: id,
          externalRef: kind === 'refund' ? null : `scale-ref-${id}`,
          status,
          observedAt: new Date(t0 + i * 10 + step * 60_000),
          source: step === 2 ? 'poll' : 'webhook',
          currency: kind === 'cashout' ? null : 'BRL',
          amount: kind === 'cashout' ? null : kind === 'refund' ? amount / 2n : amount,
          feeAmount: fee,
          feeCurrency: fee === null ? null : 'BRL',
          feeOnPayer: kind === 'deposit' ? false : null,
          test: false,
          crypto: false,
          statusReason: null,
          payerVerification: kind === 'deposit' ? 'MATCH' : null,
          rejectionCode: null,
          rejectionReason: null,
          parentDepositId: kind === 'refund' ? String(base + i - 9) : null,
          bankReference: null,
          details: {},
        },
      });
    });
    intents.push({
      intentId: `scale-intent-${id}`,
      operation: kind,
      account: 'm1',
      externalRef: kind === 'refund' ? `scale-rf-${id}` : `scale-ref-${id}`,
      entityId: id,
      currency: 'BRL',
      amount: kind === 'refund' ? amount / 2n : amount,
      expectedFee: fee,
      test: false,
      crypto: false,
      feeOnPayer: false,
      parentDepositId: null,
      outcome: 'created',
      createdAt: new Date(t0 + i * 10 - 1_000),
      request: {},
      response: null,
    });
  }
  observations.sort((a, b) => a.key - b.key);
  return { observations: observations.slice(0, total).map((x) => x.o), intents };
}

/** Observations/s of the reconciler applying `set` in batches of BATCH (intents recorded first, untimed). */
async function reconcilerRate(db: Db, set: ReturnType<typeof readings>): Promise<number> {
  for (let i = 0; i < set.intents.length; i += BATCH) {
    const chunk = set.intents.slice(i, i + BATCH);
    await withLedgerTransaction(db, (trx) => recordIntents(trx, chunk));
  }
  const t0 = performance.now();
  for (let i = 0; i < set.observations.length; i += BATCH) {
    const chunk = set.observations.slice(i, i + BATCH);
    await withLedgerTransaction(db, (trx) => applyObservations(trx, chunk));
  }
  return set.observations.length / ((performance.now() - t0) / 1000);
}

interface Synthesized {
  payments: number;
  monthPayments: number;
  end: Date;
}

/** What an earlier run kept (SCALE_REUSE): its parameters from the database's comment. */
async function keptSynthesis(admin: pg.Client, name: string): Promise<Synthesized> {
  const { rows } = await admin.query<{ c: string | null }>(
    `SELECT shobj_description(oid, 'pg_database') AS c FROM pg_database WHERE datname = $1`,
    [name],
  );
  const comment = rows[0]?.c ?? '';
  if (rows.length === 0 || !comment.startsWith(COMMENT_PREFIX)) {
    process.stderr.write(
      `bench:scale: SCALE_REUSE must name a database kept by bench:scale (BENCH_KEEP=1); ${name} ${rows.length === 0 ? 'does not exist' : 'is not one'}\n`,
    );
    process.exit(2);
  }
  const saved = JSON.parse(comment.slice(COMMENT_PREFIX.length)) as {
    payments: number;
    monthPayments: number;
    end: string;
  };
  return { payments: saved.payments, monthPayments: saved.monthPayments, end: new Date(saved.end) };
}

async function main(): Promise<void> {
  const name = REUSE || `payrecon_bench_scale_${randomBytes(4).toString('hex')}`;
  const emptyName = `payrecon_bench_scale_${randomBytes(4).toString('hex')}_empty`;
  const admin = new pg.Client({ connectionString: ADMIN });
  await admin.connect();
  const kept = REUSE ? await keptSynthesis(admin, name) : null;
  if (!kept) await admin.query(`CREATE DATABASE ${name}`);
  await admin.query(`CREATE DATABASE ${emptyName}`);
  const db = createDb(urlFor(name), Math.max(4, WORKERS));
  const empty = createDb(urlFor(emptyName), 2);
  const dir = await mkdtemp(join(tmpdir(), 'payrecon-scale-'));
  let failed = false;
  try {
    // A kept database gains the migrations that landed since it was synthesized (as a deployment would).
    await migrateToLatest(db);
    await migrateToLatest(empty);
    const version = await sql<{ v: string }>`SELECT current_setting('server_version') AS v`.execute(db);
    let t = performance.now();
    let synth: Synthesized;
    if (kept) {
      synth = kept;
      out(
        `bench:scale  PostgreSQL ${version.rows[0]!.v}  reusing ${name}: ${kept.payments.toLocaleString('en')} payments ` +
          `over 365 days to ${kept.end.toISOString()}${kept.monthPayments ? `, ${kept.monthPayments.toLocaleString('en')} in the last whole month` : ''}, load ${load()}`,
      );
    } else {
      out(
        `bench:scale  PostgreSQL ${version.rows[0]!.v}  ${PAYMENTS.toLocaleString('en')} payments over 365 days` +
          `${MONTH_PAYMENTS ? `, ${MONTH_PAYMENTS.toLocaleString('en')} of them in the last whole month` : ''}` +
          `${LAST_DAY === undefined ? '' : ` (${LAST_DAY.toLocaleString('en')} of them in the last 24 hours)`}, ` +
          `${WORKERS} workers, ${UNLOGGED ? 'unlogged load' : 'logged load'}, load ${load()}`,
      );
      // ---------------------------------------------------------------- the year
      let lastShown = 0;
      const timings: Record<string, number> = {};
      const made = await synthesizeScale(db, {
        payments: PAYMENTS,
        monthPayments: MONTH_PAYMENTS,
        ...(LAST_DAY === undefined ? {} : { lastDay: LAST_DAY }),
        workers: WORKERS,
        unlogged: UNLOGGED,
        timings,
        onProgress: (done, total) => {
          if (performance.now() - lastShown > 30_000 || done === total) {
            lastShown = performance.now();
            process.stderr.write(
              `  synthesized ${done.toLocaleString('en')} / ${total.toLocaleString('en')} payments, ` +
                `${((performance.now() - t) / 1000).toFixed(0)} s, load ${load()}\n`,
            );
          }
        },
      });
      const synthS = (performance.now() - t) / 1000;
      out(
        `synthesized in ${synthS.toFixed(0)} s (${Math.round(PAYMENTS / synthS).toLocaleString('en')} payments/s): ${Object.entries(
          made.rows,
        )
          .map(([k, v]) => `${k} ${v.toLocaleString('en')}`)
          .join(', ')}`,
      );
      out(
        `  time per part (summed over the workers where they share it): ${Object.entries(timings)
          .map(([k, v]) => `${k} ${(v / 1000).toFixed(1)} s`)
          .join(', ')}`,
      );
      synth = { payments: PAYMENTS, monthPayments: MONTH_PAYMENTS, end: made.end };
      const saved = JSON.stringify({ ...synth, end: synth.end.toISOString() });
      await admin.query(`COMMENT ON DATABASE ${name} IS '${COMMENT_PREFIX}${saved}'`);
    }
    const payments = synth.payments;

    if (part('size')) {
      const size = await sql<{
        bytes: string;
      }>`SELECT pg_database_size(current_database())::text AS bytes`.execute(db);
      const bytes = Number(size.rows[0]!.bytes);
      report(
        'database size',
        `${(bytes / 2 ** 30).toFixed(2)} GiB = ${((bytes / 2 ** 30) * (1e6 / payments)).toFixed(2)} GiB per million payments`,
        '',
        null,
      );
    }

    // ---------------------------------------------------------------- the page and the API
    if (part('reads')) {
      const web = await signedInWeb(db, dir);
      const page = async (url: string) => {
        const res = await web.app.inject({
          method: 'GET',
          url,
          headers: { accept: 'text/html', cookie: web.cookie },
        });
        // Only the search may answer 303 (one match opens its page): a page that redirects (to the sign-in,
        // say) would be timed as a redirect.
        const redirects = url.startsWith('/payments?q=') && res.headers.location?.startsWith('/payments/');
        if (res.statusCode !== 200 && !(res.statusCode === 303 && redirects))
          throw new Error(`${url} answered ${res.statusCode}`);
      };
      const { app: api, authorization, prefix } = await signedInApi(db, dir);
      const apiGet = async (path: string) => {
        const res = await api.inject({ method: 'GET', url: `${prefix}${path}`, headers: { authorization } });
        if (res.statusCode !== 200)
          throw new Error(`${path} answered ${res.statusCode}: ${res.body.slice(0, 200)}`);
      };
      const balancesPage = await median(() => page('/balances'));
      report('balances page (GET /balances)', `${fmt(balancesPage)} ms`, '< 20 ms', balancesPage < 20);
      // The charts (30 days of snapshots and mirrors, open exceptions) off the balances page: no target.
      const chartsPage = await median(() => page('/balances/charts'));
      report('balance charts page (GET /balances/charts)', `${fmt(chartsPage)} ms`, '', null);
      const balancesApi = await median(() => apiGet('/balances'));
      report('balances API (GET /api/v1/balances)', `${fmt(balancesApi)} ms`, '< 20 ms', balancesApi < 20);

      // Ids from the middle of the year, each of the kind it names.
      const mid = Math.floor(payments / 2);
      const pick = async (kind: string) => {
        const r = await sql<{ entity_id: string; external_ref: string | null; intent_id: string }>`
          SELECT entity_id, external_ref, intent_id FROM mirrors
          WHERE entity_kind = ${kind} AND entity_id >= ${String(1_000_000_000 + mid)}
          ORDER BY entity_id LIMIT 1`.execute(db);
        return r.rows[0]!;
      };
      const [deposit, cashout, refund] = [await pick('deposit'), await pick('cashout'), await pick('refund')];
      const lookups: [string, string][] = [
        ['deposit_id', deposit.entity_id],
        ['invoice_id', deposit.external_ref!],
        ['cashout_id', cashout.entity_id],
        ['external_id', cashout.external_ref!],
        ['refund_id', refund.entity_id],
        ['intent_id', deposit.intent_id],
      ];
      for (const [kind, id] of lookups) {
        const ms = await median(() => apiGet(`/payments/lookup?id=${encodeURIComponent(id)}&idKind=${kind}`));
        report(`look-up by ${kind} (API)`, `${fmt(ms)} ms`, '< 20 ms', ms < 20);
      }
      for (const [kind, id] of [lookups[1]!, lookups[5]!]) {
        const ms = await median(() => page(`/payments?q=${encodeURIComponent(id)}`));
        report(`look-up by any id (page search, a ${kind})`, `${fmt(ms)} ms`, '< 20 ms', ms < 20);
      }

      for (const [label, query] of [
        ['no filter', ''],
        ['type', '?type=LATE_REJECTION'],
        ['state', '?state=open'],
        ['age', '?age=gt7d'],
        ['type + state + age', '?type=FEE_MISMATCH&state=acknowledged&age=3to7d'],
      ] as const) {
        const ms = await median(() => page(`/exceptions${query}`));
        report(`exceptions page, ${label}`, `${fmt(ms)} ms`, '< 200 ms', ms < 200);
      }
      await web.app.close();
      await api.close();
    }

    // ---------------------------------------------------------------- the reconciler, empty and full
    // Two rounds, empty and full alternating on fresh payments, the better rate of each: the machine is shared.
    // Entity ids above the synthesized ones, different in every run (a kept database is measured again).
    if (part('reconciler')) {
      const entities = Math.ceil(OBSERVATIONS / 3);
      const base = 9_000_000_000 + (Math.floor(Date.now() / 1000) % 1_000_000) * 2 * entities;
      let emptyRate = 0;
      let fullRate = 0;
      for (const b of [base, base + entities]) {
        const set = readings(OBSERVATIONS, b);
        emptyRate = Math.max(emptyRate, await reconcilerRate(empty, set));
        fullRate = Math.max(fullRate, await reconcilerRate(db, set));
      }
      report(
        'reconciler at size / on an empty ledger',
        `${Math.round(fullRate)} / ${Math.round(emptyRate)} obs/s = ${(fullRate / emptyRate).toFixed(2)}`,
        '>= 0.8',
        fullRate / emptyRate >= 0.8,
      );
    }

    // ---------------------------------------------------------------- a month's workbook
    if (WORKBOOK) {
      // The last whole calendar month of the year (UTC business days): the dense one with SCALE_MONTH_PAYMENTS.
      const month = lastWholeMonth(synth.end);
      const first = month.start;
      const last = new Date(month.end.getTime() - DAY);
      const day = (d: Date) => d.toISOString().slice(0, 10);
      const lines = await sql<{ n: string }>`
        SELECT count(*)::text AS n FROM postings WHERE created_at >= ${month.start} AND created_at < ${month.end}`.execute(
        db,
      );
      const file = join(dir, 'settlement.xlsx');
      t = performance.now();
      // The command as a user runs it: `bin/payrecon.mjs` starts the report in a child node with its own
      // V8 flags and waits for it. `/usr/bin/time` gives the peak of the largest process; the memory the
      // command holds is the launcher's and the report's together, sampled from /proc every 50 ms.
      const child = spawn(
        '/usr/bin/time',
        [
          '-f',
          'maxrss_kb=%M',
          process.execPath,
          ...(PROFILE ? ['--cpu-prof', '--cpu-prof-dir', PROFILE] : []),
          'bin/payrecon.mjs',
          'report',
          'settlement',
          '--from',
          day(first),
          '--to',
          day(last),
          '--out',
          file,
          '--time-zone',
          'UTC',
          '--database-url',
          urlFor(name),
          '--quiet',
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
      let stderr = '';
      child.stderr.setEncoding('utf8').on('data', (s: string) => {
        stderr += s;
      });
      let treePeakKb = 0;
      const sampler = setInterval(() => {
        if (child.pid !== undefined) treePeakKb = Math.max(treePeakKb, treeRssKb(child.pid, false));
      }, 50);
      const status = await new Promise<number | null>((done) => child.on('close', (code) => done(code)));
      clearInterval(sampler);
      const seconds = (performance.now() - t) / 1000;
      const rss = Number(/maxrss_kb=(\d+)/.exec(stderr)?.[1] ?? Number.NaN) / 1024;
      const treeRss = treePeakKb / 1024;
      if (status !== 0) throw new Error(`payrecon report settlement: ${stderr.slice(-2000)}`);
      const xlsx = await stat(file);
      report(
        `settlement workbook ${day(first)}..${day(last)}`,
        `${seconds.toFixed(0)} s, ${treeRss.toFixed(0)} MB peak RSS (largest process ${rss.toFixed(0)} MB)${PROFILE ? ' (CPU profiled)' : ''}`,
        '< 180 s, < 300 MB',
        seconds < 180 && treeRss < 300 && rss < 300,
      );
      const n = Number(lines.rows[0]!.n);
      out(
        `  ${n.toLocaleString('en')} postings in the month (${Math.round(n / seconds).toLocaleString('en')} lines/s), workbook ${(xlsx.size / 2 ** 20).toFixed(0)} MiB (and its CSV files)`,
      );
    }

    // ---------------------------------------------------------------- verification
    if (part('verify')) {
      t = performance.now();
      const incTimings: Record<string, number> = {};
      const inc = await verifyLedger(db, {
        since: new Date(Date.now() - 25 * 3_600_000),
        timings: incTimings,
      });
      const incS = (performance.now() - t) / 1000;
      report(
        'incremental verification (25 h)',
        `${incS.toFixed(1)} s, ${inc.entities.toLocaleString('en')} entities, ${inc.entries.toLocaleString('en')} entries`,
        '< 30 s',
        incS < 30 && inc.ok,
      );
      out(
        `  ${((incS * 1e6) / Math.max(inc.entities, 1)).toFixed(0)} µs per entity; time per check: ${Object.entries(
          incTimings,
        )
          .map(([k, v]) => `${k} ${(v / 1000).toFixed(2)} s`)
          .join(', ')}`,
      );
      if (!inc.ok) out(`  FAILED: ${inc.failures.slice(0, 10).join('; ')}`);
      if (FULL) {
        t = performance.now();
        const full = await verifyLedger(db);
        const fullS = (performance.now() - t) / 1000;
        report(
          'full verification',
          `${fullS.toFixed(0)} s, ${full.entities.toLocaleString('en')} entities, ${full.ok ? 'all invariants hold' : 'FAILED'}`,
          '',
          null,
        );
        if (!full.ok) {
          failed = true;
          out(`  FAILED: ${full.failures.slice(0, 10).join('; ')}`);
        }
      }
    }
    out(`load average at the end: ${load()}`);
    const missed = rows.filter((r) => r.met === false).map((r) => r.what);
    out(missed.length === 0 ? 'targets: met' : `targets NOT met: ${missed.join('; ')}`);
    if (missed.length > 0 || failed) process.exitCode = 1;
  } finally {
    await db.destroy();
    await empty.destroy();
    await rm(dir, { recursive: true, force: true });
    if (process.env.BENCH_KEEP === '1' || kept) out(`kept database ${name}`);
    else await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.query(`DROP DATABASE IF EXISTS ${emptyName} WITH (FORCE)`);
    await admin.end();
  }
}

main().catch((err) => {
  process.stderr.write(`bench:scale: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});

/**
 * Resident set of a process and its descendants, in kB (Linux /proc; 0 for a process gone). `/usr/bin/time`
 * itself (`self` false) is left out: it is the measuring tool, not part of the command.
 */
function treeRssKb(pid: number, self = true): number {
  let kb = 0;
  try {
    if (self) kb += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
    for (const child of readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(' ')) {
      if (child.trim() !== '') kb += treeRssKb(Number(child));
    }
  } catch {
    // gone meanwhile
  }
  return kb;
}
