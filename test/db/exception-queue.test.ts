/**
 * The exception queue's service levels and bulk moves on the real PostgreSQL: each
 * exception's due time is first seen plus the strictest matching rule of the table (type, severity, a
 * currency's amount threshold) or the default; overdue is unresolved and past it, in the list, its
 * filter, the age-bucket counts and the metrics; a bulk acknowledge or resolve changes every selected
 * row with one note and an audit event each, leaves the ones it does not apply to, and keeps an
 * ILLEGAL_TRANSITION for its decision. The configured table is parsed by src/config.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { getQueueItem, listQueue, type QueueRow, queueAgeCounts } from '../../src/db/exceptions/queue.ts';
import { bulkChangeState } from '../../src/db/exceptions/queue-service.ts';
import { exceptionFigures } from '../../src/db/read-models/metrics.ts';
import { DEFAULT_SLA_TABLE, type SlaTable } from '../../src/domain/exception-sla.ts';
import { queueCsv } from '../../src/reports/exception-csv.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

const NOW = new Date('2026-11-20T12:00:00Z');
const HOUR = 3_600_000;
const ago = (hours: number) => new Date(NOW.getTime() - hours * HOUR);

const TABLE: SlaTable = {
  defaultMinutes: 24 * 60,
  rules: [
    { severity: 'high', minutes: 8 * 60 },
    { type: 'AMOUNT_MISMATCH', minutes: 4 * 60 },
    { currency: 'BRL', minAmount: 1_000_000n, minutes: 2 * 60 }, // 10,000.00 BRL and more
  ],
};

let t: TestDatabase;

/** One mirror and one exception on it; returns the exception id. */
async function seed(
  entityId: string,
  e: { type: string; severity: string; hoursAgo: number; currency?: string; amount?: string; state?: string },
): Promise<string> {
  await t.db
    .insertInto('mirrors')
    .values({
      merchant_account: 'acme',
      entity_kind: 'deposit',
      entity_id: entityId,
      external_ref: `inv-${entityId}`,
      status: 'PENDING',
      status_since: ago(e.hoursAgo),
      currency: e.currency ?? 'BRL',
      amount: e.amount ?? '100.00',
      fee_currency: null,
      fee_amount: null,
      status_reason: null,
      payer_verification: null,
      rejection_code: null,
      rejection_reason: null,
      parent_deposit_id: null,
      expires_at: null,
      details: JSON.stringify({}),
      intent_id: null,
      first_seen_at: ago(e.hoursAgo),
      last_seen_at: ago(e.hoursAgo),
      completed_at: null,
    })
    .execute();
  const row = await t.db
    .insertInto('exceptions')
    .values({
      type: e.type,
      merchant_account: 'acme',
      entity_kind: 'deposit',
      entity_id: entityId,
      severity: e.severity as 'low',
      state: (e.state ?? 'open') as 'open',
      first_seen_at: ago(e.hoursAgo),
      last_seen_at: ago(e.hoursAgo),
      details: JSON.stringify({}),
      resolution_note: null,
      resolved_by: null,
      resolved_at: null,
      acknowledged_by: null,
      acknowledged_at: null,
      acknowledgement_note: null,
      fact: null,
      reopened_at: null,
      reopen_reason: null,
      previous: null,
      decision: null,
      assignee: null,
      assigned_at: null,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  return String(row.id);
}

const ids: Record<string, string> = {};
const byId = (rows: readonly QueueRow[]) => new Map(rows.map((r) => [r.id, r]));

beforeAll(async () => {
  t = await createTestDatabase();
  // a: low, 100 BRL, 5 h old -> default 24 h: due in 19 h.
  ids.a = await seed('a', { type: 'STUCK', severity: 'low', hoursAgo: 5 });
  // b: high, 9 h old -> 8 h: overdue by 1 h.
  ids.b = await seed('b', { type: 'STUCK', severity: 'high', hoursAgo: 9 });
  // c: AMOUNT_MISMATCH and high -> the stricter 4 h wins; 5 h old: overdue.
  ids.c = await seed('c', { type: 'AMOUNT_MISMATCH', severity: 'high', hoursAgo: 5 });
  // d: 25,000.00 BRL -> 2 h; 3 h old: overdue. e: the same amount in USD -> default; not overdue.
  ids.d = await seed('d', { type: 'STUCK', severity: 'low', hoursAgo: 3, amount: '25000.00' });
  ids.e = await seed('e', {
    type: 'STUCK',
    severity: 'low',
    hoursAgo: 3,
    amount: '25000.00',
    currency: 'USD',
  });
  // f: exactly at the threshold (10,000.00 BRL, inclusive) -> 2 h; 1 h old: not yet overdue.
  ids.f = await seed('f', { type: 'STUCK', severity: 'low', hoursAgo: 1, amount: '10000.00' });
  // g: resolved long ago: never overdue. h: an illegal move, 2 days old.
  ids.g = await seed('g', { type: 'STUCK', severity: 'high', hoursAgo: 72, state: 'resolved' });
  ids.h = await seed('h', { type: 'ILLEGAL_TRANSITION', severity: 'critical', hoursAgo: 48 });
});

afterAll(async () => {
  await t?.drop();
});

describe('service levels', () => {
  it('gives each exception first seen plus its strictest matching rule, else the default', async () => {
    const rows = byId(await listQueue(t.db, { state: undefined }, NOW, TABLE, 100, null));
    const resolved = byId(await listQueue(t.db, { state: 'resolved' }, NOW, TABLE, 100, null));
    const dueHours = (id: string) => {
      const r = rows.get(id) ?? resolved.get(id);
      if (!r) throw new Error(`no row ${id}`);
      return (r.dueAt.getTime() - r.firstSeenAt.getTime()) / HOUR;
    };
    expect(
      Object.fromEntries(['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].map((k) => [k, dueHours(ids[k]!)])),
    ).toEqual({ a: 24, b: 8, c: 4, d: 2, e: 24, f: 2, g: 8, h: 24 });
    const overdue = [...rows.values()].filter((r) => r.overdue).map((r) => r.entityId);
    expect(overdue.sort()).toEqual(['b', 'c', 'd', 'h']);
    expect(resolved.get(ids.g!)?.overdue).toBe(false);
  });

  it('filters on overdue, counts per age bucket, and the metrics count the same', async () => {
    const over = await listQueue(t.db, { overdue: true }, NOW, TABLE, 100, null);
    expect(over.map((r) => r.entityId).sort()).toEqual(['b', 'c', 'd', 'h']);
    const notOver = await listQueue(t.db, { overdue: false, currency: 'BRL' }, NOW, TABLE, 100, null);
    expect(notOver.map((r) => r.entityId).sort()).toEqual(['a', 'f']);
    // The amount range is inclusive, on the entity's amount.
    const big = await listQueue(
      t.db,
      { minAmount: 1_000_000n, maxAmount: 2_500_000n },
      NOW,
      TABLE,
      100,
      null,
    );
    expect(big.map((r) => r.entityId).sort()).toEqual(['d', 'e', 'f']);
    expect(await queueAgeCounts(t.db, { age: 'lt1d' }, NOW, TABLE)).toEqual({
      lt1d: 6,
      '1to3d': 1,
      '3to7d': 0,
      gt7d: 0,
    });
    const figures = await exceptionFigures(t.db, TABLE, NOW);
    expect(figures.reduce((n, f) => n + f.overdue, 0)).toBe(4);
    // Keyset: two pages of three, then the rest.
    const first = await listQueue(t.db, {}, NOW, TABLE, 3, null);
    const second = await listQueue(t.db, {}, NOW, TABLE, 3, first[2]!.id);
    expect([...first, ...second].map((r) => r.entityId)).toEqual(['a', 'b', 'c', 'd', 'e', 'f']);
  });

  it('with the default table: critical in 2 hours, high in 8, anything else a day', async () => {
    const rows = byId(await listQueue(t.db, {}, NOW, DEFAULT_SLA_TABLE, 100, null));
    const hours = (k: string) => {
      const r = rows.get(ids[k]!)!;
      return (r.dueAt.getTime() - r.firstSeenAt.getTime()) / HOUR;
    };
    expect([hours('a'), hours('b'), hours('h')]).toEqual([24, 8, 2]);
  });

  it('is configured by PAYRECON_EXCEPTION_SLA (rules) and PAYRECON_EXCEPTION_SLA_MINUTES (default)', () => {
    const config = loadConfig({
      PAYRECON_EXCEPTION_SLA: JSON.stringify([
        { type: 'AMOUNT_MISMATCH', minutes: 240 },
        { currency: 'BRL', minAmount: '10000.00', minutes: 120 },
      ]),
      PAYRECON_EXCEPTION_SLA_MINUTES: '600',
    });
    expect(config.exceptions.sla).toEqual({
      defaultMinutes: 600,
      rules: [
        { type: 'AMOUNT_MISMATCH', minutes: 240 },
        { currency: 'BRL', minAmount: 1_000_000n, minutes: 120 },
      ],
    });
    expect(loadConfig({}).exceptions.sla).toEqual(DEFAULT_SLA_TABLE);
    const refused = (rules: unknown) => {
      try {
        loadConfig({ PAYRECON_EXCEPTION_SLA: JSON.stringify(rules) });
        return 'accepted';
      } catch (err) {
        return (err as Error).message;
      }
    };
    expect(refused([{ minAmount: '5.00', severity: 'low', minutes: 5 }])).toBe(
      'PAYRECON_EXCEPTION_SLA[0].currency: is required with minAmount',
    );
    expect(refused([{ minutes: 5 }])).toBe(
      'PAYRECON_EXCEPTION_SLA[0]: must name a type, a severity or a currency',
    );
    expect(refused([{ type: 'NOPE', minutes: 5 }])).toMatch(
      /^PAYRECON_EXCEPTION_SLA\[0\]\.type: must be an exception type/,
    );
    expect(refused([{ currency: 'BRL', minAmount: '1.005', minutes: 5 }])).toMatch(
      /^PAYRECON_EXCEPTION_SLA\[0\]\.minAmount: must be a decimal amount/,
    );
    expect(refused([{ severity: 'high', minutes: 0 }])).toBe(
      'PAYRECON_EXCEPTION_SLA[0].minutes: must be an integer from 1 to 525600',
    );
  });

  it('exports due time, overdue and age bucket in the CSV', async () => {
    const csv = queueCsv(await listQueue(t.db, { overdue: true }, NOW, TABLE, 100, null), NOW).toString(
      'utf8',
    );
    const [header, ...lines] = csv.trimEnd().split('\r\n');
    const cols = header!.split(',');
    const b = lines.map((l) => l.split(',')).find((c) => c[cols.indexOf('entity_id')] === 'b')!;
    expect(b[cols.indexOf('due_at')]).toBe(new Date(ago(9).getTime() + 8 * HOUR).toISOString());
    expect(b[cols.indexOf('overdue')]).toBe('true');
    expect(b[cols.indexOf('age_bucket')]).toBe('under 1 day');
    expect(lines).toHaveLength(4);
  });
});

describe('bulk moves', () => {
  it('acknowledges the selected rows with one note, each with its audit event; the rest stay', async () => {
    const r = await bulkChangeState(
      t.db,
      [ids.a!, ids.b!, ids.g!, 'nope', '999999'],
      {
        kind: 'state',
        state: 'acknowledged',
        note: 'seen, waiting for the bank',
        from: ['open', 'in_review'],
      },
      'ana',
      NOW,
    );
    expect(r).toEqual({ changed: [ids.a, ids.b], unchanged: [ids.g], notFound: ['nope', '999999'] });
    for (const id of [ids.a!, ids.b!]) {
      const item = (await getQueueItem(t.db, id, NOW, TABLE))!;
      expect(item.exception).toMatchObject({
        state: 'acknowledged',
        acknowledgedBy: 'ana',
        acknowledgementNote: 'seen, waiting for the bank',
        lastNote: { actor: 'ana', note: 'seen, waiting for the bank' },
      });
      expect(item.events.map((e) => [e.actor, e.action, e.fromState, e.toState, e.note])).toEqual([
        ['ana', 'state', 'open', 'acknowledged', 'seen, waiting for the bank'],
      ]);
    }
    // Acknowledged and still past due: overdue until resolved.
    expect((await getQueueItem(t.db, ids.b!, NOW, TABLE))!.exception.overdue).toBe(true);
  });

  it('resolves in bulk but leaves an ILLEGAL_TRANSITION for its decision', async () => {
    const r = await bulkChangeState(
      t.db,
      [ids.b!, ids.c!, ids.h!],
      { kind: 'state', state: 'resolved', note: 'provider confirmed' },
      'bo',
      NOW,
    );
    expect(r).toEqual({ changed: [ids.b, ids.c], unchanged: [ids.h], notFound: [] });
    const h = (await getQueueItem(t.db, ids.h!, NOW, TABLE))!;
    expect([h.exception.state, h.events.length]).toEqual(['open', 0]);
    const c = (await getQueueItem(t.db, ids.c!, NOW, TABLE))!;
    expect(c.exception).toMatchObject({
      state: 'resolved',
      resolvedBy: 'bo',
      resolutionNote: 'provider confirmed',
      overdue: false,
    });
    const over = await listQueue(t.db, { overdue: true }, NOW, TABLE, 100, null);
    expect(over.map((x) => x.entityId).sort()).toEqual(['d', 'h']);
  });
});
