/**
 * The one planning function of the ledger: an entity's whole history, its intent and its booked entries
 * in; its status path, facts, state, wanted effects, the entries to book and the exceptions raised out.
 * The ledger service (`reconcile`, src/db/ledger-service.ts) books the plan; verification
 * (src/db/verify.ts) recomputes it and reports any entry the plan would still book as drift. Pure: no
 * clock, no I/O. When facts that cannot change disagree between readings (src/domain/immutable-facts.ts),
 * the entity is frozen: the plan books nothing more (its last consistent bookings stay) and raises only
 * FACTS_CHANGED, with both versions.
 */
import {
  type AppliedEntry,
  derivePath,
  type EffectState,
  type EntityFacts,
  entityFacts,
  type HistoryItem,
  type IntentFacts,
  type PathState,
  type PlannedEntry,
  planEntries,
  type WantedResult,
  wantedEffects,
} from './effects.ts';
import {
  type ExceptionRules,
  type IntentForRules,
  observationExceptions,
  type RaisedException,
  stateExceptions,
} from './exception-rules.ts';
import { changedFacts, type FactChange, factsChangedException } from './immutable-facts.ts';
import type { EntityKind } from './statuses.ts';

export interface PlanInput {
  kind: EntityKind;
  account: string;
  entityId: string;
  /** The whole recorded history in any order, this batch's fresh observations included. */
  history: readonly HistoryItem[];
  /** The observations this batch records (also in `history`); empty for a recomputation. */
  fresh?: readonly HistoryItem[];
  intent: (IntentFacts & IntentForRules) | null;
  /** True when the intent was linked to the entity in this batch. */
  intentNew?: boolean;
  /** The entity's entries booked so far. */
  applied: readonly AppliedEntry[];
  /** For a refund: whether its deposit is a test deposit (a refund takes the book of its deposit). */
  refundOfTestDeposit?: boolean;
  /** The state of the previous computation (null when none); state exceptions fire on crossing into one. */
  before?: EffectState | null;
  rules: ExceptionRules;
}

export interface EntityPlan {
  path: PathState;
  facts: EntityFacts;
  state: EffectState;
  wanted: WantedResult;
  /** Entries that make the booked effects equal the wanted ones (reversals and applications). */
  entries: PlannedEntry[];
  /** When the entries take effect: the start of the current status, else the last observation, else null. */
  effectiveAt: Date | null;
  /** observed_at of the last observation in walk order (null with no history). */
  lastSeen: Date | null;
  /** Something to record: fresh observations, an intent linked now, or entries to book. */
  changed: boolean;
  /** Exceptions raised by this change (empty when nothing changed). */
  exceptions: RaisedException[];
  /** Immutable facts that disagree between readings; non-empty: the entity is frozen, `entries` is empty. */
  factsChanged: FactChange[];
}

/** Plans one entity: state from its whole history, wanted effects minus booked ones, and exceptions. */
export function planEntity(input: PlanInput): EntityPlan {
  const { kind, intent, rules } = input;
  const fresh = input.fresh ?? [];
  const intentNew = input.intentNew ?? false;
  const path = derivePath(kind, input.history);
  const facts = entityFacts(kind, path.sorted, intent);
  if (kind === 'refund') facts.test = input.refundOfTestDeposit ?? false;
  const state: EffectState = {
    kind,
    status: path.status,
    everCompleted: path.everCompleted,
    everEarlyReleased: path.everEarlyReleased,
    test: facts.test,
    crypto: facts.crypto,
  };
  const wanted = wantedEffects(state, facts);
  const factsChanged = changedFacts(kind, path.sorted);
  const frozen = factsChanged.length > 0;
  const entries = frozen
    ? []
    : planEntries(kind, input.account, input.entityId, wanted.effects, wanted.waiting, input.applied);
  const lastSeen = path.sorted.length > 0 ? path.sorted[path.sorted.length - 1]!.observedAt : null;
  const changed = fresh.length > 0 || intentNew || entries.length > 0;
  const exceptions = !changed
    ? []
    : frozen
      ? [factsChangedException(factsChanged)!]
      : [
          ...stateExceptions(input.before ?? null, state),
          ...observationExceptions(
            {
              kind,
              fresh,
              path,
              providerAmount: facts.providerAmount,
              providerCurrency: facts.providerCurrency,
              feeAmount: facts.feeAmount,
              feeOnPayer: facts.feeOnPayer,
              intent,
              intentNew,
            },
            rules,
          ),
        ];
  return {
    path,
    facts,
    state,
    wanted,
    entries,
    effectiveAt: path.statusSince ?? lastSeen,
    lastSeen,
    changed,
    exceptions,
    factsChanged,
  };
}
