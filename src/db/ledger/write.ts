/**
 * The ledger's writes: new mirror rows, and a batch's write (`writeBatch`), the one path of every history
 * row, journal entry and posting. Rows travel as one binary array per column; amounts cross this boundary
 * as bigint minor units written as decimal numerics, never JavaScript numbers.
 */
import { type RawBuilder, sql } from 'kysely';
import type { HistoryItem, PlannedEntry } from '../../domain/effects.ts';
import { AppError } from '../../domain/errors.ts';
import type { Minor } from '../../domain/money.ts';
import type { EntityKind } from '../../domain/statuses.ts';
import type { Db } from '../schema.ts';
import { binaryArray } from './binary-array.ts';
import {
  claim,
  detailsText,
  forgetDetailsTexts,
  type HeldMirror,
  MIRROR_COLUMNS,
  type MirrorUpdate,
} from './claim.ts';
import {
  type Column,
  compareRefs,
  compareText,
  type EntityRef,
  refArrays,
  refKey,
  rowsSource,
} from './keys.ts';
import { prepared } from './statements.ts';

export async function ensureMerchantAccounts(db: Db, accounts: readonly string[]): Promise<void> {
  const names = [...new Set(accounts)].sort();
  if (names.length === 0) return;
  await prepared(
    sql`INSERT INTO merchant_accounts (name) SELECT unnest(${names}::text[]) ON CONFLICT DO NOTHING`,
  ).execute(db);
}

export interface InitialMirror extends EntityRef {
  externalRef: string | null;
  nextPollAt: Date | null;
}

/**
 * Creates missing mirror rows (in key order, so concurrent batches cannot deadlock on inserts), and the
 * `poll_schedule` row of each one created with a next poll (a row that existed keeps its schedule). With
 * `withMerchantAccounts`, the same statement first creates the missing merchant accounts of the rows
 * (what `ensureMerchantAccounts` does, one round trip less).
 */
export async function ensureMirrors(
  db: Db,
  rows: readonly InitialMirror[],
  options: { withMerchantAccounts?: boolean } = {},
): Promise<void> {
  if (rows.length === 0) return;
  // One row per entity (the first given): the schedule insert joins the rows created back to these.
  const sorted = [...rows]
    .sort(compareRefs)
    .filter((r, n, all) => n === 0 || compareRefs(all[n - 1]!, r) !== 0);
  const a = refArrays(sorted);
  const accounts = options.withMerchantAccounts
    ? sql`ma AS (
        INSERT INTO merchant_accounts (name) SELECT unnest(${[...new Set(sorted.map((r) => r.account))].sort()}::text[])
        ON CONFLICT DO NOTHING),`
    : sql``;
  await prepared(sql`
    WITH ${accounts} v AS (
      SELECT * FROM unnest(${a.accounts}::text[], ${a.kinds}::text[], ${a.ids}::text[],
        ${sorted.map((r) => r.externalRef)}::text[], ${sorted.map((r) => r.nextPollAt)}::timestamptz[])
        WITH ORDINALITY AS v(a, k, i, ref, next, n)
    ), mi AS (
      INSERT INTO mirrors (merchant_account, entity_kind, entity_id, external_ref)
      SELECT a, k, i, ref FROM v ORDER BY n
      ON CONFLICT DO NOTHING
      RETURNING merchant_account, entity_kind, entity_id
    )
    INSERT INTO poll_schedule (merchant_account, entity_kind, entity_id, next_poll_at)
    SELECT v.a, v.k, v.i, v.next FROM v
      JOIN mi ON mi.merchant_account = v.a AND mi.entity_kind = v.k AND mi.entity_id = v.i
    WHERE v.next IS NOT NULL
    ORDER BY v.n`).execute(db);
}

export interface HistoryRow extends EntityRef {
  item: HistoryItem;
  fromStatus: string | null;
  stale: boolean;
  illegal: boolean;
  details: Record<string, unknown>;
}

export interface EntryToBook extends EntityRef {
  entry: PlannedEntry;
  effectiveAt: Date;
  /** Who booked it and why, JSON text (an operator's decision); null for the provider's readings. */
  memo?: string | null;
}

const HISTORY_COLUMNS: Record<string, Column<HistoryRow>> = {
  event_id: ['text', (r) => r.item.eventId],
  merchant_account: ['text', (r) => r.account],
  entity_kind: ['text', (r) => r.kind],
  entity_id: ['text', (r) => r.entityId],
  from_status: ['text', (r) => r.fromStatus],
  to_status: ['text', (r) => r.item.status],
  source: ['text', (r) => r.item.source],
  observed_at: ['timestamptz', (r) => r.item.observedAt],
  stale: ['boolean', (r) => r.stale],
  illegal: ['boolean', (r) => r.illegal],
  external_ref: ['text', (r) => r.item.externalRef],
  currency: ['text', (r) => r.item.currency],
  amount: ['numeric', (r) => r.item.amount],
  fee_currency: ['text', (r) => r.item.feeCurrency],
  fee_amount: ['numeric', (r) => r.item.feeAmount],
  fee_on_payer: ['boolean', (r) => r.item.feeOnPayer],
  test: ['boolean', (r) => r.item.test],
  crypto: ['boolean', (r) => r.item.crypto],
  status_reason: ['text', (r) => r.item.statusReason],
  payer_verification: ['text', (r) => r.item.payerVerification],
  rejection_code: ['text', (r) => r.item.rejectionCode],
  rejection_reason: ['text', (r) => r.item.rejectionReason],
  parent_deposit_id: ['text', (r) => r.item.parentDepositId],
  details: ['jsonb', (r) => detailsText(r.details)],
};

const ENTRY_COLUMNS: Record<string, Column<EntryToBook>> = {
  idempotency_key: ['text', (e) => e.entry.idempotencyKey],
  merchant_account: ['text', (e) => e.account],
  entity_kind: ['text', (e) => e.kind],
  entity_id: ['text', (e) => e.entityId],
  effect: ['text', (e) => e.entry.effect],
  direction: ['smallint', (e) => e.entry.direction],
  seq: ['integer', (e) => e.entry.seq],
  book: ['text', (e) => e.entry.book],
  currency: ['text', (e) => e.entry.currency],
  amount: ['numeric', (e) => e.entry.amount],
  fee_currency: ['text', (e) => e.entry.feeCurrency],
  fee_amount: ['numeric', (e) => e.entry.feeAmount],
  effective_at: ['timestamptz', (e) => e.effectiveAt],
  memo: ['jsonb', (e) => e.memo ?? null],
};

interface AccountRow {
  a: string;
  c: string;
  b: string;
  n: string;
}

const ACCOUNT_COLUMNS: Record<string, Column<AccountRow>> = {
  a: ['text', (r) => r.a],
  c: ['text', (r) => r.c],
  b: ['text', (r) => r.b],
  n: ['text', (r) => r.n],
};

interface PostingRow {
  k: string;
  c: string;
  n: string;
  x: Minor;
  /** The line's place in the order its entry's postings are written in (see `restStatement`). */
  o: number;
}

const POSTING_COLUMNS: Record<string, Column<PostingRow>> = {
  k: ['text', (r) => r.k],
  c: ['text', (r) => r.c],
  n: ['text', (r) => r.n],
  x: ['numeric', (r) => r.x],
  o: ['integer', (r) => r.o],
};

export interface BatchWrites {
  history: readonly HistoryRow[];
  entries: readonly EntryToBook[];
  mirrors: readonly MirrorUpdate[];
  /**
   * The rows read whose entities the batch writes without new mirror facts (frozen entities: their history
   * is recorded, their row keeps the facts its bookings were made with, and they are polled no more):
   * claimed by a new version, their schedule rows deleted.
   */
  held: readonly HeldMirror[];
}

export interface WriteResult {
  /** History rows inserted (an event id already recorded is skipped). */
  recorded: number;
  /** Entries booked (an idempotency key already booked is skipped with its postings). */
  booked: number;
  /** The `version` of each mirror row written (inserted or updated), by its position in `mirrors`. */
  versions: string[];
}

interface PollRow {
  a: string;
  k: string;
  i: string;
  t: Date | null;
}

const POLL_COLUMNS: Record<string, Column<PollRow>> = {
  a: ['text', (r) => r.a],
  k: ['text', (r) => r.k],
  i: ['text', (r) => r.i],
  t: ['timestamptz', (r) => r.t],
};

/** The columns a new entity's mirror row is inserted with (`MIRROR_COLUMNS` less the version read). */
const MIRROR_INSERT_NAMES = Object.keys(MIRROR_COLUMNS).filter((n) => n !== 'version');

/**
 * The ledger's one write path: every history row, journal entry and posting is written here, in the
 * same transaction as its entity's mirror row. The mirror rule (every history or entry write also writes
 * the mirror row, so a row's version moves whenever its entity's state does) is enforced by this single
 * write path rather than by the database: a trigger would cost every mirror update of every batch, and
 * this function refuses a history row or entry of an entity whose mirror row it does not write. The
 * schedule half of the rule (every other writer of `poll_schedule` takes the mirror lock first) is
 * `lockMirrorRows`'. Two statements, in this order:
 *
 * 1. The claim (`claim`, claim.ts): each mirror row the batch read and writes is updated by its key and
 *    the version read (`WHERE <key> AND version = <read>`), taking a new version; the held rows (frozen
 *    entities) take a new version only. A row another transaction wrote since the read has another
 *    version and is not claimed, and the server's `mirror_claim_check` fails the statement with a
 *    serialization failure (`MirrorMoved`) before anything else is written.
 * 2. The rest (`restStatement`), once the claim holds every row's lock: new entities' mirror rows, history,
 *    entries and postings, merchant and ledger accounts, and the `poll_schedule` rows of the entities the
 *    batch rescheduled or froze. Its snapshot is taken after the claim took its locks, so it sees every
 *    schedule row written before: every other writer of the schedule takes the mirror lock first
 *    (`lockMirrorRows`).
 *
 * Returns the number of history rows recorded and of entries booked, and the version of each mirror row
 * written, by its position in `mirrors` (see `EntityStateCache`).
 */
export async function writeBatch(db: Db, writes: BatchWrites): Promise<WriteResult> {
  const { history, entries, mirrors, held } = writes;
  const versions = new Array<string>(mirrors.length);
  if (history.length === 0 && entries.length === 0 && mirrors.length === 0 && held.length === 0) {
    return { recorded: 0, booked: 0, versions };
  }
  checkMirrorRule(writes);
  const updates: MirrorUpdate[] = [];
  const inserts: MirrorUpdate[] = [];
  // Where each update and insert is in `mirrors`, for its version.
  const updatesAt: number[] = [];
  const insertsAt: number[] = [];
  for (let at = 0; at < mirrors.length; at++) {
    const m = mirrors[at]!;
    if (m.version === null) {
      inserts.push(m);
      insertsAt.push(at);
    } else {
      updates.push(m);
      updatesAt.push(at);
    }
  }
  // The details are stringified once for both statements (a fresh reading's, in its history row and its
  // mirror row), and forgotten once both are sent.
  forgetDetailsTexts();
  try {
    if (updates.length > 0 || held.length > 0) {
      const claimed = await claim(db, updates, held);
      for (let i = 0; i < claimed.length; i++) versions[updatesAt[i]!] = claimed[i]!;
    }
    const rest = restStatement(history, entries, mirrors, inserts, held);
    if (rest === null) return { recorded: 0, booked: 0, versions };
    const row = (await rest.execute(db)).rows[0];
    const inserted = row?.inserted_versions ?? [];
    if (inserted.length > 0) {
      const byKey = new Map<string, number>();
      for (let i = 0; i < inserts.length; i++) byKey.set(refKey(inserts[i]!), insertsAt[i]!);
      for (const [account, kind, entityId, version] of inserted) {
        const at = byKey.get(refKey({ account: account!, kind: kind as EntityKind, entityId: entityId! }));
        if (at !== undefined) versions[at] = version!;
      }
    }
    return { recorded: Number(row?.recorded ?? 0), booked: Number(row?.booked ?? 0), versions };
  } finally {
    forgetDetailsTexts();
  }
}

/** Throws unless every history row and entry names an entity whose mirror row the batch writes or holds. */
function checkMirrorRule({ history, entries, mirrors, held }: BatchWrites): void {
  if (history.length === 0 && entries.length === 0) return;
  const written = new Set<string>();
  for (const m of mirrors) written.add(refKey(m));
  for (const m of held) written.add(refKey(m));
  for (const rows of [history, entries] as readonly (readonly EntityRef[])[]) {
    for (const r of rows) {
      if (!written.has(refKey(r))) {
        throw new AppError('INTERNAL', `ledger: ${r.kind} ${r.entityId} written without its mirror row`);
      }
    }
  }
}

/** `restStatement`'s one row. */
interface RestRow {
  booked: string;
  recorded: string;
  inserted_versions: string[][] | null;
}

/**
 * The second statement of `writeBatch` (null when there is nothing to write): new mirror rows, history,
 * entries and postings, accounts, schedule. Each schedule row of an entity the batch rescheduled is found
 * by one key probe, which also reads its next poll: it is updated by that ctid only when the next poll
 * moved (no new row version for a poll recomputed to the same instant), inserted when there is none,
 * deleted when the entity needs no more polls (or is frozen). (The schedule is not read by `loadBatch`: a
 * probe per entity read there cost more than one per rescheduled entity here.) Rows travel as one array
 * per column (`rowsSource`, `unnest`). The postings are inserted (their ids drawn) entry by entry, each
 * entry's lines last first: the order the hash join that matches them to their entries gave them when the
 * planner took the entries for the side to probe with, now fixed whatever side it takes. History rows
 * whose event id and entries whose idempotency key exists are skipped (entries with their postings, so
 * the postings' statement-level trigger sees each new entry whole). The keys are probed by `NOT EXISTS` (a
 * subplan, OFFSET 0: the planner would otherwise hash the whole table whenever it looked small) under this
 * statement's snapshot, which sees every row committed before it, rather than by `ON CONFLICT DO
 * NOTHING`, whose speculative insertion takes a second lock of the heap page and writes a second WAL
 * record per row. A key inserted meanwhile by a batch still in progress (a new entity's first rows, or an
 * event id another entity's batch records) fails the statement on its unique index instead of waiting to
 * be skipped; `withLedgerTransaction` runs the batch again, which then skips it. Likewise a new entity's
 * row created meanwhile by another transaction fails the insert on `mirrors_pk`, and the batch run again
 * reads it.
 */
function restStatement(
  history: readonly HistoryRow[],
  entries: readonly EntryToBook[],
  mirrors: readonly MirrorUpdate[],
  inserts: readonly MirrorUpdate[],
  held: readonly HeldMirror[],
): RawBuilder<RestRow> | null {
  const accounts = new Map<string, AccountRow>();
  const postings: PostingRow[] = [];
  const merchants = new Set<string>();
  for (const e of entries) {
    merchants.add(e.account);
    const lines = e.entry.postings;
    for (let i = 0; i < lines.length; i++) {
      const p = lines[i]!;
      const key = `${e.account}\u0000${p.currency}\u0000${e.entry.book}\u0000${p.account}`;
      if (!accounts.has(key))
        accounts.set(key, { a: e.account, c: p.currency, b: e.entry.book, n: p.account });
      postings.push({
        k: e.entry.idempotencyKey,
        c: p.currency,
        n: p.account,
        x: p.amount,
        o: lines.length - i,
      });
    }
  }
  for (const m of inserts) merchants.add(m.account);
  // The schedule rows to write (a next poll set or moved) and to delete (none any more, or frozen): only
  // those of entities the batch rescheduled or froze. A new entity has no schedule row to delete (every
  // writer of the schedule writes it with the mirror row, and a mirror row created meanwhile fails this
  // statement).
  const polls: PollRow[] = [];
  const unpolled: PollRow[] = [];
  for (const m of mirrors) {
    if (!m.rescheduled) continue;
    if (m.nextPollAt !== null) polls.push({ a: m.account, k: m.kind, i: m.entityId, t: m.nextPollAt });
    else if (m.version !== null) unpolled.push({ a: m.account, k: m.kind, i: m.entityId, t: null });
  }
  for (const m of held) unpolled.push({ a: m.account, k: m.kind, i: m.entityId, t: null });
  if (
    history.length === 0 &&
    entries.length === 0 &&
    inserts.length === 0 &&
    polls.length === 0 &&
    unpolled.length === 0
  ) {
    return null;
  }
  const accountRows = [...accounts.entries()].sort((x, y) => compareText(x[0], y[0])).map(([, v]) => v);
  const insertNames = sql.raw(MIRROR_INSERT_NAMES.join(', '));
  const insertValues = sql.raw(
    MIRROR_INSERT_NAMES.map((n) => (n === 'details' ? `coalesce(details, '{}'::jsonb)` : n)).join(', '),
  );
  return prepared(sql<RestRow>`
    WITH ma AS (
      INSERT INTO merchant_accounts (name) SELECT unnest(${binaryArray('text', [...merchants].sort())}::text[]) ON CONFLICT DO NOTHING
    ), h AS (
      INSERT INTO status_history (event_id, merchant_account, entity_kind, entity_id, from_status, to_status, source,
        observed_at, stale, illegal, external_ref, currency, amount, fee_currency, fee_amount, fee_on_payer, test,
        crypto, status_reason, payer_verification, rejection_code, rejection_reason, parent_deposit_id, details)
      SELECT event_id, merchant_account, entity_kind, entity_id, from_status, to_status, source, observed_at, stale,
        illegal, external_ref, currency, amount, fee_currency, fee_amount, fee_on_payer, test, crypto, status_reason,
        payer_verification, rejection_code, rejection_reason, parent_deposit_id, details
      FROM ${rowsSource(history, HISTORY_COLUMNS)}
      WHERE NOT EXISTS (SELECT 1 FROM status_history x WHERE x.event_id = v.event_id OFFSET 0)
      RETURNING 1
    ), mi AS (
      INSERT INTO mirrors (${insertNames})
      SELECT ${insertValues} FROM ${rowsSource(inserts, MIRROR_COLUMNS)}
      RETURNING merchant_account, entity_kind, entity_id, version::text AS version, watch, watch_at, currency, test
    ), wi AS (
      INSERT INTO mirror_watches (entity_id, entity_kind, merchant_account, watch, watch_at, currency, test)
      SELECT entity_id, entity_kind, merchant_account, watch, watch_at, currency, test FROM mi WHERE mi.watch IS NOT NULL
    ), ps AS (
      SELECT v.a, v.k, v.i, v.t, x.tid, x.next FROM ${rowsSource(polls, POLL_COLUMNS)}
        LEFT JOIN LATERAL (
          SELECT x.ctid AS tid, x.next_poll_at AS next FROM poll_schedule x
          WHERE x.merchant_account = v.a AND x.entity_kind = v.k AND x.entity_id = v.i OFFSET 0) x ON true
    ), pu AS (
      UPDATE poll_schedule s SET next_poll_at = ps.t
      FROM ps CROSS JOIN LATERAL (
          SELECT x.ctid AS tid FROM poll_schedule x WHERE x.ctid = ps.tid AND x.merchant_account = ps.a
            AND x.entity_kind = ps.k AND x.entity_id = ps.i OFFSET 0) t
      WHERE s.ctid = t.tid AND ps.next <> ps.t
    ), pi AS (
      INSERT INTO poll_schedule (merchant_account, entity_kind, entity_id, next_poll_at)
      SELECT a, k, i, t FROM ps WHERE ps.tid IS NULL
      ON CONFLICT (merchant_account, entity_kind, entity_id) DO UPDATE SET next_poll_at = excluded.next_poll_at
    ), pd AS (
      DELETE FROM poll_schedule s USING ${rowsSource(unpolled, POLL_COLUMNS)}
        CROSS JOIN LATERAL (
          SELECT x.ctid AS tid FROM poll_schedule x
          WHERE x.merchant_account = v.a AND x.entity_kind = v.k AND x.entity_id = v.i OFFSET 0) t
      WHERE s.ctid = t.tid
    ), a AS (
      INSERT INTO ledger_accounts (merchant_account, currency, book, name)
      SELECT a, c, b, n FROM ${rowsSource(accountRows, ACCOUNT_COLUMNS)}
      ON CONFLICT DO NOTHING
    ), e AS (
      INSERT INTO journal_entries (idempotency_key, merchant_account, entity_kind, entity_id, effect, direction, seq,
        book, currency, amount, fee_currency, fee_amount, effective_at, memo)
      SELECT idempotency_key, merchant_account, entity_kind, entity_id, effect, direction, seq, book, currency,
        amount, fee_currency, fee_amount, effective_at, memo
      FROM ${rowsSource(entries, ENTRY_COLUMNS)}
      WHERE NOT EXISTS (SELECT 1 FROM journal_entries x WHERE x.idempotency_key = v.idempotency_key OFFSET 0)
      RETURNING id, idempotency_key, merchant_account, book
    ), p AS (
      INSERT INTO postings (entry_id, merchant_account, currency, book, account, amount)
      SELECT e.id, e.merchant_account, v.c, e.book, v.n, v.x
      FROM ${rowsSource(postings, POSTING_COLUMNS)}
        JOIN e ON e.idempotency_key = v.k
      ORDER BY e.id, v.o
    )
    SELECT (SELECT count(*) FROM e)::text AS booked, (SELECT count(*) FROM h)::text AS recorded,
      (SELECT json_agg(json_build_array(merchant_account, entity_kind, entity_id, version)) FROM mi)
        AS inserted_versions`);
}

// ---------------------------------------------------------------- intents and cross-entity reads
