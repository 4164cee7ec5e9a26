/**
 * The mirrors' keys: the primary key leads with `entity_id` (and serves the look-ups by entity id alone),
 * `mirrors_created_ix` keys `created_at` alone, and the reference and intent indexes compare bytes. The
 * key keeps one row per (merchant account, kind, entity id); the readers of the keys (the payment look-up
 * and list, the full verification's pages) see every row, in their order.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyObservations } from '../../src/db/ledger/service.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { listPayments, lookupPayments, type PaymentCursor } from '../../src/db/read-models/payments.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import type { EntityKind } from '../../src/domain/statuses.ts';
import { obs } from './fixtures.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});

const primaryKey = async () =>
  (
    await sql<{ def: string }>`
      SELECT pg_get_constraintdef(c.oid) AS def FROM pg_constraint c
      WHERE c.conname = 'mirrors_pk' AND c.connamespace = current_schema()::regnamespace`.execute(t.db)
  ).rows[0]?.def;

const indexDef = async (name: string) =>
  (
    await sql<{ def: string }>`
      SELECT indexdef AS def FROM pg_indexes WHERE indexname = ${name} AND schemaname = current_schema()`.execute(
      t.db,
    )
  ).rows[0]?.def ?? null;

const rowsText = async () =>
  (
    await sql<{ r: string }>`
      SELECT concat_ws('|', merchant_account, entity_kind, entity_id, external_ref, intent_id, status,
        to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US')) AS r
      FROM mirrors ORDER BY 1`.execute(t.db)
  ).rows.map((x) => x.r);

/** The plan of `query` with sequential scans priced out, in one transaction (one connection). */
const planOf = (query: ReturnType<typeof sql>) =>
  t.db.transaction().execute(async (trx) => {
    await sql`SET LOCAL enable_seqscan = off`.execute(trx);
    const { rows } = await sql<{ 'QUERY PLAN': string }>`EXPLAIN ${query}`.execute(trx);
    return rows.map((r) => r['QUERY PLAN']).join('\n');
  });

describe('the mirror keys', () => {
  it('key a mirror by entity id first and keep one row per merchant account, kind and entity id', async () => {
    await sql`INSERT INTO merchant_accounts (name) VALUES ('m1'), ('m2')`.execute(t.db);
    await sql`
      INSERT INTO intents (intent_id, operation, merchant_account, entity_kind, external_ref, entity_id, currency,
        amount, outcome, created_at, request)
      VALUES ('i-1', 'deposit', 'm1', 'deposit', 'inv-1', '100', 'BRL', 10, 'created', '2026-11-20T10:00:00Z', '{}')`.execute(
      t.db,
    );
    // One entity id under two kinds and two merchant accounts: distinct mirrors under either key order.
    await sql`
      INSERT INTO mirrors (merchant_account, entity_kind, entity_id, external_ref, intent_id, status, created_at)
      VALUES ('m1', 'deposit', '100', 'inv-1', 'i-1', 'PENDING', '2026-11-20T10:00:00Z'),
             ('m1', 'cashout', '100', 'ext-1', NULL, 'COMPLETED', '2026-11-20T10:00:00Z'),
             ('m2', 'deposit', '100', NULL, NULL, NULL, '2026-11-20T10:00:00Z'),
             ('m2', 'refund', '200', NULL, NULL, 'PENDING', '2026-11-21T10:00:00Z')`.execute(t.db);
    const before = await rowsText();
    expect(before).toHaveLength(4);

    expect(await primaryKey()).toBe('PRIMARY KEY (entity_id, entity_kind, merchant_account)');
    expect(await indexDef('mirrors_entity_id_ix')).toBeNull();
    expect(await indexDef('mirrors_created_ix')).toContain('(created_at)');
    expect(await indexDef('mirrors_external_ref_ix')).toContain('external_ref text_pattern_ops');
    expect(await indexDef('mirrors_intent_ix')).toContain('intent_id text_pattern_ops');
    // One row per (merchant account, kind, entity id), the violation naming the key (the ledger retries on it).
    await expect(
      sql`INSERT INTO mirrors (merchant_account, entity_kind, entity_id) VALUES ('m1', 'deposit', '100')`.execute(
        t.db,
      ),
    ).rejects.toMatchObject({ code: '23505', constraint: 'mirrors_pk' });
    expect(await rowsText()).toEqual(before);
  });

  it('finds a payment by any of its ids through the keys, and lists every payment once, newest first', async () => {
    const ids = (rows: { kind: string; merchantAccount: string; entityId: string }[]) =>
      rows.map((r) => `${r.merchantAccount}/${r.kind}/${r.entityId}`);
    expect(ids(await lookupPayments(t.db, '100'))).toEqual([
      'm1/cashout/100',
      'm1/deposit/100',
      'm2/deposit/100',
    ]);
    expect(ids(await lookupPayments(t.db, '100', 'deposit_id'))).toEqual([
      'm1/deposit/100',
      'm2/deposit/100',
    ]);
    expect(ids(await lookupPayments(t.db, 'inv-1', 'invoice_id'))).toEqual(['m1/deposit/100']);
    expect(ids(await lookupPayments(t.db, 'ext-1', 'external_id'))).toEqual(['m1/cashout/100']);
    expect(ids(await lookupPayments(t.db, 'ext-1', 'invoice_id'))).toEqual([]);
    expect(ids(await lookupPayments(t.db, 'i-1', 'intent_id'))).toEqual(['m1/deposit/100']);
    expect(ids(await lookupPayments(t.db, 'i-1'))).toEqual(['m1/deposit/100']);

    // The entity id alone, the reference and the intent id are each read from an index.
    expect(
      await planOf(sql`SELECT 1 FROM mirrors m WHERE m.entity_kind = 'deposit' AND m.entity_id = '100'`),
    ).toContain('mirrors_pk');
    const any = await planOf(
      sql`SELECT 1 FROM mirrors m WHERE m.entity_id = 'x' OR m.external_ref = 'x' OR m.intent_id = 'x' OR m.bank_reference = 'x'`,
    );
    for (const name of [
      'mirrors_pk',
      'mirrors_external_ref_ix',
      'mirrors_intent_ix',
      'mirrors_bank_reference_ix',
    ])
      expect(any).toContain(name);

    // Pages of one: the keyset continues through rows of equal created_at in the order of the key.
    const all = ids(await listPayments(t.db, {}, 10, null));
    expect(all).toEqual(['m2/refund/200', 'm2/deposit/100', 'm1/deposit/100', 'm1/cashout/100']);
    const paged: string[] = [];
    let cursor: PaymentCursor | null = null;
    for (;;) {
      const page = await listPayments(t.db, {}, 1, cursor);
      if (page.length === 0) break;
      paged.push(...ids(page));
      const last = page[0]!;
      cursor = {
        key: last.key,
        merchantAccount: last.merchantAccount,
        kind: last.kind,
        entityId: last.entityId,
      };
    }
    expect(paged).toEqual(all);
    expect(ids(await listPayments(t.db, { merchantAccount: 'm1', kind: 'deposit' }, 10, null))).toEqual([
      'm1/deposit/100',
    ]);
  });

  it('verifies every mirror once when the full verification pages through them in the key order', async () => {
    const readings = (['deposit', 'cashout', 'refund'] as EntityKind[]).flatMap((kind, k) =>
      ['acme', 'zeta'].flatMap((account, a) =>
        ['7', '31', '500'].map((id, i) => obs(kind, id, 'PENDING', k * 10 + a * 3 + i, { account })),
      ),
    );
    await withLedgerTransaction(t.db, (trx) => applyObservations(trx, readings));
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM mirrors`.execute(t.db);
    for (const chunk of [1, 2, 5, 2_000]) {
      const result = await verifyLedger(t.db, { chunk });
      expect(result.entities).toBe(rows[0]!.n);
    }
  });
});
