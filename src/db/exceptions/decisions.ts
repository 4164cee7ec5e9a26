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
 *
 * Four eyes: `keep-ledger` books nothing and is one step. `accept-provider` re-books the ledger, so it
 * takes two people: an operator (or an API token) proposes it (`exceptions.proposal`, a `propose` event,
 * nothing booked); a controller who did not propose it approves it (`approve` event, then booked and
 * resolved, the entries' memo naming both) or rejects it (`reject` event, the exception stays as it was).
 * The database refuses a decision whose approver is its proposer (`exceptions_decision_approver_ck`).
 */

import { type Selectable, sql, type Transaction } from 'kysely';
import { AppError } from '../../domain/errors.ts';
import { DECIDED_TYPES, type ExceptionRules } from '../../domain/exception-rules.ts';
import { FACTS_ACCEPTED_PREFIX } from '../../domain/immutable-facts.ts';
import { parseMinorOrNull } from '../../domain/money.ts';
import type { LedgerObservation } from '../../domain/observation.ts';
import { applyObservations } from '../ledger/service.ts';
import type { Database, Db, StatusHistoryTable } from '../schema.ts';
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
  /** decided: the exception is resolved; proposed: waiting for a controller's approval, nothing booked. */
  outcome: 'decided' | 'proposed';
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

/** The exception row as a decision reads it, locked. */
interface LockedException {
  id: string;
  type: string;
  state: string;
  merchant_account: string;
  entity_kind: 'deposit' | 'cashout' | 'refund';
  entity_id: string;
  details: unknown;
  proposal: unknown;
}

/** A decision that re-books the ledger, waiting for a controller (`exceptions.proposal`). */
export interface Proposal {
  decision: Decision;
  by: string;
  note: string;
  /** ISO instant of the proposal. */
  at: string;
  /** The event id of the reading it accepts: a newer reading makes the proposal stale. */
  reading: string;
  /** What it would decide, in words. */
  summary: string;
}

function proposalOf(value: unknown): Proposal | null {
  if (value === null || typeof value !== 'object') return null;
  const p = value as Partial<Proposal>;
  return typeof p.by === 'string' && typeof p.reading === 'string' ? (p as Proposal) : null;
}

function checkId(id: string): void {
  if (!/^\d{1,18}$/.test(id)) throw new AppError('NOT_FOUND', `exception ${id}: no such exception`);
}

function required(value: string, field: string, why: string): string {
  const v = value.trim();
  if (v === '') {
    throw new AppError('VALIDATION_FAILED', `${field}: required (${why})`, {
      details: { field, rule: 'required' },
    });
  }
  return v;
}

/** Locks a decided exception that is not resolved; NOT_FOUND or CONFLICT otherwise. */
async function lockDecided(trx: Db, id: string): Promise<LockedException> {
  const ex = await trx
    .selectFrom('exceptions')
    .select(['id', 'type', 'state', 'merchant_account', 'entity_kind', 'entity_id', 'details', 'proposal'])
    .where('id', '=', id)
    .forUpdate()
    .executeTakeFirst();
  if (!ex) throw new AppError('NOT_FOUND', `exception ${id}: no such exception`);
  if (!(DECIDED_TYPES as readonly string[]).includes(ex.type)) {
    throw new AppError(
      'CONFLICT',
      `exception ${id}: is ${ex.type}, only ILLEGAL_TRANSITION and FACTS_CHANGED take a decision`,
    );
  }
  if (ex.state === 'resolved') throw new AppError('CONFLICT', `exception ${id}: already resolved`);
  return ex as LockedException;
}

/** The reading a decision is about and the ledger's status now. */
async function situation(trx: Db, ex: LockedException) {
  const facts = ex.type === 'FACTS_CHANGED';
  const moved = await lastReading(trx, ex.merchant_account, ex.entity_kind, ex.entity_id, !facts);
  if (!moved) throw new AppError('CONFLICT', `exception ${ex.id}: no refused reading in the history`);
  const mirror = await trx
    .selectFrom('mirrors')
    .select('status')
    .where('merchant_account', '=', ex.merchant_account)
    .where('entity_kind', '=', ex.entity_kind)
    .where('entity_id', '=', ex.entity_id)
    .executeTakeFirst();
  return { facts, moved, ledgerStatus: mirror?.status ?? null };
}

/** What accepting the provider's would do, in words (a proposal's). */
function proposalText(ex: LockedException, toStatus: string, ledgerStatus: string | null): string {
  const changes = String((ex.details as { summary?: unknown } | null)?.summary ?? 'facts');
  return ex.type === 'FACTS_CHANGED'
    ? `accept the provider's facts (${changes})`
    : `accept the provider's status ${toStatus} (ledger has ${ledgerStatus ?? 'none'})`;
}

/** What a decision decides, in words (the resolution note's start). */
function decisionText(
  ex: LockedException,
  decision: Decision,
  toStatus: string,
  ledgerStatus: string | null,
) {
  const changes = String((ex.details as { summary?: unknown } | null)?.summary ?? 'facts');
  if (ex.type === 'FACTS_CHANGED') {
    return decision === 'accept-provider'
      ? `accepted the provider's facts (${changes})`
      : `kept the ledger's facts (provider reported ${changes})`;
  }
  return decision === 'accept-provider'
    ? `accepted the provider's status ${toStatus} (ledger had ${ledgerStatus ?? 'none'})`
    : `kept the ledger's status ${ledgerStatus ?? 'none'} (provider reported ${toStatus})`;
}

async function addEvent(
  trx: Db,
  exceptionId: string,
  at: Date,
  actor: string,
  action: 'propose' | 'approve' | 'reject',
  note: string,
): Promise<void> {
  await trx
    .insertInto('exception_events')
    .values({
      exception_id: exceptionId,
      at,
      actor,
      action,
      from_state: null,
      to_state: null,
      from_assignee: null,
      to_assignee: null,
      note,
    })
    .execute();
}

/**
 * A decision on an ILLEGAL_TRANSITION or FACTS_CHANGED. `keep-ledger` books nothing and resolves the
 * exception at once. `accept-provider` re-books the ledger, so it is only proposed here (kept on the
 * exception and in its audit trail, nothing booked): `approveDecision` by a controller who did not
 * propose it books it, `rejectDecision` drops it. Throws NOT_FOUND, CONFLICT (resolved, not a decided
 * type, a proposal already waiting) or VALIDATION_FAILED.
 */
export function decideException(db: Db, input: DecisionInput): Promise<DecisionResult> {
  checkId(input.id);
  return withLedgerTransaction(db, (trx) => decideIn(trx, input));
}

/** `decideException` in the caller's transaction (the workbook's bulk decisions). */
export async function decideIn(trx: Transaction<Database>, input: DecisionInput): Promise<DecisionResult> {
  checkId(input.id);
  const note = required(input.note, 'note', 'why the decision is right');
  const by = required(input.by, 'by', 'who decides');
  const now = input.now ?? new Date();
  const ex = await lockDecided(trx, input.id);
  const { moved, ledgerStatus } = await situation(trx, ex);
  const what = decisionText(ex, input.decision, moved.to_status, ledgerStatus);
  const waiting = proposalOf(ex.proposal);
  if (input.decision === 'keep-ledger') {
    // Keeping the ledger's ends a proposal still waiting; the trail says whose.
    const ends = waiting ? ` (ends ${waiting.by}'s proposal to ${waiting.summary})` : '';
    return resolve(trx, ex, {
      decision: 'keep-ledger',
      by,
      note: `${note}${ends}`,
      now,
      what,
      moved,
      ledgerStatus,
      entriesBooked: 0,
      status: ledgerStatus,
      proposal: null,
    });
  }
  if (waiting) {
    throw new AppError(
      'CONFLICT',
      `exception ${ex.id}: ${waiting.by} already proposed to accept the provider's ${ex.type === 'FACTS_CHANGED' ? 'facts' : 'status'} at ${waiting.at}; a controller approves or rejects it`,
    );
  }
  const plan = proposalText(ex, moved.to_status, ledgerStatus);
  const proposal: Proposal = {
    decision: 'accept-provider',
    by,
    note,
    at: now.toISOString(),
    reading: moved.event_id,
    summary: plan,
  };
  await sql`UPDATE exceptions SET proposal = ${JSON.stringify(proposal)}::jsonb, updated_at = now()
    WHERE id = ${ex.id}`.execute(trx);
  await addEvent(trx, ex.id, now, by, 'propose', `proposed to ${plan}: ${note}`);
  return {
    outcome: 'proposed',
    decision: 'accept-provider',
    status: ledgerStatus,
    providerStatus: moved.to_status,
    ledgerStatus,
    entriesBooked: 0,
    summary: `proposed to ${plan}`,
  };
}

export interface ApprovalInput {
  /** The exception's id. */
  id: string;
  /** The controller who approves or rejects; never the proposer for an approval. */
  by: string;
  /** Why (required to reject, optional to approve). */
  note?: string;
  now?: Date;
  rules?: ExceptionRules;
}

/**
 * Approves the decision proposed on the exception: the ledger books it now, in the approver's name and
 * the proposer's, and the exception is resolved. Throws FORBIDDEN (the proposer approving their own),
 * CONFLICT (nothing proposed, resolved, or the provider reported again since the proposal) or NOT_FOUND.
 */
export function approveDecision(db: Db, input: ApprovalInput): Promise<DecisionResult> {
  checkId(input.id);
  return withLedgerTransaction(db, (trx) => approveIn(trx, input));
}

/** `approveDecision` in the caller's transaction (the workbook's bulk decisions). */
export async function approveIn(trx: Transaction<Database>, input: ApprovalInput): Promise<DecisionResult> {
  checkId(input.id);
  const by = required(input.by, 'by', 'who approves');
  const now = input.now ?? new Date();
  const ex = await lockDecided(trx, input.id);
  const proposal = proposalOf(ex.proposal);
  if (!proposal) throw new AppError('CONFLICT', `exception ${ex.id}: no decision is waiting for approval`);
  if (proposal.by === by) {
    throw new AppError(
      'FORBIDDEN',
      `You proposed the decision on exception ${ex.id}, so a different controller must approve it.`,
    );
  }
  const { facts, moved, ledgerStatus } = await situation(trx, ex);
  if (moved.event_id !== proposal.reading) {
    throw new AppError(
      'CONFLICT',
      `exception ${ex.id}: the provider reported again since ${proposal.by}'s proposal; reject it and propose again`,
    );
  }
  const note = proposal.note;
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
    details: {
      decision: proposal.decision,
      by,
      proposedBy: proposal.by,
      note,
      exceptionId: ex.id,
      accepted: moved.event_id,
    },
  };
  const applied = await applyObservations(trx, [reading], {
    now,
    ...(input.rules ? { rules: input.rules } : {}),
    memo: {
      decision: proposal.decision,
      by,
      proposedBy: proposal.by,
      note,
      exceptionId: ex.id,
      status: moved.to_status,
    },
  });
  const approval = input.note?.trim() ? `: ${input.note.trim()}` : '';
  await addEvent(trx, ex.id, now, by, 'approve', `approved ${proposal.by}'s proposal${approval}`);
  return resolve(trx, ex, {
    decision: proposal.decision,
    by,
    note,
    now,
    what: decisionText(ex, proposal.decision, moved.to_status, ledgerStatus),
    moved,
    ledgerStatus,
    entriesBooked: applied.entriesBooked,
    status: moved.to_status,
    proposal,
  });
}

/** Drops the decision proposed on the exception, which stays as it is; nothing is booked. */
export function rejectDecision(db: Db, input: ApprovalInput): Promise<Proposal> {
  checkId(input.id);
  return db.transaction().execute((trx) => rejectIn(trx, input));
}

/** `rejectDecision` in the caller's transaction (the workbook's bulk decisions). */
export async function rejectIn(trx: Transaction<Database>, input: ApprovalInput): Promise<Proposal> {
  checkId(input.id);
  const by = required(input.by, 'by', 'who rejects');
  const note = required(input.note ?? '', 'note', 'why the proposal is wrong');
  const now = input.now ?? new Date();
  const ex = await lockDecided(trx, input.id);
  const proposal = proposalOf(ex.proposal);
  if (!proposal) throw new AppError('CONFLICT', `exception ${ex.id}: no decision is waiting for approval`);
  await sql`UPDATE exceptions SET proposal = NULL, updated_at = now() WHERE id = ${ex.id}`.execute(trx);
  await addEvent(trx, ex.id, now, by, 'reject', `rejected ${proposal.by}'s proposal: ${note}`);
  return proposal;
}

/** Resolves the locked exception with the decision (kept on it and in its history). */
async function resolve(
  trx: Db,
  ex: LockedException,
  d: {
    decision: Decision;
    by: string;
    note: string;
    now: Date;
    what: string;
    moved: HistoryRow;
    ledgerStatus: string | null;
    entriesBooked: number;
    status: string | null;
    proposal: Proposal | null;
  },
): Promise<DecisionResult> {
  const decision = {
    decision: d.decision,
    by: d.by,
    note: d.note,
    at: d.now.toISOString(),
    providerStatus: d.moved.to_status,
    ledgerStatus: d.ledgerStatus,
    entriesBooked: d.entriesBooked,
    ...(d.proposal ? { proposedBy: d.proposal.by, proposedAt: d.proposal.at } : {}),
  };
  const text = `${d.what}: ${d.note}`;
  await sql`
    UPDATE exceptions SET state = 'resolved', resolved_by = ${d.by}, resolved_at = ${d.now},
      resolution_note = ${text}, decision = ${JSON.stringify(decision)}::jsonb, proposal = NULL, updated_at = now()
    WHERE id = ${ex.id}`.execute(trx);
  await trx
    .insertInto('exception_events')
    .values({
      exception_id: ex.id,
      at: d.now,
      actor: d.by,
      action: 'state',
      from_state: ex.state,
      to_state: 'resolved',
      from_assignee: null,
      to_assignee: null,
      note: text,
    })
    .execute();
  return {
    outcome: 'decided',
    decision: d.decision,
    status: d.status,
    providerStatus: d.moved.to_status,
    ledgerStatus: d.ledgerStatus,
    entriesBooked: d.entriesBooked,
    summary: d.what,
  };
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
