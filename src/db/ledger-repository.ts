/**
 * Set-based reads and writes of the ledger service. Every function takes `db` or `trx` first and
 * touches many entities per statement (arrays passed to `unnest`), so a batch costs a handful of round
 * trips whatever its size. Amounts cross this boundary as decimal text and become bigint minor units
 * here; they never become JavaScript numbers.
 */
import { type Kysely, sql } from 'kysely';
import type {
  AppliedEntry,
  Book,
  Effect,
  HistoryItem,
  IntentFacts,
  PlannedEntry,
} from '../domain/effects.ts';
import { formatAmount, type Minor, parseAmount } from '../domain/money.ts';
import type { ObservationSource } from '../domain/observation.ts';
import type { EntityKind } from '../domain/statuses.ts';
import type { Database } from './schema.ts';

type Db = Kysely<Database>;

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

/** Numeric text to minor units; sums (balances, refund totals) may exceed the 18 integer digits of one amount. */
export const toMinor = (v: string | null): Minor | null =>
  v === null ? null : parseAmount(v, { allowNegative: true, maxIntegerDigits: 40 });
export const toText = (v: Minor | null): string | null => (v === null ? null : formatAmount(v));

function refArrays(refs: readonly EntityRef[]) {
  return {
    accounts: refs.map((r) => r.account),
    kinds: refs.map((r) => r.kind),
    ids: refs.map((r) => r.entityId),
  };
}

/** `(merchant_account, entity_kind, entity_id) IN (...)` for many refs with three array parameters. */
function inRefs(refs: readonly EntityRef[], alias = '') {
  const a = refArrays(refs);
  const p = alias ? `${alias}.` : '';
  return sql`(${sql.raw(`${p}merchant_account, ${p}entity_kind, ${p}entity_id`)}) IN (
    SELECT * FROM unnest(${a.accounts}::text[], ${a.kinds}::text[], ${a.ids}::text[]))`;
}

export async function ensureMerchantAccounts(db: Db, accounts: readonly string[]): Promise<void> {
  const names = [...new Set(accounts)].sort();
  if (names.length === 0) return;
  await sql`INSERT INTO merchant_accounts (name) SELECT unnest(${names}::text[]) ON CONFLICT DO NOTHING`.execute(
    db,
  );
}

export interface InitialMirror extends EntityRef {
  externalRef: string | null;
  nextPollAt: Date | null;
}

/** Creates missing mirror rows (in key order, so concurrent batches cannot deadlock on inserts). */
export async function ensureMirrors(db: Db, rows: readonly InitialMirror[]): Promise<void> {
  if (rows.length === 0) return;
  const sorted = [...rows].sort(compareRefs);
  const a = refArrays(sorted);
  await sql`
    INSERT INTO mirrors (merchant_account, entity_kind, entity_id, external_ref, next_poll_at)
    SELECT * FROM unnest(${a.accounts}::text[], ${a.kinds}::text[], ${a.ids}::text[],
      ${sorted.map((r) => r.externalRef)}::text[], ${sorted.map((r) => r.nextPollAt)}::timestamptz[])
    ON CONFLICT DO NOTHING`.execute(db);
}

export interface LockedMirror extends EntityRef {
  status: string | null;
  everCompleted: boolean;
  everEarlyReleased: boolean;
  test: boolean;
  crypto: boolean;
  pollAttempts: number;
  intentId: string | null;
  firstSeenAt: Date | null;
  externalRef: string | null;
  nextPollAt: Date | null;
  /** The intent linked by the previous computation (read with the lock, no extra query). */
  intent: LinkedIntent | null;
}

/** Locks the mirror rows, ordered by key so that two batches on the same entities queue instead of deadlocking. */
export async function lockMirrors(db: Db, refs: readonly EntityRef[]): Promise<Map<string, LockedMirror>> {
  const out = new Map<string, LockedMirror>();
  if (refs.length === 0) return out;
  const { rows } = await sql<{
    merchant_account: string;
    entity_kind: EntityKind;
    entity_id: string;
    status: string | null;
    ever_completed: boolean;
    ever_early_released: boolean;
    test: boolean;
    crypto: boolean;
    poll_attempts: number;
    intent_id: string | null;
    first_seen_at: Date | null;
    external_ref: string | null;
    next_poll_at: Date | null;
    i_currency: string | null;
    i_amount: string | null;
    i_expected_fee: string | null;
    i_test: boolean | null;
    i_crypto: boolean | null;
    i_fee_on_payer: boolean | null;
    i_entity_id: string | null;
    i_external_ref: string | null;
  }>`
    SELECT m.merchant_account, m.entity_kind, m.entity_id, m.status, m.ever_completed, m.ever_early_released, m.test,
      m.crypto, m.poll_attempts, m.intent_id, m.first_seen_at, m.external_ref, m.next_poll_at,
      i.currency AS i_currency, i.amount::text AS i_amount, i.expected_fee::text AS i_expected_fee, i.test AS i_test,
      i.crypto AS i_crypto, i.fee_on_payer AS i_fee_on_payer, i.entity_id AS i_entity_id,
      i.external_ref AS i_external_ref
    FROM mirrors m LEFT JOIN intents i ON i.intent_id = m.intent_id
    WHERE ${inRefs(refs, 'm')}
    ORDER BY m.merchant_account, m.entity_kind, m.entity_id
    FOR UPDATE OF m`.execute(db);
  for (const r of rows) {
    const ref = { account: r.merchant_account, kind: r.entity_kind, entityId: r.entity_id };
    out.set(refKey(ref), {
      ...ref,
      status: r.status,
      everCompleted: r.ever_completed,
      everEarlyReleased: r.ever_early_released,
      test: r.test,
      crypto: r.crypto,
      pollAttempts: r.poll_attempts,
      intentId: r.intent_id,
      firstSeenAt: r.first_seen_at,
      externalRef: r.external_ref,
      nextPollAt: r.next_poll_at,
      intent:
        r.intent_id !== null && r.i_amount !== null
          ? {
              intentId: r.intent_id,
              currency: r.i_currency!,
              amount: parseAmount(r.i_amount),
              expectedFee: r.i_expected_fee === null ? null : parseAmount(r.i_expected_fee),
              test: r.i_test!,
              crypto: r.i_crypto!,
              feeOnPayer: r.i_fee_on_payer!,
              entityId: r.i_entity_id,
              externalRef: r.i_external_ref!,
            }
          : null,
    });
  }
  return out;
}

/** The recorded history of the entities, grouped by entity key. */
export async function loadHistories(db: Db, refs: readonly EntityRef[]): Promise<Map<string, HistoryItem[]>> {
  const out = new Map<string, HistoryItem[]>();
  if (refs.length === 0) return out;
  const { rows } = await sql<{
    merchant_account: string;
    entity_kind: EntityKind;
    entity_id: string;
    event_id: string;
    to_status: string | null;
    observed_at: Date;
    source: ObservationSource;
    external_ref: string | null;
    currency: string | null;
    amount: string | null;
    fee_currency: string | null;
    fee_amount: string | null;
    fee_on_payer: boolean | null;
    test: boolean;
    crypto: boolean;
    status_reason: string | null;
    payer_verification: string | null;
    rejection_code: string | null;
    rejection_reason: string | null;
    parent_deposit_id: string | null;
  }>`
    SELECT merchant_account, entity_kind, entity_id, event_id, to_status, observed_at, source, external_ref,
      currency, amount, fee_currency, fee_amount, fee_on_payer, test, crypto, status_reason, payer_verification,
      rejection_code, rejection_reason, parent_deposit_id
    FROM status_history WHERE ${inRefs(refs)}`.execute(db);
  for (const r of rows) {
    const key = refKey({ account: r.merchant_account, kind: r.entity_kind, entityId: r.entity_id });
    let list = out.get(key);
    if (!list) {
      list = [];
      out.set(key, list);
    }
    list.push({
      eventId: r.event_id,
      status: r.to_status,
      observedAt: r.observed_at,
      source: r.source,
      externalRef: r.external_ref,
      currency: r.currency,
      amount: toMinor(r.amount),
      feeCurrency: r.fee_currency,
      feeAmount: toMinor(r.fee_amount),
      feeOnPayer: r.fee_on_payer,
      test: r.test,
      crypto: r.crypto,
      statusReason: r.status_reason,
      payerVerification: r.payer_verification,
      rejectionCode: r.rejection_code,
      rejectionReason: r.rejection_reason,
      parentDepositId: r.parent_deposit_id,
    });
  }
  return out;
}

export interface LinkedIntent extends IntentFacts {
  intentId: string;
  expectedFee: Minor | null;
  entityId: string | null;
  externalRef: string;
}

/**
 * The intent of each entity: the one naming its provider id, else the one with its merchant reference
 * (invoice_id, external_id) and no other provider id; the earliest created wins a tie.
 */
export async function loadIntents(
  db: Db,
  refs: readonly (EntityRef & { externalRefs: readonly string[] })[],
): Promise<Map<string, LinkedIntent>> {
  const out = new Map<string, LinkedIntent>();
  if (refs.length === 0) return out;
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
  const { rows } = await sql<{
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
  }>`
    SELECT intent_id, merchant_account, entity_kind, entity_id, external_ref, currency, amount, expected_fee, test,
      crypto, fee_on_payer, created_at
    FROM intents WHERE ${inRefs(refs)}
    UNION
    SELECT intent_id, merchant_account, entity_kind, entity_id, external_ref, currency, amount, expected_fee, test,
      crypto, fee_on_payer, created_at
    FROM intents WHERE (merchant_account, entity_kind, external_ref) IN (
      SELECT * FROM unnest(${accounts}::text[], ${kinds}::text[], ${xrefs}::text[]))
    ORDER BY created_at, intent_id`.execute(db);
  const byId = new Map<string, LinkedIntent>();
  const byRef = new Map<string, LinkedIntent[]>();
  for (const r of rows) {
    const intent: LinkedIntent = {
      intentId: r.intent_id,
      currency: r.currency,
      amount: parseAmount(r.amount),
      expectedFee: r.expected_fee === null ? null : parseAmount(r.expected_fee),
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

/** Journal entries already booked for the entities. */
export async function loadApplied(db: Db, refs: readonly EntityRef[]): Promise<Map<string, AppliedEntry[]>> {
  const out = new Map<string, AppliedEntry[]>();
  if (refs.length === 0) return out;
  const { rows } = await sql<{
    merchant_account: string;
    entity_kind: EntityKind;
    entity_id: string;
    effect: Effect;
    direction: number;
    seq: number;
    book: Book;
    currency: string;
    amount: string;
    fee_currency: string | null;
    fee_amount: string | null;
  }>`
    SELECT merchant_account, entity_kind, entity_id, effect, direction, seq, book, currency, amount, fee_currency,
      fee_amount
    FROM journal_entries WHERE ${inRefs(refs)}`.execute(db);
  for (const r of rows) {
    const key = refKey({ account: r.merchant_account, kind: r.entity_kind, entityId: r.entity_id });
    let list = out.get(key);
    if (!list) {
      list = [];
      out.set(key, list);
    }
    list.push({
      effect: r.effect,
      direction: r.direction === -1 ? -1 : 1,
      seq: r.seq,
      book: r.book,
      currency: r.currency,
      amount: parseAmount(r.amount),
      feeCurrency: r.fee_currency,
      feeAmount: r.fee_amount === null ? null : parseAmount(r.fee_amount),
    });
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

export async function insertHistory(db: Db, rows: readonly HistoryRow[]): Promise<void> {
  if (rows.length === 0) return;
  const col = <T>(f: (r: HistoryRow) => T) => rows.map(f);
  await sql`
    INSERT INTO status_history (event_id, merchant_account, entity_kind, entity_id, from_status, to_status, source,
      observed_at, stale, illegal, external_ref, currency, amount, fee_currency, fee_amount, fee_on_payer, test,
      crypto, status_reason, payer_verification, rejection_code, rejection_reason, parent_deposit_id, details)
    SELECT * FROM unnest(
      ${col((r) => r.item.eventId)}::text[], ${col((r) => r.account)}::text[], ${col((r) => r.kind)}::text[],
      ${col((r) => r.entityId)}::text[], ${col((r) => r.fromStatus)}::text[], ${col((r) => r.item.status)}::text[],
      ${col((r) => r.item.source)}::text[], ${col((r) => r.item.observedAt)}::timestamptz[],
      ${col((r) => r.stale)}::boolean[], ${col((r) => r.illegal)}::boolean[],
      ${col((r) => r.item.externalRef)}::text[], ${col((r) => r.item.currency)}::text[],
      ${col((r) => toText(r.item.amount))}::numeric[], ${col((r) => r.item.feeCurrency)}::text[],
      ${col((r) => toText(r.item.feeAmount))}::numeric[], ${col((r) => r.item.feeOnPayer)}::boolean[],
      ${col((r) => r.item.test)}::boolean[], ${col((r) => r.item.crypto)}::boolean[],
      ${col((r) => r.item.statusReason)}::text[], ${col((r) => r.item.payerVerification)}::text[],
      ${col((r) => r.item.rejectionCode)}::text[], ${col((r) => r.item.rejectionReason)}::text[],
      ${col((r) => r.item.parentDepositId)}::text[], ${col((r) => JSON.stringify(r.details))}::jsonb[])
    ON CONFLICT (event_id) DO NOTHING`.execute(db);
}

export interface EntryToBook extends EntityRef {
  entry: PlannedEntry;
  effectiveAt: Date;
}

/**
 * Books entries and their postings: one multi-row INSERT for the entries, one for all their postings (so
 * the balance trigger sees each entry whole). Entries whose key exists are skipped with their postings.
 * Returns the number of entries booked.
 */
export async function bookEntries(db: Db, entries: readonly EntryToBook[]): Promise<number> {
  if (entries.length === 0) return 0;
  const accounts = new Map<string, [string, string, string, string]>();
  for (const e of entries) {
    for (const p of e.entry.postings) {
      accounts.set(`${e.account}\u0000${p.currency}\u0000${e.entry.book}\u0000${p.account}`, [
        e.account,
        p.currency,
        e.entry.book,
        p.account,
      ]);
    }
  }
  const acc = [...accounts.values()].sort();
  await sql`
    INSERT INTO ledger_accounts (merchant_account, currency, book, name)
    SELECT * FROM unnest(${acc.map((a) => a[0])}::text[], ${acc.map((a) => a[1])}::text[],
      ${acc.map((a) => a[2])}::text[], ${acc.map((a) => a[3])}::text[])
    ON CONFLICT DO NOTHING`.execute(db);
  const col = <T>(f: (r: EntryToBook) => T) => entries.map(f);
  const { rows } = await sql<{ id: string; idempotency_key: string }>`
    INSERT INTO journal_entries (idempotency_key, merchant_account, entity_kind, entity_id, effect, direction, seq,
      book, currency, amount, fee_currency, fee_amount, effective_at)
    SELECT * FROM unnest(${col((e) => e.entry.idempotencyKey)}::text[], ${col((e) => e.account)}::text[],
      ${col((e) => e.kind)}::text[], ${col((e) => e.entityId)}::text[], ${col((e) => e.entry.effect)}::text[],
      ${col((e) => e.entry.direction)}::smallint[], ${col((e) => e.entry.seq)}::integer[],
      ${col((e) => e.entry.book)}::text[], ${col((e) => e.entry.currency)}::text[],
      ${col((e) => formatAmount(e.entry.amount))}::numeric[], ${col((e) => e.entry.feeCurrency)}::text[],
      ${col((e) => toText(e.entry.feeAmount))}::numeric[], ${col((e) => e.effectiveAt)}::timestamptz[])
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING id, idempotency_key`.execute(db);
  const ids = new Map(rows.map((r) => [r.idempotency_key, r.id]));
  const pEntry: string[] = [];
  const pAccount: string[] = [];
  const pCurrency: string[] = [];
  const pBook: string[] = [];
  const pName: string[] = [];
  const pAmount: string[] = [];
  for (const e of entries) {
    const id = ids.get(e.entry.idempotencyKey);
    if (id === undefined) continue;
    for (const p of e.entry.postings) {
      pEntry.push(id);
      pAccount.push(e.account);
      pCurrency.push(p.currency);
      pBook.push(e.entry.book);
      pName.push(p.account);
      pAmount.push(formatAmount(p.amount));
    }
  }
  if (pEntry.length > 0) {
    await sql`
      INSERT INTO postings (entry_id, merchant_account, currency, book, account, amount)
      SELECT * FROM unnest(${pEntry}::bigint[], ${pAccount}::text[], ${pCurrency}::text[], ${pBook}::text[],
        ${pName}::text[], ${pAmount}::numeric[])`.execute(db);
  }
  return rows.length;
}

export interface MirrorUpdate extends EntityRef {
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
  /** Null keeps the stored value. */
  details: Record<string, unknown> | null;
  intentId: string | null;
  firstSeenAt: Date | null;
  lastSeenAt: Date | null;
  completedAt: Date | null;
  nextPollAt: Date | null;
  pollAttempts: number;
}

export async function updateMirrors(db: Db, rows: readonly MirrorUpdate[]): Promise<void> {
  if (rows.length === 0) return;
  const col = <T>(f: (r: MirrorUpdate) => T) => rows.map(f);
  await sql`
    UPDATE mirrors m SET
      external_ref = coalesce(v.external_ref, m.external_ref), status = v.status, status_since = v.status_since,
      ever_completed = v.ever_completed, ever_early_released = v.ever_early_released, currency = v.currency,
      amount = v.amount, fee_currency = v.fee_currency, fee_amount = v.fee_amount, fee_on_payer = v.fee_on_payer,
      test = v.test, crypto = v.crypto, status_reason = v.status_reason, payer_verification = v.payer_verification,
      rejection_code = v.rejection_code, rejection_reason = v.rejection_reason,
      parent_deposit_id = coalesce(v.parent_deposit_id, m.parent_deposit_id),
      expires_at = coalesce(v.expires_at, m.expires_at), details = coalesce(v.details, m.details),
      intent_id = v.intent_id, first_seen_at = v.first_seen_at, last_seen_at = v.last_seen_at,
      completed_at = v.completed_at, next_poll_at = v.next_poll_at, poll_attempts = v.poll_attempts,
      updated_at = now()
    FROM unnest(${col((r) => r.account)}::text[], ${col((r) => r.kind)}::text[], ${col((r) => r.entityId)}::text[],
      ${col((r) => r.externalRef)}::text[], ${col((r) => r.status)}::text[],
      ${col((r) => r.statusSince)}::timestamptz[], ${col((r) => r.everCompleted)}::boolean[],
      ${col((r) => r.everEarlyReleased)}::boolean[], ${col((r) => r.currency)}::text[],
      ${col((r) => toText(r.amount))}::numeric[], ${col((r) => r.feeCurrency)}::text[],
      ${col((r) => toText(r.feeAmount))}::numeric[], ${col((r) => r.feeOnPayer)}::boolean[],
      ${col((r) => r.test)}::boolean[], ${col((r) => r.crypto)}::boolean[], ${col((r) => r.statusReason)}::text[],
      ${col((r) => r.payerVerification)}::text[], ${col((r) => r.rejectionCode)}::text[],
      ${col((r) => r.rejectionReason)}::text[], ${col((r) => r.parentDepositId)}::text[],
      ${col((r) => r.expiresAt)}::timestamptz[],
      ${col((r) => (r.details === null ? null : JSON.stringify(r.details)))}::jsonb[],
      ${col((r) => r.intentId)}::text[], ${col((r) => r.firstSeenAt)}::timestamptz[],
      ${col((r) => r.lastSeenAt)}::timestamptz[], ${col((r) => r.completedAt)}::timestamptz[],
      ${col((r) => r.nextPollAt)}::timestamptz[], ${col((r) => r.pollAttempts)}::integer[])
      AS v(merchant_account, entity_kind, entity_id, external_ref, status, status_since, ever_completed,
        ever_early_released, currency, amount, fee_currency, fee_amount, fee_on_payer, test, crypto, status_reason,
        payer_verification, rejection_code, rejection_reason, parent_deposit_id, expires_at, details, intent_id,
        first_seen_at, last_seen_at, completed_at, next_poll_at, poll_attempts)
    WHERE m.merchant_account = v.merchant_account AND m.entity_kind = v.entity_kind
      AND m.entity_id = v.entity_id`.execute(db);
}
