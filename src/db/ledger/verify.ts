/**
 * `payrecon db verify`: checks every ledger invariant against the database and names each failure.
 * Entries balance per currency, have postings and stay in one book; test deposits touch only the test
 * book; crypto deposits never touch `available`; each entity's booked effects equal the wanted effects of
 * its status path (recomputed from the whole history, as the service does); `reserved` equals the sum of
 * in-flight cashouts and refunds per merchant account and currency; each account's running balance
 * equals the sum of its postings, each daily snapshot the sum of its postings before it, and each day's
 * and hour's movements per account and effect the sums of that period's postings. The cash leg: each
 * settlement's and bank match's effects stand once or not at all, each settlement booked as its report
 * row says, every report row naming a merchant account booked.
 */
import { sql } from 'kysely';
import type { AppliedEntry, HistoryItem } from '../../domain/effects.ts';
import { DEFAULT_EXCEPTION_RULES } from '../../domain/exception-rules.ts';
import { formatAmount } from '../../domain/money.ts';
import { planEntity } from '../../domain/plan.ts';
import type { EntityKind } from '../../domain/statuses.ts';
import { verifyCashLeg } from '../cash-leg/verify.ts';
import { IN_FLIGHT_LITERALS, OPEN_PAYOUTS } from '../read-models/balances.ts';
import type { Db } from '../schema.ts';
import { type LinkedIntent, loadIntents } from './intents.ts';
import { type EntityRef, refKey } from './keys.ts';
import { entryPostings, OF_ACCOUNT } from './periods.ts';
import { loadLedgerState, loadRefundDeposits, type RefundDeposits } from './read.ts';

export interface VerifyResult {
  ok: boolean;
  failures: string[];
  entities: number;
  entries: number;
}

const MAX_PER_CHECK = 50;

function listed<T>(name: string, rows: readonly T[], describe: (r: T) => string): string[] {
  const out = rows.slice(0, MAX_PER_CHECK).map((r) => `${name}: ${describe(r)}`);
  if (rows.length > MAX_PER_CHECK) out.push(`${name}: ... and ${rows.length - MAX_PER_CHECK} more`);
  return out;
}

export interface VerifyOptions {
  /** Entities checked per round trip (default 2,000). */
  chunk?: number;
  /**
   * Incremental: only what changed at or after this instant (entries created since, entities with a
   * reading recorded or an entry booked since, snapshots of the day before on, movements from the UTC day
   * of `since` on); running balances against the latest snapshot plus the day movements since it, each
   * snapshot against the one before plus the day movements between (movements are checked against the
   * postings of their period: those before this one by the verification of their own period). Reads
   * indexes, so its cost follows the period, not the history. Absent: the full verification, every row
   * against the postings.
   */
  since?: Date;
  /** Milliseconds spent per check, added up (the bench's report of where the time goes). */
  timings?: Record<string, number>;
}

export async function verifyLedger(db: Db, options: VerifyOptions = {}): Promise<VerifyResult> {
  const failures: string[] = [];
  const since = options.since ?? null;
  const timings = options.timings;
  const timed = async <T>(name: string, run: () => Promise<T>): Promise<T> => {
    const t0 = performance.now();
    try {
      return await run();
    } finally {
      if (timings) timings[name] = (timings[name] ?? 0) + performance.now() - t0;
    }
  };
  /** Restricts a journal_entries alias to the period (nothing when full). */
  const recent = (alias: string) =>
    since === null ? sql`` : sql`AND ${sql.ref(`${alias}.created_at`)} >= ${since}`;

  const unbalanced = await timed('entries balance', () =>
    sql<{
      entry_id: string;
      idempotency_key: string;
      currency: string;
      total: string;
    }>`
    SELECT p.entry_id, e.idempotency_key, p.currency, sum(p.amount)::text AS total
    FROM postings p JOIN journal_entries e ON e.id = p.entry_id
    WHERE true ${recent('e')}
    GROUP BY p.entry_id, e.idempotency_key, p.currency HAVING sum(p.amount) <> 0`.execute(db),
  );
  failures.push(
    ...listed(
      'entry does not balance',
      unbalanced.rows,
      (r) => `${r.idempotency_key} ${r.currency} sums to ${r.total}`,
    ),
  );

  const empty = await timed('entries have postings', () =>
    sql<{ idempotency_key: string }>`
    SELECT e.idempotency_key FROM journal_entries e
    WHERE NOT EXISTS (SELECT 1 FROM postings p WHERE p.entry_id = e.id) ${recent('e')}`.execute(db),
  );
  failures.push(...listed('entry has no postings', empty.rows, (r) => r.idempotency_key));

  const mixed = await timed('entries in one book', () =>
    sql<{ idempotency_key: string; books: string }>`
    SELECT e.idempotency_key, string_agg(DISTINCT p.book, ',') AS books
    FROM journal_entries e JOIN postings p ON p.entry_id = e.id
    WHERE true ${recent('e')}
    GROUP BY e.id, e.idempotency_key, e.book, e.merchant_account
    HAVING count(DISTINCT p.book) > 1 OR bool_or(p.book <> e.book) OR bool_or(p.merchant_account <> e.merchant_account)`.execute(
      db,
    ),
  );
  failures.push(...listed('entry mixes books', mixed.rows, (r) => `${r.idempotency_key} (${r.books})`));

  // Test deposits and the refunds of test deposits post in the test book, everything else outside it. A
  // refund booked live before its deposit was known as test is moved by reversal and re-posting, so for
  // refunds what counts is each effect's net count per book.
  const testBook = await timed('test book apart', () =>
    sql<{ idempotency_key: string; book: string }>`
    SELECT e.idempotency_key, e.book FROM journal_entries e
    LEFT JOIN mirrors m ON m.merchant_account = e.merchant_account AND m.entity_kind = e.entity_kind
      AND m.entity_id = e.entity_id
    WHERE e.entity_kind <> 'refund' AND coalesce(e.entity_kind = 'deposit' AND m.test, false) <> (e.book = 'test')
      ${recent('e')}
    UNION ALL
    SELECT min(e.idempotency_key), e.book FROM ${
      since === null
        ? sql`journal_entries e`
        : // The refunds booked in the period, each one's entries read by its key (not every refund's).
          sql`(SELECT DISTINCT r.merchant_account, r.entity_id FROM journal_entries r
              WHERE r.entity_kind = 'refund' AND r.created_at >= ${since}) r
            CROSS JOIN LATERAL (SELECT x.* FROM journal_entries x WHERE x.merchant_account = r.merchant_account
              AND x.entity_kind = 'refund' AND x.entity_id = r.entity_id OFFSET 0) e`
    }
    LEFT JOIN mirrors m ON m.merchant_account = e.merchant_account AND m.entity_kind = e.entity_kind
      AND m.entity_id = e.entity_id
    LEFT JOIN mirrors d ON d.merchant_account = m.merchant_account AND d.entity_kind = 'deposit'
      AND d.entity_id = m.parent_deposit_id
    WHERE e.entity_kind = 'refund' AND coalesce(d.test, false) <> (e.book = 'test')
    GROUP BY e.merchant_account, e.entity_id, e.effect, e.book HAVING sum(e.direction) <> 0`.execute(db),
  );
  failures.push(
    ...listed('test book mixed with others', testBook.rows, (r) => `${r.idempotency_key} in book ${r.book}`),
  );

  const crypto = await timed('crypto off available', () =>
    sql<{ idempotency_key: string; account: string }>`
    SELECT e.idempotency_key, p.account FROM journal_entries e
    JOIN mirrors m ON m.merchant_account = e.merchant_account AND m.entity_kind = e.entity_kind
      AND m.entity_id = e.entity_id
    JOIN postings p ON p.entry_id = e.id
    WHERE e.entity_kind = 'deposit' AND m.crypto AND p.account = 'available' ${recent('e')}`.execute(db),
  );
  failures.push(
    ...listed(
      'crypto deposit touches available',
      crypto.rows,
      (r) => `${r.idempotency_key} posts to ${r.account}`,
    ),
  );

  // Live `reserved` against live cashouts and refunds in flight; `test_reserved` against the in-flight
  // refunds of test deposits (their mirror carries the deposit's test flag).
  const reserved = await timed('reserved equals in flight', () =>
    sql<{
      merchant_account: string;
      currency: string;
      book: string;
      reserved: string;
      in_flight: string;
    }>`
    WITH r AS (${
      since === null
        ? sql`SELECT merchant_account, currency, book, sum(amount) AS reserved FROM postings
            WHERE (book = 'live' AND account = 'reserved') OR (book = 'test' AND account = 'test_reserved')
            GROUP BY merchant_account, currency, book`
        : sql`SELECT merchant_account, currency, book, balance AS reserved FROM ledger_balances
            WHERE (book = 'live' AND account = 'reserved') OR (book = 'test' AND account = 'test_reserved')`
    }),
    f AS (
      -- the open cashouts and refunds (mirror_watches_in_flight_ix; the side table is checked below)
      SELECT m.merchant_account, m.currency,
        CASE WHEN m.entity_kind = 'refund' AND m.test THEN 'test' ELSE 'live' END AS book, sum(m.amount) AS in_flight
      FROM mirror_watches w
      JOIN mirrors m ON m.entity_id = w.entity_id AND m.entity_kind = w.entity_kind AND m.merchant_account = w.merchant_account
      WHERE ${OPEN_PAYOUTS} AND m.status IN (${IN_FLIGHT_LITERALS})
        AND m.amount IS NOT NULL AND m.currency IS NOT NULL
      GROUP BY 1, 2, 3)
    SELECT coalesce(r.merchant_account, f.merchant_account) AS merchant_account,
      coalesce(r.currency, f.currency) AS currency, coalesce(r.book, f.book) AS book,
      coalesce(r.reserved, 0)::text AS reserved, coalesce(f.in_flight, 0)::text AS in_flight
    FROM r FULL JOIN f ON f.merchant_account = r.merchant_account AND f.currency = r.currency AND f.book = r.book
    WHERE coalesce(r.reserved, 0) <> coalesce(f.in_flight, 0)`.execute(db),
  );
  failures.push(
    ...listed(
      'reserved differs from in-flight cashouts and refunds',
      reserved.rows,
      (r) =>
        `${r.merchant_account} ${r.currency}${r.book === 'test' ? ' (test book)' : ''}: reserved ${r.reserved}, ` +
        `in flight ${r.in_flight}`,
    ),
  );

  // The side table of the mirrors' sets (`mirror_watches`) against the mirrors'
  // generated `watch`, `watch_at` and their currency and test flag: a mirror with a set and no side row, a
  // side row of a mirror with none (or of no mirror), a side row that differs. Full: every mirror with a set
  // and every side row; incremental: the entities with a reading recorded or an entry booked in the period.
  const watches = await timed('mirror watches', () =>
    sql<{
      merchant_account: string;
      entity_kind: string;
      entity_id: string;
      watch: string | null;
      watch_at: Date | null;
      currency: string | null;
      test: boolean | null;
      side: boolean;
      side_watch: string | null;
      side_at: Date | null;
      side_currency: string | null;
      side_test: boolean | null;
    }>`
    WITH ${
      since === null
        ? sql`m AS (SELECT entity_id, entity_kind, merchant_account, watch, watch_at, currency, test FROM mirrors
            WHERE watch IS NOT NULL),
          w AS (SELECT * FROM mirror_watches)`
        : sql`t AS (
            SELECT merchant_account, entity_kind, entity_id FROM status_history WHERE recorded_at >= ${since}
            UNION SELECT merchant_account, entity_kind, entity_id FROM journal_entries WHERE created_at >= ${since}),
          m AS (SELECT m.entity_id, m.entity_kind, m.merchant_account, m.watch, m.watch_at, m.currency, m.test
            FROM t JOIN mirrors m ON m.entity_id = t.entity_id AND m.entity_kind = t.entity_kind
              AND m.merchant_account = t.merchant_account
            WHERE m.watch IS NOT NULL),
          w AS (SELECT w.* FROM t JOIN mirror_watches w ON w.entity_id = t.entity_id AND w.entity_kind = t.entity_kind
              AND w.merchant_account = t.merchant_account)`
    }
    SELECT coalesce(m.merchant_account, w.merchant_account) AS merchant_account,
      coalesce(m.entity_kind, w.entity_kind) AS entity_kind, coalesce(m.entity_id, w.entity_id) AS entity_id,
      m.watch, m.watch_at, m.currency, m.test, w.entity_id IS NOT NULL AS side, w.watch AS side_watch,
      w.watch_at AS side_at, w.currency AS side_currency, w.test AS side_test
    FROM m FULL JOIN w ON w.entity_id = m.entity_id AND w.entity_kind = m.entity_kind
      AND w.merchant_account = m.merchant_account
    WHERE m.entity_id IS NULL OR w.entity_id IS NULL
      OR (m.watch, m.watch_at, m.currency, m.test) IS DISTINCT FROM (w.watch, w.watch_at, w.currency, w.test)
    ORDER BY 1, 2, 3`.execute(db),
  );
  const watchOf = (watch: string | null, at: Date | null, currency: string | null, test: boolean | null) =>
    `${watch}${at ? ` at ${at.toISOString()}` : ''} ${currency ?? 'no currency'}${test ? ' test' : ''}`;
  failures.push(
    ...listed(
      'mirror watch differs from its mirror',
      watches.rows,
      (r) =>
        `${r.entity_kind} ${r.merchant_account}/${r.entity_id}: ` +
        (r.watch === null
          ? `side row ${watchOf(r.side_watch, r.side_at, r.side_currency, r.side_test)} not wanted (mirror has no watch)`
          : !r.side
            ? `side row missing (mirror ${watchOf(r.watch, r.watch_at, r.currency, r.test)})`
            : `side row ${watchOf(r.side_watch, r.side_at, r.side_currency, r.side_test)}, ` +
              `mirror ${watchOf(r.watch, r.watch_at, r.currency, r.test)}`),
    ),
  );

  // The cash leg (src/domain/cash-leg.ts): each settlement's and bank match's effects stand once or not at
  // all; a booked settlement moves `available` by minus its reported gross and settlements in transit by its
  // net; a settlement row naming a merchant account is booked (the import books it in its transaction).
  const cash = await timed('cash leg', () => verifyCashLeg(db, since));
  failures.push(...listed('cash leg differs from its reports', cash, (s) => s));

  // Running balances (the postings' trigger keeps them) against the sum of each account's postings, in one
  // statement so that a batch committing meanwhile is seen whole or not at all.
  const running = await timed('running balances', () =>
    sql<{
      merchant_account: string;
      currency: string;
      book: string;
      account: string;
      running: string | null;
      posted: string;
    }>`
    WITH p AS (${
      since === null
        ? sql`SELECT merchant_account, currency, book, account, sum(amount) AS posted FROM postings
            GROUP BY merchant_account, currency, book, account`
        : // The latest snapshot plus the day movements since (checked against the postings below).
          sql`SELECT a.merchant_account, a.currency, a.book, a.name AS account,
            coalesce(s.balance, 0) + coalesce((SELECT sum(m.amount_in + m.amount_out) FROM ledger_movements m
              WHERE ${OF_ACCOUNT} AND m.hours = 24 AND m.bucket >= coalesce(s.at, '-infinity')), 0) AS posted
            FROM ledger_accounts a
            LEFT JOIN LATERAL (SELECT s.at, s.balance FROM ledger_balance_snapshots s
              WHERE s.merchant_account = a.merchant_account AND s.currency = a.currency AND s.book = a.book
                AND s.account = a.name ORDER BY s.at DESC LIMIT 1) s ON true`
    })
    SELECT a.merchant_account, a.currency, a.book, a.name AS account, b.balance::text AS running,
      coalesce(p.posted, 0)::text AS posted
    FROM ledger_accounts a
    LEFT JOIN ledger_balances b ON b.merchant_account = a.merchant_account AND b.currency = a.currency
      AND b.book = a.book AND b.account = a.name
    LEFT JOIN p ON p.merchant_account = a.merchant_account AND p.currency = a.currency AND p.book = a.book
      AND p.account = a.name
    WHERE coalesce(b.balance, 0) <> coalesce(p.posted, 0)
    ORDER BY 1, 2, 3, 4`.execute(db),
  );
  failures.push(
    ...listed(
      'running balance differs from postings',
      running.rows,
      (r) =>
        `${r.merchant_account} ${r.currency} ${r.book}/${r.account}: running ${r.running ?? 'missing'}, ` +
        `postings sum to ${r.posted}`,
    ),
  );

  // Daily snapshots against the running sum of each account's postings by UTC day: a snapshot at midnight
  // `at` takes the days ending at or before it (its peers in the window's order included).
  const snapshots = await timed('snapshots', () =>
    sql<{
      merchant_account: string;
      currency: string;
      book: string;
      account: string;
      at: Date;
      snapshot: string;
      posted: string;
    }>`
    ${
      since === null
        ? sql`WITH merged AS (
      SELECT merchant_account, currency, book, account, date_trunc('day', created_at, 'UTC') + interval '24 hours' AS at,
        sum(amount) AS day_sum, NULL::numeric AS snapshot
      FROM postings GROUP BY 1, 2, 3, 4, 5
      UNION ALL
      SELECT merchant_account, currency, book, account, at, 0, balance FROM ledger_balance_snapshots),
    run AS (
      SELECT merchant_account, currency, book, account, at, snapshot,
        sum(day_sum) OVER (PARTITION BY merchant_account, currency, book, account ORDER BY at) AS posted
      FROM merged)
    SELECT merchant_account, currency, book, account, at, snapshot::text, posted::text FROM run
    WHERE snapshot IS NOT NULL AND snapshot <> posted`
        : // The snapshot before plus the day movements between (checked against the postings below).
          sql`SELECT s.merchant_account, s.currency, s.book, s.account, s.at, s.balance::text AS snapshot,
      c.posted::text AS posted
    FROM ledger_balance_snapshots s
    LEFT JOIN LATERAL (SELECT p.at, p.balance FROM ledger_balance_snapshots p
      WHERE p.merchant_account = s.merchant_account AND p.currency = s.currency AND p.book = s.book
        AND p.account = s.account AND p.at < s.at ORDER BY p.at DESC LIMIT 1) prev ON true
    CROSS JOIN LATERAL (SELECT coalesce(prev.balance, 0) + coalesce(sum(m.amount_in + m.amount_out), 0) AS posted
      FROM ledger_movements m
      WHERE m.merchant_account = s.merchant_account AND m.currency = s.currency AND m.book = s.book
        AND m.account = s.account AND m.hours = 24 AND m.bucket >= coalesce(prev.at, '-infinity')
        AND m.bucket < s.at) c
    WHERE s.at >= ${since}::timestamptz - interval '24 hours' AND s.balance <> c.posted`
    }
    ORDER BY 1, 2, 3, 4, 5`.execute(db),
  );
  failures.push(
    ...listed(
      'balance snapshot differs from postings',
      snapshots.rows,
      (r) =>
        `${r.merchant_account} ${r.currency} ${r.book}/${r.account} at ${new Date(r.at).toISOString()}: ` +
        `snapshot ${r.snapshot}, postings before it sum to ${r.posted}`,
    ),
  );

  // Movements per account, effect, direction and UTC day or hour (the postings' trigger keeps them)
  // against the postings of each bucket; incremental: the buckets from the UTC day of `since` on.
  const movements = await timed('movements', () => verifyMovements(db, since));
  failures.push(
    ...listed(
      'ledger movement differs from postings',
      movements,
      (r) =>
        `${r.merchant_account} ${r.currency} ${r.book}/${r.account} ${r.effect}${Number(r.direction) === -1 ? ' (reversal)' : ''} ` +
        `${Number(r.hours) === 24 ? 'day' : 'hour'} ${new Date(r.bucket).toISOString()}: ` +
        `movements in ${r.kept_in ?? 'missing'} out ${r.kept_out ?? 'missing'}, ` +
        `postings in ${r.posted_in ?? 'none'} out ${r.posted_out ?? 'none'}`,
    ),
  );

  // Applied effects against wanted effects, entity by entity, in chunks: the next chunk's state loads while
  // this one's plans are computed.
  const chunk = options.chunk ?? 2_000;
  const drift: string[] = [];
  let entities = 0;
  const pages = entityPages(db, since, chunk, timed);
  const load = (rows: EntityRow[]) => timed('entity state loaded', () => loadEntityState(db, rows));
  let page = await pages.next();
  let loading = page.done ? null : load(page.value);
  while (loading !== null) {
    const state = await loading;
    page = await pages.next();
    loading = page.done ? null : load(page.value);
    // A failed load is thrown by the `await` above on the next turn; until then it is handled here.
    loading?.catch(() => undefined);
    entities += state.refs.length;
    const t0 = performance.now();
    drift.push(...entityDrift(state));
    if (timings) timings['entity plans'] = (timings['entity plans'] ?? 0) + performance.now() - t0;
  }
  failures.push(...listed('applied effects differ from wanted', drift, (s) => s));

  const entries = await timed('entries counted', () =>
    sql<{ n: string }>`
    SELECT count(*)::text AS n FROM journal_entries e WHERE true ${recent('e')}`.execute(db),
  );
  return { ok: failures.length === 0, failures, entities, entries: Number(entries.rows[0]?.n ?? 0) };
}

interface EntityRow {
  merchant_account: string;
  entity_kind: EntityKind;
  entity_id: string;
  external_ref: string | null;
}

type Timed = <T>(name: string, run: () => Promise<T>) => Promise<T>;

/**
 * The entities to check, `chunk` at a time in key order. Incremental: those with a reading recorded or an
 * entry booked in the period, found in one statement by the history's BRIN index on `recorded_at` and the
 * entries' index on `created_at` (each mirror then read by its key); full: every mirror, keyset pages in the
 * primary key's order.
 */
async function* entityPages(
  db: Db,
  since: Date | null,
  chunk: number,
  timed: Timed,
): AsyncGenerator<EntityRow[]> {
  if (since !== null) {
    const { rows } = await timed('entities of the period', () =>
      sql<EntityRow>`
        SELECT m.merchant_account, m.entity_kind, m.entity_id, m.external_ref
        FROM (SELECT merchant_account, entity_kind, entity_id FROM status_history WHERE recorded_at >= ${since}
          UNION SELECT merchant_account, entity_kind, entity_id FROM journal_entries WHERE created_at >= ${since}) t
        CROSS JOIN LATERAL (SELECT m.merchant_account, m.entity_kind, m.entity_id, m.external_ref FROM mirrors m
          WHERE m.merchant_account = t.merchant_account AND m.entity_kind = t.entity_kind
            AND m.entity_id = t.entity_id OFFSET 0) m
        ORDER BY 1, 2, 3`.execute(db),
    );
    for (let i = 0; i < rows.length; i += chunk) yield rows.slice(i, i + chunk);
    return;
  }
  let after: [string, string, string] = ['', '', ''];
  for (;;) {
    const { rows } = await timed('entities of the period', () =>
      sql<EntityRow>`
        SELECT m.merchant_account, m.entity_kind, m.entity_id, m.external_ref FROM mirrors m
        WHERE (m.entity_id, m.entity_kind, m.merchant_account) > (${after[0]}, ${after[1]}, ${after[2]})
        ORDER BY m.entity_id, m.entity_kind, m.merchant_account LIMIT ${chunk}`.execute(db),
    );
    if (rows.length === 0) return;
    const last = rows[rows.length - 1]!;
    after = [last.entity_id, last.entity_kind, last.merchant_account];
    yield rows;
  }
}

interface EntityState {
  refs: EntityRef[];
  histories: Map<string, HistoryItem[]>;
  applied: Map<string, AppliedEntry[]>;
  intents: Map<string, LinkedIntent>;
  refunds: RefundDeposits;
}

/** What planning a chunk of entities reads: histories, booked entries, refunds' deposits, intents. */
async function loadEntityState(db: Db, rows: readonly EntityRow[]): Promise<EntityState> {
  const refs: EntityRef[] = rows.map((r) => ({
    account: r.merchant_account,
    kind: r.entity_kind,
    entityId: r.entity_id,
  }));
  const { histories, applied } = await loadLedgerState(db, refs);
  const refunds = await loadRefundDeposits(db, refs, (k) => histories.get(k) ?? []);
  const intents = await loadIntents(
    db,
    rows.map((r, i) => {
      const k = refKey(refs[i]!);
      const xs = new Set<string>();
      if (r.external_ref) xs.add(r.external_ref);
      for (const h of histories.get(k) ?? []) if (h.externalRef) xs.add(h.externalRef);
      return { ...refs[i]!, externalRefs: [...xs] };
    }),
  );
  return { refs, histories, applied, intents, refunds };
}

/** Each entity whose booked effects differ from the wanted ones (its plan would book something), named. */
function entityDrift({ refs, histories, applied, intents, refunds }: EntityState): string[] {
  const drift: string[] = [];
  for (const ref of refs) {
    const k = refKey(ref);
    const booked = applied.get(k) ?? [];
    const { path, entries: plan } = planEntity({
      kind: ref.kind,
      account: ref.account,
      entityId: ref.entityId,
      history: histories.get(k) ?? [],
      intent: intents.get(k) ?? null,
      applied: booked,
      refundOfTestDeposit: ref.kind === 'refund' && refunds.isTest(ref),
      rules: DEFAULT_EXCEPTION_RULES,
    });
    const counts = new Map<string, number>();
    for (const e of booked) counts.set(e.effect, (counts.get(e.effect) ?? 0) + e.direction);
    const badCount = [...counts].filter(([, n]) => n !== 0 && n !== 1);
    if (plan.length > 0 || badCount.length > 0) {
      const missing = plan
        .filter((p) => p.direction === 1)
        .map((p) => `${p.effect} ${formatAmount(p.amount)}`);
      const extra = plan
        .filter((p) => p.direction === -1)
        .map((p) => `${p.effect} ${formatAmount(p.amount)}`);
      drift.push(
        `${ref.kind} ${ref.account}/${ref.entityId} (status ${path.status ?? 'none'}): missing [${missing.join(', ')}], ` +
          `not wanted [${extra.join(', ')}]${badCount.length ? `, net counts ${JSON.stringify(badCount)}` : ''}`,
      );
    }
  }
  return drift;
}

interface MovementDiff {
  merchant_account: string;
  currency: string;
  book: string;
  account: string;
  hours: number;
  bucket: Date;
  effect: string;
  direction: number;
  kept_in: string | null;
  kept_out: string | null;
  posted_in: string | null;
  posted_out: string | null;
}

/**
 * `ledger_movements` against the postings, bucket by bucket,
 * in one statement (a batch committing meanwhile is seen whole or not at all). With `since`, only the
 * buckets from its UTC day on: the entries created since then by their creation time and their postings by
 * entry (`entryPostings`), the movements per ledger account by their key.
 */
async function verifyMovements(db: Db, since: Date | null): Promise<MovementDiff[]> {
  const start = since === null ? null : new Date(Math.floor(since.getTime() / 86_400_000) * 86_400_000);
  const { rows } = await sql<MovementDiff>`
    WITH g(hours) AS (VALUES (1::smallint), (24::smallint)),
    p AS (
      SELECT x.merchant_account, x.currency, x.book, x.account, g.hours,
        date_trunc(CASE g.hours WHEN 24 THEN 'day' ELSE 'hour' END, x.created_at, 'UTC') AS bucket,
        x.effect, x.direction,
        coalesce(sum(x.amount) FILTER (WHERE x.amount > 0), 0) AS amount_in,
        coalesce(sum(x.amount) FILTER (WHERE x.amount < 0), 0) AS amount_out
      FROM (SELECT x.merchant_account, x.currency, x.book, x.account, x.created_at, x.amount, e.effect, e.direction
        FROM ${start === null ? sql`postings x JOIN journal_entries e ON e.id = x.entry_id` : entryPostings(start, null)}) x
      CROSS JOIN g
      GROUP BY 1, 2, 3, 4, 5, 6, 7, 8),
    m AS (${
      start === null
        ? sql`SELECT * FROM ledger_movements`
        : sql`SELECT m.* FROM ledger_accounts a CROSS JOIN g
            JOIN ledger_movements m ON m.merchant_account = a.merchant_account AND m.currency = a.currency
              AND m.book = a.book AND m.account = a.name AND m.hours = g.hours AND m.bucket >= ${start}`
    })
    SELECT merchant_account, currency, book, account, hours, bucket, effect, direction,
      m.amount_in::text AS kept_in, m.amount_out::text AS kept_out,
      p.amount_in::text AS posted_in, p.amount_out::text AS posted_out
    FROM m FULL JOIN p USING (merchant_account, currency, book, account, hours, bucket, effect, direction)
    WHERE m.amount_in IS DISTINCT FROM p.amount_in OR m.amount_out IS DISTINCT FROM p.amount_out
    ORDER BY 1, 2, 3, 4, 5 DESC, 6, 7, 8 DESC`.execute(db);
  return rows;
}
