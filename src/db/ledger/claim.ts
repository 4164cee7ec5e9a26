/**
 * The claim of a batch's mirror rows: each row the batch read and writes is updated by its key and the
 * `version` read, and the server fails the statement with a serialization failure when a row was written
 * since (`mirror_claim_check`). Every write of a mirror row takes a new version (`mirror_versions`).
 */
import { sql } from 'kysely';
import type { Minor } from '../../domain/money.ts';
import type { Db } from '../schema.ts';
import { type Column, type EntityRef, keyOf, refsSource, rowsSource } from './keys.ts';
import { prepared } from './statements.ts';

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
 * The JSON text of the details objects written by the statement being built, by object: a fresh
 * observation's details go in its history row and, as the entity's latest, in its mirror row, and are
 * stringified once. Filled while `writeBatch` builds its statements, and forgotten after them (`forgetDetailsTexts`).
 */
const detailsTexts = new Map<object, string>();

/** Forgets the texts `detailsText` kept (once a batch's statements are built). */
export function forgetDetailsTexts(): void {
  detailsTexts.clear();
}

/** A details object's JSON text (null for null). */
export function detailsText(v: Record<string, unknown> | null): string | null {
  if (v === null || v === undefined) return null;
  let text = detailsTexts.get(v);
  if (text === undefined) {
    text = JSON.stringify(v);
    detailsTexts.set(v, text);
  }
  return text;
}

export const MIRROR_COLUMNS: Record<string, Column<MirrorUpdate>> = {
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
export async function claim(
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
