/**
 * The ledger's reads: a batch's entities (mirror rows, histories, booked entries) in one statement without
 * a lock, the deposits of its refunds, and what the cross-entity checks read. One index probe per key
 * (LATERAL ... OFFSET 0), so the cost does not grow with the tables.
 */
import { sql } from 'kysely';
import { type AppliedEntry, type HistoryItem, PAYOUT_IN_FLIGHT } from '../../domain/effects.ts';
import { AppError } from '../../domain/errors.ts';
import { LEDGER_NUMERIC, type Minor, parseMinor } from '../../domain/money.ts';
import type { EntityKind } from '../../domain/statuses.ts';
import type { Db } from '../schema.ts';
import { binaryArray } from './binary-array.ts';
import { APPLIED_JSON, amountOf, decodeApplied, decodeHistory, HISTORY_JSON, type Json } from './decode.ts';
import type { EntityStateCache, KnownEntity } from './entity-cache.ts';
import type { LinkedIntent } from './intents.ts';
import { type EntityRef, keyArrays, keyOf, positions, refArrays, refKey, refsSource } from './keys.ts';
import { prepared, preparedArrays } from './statements.ts';

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
 * without a mirror row is left out of `mirrors` (a new entity: `writeBatch` inserts its row whole,
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
