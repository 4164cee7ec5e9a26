/**
 * Facts of an entity that cannot change (docs/architecture.md, "The ledger"): whether a
 * deposit is a test or a crypto deposit, the currency, the amount once the payment completed, and the
 * deposit a refund belongs to. When two readings of one entity disagree on one of them (a provider that
 * reuses ids after losing its memory, a bug), no booking can be right: the entity keeps its last
 * consistent bookings (the plan books nothing more) and FACTS_CHANGED names both versions. Pure, and a
 * function of the whole history (not of arrival order), so the ledger service and verification agree.
 */
import type { HistoryItem } from './effects.ts';
import type { RaisedException } from './exception-rules.ts';
import { formatAmount, type Minor } from './money.ts';
import type { EntityKind } from './statuses.ts';

/**
 * Event id prefix of an operator's reading that accepts the provider's changed facts (a FACTS_CHANGED
 * decision, src/db/decisions.ts): the facts are compared from the last such reading on, so the entity
 * follows the provider's new facts and is booked to match; a later reading that differs again raises
 * FACTS_CHANGED again.
 */
export const FACTS_ACCEPTED_PREFIX = 'operator-facts:';

export const IMMUTABLE_FACTS = ['test', 'crypto', 'currency', 'amount', 'parentDepositId'] as const;
export type ImmutableFact = (typeof IMMUTABLE_FACTS)[number];

export interface FactVersion {
  value: string;
  eventId: string;
  observedAt: string;
  status: string | null;
}

export interface FactChange {
  fact: ImmutableFact;
  before: FactVersion;
  after: FactVersion;
}

/**
 * A fact of one reading as compared (amounts as bigint, so no reading's amount is formatted unless it
 * ends up in a change); null when the reading does not carry it.
 */
function factOf(kind: EntityKind, fact: ImmutableFact, h: HistoryItem): string | Minor | null {
  switch (fact) {
    // A refund's test flag is its deposit's (the ledger takes it from there); cashouts are never test.
    case 'test':
      return kind === 'deposit' ? String(h.test) : null;
    case 'crypto':
      return kind === 'deposit' ? String(h.crypto) : null;
    case 'currency':
      return h.currency;
    case 'amount':
      return h.amount;
    case 'parentDepositId':
      return kind === 'refund' ? h.parentDepositId : null;
  }
}

function versionOf(h: HistoryItem, value: string | Minor): FactVersion {
  return {
    value: typeof value === 'bigint' ? formatAmount(value) : value,
    eventId: h.eventId,
    observedAt: h.observedAt.toISOString(),
    status: h.status,
  };
}

/**
 * The first disagreement of each immutable fact in walk order (`sorted`, as `derivePath` returns it):
 * the first value seen and the first reading that contradicts it. Readings without a status ("not
 * found") carry no facts. The amount counts from the first COMPLETED reading on (before completion the
 * provider may still adjust it; a late payment completes with what was paid). Everything counts from the
 * last operator reading that accepted changed facts (`FACTS_ACCEPTED_PREFIX`) on.
 */
export function changedFacts(kind: EntityKind, sorted: readonly HistoryItem[]): FactChange[] {
  const out: FactChange[] = [];
  // Plain loops: this runs for every entity of every batch (callbacks would be closures made per call).
  let from = 0;
  for (let i = 0; i < sorted.length; i++) if (sorted[i]!.eventId.startsWith(FACTS_ACCEPTED_PREFIX)) from = i;
  let firstCompleted = -1;
  for (let i = from; i < sorted.length; i++) {
    if (sorted[i]!.status === 'COMPLETED') {
      firstCompleted = i;
      break;
    }
  }
  for (const fact of IMMUTABLE_FACTS) {
    // The first reading carrying the fact and its value; versions are built only for a change.
    let first: HistoryItem | null = null;
    let firstValue: string | Minor | null = null;
    for (let i = fact === 'amount' ? Math.max(firstCompleted, from) : from; i < sorted.length; i++) {
      if (fact === 'amount' && firstCompleted < 0) break;
      const h = sorted[i]!;
      if (h.status === null) continue;
      const value = factOf(kind, fact, h);
      if (value === null) continue;
      if (first === null) {
        first = h;
        firstValue = value;
      } else if (value !== firstValue) {
        out.push({ fact, before: versionOf(first, firstValue!), after: versionOf(h, value) });
        break;
      }
    }
  }
  return out;
}

/** The FACTS_CHANGED exception of a set of changes (null when there is none). */
export function factsChangedException(changes: readonly FactChange[]): RaisedException | null {
  if (changes.length === 0) return null;
  return {
    type: 'FACTS_CHANGED',
    details: {
      changes: changes.map((c) => ({ fact: c.fact, before: c.before, after: c.after })),
      summary: changes.map((c) => `${c.fact} ${c.before.value} -> ${c.after.value}`).join('; '),
    },
    fact: changes.map((c) => `${c.fact}:${c.before.value}->${c.after.value}`).join(','),
  };
}
