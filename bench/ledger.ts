/**
 * bench:ledger: applies 100,000 observations in batches of 500 (one transaction each) to a fresh database
 * on a real PostgreSQL, and in the same run inserts the same posting rows with bare multi-row INSERTs
 * (same batches, same columns, no trigger, FK or lookup) as the machine's limit. Prints observations/s of
 * both and their ratio. Targets: ledger / floor >= 0.3 (below); >= 10,000 observations/s
 * and >= 0.3 of the bare rate.
 *
 *   BENCH_DATABASE_URL (default TEST_DATABASE_URL, else postgres://postgres@127.0.0.1:5432/postgres)
 *   BENCH_OBSERVATIONS (default 100000), BENCH_BATCH (default 500), BENCH_KEEP=1 keeps the database,
 *   BENCH_STREAMS (default 1): partitions applied concurrently, one connection each (bare likewise),
 *   BENCH_KNOWN=0: no EntityStateCache (each stream keeps one by default, as the reconciler does),
 *   BENCH_WARMUP (default 20000): observations of other entities applied first in a scratch database, not
 *   measured, so the run measures a warm process as a long-running reconciler is (0: from a cold process)
 *
 * It also reports the floor of the design: every row the ledger wrote (history, entries and postings),
 * inserted again bare in the same number of statements, as JSON documents (the floor) and as one
 * array literal per column (the ledger itself sends binary arrays).
 *
 * And the ledger phase's work as counted by the server (WAL records and bytes, buffers hit, rows written,
 * HOT updates, per observation): figures a noisy machine does not move, to compare two codes by beside
 * their CPU seconds.
 */
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { sql } from 'kysely';
import pg from 'pg';
import { createDb, migrateToLatest } from '../src/db/connection.ts';
import { EntityStateCache } from '../src/db/ledger/entity-cache.ts';
import { applyObservations, recordIntents } from '../src/db/ledger/service.ts';
import { verifyLedger } from '../src/db/ledger/verify.ts';
import type { Db } from '../src/db/schema.ts';
import { withLedgerTransaction } from '../src/db/transaction.ts';
import type { Intent, Observation } from '../src/domain/observation.ts';
import type { EntityKind } from '../src/domain/statuses.ts';
import { Rng } from '../src/sandbox/rng.ts';
import { arrayLiteral } from './array-literal.ts';
import { processCpuSeconds } from './timing.ts';

/** The sandbox's seeded generator (mulberry32), so every run sees the same stream. */
const seeded = (seed: number) => {
  const rng = new Rng(seed);
  return () => rng.next();
};

const ADMIN =
  process.env.BENCH_DATABASE_URL ??
  process.env.TEST_DATABASE_URL ??
  'postgres://postgres@127.0.0.1:5432/postgres';
const TOTAL = Number(process.env.BENCH_OBSERVATIONS ?? 100_000);
const BATCH = Number(process.env.BENCH_BATCH ?? 500);
const STREAMS = Math.max(1, Number(process.env.BENCH_STREAMS ?? 1));
/** BENCH_KNOWN=0: every batch reads its entities' histories and entries (no EntityStateCache). */
const KNOWN = process.env.BENCH_KNOWN !== '0';
/** Observations applied first to other entities in a scratch database, not measured (0: none). */
const WARMUP = Number(process.env.BENCH_WARMUP ?? 20_000);

/** Stable partition of an entity id (FNV-1a), like a keyed Kafka topic. */
function partitionOf(key: string, partitions: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h % partitions;
}

/**
 * CPU seconds used so far by this process and by the server process behind the single connection (from
 * /proc, Linux only; null elsewhere). Wall time on a shared machine depends on the other load; CPU time
 * does not, so the bench also reports rates per CPU second of client plus server.
 */
async function cpuSeconds(backendPid: number | null): Promise<{ client: number; server: number } | null> {
  const own = process.cpuUsage();
  const client = (own.user + own.system) / 1e6;
  const server = backendPid === null ? null : processCpuSeconds(backendPid);
  return server === null ? null : { client, server };
}

function cpuDelta(
  a: { client: number; server: number } | null,
  b: { client: number; server: number } | null,
) {
  return a && b
    ? {
        client: b.client - a.client,
        server: b.server - a.server,
        total: b.client - a.client + b.server - a.server,
      }
    : null;
}

/** Work counters of the server, from PostgreSQL's cumulative statistics. */
interface Work {
  walRecords: bigint;
  walFpi: bigint;
  walBytes: bigint;
  blocksHit: bigint;
  blocksRead: bigint;
  inserted: bigint;
  updated: bigint;
  hot: bigint;
  deleted: bigint;
}

/**
 * The server's work so far, counted rather than timed, so a change's effect shows on a busy or noisy
 * machine where CPU seconds vary by 10-15 % from run to run: WAL records, full-page images and bytes
 * (`pg_stat_wal`: the whole cluster, so nothing else should write meanwhile), shared-buffer blocks hit
 * and read by this database, and its rows inserted, updated (of which HOT: no index entry written) and
 * deleted. `pg_stat_force_next_flush` makes this connection publish its own counts first (with one
 * stream only: another connection's counts may reach the statistics a second or more late).
 */
async function work(db: Db): Promise<Work> {
  await sql`SELECT pg_stat_force_next_flush()`.execute(db);
  const { rows } = await sql<Record<keyof Work, string>>`
    SELECT w.wal_records::text AS "walRecords", w.wal_fpi::text AS "walFpi", w.wal_bytes::text AS "walBytes",
      d.blks_hit::text AS "blocksHit", d.blks_read::text AS "blocksRead",
      t.ins::text AS inserted, t.upd::text AS updated, t.hot::text AS hot, t.del::text AS deleted
    FROM pg_stat_wal w, pg_stat_database d,
      (SELECT sum(n_tup_ins) AS ins, sum(n_tup_upd) AS upd, sum(n_tup_hot_upd) AS hot, sum(n_tup_del) AS del
        FROM pg_stat_user_tables) t
    WHERE d.datname = current_database()`.execute(db);
  const r = rows[0]!;
  const n = (x: string | null) => BigInt(x ?? '0');
  return {
    walRecords: n(r.walRecords),
    walFpi: n(r.walFpi),
    walBytes: n(r.walBytes),
    blocksHit: n(r.blocksHit),
    blocksRead: n(r.blocksRead),
    inserted: n(r.inserted),
    updated: n(r.updated),
    hot: n(r.hot),
    deleted: n(r.deleted),
  };
}

/** One line of the work done between two readings, per observation (bigint counts, two decimals). */
function workLine(a: Work, b: Work, observations: number): string {
  const per = (x: bigint) => (Number((x * 100n) / BigInt(observations)) / 100).toFixed(2);
  const d = (k: keyof Work) => b[k] - a[k];
  return (
    `WAL ${per(d('walRecords'))} records, ${per(d('walBytes'))} bytes, ${per(d('walFpi'))} full-page images; ` +
    `buffers hit ${per(d('blocksHit'))}, read ${per(d('blocksRead'))}; rows inserted ${per(d('inserted'))}, ` +
    `updated ${per(d('updated'))} (HOT ${per(d('hot'))}), deleted ${per(d('deleted'))} (per observation)`
  );
}

const PATHS: Record<EntityKind, string[][]> = {
  deposit: [
    ['PENDING', 'COMPLETED', 'COMPLETED'],
    ['CREATED', 'PENDING', 'COMPLETED'],
    ['PENDING', 'EARLY_RELEASED', 'COMPLETED'],
    ['PENDING', 'EXPIRED', 'CANCELLED'],
  ],
  cashout: [
    ['PENDING', 'DELIVERED', 'COMPLETED'],
    ['ON_HOLD', 'PENDING', 'CANCELLED'],
    ['PENDING', 'DELIVERED', 'REJECTED'],
    ['PENDING', 'COMPLETED', 'REJECTED'],
  ],
  refund: [
    ['PENDING', 'DELIVERED', 'COMPLETED'],
    ['PENDING', 'INCORRECT_DETAILS', 'CANCELLED'],
  ],
};

function generate(
  total: number,
  seed = 42,
  idBase = 3_000_000_000,
): { observations: Observation[]; intents: Intent[] } {
  const rnd = seeded(seed);
  const perEntity = 4;
  const entities = Math.ceil(total / perEntity);
  const placed: { key: number; o: Observation }[] = [];
  const intents: Intent[] = [];
  const t0 = Date.UTC(2026, 10, 1);
  for (let i = 0; i < entities; i++) {
    const r = rnd();
    const kind: EntityKind = r < 0.5 ? 'deposit' : r < 0.85 ? 'cashout' : 'refund';
    const id = String(idBase + i);
    const paths = PATHS[kind];
    const path = paths[Math.floor(rnd() * paths.length)]!;
    const currency = rnd() < 0.7 ? 'BRL' : 'USD';
    const amount = BigInt(100 + Math.floor(rnd() * 5_000_000));
    const fee = kind === 'deposit' ? (amount * 3n) / 100n : null;
    const flags = { test: kind === 'deposit' && rnd() < 0.05, crypto: kind === 'deposit' && rnd() < 0.05 };
    const make = (status: string, step: number, n: number): Observation => ({
      eventId: `${id}-${n}`,
      kind,
      account: 'bench',
      entityId: id,
      externalRef: kind === 'refund' ? null : `ref-${id}`,
      status,
      observedAt: new Date(t0 + i * 1_000 + step * 600_000),
      source: n % 2 === 0 ? 'webhook' : 'poll',
      currency: kind === 'cashout' ? null : currency,
      amount: kind === 'cashout' ? null : amount,
      feeAmount: fee,
      feeCurrency: fee === null ? null : currency,
      feeOnPayer: kind === 'deposit' ? rnd() < 0.2 : null,
      test: flags.test,
      crypto: flags.crypto && !flags.test,
      statusReason: null,
      payerVerification: kind === 'deposit' ? 'MATCH' : null,
      rejectionCode: null,
      rejectionReason: null,
      parentDepositId: kind === 'refund' ? String(idBase + Math.max(0, i - 1)) : null,
      bankReference: null,
      details: { bank: 'bench' },
    });
    const obs = path.map((s, step) => make(s, step, step));
    // The fourth reading is a redelivered notification (same event id) or a repeated poll.
    obs.push(rnd() < 0.5 ? obs[1]! : make(path[path.length - 1]!, path.length, path.length));
    obs.forEach((o, j) => {
      // Readings of one entity spread over several batches, sometimes out of order.
      placed.push({ key: i + j * 350 + Math.floor(rnd() * 200), o });
    });
    if (kind !== 'refund' || rnd() < 0.5) {
      intents.push({
        intentId: `intent-${id}`,
        operation: kind,
        account: 'bench',
        externalRef: kind === 'refund' ? `rf-${id}` : `ref-${id}`,
        entityId: id,
        currency,
        amount,
        expectedFee: fee,
        test: flags.test,
        crypto: flags.crypto && !flags.test,
        feeOnPayer: false,
        parentDepositId: null,
        outcome: 'created',
        createdAt: new Date(t0 + i * 1_000),
        request: {},
        response: null,
      });
    }
  }
  placed.sort((a, b) => a.key - b.key);
  return { observations: placed.slice(0, total).map((p) => p.o), intents };
}

/**
 * A reconciler runs for days: what it costs per observation is the rate once V8 has compiled its code
 * (about 0.7 s of the client's CPU over the first 40 batches goes to the optimizing compiler).
 * So the process first applies `WARMUP` observations of other entities (another seed, other ids) in a
 * scratch database of its own, dropped after, and the measured run starts warm; its database and
 * connection are new, as before. BENCH_WARMUP=0 measures from a cold process.
 */
async function warmUp(admin: pg.Client, url: URL): Promise<number> {
  if (WARMUP <= 0) return 0;
  const name = `${url.pathname.slice(1)}_warm`;
  await admin.query(`CREATE DATABASE ${name}`);
  const warmUrl = new URL(url);
  warmUrl.pathname = `/${name}`;
  const db = createDb(warmUrl.toString(), 1);
  const t = performance.now();
  try {
    await migrateToLatest(db);
    const { observations, intents } = generate(WARMUP, 7, 4_000_000_000);
    for (let i = 0; i < intents.length; i += BATCH) {
      const chunk = intents.slice(i, i + BATCH);
      await withLedgerTransaction(db, (trx) => recordIntents(trx, chunk));
    }
    const known = KNOWN ? new EntityStateCache() : undefined;
    for (let i = 0; i < observations.length; i += BATCH) {
      const chunk = observations.slice(i, i + BATCH);
      await withLedgerTransaction(db, (trx) => applyObservations(trx, chunk, { known }));
    }
  } finally {
    await db.destroy();
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  }
  return performance.now() - t;
}

async function main(): Promise<void> {
  const name = `payrecon_bench_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: ADMIN });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(ADMIN);
  url.pathname = `/${name}`;
  const warmMs = await warmUp(admin, url);
  // One connection: the run is sequential, and the server process's CPU time can be read from /proc.
  const db = createDb(url.toString(), 1);
  try {
    await migrateToLatest(db);
    const { observations, intents } = generate(TOTAL);
    const version = await sql<{ v: string }>`SELECT current_setting('server_version') AS v`.execute(db);
    process.stdout.write(
      `bench:ledger  PostgreSQL ${version.rows[0]?.v}  ${observations.length} observations, batches of ${BATCH}, ` +
        `${intents.length} intents, ${STREAMS} stream(s), entity state cache ${KNOWN ? 'on' : 'off'}\n` +
        (WARMUP > 0
          ? `warm-up (not measured): ${WARMUP} observations of other entities in a scratch database, ${(warmMs / 1000).toFixed(2)} s\n`
          : 'warm-up: none (BENCH_WARMUP=0): measured from a cold process\n'),
    );

    const pidRow = await sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.execute(db);
    const backendPid = pidRow.rows[0]?.pid ?? null;
    let t = performance.now();
    for (let i = 0; i < intents.length; i += BATCH) {
      const chunk = intents.slice(i, i + BATCH);
      await withLedgerTransaction(db, (trx) => recordIntents(trx, chunk));
    }
    const intentMs = performance.now() - t;

    // Observations are keyed by entity like the Kafka topic: with BENCH_STREAMS > 1 each stream (a
    // partition) is applied in its own batches on its own connection, concurrently.
    const streamObs: Observation[][] = Array.from({ length: STREAMS }, () => []);
    for (const o of observations) streamObs[partitionOf(o.entityId, STREAMS)]!.push(o);
    const dbs = [db, ...Array.from({ length: STREAMS - 1 }, () => createDb(url.toString(), 1))];
    const timings: Record<string, number> = {};
    let booked = 0;
    let batchCount = 0;
    const work0 = STREAMS === 1 ? await work(db) : null;
    const cpuLedger0 = STREAMS === 1 ? await cpuSeconds(backendPid) : null;
    t = performance.now();
    await Promise.all(
      dbs.map(async (conn, s) => {
        const list = streamObs[s]!;
        // As the reconciler does: what its connection wrote last (src/consumers/reconciler.ts).
        const known = KNOWN ? new EntityStateCache() : undefined;
        for (let i = 0; i < list.length; i += BATCH) {
          const chunk = list.slice(i, i + BATCH);
          // The wait for the commit (the WAL flush: wall time, little CPU) beside the steps.
          let applied = 0;
          const r = await withLedgerTransaction(conn, async (trx) => {
            const x = await applyObservations(trx, chunk, { timings, known });
            applied = performance.now();
            return x;
          });
          timings.commit = (timings.commit ?? 0) + performance.now() - applied;
          booked += r.entriesBooked;
          batchCount += 1;
        }
      }),
    );
    const ledgerMs = performance.now() - t;
    const cpuLedger1 = STREAMS === 1 ? await cpuSeconds(backendPid) : null;
    const work1 = STREAMS === 1 ? await work(db) : null;

    await sql`
      CREATE TABLE bare_postings (
        id bigserial PRIMARY KEY, entry_id bigint NOT NULL, merchant_account text NOT NULL, currency text NOT NULL,
        book text NOT NULL, account text NOT NULL, amount numeric(22, 2) NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now())`.execute(db);
    const { rows: all } = await sql<{
      entry_id: string;
      merchant_account: string;
      currency: string;
      book: string;
      account: string;
      amount: string;
    }>`SELECT entry_id, merchant_account, currency, book, account, amount::text FROM postings ORDER BY id`.execute(
      db,
    );
    const postingRows = all.length;
    // The same rows in as many multi-row INSERTs as the ledger had batches, over as many connections.
    const per = Math.ceil(postingRows / batchCount);
    const chunks: (typeof all)[] = [];
    for (let i = 0; i < postingRows; i += per) chunks.push(all.slice(i, i + per));
    const cpuBare0 = STREAMS === 1 ? await cpuSeconds(backendPid) : null;
    t = performance.now();
    await Promise.all(
      dbs.map(async (conn, s) => {
        for (let c = s; c < chunks.length; c += STREAMS) {
          const rows = chunks[c]!;
          await conn.transaction().execute(async (trx) => {
            await sql`INSERT INTO bare_postings (entry_id, merchant_account, currency, book, account, amount)
              SELECT * FROM unnest(${rows.map((r) => r.entry_id)}::bigint[], ${rows.map((r) => r.merchant_account)}::text[],
                ${rows.map((r) => r.currency)}::text[], ${rows.map((r) => r.book)}::text[],
                ${rows.map((r) => r.account)}::text[], ${rows.map((r) => r.amount)}::numeric[])`.execute(trx);
          });
        }
      }),
    );
    const bareMs = performance.now() - t;
    const cpuBare1 = STREAMS === 1 ? await cpuSeconds(backendPid) : null;

    // The floor of this design: every row the ledger had to write (history, entries, postings), inserted
    // again bare (copies without index, trigger or constraint) in as many multi-row INSERTs as the ledger
    // had batches, each as a JSON array per statement (as the ledger sent its rows when this floor was
    // defined; the target is checked against it). Mirror updates not
    // included.
    const floorTables = ['status_history', 'journal_entries', 'postings'] as const;
    const floorRows: Record<string, unknown[]> = {};
    for (const table of floorTables) {
      await sql`CREATE TABLE ${sql.id(`floor_${table}`)} (LIKE ${sql.id(table)} INCLUDING DEFAULTS)`.execute(
        db,
      );
      const { rows } = await sql<{
        r: unknown;
      }>`SELECT to_json(t) AS r FROM ${sql.id(table)} t ORDER BY id`.execute(db);
      floorRows[table] = rows.map((x) => x.r);
    }
    t = performance.now();
    await Promise.all(
      dbs.map(async (conn, s) => {
        for (let c = s; c < batchCount; c += STREAMS) {
          await conn.transaction().execute(async (trx) => {
            for (const table of floorTables) {
              const rows = floorRows[table]!;
              const per = Math.ceil(rows.length / batchCount);
              const chunk = rows.slice(c * per, (c + 1) * per);
              if (chunk.length === 0) continue;
              await sql`INSERT INTO ${sql.id(`floor_${table}`)}
                SELECT * FROM json_populate_recordset(NULL::${sql.id(`floor_${table}`)}, ${JSON.stringify(chunk)}::json)`.execute(
                trx,
              );
            }
          });
        }
      }),
    );
    const floorMs = performance.now() - t;
    const floorCount = floorTables.reduce((n, table) => n + floorRows[table]!.length, 0);

    // The same floor sent as array literals: one per column,
    // read by `unnest` (no JSON for the server to parse; the ledger itself sends binary arrays). Reported beside the floor above, which is the
    // one the target is checked against.
    const arrayTables: {
      table: string;
      columns: { name: string; type: string }[];
      rows: (string | null)[][];
    }[] = [];
    for (const table of floorTables) {
      const { rows: cols } = await sql<{ name: string; type: string }>`
        SELECT a.attname AS name, format_type(a.atttypid, NULL) AS type FROM pg_attribute a
        WHERE a.attrelid = ${table}::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`.execute(
        db,
      );
      await sql`CREATE TABLE ${sql.id(`floor2_${table}`)} (LIKE ${sql.id(table)} INCLUDING DEFAULTS)`.execute(
        db,
      );
      const { rows: texts } = await sql<{ r: (string | null)[] }>`
        SELECT ARRAY[${sql.join(cols.map((c) => sql`${sql.ref(c.name)}::text`))}] AS r
        FROM ${sql.id(table)} ORDER BY id`.execute(db);
      arrayTables.push({ table, columns: cols, rows: texts.map((x) => x.r) });
    }
    t = performance.now();
    await Promise.all(
      dbs.map(async (conn, s) => {
        for (let c = s; c < batchCount; c += STREAMS) {
          await conn.transaction().execute(async (trx) => {
            for (const { table, columns, rows } of arrayTables) {
              const per = Math.ceil(rows.length / batchCount);
              const chunk = rows.slice(c * per, (c + 1) * per);
              if (chunk.length === 0) continue;
              const arrays = columns.map(
                (col, i) => sql`${arrayLiteral(chunk.map((r) => r[i] ?? null))}::${sql.raw(col.type)}[]`,
              );
              await sql`INSERT INTO ${sql.id(`floor2_${table}`)} (${sql.join(columns.map((col) => sql.ref(col.name)))})
                SELECT * FROM unnest(${sql.join(arrays)})`.execute(trx);
            }
          });
        }
      }),
    );
    const floor2Ms = performance.now() - t;
    for (const extra of dbs.slice(1)) await extra.destroy();
    const cpuLedger = cpuDelta(cpuLedger0, cpuLedger1);
    const cpuBare = cpuDelta(cpuBare0, cpuBare1);
    const loadAvg = (await readFile('/proc/loadavg', 'utf8').catch(() => '?'))
      .split(' ')
      .slice(0, 3)
      .join(' ');

    const verify = await verifyLedger(db);
    const ledgerRate = observations.length / (ledgerMs / 1000);
    const bareRate = observations.length / (bareMs / 1000);
    const lines = [
      `intents recorded:        ${intents.length} in ${(intentMs / 1000).toFixed(2)} s`,
      `ledger:                  ${observations.length} observations in ${(ledgerMs / 1000).toFixed(2)} s = ${Math.round(ledgerRate)} observations/s (${booked} entries, ${postingRows} postings)`,
      `bare INSERT of postings: ${postingRows} rows in ${(bareMs / 1000).toFixed(2)} s = ${Math.round(bareRate)} observations/s equivalent`,
      `ratio ledger / bare:     ${(ledgerRate / bareRate).toFixed(3)}`,
      `floor (bare INSERT of every row written: history, entries, postings; ${floorCount} rows): ${(floorMs / 1000).toFixed(2)} s = ${Math.round(observations.length / (floorMs / 1000))} observations/s equivalent; ledger / floor ${(ledgerRate / (observations.length / (floorMs / 1000))).toFixed(3)}`,
      `floor as column arrays:  the same rows as one array literal per column: ${(floor2Ms / 1000).toFixed(2)} s = ${Math.round(observations.length / (floor2Ms / 1000))} observations/s equivalent; ledger / floor ${(ledgerRate / (observations.length / (floor2Ms / 1000))).toFixed(3)}`,
      cpuLedger !== null && cpuBare !== null
        ? `CPU (client + server):   ledger ${cpuLedger.client.toFixed(1)} + ${cpuLedger.server.toFixed(1)} s = ` +
          `${Math.round(observations.length / cpuLedger.total)} observations per CPU-second; bare ` +
          `${cpuBare.client.toFixed(2)} + ${cpuBare.server.toFixed(2)} s = ${Math.round(observations.length / cpuBare.total)}; ` +
          `ratio ${(cpuBare.total / cpuLedger.total).toFixed(3)}`
        : 'CPU (client + server):   measured with one stream on Linux only',
      work0 && work1
        ? `ledger work (counted):   ${workLine(work0, work1, observations.length)}`
        : 'ledger work (counted):   measured with one stream only (the other connections publish their counts late)',
      `load average at the end: ${loadAvg}`,
      `targets:                 ledger / floor >= 0.3: ${ledgerRate * (floorMs / 1000) >= 0.3 * observations.length ? 'met' : 'NOT met'}; >= 10000 observations/s: ${ledgerRate >= 10_000 ? 'met' : 'NOT met'}, >= 0.3 of bare: ${ledgerRate / bareRate >= 0.3 ? 'met' : 'NOT met'}`,
      `ledger time per step:    ${Object.entries(timings)
        .map(([k, v]) => `${k} ${(v / 1000).toFixed(2)} s`)
        .join(', ')}`,
      `verify after the run:    ${verify.ok ? 'all invariants hold' : `FAILED: ${verify.failures.join('; ')}`}`,
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
    if (!verify.ok) process.exitCode = 1;
  } finally {
    await db.destroy();
    if (process.env.BENCH_KEEP === '1') process.stdout.write(`kept database ${name}\n`);
    else await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}

await main();
