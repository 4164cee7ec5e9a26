/**
 * A year of history written straight into PostgreSQL for `npm run bench:scale`: payments
 * with their intents, mirrors, status history, journal entries, postings, running balances, exceptions and a
 * year of daily snapshots, consistent so that the full `payrecon db verify` accepts them. Set-based
 * (generate_series, INSERT ... SELECT), chunk by chunk, on two connections side by side (each with its own
 * temporary path tables), into unlogged tables without keys or indexes, which are logged and indexed once
 * at the end; nothing goes through the pipeline.
 *
 * Payment `g` (1..payments) is created at `end - 365 days + g * step` (or, with `monthPayments`, that many
 * evenly over the last whole calendar month, with `lastDay` that many over the last 24 hours, and the rest
 * evenly over the rest of the year); its kind, merchant account, currency, amounts and status path are
 * functions of `g`. Blocks of 20 consecutive payments share a merchant account and a currency: 11 live deposits (completed, expired, declined, released early then
 * completed or declined, fee on the payer), a test deposit, a crypto deposit, 5 cashouts (completed,
 * cancelled from hold, rejected, rejected after completion, in flight during the last day, declined) and 2
 * refunds (one of the block's first live deposit, one of its test deposit: booked in the test book;
 * completed, cancelled, in flight during the last day). Each status is one reading; each effect is booked
 * when the status that wants it is read, as the ledger would (src/domain/effects.ts, the effect table).
 */
import { type RawBuilder, sql } from 'kysely';
import { SETTLE_MS } from '../src/db/ledger/balance-snapshots.ts';
import type { Db } from '../src/db/schema.ts';

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
  /**
   * Payments created in the last whole UTC calendar month before `end` (default 0: the year is even).
   * The others are spread evenly over the rest of the year: a month as dense as a bigger year's.
   */
  monthPayments?: number;
  /** Connections writing chunks side by side (default 2). */
  workers?: number;
  /** Load into unlogged tables and log them once at the end (default true). */
  unlogged?: boolean;
  onProgress?: (done: number, total: number) => void;
  /** Milliseconds spent per table written, added up (for the bench's report). */
  timings?: Record<string, number>;
}

export interface ScaleSynthResult {
  payments: number;
  start: Date;
  end: Date;
  /** The dense month ([start, end) UTC), when `monthPayments` asked for one. */
  month: { start: Date; end: Date } | null;
  /** Row counts of the tables written. */
  rows: Record<string, number>;
}

const SCALE_MERCHANT_ACCOUNTS = ['m1', 'm2', 'm3', 'm4', 'm5'] as const;
const SCALE_CURRENCIES = ['BRL', 'USD'] as const;
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

/** The last whole UTC calendar month before `end`: [start, end). */
export function lastWholeMonth(end: Date): { start: Date; end: Date } {
  return {
    start: new Date(Date.UTC(end.getUTCFullYear(), end.getUTCMonth() - 1, 1)),
    end: new Date(Date.UTC(end.getUTCFullYear(), end.getUTCMonth(), 1)),
  };
}

/** A stretch of the year (epoch seconds) and the payments created evenly in it. */
interface Segment {
  fromS: number;
  toS: number;
  count: number;
}

/**
 * When each payment is created: the year cut into stretches, the dense month (`monthPayments`) and the last
 * day (`lastDay`) with their own counts, the other stretches sharing the rest by their length. Increasing in
 * the payment's number, so that a refund's deposit (18 or 8 payments earlier) is always older than it.
 */
function timeline(end: Date, total: number, month: number, lastDay: number | undefined): Segment[] {
  const endS = end.getTime() / 1000;
  const startS = endS - 365 * DAY_S;
  const fixed: Segment[] = [];
  if (month > 0) {
    const w = lastWholeMonth(end);
    fixed.push({ fromS: w.start.getTime() / 1000, toS: w.end.getTime() / 1000, count: month });
  }
  if (lastDay !== undefined) fixed.push({ fromS: endS - DAY_S, toS: endS, count: lastDay });
  if (fixed.length === 2 && fixed[0]!.toS > fixed[1]!.fromS)
    throw new Error('lastDay and monthPayments: the last 24 hours overlap the last whole month; pick one');
  const rest = total - fixed.reduce((n, f) => n + f.count, 0);
  if (rest < 0) throw new Error(`monthPayments and lastDay: together at most payments (${total})`);
  const free: Segment[] = [];
  let at = startS;
  for (const f of [...fixed, { fromS: endS, toS: endS, count: 0 }]) {
    if (f.fromS > at) free.push({ fromS: at, toS: f.fromS, count: 0 });
    at = f.toS;
  }
  const length = free.reduce((n, f) => n + f.toS - f.fromS, 0);
  let left = rest;
  free.forEach((f, k) => {
    f.count = k === free.length - 1 ? left : Math.round((rest * (f.toS - f.fromS)) / length);
    left -= f.count;
  });
  return [...free, ...fixed].sort((x, y) => x.fromS - y.fromS).filter((x) => x.count > 0);
}

/**
 * SQL: the creation instant (epoch seconds, float8) of payment number `g`. The `k`th of a stretch's `n`
 * payments is created at `from + (k - 1/2) * length / n`, except in the last stretch, whose last payment is
 * created at the year's end: `from + k * length / n` (without a dense month or day, `end - 365 days + g *
 * step` as before).
 */
function creationSeconds(segments: Segment[]): RawBuilder<number> {
  const i = sql`(g - ${FIRST - 1})::float8`;
  let before = 0;
  const arms = segments.map((s, k) => {
    const last = k === segments.length - 1;
    const at = sql<number>`${s.fromS}::float8 + (${i} - ${before + (last ? 0 : 0.5)}) * ${(s.toS - s.fromS) / s.count}::float8`;
    before += s.count;
    return { at, upTo: before };
  });
  const whens = arms.slice(0, -1).map((a) => sql`WHEN ${i} <= ${a.upTo} THEN ${a.at}`);
  const otherwise = arms[arms.length - 1]!.at;
  return whens.length === 0 ? otherwise : sql<number>`CASE ${sql.join(whens, sql` `)} ELSE ${otherwise} END`;
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
function chunkStatements(
  from: number,
  to: number,
  segments: Segment[],
  end: Date,
): [string, RawBuilder<unknown>][] {
  const endS = end.getTime() / 1000;
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
        FROM (SELECT g, g % 20 AS cls, (g * 48271) % 1000 AS h, ${creationSeconds(segments)} AS ts
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
        payer_verification, parent_deposit_id, intent_id, first_seen_at, last_seen_at, completed_at,
        created_at, updated_at)
      SELECT p.account, p.kind, p.entity_id, p.external_ref, x.final_status, p.t0 + x.last_off * interval '1 second',
        x.ever_completed, x.ever_early_released, p.currency, p.amount / 100.0,
        CASE WHEN p.fee IS NOT NULL THEN p.currency END, p.fee / 100.0, p.path = 6, p.test, p.crypto,
        CASE WHEN p.kind = 'deposit' THEN 'MATCH' END, (1000000000 + p.parent)::text, 'int-' || p.g,
        p.t0 + x.first_off * interval '1 second', p.t0 + x.last_off * interval '1 second',
        p.t0 + x.completed_off * interval '1 second',
        p.t0 + x.first_off * interval '1 second', p.t0 + (x.last_off + 1) * interval '1 second'
      FROM synth_p p JOIN synth_paths x ON x.path = p.path
      ORDER BY p.g`,
    ],
    [
      // The payments still in flight (paths 13 and 17) are scheduled for a poll an hour after their last reading.
      'poll_schedule',
      sql`
      INSERT INTO poll_schedule (merchant_account, entity_kind, entity_id, next_poll_at)
      SELECT p.account, p.kind, p.entity_id, p.t0 + (x.last_off + 3600) * interval '1 second'
      FROM synth_p p JOIN synth_paths x ON x.path = p.path
      WHERE p.path IN (13, 17)
      ORDER BY p.g`,
    ],
    [
      'journal_entries',
      sql`
      WITH ne AS (
        INSERT INTO synth_e
        SELECT p.g * ${ENTRY_SLOTS} + e.ord, p.kind || ':' || p.account || ':' || p.entity_id || ':' || e.effect,
          p.account, p.kind, p.entity_id, e.effect, p.book, p.currency,
          CASE WHEN e.effect = 'fee' THEN p.fee ELSE p.amount END / 100.0,
          CASE WHEN e.effect = 'early_release_reversal' AND p.fee > 0 AND p.path <> 6 THEN p.currency END,
          CASE WHEN e.effect = 'early_release_reversal' AND p.fee > 0 AND p.path <> 6 THEN p.fee / 100.0 END,
          p.t0 + s.off * interval '1 second', p.t0 + (s.off + 1) * interval '1 second'
        FROM synth_p p JOIN synth_effects e ON e.path = p.path
          JOIN synth_steps s ON s.path = e.path AND s.step = e.step
        RETURNING *)
      INSERT INTO journal_entries (id, idempotency_key, merchant_account, entity_kind, entity_id, effect, direction,
        seq, book, currency, amount, fee_currency, fee_amount, effective_at, created_at)
      SELECT id, idempotency_key, merchant_account, entity_kind, entity_id, effect, 1, 1, book, currency, amount,
        fee_currency, fee_amount, effective_at, created_at
      FROM ne ORDER BY id`,
    ],
    [
      'postings',
      // The day sums per account go to synth_days as the postings are written: the running balances and
      // the year's snapshots are summed from them, not from a second and third pass over every posting;
      // the day and hour sums per account and effect likewise to synth_moves (the ledger's movements).
      sql`
      WITH ins AS (
        INSERT INTO postings (entry_id, merchant_account, currency, book, account, amount, created_at)
        SELECT e.id, e.merchant_account, e.currency, e.book,
          CASE WHEN e.book = 'test' THEN 'test_' ELSE '' END
            || CASE WHEN l.account <> 'paid_out' THEN l.account WHEN e.entity_kind = 'refund' THEN 'refunds'
              ELSE 'payouts' END,
          l.sa * e.amount + l.sf * coalesce(e.fee_amount, 0), e.created_at
        FROM synth_e e JOIN synth_lines l ON l.effect = e.effect
        WHERE l.sa * e.amount + l.sf * coalesce(e.fee_amount, 0) <> 0
        ORDER BY e.id, l.account
        RETURNING entry_id, merchant_account, currency, book, account, amount, created_at),
      moves AS (
        INSERT INTO synth_moves (merchant_account, currency, book, account, hours, bucket, effect, amount_in,
          amount_out)
        SELECT i.merchant_account, i.currency, i.book, i.account, g.hours,
          date_trunc(CASE g.hours WHEN 24 THEN 'day' ELSE 'hour' END, i.created_at, 'UTC'), e.effect,
          coalesce(sum(i.amount) FILTER (WHERE i.amount > 0), 0), coalesce(sum(i.amount) FILTER (WHERE i.amount < 0), 0)
        FROM ins i JOIN synth_e e ON e.id = i.entry_id CROSS JOIN (VALUES (1::smallint), (24::smallint)) g(hours)
        GROUP BY 1, 2, 3, 4, 5, 6, 7),
      days AS (
        INSERT INTO synth_days (merchant_account, currency, book, account, at, day_sum)
        SELECT merchant_account, currency, book, account, date_trunc('day', created_at, 'UTC') + interval '24 hours',
          sum(amount)
        FROM ins GROUP BY 1, 2, 3, 4, 5)
      SELECT count(*) AS n FROM ins`,
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
 * The year's daily snapshots from the day sums the load kept (per account and UTC day, then a running
 * sum), the rows `takeBalanceSnapshots` would have written day by day: every midnight from the day after
 * the account's first posting up to the last midnight at least `SETTLE_MS` old.
 */
async function writeSnapshots(db: Db): Promise<void> {
  await sql`
    INSERT INTO ledger_balance_snapshots (merchant_account, currency, book, account, at, balance)
    WITH d AS (
      SELECT merchant_account, currency, book, account, at, sum(day_sum) AS day_sum
      FROM synth_days GROUP BY 1, 2, 3, 4, 5),
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

/**
 * Runs `statements` on up to `n` connections side by side, each taking the next one when done, with the
 * memory of a bulk build: each index is one sort and each foreign key one join, in memory where they fit.
 */
async function sideBySide(db: Db, n: number, statements: RawBuilder<unknown>[]): Promise<void> {
  const queue = [...statements];
  let failed = false;
  await Promise.all(
    Array.from({ length: Math.min(n, queue.length) }, () =>
      db.connection().execute(async (conn) => {
        await sql`SET maintenance_work_mem = '1GB'; SET work_mem = '256MB'`.execute(conn);
        try {
          for (let s = queue.shift(); s !== undefined && !failed; s = queue.shift()) await s.execute(conn);
        } catch (err) {
          failed = true;
          throw err;
        } finally {
          await sql`RESET maintenance_work_mem; RESET work_mem`.execute(conn).catch(() => undefined);
        }
      }),
    ),
  );
}

/** Tables the load writes in bulk (their keys, indexes and foreign keys are built again after it). */
const LOAD_TABLES = ['intents', 'mirrors', 'mirror_watches', 'status_history', 'journal_entries', 'postings'];

/** Synthesizes `payments` payments into a freshly migrated, empty database. */
export async function synthesizeScale(db: Db, options: ScaleSynthOptions): Promise<ScaleSynthResult> {
  const total = options.payments;
  const month = options.monthPayments ?? 0;
  if (!Number.isInteger(month) || month < 0 || month > total)
    throw new Error(`monthPayments: must be a whole number from 0 to payments (${total}), got ${month}`);
  const end = options.end ?? new Date(Date.now() - 3 * 3_600_000);
  const segments = timeline(end, total, month, options.lastDay);
  const chunk = options.chunk ?? 50_000;
  const workers = Math.max(1, options.workers ?? 2);
  const unlogged = options.unlogged ?? true;
  const last = FIRST + total - 1;
  const timings = options.timings;
  const timed = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
    const t0 = performance.now();
    try {
      return await fn();
    } finally {
      if (timings) timings[what] = (timings[what] ?? 0) + performance.now() - t0;
    }
  };
  // Bulk load: the load tables' keys, indexes and foreign keys go, and come back built once from their
  // own definitions (sorted, not inserted row by row); the tables are unlogged meanwhile (no WAL per row)
  // and logged again after, in one pass; the postings' statement triggers (balance check, running
  // balances) are off and the running balances are summed once at the end. The full verification
  // re-checks every invariant the triggers guard.
  const inLoad = sql`(SELECT c.oid FROM pg_class c WHERE c.relname = ANY(${LOAD_TABLES}::text[])
    AND c.relnamespace = current_schema()::regnamespace)`;
  const { rows: keys } = await sql<{ tbl: string; name: string; def: string; type: string }>`
    SELECT c.conrelid::regclass::text AS tbl, c.conname AS name, pg_get_constraintdef(c.oid) AS def,
      c.contype AS type
    FROM pg_constraint c
    WHERE c.contype IN ('p', 'u', 'f') AND (c.conrelid IN ${inLoad} OR c.confrelid IN ${inLoad})
    ORDER BY c.contype = 'f' DESC, c.conname`.execute(db);
  const { rows: indexes } = await sql<{ name: string; def: string }>`
    SELECT i.indexname AS name, i.indexdef AS def FROM pg_indexes i
    WHERE i.schemaname = current_schema() AND i.tablename = ANY(${LOAD_TABLES}::text[])
      AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)`.execute(db);
  for (const k of keys)
    await sql`ALTER TABLE ${sql.raw(k.tbl)} DROP CONSTRAINT ${sql.id(k.name)}`.execute(db);
  for (const i of indexes) await sql`DROP INDEX ${sql.id(i.name)}`.execute(db);
  if (unlogged)
    for (const table of LOAD_TABLES) await sql`ALTER TABLE ${sql.table(table)} SET UNLOGGED`.execute(db);
  await sql`ALTER TABLE postings DISABLE TRIGGER postings_balanced_trg`.execute(db);
  await sql`ALTER TABLE postings DISABLE TRIGGER postings_running_balances_trg`.execute(db);
  await sql`INSERT INTO merchant_accounts (name) SELECT unnest(${[...SCALE_MERCHANT_ACCOUNTS]}::text[])`.execute(
    db,
  );
  await sql`
    INSERT INTO ledger_accounts (merchant_account, currency, book, name)
    SELECT m, c, b.book, b.name FROM unnest(${[...SCALE_MERCHANT_ACCOUNTS]}::text[]) m,
      unnest(${[...SCALE_CURRENCIES]}::text[]) c,
      (VALUES ('live', 'available'), ('live', 'reserved'), ('live', 'deposits'), ('live', 'fees'),
        ('live', 'payouts'), ('live', 'refunds'), ('test', 'test_available'), ('test', 'test_deposits'),
        ('test', 'test_fees'), ('test', 'test_reserved'), ('test', 'test_refunds'),
        ('crypto', 'crypto_payers'), ('crypto', 'crypto_in_transit'), ('crypto', 'crypto_customer_wallets'))
        b(book, name)`.execute(db);
  // Day sums per account of the postings written, shared by the workers (dropped at the end).
  await sql`
    DROP TABLE IF EXISTS synth_days, synth_moves;
    CREATE UNLOGGED TABLE synth_days (merchant_account text, currency text, book text, account text,
      at timestamptz, day_sum numeric);
    CREATE UNLOGGED TABLE synth_moves (merchant_account text, currency text, book text, account text,
      hours smallint, bucket timestamptz, effect text, amount_in numeric, amount_out numeric)`.execute(db);

  // Chunks of payments handed out to `workers` connections (each with its own temporary path tables).
  const rows: Record<string, number> = {};
  let next = FIRST;
  let done = 0;
  let failed = false;
  const worker = () =>
    db.connection().execute(async (conn) => {
      // Room for a chunk's temporary tables in memory (refused once the session used one: then as is).
      await sql`SET temp_buffers = '256MB'`.execute(conn).catch(() => undefined);
      await sql`
        DROP TABLE IF EXISTS synth_steps, synth_effects, synth_lines, synth_paths, synth_p, synth_e;
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
        CREATE TEMP TABLE synth_e (id bigint, idempotency_key text, merchant_account text, entity_kind text,
          entity_id text, effect text, book text, currency text, amount numeric, fee_currency text,
          fee_amount numeric, effective_at timestamptz, created_at timestamptz);
        `.execute(conn);
      try {
        while (!failed && next <= last) {
          const from = next;
          const to = Math.min(last, from + chunk - 1);
          next = to + 1;
          await conn.transaction().execute(async (trx) => {
            await sql`SET LOCAL synchronous_commit = off`.execute(trx);
            await sql`TRUNCATE synth_p, synth_e`.execute(trx);
            for (const [table, statement] of chunkStatements(from, to, segments, end)) {
              const r = await timed(table, () => statement.execute(trx));
              const n =
                table === 'postings'
                  ? Number((r.rows[0] as { n: string }).n)
                  : Number(r.numAffectedRows ?? 0);
              if (table !== 'synth_p') rows[table] = (rows[table] ?? 0) + n;
            }
          });
          done += to - from + 1;
          options.onProgress?.(done, total);
        }
      } catch (err) {
        failed = true;
        throw err;
      } finally {
        await sql`DROP TABLE IF EXISTS synth_steps, synth_effects, synth_lines, synth_paths, synth_p, synth_e`
          .execute(conn)
          .catch(() => undefined);
      }
    });
  await Promise.all(Array.from({ length: workers }, worker));
  // The mirrors' sets (`mirror_watches`), from the generated columns, in one pass.
  await timed('mirror watches', () =>
    sql`
      INSERT INTO mirror_watches (entity_id, entity_kind, merchant_account, watch, watch_at, currency, test)
      SELECT entity_id, entity_kind, merchant_account, watch, watch_at, currency, test FROM mirrors
      WHERE watch IS NOT NULL`.execute(db),
  );

  await sql`ALTER TABLE postings ENABLE TRIGGER postings_balanced_trg`.execute(db);
  await sql`ALTER TABLE postings ENABLE TRIGGER postings_running_balances_trg`.execute(db);
  await timed('balances and snapshots', async () => {
    await sql`
      INSERT INTO ledger_balances (merchant_account, currency, book, account, balance)
      SELECT merchant_account, currency, book, account, sum(day_sum) FROM synth_days GROUP BY 1, 2, 3, 4`.execute(
      db,
    );
    await writeSnapshots(db);
    // Every synthesized entry applies its effect (direction 1).
    await sql`
      INSERT INTO ledger_movements (merchant_account, currency, book, account, hours, bucket, effect, direction,
        amount_in, amount_out)
      SELECT merchant_account, currency, book, account, hours, bucket, effect, 1, sum(amount_in), sum(amount_out)
      FROM synth_moves GROUP BY 1, 2, 3, 4, 5, 6, 7`.execute(db);
    await sql`DROP TABLE synth_days, synth_moves`.execute(db);
  });
  // Then, on `workers` connections side by side: the tables logged (one pass each, the largest first), their
  // keys and indexes built, and the foreign keys checked once each (each needs the key it references).
  const addConstraint = (k: (typeof keys)[number]) =>
    sql`ALTER TABLE ${sql.raw(k.tbl)} ADD CONSTRAINT ${sql.id(k.name)} ${sql.raw(k.def)}`;
  if (unlogged)
    await timed('logged', () =>
      sideBySide(
        db,
        workers,
        [...LOAD_TABLES].reverse().map((table) => sql`ALTER TABLE ${sql.table(table)} SET LOGGED`),
      ),
    );
  await timed('keys and indexes', () =>
    sideBySide(db, workers, [
      ...keys.filter((k) => k.type !== 'f').map(addConstraint),
      ...indexes.map((i) => sql.raw(i.def)),
    ]),
  );
  await timed('foreign keys', () =>
    sideBySide(db, workers, keys.filter((k) => k.type === 'f').map(addConstraint)),
  );
  await sql`SELECT setval('journal_entries_id_seq', greatest((SELECT max(id) FROM journal_entries), 1))`.execute(
    db,
  );
  await timed('analyze', async () => {
    for (const table of [...LOAD_TABLES, 'exceptions', 'ledger_balance_snapshots'])
      await sql`ANALYZE ${sql.table(table)}`.execute(db);
    // Vacuumed too: the balances page reads the movements and the in-flight counts by index-only scans, which
    // need the visibility map.
    await sql`VACUUM ANALYZE ledger_movements`.execute(db);
    await sql`VACUUM ANALYZE mirror_watches`.execute(db);
  });
  return {
    payments: total,
    start: new Date(end.getTime() - 365 * DAY_S * 1000),
    end,
    month: month === 0 ? null : lastWholeMonth(end),
    rows,
  };
}
