import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PAYOUT_IN_FLIGHT } from '../../src/domain/effects.ts';
import { DEFAULT_EXCEPTION_RULES, stuckDeadline } from '../../src/domain/exception-rules.ts';
import { ENTITY_KINDS, STATUSES } from '../../src/domain/statuses.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

/**
 * `mirror_watch(kind, status)` states in SQL which set a mirror is indexed in, so its indexes need not name
 * the status. The sets are the domain's: 'open' is every status the stuck sweep can raise on
 * (`stuckDeadline`) or that holds a payout's money in reserved (`PAYOUT_IN_FLIGHT`); 'completed' and
 * 'cancelled' are the late-move watch's. Should the domain gain or move a status, this fails until the SQL
 * function says the same.
 */
let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});

function expected(kind: string, status: string): string | null {
  const since = new Date('2026-11-01T00:00:00Z');
  const stuckable =
    stuckDeadline(
      { kind: kind as never, status, statusSince: since, expiresAt: null },
      DEFAULT_EXCEPTION_RULES,
    ) !== null;
  const inFlight = kind !== 'deposit' && PAYOUT_IN_FLIGHT.includes(status);
  if (stuckable || inFlight) return 'open';
  if (kind !== 'deposit' && status === 'COMPLETED') return 'completed';
  if (kind === 'deposit' && status === 'CANCELLED') return 'cancelled';
  return null;
}

describe('mirror_watch and the domain', () => {
  it('puts every status of every kind in the set the domain gives it', async () => {
    const pairs = ENTITY_KINDS.flatMap((kind) => STATUSES[kind].map((status) => ({ kind, status })));
    expect(pairs.length).toBeGreaterThan(20);
    const { rows } = await sql<{ kind: string; status: string; watch: string | null }>`
      SELECT k AS kind, s AS status, mirror_watch(k, s) AS watch
      FROM unnest(${pairs.map((p) => p.kind)}::text[], ${pairs.map((p) => p.status)}::text[]) AS v(k, s)`.execute(
      t.db,
    );
    const got = rows.map((r) => `${r.kind} ${r.status} ${r.watch}`);
    const want = pairs.map((p) => `${p.kind} ${p.status} ${expected(p.kind, p.status)}`);
    expect(got).toEqual(want);
  });

  it("a cashout's or refund's open set is exactly the in-flight statuses (inFlightCounts reads the set alone)", async () => {
    const pairs = (['cashout', 'refund'] as const).flatMap((kind) =>
      STATUSES[kind].map((status) => ({ kind, status })),
    );
    const { rows } = await sql<{ kind: string; status: string; open: boolean }>`
      SELECT k AS kind, s AS status, mirror_watch(k, s) IS NOT DISTINCT FROM 'open' AS open
      FROM unnest(${pairs.map((p) => p.kind)}::text[], ${pairs.map((p) => p.status)}::text[]) AS v(k, s)`.execute(
      t.db,
    );
    expect(rows.map((r) => `${r.kind} ${r.status} ${r.open}`)).toEqual(
      pairs.map((p) => `${p.kind} ${p.status} ${PAYOUT_IN_FLIGHT.includes(p.status)}`),
    );
  });
});
