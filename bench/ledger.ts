/**
 * bench:ledger: applies 100,000 observations in batches of 500 (one transaction each) to a fresh database
 * on a real PostgreSQL, and in the same run inserts the same posting rows with bare multi-row INSERTs
 * (same batches, same columns, no trigger, FK or lookup) as the machine's limit. Prints observations/s of
 * both and their ratio. Targets: >= 10,000 observations/s and >= 0.3 of the bare rate.
 *
 *   BENCH_DATABASE_URL (default TEST_DATABASE_URL, else postgres://postgres@127.0.0.1:5432/postgres)
 *   BENCH_OBSERVATIONS (default 100000), BENCH_BATCH (default 500), BENCH_KEEP=1 keeps the database
 */
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import pg from 'pg';
import { createDb, migrateToLatest } from '../src/db/connection.ts';
import { applyObservations, recordIntents, withLedgerTransaction } from '../src/db/ledger-service.ts';
import { verifyLedger } from '../src/db/verify.ts';
import type { Intent, Observation } from '../src/domain/observation.ts';
import type { EntityKind } from '../src/domain/statuses.ts';

const ADMIN =
  process.env.BENCH_DATABASE_URL ??
  process.env.TEST_DATABASE_URL ??
  'postgres://postgres@127.0.0.1:5432/postgres';
const TOTAL = Number(process.env.BENCH_OBSERVATIONS ?? 100_000);
const BATCH = Number(process.env.BENCH_BATCH ?? 500);

/** Small deterministic PRNG (mulberry32), so every run sees the same stream. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
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

function generate(total: number): { observations: Observation[]; intents: Intent[] } {
  const rnd = prng(42);
  const perEntity = 4;
  const entities = Math.ceil(total / perEntity);
  const placed: { key: number; o: Observation }[] = [];
  const intents: Intent[] = [];
  const t0 = Date.UTC(2026, 10, 1);
  for (let i = 0; i < entities; i++) {
    const r = rnd();
    const kind: EntityKind = r < 0.5 ? 'deposit' : r < 0.85 ? 'cashout' : 'refund';
    const id = String(3_000_000_000 + i);
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
      parentDepositId: kind === 'refund' ? String(3_000_000_000 + Math.max(0, i - 1)) : null,
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

async function main(): Promise<void> {
  const name = `payrecon_bench_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: ADMIN });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(ADMIN);
  url.pathname = `/${name}`;
  const db = createDb(url.toString(), 4);
  try {
    await migrateToLatest(db);
    const { observations, intents } = generate(TOTAL);
    const version = await sql<{ v: string }>`SELECT current_setting('server_version') AS v`.execute(db);
    process.stdout.write(
      `bench:ledger  PostgreSQL ${version.rows[0]?.v}  ${observations.length} observations, batches of ${BATCH}, ` +
        `${intents.length} intents\n`,
    );

    let t = performance.now();
    for (let i = 0; i < intents.length; i += BATCH) {
      const chunk = intents.slice(i, i + BATCH);
      await withLedgerTransaction(db, (trx) => recordIntents(trx, chunk));
    }
    const intentMs = performance.now() - t;

    // Postings booked by each batch, to replay them bare afterwards with the same grouping.
    const batchPostingIds: Array<[string, string]> = [];
    const timings: Record<string, number> = {};
    let booked = 0;
    t = performance.now();
    for (let i = 0; i < observations.length; i += BATCH) {
      const chunk = observations.slice(i, i + BATCH);
      const before = await sql<{ id: string | null }>`SELECT max(id)::text AS id FROM postings`.execute(db);
      const r = await withLedgerTransaction(db, (trx) => applyObservations(trx, chunk, { timings }));
      const after = await sql<{ id: string | null }>`SELECT max(id)::text AS id FROM postings`.execute(db);
      batchPostingIds.push([before.rows[0]?.id ?? '0', after.rows[0]?.id ?? '0']);
      booked += r.entriesBooked;
    }
    const ledgerMsGross = performance.now() - t;
    // The two max(id) probes per batch are bench bookkeeping; time them alone and subtract.
    t = performance.now();
    for (let i = 0; i < batchPostingIds.length; i++) {
      await sql`SELECT max(id)::text AS id FROM postings`.execute(db);
      await sql`SELECT max(id)::text AS id FROM postings`.execute(db);
    }
    const probeMs = performance.now() - t;
    const ledgerMs = ledgerMsGross - probeMs;

    await sql`
      CREATE TABLE bare_postings (
        id bigserial PRIMARY KEY, entry_id bigint NOT NULL, merchant_account text NOT NULL, currency text NOT NULL,
        book text NOT NULL, account text NOT NULL, amount numeric(22, 2) NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now())`.execute(db);
    const batches: {
      entry: string[];
      acc: string[];
      cur: string[];
      book: string[];
      name: string[];
      amount: string[];
    }[] = [];
    for (const [lo, hi] of batchPostingIds) {
      const { rows } = await sql<{
        entry_id: string;
        merchant_account: string;
        currency: string;
        book: string;
        account: string;
        amount: string;
      }>`SELECT entry_id, merchant_account, currency, book, account, amount::text FROM postings
         WHERE id > ${lo}::bigint AND id <= ${hi}::bigint ORDER BY id`.execute(db);
      batches.push({
        entry: rows.map((r) => r.entry_id),
        acc: rows.map((r) => r.merchant_account),
        cur: rows.map((r) => r.currency),
        book: rows.map((r) => r.book),
        name: rows.map((r) => r.account),
        amount: rows.map((r) => r.amount),
      });
    }
    const postingRows = batches.reduce((s, b) => s + b.entry.length, 0);
    t = performance.now();
    for (const b of batches) {
      await db.transaction().execute(async (trx) => {
        if (b.entry.length === 0) return;
        await sql`INSERT INTO bare_postings (entry_id, merchant_account, currency, book, account, amount)
          SELECT * FROM unnest(${b.entry}::bigint[], ${b.acc}::text[], ${b.cur}::text[], ${b.book}::text[],
            ${b.name}::text[], ${b.amount}::numeric[])`.execute(trx);
      });
    }
    const bareMs = performance.now() - t;

    const verify = await verifyLedger(db);
    const ledgerRate = observations.length / (ledgerMs / 1000);
    const bareRate = observations.length / (bareMs / 1000);
    const lines = [
      `intents recorded:        ${intents.length} in ${(intentMs / 1000).toFixed(2)} s`,
      `ledger:                  ${observations.length} observations in ${(ledgerMs / 1000).toFixed(2)} s = ${Math.round(ledgerRate)} observations/s (${booked} entries, ${postingRows} postings)`,
      `bare INSERT of postings: ${postingRows} rows in ${(bareMs / 1000).toFixed(2)} s = ${Math.round(bareRate)} observations/s equivalent`,
      `ratio ledger / bare:     ${(ledgerRate / bareRate).toFixed(3)}`,
      `targets:                 >= 10000 observations/s: ${ledgerRate >= 10_000 ? 'met' : 'NOT met'}; >= 0.3 of bare: ${ledgerRate / bareRate >= 0.3 ? 'met' : 'NOT met'}`,
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
