import { describe, expect, it } from 'vitest';
import { historyItem } from '../../test/helpers/history.ts';
import type { AppliedEntry } from './effects.ts';
import { DEFAULT_EXCEPTION_RULES } from './exception-rules.ts';
import { type PlanInput, planEntity } from './plan.ts';

const item = historyItem;

function input(extra: Partial<PlanInput> & Pick<PlanInput, 'kind' | 'history'>): PlanInput {
  return {
    account: 'acct',
    entityId: 'e1',
    intent: null,
    applied: [],
    rules: DEFAULT_EXCEPTION_RULES,
    ...extra,
  };
}

const applied = (effect: AppliedEntry['effect'], amount: bigint, seq = 1): AppliedEntry => ({
  effect,
  direction: 1,
  seq,
  book: 'live',
  currency: 'BRL',
  amount,
  feeCurrency: null,
  feeAmount: null,
});

describe('planEntity', () => {
  it('books what a completed deposit wants and nothing on a recomputation', () => {
    const history = [item('a', 'PENDING', 1), item('b', 'COMPLETED', 2)];
    const first = planEntity(input({ kind: 'deposit', history, fresh: history }));
    expect(first.entries.map((e) => [e.effect, e.direction, e.amount])).toEqual([['credit', 1, 1000n]]);
    expect(first.effectiveAt).toEqual(new Date(2000));
    expect(first.changed).toBe(true);
    const again = planEntity(input({ kind: 'deposit', history, applied: [applied('credit', 1000n)] }));
    expect(again.entries).toEqual([]);
    expect(again.changed).toBe(false);
    expect(again.exceptions).toEqual([]);
  });

  it('a cashout rejected after completing books the late reversal and raises LATE_REJECTION once', () => {
    const history = [item('a', 'PENDING', 1), item('b', 'COMPLETED', 2), item('c', 'REJECTED', 3)];
    const before = {
      kind: 'cashout' as const,
      status: 'COMPLETED' as const,
      everCompleted: true,
      everEarlyReleased: false,
      test: false,
      crypto: false,
    };
    const plan = planEntity(
      input({
        kind: 'cashout',
        history,
        fresh: [history[2]!],
        applied: [applied('reserve', 1000n), applied('settle', 1000n)],
        before,
      }),
    );
    expect(plan.entries.map((e) => e.effect)).toEqual(['late_reversal']);
    expect(plan.exceptions.map((e) => e.type)).toEqual(['LATE_REJECTION']);
    const replay = planEntity(
      input({
        kind: 'cashout',
        history,
        fresh: [item('d', 'REJECTED', 4)],
        applied: [applied('reserve', 1000n), applied('settle', 1000n), applied('late_reversal', 1000n)],
        before: { ...before, status: 'REJECTED' },
      }),
    );
    expect(replay.exceptions.map((e) => e.type)).not.toContain('LATE_REJECTION');
  });

  it('a refund takes the book of its deposit', () => {
    const history = [item('a', 'PENDING', 1)];
    const live = planEntity(input({ kind: 'refund', history, fresh: history }));
    const test = planEntity(input({ kind: 'refund', history, fresh: history, refundOfTestDeposit: true }));
    expect(live.entries[0]?.book).toBe('live');
    expect(test.entries[0]?.book).toBe('test');
  });

  it('a cashout waits for its amount until the intent arrives', () => {
    const history = [item('a', 'PENDING', 1, { amount: null, currency: null })];
    const waiting = planEntity(input({ kind: 'cashout', history, fresh: history }));
    expect(waiting.wanted.waiting).toEqual(['reserve']);
    expect(waiting.entries).toEqual([]);
    const intent = {
      intentId: 'i1',
      currency: 'BRL',
      amount: 500n,
      expectedFee: null,
      feeOnPayer: false,
      test: false,
      crypto: false,
    };
    const linked = planEntity(input({ kind: 'cashout', history, intent, intentNew: true }));
    expect(linked.entries.map((e) => [e.effect, e.amount])).toEqual([['reserve', 500n]]);
  });
});
