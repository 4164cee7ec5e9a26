import { describe, expect, it } from 'vitest';
import {
  CASHOUT_STATUS_CODES,
  canReach,
  cashoutStatusCode,
  cashoutStatusFromCode,
  type EntityKind,
  isDirectTransition,
  isFinal,
  parseStatus,
  STATUSES,
  TRANSITIONS,
  transition,
} from './statuses.ts';

// The rows of the spec's section 3 (and docs/provider.md), one allowed and one refused move each.
const MOVES: [kind: EntityKind, from: string, allowed: string, refused: string][] = [
  ['deposit', 'PENDING_AUTHENTICATION', 'COMPLETED', 'APPROVED'],
  ['deposit', 'APPROVED', 'COMPLETED', 'PENDING'],
  ['deposit', 'PENDING', 'EXPIRED', 'CREATED'],
  ['deposit', 'EXPIRED', 'CANCELLED', 'PENDING'],
  ['deposit', 'EXPIRED', 'COMPLETED', 'DECLINED'],
  ['deposit', 'CANCELLED', 'COMPLETED', 'EXPIRED'],
  ['deposit', 'EARLY_RELEASED', 'CANCELLED', 'PENDING'],
  ['cashout', 'PENDING', 'ON_HOLD', 'COMPLETED'],
  ['cashout', 'ON_HOLD', 'PENDING', 'DELIVERED'],
  ['cashout', 'ON_HOLD', 'CANCELLED', 'REJECTED'],
  ['cashout', 'PENDING', 'DELIVERED', 'REJECTED'],
  ['cashout', 'DELIVERED', 'COMPLETED', 'CANCELLED'],
  ['cashout', 'DELIVERED', 'REJECTED', 'ON_HOLD'],
  ['cashout', 'COMPLETED', 'REJECTED', 'PENDING'],
  ['refund', 'PENDING', 'INCORRECT_DETAILS', 'COMPLETED'],
  ['refund', 'INCORRECT_DETAILS', 'PENDING', 'DELIVERED'],
  ['refund', 'INCORRECT_DETAILS', 'CANCELLED', 'COMPLETED'],
  ['refund', 'DELIVERED', 'COMPLETED', 'CANCELLED'],
  ['refund', 'COMPLETED', 'REJECTED', 'DELIVERED'],
];

describe('transition tables (section 3)', () => {
  it.each(MOVES)('%s %s: allows %s, refuses %s', (kind, from, allowed, refused) => {
    expect(isDirectTransition(kind, from as never, allowed as never)).toBe(true);
    expect(transition(kind, from as never, allowed as never)).toBe(allowed);
    expect(isDirectTransition(kind, from as never, refused as never)).toBe(false);
    expect(() => transition(kind, from as never, refused as never)).toThrowError(
      /is not a transition of the spec/,
    );
  });

  it.each([
    ['deposit', 'COMPLETED'],
    ['deposit', 'DECLINED'],
    ['cashout', 'DECLINED'],
    ['cashout', 'CANCELLED'],
    ['refund', 'DECLINED'],
    ['refund', 'REJECTED'],
  ] as const)('%s %s has no way out', (kind, status) => {
    expect(TRANSITIONS[kind][status as never]).toEqual([]);
    expect(isFinal(kind, status as never)).toBe(true);
  });

  it('lets polling skip unobserved statuses but never go backwards', () => {
    expect(canReach('cashout', 'PENDING', 'COMPLETED')).toBe(true);
    expect(canReach('refund', 'PENDING', 'REJECTED')).toBe(true);
    expect(canReach('deposit', 'COMPLETED', 'PENDING')).toBe(false);
    expect(canReach('cashout', 'REJECTED', 'COMPLETED')).toBe(false);
  });

  it("follows the provider's documented late moves: a late completion of an expired or cancelled deposit", () => {
    expect(canReach('deposit', 'EXPIRED', 'COMPLETED')).toBe(true);
    expect(canReach('deposit', 'CANCELLED', 'COMPLETED')).toBe(true);
    expect(canReach('deposit', 'EARLY_RELEASED', 'COMPLETED')).toBe(true);
    // but nothing leaves DECLINED, and nothing goes back from COMPLETED
    expect(canReach('deposit', 'DECLINED', 'COMPLETED')).toBe(false);
    expect(canReach('deposit', 'COMPLETED', 'CANCELLED')).toBe(false);
    expect(canReach('deposit', 'CANCELLED', 'EXPIRED')).toBe(false);
  });

  it('every table names only statuses of its own set', () => {
    for (const kind of ['deposit', 'cashout', 'refund'] as const) {
      const set = new Set<string>(STATUSES[kind]);
      for (const [from, tos] of Object.entries(TRANSITIONS[kind])) {
        expect(set.has(from)).toBe(true);
        for (const to of tos as readonly string[]) expect(set.has(to), `${kind} ${from} -> ${to}`).toBe(true);
      }
    }
  });

  it('parses statuses and refuses unknown ones', () => {
    expect(parseStatus('refund', 'INCORRECT_DETAILS')).toBe('INCORRECT_DETAILS');
    expect(() => parseStatus('deposit', 'PAID')).toThrowError(/unknown deposit status "PAID"/);
  });
});

describe('numeric cashout codes', () => {
  it.each([
    [0, 'PENDING'],
    [1, 'COMPLETED'],
    [2, 'CANCELLED'],
    [3, 'REJECTED'],
    [4, 'DELIVERED'],
    [5, 'ON_HOLD'],
  ] as const)('%i is %s and back', (code, status) => {
    expect(cashoutStatusFromCode(code)).toBe(status);
    expect(cashoutStatusCode(status)).toBe(code);
  });

  it('refuses an unknown code and never stores DECLINED', () => {
    expect(() => cashoutStatusFromCode(6)).toThrowError(/unknown numeric code 6/);
    expect(Object.keys(CASHOUT_STATUS_CODES)).not.toContain('DECLINED');
  });
});
