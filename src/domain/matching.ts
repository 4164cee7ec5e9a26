/**
 * Matching with rules, pure. Two pairs of sides are matched: bank statement lines against the provider's
 * settlements (`bank-settlement`), and the provider's transaction report rows against the ledger's
 * payments (`provider-ledger`). The left side is the bank line (or the report row), the right side the
 * settlement (or the ledger payment).
 *
 * Rules come from configuration (`PAYRECON_MATCH_RULES`, else `DEFAULT_MATCH_RULES`) and apply in the
 * order given: each rule sees only what the rules before it left unmatched. A rule names:
 * - `keys`: pairs of key names (a left key against a right key) of which one value must be shared, as a
 *   bank line's end-to-end id against a settlement's bank reference; none: amounts and dates alone;
 * - `tolerance`: how far the left amount may lie from the right amount (or the sum of several), in minor
 *   units (`absoluteMinor`) or hundredths of a percent of the right amount (`percentBps`), the larger
 *   allowance wins; none: amounts are not compared;
 * - `windowDays`: how many days the left date may lie from the right date; none: dates are not compared;
 * - `cardinality`: `one-to-one`; `one-to-many` (one left for several rights: one bank credit for several
 *   settlements, their nets summed); `many-to-one` (several lefts for one right).
 * Without keys, `one-to-many` and `many-to-one` search subsets (sum within tolerance) among at most
 * `maxCandidates` candidates in the window, of at most `maxGroup` members.
 *
 * Items match only within their `group` (merchant account and currency). The result is a function of the
 * set of items: they are put in a canonical order (by identity) before any rule runs, and every choice
 * between candidates is made by amount difference, then date distance, then identity; so the same lines
 * in any order or split into any files give the same matches.
 */

export const MATCH_PAIRS = ['bank-settlement', 'provider-ledger'] as const;
export type MatchPair = (typeof MATCH_PAIRS)[number];

export const MATCH_CARDINALITIES = ['one-to-one', 'one-to-many', 'many-to-one'] as const;
export type MatchCardinality = (typeof MATCH_CARDINALITIES)[number];

/** The sides a member of a match is on. */
export const MATCH_SIDES = ['bank_line', 'settlement', 'provider_row', 'ledger_payment'] as const;
export type MatchSide = (typeof MATCH_SIDES)[number];

export const PAIR_SIDES: Readonly<Record<MatchPair, { left: MatchSide; right: MatchSide }>> = {
  'bank-settlement': { left: 'bank_line', right: 'settlement' },
  'provider-ledger': { left: 'provider_row', right: 'ledger_payment' },
};

/** Key names each side offers (the loaders fill them). */
export const MATCH_KEYS: Readonly<Record<MatchSide, readonly string[]>> = {
  bank_line: ['endToEndId', 'reference', 'remittance'],
  settlement: ['bankReference', 'settlementId'],
  provider_row: ['transactionId', 'externalId'],
  ledger_payment: ['entityId', 'externalRef'],
};

export interface MatchTolerance {
  absoluteMinor: bigint;
  /** Hundredths of a percent of the right amount (100 = 1 %). */
  percentBps: number;
}

export interface MatchRule {
  name: string;
  pair: MatchPair;
  keys: readonly { left: string; right: string }[];
  tolerance: MatchTolerance | null;
  windowDays: number | null;
  cardinality: MatchCardinality;
  /** Subset search without keys: candidates looked at, members of one side at most. */
  maxCandidates: number;
  maxGroup: number;
}

export interface MatchItem {
  identity: string;
  /** Items match only within one group: the merchant account and currency. */
  group: string;
  amount: bigint;
  /** ISO date (YYYY-MM-DD), or null when the item has none. */
  date: string | null;
  keys: Readonly<Record<string, readonly string[]>>;
}

export interface MatchInput {
  left: readonly MatchItem[];
  right: readonly MatchItem[];
}

export interface Match {
  rule: string;
  left: string[];
  right: string[];
  /** Sum of the left amounts minus sum of the right amounts. */
  difference: bigint;
}

export interface MatchResult {
  matches: Match[];
  unmatchedLeft: string[];
  unmatchedRight: string[];
}

const rule = (r: Omit<MatchRule, 'maxCandidates' | 'maxGroup'> & Partial<MatchRule>): MatchRule => ({
  maxCandidates: 12,
  maxGroup: 4,
  ...r,
});

/**
 * The built-in rules: a bank credit naming settlements by end-to-end id (one or several settlements, a
 * bank fee up to 5.00 or 1 % taken, value date within 5 days); then by amount alone (exactly, within 3
 * days, one settlement, then several); a report row by the payment's id, then by the merchant's id.
 */
export const DEFAULT_MATCH_RULES: readonly MatchRule[] = [
  rule({
    name: 'bank-reference',
    pair: 'bank-settlement',
    keys: [
      { left: 'endToEndId', right: 'bankReference' },
      { left: 'endToEndId', right: 'settlementId' },
    ],
    tolerance: { absoluteMinor: 500n, percentBps: 100 },
    windowDays: 5,
    cardinality: 'one-to-many',
  }),
  rule({
    name: 'amount-date',
    pair: 'bank-settlement',
    keys: [],
    tolerance: { absoluteMinor: 0n, percentBps: 0 },
    windowDays: 3,
    cardinality: 'one-to-one',
  }),
  rule({
    name: 'amount-date-batch',
    pair: 'bank-settlement',
    keys: [],
    tolerance: { absoluteMinor: 0n, percentBps: 0 },
    windowDays: 3,
    cardinality: 'one-to-many',
  }),
  rule({
    name: 'transaction-id',
    pair: 'provider-ledger',
    keys: [{ left: 'transactionId', right: 'entityId' }],
    tolerance: null,
    windowDays: null,
    cardinality: 'many-to-one',
  }),
  rule({
    name: 'external-id',
    pair: 'provider-ledger',
    keys: [{ left: 'externalId', right: 'externalRef' }],
    tolerance: null,
    windowDays: null,
    cardinality: 'many-to-one',
  }),
];

/** Days from `a` to `b` (ISO dates), negative when `b` is earlier. */
export function daysBetween(a: string, b: string): number {
  return Math.round((Date.parse(`${b}T00:00:00Z`) - Date.parse(`${a}T00:00:00Z`)) / 86_400_000);
}

/**
 * The day a bank account's graces and ages count to: `today`, or the day after its last statement when
 * that is later. A statement of a day says the bank has closed it, so the bank's days count even when they
 * run ahead of this clock (a sandbox's fast clock).
 */
export function bankToday(today: string, lastStatementDay: string | undefined): string {
  if (lastStatementDay === undefined) return today;
  const after = new Date(Date.parse(`${lastStatementDay}T00:00:00Z`) + 86_400_000).toISOString().slice(0, 10);
  return after > today ? after : today;
}

const abs = (n: bigint) => (n < 0n ? -n : n);

/** Whether `left` lies within the tolerance of `right`: the larger of the absolute and percent allowance. */
export function withinTolerance(left: bigint, right: bigint, tolerance: MatchTolerance | null): boolean {
  if (tolerance === null) return true;
  const diff = abs(left - right);
  if (diff <= tolerance.absoluteMinor) return true;
  return diff * 10_000n <= abs(right) * BigInt(tolerance.percentBps);
}

function withinWindow(a: MatchItem, b: MatchItem, windowDays: number | null): boolean {
  if (windowDays === null) return true;
  if (a.date === null || b.date === null) return false;
  return Math.abs(daysBetween(a.date, b.date)) <= windowDays;
}

const byIdentity = (a: MatchItem, b: MatchItem) =>
  a.identity < b.identity ? -1 : a.identity > b.identity ? 1 : 0;

/** Canonical order of items: by identity; duplicates of one identity are one item (the first kept). */
function canonical(items: readonly MatchItem[]): MatchItem[] {
  const seen = new Map<string, MatchItem>();
  for (const item of items) if (!seen.has(item.identity)) seen.set(item.identity, item);
  return [...seen.values()].sort(byIdentity);
}

/** A candidate's rank: smaller amount difference, then nearer date, then identity. */
function rank(one: MatchItem, members: readonly MatchItem[]): [bigint, number, string] {
  const sum = members.reduce((s, m) => s + m.amount, 0n);
  const days = members.reduce(
    (d, m) => d + (one.date !== null && m.date !== null ? Math.abs(daysBetween(one.date, m.date)) : 0),
    0,
  );
  return [abs(one.amount - sum), days, members.map((m) => m.identity).join('\u0000')];
}

function better(a: [bigint, number, string], b: [bigint, number, string] | null): boolean {
  if (b === null) return true;
  if (a[0] !== b[0]) return a[0] < b[0];
  if (a[1] !== b[1]) return a[1] < b[1];
  return a[2] < b[2];
}

/**
 * One rule over the items still unmatched, from the side of the `one` items (each takes one or several
 * of the `many`). `oneKeys`/`manyKeys` are the key names compared pairwise (index i with index i).
 */
function applyRule(
  r: MatchRule,
  ones: MatchItem[],
  manys: MatchItem[],
  oneKeys: readonly string[],
  manyKeys: readonly string[],
  several: boolean,
  taken: Set<string>,
  oneIsRight = false,
): { one: MatchItem; many: MatchItem[] }[] {
  const out: { one: MatchItem; many: MatchItem[] }[] = [];
  const keyed = oneKeys.length > 0;
  // Index of the many side still unmatched: by key (one map per key pair, from the value to the items
  // carrying it; a candidate must be of the same group too), or by group in date order (a window is then
  // a range found by bisection).
  const byKey = manyKeys.map(() => new Map<string, MatchItem[]>());
  const byGroup = new Map<string, MatchItem[]>();
  for (const m of manys) {
    if (taken.has(m.identity)) continue;
    if (keyed) {
      manyKeys.forEach((name, i) => {
        for (const v of m.keys[name] ?? []) {
          if (v === '') continue;
          const list = byKey[i]!.get(v);
          if (list) list.push(m);
          else byKey[i]!.set(v, [m]);
        }
      });
    } else {
      const list = byGroup.get(m.group);
      if (list) list.push(m);
      else byGroup.set(m.group, [m]);
    }
  }
  for (const list of byGroup.values()) {
    list.sort((a, b) =>
      (a.date ?? '') < (b.date ?? '') ? -1 : (a.date ?? '') > (b.date ?? '') ? 1 : byIdentity(a, b),
    );
  }
  for (const one of ones) {
    if (taken.has(one.identity)) continue;
    let candidates: MatchItem[];
    if (keyed) {
      const found = new Map<string, MatchItem>();
      oneKeys.forEach((name, i) => {
        for (const v of one.keys[name] ?? []) {
          if (v === '') continue;
          for (const m of byKey[i]!.get(v) ?? []) if (m.group === one.group) found.set(m.identity, m);
        }
      });
      candidates = [...found.values()].sort(byIdentity);
    } else {
      candidates = inWindow(byGroup.get(one.group) ?? [], one.date, r.windowDays);
    }
    candidates = candidates.filter((m) => !taken.has(m.identity) && withinWindow(one, m, r.windowDays));
    if (candidates.length === 0) continue;
    let best: MatchItem[] | null = null;
    // Ranked once a second candidate fits: the first alone needs no rank.
    let bestRank: [bigint, number, string] | null = null;
    const consider = (members: MatchItem[]) => {
      const sum = members.reduce((s, m) => s + m.amount, 0n);
      // The percent is of the right side's amount, whichever side `one` is.
      const fits = oneIsRight
        ? withinTolerance(sum, one.amount, r.tolerance)
        : withinTolerance(one.amount, sum, r.tolerance);
      if (!fits) return;
      if (best === null) {
        best = members;
        return;
      }
      bestRank ??= rank(one, best);
      const rk = rank(one, members);
      if (better(rk, bestRank)) {
        best = members;
        bestRank = rk;
      }
    };
    if (!several) {
      for (const m of candidates) consider([m]);
    } else if (keyed) {
      // Every item the keys name, together; else the best subset of them.
      consider(candidates);
      if (best === null) subsets(candidates.slice(0, r.maxCandidates), r.maxGroup, consider);
    } else {
      const near = [...candidates]
        .sort((a, b) => {
          const da = one.date && a.date ? Math.abs(daysBetween(one.date, a.date)) : 0;
          const db = one.date && b.date ? Math.abs(daysBetween(one.date, b.date)) : 0;
          return da - db || byIdentity(a, b);
        })
        .slice(0, r.maxCandidates)
        .sort(byIdentity);
      // Several members only: one alone is the one-to-one rules' business.
      subsets(near, r.maxGroup, (members) => {
        if (members.length >= 2) consider(members);
      });
    }
    if (best !== null) {
      const members: MatchItem[] = best;
      taken.add(one.identity);
      for (const m of members) taken.add(m.identity);
      out.push({ one, many: members });
    }
  }
  return out;
}

/** The items (in date order) whose date lies within `windowDays` of `date`; all when no window. */
function inWindow(items: readonly MatchItem[], date: string | null, windowDays: number | null): MatchItem[] {
  if (windowDays === null) return [...items];
  if (date === null) return [];
  const at = Date.parse(`${date}T00:00:00Z`);
  const from = new Date(at - windowDays * 86_400_000).toISOString().slice(0, 10);
  const to = new Date(at + windowDays * 86_400_000).toISOString().slice(0, 10);
  const first = (bound: string, strict: boolean) => {
    let lo = 0;
    let hi = items.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      const d = items[mid]!.date ?? '';
      if (strict ? d <= bound : d < bound) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  return items.slice(first(from, false), first(to, true));
}

/** Calls `visit` with every subset of `items` of 1 to `max` members, in a fixed order. */
function subsets(items: readonly MatchItem[], max: number, visit: (members: MatchItem[]) => void): void {
  const chosen: MatchItem[] = [];
  const walk = (start: number) => {
    if (chosen.length > 0) visit([...chosen]);
    if (chosen.length === max) return;
    for (let i = start; i < items.length; i++) {
      chosen.push(items[i]!);
      walk(i + 1);
      chosen.pop();
    }
  };
  walk(0);
}

/**
 * Applies the rules of one pair, in order, to the items: the matches (each with its rule, its members'
 * identities sorted, and its difference) and what stayed unmatched, all in canonical order.
 */
export function matchItems(rules: readonly MatchRule[], pair: MatchPair, input: MatchInput): MatchResult {
  const left = canonical(input.left);
  const right = canonical(input.right);
  const taken = new Set<string>();
  const matches: Match[] = [];
  for (const r of rules) {
    if (r.pair !== pair) continue;
    const lk = r.keys.map((k) => k.left);
    const rk = r.keys.map((k) => k.right);
    if (r.cardinality === 'many-to-one') {
      for (const { one, many } of applyRule(r, right, left, rk, lk, true, taken, true)) {
        // Amounts compared from the right's side: the difference stays left minus right.
        matches.push(makeMatch(r.name, many, [one]));
      }
    } else {
      const several = r.cardinality === 'one-to-many';
      for (const { one, many } of applyRule(r, left, right, lk, rk, several, taken)) {
        matches.push(makeMatch(r.name, [one], many));
      }
    }
  }
  matches.sort((a, b) => (a.left[0]! < b.left[0]! ? -1 : a.left[0]! > b.left[0]! ? 1 : 0));
  return {
    matches,
    unmatchedLeft: left.filter((i) => !taken.has(i.identity)).map((i) => i.identity),
    unmatchedRight: right.filter((i) => !taken.has(i.identity)).map((i) => i.identity),
  };
}

function makeMatch(rule: string, left: readonly MatchItem[], right: readonly MatchItem[]): Match {
  const sum = (xs: readonly MatchItem[]) => xs.reduce((s, x) => s + x.amount, 0n);
  return {
    rule,
    left: left.map((i) => i.identity).sort(),
    right: right.map((i) => i.identity).sort(),
    difference: sum(left) - sum(right),
  };
}

/** Why a rule list is refused (null when it is fine): names unique, keys known to their sides. */
export function checkMatchRules(rules: readonly MatchRule[]): string | null {
  const names = new Set<string>();
  for (const r of rules) {
    if (names.has(r.name)) return `names rule ${JSON.stringify(r.name)} twice`;
    if (r.name === 'manual') return 'must not name a rule "manual" (manual matches are named so)';
    names.add(r.name);
    const sides = PAIR_SIDES[r.pair];
    for (const k of r.keys) {
      if (!MATCH_KEYS[sides.left].includes(k.left)) {
        return `rule ${r.name}: left key must be one of ${MATCH_KEYS[sides.left].join(', ')}`;
      }
      if (!MATCH_KEYS[sides.right].includes(k.right)) {
        return `rule ${r.name}: right key must be one of ${MATCH_KEYS[sides.right].join(', ')}`;
      }
    }
  }
  return null;
}

/** What a matching run did, as the commands print it and an import answers it. */
export interface MatchSummary {
  /** New matches by rule name. */
  matched: Record<string, number>;
  unmatched: { bankLines: number; settlements: number; reportRows: number };
  /** Exceptions raised (or still true) by type. */
  exceptions: Record<string, number>;
  /** Exceptions resolved by a match. */
  resolved: number;
}
