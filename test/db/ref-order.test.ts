import { describe, expect, it } from 'vitest';
import { compareRefs, type EntityRef, refKey } from '../../src/db/ledger/keys.ts';
import type { EntityKind } from '../../src/domain/statuses.ts';

describe('entity keys', () => {
  it('sort as compareRefs sorts their refs (reconcile orders a batch by key)', () => {
    // Accounts and ids that are prefixes of one another, or differ only after a separator-like character.
    const accounts = ['a', 'ab', 'a b', 'a-', 'B', 'acme', 'acme2', 'é'];
    const ids = ['1', '10', '2', '1 ', '1a', 'x\u0001', 'x', 'Z'];
    const kinds: EntityKind[] = ['refund', 'deposit', 'cashout'];
    const refs: EntityRef[] = [];
    for (const account of accounts)
      for (const kind of kinds) for (const entityId of ids) refs.push({ account, kind, entityId });
    // A fixed shuffle, so both sorts start from the same disorder.
    const shuffled = refs.map((r, i) => ({ r, o: (i * 7919) % refs.length })).sort((a, b) => a.o - b.o);
    const byRefs = shuffled
      .map((x) => x.r)
      .sort(compareRefs)
      .map(refKey);
    const byKeys = shuffled.map((x) => refKey(x.r)).sort();
    expect(byKeys).toEqual(byRefs);
    expect(byKeys[0]).toBe(refKey({ account: 'B', kind: 'cashout', entityId: '1' }));
  });
});
