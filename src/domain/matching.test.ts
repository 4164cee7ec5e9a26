import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  checkMatchRules,
  DEFAULT_MATCH_RULES,
  type MatchItem,
  type MatchRule,
  matchItems,
  withinTolerance,
} from './matching.ts';

const bank = (
  identity: string,
  amount: bigint,
  date: string,
  e2e: string[] = [],
  group = 'm:EUR',
): MatchItem => ({
  identity,
  group,
  amount,
  date,
  keys: { endToEndId: e2e, reference: [], remittance: [] },
});
const settlement = (
  id: string,
  net: bigint,
  date: string,
  ref: string | null = null,
  group = 'm:EUR',
): MatchItem => ({
  identity: `s-${id}`,
  group,
  amount: net,
  date,
  keys: { bankReference: ref === null ? [] : [ref], settlementId: [id] },
});

const rule = (r: Partial<MatchRule> & Pick<MatchRule, 'name' | 'cardinality'>): MatchRule => ({
  pair: 'bank-settlement',
  keys: [],
  tolerance: { absoluteMinor: 0n, percentBps: 0 },
  windowDays: 3,
  maxCandidates: 12,
  maxGroup: 4,
  ...r,
});

describe('matchItems', () => {
  it('matches a credit by its end-to-end id, a bank fee within the tolerance, a day late', () => {
    const result = matchItems(DEFAULT_MATCH_RULES, 'bank-settlement', {
      left: [bank('b1', 10_000n, '2026-03-03', ['R1']), bank('b2', 19_550n, '2026-03-05', ['R2'])],
      right: [settlement('1', 10_000n, '2026-03-02', 'R1'), settlement('2', 20_000n, '2026-03-05', 'R2')],
    });
    expect(result.matches).toEqual([
      { rule: 'bank-reference', left: ['b1'], right: ['s-1'], difference: 0n },
      { rule: 'bank-reference', left: ['b2'], right: ['s-2'], difference: -450n },
    ]);
    expect(result.unmatchedLeft).toEqual([]);
    expect(result.unmatchedRight).toEqual([]);
  });

  it('matches one credit naming two settlements (one-to-many by keys)', () => {
    const result = matchItems(DEFAULT_MATCH_RULES, 'bank-settlement', {
      left: [bank('b1', 30_000n, '2026-03-04', ['R1', 'R2'])],
      right: [settlement('1', 10_000n, '2026-03-03', 'R1'), settlement('2', 20_000n, '2026-03-04', 'R2')],
    });
    expect(result.matches).toEqual([
      { rule: 'bank-reference', left: ['b1'], right: ['s-1', 's-2'], difference: 0n },
    ]);
  });

  it('finds a batch by subset sum when the credit names nothing', () => {
    const result = matchItems(DEFAULT_MATCH_RULES, 'bank-settlement', {
      left: [bank('b1', 35_000n, '2026-03-04')],
      right: [
        settlement('1', 10_000n, '2026-03-03'),
        settlement('2', 7_000n, '2026-03-04'),
        settlement('3', 25_000n, '2026-03-04'),
      ],
    });
    expect(result.matches).toEqual([
      { rule: 'amount-date-batch', left: ['b1'], right: ['s-1', 's-3'], difference: 0n },
    ]);
    expect(result.unmatchedRight).toEqual(['s-2']);
  });

  it('leaves a credit outside the window, another group or beyond the tolerance unmatched', () => {
    const result = matchItems(DEFAULT_MATCH_RULES, 'bank-settlement', {
      left: [
        bank('late', 10_000n, '2026-03-10', ['R1']),
        bank('usd', 20_000n, '2026-03-02', ['R2'], 'm:USD'),
        bank('short', 29_000n, '2026-03-02', ['R3']),
      ],
      right: [
        settlement('1', 10_000n, '2026-03-02', 'R1'),
        settlement('2', 20_000n, '2026-03-02', 'R2'),
        settlement('3', 30_000n, '2026-03-02', 'R3'),
      ],
    });
    expect(result.matches).toEqual([]);
    expect(result.unmatchedLeft).toEqual(['late', 'short', 'usd']);
  });

  it('keeps the tolerance edges: absolute and percent, whichever allows more', () => {
    const t = { absoluteMinor: 100n, percentBps: 50 };
    expect(withinTolerance(10_100n, 10_000n, t)).toBe(true);
    expect(withinTolerance(10_101n, 10_000n, t)).toBe(false);
    expect(withinTolerance(100_500n, 100_000n, t)).toBe(true);
    expect(withinTolerance(100_501n, 100_000n, t)).toBe(false);
    expect(withinTolerance(1n, 10_000_000n, null)).toBe(true);
  });

  it('keeps the window edge, in days either way', () => {
    const r = [rule({ name: 'w', cardinality: 'one-to-one', windowDays: 2 })];
    const at = (date: string) =>
      matchItems(r, 'bank-settlement', {
        left: [bank('b', 500n, date)],
        right: [settlement('1', 500n, '2026-03-05')],
      }).matches.length;
    expect([at('2026-03-03'), at('2026-03-07'), at('2026-03-02'), at('2026-03-08')]).toEqual([1, 1, 0, 0]);
  });

  it('picks the nearest date among equal amounts (one-to-one)', () => {
    const result = matchItems([rule({ name: 'a', cardinality: 'one-to-one' })], 'bank-settlement', {
      left: [bank('b', 500n, '2026-03-05')],
      right: [settlement('far', 500n, '2026-03-03'), settlement('near', 500n, '2026-03-06')],
    });
    expect(result.matches[0]?.right).toEqual(['s-near']);
  });

  it('matches several lefts to one right (many-to-one)', () => {
    const result = matchItems([rule({ name: 'split', cardinality: 'many-to-one' })], 'bank-settlement', {
      left: [bank('b1', 400n, '2026-03-05'), bank('b2', 600n, '2026-03-05'), bank('b3', 700n, '2026-03-05')],
      right: [settlement('1', 1_000n, '2026-03-05')],
    });
    expect(result.matches).toEqual([{ rule: 'split', left: ['b1', 'b2'], right: ['s-1'], difference: 0n }]);
  });

  it('takes the percent of the right amount in a many-to-one match too', () => {
    const r = [
      rule({ name: 'split', cardinality: 'many-to-one', tolerance: { absoluteMinor: 0n, percentBps: 100 } }),
    ];
    const at = (right: bigint) =>
      matchItems(r, 'bank-settlement', {
        left: [bank('b1', 5_000n, '2026-03-05'), bank('b2', 4_900n, '2026-03-05')],
        right: [settlement('1', right, '2026-03-05')],
      }).matches.length;
    // 9,900 in all: against 10,000 a difference of 100, 1 %; against 9,802 98 within 98.02; against 9,801 99 over 98.01.
    expect([at(10_000n), at(9_802n), at(9_801n)]).toEqual([1, 1, 0]);
  });

  it('matches report rows to a ledger payment by transaction id, amounts not compared', () => {
    const row = (identity: string, id: string, amount: bigint): MatchItem => ({
      identity,
      group: 'm:BRL',
      amount,
      date: null,
      keys: { transactionId: [id], externalId: [] },
    });
    const payment: MatchItem = {
      identity: 'cashout:m:9',
      group: 'm:BRL',
      amount: 4_050n,
      date: null,
      keys: { entityId: ['9'], externalRef: ['x9'] },
    };
    const result = matchItems(DEFAULT_MATCH_RULES, 'provider-ledger', {
      left: [row('r1', '9', -4_050n), row('r2', '9', 4_050n), row('r3', '10', 1n)],
      right: [payment],
    });
    expect(result.matches).toEqual([
      { rule: 'transaction-id', left: ['r1', 'r2'], right: ['cashout:m:9'], difference: -4_050n },
    ]);
    expect(result.unmatchedLeft).toEqual(['r3']);
  });

  it('refuses rule lists with a name twice or an unknown key', () => {
    expect(checkMatchRules(DEFAULT_MATCH_RULES)).toBeNull();
    expect(checkMatchRules([DEFAULT_MATCH_RULES[0]!, DEFAULT_MATCH_RULES[0]!])).toMatch(/twice/);
    expect(
      checkMatchRules([{ ...DEFAULT_MATCH_RULES[0]!, keys: [{ left: 'iban', right: 'bankReference' }] }]),
    ).toMatch(/left key/);
  });
});

describe('matching is a function of the set of lines', () => {
  /** Settlements over a few days, credits for most of them: exact, late, with a fee, batched, unnamed. */
  const scenario = fc
    .array(
      fc.record({
        net: fc.bigInt({ min: 100n, max: 50_000n }),
        day: fc.integer({ min: 1, max: 9 }),
        how: fc.constantFrom('exact', 'late', 'fee', 'batch', 'unnamed', 'missing', 'unrelated'),
        fee: fc.bigInt({ min: 1n, max: 450n }),
      }),
      { minLength: 1, maxLength: 25 },
    )
    .map((specs) => {
      const left: MatchItem[] = [];
      const right: MatchItem[] = [];
      let pending: { id: string; net: bigint } | null = null;
      specs.forEach((s, i) => {
        const id = String(i);
        const date = `2026-03-${String(s.day + 1).padStart(2, '0')}`;
        const next = `2026-03-${String(s.day + 2).padStart(2, '0')}`;
        if (s.how === 'unrelated') {
          left.push(bank(`u${id}`, s.net, date));
          return;
        }
        right.push(settlement(id, s.net, date, `R${id}`));
        if (s.how === 'exact') left.push(bank(`b${id}`, s.net, date, [`R${id}`]));
        if (s.how === 'late') left.push(bank(`b${id}`, s.net, next, [`R${id}`]));
        if (s.how === 'fee')
          left.push(bank(`b${id}`, s.net - (s.fee < s.net ? s.fee : 0n), date, [`R${id}`]));
        if (s.how === 'unnamed') left.push(bank(`b${id}`, s.net, date));
        if (s.how === 'batch') {
          if (pending === null) pending = { id, net: s.net };
          else {
            left.push(bank(`b${id}`, pending.net + s.net, date, [`R${pending.id}`, `R${id}`]));
            pending = null;
          }
        }
      });
      return { left, right };
    });

  it('gives the same matches for the lines shuffled and split into files', () => {
    fc.assert(
      fc.property(scenario, fc.infiniteStream(fc.nat()), fc.nat({ max: 5 }), (input, stream, cuts) => {
        const expected = matchItems(DEFAULT_MATCH_RULES, 'bank-settlement', input);
        const shuffle = <T>(xs: readonly T[]) => {
          const out = [...xs];
          const it = stream[Symbol.iterator]();
          for (let i = out.length - 1; i > 0; i--) {
            const j = it.next().value! % (i + 1);
            [out[i], out[j]] = [out[j]!, out[i]!];
          }
          return out;
        };
        // Split each side into files (some lines in two files, as overlapping statements), then join
        // the files in a shuffled order.
        const split = <T>(xs: readonly T[]) => {
          const files: T[][] = [];
          const shuffled = shuffle(xs);
          const size = Math.max(1, Math.ceil(shuffled.length / (cuts + 1)));
          for (let i = 0; i < shuffled.length; i += size)
            files.push(shuffled.slice(Math.max(0, i - 1), i + size));
          return shuffle(files).flat();
        };
        const again = matchItems(DEFAULT_MATCH_RULES, 'bank-settlement', {
          left: split(input.left),
          right: split(input.right),
        });
        expect(again).toEqual(expected);
        // Every credit naming one settlement is matched (a batch may span more days than the window).
        const matchedLeft = new Set(expected.matches.flatMap((m) => m.left));
        for (const l of input.left) {
          if (l.keys.endToEndId!.length === 1) expect(matchedLeft.has(l.identity)).toBe(true);
        }
      }),
      { numRuns: 200 },
    );
  });
});
