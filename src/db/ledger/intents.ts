/**
 * The merchant's intents: recorded (idempotent by intent id, a pending record completed by a later one),
 * and the intent of each entity found.
 */
import { sql } from 'kysely';
import type { IntentFacts } from '../../domain/effects.ts';
import { formatAmount, type Minor } from '../../domain/money.ts';
import { type Intent, intentKind } from '../../domain/observation.ts';
import type { EntityKind } from '../../domain/statuses.ts';
import type { Db } from '../schema.ts';
import { binaryArray } from './binary-array.ts';
import { amountOf } from './decode.ts';
import { type EntityRef, keyArrays, refKey, refsSource } from './keys.ts';
import { prepared } from './statements.ts';

const toText = (v: Minor | null): string | null => (v === null ? null : formatAmount(v));

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
