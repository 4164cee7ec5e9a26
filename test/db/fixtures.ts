import { type Kysely, sql } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import { formatAmount, type Minor } from '../../src/domain/money.ts';
import { type Intent, NO_FACTS, type Observation } from '../../src/domain/observation.ts';
import type { EntityKind } from '../../src/domain/statuses.ts';

let counter = 0;

export function obs(
  kind: EntityKind,
  entityId: string,
  status: string | null,
  at: number,
  extra: Partial<Observation> = {},
): Observation {
  counter += 1;
  return {
    eventId: `ev-${kind}-${entityId}-${status}-${at}-${counter}`,
    kind,
    account: 'acme',
    entityId,
    externalRef: kind === 'refund' ? null : `ref-${entityId}`,
    status,
    observedAt: new Date(Date.UTC(2026, 10, 1) + at * 60_000),
    source: 'poll',
    currency: kind === 'cashout' ? null : 'BRL',
    amount: kind === 'cashout' ? null : 10_000n,
    ...NO_FACTS,
    details: {},
    ...extra,
  };
}

export function intent(
  kind: EntityKind,
  entityId: string,
  amount: Minor,
  extra: Partial<Intent> = {},
): Intent {
  return {
    intentId: `in-${kind}-${entityId}`,
    operation: kind,
    account: 'acme',
    externalRef: `ref-${entityId}`,
    entityId,
    currency: 'BRL',
    amount,
    expectedFee: null,
    test: false,
    crypto: false,
    feeOnPayer: false,
    parentDepositId: null,
    outcome: 'created',
    createdAt: new Date(Date.UTC(2026, 10, 1)),
    request: {},
    response: null,
    ...extra,
  };
}

/**
 * A balanced live entry of deposit `id` of acme booked by hand at `at` (the service stamps now, so this
 * is how a test spreads postings over past days): `available` +cents and `other` (default `deposits`)
 * -cents. Creates the merchant and ledger accounts it needs.
 */
export async function postAt(
  db: Kysely<Database>,
  id: string,
  cents: bigint,
  at: Date,
  options: { currency?: string; other?: string; effect?: string } = {},
): Promise<void> {
  const { currency = 'BRL', other = 'deposits', effect = 'credit' } = options;
  await sql`INSERT INTO merchant_accounts (name) VALUES ('acme') ON CONFLICT DO NOTHING`.execute(db);
  await sql`INSERT INTO ledger_accounts (merchant_account, currency, book, name)
    SELECT 'acme', ${currency}, 'live', unnest(ARRAY['available', ${other}]) ON CONFLICT DO NOTHING`.execute(
    db,
  );
  const { rows } = await sql<{ id: string }>`
    INSERT INTO journal_entries (idempotency_key, merchant_account, entity_kind, entity_id, effect, direction, seq, book,
      currency, amount, effective_at, created_at)
    VALUES (${`manual:${id}:${effect}:${at.getTime()}`}, 'acme', 'deposit', ${id}, ${effect}, 1, 1, 'live', ${currency},
      ${formatAmount(cents)}::numeric, ${at}, ${at}) RETURNING id`.execute(db);
  await sql`INSERT INTO postings (entry_id, merchant_account, currency, book, account, amount, created_at)
    VALUES (${rows[0]!.id}::bigint, 'acme', ${currency}, 'live', 'available', ${formatAmount(cents)}::numeric, ${at}),
      (${rows[0]!.id}::bigint, 'acme', ${currency}, 'live', ${other}, ${formatAmount(-cents)}::numeric, ${at})`.execute(
    db,
  );
}
