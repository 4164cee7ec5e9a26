/**
 * An operator's decision on an ILLEGAL_TRANSITION or a FACTS_CHANGED exception.
 *
 * FACTS_CHANGED: readings of one entity disagree on a fact that cannot change (currency, amount, test,
 * crypto, a refund's deposit); the entity is frozen on its last consistent bookings. Someone who knows what
 * happened decides:
 * - `accept-provider`: the provider's newest facts are right. The ledger adds an `operator` reading that
 *   repeats the provider's newest reading (event id `FACTS_ACCEPTED_PREFIX...`, just after it), from which
 *   the facts are compared again (src/domain/immutable-facts.ts): the entity is unfrozen and booked to
 *   match the new facts (entries booked with the old ones reversed), each entry carrying the decision in
 *   its `memo`; polling resumes.
 * - `keep-ledger`: the ledger's bookings stay, the entity stays frozen.
 *
 * ILLEGAL_TRANSITION: a move no document allows (a
 * deposit from COMPLETED back to PENDING) is recorded but not applied; someone who knows what happened
 * resolves it either way:
 * - `accept-provider`: the provider's status is right. The ledger adds an `operator` reading of that
 *   status (at the instant the provider reported it) which the status path applies whatever the tables
 *   say, and books to match; every entry booked carries the decision in its `memo` (who, why, which
 *   exception).
 * - `keep-ledger`: the ledger's status stays; nothing is booked.
 * Either way the exception is resolved with the note, the decision is kept on it (`decision`) and in its
 * history (`exception_events`), and the same illegal move read again never reopens it (its fact is the
 * move). One transaction, the exception row locked.
 */

import { type Selectable, sql } from 'kysely';
import { AppError } from '../../domain/errors.ts';
import { DECIDED_TYPES, type ExceptionRules } from '../../domain/exception-rules.ts';
import { FACTS_ACCEPTED_PREFIX } from '../../domain/immutable-facts.ts';
import { parseMinorOrNull } from '../../domain/money.ts';
import type { LedgerObservation } from '../../domain/observation.ts';
import type { EntityKind } from '../../domain/statuses.ts';
import { applyObservations } from '../ledger/service.ts';
import type { Db, StatusHistoryTable } from '../schema.ts';
import { withLedgerTransaction } from '../transaction.ts';

export const DECISIONS = ['accept-provider', 'keep-ledger'] as const;
export type Decision = (typeof DECISIONS)[number];

export interface DecisionInput {
  /** The exception's id. */
  id: string;
  decision: Decision;
  /** Who decides (the signed-in user, or the CLI's --by). */
  by: string;
  /** Why: required, it is what the next person reads. */
  note: string;
  now?: Date;
  rules?: ExceptionRules;
}

export interface DecisionResult {
  decision: Decision;
  /** The status the entity has in the ledger afterwards. */
  status: string | null;
  /** The status the provider reported (the refused move's target). */
  providerStatus: string;
  /** The ledger's status before the decision. */
  ledgerStatus: string | null;
  entriesBooked: number;
  /** What was decided, in words (the resolution note's start). */
  summary: string;
}

/** A history row as the decision reads it: the reading's facts, not its bookkeeping columns. */
type HistoryRow = Omit<
  Selectable<StatusHistoryTable>,
  | 'merchant_account'
  | 'entity_kind'
  | 'entity_id'
  | 'source'
  | 'recorded_at'
  | 'stale'
  | 'illegal'
  | 'details'
> & { to_status: string };

/**
 * Applies an operator's decision on an ILLEGAL_TRANSITION or FACTS_CHANGED exception; throws NOT_FOUND or
 * CONFLICT.
 */
export async function decideException(db: Db, input: DecisionInput): Promise<DecisionResult> {
  const note = input.note.trim();
  if (!/^\d{1,18}$/.test(input.id)) {
    throw new AppError('NOT_FOUND', `exception ${input.id}: no such exception`);
  }
  if (note === '') {
    throw new AppError('VALIDATION_FAILED', 'note: required (why the decision is right)', {
      details: { field: 'note', rule: 'required' },
    });
  }
  const by = input.by.trim();
  if (by === '') {
    throw new AppError('VALIDATION_FAILED', 'by: required (who decides)', {
      details: { field: 'by', rule: 'required' },
    });
  }
  const now = input.now ?? new Date();
  return withLedgerTransaction(db, async (trx) => {
    const row = await trx
      .selectFrom('exceptions')
      .select(['id', 'type', 'state', 'merchant_account', 'entity_kind', 'entity_id', 'details'])
      .where('id', '=', input.id)
      .forUpdate()
      .executeTakeFirst();
    if (!row) throw new AppError('NOT_FOUND', `exception ${input.id}: no such exception`);
    // The decided types are about payments only.
    const ex = { ...row, entity_kind: row.entity_kind as EntityKind };
    if (!(DECIDED_TYPES as readonly string[]).includes(ex.type)) {
      throw new AppError(
        'CONFLICT',
        `exception ${input.id}: is ${ex.type}, only ILLEGAL_TRANSITION and FACTS_CHANGED take a decision`,
      );
    }
    const facts = ex.type === 'FACTS_CHANGED';
    if (ex.state === 'resolved') {
      throw new AppError('CONFLICT', `exception ${input.id}: already resolved`);
    }
    const moved = await lastReading(trx, ex.merchant_account, ex.entity_kind, ex.entity_id, !facts);
    if (!moved) throw new AppError('CONFLICT', `exception ${input.id}: no refused reading in the history`);
    const mirror = await trx
      .selectFrom('mirrors')
      .select('status')
      .where('merchant_account', '=', ex.merchant_account)
      .where('entity_kind', '=', ex.entity_kind)
      .where('entity_id', '=', ex.entity_id)
      .executeTakeFirst();
    const ledgerStatus = mirror?.status ?? null;
    let entriesBooked = 0;
    let status = ledgerStatus;
    if (input.decision === 'accept-provider') {
      const reading: LedgerObservation = {
        eventId: `${facts ? FACTS_ACCEPTED_PREFIX : 'operator:'}${ex.id}:${moved.event_id}`,
        kind: ex.entity_kind,
        account: ex.merchant_account,
        entityId: ex.entity_id,
        externalRef: moved.external_ref,
        status: moved.to_status,
        // Accepted facts count from this reading on: just after the provider's newest reading.
        observedAt: facts ? new Date(moved.observed_at.getTime() + 1) : moved.observed_at,
        source: 'operator',
        currency: moved.currency,
        amount: parseMinorOrNull(moved.amount),
        feeCurrency: moved.fee_currency,
        feeAmount: parseMinorOrNull(moved.fee_amount),
        feeOnPayer: moved.fee_on_payer,
        test: moved.test,
        crypto: moved.crypto,
        statusReason: moved.status_reason,
        payerVerification: moved.payer_verification,
        rejectionCode: moved.rejection_code,
        rejectionReason: moved.rejection_reason,
        parentDepositId: moved.parent_deposit_id,
        // The history keeps no bank reference; null keeps the mirror's.
        bankReference: null,
        details: { decision: input.decision, by, note, exceptionId: ex.id, accepted: moved.event_id },
      };
      const applied = await applyObservations(trx, [reading], {
        now,
        ...(input.rules ? { rules: input.rules } : {}),
        memo: { decision: input.decision, by, note, exceptionId: ex.id, status: moved.to_status },
      });
      entriesBooked = applied.entriesBooked;
      status = moved.to_status;
    }
    const changes = String((ex.details as { summary?: unknown } | null)?.summary ?? 'facts');
    const what = facts
      ? input.decision === 'accept-provider'
        ? `accepted the provider's facts (${changes})`
        : `kept the ledger's facts (provider reported ${changes})`
      : input.decision === 'accept-provider'
        ? `accepted the provider's status ${moved.to_status} (ledger had ${ledgerStatus ?? 'none'})`
        : `kept the ledger's status ${ledgerStatus ?? 'none'} (provider reported ${moved.to_status})`;
    const decision = {
      decision: input.decision,
      by,
      note,
      at: now.toISOString(),
      providerStatus: moved.to_status,
      ledgerStatus,
      entriesBooked,
    };
    await sql`
      UPDATE exceptions SET state = 'resolved', resolved_by = ${by}, resolved_at = ${now},
        resolution_note = ${`${what}: ${note}`}, decision = ${JSON.stringify(decision)}::jsonb, updated_at = now()
      WHERE id = ${ex.id}`.execute(trx);
    await trx
      .insertInto('exception_events')
      .values({
        exception_id: ex.id,
        at: now,
        actor: by,
        action: 'state',
        from_state: ex.state,
        to_state: 'resolved',
        from_assignee: null,
        to_assignee: null,
        note: `${what}: ${note}`,
      })
      .execute();
    return {
      decision: input.decision,
      status,
      providerStatus: moved.to_status,
      ledgerStatus,
      entriesBooked,
      summary: what,
    };
  });
}

/** The latest reading with a status: the latest refused one (`illegal`), or the latest of all. */
async function lastReading(
  db: Db,
  account: string,
  kind: string,
  entityId: string,
  illegal: boolean,
): Promise<HistoryRow | undefined> {
  const { rows } = await sql<HistoryRow>`
    SELECT id::text AS id, event_id, to_status, from_status, observed_at, external_ref, currency, amount::text AS amount,
      fee_currency, fee_amount::text AS fee_amount, fee_on_payer, test, crypto, status_reason, payer_verification,
      rejection_code, rejection_reason, parent_deposit_id
    FROM status_history
    WHERE merchant_account = ${account} AND entity_kind = ${kind} AND entity_id = ${entityId}
      AND (illegal OR NOT ${illegal}) AND to_status IS NOT NULL AND source <> 'operator'
    ORDER BY observed_at DESC, id DESC LIMIT 1`.execute(db);
  return rows[0];
}
