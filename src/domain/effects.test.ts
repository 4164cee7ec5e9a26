import { describe, expect, it } from 'vitest';
import { historyItem } from '../../test/helpers/history.ts';
import {
  type AppliedEntry,
  derivePath,
  type EffectState,
  effectPostings,
  entityFacts,
  isLateRejection,
  netPostings,
  planEntries,
  wantedEffectNames,
  wantedEffects,
} from './effects.ts';
import type { AnyStatus, EntityKind } from './statuses.ts';

function state(kind: EntityKind, status: AnyStatus | null, extra: Partial<EffectState> = {}): EffectState {
  return {
    kind,
    status,
    everCompleted: false,
    everEarlyReleased: false,
    test: false,
    crypto: false,
    ...extra,
  };
}

const item = historyItem;

// One row per line of docs/architecture.md's effect table.
const TABLE: Array<[string, EffectState, string[]]> = [
  ['deposit (live) COMPLETED', state('deposit', 'COMPLETED', { everCompleted: true }), ['credit', 'fee']],
  [
    'deposit (live) EARLY_RELEASED',
    state('deposit', 'EARLY_RELEASED', { everEarlyReleased: true }),
    ['credit', 'fee'],
  ],
  [
    'deposit (live) EARLY_RELEASED then CANCELLED',
    state('deposit', 'CANCELLED', { everEarlyReleased: true }),
    ['credit', 'fee', 'early_release_reversal'],
  ],
  [
    'deposit (live) EARLY_RELEASED then DECLINED',
    state('deposit', 'DECLINED', { everEarlyReleased: true }),
    ['credit', 'fee', 'early_release_reversal'],
  ],
  [
    'deposit (live) EARLY_RELEASED then EXPIRED',
    state('deposit', 'EXPIRED', { everEarlyReleased: true }),
    ['credit', 'fee', 'early_release_reversal'],
  ],
  ['deposit (live) CANCELLED without early release', state('deposit', 'CANCELLED'), []],
  ['deposit (live) PENDING', state('deposit', 'PENDING'), []],
  [
    'deposit (test) COMPLETED',
    state('deposit', 'COMPLETED', { test: true, everCompleted: true }),
    ['credit', 'fee'],
  ],
  ['deposit (crypto) APPROVED', state('deposit', 'APPROVED', { crypto: true }), ['crypto_approved']],
  [
    'deposit (crypto) COMPLETED',
    state('deposit', 'COMPLETED', { crypto: true, everCompleted: true }),
    ['crypto_approved', 'crypto_delivered'],
  ],
  ['cashout PENDING', state('cashout', 'PENDING'), ['reserve']],
  ['cashout ON_HOLD', state('cashout', 'ON_HOLD'), ['reserve']],
  ['cashout DELIVERED', state('cashout', 'DELIVERED'), ['reserve']],
  ['cashout CANCELLED', state('cashout', 'CANCELLED'), ['reserve', 'release']],
  ['cashout REJECTED never completed', state('cashout', 'REJECTED'), ['reserve', 'release']],
  ['cashout COMPLETED', state('cashout', 'COMPLETED', { everCompleted: true }), ['reserve', 'settle']],
  [
    'cashout REJECTED after COMPLETED',
    state('cashout', 'REJECTED', { everCompleted: true }),
    ['reserve', 'settle', 'late_reversal'],
  ],
  ['cashout DECLINED', state('cashout', 'DECLINED'), []],
  ['refund PENDING', state('refund', 'PENDING'), ['reserve']],
  ['refund INCORRECT_DETAILS', state('refund', 'INCORRECT_DETAILS'), ['reserve']],
  ['refund DELIVERED', state('refund', 'DELIVERED'), ['reserve']],
  ['refund CANCELLED', state('refund', 'CANCELLED'), ['reserve', 'release']],
  ['refund REJECTED never completed', state('refund', 'REJECTED'), ['reserve', 'release']],
  ['refund COMPLETED', state('refund', 'COMPLETED', { everCompleted: true }), ['reserve', 'settle']],
  [
    'refund REJECTED after COMPLETED',
    state('refund', 'REJECTED', { everCompleted: true }),
    ['reserve', 'settle', 'late_reversal'],
  ],
  ['refund DECLINED', state('refund', 'DECLINED'), []],
];

describe('effect table', () => {
  it.each(TABLE)('%s', (_name, s, expected) => {
    expect(wantedEffectNames(s)).toEqual(expected);
  });
});

describe('postings', () => {
  const base = { book: 'live' as const, currency: 'BRL', amount: 1000n, feeCurrency: null, feeAmount: null };
  it('every effect balances per currency', () => {
    for (const kind of ['deposit', 'cashout', 'refund'] as const) {
      for (const effect of [
        'credit',
        'fee',
        'early_release_reversal',
        'crypto_approved',
        'crypto_delivered',
        'reserve',
        'release',
        'settle',
        'late_reversal',
      ] as const) {
        const lines = effectPostings(kind, effect, { ...base, feeAmount: 30n, feeCurrency: 'USD' });
        const sums = new Map<string, bigint>();
        for (const l of lines) sums.set(l.currency, (sums.get(l.currency) ?? 0n) + l.amount);
        for (const v of sums.values()) expect(v).toBe(0n);
      }
    }
  });

  it('early release reversal is the mirror image of credit and fee', () => {
    const s = state('deposit', 'CANCELLED', { everEarlyReleased: true });
    const { effects } = wantedEffects(s, {
      currency: 'BRL',
      amount: 1000n,
      feeAmount: 30n,
      feeCurrency: 'BRL',
      feeOnPayer: false,
    });
    expect(netPostings('deposit', effects)).toEqual([]);
  });

  it('a test deposit touches only the test book; a crypto one never touches available', () => {
    const amounts = { currency: 'BRL', amount: 1000n, feeAmount: 30n, feeCurrency: 'BRL', feeOnPayer: false };
    const test = wantedEffects(state('deposit', 'COMPLETED', { test: true, everCompleted: true }), amounts);
    expect(netPostings('deposit', test.effects)).toEqual([
      { account: 'test_available', currency: 'BRL', amount: 970n },
      { account: 'test_deposits', currency: 'BRL', amount: -1000n },
      { account: 'test_fees', currency: 'BRL', amount: 30n },
    ]);
    const crypto = wantedEffects(
      state('deposit', 'COMPLETED', { crypto: true, everCompleted: true }),
      amounts,
    );
    expect(netPostings('deposit', crypto.effects)).toEqual([
      { account: 'crypto_payers', currency: 'BRL', amount: -1000n },
      { account: 'crypto_customer_wallets', currency: 'BRL', amount: 1000n },
    ]);
  });

  it('a refund of a test deposit stays in the test book through reserve, settle and late reversal', () => {
    const amounts = { currency: 'BRL', amount: 500n, feeAmount: null, feeCurrency: null, feeOnPayer: false };
    const at = (status: 'PENDING' | 'COMPLETED' | 'REJECTED' | 'CANCELLED', everCompleted: boolean) =>
      wantedEffects(state('refund', status, { test: true, everCompleted }), amounts).effects;
    expect(at('PENDING', false).map((e) => e.book)).toEqual(['test']);
    expect(netPostings('refund', at('PENDING', false))).toEqual([
      { account: 'test_reserved', currency: 'BRL', amount: 500n },
      { account: 'test_available', currency: 'BRL', amount: -500n },
    ]);
    expect(netPostings('refund', at('COMPLETED', true))).toEqual([
      { account: 'test_available', currency: 'BRL', amount: -500n },
      { account: 'test_refunds', currency: 'BRL', amount: 500n },
    ]);
    expect(netPostings('refund', at('REJECTED', true))).toEqual([]);
    expect(netPostings('refund', at('CANCELLED', false))).toEqual([]);
    // A live refund and a cashout (never test) keep the live accounts.
    expect(netPostings('refund', wantedEffects(state('refund', 'PENDING'), amounts).effects)).toEqual([
      { account: 'reserved', currency: 'BRL', amount: 500n },
      { account: 'available', currency: 'BRL', amount: -500n },
    ]);
    expect(wantedEffects(state('cashout', 'PENDING', { test: true }), amounts).effects[0]!.book).toBe('live');
  });

  it('fee on payer debits no fee; an unknown amount waits', () => {
    const s = state('deposit', 'COMPLETED', { everCompleted: true });
    const r = wantedEffects(s, {
      currency: 'BRL',
      amount: 1000n,
      feeAmount: 30n,
      feeCurrency: 'BRL',
      feeOnPayer: true,
    });
    expect(r.effects.map((e) => e.effect)).toEqual(['credit']);
    const c = wantedEffects(state('cashout', 'PENDING'), {
      currency: null,
      amount: null,
      feeAmount: null,
      feeCurrency: null,
      feeOnPayer: false,
    });
    expect(c).toEqual({ effects: [], waiting: ['reserve'] });
  });
});

describe('status path', () => {
  it('sorts by observed_at and flags what is not reachable', () => {
    const p = derivePath('deposit', [
      item('b', 'PENDING', 3),
      item('a', 'COMPLETED', 2),
      item('c', 'CREATED', 1),
    ]);
    expect(p.status).toBe('COMPLETED');
    expect([...p.illegal]).toEqual(['b']);
    expect(p.fromStatus.get('a')).toBe('CREATED');
  });

  it('applies the legal COMPLETED to REJECTED move of cashouts', () => {
    const p = derivePath('cashout', [
      item('x', 'REJECTED', 5),
      item('y', 'COMPLETED', 4),
      item('z', 'PENDING', 1),
    ]);
    expect(p.status).toBe('REJECTED');
    expect(p.everCompleted).toBe(true);
    expect(isLateRejection({ ...state('cashout', p.status), everCompleted: p.everCompleted })).toBe(true);
  });

  it('nothing leaves DECLINED', () => {
    const p = derivePath('cashout', [item('a', 'DECLINED', 1), item('b', 'PENDING', 2)]);
    expect(p.status).toBe('DECLINED');
    expect([...p.illegal]).toEqual(['b']);
  });

  it('breaks observed_at ties by lifecycle order, whatever the input order', () => {
    const a = derivePath('refund', [item('z', 'COMPLETED', 1), item('a', 'PENDING', 1)]);
    const b = derivePath('refund', [item('a', 'PENDING', 1), item('z', 'COMPLETED', 1)]);
    expect(a.status).toBe('COMPLETED');
    expect(b.status).toBe('COMPLETED');
    expect(a.illegal.size).toBe(0);
  });

  it('cashouts take the amount from the intent, deposits from the provider', () => {
    const intent = { currency: 'USD', amount: 500n, feeOnPayer: false, test: false, crypto: false };
    const hist = [item('a', 'PENDING', 1, { amount: null, currency: null })];
    expect(entityFacts('cashout', hist, intent)).toMatchObject({ amount: 500n, currency: 'USD' });
    const dep = [item('a', 'COMPLETED', 1, { amount: 700n, currency: 'BRL' })];
    expect(entityFacts('deposit', dep, intent)).toMatchObject({
      amount: 700n,
      currency: 'BRL',
      providerAmount: 700n,
    });
  });
});

describe('wanted minus applied', () => {
  const p = { book: 'live' as const, currency: 'BRL', amount: 1000n, feeCurrency: null, feeAmount: null };
  const applied = (
    effect: AppliedEntry['effect'],
    direction: 1 | -1,
    seq: number,
    amount = 1000n,
  ): AppliedEntry => ({
    ...p,
    amount,
    effect,
    direction,
    seq,
  });

  it('posts only what is missing, with the documented keys', () => {
    const plan = planEntries(
      'cashout',
      'm1',
      '42',
      [
        { ...p, effect: 'reserve' },
        { ...p, effect: 'release' },
      ],
      [],
      [applied('reserve', 1, 1)],
    );
    expect(plan.map((e) => e.idempotencyKey)).toEqual(['cashout:m1:42:release']);
  });

  it('reverses an effect no longer wanted and re-applies one wanted again', () => {
    const plan = planEntries(
      'cashout',
      'm1',
      '42',
      [
        { ...p, effect: 'reserve' },
        { ...p, effect: 'settle' },
        { ...p, effect: 'release' },
      ],
      [],
      [
        applied('reserve', 1, 1),
        applied('release', 1, 1),
        applied('release', -1, 1),
        applied('settle', 1, 1),
      ],
    );
    expect(plan.map((e) => e.idempotencyKey)).toEqual(['cashout:m1:42:release:2']);
    const rev = planEntries(
      'cashout',
      'm1',
      '42',
      [{ ...p, effect: 'reserve' }],
      [],
      [applied('reserve', 1, 1), applied('release', 1, 1)],
    );
    expect(rev.map((e) => [e.idempotencyKey, e.direction])).toEqual([
      ['cashout:m1:42:release:reversal:1', -1],
    ]);
    expect(rev[0]!.postings).toEqual([
      { account: 'available', currency: 'BRL', amount: -1000n },
      { account: 'reserved', currency: 'BRL', amount: 1000n },
    ]);
  });

  it('re-books an effect whose amount changed, and leaves waiting effects alone', () => {
    const plan = planEntries(
      'deposit',
      'm1',
      '7',
      [{ ...p, effect: 'credit', amount: 1200n }],
      [],
      [applied('credit', 1, 1)],
    );
    expect(plan.map((e) => e.idempotencyKey)).toEqual([
      'deposit:m1:7:credit:reversal:1',
      'deposit:m1:7:credit:2',
    ]);
    expect(planEntries('cashout', 'm1', '9', [], ['reserve'], [applied('reserve', 1, 1)])).toEqual([]);
  });
});
