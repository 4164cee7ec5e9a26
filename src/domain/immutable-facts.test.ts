import { describe, expect, it } from 'vitest';
import { derivePath, type HistoryItem } from './effects.ts';
import { changedFacts, factsChangedException } from './immutable-facts.ts';
import { NO_FACTS } from './observation.ts';
import type { EntityKind } from './statuses.ts';

const t0 = Date.UTC(2026, 10, 1);

function item(n: number, status: string | null, extra: Partial<HistoryItem> = {}): HistoryItem {
  return {
    eventId: `e${n}`,
    status,
    observedAt: new Date(t0 + n * 60_000),
    source: 'poll',
    externalRef: 'inv-1',
    currency: 'BRL',
    amount: 1000n,
    ...NO_FACTS,
    feeCurrency: 'BRL',
    ...extra,
  };
}

const changes = (kind: EntityKind, history: HistoryItem[]) =>
  changedFacts(kind, derivePath(kind, history).sorted).map(
    (c) => `${c.fact}:${c.before.value}->${c.after.value}`,
  );

describe('facts that cannot change', () => {
  it.each([
    ['deposit', [item(1, 'PENDING'), item(2, 'COMPLETED')], []],
    ['deposit', [item(1, 'PENDING'), item(2, 'COMPLETED', { test: true })], ['test:false->true']],
    ['deposit', [item(1, 'PENDING', { crypto: true }), item(2, 'PENDING')], ['crypto:true->false']],
    ['deposit', [item(1, 'PENDING'), item(2, 'PENDING', { currency: 'USD' })], ['currency:BRL->USD']],
    // Before completion the amount may change (the provider adjusts it); once completed it may not.
    ['deposit', [item(1, 'PENDING', { amount: 900n }), item(2, 'COMPLETED')], []],
    ['deposit', [item(1, 'COMPLETED'), item(2, 'COMPLETED', { amount: 2000n })], ['amount:10.00->20.00']],
    ['cashout', [item(1, 'COMPLETED'), item(2, 'REJECTED', { amount: 999n })], ['amount:10.00->9.99']],
    // Readings without an amount or currency say nothing about them.
    ['deposit', [item(1, 'COMPLETED'), item(2, 'COMPLETED', { amount: null, currency: null })], []],
    ['deposit', [item(1, null, { currency: 'USD', test: true }), item(2, 'PENDING')], []],
    [
      'refund',
      [item(1, 'PENDING', { parentDepositId: 'd1' }), item(2, 'COMPLETED', { parentDepositId: 'd2' })],
      ['parentDepositId:d1->d2'],
    ],
    // A refund's test flag is its deposit's, not the reading's.
    ['refund', [item(1, 'PENDING'), item(2, 'COMPLETED', { test: true })], []],
  ] as const)('%s %#', (kind, history, expected) => {
    expect(changes(kind, [...history])).toEqual(expected);
  });

  it('does not depend on arrival order', () => {
    const h = [
      item(1, 'PENDING'),
      item(2, 'COMPLETED', { currency: 'USD' }),
      item(3, 'COMPLETED', { test: true }),
    ];
    expect(changes('deposit', h)).toEqual(changes('deposit', [...h].reverse()));
    expect(changes('deposit', h)).toEqual(['test:false->true', 'currency:BRL->USD']);
  });

  it('raises FACTS_CHANGED with both versions', () => {
    const c = changedFacts('deposit', [item(1, 'COMPLETED'), item(2, 'COMPLETED', { test: true })]);
    const ex = factsChangedException(c)!;
    expect(ex.type).toBe('FACTS_CHANGED');
    expect(ex.fact).toBe('test:false->true');
    expect(ex.details).toMatchObject({
      changes: [
        { fact: 'test', before: { value: 'false', eventId: 'e1' }, after: { value: 'true', eventId: 'e2' } },
      ],
    });
    expect(factsChangedException([])).toBeNull();
  });
});
