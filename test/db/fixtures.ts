import type { Minor } from '../../src/domain/money.ts';
import { type Intent, NO_FACTS, type Observation } from '../../src/domain/observation.ts';
import type { EntityKind } from '../../src/domain/statuses.ts';

let counter = 0;

export function obs(
  kind: EntityKind,
  entityId: string,
  status: string | null,
  at: number,
  extra: Partial<Observation> = {},
): Observation {
  counter += 1;
  return {
    eventId: `ev-${kind}-${entityId}-${status}-${at}-${counter}`,
    kind,
    account: 'acme',
    entityId,
    externalRef: kind === 'refund' ? null : `ref-${entityId}`,
    status,
    observedAt: new Date(Date.UTC(2026, 10, 1) + at * 60_000),
    source: 'poll',
    currency: kind === 'cashout' ? null : 'BRL',
    amount: kind === 'cashout' ? null : 10_000n,
    ...NO_FACTS,
    details: {},
    ...extra,
  };
}

export function intent(
  kind: EntityKind,
  entityId: string,
  amount: Minor,
  extra: Partial<Intent> = {},
): Intent {
  return {
    intentId: `in-${kind}-${entityId}`,
    operation: kind,
    account: 'acme',
    externalRef: `ref-${entityId}`,
    entityId,
    currency: 'BRL',
    amount,
    expectedFee: null,
    test: false,
    crypto: false,
    feeOnPayer: false,
    parentDepositId: null,
    outcome: 'created',
    createdAt: new Date(Date.UTC(2026, 10, 1)),
    request: {},
    response: null,
    ...extra,
  };
}
