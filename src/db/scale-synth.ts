/**
 * A year of history written straight into PostgreSQL for `npm run bench:scale` (issue 21 point 3): payments
 * with their intents, mirrors, status history, journal entries, postings (the postings' triggers check each
 * statement and keep the running balances), exceptions and a year of daily snapshots, consistent so that the full
 * `payrecon db verify` accepts them. Set-based (generate_series, INSERT ... SELECT), chunk by chunk, on one
 * pinned connection (the path tables are temporary tables of that session); nothing goes through the
 * pipeline.
 *
 * Payment `g` (1..payments) is created at `end - 365 days + g * step`; its kind, merchant account,
 * currency, amounts and status path are functions of `g`. Blocks of 20 consecutive payments share a
 * merchant account and a currency: 11 live deposits (completed, expired, declined, released early then
 * completed or declined, fee on the payer), a test deposit, a crypto deposit, 5 cashouts (completed,
 * cancelled from hold, rejected, rejected after completion, in flight during the last day, declined) and 2
 * refunds (one of the block's first live deposit, one of its test deposit: booked in the test book;
 * completed, cancelled, in flight during the last day). Each status is one reading; each effect is booked
 * when the status that wants it is read, as the ledger would (src/domain/effects.ts, the effect table).
 */
import { type RawBuilder, sql } from 'kysely';
import { SETTLE_MS } from './balance-snapshots.ts';
import type { Db } from './schema.ts';

export interface ScaleSynthOptions {
  payments: number;
  /** The last payment's creation instant (default: three hours ago, so that every path has ended). */
  end?: Date;
  /**
   * Payments created in the last 24 hours (default: their even share, `payments / 365`), the rest spread
   * evenly over the 364 days before: a day at another volume than the year's average, e.g. a
   * 10,000,000-payment year's day (27,400) on top of a smaller history.
   */
  lastDay?: number;
  /** Payments per transaction (default 50,000). */
  chunk?: number;
  onProgress?: (done: number, total: number) => void;
  /** Milliseconds spent per table written, added up (for the bench's report). */
  timings?: Record<string, number>;
}

export interface ScaleSynthResult {
  payments: number;
  start: Date;
  end: Date;
  /** Row counts of the tables written. */
  rows: Record<string, number>;
}

export const SCALE_MERCHANT_ACCOUNTS = ['m1', 'm2', 'm3', 'm4', 'm5'] as const;
export const SCALE_CURRENCIES = ['BRL', 'USD'] as const;
const DAY_S = 86_400;

/**
 * Status paths: (path, step, status, previous status, seconds after the payment's creation). Deposits 1-8,
 * cashouts 9-14, refunds 15-17 (refunds are created an hour after their deposit).
 */
const STEPS = sql`(VALUES
  (1, 1, 'CREATED', NULL, 0), (1, 2, 'PENDING', 'CREATED', 30), (1, 3, 'COMPLETED', 'PENDING', 600),
  (2, 1, 'PENDING', NULL, 0), (2, 2, 'EXPIRED', 'PENDING', 3600), (2, 3, 'CANCELLED', 'EXPIRED', 7200),
  (3, 1, 'PENDING', NULL, 0), (3, 2, 'DECLINED', 'PENDING', 300),
  (4, 1, 'PENDING', NULL, 0), (4, 2, 'EARLY_RELEASED', 'PENDING', 60), (4, 3, 'COMPLETED', 'EARLY_RELEASED', 3600),
  (5, 1, 'PENDING', NULL, 0), (5, 2, 'EARLY_RELEASED', 'PENDING', 60), (5, 3, 'DECLINED', 'EARLY_RELEASED', 3600),
  (6, 1, 'PENDING', NULL, 0), (6, 2, 'COMPLETED', 'PENDING', 600),
  (7, 1, 'PENDING', NULL, 0), (7, 2, 'COMPLETED', 'PENDING', 600),
  (8, 1, 'PENDING', NULL, 0), (8, 2, 'APPROVED', 'PENDING', 300), (8, 3, 'COMPLETED', 'APPROVED', 1800),
  (9, 1, 'PENDING', NULL, 0), (9, 2, 'DELIVERED', 'PENDING', 600), (9, 3, 'COMPLETED', 'DELIVERED', 3600),
  (10, 1, 'ON_HOLD', NULL, 0), (10, 2, 'PENDING', 'ON_HOLD', 1800), (10, 3, 'CANCELLED', 'PENDING', 3600),
  (11, 1, 'PENDING', NULL, 0), (11, 2, 'DELIVERED', 'PENDING', 600), (11, 3, 'REJECTED', 'DELIVERED', 3600),
  (12, 1, 'PENDING', NULL, 0), (12, 2, 'DELIVERED', 'PENDING', 600), (12, 3, 'COMPLETED', 'DELIVERED', 3600),
  (12, 4, 'REJECTED', 'COMPLETED', 172800),
  (13, 1, 'PENDING', NULL, 0),
  (14, 1, 'DECLINED', NULL, 0),
  (15, 1, 'PENDING', NULL, 3600), (15, 2, 'DELIVERED', 'PENDING', 4200), (15, 3, 'COMPLETED', 'DELIVERED', 7200),
  (16, 1, 'PENDING', NULL, 3600), (16, 2, 'INCORRECT_DETAILS', 'PENDING', 4200),
  (16, 3, 'CANCELLED', 'INCORRECT_DETAILS', 7200),
  (17, 1, 'PENDING', NULL, 3600)
) AS v(path, step, status, from_status, off)`;

/** Effects booked per path: (path, effect, step whose reading books it, ordinal of the entry in the payment). */
const EFFECTS = sql`(VALUES
  (1, 'credit', 3, 0), (1, 'fee', 3, 1),
  (4, 'credit', 2, 0), (4, 'fee', 2, 1),
  (5, 'credit', 2, 0), (5, 'fee', 2, 1), (5, 'early_release_reversal', 3, 2),
  (6, 'credit', 2, 0),
  (7, 'credit', 2, 0), (7, 'fee', 2, 1),
  (8, 'crypto_approved', 2, 0), (8, 'crypto_delivered', 3, 1),
  (9, 'reserve', 1, 0), (9, 'settle', 3, 1),
  (10, 'reserve', 1, 0), (10, 'release', 3, 1),
  (11, 'reserve', 1, 0), (11, 'release', 3, 1),
  (12, 'reserve', 1, 0), (12, 'settle', 3, 1), (12, 'late_reversal', 4, 2),
  (13, 'reserve', 1, 0),
  (15, 'reserve', 1, 0), (15, 'settle', 3, 1),
  (16, 'reserve', 1, 0), (16, 'release', 3, 1),
  (17, 'reserve', 1, 0)
) AS v(path, effect, step, ord)`;

/** Entries per payment at most (entry id = payment * ENTRY_SLOTS + ordinal). */
const ENTRY_SLOTS = 3;
/** Payments are numbered from 20 (a whole first block), so that every refund's deposit exists. */
const FIRST = 20;

interface Timeline {
  /** Epoch seconds of payment number FIRST - 1 and of the last payment. */
  startS: number;
  endS: number;
  /** Seconds between two payments (up to payment `split`, then `dayStep` in the last day). */
  step: number;
  split: number;
  dayStep: number;
  end: Date;
}

/**
 * The postings of one application of each effect (src/domain/effects.ts `effectPostings`): the amount is
 * `sa * entry amount + sf * entry fee amount`; `paid_out` is `payouts` or `refunds`; the test book prefixes
 * `test_`. An early release reversal takes back the credit and the fee (merged per account, zeros dropped).
 */
const LINES = sql`(VALUES
  ('credit', 'available', 1, 0), ('credit', 'deposits', -1, 0),
  ('fee', 'fees', 1, 0), ('fee', 'available', -1, 0),
  ('early_release_reversal', 'available', -1, 1), ('early_release_reversal', 'deposits', 1, 0),
  ('early_release_reversal', 'fees', 0, -1),
  ('crypto_approved', 'crypto_in_transit', 1, 0), ('crypto_approved', 'crypto_payers', -1, 0),
  ('crypto_delivered', 'crypto_customer_wallets', 1, 0), ('crypto_delivered', 'crypto_in_transit', -1, 0),
  ('reserve', 'reserved', 1, 0), ('reserve', 'available', -1, 0),
  ('release', 'available', 1, 0), ('release', 'reserved', -1, 0),
  ('settle', 'paid_out', 1, 0), ('settle', 'reserved', -1, 0),
  ('late_reversal', 'available', 1, 0), ('late_reversal', 'paid_out', -1, 0)
) AS v(effect, account, sa, sf)`;

/** The statements that write payments `from`..`to` (synth_p holds the chunk's payments once the first ran). */
function chunkStatements(from: number, to: number, t: Timeline): [string, RawBuilder<unknown>][] {
  const { startS, endS, step, split, dayStep, end } = t;
  return [
    [
      'synth_p',
      sql`
      INSERT INTO synth_p
      SELECT g, kind, account, currency, path, amount,
        CASE WHEN kind = 'deposit' AND NOT crypto THEN amount * 3 / 100 END AS fee, test, crypto,
        CASE WHEN kind = 'cashout' THEN 'live' WHEN test THEN 'test' WHEN crypto THEN 'crypto' ELSE 'live' END AS book,
        parent, t0, (1000000000 + g)::text AS entity_id,
        CASE kind WHEN 'deposit' THEN 'inv-' || g WHEN 'cashout' THEN 'ext-' || g END AS external_ref,
        CASE kind WHEN 'deposit' THEN 'inv-' || g WHEN 'cashout' THEN 'ext-' || g ELSE 'rf-' || g END AS intent_ref
      FROM (
        SELECT g, CASE WHEN cls <= 12 THEN 'deposit' WHEN cls <= 17 THEN 'cashout' ELSE 'refund' END AS kind,
          'm' || ((g / 20) % 5 + 1) AS account, CASE WHEN (g / 20) % 4 = 3 THEN 'USD' ELSE 'BRL' END AS currency,
          CASE
            WHEN cls = 0 THEN 1
            WHEN cls <= 10 THEN CASE WHEN h < 700 THEN 1 WHEN h < 780 THEN 2 WHEN h < 860 THEN 3 WHEN h < 930 THEN 4
              WHEN h < 950 THEN 5 ELSE 6 END
            WHEN cls = 11 THEN 7
            WHEN cls = 12 THEN 8
            WHEN cls <= 17 THEN CASE WHEN h < 15 AND ts < ${endS - 3 * DAY_S} THEN 12
              WHEN h < 80 AND ts > ${endS - DAY_S} THEN 13 WHEN h < 800 THEN 9 WHEN h < 880 THEN 10
              WHEN h < 950 THEN 11 ELSE 14 END
            ELSE CASE WHEN h < 100 AND ts > ${endS - DAY_S} THEN 17 WHEN h < 900 THEN 15 ELSE 16 END
          END AS path,
          1000 + (CASE cls WHEN 18 THEN g - 18 WHEN 19 THEN g - 8 ELSE g END * 7919) % 500000
            / CASE WHEN cls >= 18 THEN 2 ELSE 1 END AS amount,
          cls = 11 OR cls = 19 AS test, cls = 12 AS crypto,
          CASE cls WHEN 18 THEN g - 18 WHEN 19 THEN g - 8 END AS parent, to_timestamp(ts) AS t0
        FROM (SELECT g, g % 20 AS cls, (g * 48271) % 1000 AS h,
            CASE WHEN g <= ${split} THEN ${startS}::float8 + (g - ${FIRST - 1}) * ${step}::float8
              ELSE ${endS - DAY_S}::float8 + (g - ${split}) * ${dayStep}::float8 END AS ts
          FROM generate_series(${from}::bigint, ${to}::bigint) g) x
      ) y`,
    ],
    [
      'intents',
      sql`
      INSERT INTO intents (intent_id, operation, merchant_account, entity_kind, external_ref, entity_id, currency,
        amount, expected_fee, test, crypto, fee_on_payer, parent_deposit_id, outcome, created_at)
      SELECT 'int-' || g, kind, account, kind, intent_ref, entity_id, currency, amount / 100.0, fee / 100.0,
        kind = 'deposit' AND test, crypto, path = 6, (1000000000 + parent)::text, 'created', t0 - interval '1 second'
      FROM synth_p ORDER BY g`,
    ],
    [
      'status_history',
      sql`
      INSERT INTO status_history (event_id, merchant_account, entity_kind, entity_id, from_status, to_status,
        source, observed_at, recorded_at, external_ref, currency, amount, fee_currency, fee_amount, fee_on_payer,
        test, crypto, payer_verification, parent_deposit_id)
      SELECT 'sx-' || p.g || '-' || s.step, p.account, p.kind, p.entity_id, s.from_status, s.status,
        CASE WHEN s.step % 2 = 1 THEN 'webhook' ELSE 'poll' END,
        p.t0 + s.off * interval '1 second', p.t0 + (s.off + 1) * interval '1 second', p.external_ref,
        CASE WHEN p.kind <> 'cashout' THEN p.currency END, CASE WHEN p.kind <> 'cashout' THEN p.amount / 100.0 END,
        CASE WHEN p.fee IS NOT NULL THEN p.currency END, p.fee / 100.0,
        CASE WHEN p.kind = 'deposit' THEN p.path = 6 END, p.kind = 'deposit' AND p.test, p.crypto,
        CASE WHEN p.kind = 'deposit' THEN 'MATCH' END, (1000000000 + p.parent)::text
      FROM synth_p p JOIN synth_steps s ON s.path = p.path
      ORDER BY p.g, s.step`,
    ],
    [
      'mirrors',
      sql`
      INSERT INTO mirrors (merchant_account, entity_kind, entity_id, external_ref, status, status_since,
        ever_completed, ever_early_released, currency, amount, fee_currency, fee_amount, fee_on_payer, test, crypto,
        payer_verification, parent_deposit_id, intent_id, first_seen_at, last_seen_at, completed_at, next_poll_at,
        created_at, updated_at)
      SELECT p.account, p.kind, p.entity_id, p.external_ref, x.final_status, p.t0 + x.last_off * interval '1 second',
        x.ever_completed, x.ever_early_released, p.currency, p.amount / 100.0,
        CASE WHEN p.fee IS NOT NULL THEN p.currency END, p.fee / 100.0, p.path = 6, p.test, p.crypto,
        CASE WHEN p.kind = 'deposit' THEN 'MATCH' END, (1000000000 + p.parent)::text, 'int-' || p.g,
        p.t0 + x.first_off * interval '1 second', p.t0 + x.last_off * interval '1 second',
        p.t0 + x.completed_off * interval '1 second',
        CASE WHEN p.path IN (13, 17) THEN p.t0 + (x.last_off + 3600) * interval '1 second' END,
        p.t0 + x.first_off * interval '1 second', p.t0 + (x.last_off + 1) * interval '1 second'
      FROM synth_p p JOIN synth_paths x ON x.path = p.path
      ORDER BY p.g`,
    ],
    [
      'journal_entries',
      sql`
      INSERT INTO journal_entries (id, idempotency_key, merchant_account, entity_kind, entity_id, effect, direction,
        seq, book, currency, amount, fee_currency, fee_amount, effective_at, created_at)
      SELECT p.g * ${ENTRY_SLOTS} + e.ord, p.kind || ':' || p.account || ':' || p.entity_id || ':' || e.effect,
        p.account, p.kind, p.entity_id, e.effect, 1, 1, p.book, p.currency,
        CASE WHEN e.effect = 'fee' THEN p.fee ELSE p.amount END / 100.0,
        CASE WHEN e.effect = 'early_release_reversal' AND p.fee > 0 AND p.path <> 6 THEN p.currency END,
        CASE WHEN e.effect = 'early_release_reversal' AND p.fee > 0 AND p.path <> 6 THEN p.fee / 100.0 END,
        p.t0 + s.off * interval '1 second', p.t0 + (s.off + 1) * interval '1 second'
      FROM synth_p p JOIN synth_effects e ON e.path = p.path
        JOIN synth_steps s ON s.path = e.path AND s.step = e.step
      ORDER BY 1`,
    ],
    [
      'postings',
      sql`
      INSERT INTO postings (entry_id, merchant_account, currency, book, account, amount, created_at)
      SELECT e.id, e.merchant_account, e.currency, e.book,
        CASE WHEN e.book = 'test' THEN 'test_' ELSE '' END
          || CASE WHEN l.account <> 'paid_out' THEN l.account WHEN e.entity_kind = 'refund' THEN 'refunds'
            ELSE 'payouts' END,
        l.sa * e.amount + l.sf * coalesce(e.fee_amount, 0), e.created_at
      FROM journal_entries e JOIN synth_lines l ON l.effect = e.effect
      WHERE e.id BETWEEN ${from * ENTRY_SLOTS} AND ${to * ENTRY_SLOTS + ENTRY_SLOTS - 1}
        AND l.sa * e.amount + l.sf * coalesce(e.fee_amount, 0) <> 0
      ORDER BY e.id, l.account`,
    ],
    [
      'exceptions',
      sql`
      INSERT INTO exceptions (type, merchant_account, entity_kind, entity_id, severity, state, first_seen_at,
        last_seen_at, details, fact, resolution_note, resolved_by, resolved_at, acknowledged_by, acknowledged_at,
        updated_at)
      SELECT type, account, kind, entity_id, severity, state, at, at, '{}'::jsonb, fact,
        CASE WHEN state = 'resolved' THEN 'checked with the provider' END,
        CASE WHEN state = 'resolved' THEN 'finance' END,
        CASE WHEN state = 'resolved' THEN at + interval '2 days' END,
        CASE WHEN state = 'acknowledged' THEN 'finance' END,
        CASE WHEN state = 'acknowledged' THEN at + interval '1 hour' END, at
      FROM (
        SELECT CASE p.path WHEN 5 THEN 'EARLY_RELEASE_REVERSED' WHEN 12 THEN 'LATE_REJECTION' ELSE 'FEE_MISMATCH' END
            AS type, p.account, p.kind, p.entity_id,
          CASE WHEN p.path = 1 THEN 'low' ELSE 'high' END AS severity,
          CASE WHEN p.t0 < ${new Date(end.getTime() - 14 * DAY_S * 1000)} THEN 'resolved'
            ELSE (ARRAY['open', 'in_review', 'acknowledged'])[p.g % 3 + 1] END AS state,
          p.t0 + x.last_off * interval '1 second' AS at, 'status:' || x.final_status AS fact
        FROM synth_p p JOIN synth_paths x ON x.path = p.path
        WHERE p.path IN (5, 12) OR (p.path = 1 AND p.g % 100 = 7)
        ORDER BY p.g) t`,
    ],
  ];
}

/**
 * The year's daily snapshots in one pass over the postings (per account and UTC day, then a running sum),
 * the rows `takeBalanceSnapshots` would have written day by day: every midnight from the day after the
 * account's first posting up to the last midnight at least `SETTLE_MS` old.
 */
async function writeSnapshots(db: Db): Promise<void> {
  await sql`
    INSERT INTO ledger_balance_snapshots (merchant_account, currency, book, account, at, balance)
    WITH d AS (
      SELECT merchant_account, currency, book, account, date_trunc('day', created_at, 'UTC') + interval '24 hours' AS at,
        sum(amount) AS day_sum
      FROM postings GROUP BY 1, 2, 3, 4, 5),
    merged AS (
      SELECT merchant_account, currency, book, account, at, day_sum, false AS snapshot FROM d
      UNION ALL
      SELECT a.merchant_account, a.currency, a.book, a.account, g.at, 0, true
      FROM (SELECT merchant_account, currency, book, account, min(at) AS first_at FROM d GROUP BY 1, 2, 3, 4) a
      CROSS JOIN LATERAL generate_series(a.first_at,
        date_trunc('day', now() - make_interval(secs => ${SETTLE_MS / 1000}), 'UTC'), interval '24 hours') AS g(at)),
    run AS (
      SELECT merchant_account, currency, book, account, at, snapshot,
        sum(day_sum) OVER (PARTITION BY merchant_account, currency, book, account ORDER BY at) AS balance
      FROM merged)
    SELECT merchant_account, currency, book, account, at, balance FROM run WHERE snapshot`.execute(db);
}

/** Synthesizes `payments` payments into a freshly migrated, empty database. */
export async function synthesizeScale(db: Db, options: ScaleSynthOptions): Promise<ScaleSynthResult> {
  const total = options.payments;
  const end = options.end ?? new Date(Date.now() - 3 * 3_600_000);
  const endS = end.getTime() / 1000;
  const startS = endS - 365 * DAY_S;
  const chunk = options.chunk ?? 50_000;
  const last = FIRST + total - 1;
  const lastDay = options.lastDay;
  const timeline: Timeline =
    lastDay === undefined
      ? { startS, endS, step: (365 * DAY_S) / Math.max(total, 1), split: last, dayStep: 0, end }
      : {
          startS,
          endS,
          step: (364 * DAY_S) / Math.max(total - lastDay, 1),
          split: last - lastDay,
          dayStep: DAY_S / Math.max(lastDay, 1),
          end,
        };
  const loadTables = ['intents', 'mirrors', 'status_history', 'journal_entries', 'postings'];
  // Bulk load: the secondary indexes go and come back built once from their own definitions; the postings'
  // statement triggers (balance check, running balances) are off meanwhile and the running balances are
  // summed once at the end. The full verification re-checks every invariant the triggers guard.
  const { rows: indexes } = await sql<{ name: string; def: string }>`
    SELECT i.indexname AS name, i.indexdef AS def FROM pg_indexes i
    WHERE i.schemaname = current_schema() AND i.tablename = ANY(${loadTables}::text[])
      AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)`.execute(db);
  for (const i of indexes) await sql`DROP INDEX ${sql.id(i.name)}`.execute(db);
  await sql`ALTER TABLE postings DISABLE TRIGGER postings_balanced_trg`.execute(db);
  await sql`ALTER TABLE postings DISABLE TRIGGER postings_running_balances_trg`.execute(db);
  await db.connection().execute(async (conn) => {
    await sql`INSERT INTO merchant_accounts (name) SELECT unnest(${[...SCALE_MERCHANT_ACCOUNTS]}::text[])`.execute(
      conn,
    );
    await sql`
      INSERT INTO ledger_accounts (merchant_account, currency, book, name)
      SELECT m, c, b.book, b.name FROM unnest(${[...SCALE_MERCHANT_ACCOUNTS]}::text[]) m,
        unnest(${[...SCALE_CURRENCIES]}::text[]) c,
        (VALUES ('live', 'available'), ('live', 'reserved'), ('live', 'deposits'), ('live', 'fees'),
          ('live', 'payouts'), ('live', 'refunds'), ('test', 'test_available'), ('test', 'test_deposits'),
          ('test', 'test_fees'), ('test', 'test_reserved'), ('test', 'test_refunds'),
          ('crypto', 'crypto_payers'), ('crypto', 'crypto_in_transit'), ('crypto', 'crypto_customer_wallets'))
          b(book, name)`.execute(conn);
    await sql`
      DROP TABLE IF EXISTS synth_steps, synth_effects, synth_lines, synth_paths, synth_p;
      CREATE TEMP TABLE synth_steps AS SELECT * FROM ${STEPS};
      CREATE TEMP TABLE synth_effects AS SELECT * FROM ${EFFECTS};
      CREATE TEMP TABLE synth_lines AS SELECT * FROM ${LINES};
      CREATE TEMP TABLE synth_paths AS
        SELECT path, (array_agg(status ORDER BY step DESC))[1] AS final_status, min(off) AS first_off,
          max(off) AS last_off, min(off) FILTER (WHERE status = 'COMPLETED') AS completed_off,
          bool_or(status = 'COMPLETED') AS ever_completed, bool_or(status = 'EARLY_RELEASED') AS ever_early_released
        FROM synth_steps GROUP BY path;
      CREATE TEMP TABLE synth_p (g bigint, kind text, account text, currency text, path int, amount bigint,
        fee bigint, test boolean, crypto boolean, book text, parent bigint, t0 timestamptz, entity_id text,
        external_ref text, intent_ref text);
      `.execute(conn);
    for (let from = FIRST; from <= last; from += chunk) {
      const to = Math.min(last, from + chunk - 1);
      await conn.transaction().execute(async (trx) => {
        await sql`SET LOCAL synchronous_commit = off`.execute(trx);
        await sql`TRUNCATE synth_p`.execute(trx);
        for (const [table, statement] of chunkStatements(from, to, timeline)) {
          const t0 = performance.now();
          await statement.execute(trx);
          if (options.timings)
            options.timings[table] = (options.timings[table] ?? 0) + performance.now() - t0;
        }
      });
      options.onProgress?.(to - FIRST + 1, total);
    }
    await sql`DROP TABLE IF EXISTS synth_steps, synth_effects, synth_lines, synth_paths, synth_p`.execute(
      conn,
    );
  });
  await sql`ALTER TABLE postings ENABLE TRIGGER postings_balanced_trg`.execute(db);
  await sql`ALTER TABLE postings ENABLE TRIGGER postings_running_balances_trg`.execute(db);
  await sql`
    INSERT INTO ledger_balances (merchant_account, currency, book, account, balance)
    SELECT merchant_account, currency, book, account, sum(amount) FROM postings GROUP BY 1, 2, 3, 4`.execute(
    db,
  );
  for (const i of indexes) {
    const t0 = performance.now();
    await sql.raw(i.def).execute(db);
    if (options.timings) options.timings.indexes = (options.timings.indexes ?? 0) + performance.now() - t0;
  }
  let t0 = performance.now();
  await writeSnapshots(db);
  if (options.timings) options.timings.snapshots = performance.now() - t0;
  await sql`SELECT setval('journal_entries_id_seq', greatest((SELECT max(id) FROM journal_entries), 1))`.execute(
    db,
  );
  t0 = performance.now();
  for (const t of [...loadTables, 'exceptions', 'ledger_balance_snapshots'])
    await sql`ANALYZE ${sql.table(t)}`.execute(db);
  if (options.timings) options.timings.analyze = performance.now() - t0;
  const tables = [
    'intents',
    'mirrors',
    'status_history',
    'journal_entries',
    'postings',
    'exceptions',
  ] as const;
  const rows: Record<string, number> = {};
  for (const t of tables) {
    const r = await sql<{ n: string }>`SELECT count(*)::text AS n FROM ${sql.table(t)}`.execute(db);
    rows[t] = Number(r.rows[0]?.n ?? 0);
  }
  return { payments: total, start: new Date(startS * 1000), end, rows };
}
