import { describe, expect, it } from 'vitest';
import { derivePath, type HistoryItem } from './effects.ts';
import {
  alertId,
  alertIdStem,
  EXCEPTION_RULE_TEXT,
  EXCEPTION_TYPES,
  expectedFee,
  type ObservationRuleInput,
  observationExceptions,
  DEFAULT_EXCEPTION_RULES as R,
  shouldAlert,
  stateExceptions,
  stuckDeadline,
} from './exception-rules.ts';
import { NO_FACTS } from './observation.ts';

const t0 = new Date('2026-11-01T00:00:00Z');
const H = 3_600_000;

function item(eventId: string, status: string | null, extra: Partial<HistoryItem> = {}): HistoryItem {
  return {
    eventId,
    status,
    observedAt: t0,
    source: 'poll',
    externalRef: null,
    currency: 'BRL',
    amount: 1000n,
    ...NO_FACTS,
    feeCurrency: 'BRL',
    ...extra,
  };
}

function input(fresh: HistoryItem[], extra: Partial<ObservationRuleInput> = {}): ObservationRuleInput {
  return {
    kind: 'deposit',
    fresh,
    path: derivePath('deposit', fresh),
    providerAmount: fresh[0]?.amount ?? null,
    providerCurrency: fresh[0]?.currency ?? null,
    feeAmount: fresh[0]?.feeAmount ?? null,
    feeOnPayer: false,
    intent: { intentId: 'i1', currency: 'BRL', amount: 1000n, expectedFee: null },
    intentNew: false,
    ...extra,
  };
}

const types = (xs: { type: string }[]) => xs.map((x) => x.type);

describe('immediate exception rules', () => {
  it.each([
    ['amounts agree', [item('a', 'COMPLETED')], []],
    ['provider amount differs from intent', [item('a', 'COMPLETED', { amount: 999n })], ['AMOUNT_MISMATCH']],
    ['provider currency differs', [item('a', 'COMPLETED', { currency: 'USD' })], ['CURRENCY_MISMATCH']],
    [
      'status reason THIRD_PARTY_PAYER',
      [item('a', 'CANCELLED', { statusReason: 'THIRD_PARTY_PAYER' })],
      ['THIRD_PARTY_PAYER'],
    ],
    [
      'status reason AMOUNT_MISMATCH',
      [item('a', 'CANCELLED', { statusReason: 'AMOUNT_MISMATCH' })],
      ['PROVIDER_AMOUNT_MISMATCH'],
    ],
    [
      'status reason AMOUNT_MISMATCH while intent and provider amounts differ too',
      [item('a', 'CANCELLED', { statusReason: 'AMOUNT_MISMATCH', amount: 999n })],
      ['AMOUNT_MISMATCH', 'PROVIDER_AMOUNT_MISMATCH'],
    ],
    [
      'late completion of an expired deposit',
      [item('a', 'EXPIRED'), item('b', 'COMPLETED', { observedAt: new Date(t0.getTime() + H) })],
      ['LATE_COMPLETION'],
    ],
    [
      'late completion of a cancelled deposit',
      [item('a', 'CANCELLED'), item('b', 'COMPLETED', { observedAt: new Date(t0.getTime() + H) })],
      ['LATE_COMPLETION'],
    ],
    [
      'an ordinary completion',
      [item('a', 'PENDING'), item('b', 'COMPLETED', { observedAt: new Date(t0.getTime() + H) })],
      [],
    ],
    ['payer UNMATCH', [item('a', 'PENDING', { payerVerification: 'UNMATCH' })], ['PAYER_UNMATCH']],
    ['not found at the provider', [item('a', null)], ['MISSING_AT_PROVIDER']],
    [
      'illegal move',
      [item('a', 'COMPLETED'), item('b', 'PENDING', { observedAt: new Date(t0.getTime() + 1) })],
      ['ILLEGAL_TRANSITION'],
    ],
  ] as const)('%s', (_name, fresh, expected) => {
    expect(types(observationExceptions(input([...fresh]), R))).toEqual(expected);
  });

  it('checks the fee against the intent, then the schedule', () => {
    const fresh = [item('a', 'COMPLETED', { feeAmount: 31n })];
    const withIntent = input(fresh, {
      intent: { intentId: 'i', currency: 'BRL', amount: 1000n, expectedFee: 30n },
    });
    expect(types(observationExceptions(withIntent, R))).toEqual(['FEE_MISMATCH']);
    const rules = { ...R, feeSchedule: [{ currency: 'BRL', percentBps: 250, fixed: 6n }] };
    expect(expectedFee(rules, 'BRL', 1000n)).toBe(31n);
    expect(types(observationExceptions(input(fresh), rules))).toEqual([]);
    expect(
      types(observationExceptions(input(fresh, { feeOnPayer: true }), { ...rules, feeSchedule: [] })),
    ).toEqual([]);
  });

  it('raises LATE_REJECTION and EARLY_RELEASE_REVERSED once, when crossed', () => {
    const base = { everEarlyReleased: false, test: false, crypto: false } as const;
    const completed = {
      ...base,
      kind: 'cashout' as const,
      status: 'COMPLETED' as const,
      everCompleted: true,
    };
    const rejected = { ...completed, status: 'REJECTED' as const };
    expect(types(stateExceptions(completed, rejected))).toEqual(['LATE_REJECTION']);
    expect(types(stateExceptions(rejected, rejected))).toEqual([]);
    const dep = { ...base, kind: 'deposit' as const, everCompleted: false, everEarlyReleased: true };
    expect(
      types(stateExceptions({ ...dep, status: 'EARLY_RELEASED' }, { ...dep, status: 'CANCELLED' })),
    ).toEqual(['EARLY_RELEASE_REVERSED']);
    expect(alertId('LATE_REJECTION', 'cashout', 'm', '1', 3)).toBe('LATE_REJECTION:cashout:m:1');
    expect(alertId('STUCK', 'cashout', 'm', '1', 3)).toBe('STUCK:cashout:m:1:3');
    expect(alertIdStem('LATE_REJECTION', 'cashout', 'm', '1')).toEqual({
      stem: 'LATE_REJECTION:cashout:m:1',
      counted: false,
    });
    expect(alertIdStem('STUCK', 'cashout', 'm', '1')).toEqual({ stem: 'STUCK:cashout:m:1', counted: true });
    expect(shouldAlert('LATE_REJECTION', R)).toBe(true);
    expect(shouldAlert('MISSED_NOTIFICATION', R)).toBe(false);
  });
});

describe('exception facts', () => {
  it('never says two amounts differ when they agree, whatever the status reason', () => {
    const out = observationExceptions(
      input([item('a', 'CANCELLED', { statusReason: 'AMOUNT_MISMATCH', amount: 157954n })], {
        intent: { intentId: 'i', currency: 'BRL', amount: 157954n, expectedFee: null },
      }),
      R,
    );
    expect(types(out)).toEqual(['PROVIDER_AMOUNT_MISMATCH']);
    expect(EXCEPTION_RULE_TEXT.PROVIDER_AMOUNT_MISMATCH).not.toMatch(/intent/);
  });

  it('names the same illegal move with the same fact whatever the event ids, and another move with another', () => {
    const at = (ms: number) => new Date(t0.getTime() + ms);
    const fact = (events: HistoryItem[]) =>
      observationExceptions(input(events), R).find((e) => e.type === 'ILLEGAL_TRANSITION')?.fact;
    const a = fact([item('a', 'COMPLETED'), item('b', 'PENDING', { observedAt: at(1) })]);
    const b = fact([item('x', 'COMPLETED'), item('y', 'PENDING', { observedAt: at(5) })]);
    const c = fact([item('x', 'COMPLETED'), item('y', 'CANCELLED', { observedAt: at(5) })]);
    expect(a).toBe('COMPLETED->PENDING');
    expect(b).toBe(a);
    expect(c).not.toBe(a);
  });

  it('has one rule sentence and a severity per type; LATE_COMPLETION severity is configuration', () => {
    for (const t of EXCEPTION_TYPES) {
      expect(EXCEPTION_RULE_TEXT[t]).toMatch(/^[A-Z].*\.$/);
      expect(R.severity[t]).toBeDefined();
    }
    expect(R.severity.FACTS_CHANGED).toBe('critical');
  });
});

describe('stuck deadlines', () => {
  it.each([
    ['cashout', 'ON_HOLD', null, 72 * H],
    ['cashout', 'DELIVERED', null, 72 * H],
    ['cashout', 'COMPLETED', null, null],
    ['refund', 'INCORRECT_DETAILS', null, 7 * 24 * H],
    ['refund', 'CANCELLED', null, null],
    ['deposit', 'PENDING', new Date(t0.getTime() + 12 * H), 13 * H],
    ['deposit', 'PENDING', null, 48 * H],
    ['deposit', 'COMPLETED', null, null],
  ] as const)('%s %s', (kind, status, expiresAt, offset) => {
    const d = stuckDeadline({ kind, status, statusSince: t0, expiresAt }, R);
    expect(d === null ? null : d.getTime() - t0.getTime()).toBe(offset);
  });
});
