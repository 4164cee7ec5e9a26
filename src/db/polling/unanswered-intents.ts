/**
 * Intents still unanswered by the provider: the predicate the poller and the stuck-intent sweep share,
 * and the cashouts with an unknown outcome the poller looks up by their external id.
 */
import { sql } from 'kysely';
import { parseMinor, parseMinorOrNull } from '../../domain/money.ts';
import type { Intent } from '../../domain/observation.ts';
import type { Db } from '../schema.ts';

/**
 * An intent `i` still unanswered: no mirror links it, and (deposits, cashouts) none carries its
 * reference. Served by the partial index `intents_unknown_outcome_ix` and the mirrors' intent and
 * reference indexes.
 */
export const UNANSWERED_INTENT = sql`NOT EXISTS (SELECT 1 FROM mirrors m WHERE m.intent_id = i.intent_id)
  AND NOT EXISTS (SELECT 1 FROM mirrors m WHERE m.external_ref = i.external_ref
    AND m.merchant_account = i.merchant_account AND m.entity_kind = i.entity_kind)`;

/**
 * Cashouts the merchant recorded with an unknown outcome before `before` that are still unanswered (no
 * cashout id, no mirror linked or carrying the external_id), oldest first: the poller looks them up by
 * external_id. Served by `intents_unknown_outcome_ix`.
 */
export async function unsettledCashouts(db: Db, before: Date, limit: number): Promise<Intent[]> {
  const { rows } = await sql<{
    intent_id: string;
    merchant_account: string;
    external_ref: string;
    currency: string;
    amount: string;
    expected_fee: string | null;
    created_at: Date;
    request: Record<string, unknown>;
    response: Record<string, unknown> | null;
  }>`
    SELECT i.intent_id, i.merchant_account, i.external_ref, i.currency, i.amount::text AS amount,
      i.expected_fee::text AS expected_fee, i.created_at, i.request, i.response
    FROM intents i
    WHERE i.outcome = 'unknown' AND i.entity_id IS NULL AND i.created_at <= ${before} AND i.operation = 'cashout'
      AND ${UNANSWERED_INTENT}
    ORDER BY i.created_at, i.intent_id
    LIMIT ${limit}`.execute(db);
  return rows.map((r) => ({
    intentId: r.intent_id,
    operation: 'cashout',
    account: r.merchant_account,
    externalRef: r.external_ref,
    entityId: null,
    currency: r.currency,
    amount: parseMinor(r.amount),
    expectedFee: parseMinorOrNull(r.expected_fee),
    test: false,
    crypto: false,
    feeOnPayer: false,
    parentDepositId: null,
    outcome: 'unknown',
    createdAt: r.created_at,
    request: r.request,
    response: r.response,
  }));
}
