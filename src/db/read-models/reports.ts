/**
 * The reads behind the workbooks and the page, over the ledger's tables (`schema.ts`). Sums are
 * computed by PostgreSQL on `numeric` and returned as text, then parsed to bigint minor units: an
 * amount never passes through a JavaScript number. Periods use the booking time of journal entries
 * (`journal_entries.created_at`), so a period's report never changes once the period is over. Opening
 * and closing balances are the daily snapshots plus the postings since (`balancesBefore`), movements
 * the period's own postings: nothing reads the history before the period, and opening + movements =
 * closing checks the snapshots and the postings against each other.
 */
import { type RawBuilder, sql } from 'kysely';
import { DECIDED_TYPES } from '../../domain/exception-rules.ts';
import type { SlaTable } from '../../domain/exception-sla.ts';
import { type Minor, parseLedgerMinor } from '../../domain/money.ts';
import { ENTITY_KINDS } from '../../domain/statuses.ts';
import { dueAtSql, MIRROR_OF_EXCEPTION, overdueSql } from '../exceptions/sla.ts';
import { exceptionVersionSql } from '../exceptions/version.ts';
import { balanceAsOf } from '../ledger/periods.ts';
import type { Db } from '../schema.ts';
import { RUNNING_BALANCE } from './balances.ts';

const accountFilter = (account: string | null, column = 'e.merchant_account') =>
  account === null ? sql`` : sql` AND ${sql.ref(column)} = ${account}`;

export interface AccountBalance {
  merchantAccount: string;
  currency: string;
  book: string;
  account: string;
  balance: Minor;
}

/**
 * Balance of every ledger account with a posting booked strictly before `instant`: the running balances
 * when `instant` is not in the past, else the latest daily snapshot at or before it plus what moved
 * since (`balanceAsOf`): the cost follows a day of movements and an hour of entries, not the history. (An
 * entry and its postings are written by one statement, so they share their `created_at`: a posting's
 * booking time is its entry's.)
 */
export async function balancesBefore(
  db: Db,
  instant: Date,
  account: string | null,
): Promise<AccountBalance[]> {
  const asOf = instant.getTime() <= Date.now() ? balanceAsOf(instant, false) : null;
  const { rows } = await sql<{
    merchant_account: string;
    currency: string;
    book: string;
    name: string;
    balance: string;
  }>`
    SELECT a.merchant_account, a.currency, a.book, a.name, ${asOf?.balance ?? RUNNING_BALANCE} AS balance
      FROM ledger_accounts a ${asOf?.join ?? sql``}
     WHERE ${asOf?.posted ?? sql`true`}${accountFilter(account, 'a.merchant_account')}
     ORDER BY 1, 2, 3, 4`.execute(db);
  return rows.map((r) => ({
    merchantAccount: r.merchant_account,
    currency: r.currency,
    book: r.book,
    account: r.name,
    balance: parseLedgerMinor(r.balance),
  }));
}

/**
 * A period and the id range of the journal entries booked in it: every entry of [start, end) has an id
 * from `firstEntry` to `lastEntry` (none: 1 to 0), and its postings an `entry_id` in that range. The
 * settlement workbook's reads name the range beside the period so that PostgreSQL reads the period's
 * stretch of the entries' and the postings' indexes, never the history before it: planned for a cursor
 * (first rows fast), a period's journal was a merge join walking both indexes from the first entry ever
 * booked; planned whole, its postings a scan of every posting, its entities of every mirror.
 */
export interface EntryPeriod extends ReportPeriod {
  firstEntry: string;
  lastEntry: string;
}

/** The id range of the entries booked in [start, end), read through their booking-time index. */
export async function entryPeriod(db: Db, p: ReportPeriod): Promise<EntryPeriod> {
  // OFFSET 0 keeps min() and max() from becoming a walk of the primary key from its first id.
  const { rows } = await sql<{ first: string | null; last: string | null }>`
    SELECT min(id)::text AS first, max(id)::text AS last FROM (
      SELECT id FROM journal_entries WHERE created_at >= ${p.start} AND created_at < ${p.end} OFFSET 0) e`.execute(
    db,
  );
  const first = rows[0]?.first ?? null;
  const last = rows[0]?.last ?? null;
  return {
    start: p.start,
    end: p.end,
    firstEntry: first ?? '1',
    lastEntry: first === null || last === null ? '0' : last,
  };
}

/** The entries `e` of the period (by their id range and booking time), and their postings `p` when joined. */
function entriesIn(p: EntryPeriod): RawBuilder<unknown> {
  return sql`e.id BETWEEN ${p.firstEntry} AND ${p.lastEntry} AND e.created_at >= ${p.start} AND e.created_at < ${p.end}`;
}
function postingsIn(p: EntryPeriod): RawBuilder<unknown> {
  return sql`p.entry_id BETWEEN ${p.firstEntry} AND ${p.lastEntry}`;
}

/** The mirror of the entity of `row` (its key columns), looked up by its key: never a scan of every mirror. */
function mirrorOf(row: string, columns: RawBuilder<unknown>, condition: RawBuilder<unknown> = sql``) {
  const r = sql.raw(row);
  return sql`CROSS JOIN LATERAL (
      SELECT ${columns} FROM mirrors m
       WHERE m.merchant_account = ${r}.merchant_account AND m.entity_kind = ${r}.entity_kind
         AND m.entity_id = ${r}.entity_id${condition}
       LIMIT 1) m`;
}

export interface Movement {
  book: string;
  currency: string;
  entityKind: string;
  effect: string;
  account: string;
  amount: Minor;
  /** Number of postings in the group (journal lines). */
  lines: number;
}

export interface LedgerTotals {
  /** Balances from entries booked before the period. */
  opening: AccountBalance[];
  /** Balances from entries booked before the period's end (summed, not derived from the movements). */
  closing: AccountBalance[];
  /** Postings booked in the period per book, currency, entity kind, effect and ledger account. */
  movements: Movement[];
}

/**
 * Opening balances (before `start`) and closing balances (before `end`) from the daily snapshots
 * (`balancesBefore`), and the period's movements by effect from its own postings only: nothing before
 * the period is read. The closing balances are not derived from the movements, so opening + movements
 * = closing is a check of the snapshots and the postings against each other.
 */
export async function ledgerTotals(
  db: Db,
  start: Date,
  end: Date,
  account: string | null,
  entries?: EntryPeriod,
): Promise<LedgerTotals> {
  const opening = await balancesBefore(db, start, account);
  const closing = await balancesBefore(db, end, account);
  const period = entries ?? (await entryPeriod(db, { start, end }));
  const { rows } = await sql<{
    currency: string;
    book: string;
    account: string;
    entity_kind: string;
    effect: string;
    in_period: string;
    lines: string;
  }>`
    SELECT p.book, p.currency, e.entity_kind, e.effect, p.account, sum(p.amount)::text AS in_period,
           count(*)::text AS lines
      FROM journal_entries e JOIN postings p ON p.entry_id = e.id
     WHERE ${entriesIn(period)} AND ${postingsIn(period)}${accountFilter(account)}
     GROUP BY 1, 2, 3, 4, 5`.execute(db);
  const movements = rows.map((r) => ({
    book: r.book,
    currency: r.currency,
    entityKind: r.entity_kind,
    effect: r.effect,
    account: r.account,
    amount: parseLedgerMinor(r.in_period),
    lines: Number(r.lines),
  }));
  return { opening: inWorkbookOrder(opening), closing: inWorkbookOrder(closing), movements };
}

/** Balances in the order the workbook lists them (by `merchant|currency|book|account`). */
function inWorkbookOrder(rows: readonly AccountBalance[]): AccountBalance[] {
  const key = (b: AccountBalance) => `${b.merchantAccount}|${b.currency}|${b.book}|${b.account}`;
  return [...rows].sort((x, y) => (key(x) < key(y) ? -1 : key(x) > key(y) ? 1 : 0));
}

/** Gross credited in [start, end) on live deposits that were released early, per currency. */
export async function earlyReleasedCredits(
  db: Db,
  p: EntryPeriod,
  account: string | null,
): Promise<Map<string, Minor>> {
  const { rows } = await sql<{ currency: string; amount: string }>`
    SELECT e.currency, sum(e.amount * e.direction)::text AS amount
      FROM journal_entries e ${mirrorOf('e', sql`1`, sql` AND m.ever_early_released`)}
     WHERE ${entriesIn(p)} AND e.book = 'live' AND e.effect = 'credit'${accountFilter(account)}
     GROUP BY 1`.execute(db);
  return new Map(rows.map((r) => [r.currency, parseLedgerMinor(r.amount)]));
}

/** Merchant accounts known to the ledger. */
export async function merchantAccounts(db: Db): Promise<string[]> {
  const rows = await db.selectFrom('merchant_accounts').select('name').orderBy('name').execute();
  return rows.map((r) => r.name);
}

/**
 * Reads a query's rows in batches through a server-side cursor (`DECLARE ... CURSOR`, `FETCH n`), so
 * a million rows never sit in memory at once. Must run inside a transaction (`trx`). `onBatch` may
 * be async (to wait for a write stream to drain).
 */
export async function forEachBatch<Row>(
  trx: Db,
  query: RawBuilder<Row>,
  batchSize: number,
  onBatch: (rows: Row[]) => void | Promise<void>,
): Promise<number> {
  const name = `payrecon_cur_${Math.random().toString(36).slice(2, 10)}`;
  await sql`DECLARE ${sql.raw(name)} NO SCROLL CURSOR FOR ${query}`.execute(trx);
  let total = 0;
  const fetch = () => {
    const p = sql<Row>`FETCH ${sql.raw(String(batchSize))} FROM ${sql.raw(name)}`.execute(trx);
    // Awaited below; this only keeps a prefetch failing after an earlier error from going unhandled.
    p.catch(() => undefined);
    return p;
  };
  try {
    // The next batch is fetched while the current one is written: PostgreSQL works while we format.
    let next = fetch();
    for (;;) {
      const { rows } = await next;
      if (rows.length === 0) break;
      const more = rows.length === batchSize;
      if (more) next = fetch();
      total += rows.length;
      await onBatch(rows);
      if (!more) break;
    }
  } finally {
    await sql`CLOSE ${sql.raw(name)}`.execute(trx);
  }
  return total;
}

/**
 * A query's rows in batches through a server-side cursor, read on demand (`next`, an empty batch at the
 * end), the next batch fetched while the current one is written; `close` when done. Inside a transaction.
 * For a caller that spreads one result over several sheets (`forEachBatch` hands out every batch).
 */
export async function openBatches<Row>(
  trx: Db,
  query: RawBuilder<Row>,
  batchSize: number,
): Promise<{ next(): Promise<Row[]>; close(): Promise<void> }> {
  const name = `payrecon_cur_${Math.random().toString(36).slice(2, 10)}`;
  await sql`DECLARE ${sql.raw(name)} NO SCROLL CURSOR FOR ${query}`.execute(trx);
  const fetch = () => {
    const p = sql<Row>`FETCH ${sql.raw(String(batchSize))} FROM ${sql.raw(name)}`.execute(trx);
    p.catch(() => undefined);
    return p;
  };
  let ahead: ReturnType<typeof fetch> | null = fetch();
  return {
    async next() {
      if (ahead === null) return [];
      const { rows } = await ahead;
      ahead = rows.length < batchSize ? null : fetch();
      return rows;
    },
    async close() {
      if (ahead !== null) await ahead.catch(() => undefined);
      ahead = null;
      await sql`CLOSE ${sql.raw(name)}`.execute(trx);
    },
  };
}

/** Number of rows a query would return (for progress). */
export async function countRows(db: Db, query: RawBuilder<unknown>): Promise<number> {
  const { rows } = await sql<{ n: string }>`SELECT count(*)::text AS n FROM (${query}) q`.execute(db);
  return Number(rows[0]?.n ?? 0);
}

// ---------------------------------------------------------------- workbook detail queries

/** The instants a report's queries read between: [start, end). */
export interface ReportPeriod {
  start: Date;
  end: Date;
}

export interface EntityRow {
  entity_kind: string;
  /** Rows of the whole result (every kind): the entity sheets' total, known with the first batch. */
  result_rows: string;
  merchant_account: string;
  entity_id: string;
  external_ref: string | null;
  parent_deposit_id: string | null;
  status: string | null;
  status_reason: string | null;
  rejection_code: string | null;
  rejection_reason: string | null;
  currency: string;
  amount: string | null;
  fee_amount: string | null;
  fee_on_payer: boolean;
  ever_early_released: boolean;
  first_seen_at: Date | null;
  status_since: Date | null;
  completed_at: Date | null;
  e_credit: string;
  e_fee: string;
  e_reversal: string;
  e_reserve: string;
  e_release: string;
  e_settle: string;
  e_late: string;
  available_delta: string;
  reserved_delta: string;
}

/**
 * Live entities (with their mirror) with journal activity in the period, with that activity per effect
 * read from the postings: credit, fee and reversal on `available`; reserve and settle on `reserved`;
 * release and late reversal on `available`. Every kind in one pass over the period, deposits first, then
 * cashouts, then refunds (`ENTITY_KINDS`), each by currency and first activity; each row carries the
 * number of rows of the whole result.
 */
export function entityQuery(p: EntryPeriod, account: string | null): RawBuilder<EntityRow> {
  const on = (effect: string, ledgerAccount: string) =>
    sql`coalesce(sum(p.amount) FILTER (WHERE e.effect = ${effect} AND p.account = ${ledgerAccount}), 0)::text`;
  // The period's activity per entity first, then each entity's mirror by its key.
  return sql<EntityRow>`
    SELECT a.entity_kind, count(*) OVER ()::text AS result_rows, m.merchant_account, m.entity_id, m.external_ref, m.parent_deposit_id, m.status, m.status_reason,
           m.rejection_code, m.rejection_reason, a.currency, m.amount, m.fee_amount, m.fee_on_payer,
           m.ever_early_released, m.first_seen_at, m.status_since, m.completed_at,
           a.e_credit, a.e_fee, a.e_reversal, a.e_reserve, a.e_release, a.e_settle, a.e_late,
           a.available_delta, a.reserved_delta
      FROM (
        SELECT e.merchant_account, e.entity_kind, e.entity_id, e.currency, min(e.id) AS first_entry,
               ${on('credit', 'available')} AS e_credit, ${on('fee', 'available')} AS e_fee,
               ${on('early_release_reversal', 'available')} AS e_reversal,
               ${on('reserve', 'reserved')} AS e_reserve, ${on('release', 'available')} AS e_release,
               ${on('settle', 'reserved')} AS e_settle, ${on('late_reversal', 'available')} AS e_late,
               coalesce(sum(p.amount) FILTER (WHERE p.account = 'available'), 0)::text AS available_delta,
               coalesce(sum(p.amount) FILTER (WHERE p.account = 'reserved'), 0)::text AS reserved_delta
          FROM journal_entries e JOIN postings p ON p.entry_id = e.id
         WHERE e.book = 'live' AND ${entriesIn(p)} AND ${postingsIn(p)}${accountFilter(account)}
         GROUP BY e.merchant_account, e.entity_kind, e.entity_id, e.currency
      ) a
      ${mirrorOf(
        'a',
        sql`m.merchant_account, m.entity_id, m.external_ref, m.parent_deposit_id, m.status, m.status_reason,
           m.rejection_code, m.rejection_reason, m.amount::text AS amount, m.fee_amount::text AS fee_amount,
           m.fee_on_payer, m.ever_early_released, m.first_seen_at, m.status_since, m.completed_at`,
      )}
     ORDER BY array_position(${[...ENTITY_KINDS]}::text[], a.entity_kind), a.currency, a.first_entry, a.entity_id`;
}

export interface JournalRow {
  entry: string;
  /** Booking instant in epoch milliseconds (cheaper to read than timestamptz text). */
  booked_ms: number;
  merchant_account: string;
  entity_kind: string;
  entity_id: string;
  effect: string;
  direction: number;
  account: string;
  currency: string;
  amount: string;
}

/** One row per posting of the book's entries booked in the period, in booking order. */
export function journalQuery(book: string, p: EntryPeriod, account: string | null): RawBuilder<JournalRow> {
  return sql<JournalRow>`
    SELECT e.id AS entry, (extract(epoch FROM e.created_at) * 1000)::float8 AS booked_ms, e.merchant_account, e.entity_kind, e.entity_id, e.effect,
           e.direction, p.account, p.currency, p.amount::text AS amount
      FROM journal_entries e JOIN postings p ON p.entry_id = e.id
     WHERE ${entriesIn(p)} AND ${postingsIn(p)} AND e.book = ${book}${accountFilter(account)}
     ORDER BY e.id, p.id`;
}

export interface ExceptionRow {
  id: string;
  type: string;
  severity: string;
  state: string;
  merchant_account: string;
  entity_kind: string;
  entity_id: string;
  count: number;
  first_seen_at: Date;
  last_seen_at: Date;
  acknowledged_by: string | null;
  acknowledged_at: Date | null;
  resolved_by: string | null;
  resolved_at: Date | null;
  note: string | null;
  /** The facts it carries (details.facts, src/db/exceptions.ts); null on rows raised before they were kept. */
  external_ref: string | null;
  intent_amount: string | null;
  intent_currency: string | null;
  provider_amount: string | null;
  provider_currency: string | null;
  provider_status: string | null;
  status_reason: string | null;
  rule: string | null;
  reopen_reason: string | null;
  /** The refused move of an ILLEGAL_TRANSITION, the changes of a FACTS_CHANGED (`refusedReading`); else null. */
  refused: Record<string, unknown> | null;
  /** The queue's fields (src/db/exceptions/queue.ts): who works it, its due time, overdue at `asOf`. */
  assignee: string | null;
  due_at: Date;
  overdue: boolean;
  /** The latest note of its audit trail, who wrote it and when. */
  last_note: string | null;
  last_note_by: string | null;
  last_note_at: Date | null;
  /** Its version now (`exceptionVersionSql`), which the workbook's Key carries. */
  version: string;
  /** Who proposed the decision waiting for approval; null when none waits. */
  proposed_by: string | null;
}

/** Exceptions open at `asOf`, or opened or resolved in the period; due times from the table `sla`. */
export function exceptionQuery(
  p: ReportPeriod,
  asOf: Date,
  account: string | null,
  sla: SlaTable,
): RawBuilder<ExceptionRow> {
  return sql<ExceptionRow>`
    SELECT x.id::text AS id, x.type, x.severity, x.state, x.merchant_account, x.entity_kind, x.entity_id, x.count,
           x.assignee, ${dueAtSql(sla)} AS due_at, ${overdueSql(sla, asOf)} AS overdue,
           n.note AS last_note, n.actor AS last_note_by, n.at AS last_note_at,
           x.first_seen_at, x.last_seen_at, x.acknowledged_by, x.acknowledged_at, x.resolved_by, x.resolved_at,
           coalesce(x.resolution_note, x.acknowledgement_note) AS note,
           x.details #>> '{facts,externalRef}' AS external_ref, x.details #>> '{facts,intentAmount}' AS intent_amount,
           x.details #>> '{facts,intentCurrency}' AS intent_currency,
           x.details #>> '{facts,providerAmount}' AS provider_amount,
           x.details #>> '{facts,providerCurrency}' AS provider_currency,
           x.details #>> '{facts,status}' AS provider_status,
           nullif(concat_ws(' ', x.details #>> '{facts,statusReason}', x.details #>> '{facts,rejectionCode}',
             x.details #>> '{facts,rejectionReason}'), '') AS status_reason,
           x.details #>> '{facts,rule}' AS rule, x.reopen_reason,
           ${exceptionVersionSql('x')} AS version, x.proposal ->> 'by' AS proposed_by,
           CASE WHEN x.type IN (${sql.join(DECIDED_TYPES.map((t) => sql.lit(t)))})
             THEN jsonb_build_object('moves', x.details -> 'moves', 'changes', x.details -> 'changes') END AS refused
      FROM exceptions x
      ${MIRROR_OF_EXCEPTION}
      LEFT JOIN LATERAL (
        SELECT v.at, v.actor, v.note FROM exception_events v
         WHERE v.exception_id = x.id AND v.note IS NOT NULL ORDER BY v.id DESC LIMIT 1) n ON true
     WHERE x.first_seen_at < ${asOf}
       AND (x.resolved_at IS NULL OR x.resolved_at >= ${p.start})${accountFilter(account, 'x.merchant_account')}
     ORDER BY x.type, x.first_seen_at, x.id`;
}

export interface LateRow {
  merchant_account: string;
  entity_kind: string;
  entity_id: string;
  external_ref: string | null;
  parent_deposit_id: string | null;
  status: string | null;
  rejection_code: string | null;
  rejection_reason: string | null;
  currency: string;
  amount: string;
  completed_at: Date | null;
  status_since: Date | null;
  booked_at: Date;
}

export function lateQuery(p: ReportPeriod, account: string | null): RawBuilder<LateRow> {
  return sql<LateRow>`
    SELECT e.merchant_account, e.entity_kind, e.entity_id, m.external_ref, m.parent_deposit_id, m.status,
           m.rejection_code, m.rejection_reason, e.currency, (e.amount * e.direction)::text AS amount,
           m.completed_at, m.status_since, e.created_at AS booked_at
      FROM journal_entries e
      LEFT JOIN mirrors m ON m.merchant_account = e.merchant_account AND m.entity_kind = e.entity_kind
                         AND m.entity_id = e.entity_id
     WHERE e.effect = 'late_reversal' AND e.book = 'live'
       AND e.created_at >= ${p.start} AND e.created_at < ${p.end}${accountFilter(account)}
     ORDER BY e.created_at, e.id`;
}

export interface ExceptionStats {
  type: string;
  /** Open at the as-of instant, aged under 1 day, 1-3, 3-7 and over 7 days. */
  b0: number;
  b1: number;
  b2: number;
  b3: number;
  opened: number;
  resolved: number;
}

/** Per exception type: open at `asOf` by age bucket, and opened and resolved in the period. */
export async function exceptionStatsByType(
  db: Db,
  p: ReportPeriod,
  asOf: Date,
  account: string | null,
): Promise<ExceptionStats[]> {
  const { rows } = await sql<ExceptionStats>`
        WITH x AS (
          SELECT type, first_seen_at, resolved_at,
                 (first_seen_at < ${asOf} AND (resolved_at IS NULL OR resolved_at > ${asOf})) AS open_at,
                 extract(epoch FROM (${asOf}::timestamptz - first_seen_at)) / 86400 AS age
            FROM exceptions x
           WHERE true${accountFilter(account, 'x.merchant_account')}
        )
        SELECT type,
               count(*) FILTER (WHERE open_at AND age < 1)::int AS b0,
               count(*) FILTER (WHERE open_at AND age >= 1 AND age < 3)::int AS b1,
               count(*) FILTER (WHERE open_at AND age >= 3 AND age < 7)::int AS b2,
               count(*) FILTER (WHERE open_at AND age >= 7)::int AS b3,
               count(*) FILTER (WHERE first_seen_at >= ${p.start} AND first_seen_at < ${p.end})::int AS opened,
               count(*) FILTER (WHERE resolved_at >= ${p.start} AND resolved_at < ${p.end})::int AS resolved
          FROM x GROUP BY type ORDER BY type`.execute(db);
  return rows;
}

/** Makes the workbook's one-off queries sort in memory and skip JIT compilation (inside its transaction). */
export async function tuneForReport(trx: Db): Promise<void> {
  await sql`SET LOCAL work_mem = '64MB'`.execute(trx);
  await sql`SET LOCAL jit = off`.execute(trx);
}

export { accountFilter };
