/**
 * Property test of the ledger: random observation streams per entity (skipped statuses, duplicates,
 * reordering, stale and illegal moves, late rejections, test and crypto deposits, fees on either side,
 * intents arriving late or never), applied in random batches. After every batch all invariants hold
 * (`verifyLedger`); at the end the balances equal a simple model computed from each entity's last legal
 * status, and replaying everything again books nothing. A second property adds to such streams one
 * reading that changes a fact that cannot change (test flag, crypto, currency, a completed amount, a
 * refund's deposit): invariants still hold after every batch, the entity's bookings stop changing from
 * the batch in which both versions are known, it raises FACTS_CHANGED, and the other entities still
 * equal the model.
 */
import fc from 'fast-check';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyObservations, recordIntents } from '../../src/db/ledger/service.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { balances } from '../../src/db/read-models/balances.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import type { Intent, Observation } from '../../src/domain/observation.ts';
import {
  canReach,
  type EntityKind,
  type EntityStatus,
  INITIAL,
  STATUSES,
  TRANSITIONS,
} from '../../src/domain/statuses.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});

interface EntitySpec {
  kind: EntityKind;
  amount: bigint;
  fee: bigint;
  feeOnPayer: boolean;
  test: boolean;
  crypto: boolean;
  withIntent: boolean;
  walk: number[];
  seen: boolean[];
  noise: { status: number; at: number }[];
  dupes: number[];
  nullAmount: boolean[];
}

const entitySpec: fc.Arbitrary<EntitySpec> = fc.record({
  kind: fc.constantFrom<EntityKind>('deposit', 'cashout', 'refund'),
  amount: fc.bigInt({ min: 1n, max: 10n ** 20n - 1n }),
  fee: fc.bigInt({ min: 0n, max: 500n }),
  feeOnPayer: fc.boolean(),
  test: fc.boolean(),
  crypto: fc.boolean(),
  withIntent: fc.boolean(),
  walk: fc.array(fc.nat(20), { minLength: 1, maxLength: 6 }),
  seen: fc.array(fc.boolean(), { minLength: 6, maxLength: 6 }),
  noise: fc.array(fc.record({ status: fc.nat(20), at: fc.nat(80) }), { maxLength: 2 }),
  dupes: fc.array(fc.nat(10), { maxLength: 2 }),
  nullAmount: fc.array(fc.boolean(), { minLength: 10, maxLength: 10 }),
});

let runNo = 0;

function build(
  spec: EntitySpec,
  account: string,
  id: string,
): { observations: Observation[]; intent: Intent | null } {
  const kind = spec.kind;
  const test = kind === 'deposit' && spec.test;
  const crypto = kind === 'deposit' && !test && spec.crypto;
  const initial = INITIAL[kind];
  const path: string[] = [initial[spec.walk[0]! % initial.length]!];
  for (const step of spec.walk.slice(1)) {
    const table = TRANSITIONS[kind] as Record<string, readonly string[]>;
    const next = table[path.at(-1)!] ?? [];
    if (next.length === 0) break;
    path.push(next[step % next.length]!);
  }
  const base = Date.UTC(2026, 10, 1);
  const observations: Observation[] = [];
  const make = (status: string | null, minute: number, n: number): Observation => ({
    eventId: `${account}-${id}-${n}`,
    kind,
    account,
    entityId: id,
    externalRef: kind === 'refund' ? null : `x-${id}`,
    status,
    observedAt: new Date(base + minute * 60_000),
    source: n % 2 === 0 ? 'poll' : 'webhook',
    currency: kind === 'cashout' || spec.nullAmount[n % 10] ? null : 'BRL',
    amount: kind === 'cashout' || spec.nullAmount[n % 10] ? null : spec.amount,
    feeAmount: kind === 'deposit' && !spec.nullAmount[n % 10] ? spec.fee : null,
    feeCurrency: kind === 'deposit' && !spec.nullAmount[n % 10] ? 'BRL' : null,
    feeOnPayer: kind === 'deposit' ? spec.feeOnPayer : null,
    test,
    crypto,
    statusReason: null,
    payerVerification: null,
    rejectionCode: null,
    rejectionReason: null,
    parentDepositId: null,
    bankReference: null,
    details: {},
  });
  let n = 0;
  path.forEach((status, i) => {
    // The last status is always observed; intermediate ones may be missed by polling.
    if (i === path.length - 1 || spec.seen[i]) observations.push(make(status, 10 * (i + 1), n));
    n += 1;
  });
  const statuses = STATUSES[kind];
  for (const noise of spec.noise) {
    observations.push(make(statuses[noise.status % statuses.length]!, noise.at, n));
    n += 1;
  }
  for (const d of spec.dupes) observations.push(observations[d % observations.length]!);
  const needsIntent = kind === 'cashout' ? spec.withIntent : spec.withIntent && spec.walk.length % 2 === 0;
  const intent: Intent | null = needsIntent
    ? {
        intentId: `${account}-${id}-intent`,
        operation: kind,
        account,
        externalRef: `x-${id}`,
        entityId: id,
        currency: 'BRL',
        amount: spec.amount,
        expectedFee: null,
        test,
        crypto,
        feeOnPayer: spec.feeOnPayer,
        parentDepositId: null,
        outcome: 'created',
        createdAt: new Date(base),
        request: {},
        response: null,
      }
    : null;
  return { observations, intent };
}

/** The simple model: walk the distinct observations in time order; the ledger follows the last legal status. */
function model(
  kind: EntityKind,
  obs: readonly Observation[],
  spec: EntitySpec,
  hasIntent: boolean,
): Map<string, bigint> {
  const distinct = [...new Map(obs.map((o) => [o.eventId, o])).values()].filter((o) => o.status !== null);
  const rank = (s: string) => (STATUSES[kind] as readonly string[]).indexOf(s);
  distinct.sort(
    (a, b) =>
      a.observedAt.getTime() - b.observedAt.getTime() ||
      rank(a.status!) - rank(b.status!) ||
      (a.eventId < b.eventId ? -1 : 1),
  );
  let status: string | null = null;
  let completed = false;
  let early = false;
  for (const o of distinct) {
    const s = o.status!;
    if (
      status !== null &&
      !canReach(kind, status as EntityStatus<typeof kind>, s as EntityStatus<typeof kind>)
    )
      continue;
    status = s;
    completed ||= s === 'COMPLETED';
    early ||= s === 'EARLY_RELEASED';
  }
  const out = new Map<string, bigint>();
  const add = (account: string, v: bigint) => out.set(account, (out.get(account) ?? 0n) + v);
  const A = spec.amount;
  // Effects wait until an amount is known: the intent's, or (deposits, refunds) one the provider reported.
  const withStatus = distinct;
  const amountKnown = hasIntent || (kind !== 'cashout' && withStatus.some((o) => o.amount !== null));
  if (!amountKnown) return out;
  const feeKnown = withStatus.some((o) => o.feeAmount !== null);
  if (kind === 'deposit') {
    const test = spec.test;
    const crypto = !test && spec.crypto;
    if (crypto) {
      if (status === 'APPROVED') {
        add('crypto_in_transit', A);
        add('crypto_payers', -A);
      }
      if (status === 'COMPLETED') {
        add('crypto_customer_wallets', A);
        add('crypto_payers', -A);
      }
      return out;
    }
    const p = test ? 'test_' : '';
    if (status === 'COMPLETED' || status === 'EARLY_RELEASED') {
      const fee = spec.feeOnPayer || !feeKnown ? 0n : spec.fee;
      add(`${p}available`, A - fee);
      add(`${p}deposits`, -A);
      add(`${p}fees`, fee);
    }
    return out;
  }
  if (
    status === 'PENDING' ||
    status === 'ON_HOLD' ||
    status === 'DELIVERED' ||
    status === 'INCORRECT_DETAILS'
  ) {
    add('available', -A);
    add('reserved', A);
  }
  if (status === 'COMPLETED') {
    add('available', -A);
    add(kind === 'refund' ? 'refunds' : 'payouts', A);
  }
  void completed;
  void early;
  return out;
}

type Event = { type: 'obs'; o: Observation } | { type: 'intent'; i: Intent };

describe('ledger property', () => {
  it('converges on the model whatever the order, duplication and batching, with invariants after every batch', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(entitySpec, { minLength: 1, maxLength: 5 }),
        fc.array(fc.nat(), { minLength: 40, maxLength: 40 }),
        fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 20, maxLength: 20 }),
        async (specs, shuffleKeys, batchSizes) => {
          runNo += 1;
          const account = `run${runNo}`;
          const events: Event[] = [];
          const built = specs.map((spec, i) => ({ spec, ...build(spec, account, `e${i}`) }));
          for (const b of built) {
            for (const o of b.observations) events.push({ type: 'obs', o });
            if (b.intent) events.push({ type: 'intent', i: b.intent });
          }
          const order = events
            .map((e, i) => ({ e, k: shuffleKeys[i % shuffleKeys.length]! + i / 1000 }))
            .sort((a, b) => a.k - b.k)
            .map((x) => x.e);
          let pos = 0;
          let bi = 0;
          while (pos < order.length) {
            const size = batchSizes[bi % batchSizes.length]!;
            bi += 1;
            const batch = order.slice(pos, pos + size);
            pos += size;
            await withLedgerTransaction(t.db, async (trx) => {
              const intents = batch.flatMap((e) => (e.type === 'intent' ? [e.i] : []));
              const observations = batch.flatMap((e) => (e.type === 'obs' ? [e.o] : []));
              if (intents.length > 0) await recordIntents(trx, intents);
              if (observations.length > 0) await applyObservations(trx, observations);
            });
            const v = await verifyLedger(t.db);
            expect(v.failures).toEqual([]);
          }
          // Replaying everything books nothing more.
          const replay = await withLedgerTransaction(t.db, (trx) =>
            applyObservations(
              trx,
              order.flatMap((e) => (e.type === 'obs' ? [e.o] : [])),
            ),
          );
          expect(replay.entriesBooked).toBe(0);

          const expected = new Map<string, bigint>();
          for (const b of built) {
            for (const [acc, v] of model(b.spec.kind, b.observations, b.spec, b.intent !== null)) {
              expected.set(acc, (expected.get(acc) ?? 0n) + v);
            }
          }
          const actual = new Map<string, bigint>();
          for (const r of await balances(t.db, { merchantAccount: account })) {
            if (r.balance !== 0n) actual.set(r.account, r.balance);
          }
          for (const [k, v] of [...expected]) if (v === 0n) expected.delete(k);
          expect(Object.fromEntries(actual)).toEqual(Object.fromEntries(expected));
        },
      ),
      {
        numRuns: Number(process.env.LEDGER_PROPERTY_RUNS ?? 40),
        endOnFailure: process.env.LEDGER_PROPERTY_SHRINK !== '1',
      },
    );
  }, 240_000);

  it('freezes an entity whose immutable facts change, invariants intact after every batch', async () => {
    type Mutation = { fact: 'test' | 'crypto' | 'currency' | 'amount' | 'parent'; delta: bigint };
    const mutation: fc.Arbitrary<Mutation | null> = fc.option(
      fc.record({
        fact: fc.constantFrom<Mutation['fact']>('test', 'crypto', 'currency', 'amount', 'parent'),
        delta: fc.bigInt({ min: 1n, max: 10_000n }),
      }),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(entitySpec, mutation), { minLength: 1, maxLength: 4 }),
        fc.array(fc.nat(), { minLength: 40, maxLength: 40 }),
        fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 20, maxLength: 20 }),
        async (pairs, shuffleKeys, batchSizes) => {
          runNo += 1;
          const account = `frz${runNo}`;
          const events: Event[] = [];
          const built = pairs.map(([raw, m], i) => {
            // Every reading carries its amount and currency, so a changed one always meets the original.
            const spec = { ...raw, nullAmount: raw.nullAmount.map(() => false), noise: [] };
            const id = `e${i}`;
            const b = build(spec, account, id);
            const parent = (o: Observation): Observation =>
              spec.kind === 'refund' ? { ...o, parentDepositId: `dep-${id}` } : o;
            const observations = b.observations.map(parent);
            const base = observations.filter((o) => o.status !== null);
            const last = base.reduce((x, y) => (y.observedAt > x.observedAt ? y : x));
            // The one changed reading: the last status again, later, with one fact changed.
            let changed: Observation | null = null;
            let conflicts = false;
            if (m) {
              const o = {
                ...last,
                eventId: `${account}-${id}-changed`,
                observedAt: new Date(last.observedAt.getTime() + 5 * 60_000),
              };
              if (m.fact === 'test' && spec.kind === 'deposit')
                [changed, conflicts] = [{ ...o, test: !o.test, crypto: false }, true];
              if (m.fact === 'crypto' && spec.kind === 'deposit' && !o.test)
                [changed, conflicts] = [{ ...o, crypto: !o.crypto }, true];
              if (m.fact === 'currency' && spec.kind !== 'cashout')
                [changed, conflicts] = [{ ...o, currency: 'USD', feeCurrency: o.feeCurrency && 'USD' }, true];
              if (m.fact === 'amount' && spec.kind !== 'cashout') {
                // Changed downwards near the top: a provider amount has at most 18 integer digits.
                const up = spec.amount + m.delta < 10n ** 20n;
                changed = { ...o, amount: up ? spec.amount + m.delta : spec.amount - m.delta };
                conflicts = base.some((x) => x.status === 'COMPLETED');
              }
              if (m.fact === 'parent' && spec.kind === 'refund')
                [changed, conflicts] = [{ ...o, parentDepositId: `other-${id}` }, true];
            }
            if (changed) observations.push(changed);
            return { spec, id, observations, intent: b.intent, changed, conflicts, mutated: m?.fact ?? null };
          });
          for (const b of built) {
            for (const o of b.observations) events.push({ type: 'obs', o });
            if (b.intent) events.push({ type: 'intent', i: b.intent });
          }
          const order = events
            .map((e, i) => ({ e, k: shuffleKeys[i % shuffleKeys.length]! + i / 1000 }))
            .sort((a, b) => a.k - b.k)
            .map((x) => x.e);
          const postingsOf = async (id: string) => {
            const { rows } = await sql<{ account: string; total: string }>`
              SELECT p.account || '/' || p.currency AS account, sum(p.amount)::text AS total
              FROM postings p JOIN journal_entries e ON e.id = p.entry_id
              WHERE e.merchant_account = ${account} AND e.entity_id = ${id}
              GROUP BY 1 HAVING sum(p.amount) <> 0 ORDER BY 1`.execute(t.db);
            return rows;
          };
          const seen = new Set<string>();
          const frozenAt = new Map<string, unknown>();
          let pos = 0;
          let bi = 0;
          while (pos < order.length) {
            const size = batchSizes[bi % batchSizes.length]!;
            bi += 1;
            const batch = order.slice(pos, pos + size);
            pos += size;
            await withLedgerTransaction(t.db, async (trx) => {
              const intents = batch.flatMap((e) => (e.type === 'intent' ? [e.i] : []));
              const observations = batch.flatMap((e) => (e.type === 'obs' ? [e.o] : []));
              if (intents.length > 0) await recordIntents(trx, intents);
              if (observations.length > 0) await applyObservations(trx, observations);
            });
            for (const e of batch) if (e.type === 'obs') seen.add(e.o.eventId);
            const v = await verifyLedger(t.db);
            expect(v.failures).toEqual([]);
            for (const b of built) {
              if (!b.conflicts || !b.changed || !seen.has(b.changed.eventId)) continue;
              // Both versions known: from the first such batch on, the bookings never change.
              // The readings the changed one contradicts: any other reading; for an amount, a COMPLETED one
              // (the amount counts from completion on).
              const against = b.observations.filter(
                (o) =>
                  o !== b.changed &&
                  o.status !== null &&
                  (b.mutated !== 'amount' || o.status === 'COMPLETED'),
              );
              if (!against.some((o) => seen.has(o.eventId))) continue;
              const now = await postingsOf(b.id);
              if (!frozenAt.has(b.id)) frozenAt.set(b.id, now);
              else expect(now).toEqual(frozenAt.get(b.id));
            }
          }
          const { rows: raised } = await sql<{ entity_id: string }>`
            SELECT entity_id FROM exceptions WHERE merchant_account = ${account} AND type = 'FACTS_CHANGED'`.execute(
            t.db,
          );
          const expectedFrozen = built
            .filter((b) => b.conflicts)
            .map((b) => b.id)
            .sort();
          expect(raised.map((r) => r.entity_id).sort()).toEqual(expectedFrozen);
          // The entities without a changed reading still equal the model.
          for (const b of built) {
            if (b.changed) continue;
            const expected = model(b.spec.kind, b.observations, b.spec, b.intent !== null);
            const actual = new Map<string, bigint>();
            for (const r of await postingsOf(b.id))
              actual.set(r.account.split('/')[0]!, parseMinorText(r.total));
            for (const [k, v] of [...expected]) if (v === 0n) expected.delete(k);
            expect(Object.fromEntries(actual)).toEqual(Object.fromEntries(expected));
          }
        },
      ),
      {
        numRuns: Number(process.env.LEDGER_PROPERTY_RUNS ?? 40),
        endOnFailure: process.env.LEDGER_PROPERTY_SHRINK !== '1',
      },
    );
  }, 240_000);
});

/** Decimal text of a numeric sum (e.g. "-12.34") in minor units. */
function parseMinorText(text: string): bigint {
  const neg = text.startsWith('-');
  const [int, frac = ''] = (neg ? text.slice(1) : text).split('.');
  const v = BigInt(int!) * 100n + BigInt((frac + '00').slice(0, 2));
  return neg ? -v : v;
}
