/**
 * Set-based reads and writes of the ledger service. Every function takes `db` or `trx` first and
 * touches many entities per statement (arrays passed to `unnest`), so a batch costs a handful of round
 * trips whatever its size. Amounts cross this boundary as decimal text and become bigint minor units
 * here; they never become JavaScript numbers.
 */
import { type RawBuilder, sql } from 'kysely';
import {
  type AppliedEntry,
  type Book,
  type Effect,
  type HistoryItem,
  type IntentFacts,
  PAYOUT_IN_FLIGHT,
  type PlannedEntry,
} from '../domain/effects.ts';
import { AppError } from '../domain/errors.ts';
import { formatAmount, LEDGER_NUMERIC, type Minor, parseMinor, parseMinorOrNull } from '../domain/money.ts';
import { type HistorySource, type Intent, intentKind } from '../domain/observation.ts';
import type { EntityKind } from '../domain/statuses.ts';
import { type BinaryColumn, binaryArray, binaryColumns } from './binary-array.ts';
import { prepared, preparedArrays } from './prepared.ts';
import type { Db } from './schema.ts';

export interface EntityRef {
  account: string;
  kind: EntityKind;
  entityId: string;
}

export function refKey(r: EntityRef): string {
  return `${r.account}\u0000${r.kind}\u0000${r.entityId}`;
}

export function compareRefs(a: EntityRef, b: EntityRef): number {
  return (
    compareText(a.account, b.account) || compareText(a.kind, b.kind) || compareText(a.entityId, b.entityId)
  );
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** A stored amount (non-negative, at most 18 integer digits). */
const amountOf = (v: string): Minor => parseMinor(v);
/** Numeric text of the ledger (signed; sums may exceed 18 integer digits) or null. */
const ledgerMinor = (v: string | null): Minor | null => parseMinorOrNull(v, LEDGER_NUMERIC);
export const toText = (v: Minor | null): string | null => (v === null ? null : formatAmount(v));

/** The key columns of the rows, each as a binary text array (`binaryColumns`), in the rows' order. */
function keyArrays<T>(rows: readonly T[], ...columns: ((row: T) => string | null)[]): Buffer[] {
  return binaryColumns(
    rows,
    columns.map((f) => ['text', f] as BinaryColumn<T>),
  );
}

/**
 * The refs' three key columns as binary text arrays (`keyArrays`): the server reads each element as its
 * bytes (`array_recv`) instead of parsing an array literal at Bind, and the client copies strings instead of
 * building literals.
 */
function refArrays(refs: readonly EntityRef[]) {
  const [accounts, kinds, ids] = keyArrays(
    refs,
    (r) => r.account,
    (r) => r.kind,
    (r) => r.entityId,
  );
  return { accounts: accounts!, kinds: kinds!, ids: ids! };
}

/**
 * The refs as a row source, in the given order: `(SELECT unnest($1) AS account, unnest($2) AS kind,
 * unnest($3) AS id) AS r`, set-returning functions in a select list (a ProjectSet, in lockstep) rather
 * than `unnest($1, $2, $3)` in FROM, whose function scan stores each array's rows in a tuplestore before
 * reading them back (see `rowsSource`). It has no ordinal column: `WITH ORDINALITY` has no select-list
 * form, and `generate_series(1, $n)` is estimated at 1,000 rows in a generic plan (an `unnest` of a
 * parameter at 10), which once made a keyed check of `loadBatch` the hashed scan of the whole of `mirrors`.
 * Keyed reads join it to a table through `CROSS JOIN LATERAL (... WHERE <keyOf> ... OFFSET 0)`: the
 * OFFSET keeps the planner from flattening the subquery into a join, so every ref is one index probe
 * whatever the statistics say. (With missing or stale statistics, which is every table that has grown
 * since its last ANALYZE, a plain `IN (SELECT * FROM unnest(...))` became a hash join that scanned the
 * whole table once per batch: the cost of a batch grew with the ledger.)
 */
function refsSource(refs: readonly EntityRef[]) {
  const a = refArrays(refs);
  return sql`(SELECT unnest(${a.accounts}::text[]) AS account, unnest(${a.kinds}::text[]) AS kind,
    unnest(${a.ids}::text[]) AS id) AS r`;
}

/**
 * 1 to `n`, the positions of a statement's rows, sent as one more array of its row source where the
 * statement needs them (instead of `WITH ORDINALITY` or `generate_series`, see `refsSource`). Kept
 * between calls: a new array only for a longer batch.
 */
let positionsKept: number[] = [];
function positions(n: number): readonly number[] {
  if (positionsKept.length < n) positionsKept = Array.from({ length: n }, (_, i) => i + 1);
  return n === positionsKept.length ? positionsKept : positionsKept.slice(0, n);
}

/** `<alias>.merchant_account = r.account AND ...`: the key condition against `refsSource`. */
function keyOf(alias: string) {
  return sql.raw(
    `${alias}.merchant_account = r.account AND ${alias}.entity_kind = r.kind AND ${alias}.entity_id = r.id`,
  );
}

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

export interface MirrorState extends EntityRef {
  /**
   * The row's `version` as read (decimal text), by which the batch's write claims it; null for an entity
   * without a mirror row yet, which the write inserts whole.
   */
  version: string | null;
  status: string | null;
  everCompleted: boolean;
  everEarlyReleased: boolean;
  test: boolean;
  crypto: boolean;
  pollAttempts: number;
  intentId: string | null;
  firstSeenAt: Date | null;
  externalRef: string | null;
  /** The intent linked by the previous computation (read with the row, no extra query). */
  intent: LinkedIntent | null;
}

/**
 * Per entity, its history as a JSON array of arrays (one per observation, in `decodeHistory`'s column
 * order) and its booked entries likewise (`decodeApplied`). The server builds the JSON and the client
 * reads it with the native parser: a batch costs one `JSON.parse` per entity instead of per-column
 * conversions of thousands of rows. Timestamps travel as epoch milliseconds, amounts as decimal text.
 * Both are correlated subqueries on `r` (the refs source): one index probe per entity.
 */
const HISTORY_JSON = sql`(
  SELECT coalesce(json_agg(json_build_array(h.event_id, h.to_status,
    floor(extract(epoch FROM h.observed_at) * 1000)::bigint, h.source, h.external_ref, h.currency, h.amount::text,
    h.fee_currency, h.fee_amount::text, h.fee_on_payer, h.test, h.crypto, h.status_reason, h.payer_verification,
    h.rejection_code, h.rejection_reason, h.parent_deposit_id)), '[]'::json)
  FROM status_history h WHERE ${keyOf('h')})`;

const APPLIED_JSON = sql`(
  SELECT coalesce(json_agg(json_build_array(j.effect, j.direction, j.seq, j.book, j.currency, j.amount::text,
    j.fee_currency, j.fee_amount::text)), '[]'::json)
  FROM journal_entries j WHERE ${keyOf('j')})`;

type Json = string | number | boolean | null;

function decodeHistory(rows: readonly Json[][]): HistoryItem[] {
  return rows.map((h) => ({
    eventId: h[0] as string,
    status: h[1] as string | null,
    observedAt: new Date(h[2] as number),
    source: h[3] as HistorySource,
    externalRef: h[4] as string | null,
    currency: h[5] as string | null,
    amount: ledgerMinor(h[6] as string | null),
    feeCurrency: h[7] as string | null,
    feeAmount: ledgerMinor(h[8] as string | null),
    feeOnPayer: h[9] as boolean | null,
    test: h[10] as boolean,
    crypto: h[11] as boolean,
    statusReason: h[12] as string | null,
    payerVerification: h[13] as string | null,
    rejectionCode: h[14] as string | null,
    rejectionReason: h[15] as string | null,
    parentDepositId: h[16] as string | null,
  }));
}

function decodeApplied(rows: readonly Json[][]): AppliedEntry[] {
  return rows.map((e) => ({
    effect: e[0] as Effect,
    direction: e[1] === -1 ? -1 : 1,
    seq: e[2] as number,
    book: e[3] as Book,
    currency: e[4] as string,
    amount: amountOf(e[5] as string),
    feeCurrency: e[6] as string | null,
    feeAmount: e[7] === null ? null : amountOf(e[7] as string),
  }));
}

/**
 * Locks the mirror rows of `refs` one key at a time in the order given, as a batch's claim does; callers
 * sort by `compareRefs` so that they queue behind the ledger's batches instead of deadlocking with them.
 * Every writer of `poll_schedule` outside the ledger's write takes these locks first: the ledger's write
 * reads an entity's schedule row after its claim holds the entity's mirror lock, and relies on no one
 * else changing that row meanwhile.
 */
export async function lockMirrorRows(db: Db, refs: readonly EntityRef[]): Promise<void> {
  if (refs.length === 0) return;
  // No ORDER BY: the locks are taken as the nested loop probes, in the row source's order, and the rows
  // returned are not read.
  await prepared(sql`
    SELECT x.entity_id FROM ${refsSource(refs)}
    CROSS JOIN LATERAL (SELECT m.entity_id FROM mirrors m WHERE ${keyOf('m')} FOR UPDATE OF m) x`).execute(
    db,
  );
}

/** An entity's history and bookings as this process wrote them, and the mirror row version it wrote. */
export interface KnownEntity {
  /** The `version` of the mirror row written in the same transaction as these rows. */
  version: string;
  history: readonly HistoryItem[];
  applied: readonly AppliedEntry[];
  /**
   * The intent that version links (its `intent_id`; null: none), when it cannot have changed since: an
   * intent naming its entity id is never updated again (`insertIntents` completes only a pending record,
   * one without an entity id). Undefined: the intent is read with the row.
   */
  intent?: LinkedIntent | null;
}

/** The linked intent as `KnownEntity.intent` may keep it: null, or one whose row never changes again. */
export function settledIntent(intent: LinkedIntent | null): LinkedIntent | null | undefined {
  return intent === null || intent.entityId !== null ? intent : undefined;
}

/**
 * What a long-running writer (the reconciler, the bench) knows of the entities it wrote last: their
 * histories and booked entries, each with the `version` of the mirror row written with them. Every write
 * of an entity's history or entries writes its mirror row in the same transaction (`writeBatch`), and a
 * version is never given twice (a sequence's value), so while the row read is still that version nobody
 * has added to them since, and `loadBatch` skips reading them again; any other version (another process
 * wrote the entity, this transaction rolled back) reads them from the tables. Bounded: the least recently
 * written entities are forgotten first. One per database.
 */
export class EntityStateCache {
  private readonly entities = new Map<string, KnownEntity>();
  /**
   * The walk of the entities in the order they were set, oldest first, by which the full cache forgets
   * them: kept from one call to the next, since every entity before its place has been forgotten or set
   * again (after it). A new walk from the start skips each entry deleted since the map last rebuilt its
   * table, and a full cache deletes one per entity it sets: a millisecond per batch of 500 entities.
   */
  private oldest: Iterator<string> | null = null;
  constructor(readonly capacity = 20_000) {}

  get(key: string): KnownEntity | undefined {
    return this.entities.get(key);
  }

  set(key: string, known: KnownEntity): void {
    this.entities.delete(key);
    this.entities.set(key, known);
    if (this.entities.size > this.capacity) {
      let oldest = this.oldest?.next();
      if (oldest === undefined || oldest.done) {
        this.oldest = this.entities.keys();
        oldest = this.oldest.next();
      }
      if (!oldest.done) this.entities.delete(oldest.value);
    }
  }

  delete(key: string): void {
    this.entities.delete(key);
  }

  get size(): number {
    return this.entities.size;
  }
}

export interface BatchState {
  /** The mirror rows read, by entity key (an entity without one is left out). */
  mirrors: Map<string, MirrorState>;
  /** Read-only: an entity `known` held is given its cached arrays, not a copy. */
  histories: Map<string, readonly HistoryItem[]>;
  applied: Map<string, readonly AppliedEntry[]>;
}

/** The bits of `loadBatch`'s `flags` column. */
const EVER_COMPLETED = 1;
const EVER_EARLY_RELEASED = 2;
const TEST = 4;
const CRYPTO = 8;

/**
 * One statement per batch for everything the computation reads, without a lock: the mirror rows, each with
 * its linked intent, its history and its booked entries, all from the statement's one snapshot. An entity
 * without a mirror row is left out of `mirrors` (a new entity: `writeStatement` inserts its row whole,
 * once, instead of an empty row inserted here and rewritten by the write). With `known`, an entity whose
 * row is the version `known` holds is not read again: its history and entries come from `known`.
 *
 * The rows are not locked here: the batch's write claims them (`writeBatch`), each by the version read
 * here, and fails if another transaction wrote one meanwhile (the batch then runs again from a new read).
 * A lock taken here (`FOR UPDATE`) wrote a WAL record and dirtied the page of every row read, most of which
 * the write then updates anyway, taking the same lock: measured in `bench:ledger`, 0.98 of 14.10 WAL
 * records per observation. And a read that waited for a lock had to read the entity again, its
 * statement's snapshot being older than the version it locked.
 */
export async function loadBatch(
  db: Db,
  refs: readonly EntityRef[],
  known?: EntityStateCache,
  /** The refs' keys (`refKey`), when the caller has them: the strings its maps already hold. */
  refKeys?: readonly string[],
): Promise<BatchState> {
  const state: BatchState = { mirrors: new Map(), histories: new Map(), applied: new Map() };
  if (refs.length === 0) return state;
  const a = refArrays(refs);
  // What `known` holds when the statement is sent, by the ref's position: the statement leaves out the
  // state of an entity whose row is that version, and that is the state used (whatever `known`
  // holds by the time it answers).
  const keys = refKeys ?? refs.map(refKey);
  const held = new Array<KnownEntity | undefined>(refs.length);
  // Per ref: the version `known` holds (null: none), and whether it holds that version's intent too.
  const expect: (string | null)[] = [];
  const intentKnown: boolean[] = [];
  for (let i = 0; i < keys.length; i++) {
    const hit = known?.get(keys[i]!);
    held[i] = hit;
    expect.push(hit?.version ?? null);
    intentKnown.push(hit !== undefined && hit.intent !== undefined);
  }
  // The refs as `refsSource` gives them (set-returning functions in a select list) with two more arrays and
  // their positions, probed in that order by the nested loop. No ORDER BY: each row names its
  // position, and a sort of these wide rows (the row source no longer known to be in order) cost more
  // than the function scan it replaced. Rows as arrays (`preparedArrays`), in this order; instants as
  // epoch milliseconds (float8, read by `parseFloat`) instead of timestamptz text for the driver's date
  // parser.
  const { rows } = await preparedArrays<
    [
      n: number,
      version: string,
      flags: number,
      status: string | null,
      poll_attempts: number,
      intent_id: string | null,
      first_seen_ms: number | null,
      external_ref: string | null,
      i_currency: string | null,
      i_amount: string | null,
      i_expected_fee: string | null,
      i_test: boolean | null,
      i_crypto: boolean | null,
      i_fee_on_payer: boolean | null,
      i_entity_id: string | null,
      i_external_ref: string | null,
      history: Json[][] | null,
      applied: Json[][] | null,
    ]
  >(sql`
    SELECT r.n::int4, x.version,
      -- (PostgreSQL gives | and << the same precedence, left to right: every shift in parentheses)
      x.ever_completed::int4 | (x.ever_early_released::int4 << 1) | (x.test::int4 << 2) | (x.crypto::int4 << 3)
        AS flags,
      x.status, x.poll_attempts, x.intent_id, x.first_seen_ms, x.external_ref,
      i.i_currency, i.i_amount, i.i_expected_fee, i.i_test, i.i_crypto, i.i_fee_on_payer,
      i.i_entity_id, i.i_external_ref,
      CASE WHEN x.version = r.expect THEN NULL ELSE ${HISTORY_JSON} END AS history,
      CASE WHEN x.version = r.expect THEN NULL ELSE ${APPLIED_JSON} END AS applied
    FROM (SELECT unnest(${a.accounts}::text[]) AS account, unnest(${a.kinds}::text[]) AS kind,
      unnest(${a.ids}::text[]) AS id, unnest(${binaryArray('text', expect)}::text[]) AS expect,
      unnest(${binaryArray('boolean', intentKnown)}::boolean[]) AS intent_known,
      unnest(${binaryArray('integer', positions(refs.length))}::int4[]) AS n) AS r
    CROSS JOIN LATERAL (
      SELECT m.version::text AS version, m.status, m.ever_completed, m.ever_early_released,
        m.test, m.crypto, m.poll_attempts, m.intent_id,
        floor(extract(epoch FROM m.first_seen_at) * 1000)::float8 AS first_seen_ms, m.external_ref
      FROM mirrors m
      WHERE ${keyOf('m')}
      OFFSET 0) x
    LEFT JOIN LATERAL (
      SELECT i.currency AS i_currency, i.amount::text AS i_amount, i.expected_fee::text AS i_expected_fee,
        i.test AS i_test, i.crypto AS i_crypto, i.fee_on_payer AS i_fee_on_payer, i.entity_id AS i_entity_id,
        i.external_ref AS i_external_ref
      FROM intents i
      WHERE i.intent_id = x.intent_id AND (x.version IS DISTINCT FROM r.expect OR NOT r.intent_known) OFFSET 0) i ON true`).execute(
    db,
  );
  for (const r of rows) {
    // Each row names its ref by its position (one number to parse instead of the three key columns'
    // strings), and its flags as the bits of one number (instead of five booleans' texts): the rows'
    // fields are most of what the client parses of the statement's result.
    const at = r[0] - 1;
    const ref = refs[at]!;
    const { account, kind, entityId } = ref;
    const key = keys[at]!;
    const flags = r[2];
    const version = r[1];
    const history = r[16];
    const applied = r[17];
    // The intent `known` held for the version read, which the statement did not read again.
    let knownIntent: LinkedIntent | null | undefined;
    if (history === null || applied === null) {
      // Left out by the statement because the version read is the one `known` held.
      const hit = held[at];
      if (!hit || hit.version !== version) {
        throw new AppError('INTERNAL', `ledger: state of ${kind} ${entityId} neither read nor known`);
      }
      state.histories.set(key, hit.history);
      state.applied.set(key, hit.applied);
      knownIntent = hit.intent;
    } else {
      state.histories.set(key, decodeHistory(history));
      state.applied.set(key, decodeApplied(applied));
    }
    const intentId = r[5];
    if (knownIntent !== undefined && (knownIntent?.intentId ?? null) !== intentId) {
      throw new AppError('INTERNAL', `ledger: the known intent of ${kind} ${entityId} is not the one linked`);
    }
    const iAmount = r[9];
    const iExpectedFee = r[10];
    const firstSeen = r[6];
    // Every field written out: `{ ...ref, version, ... }` gave objects of a slow shape (V8), and building
    // them was two thirds of this loop's time (1.2 s of client CPU per 100,000 observations).
    state.mirrors.set(key, {
      account,
      kind,
      entityId,
      version,
      status: r[3],
      everCompleted: (flags & EVER_COMPLETED) !== 0,
      everEarlyReleased: (flags & EVER_EARLY_RELEASED) !== 0,
      test: (flags & TEST) !== 0,
      crypto: (flags & CRYPTO) !== 0,
      pollAttempts: r[4],
      intentId,
      firstSeenAt: firstSeen === null ? null : new Date(firstSeen),
      externalRef: r[7],
      intent:
        knownIntent !== undefined
          ? knownIntent
          : intentId !== null && iAmount !== null
            ? {
                intentId,
                currency: r[8]!,
                amount: amountOf(iAmount),
                expectedFee: iExpectedFee === null ? null : amountOf(iExpectedFee),
                test: r[11]!,
                crypto: r[12]!,
                feeOnPayer: r[13]!,
                entityId: r[14],
                externalRef: r[15]!,
              }
            : null,
    });
  }
  return state;
}

/**
 * The recorded histories and booked entries of the entities, by entity key (read-only, no lock; for
 * verification: `loadBatch` is the service's read). One statement; entities with neither are
 * left out of the maps.
 */
export async function loadLedgerState(
  db: Db,
  refs: readonly EntityRef[],
): Promise<{ histories: Map<string, HistoryItem[]>; applied: Map<string, AppliedEntry[]> }> {
  const histories = new Map<string, HistoryItem[]>();
  const applied = new Map<string, AppliedEntry[]>();
  if (refs.length === 0) return { histories, applied };
  const { rows } = await prepared(sql<{
    account: string;
    kind: EntityKind;
    id: string;
    history: Json[][];
    applied: Json[][];
  }>`
    SELECT r.account, r.kind, r.id, ${HISTORY_JSON} AS history, ${APPLIED_JSON} AS applied
    FROM ${refsSource(refs)}`).execute(db);
  for (const r of rows) {
    const key = refKey({ account: r.account, kind: r.kind, entityId: r.id });
    if (r.history.length > 0) histories.set(key, decodeHistory(r.history));
    if (r.applied.length > 0) applied.set(key, decodeApplied(r.applied));
  }
  return { histories, applied };
}

export interface LinkedIntent extends IntentFacts {
  intentId: string;
  expectedFee: Minor | null;
  entityId: string | null;
  externalRef: string;
}

/** The refunds of a batch and their deposits: a refund of a test deposit is booked in the test book. */
export interface RefundDeposits {
  /** Keys (`refKey`) of the deposits the ledger knows as test; a caller may add or drop one it learns of. */
  testDeposits: Set<string>;
  /** True when the refund's deposit (named by its first reading that names one) is a test deposit. */
  isTest(refund: EntityRef): boolean;
}

/**
 * The deposit of each refund among `refs`, from its readings (the provider's refund answer names it), and
 * which of those deposits the ledger knows as test: one read.
 */
export async function loadRefundDeposits(
  db: Db,
  refs: readonly EntityRef[],
  readingsOf: (key: string) => Iterable<{ parentDepositId: string | null }>,
): Promise<RefundDeposits> {
  const depositOf = new Map<string, string>();
  const accounts: string[] = [];
  const ids: string[] = [];
  for (const ref of refs) {
    if (ref.kind !== 'refund') continue;
    const key = refKey(ref);
    for (const r of readingsOf(key)) {
      if (r.parentDepositId === null) continue;
      depositOf.set(key, r.parentDepositId);
      accounts.push(ref.account);
      ids.push(r.parentDepositId);
      break;
    }
  }
  const rows =
    ids.length === 0
      ? []
      : (
          await prepared(sql<{ merchant_account: string; entity_id: string }>`
      SELECT m.merchant_account, m.entity_id
      FROM unnest(${binaryArray('text', accounts)}::text[], ${binaryArray('text', ids)}::text[]) AS r(account, id)
      CROSS JOIN LATERAL (
        SELECT merchant_account, entity_id FROM mirrors
        WHERE merchant_account = r.account AND entity_kind = 'deposit' AND entity_id = r.id AND test OFFSET 0) m`).execute(
            db,
          )
        ).rows;
  const testDeposits = new Set<string>();
  for (const r of rows) {
    testDeposits.add(refKey({ account: r.merchant_account, kind: 'deposit', entityId: r.entity_id }));
  }
  return {
    testDeposits,
    isTest(refund) {
      const deposit = depositOf.get(refKey(refund));
      return (
        deposit !== undefined &&
        testDeposits.has(refKey({ account: refund.account, kind: 'deposit', entityId: deposit }))
      );
    },
  };
}

/**
 * The intent of each entity: the one naming its provider id, else the one with its merchant reference
 * (invoice_id, external_id) and no other provider id; the earliest created wins a tie.
 */
export async function loadIntents(
  db: Db,
  refs: readonly (EntityRef & { externalRefs: readonly string[] })[],
): Promise<Map<string, LinkedIntent>> {
  if (refs.length === 0) return new Map();
  const accounts: string[] = [];
  const kinds: string[] = [];
  const xrefs: string[] = [];
  for (const r of refs) {
    for (const x of r.externalRefs) {
      accounts.push(r.account);
      kinds.push(r.kind);
      xrefs.push(x);
    }
  }
  const { rows } = await prepared(sql<IntentRow>`
    SELECT x.* FROM ${refsSource(refs)}
    CROSS JOIN LATERAL (
      SELECT intent_id, merchant_account, entity_kind, entity_id, external_ref, currency, amount, expected_fee, test,
        crypto, fee_on_payer, created_at
      FROM intents i WHERE i.entity_id = r.id AND i.merchant_account = r.account AND i.entity_kind = r.kind
      OFFSET 0) x
    UNION
    SELECT x.* FROM (SELECT unnest(${binaryArray('text', accounts)}::text[]) AS account,
      unnest(${binaryArray('text', kinds)}::text[]) AS kind, unnest(${binaryArray('text', xrefs)}::text[]) AS xref) AS r
    CROSS JOIN LATERAL (
      SELECT intent_id, merchant_account, entity_kind, entity_id, external_ref, currency, amount, expected_fee, test,
        crypto, fee_on_payer, created_at
      FROM intents i WHERE i.external_ref = r.xref AND i.merchant_account = r.account AND i.entity_kind = r.kind
      OFFSET 0) x
    ORDER BY created_at, intent_id`).execute(db);
  return linkIntents(refs, rows);
}

interface IntentRow {
  intent_id: string;
  merchant_account: string;
  entity_kind: EntityKind;
  entity_id: string | null;
  external_ref: string;
  currency: string;
  amount: string;
  expected_fee: string | null;
  test: boolean;
  crypto: boolean;
  fee_on_payer: boolean;
  created_at: Date;
}

/** Each ref's intent among the rows `loadIntents` read. */
function linkIntents(
  refs: readonly (EntityRef & { externalRefs: readonly string[] })[],
  rows: readonly IntentRow[],
): Map<string, LinkedIntent> {
  const out = new Map<string, LinkedIntent>();
  const byId = new Map<string, LinkedIntent>();
  const byRef = new Map<string, LinkedIntent[]>();
  for (const r of rows) {
    const intent: LinkedIntent = {
      intentId: r.intent_id,
      currency: r.currency,
      amount: amountOf(r.amount),
      expectedFee: r.expected_fee === null ? null : amountOf(r.expected_fee),
      test: r.test,
      crypto: r.crypto,
      feeOnPayer: r.fee_on_payer,
      entityId: r.entity_id,
      externalRef: r.external_ref,
    };
    if (r.entity_id !== null) {
      const k = refKey({ account: r.merchant_account, kind: r.entity_kind, entityId: r.entity_id });
      if (!byId.has(k)) byId.set(k, intent);
    }
    const rk = `${r.merchant_account}\u0000${r.entity_kind}\u0000${r.external_ref}`;
    byRef.set(rk, [...(byRef.get(rk) ?? []), intent]);
  }
  for (const r of refs) {
    const k = refKey(r);
    let found = byId.get(k);
    if (!found) {
      for (const x of [...r.externalRefs].sort()) {
        const cands = byRef.get(`${r.account}\u0000${r.kind}\u0000${x}`) ?? [];
        found = cands.find((c) => c.entityId === null || c.entityId === r.entityId);
        if (found) break;
      }
    }
    if (found) out.set(k, found);
  }
  return out;
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

export interface MirrorUpdate extends EntityRef {
  /** The row's version as read (`MirrorState.version`), which the update claims; null: a new entity, inserted. */
  version: string | null;
  /** Null keeps the stored value (of an updated row). */
  externalRef: string | null;
  status: string | null;
  statusSince: Date | null;
  everCompleted: boolean;
  everEarlyReleased: boolean;
  currency: string | null;
  amount: Minor | null;
  feeCurrency: string | null;
  feeAmount: Minor | null;
  feeOnPayer: boolean;
  test: boolean;
  crypto: boolean;
  statusReason: string | null;
  payerVerification: string | null;
  rejectionCode: string | null;
  rejectionReason: string | null;
  parentDepositId: string | null;
  /** Null keeps the stored value. */
  expiresAt: Date | null;
  /** The provider's bank-side id of a cashout; null keeps the stored value. */
  bankReference: string | null;
  /** Null keeps the stored value. */
  details: Record<string, unknown> | null;
  intentId: string | null;
  firstSeenAt: Date | null;
  lastSeenAt: Date | null;
  completedAt: Date | null;
  /**
   * The next poll the batch computed (`poll_schedule`; null: none), written only with `rescheduled`:
   * otherwise the entity's schedule stays as it is (the batch read nothing that moves it).
   */
  nextPollAt: Date | null;
  rescheduled: boolean;
  pollAttempts: number;
}

/**
 * One column of a row source sent as a binary PostgreSQL array (`binaryColumns`): its element type and
 * each row's value (null for NULL).
 */
export type Column<T> = BinaryColumn<T>;

const NEEDS_ESCAPE = /["\\]/;
/** Elements the server reads unquoted as themselves: ids, statuses, amounts, ISO instants. */
const BARE = /^[A-Za-z0-9_.:+-]+$/;
const NULL_WORD = /^null$/i;

/**
 * An array literal of the values (`{a,"b c",NULL}`), for a text array sent as text (bench:ledger's floor
 * of column arrays; the ledger's own statements send binary arrays, `rowsSource` and `keyArrays`): an element made only of letters, digits and `_.:+-` goes
 * bare, any other (empty, spaces, commas, braces, JSON, the word NULL in any case) quoted, with a
 * backslash before `"` and `\` only. Built here, as one flat string, because the driver's own array serialisation runs two
 * regular expressions per element. (Bare elements: a 10,000-observation bench:ledger run wrote 17.56 MB
 * to its sockets instead of 18.00 MB.)
 */
export function arrayLiteral(values: readonly (string | null)[]): string {
  if (values.length === 0) return '{}';
  // A value equal to the previous one reuses its element (keys come in order: accounts and kinds repeat).
  const parts = new Array<string>(values.length);
  let last: string | null | undefined;
  let lastElement = 'NULL';
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v !== last) {
      last = v;
      lastElement = element(v);
    }
    parts[i] = lastElement;
  }
  // The braces joined with the elements, so the literal is one flat string: `{${...}}` around the join
  // made a rope that the driver flattened, a second copy of every literal sent.
  parts[0] = `{${parts[0]}`;
  parts[parts.length - 1] = `${parts[parts.length - 1]}}`;
  return parts.join(',');
}

/** One element of an array literal (see `arrayLiteral`). */
function element(v: string | null | undefined): string {
  // undefined as null too: JSON.stringify left it out and the server read NULL.
  if (v === null || v === undefined) return 'NULL';
  if (BARE.test(v) && (v.length !== 4 || !NULL_WORD.test(v))) return v;
  return NEEDS_ESCAPE.test(v) ? quoted(v) : `"${v}"`;
}

/**
 * `v` in double quotes with a backslash before each `"` and `\`, by one scan of its character codes (the
 * regular expression's replace cost three times as much on the details' JSON, every one of which has
 * quotes).
 */
function quoted(v: string): string {
  let out = '"';
  let from = 0;
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    if (c === 34 || c === 92) {
      out += `${v.slice(from, i)}\\`;
      from = i;
    }
  }
  return `${out}${v.slice(from)}"`;
}

/**
 * The rows as `(SELECT unnest($1::type[]) AS column, ...) AS v`: one binary array parameter per column
 * (`binaryColumns`), so the server reads typed arrays instead of parsing a JSON document whose every
 * object repeats the column names, or array literals and each element's text. A column's trailing NULLs
 * are not sent: set-returning functions in a select list run in lockstep and pad the shorter ones with
 * NULLs, and the first column, sent whole, gives the number of rows (columns that are mostly or wholly
 * NULL, such as rejection codes and reasons, cost nothing). In the select list (a ProjectSet node, row by
 * row) rather than as `unnest($1, $2, ...) AS v(...)` in FROM: a function scan of several functions
 * first stores each function's rows in a tuplestore of its own, then reads them back into rows, which
 * took about four times the server's CPU (430 mirror rows, 33 columns of their types: 1.15 against 0.28 ms).
 */
export function rowsSource<T>(
  rows: readonly T[],
  columns: Readonly<Record<string, Column<T>>>,
  /** Adds the column `n`: the row's position in `rows`, from 1. */
  ordinality = false,
) {
  const names = Object.keys(columns);
  const list = names.map((name) => columns[name]!);
  const buffers = binaryColumns(rows, list);
  const items = list.map(
    ([type], i) => sql`unnest(${buffers[i]}::${sql.raw(type)}[]) AS ${sql.raw(names[i]!)}`,
  );
  // In lockstep with the columns, as long as the first column (sent whole): the positions, as an array
  // (`positions`, see `refsSource`: a `generate_series` of a parameter is estimated at 1,000 rows).
  if (ordinality) items.push(sql`unnest(${binaryArray('integer', positions(rows.length))}::int4[]) AS n`);
  return sql`(SELECT ${sql.join(items)}) AS v`;
}

/**
 * The JSON text of the details objects written by the statement being built, by object: a fresh
 * observation's details go in its history row and, as the entity's latest, in its mirror row, and are
 * stringified once. Filled and cleared by `writeStatement` while it builds its statement (synchronously).
 */
const detailsTexts = new Map<object, string>();

/** A details object's JSON text (null for null). */
function detailsText(v: Record<string, unknown> | null): string | null {
  if (v === null || v === undefined) return null;
  let text = detailsTexts.get(v);
  if (text === undefined) {
    text = JSON.stringify(v);
    detailsTexts.set(v, text);
  }
  return text;
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

const MIRROR_COLUMNS: Record<string, Column<MirrorUpdate>> = {
  version: ['text', (r) => r.version],
  merchant_account: ['text', (r) => r.account],
  entity_kind: ['text', (r) => r.kind],
  entity_id: ['text', (r) => r.entityId],
  external_ref: ['text', (r) => r.externalRef],
  status: ['text', (r) => r.status],
  status_since: ['timestamptz', (r) => r.statusSince],
  ever_completed: ['boolean', (r) => r.everCompleted],
  ever_early_released: ['boolean', (r) => r.everEarlyReleased],
  currency: ['text', (r) => r.currency],
  amount: ['numeric', (r) => r.amount],
  fee_currency: ['text', (r) => r.feeCurrency],
  fee_amount: ['numeric', (r) => r.feeAmount],
  fee_on_payer: ['boolean', (r) => r.feeOnPayer],
  test: ['boolean', (r) => r.test],
  crypto: ['boolean', (r) => r.crypto],
  status_reason: ['text', (r) => r.statusReason],
  payer_verification: ['text', (r) => r.payerVerification],
  rejection_code: ['text', (r) => r.rejectionCode],
  rejection_reason: ['text', (r) => r.rejectionReason],
  parent_deposit_id: ['text', (r) => r.parentDepositId],
  expires_at: ['timestamptz', (r) => r.expiresAt],
  bank_reference: ['text', (r) => r.bankReference],
  details: ['jsonb', (r) => detailsText(r.details)],
  intent_id: ['text', (r) => r.intentId],
  first_seen_at: ['timestamptz', (r) => r.firstSeenAt],
  last_seen_at: ['timestamptz', (r) => r.lastSeenAt],
  completed_at: ['timestamptz', (r) => r.completedAt],
  poll_attempts: ['integer', (r) => r.pollAttempts],
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
  /** The line's place in the order its entry's postings are written in (see `writeStatement`). */
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

/** A mirror row as read (`MirrorState`), claimed by `writeBatch` with its facts left as they are. */
export interface HeldMirror extends EntityRef {
  version: string;
}

const HELD_COLUMNS: Record<string, Column<HeldMirror>> = {
  version: ['text', (r) => r.version],
  merchant_account: ['text', (r) => r.account],
  entity_kind: ['text', (r) => r.kind],
  entity_id: ['text', (r) => r.entityId],
};

/**
 * Another transaction wrote a mirror row between the batch's read and its claim: the server's
 * `mirror_claim_check` refused the claim with a serialization failure (40001, kept as `code`), and the
 * batch, which planned from a state the ledger has left, is rolled back; `withLedgerTransaction` runs it
 * again from a new read.
 */
export class MirrorMoved extends Error {
  readonly code = '40001';
  constructor(cause: Error) {
    super(cause.message, { cause });
    this.name = 'MirrorMoved';
  }
}

/** The constraint name `mirror_claim_check` gives its failure. */
const CLAIM_MISSED = 'mirrors_version_claim';

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
 * same transaction as its entity's mirror row, which keeps the ledger's mirror rule in this one function
 * (it refuses a history row or entry of an entity whose mirror row it does not write). Two statements,
 * in this order:
 *
 * 1. The claim (`claimStatement`): each mirror row the batch read and writes is updated by its key and
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
  detailsTexts.clear();
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
    detailsTexts.clear();
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

/**
 * Claims the mirror rows a batch read (see `writeBatch`): updates those it writes (`updates`, in key
 * order) and gives those it holds (`held`) a new version, each row found by its key and claimed only at
 * the version read; returns the updated rows' new versions in the order of `updates`. A claim that misses
 * fails in the server (`mirror_claim_check`, 40001): thrown as `MirrorMoved`. A row whose writer is still
 * in progress is waited for: should that writer commit, PostgreSQL checks the condition again on the
 * version it committed, whose `version` differs; should it roll back, the row read is claimed. The mirror
 * watches (`mirror_watches`) of the rows updated are kept here as well: a row's side row changes when it
 * enters or leaves a set, or its instant, currency or test flag moves.
 *
 * Each row is found by one probe of the key in a LATERAL subquery (OFFSET 0) and updated through that
 * probe's ctid: joined directly, the planner hashed the whole table whenever it was small enough for a
 * scan to look cheaper than 500 probes.
 */
async function claim(
  db: Db,
  updates: readonly MirrorUpdate[],
  held: readonly HeldMirror[],
): Promise<string[]> {
  try {
    const { rows } = await prepared(sql<{ claimed: string; versions: string[] | null }>`
    WITH m AS (
      UPDATE mirrors m SET
        external_ref = coalesce(v.external_ref, m.external_ref), status = v.status, status_since = v.status_since,
        ever_completed = v.ever_completed, ever_early_released = v.ever_early_released, currency = v.currency,
        amount = v.amount, fee_currency = v.fee_currency, fee_amount = v.fee_amount, fee_on_payer = v.fee_on_payer,
        test = v.test, crypto = v.crypto, status_reason = v.status_reason, payer_verification = v.payer_verification,
        rejection_code = v.rejection_code, rejection_reason = v.rejection_reason,
        parent_deposit_id = coalesce(v.parent_deposit_id, m.parent_deposit_id),
        expires_at = coalesce(v.expires_at, m.expires_at), bank_reference = coalesce(v.bank_reference, m.bank_reference),
        details = coalesce(v.details, m.details),
        intent_id = v.intent_id, first_seen_at = v.first_seen_at, last_seen_at = v.last_seen_at,
        completed_at = v.completed_at, poll_attempts = v.poll_attempts,
        version = nextval('mirror_versions'), updated_at = now()
      FROM ${rowsSource(updates, MIRROR_COLUMNS, true)}
        CROSS JOIN LATERAL (
          SELECT x.ctid AS tid, x.watch, x.watch_at, x.currency, x.test FROM mirrors x
          WHERE x.merchant_account = v.merchant_account AND x.entity_kind = v.entity_kind AND x.entity_id = v.entity_id
            AND x.version = v.version::int8
          OFFSET 0) t
      WHERE m.ctid = t.tid AND m.version = v.version::int8
      RETURNING v.n, m.merchant_account, m.entity_kind, m.entity_id, m.version, m.watch, m.watch_at, m.currency, m.test,
        -- the side row's columns before the update (t: the version read), null when it had none
        t.watch AS was, t.watch_at AS was_at, t.currency AS was_currency, t.test AS was_test
    ), wm AS (
      -- The mirrors whose side row changes: in a set before or after, and its set, instant, currency or
      -- test moved (entering or leaving a set is such a move).
      SELECT * FROM m WHERE (m.was IS NOT NULL OR m.watch IS NOT NULL)
        AND (m.was, m.was_at, m.was_currency, m.was_test) IS DISTINCT FROM (m.watch, m.watch_at, m.currency, m.test)
    ), wd AS (
      DELETE FROM mirror_watches w USING wm
        CROSS JOIN LATERAL (
          SELECT x.ctid AS tid FROM mirror_watches x WHERE x.entity_id = wm.entity_id AND x.entity_kind = wm.entity_kind
            AND x.merchant_account = wm.merchant_account OFFSET 0) t
      WHERE w.ctid = t.tid AND wm.watch IS NULL
    ), wu AS (
      UPDATE mirror_watches w SET watch = wm.watch, watch_at = wm.watch_at, currency = wm.currency, test = wm.test
      FROM wm CROSS JOIN LATERAL (
          SELECT x.ctid AS tid FROM mirror_watches x WHERE x.entity_id = wm.entity_id AND x.entity_kind = wm.entity_kind
            AND x.merchant_account = wm.merchant_account OFFSET 0) t
      WHERE w.ctid = t.tid AND wm.watch IS NOT NULL AND wm.was IS NOT NULL
    ), wi AS (
      INSERT INTO mirror_watches (entity_id, entity_kind, merchant_account, watch, watch_at, currency, test)
      SELECT entity_id, entity_kind, merchant_account, watch, watch_at, currency, test FROM wm
      WHERE wm.watch IS NOT NULL AND wm.was IS NULL
    ), k AS (
      UPDATE mirrors m SET version = nextval('mirror_versions'), updated_at = now()
      FROM ${rowsSource(held, HELD_COLUMNS)}
        CROSS JOIN LATERAL (
          SELECT x.ctid AS tid FROM mirrors x
          WHERE x.merchant_account = v.merchant_account AND x.entity_kind = v.entity_kind AND x.entity_id = v.entity_id
            AND x.version = v.version::int8
          OFFSET 0) t
      WHERE m.ctid = t.tid AND m.version = v.version::int8
      RETURNING 1
    )
    SELECT mirror_claim_check((SELECT count(*) FROM m) + (SELECT count(*) FROM k),
        ${updates.length + held.length}::int8)::text AS claimed,
      (SELECT json_agg(version::text ORDER BY n) FROM m) AS versions`).execute(db);
    return rows[0]?.versions ?? [];
  } catch (err) {
    const { code, constraint } = err as { code?: unknown; constraint?: unknown };
    if (code === '40001' && constraint === CLAIM_MISSED) throw new MirrorMoved(err as Error);
    throw err;
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

/**
 * Inserts intents (idempotent by intent id) in one statement; returns the ids inserted or completed. A
 * pending intent (recorded ahead of its creation call: outcome `unknown`, no provider id) is completed by
 * a later record of the same id that carries the call's answer; a completed one never changes again (a
 * pending record arriving after its completion, on another partition, changes nothing).
 */
export async function insertIntents(db: Db, intents: readonly Intent[]): Promise<Set<string>> {
  if (intents.length === 0) return new Set();
  const col = <T>(f: (i: Intent) => T) => intents.map(f);
  const { rows } = await prepared(sql<{ intent_id: string }>`
    INSERT INTO intents (intent_id, operation, merchant_account, entity_kind, external_ref, entity_id, currency, amount,
      expected_fee, test, crypto, fee_on_payer, parent_deposit_id, outcome, created_at, request, response)
    SELECT * FROM unnest(${col((i) => i.intentId)}::text[], ${col((i) => i.operation)}::text[],
      ${col((i) => i.account)}::text[], ${col((i) => intentKind(i.operation))}::text[],
      ${col((i) => i.externalRef)}::text[], ${col((i) => i.entityId)}::text[], ${col((i) => i.currency)}::text[],
      ${col((i) => formatAmount(i.amount))}::numeric[], ${col((i) => toText(i.expectedFee))}::numeric[],
      ${col((i) => i.test)}::boolean[], ${col((i) => i.crypto)}::boolean[], ${col((i) => i.feeOnPayer)}::boolean[],
      ${col((i) => i.parentDepositId)}::text[], ${col((i) => i.outcome)}::text[],
      ${col((i) => i.createdAt)}::timestamptz[], ${col((i) => JSON.stringify(i.request))}::jsonb[],
      ${col((i) => (i.response === null ? null : JSON.stringify(i.response)))}::jsonb[])
    ON CONFLICT (intent_id) DO UPDATE SET entity_id = EXCLUDED.entity_id, external_ref = EXCLUDED.external_ref,
      outcome = EXCLUDED.outcome, response = EXCLUDED.response
    WHERE intents.outcome = 'unknown' AND intents.entity_id IS NULL
      AND (EXCLUDED.outcome <> 'unknown' OR (intents.response IS NULL AND EXCLUDED.response IS NOT NULL))
    RETURNING intent_id`).execute(db);
  return new Set(rows.map((r) => r.intent_id));
}

/** The mirrors named by (merchant account, kind, external reference): one index probe per key. */
export async function mirrorsByExternalRef(
  db: Db,
  keys: readonly { account: string; kind: EntityKind; externalRef: string }[],
): Promise<(EntityRef & { externalRef: string })[]> {
  if (keys.length === 0) return [];
  const [accounts, kinds, xrefs] = keyArrays(
    keys,
    (k) => k.account,
    (k) => k.kind,
    (k) => k.externalRef,
  );
  const { rows } = await prepared(sql<{
    merchant_account: string;
    entity_kind: EntityKind;
    entity_id: string;
    external_ref: string;
  }>`
    SELECT DISTINCT x.* FROM unnest(${accounts}::text[], ${kinds}::text[], ${xrefs}::text[]) AS r(account, kind, xref)
    CROSS JOIN LATERAL (
      SELECT merchant_account, entity_kind, entity_id, external_ref FROM mirrors
      WHERE external_ref = r.xref AND merchant_account = r.account AND entity_kind = r.kind OFFSET 0) x`).execute(
    db,
  );
  return rows.map((m) => ({
    account: m.merchant_account,
    kind: m.entity_kind,
    entityId: m.entity_id,
    externalRef: m.external_ref,
  }));
}

export interface RefundedDeposit {
  account: string;
  depositId: string;
  /** The deposit's amount. */
  amount: Minor;
  /** Sum of its refunds that hold or paid out money (in flight or completed). */
  refunded: Minor;
}

export interface CrossEntityRows {
  /** The deposits of each (account, invoice id) asked for, the asking deposits included. */
  byInvoice: { merchant_account: string; entity_id: string; external_ref: string }[];
  /**
   * Each deposit asked for with its amount and the sum of its refunds that hold or paid out money;
   * deposits without an amount or without such refunds are left out.
   */
  refunded: RefundedDeposit[];
}

interface CrossEntityRow {
  invoice: boolean;
  merchant_account: string;
  entity_id: string;
  external_ref: string | null;
  amount: string | null;
  refunded: string | null;
}

/**
 * What the cross-entity checks of a batch read (DUPLICATE_INVOICE, OVER_REFUNDED), in one statement: the
 * deposits that carry each invoice id (one index probe per key), and each deposit with its amount and the
 * sum of its refunds that hold or paid out money (two index probes per deposit). Either list may be empty.
 */
export async function crossEntityRows(
  db: Db,
  invoices: readonly { account: string; externalRef: string }[],
  deposits: readonly { account: string; depositId: string }[],
): Promise<CrossEntityRows> {
  if (invoices.length === 0 && deposits.length === 0) return { byInvoice: [], refunded: [] };
  const byInvoice = keyArrays(
    invoices,
    (d) => d.account,
    (d) => d.externalRef,
  );
  const byDeposit = keyArrays(
    deposits,
    (d) => d.account,
    (d) => d.depositId,
  );
  const { rows } = await prepared(sql<CrossEntityRow>`
    SELECT DISTINCT true AS invoice, m.merchant_account, m.entity_id, m.external_ref, NULL::text AS amount,
      NULL::text AS refunded
    FROM unnest(${byInvoice[0]}::text[], ${byInvoice[1]}::text[]) AS v(a, x)
    CROSS JOIN LATERAL (
      SELECT merchant_account, entity_id, external_ref FROM mirrors
      WHERE external_ref = v.x AND merchant_account = v.a AND entity_kind = 'deposit' OFFSET 0) m
    UNION ALL
    SELECT false, m.merchant_account, m.entity_id, NULL, m.amount, s.refunded
    FROM unnest(${byDeposit[0]}::text[], ${byDeposit[1]}::text[]) AS v(a, i)
    CROSS JOIN LATERAL (
      SELECT merchant_account, entity_id, amount::text FROM mirrors
      WHERE merchant_account = v.a AND entity_kind = 'deposit' AND entity_id = v.i OFFSET 0) m
    CROSS JOIN LATERAL (
      SELECT sum(amount)::text AS refunded FROM mirrors
      WHERE parent_deposit_id = v.i AND merchant_account = v.a AND entity_kind = 'refund'
        AND status IN (${sql.join([...PAYOUT_IN_FLIGHT, 'COMPLETED'])})) s
    WHERE m.amount IS NOT NULL AND s.refunded IS NOT NULL`).execute(db);
  const out: CrossEntityRows = { byInvoice: [], refunded: [] };
  for (const r of rows) {
    if (r.invoice) {
      out.byInvoice.push({
        merchant_account: r.merchant_account,
        entity_id: r.entity_id,
        external_ref: r.external_ref!,
      });
    } else {
      out.refunded.push({
        account: r.merchant_account,
        depositId: r.entity_id,
        amount: amountOf(r.amount!),
        refunded: parseMinor(r.refunded!, LEDGER_NUMERIC),
      });
    }
  }
  return out;
}
