import { type Kysely, sql } from 'kysely';
import { applyObservations } from '../../src/db/ledger/service.ts';
import type { Database } from '../../src/db/schema.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
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

/**
 * A reconciler's batches for the concurrency tests: its own deposits (`prefix`), live and test, in two
 * currencies, completed with fees; `reversed` gives them in the opposite order (another reconciler's).
 */
export function depositBatches(
  prefix: string,
  reversed: boolean,
  size: { batches: number; perBatch: number },
): Observation[][] {
  const out: Observation[][] = [];
  for (let b = 0; b < size.batches; b++) {
    const batch: Observation[] = [];
    for (let e = 0; e < size.perBatch; e++) {
      const currency = (e + b) % 2 === 0 ? 'BRL' : 'USD';
      batch.push(
        obs('deposit', `${prefix}-${b}-${e}`, 'COMPLETED', b + 1, {
          currency,
          amount: BigInt(1_000 + 7 * e + b),
          feeAmount: BigInt(1 + e),
          feeCurrency: currency,
          test: e % 5 === 0,
        }),
      );
    }
    out.push(reversed ? batch.reverse() : batch);
  }
  return reversed ? out.reverse() : out;
}

let booked = 0;
/**
 * One balanced live entry booked by hand at `at` (ISO text), through the postings' triggers: `debit`
 * +amount and `credit` -amount (amount as decimal text), of a deposit of its own. The ledger accounts must
 * exist.
 */
export async function bookAt(
  db: Kysely<Database>,
  at: string,
  effect: string,
  direction: 1 | -1,
  debit: string,
  credit: string,
  amount: string,
  currency = 'BRL',
  account = 'acme',
): Promise<void> {
  booked += 1;
  const { rows } = await sql<{ id: string }>`
    INSERT INTO journal_entries (idempotency_key, merchant_account, entity_kind, entity_id, effect, direction, seq, book,
      currency, amount, effective_at, created_at)
    VALUES (${`deposit:${account}:e${booked}:${effect}`}, ${account}, 'deposit', ${`e${booked}`}, ${effect}, ${direction}, 1, 'live',
      ${currency}, ${amount}::numeric, ${at}::timestamptz, ${at}::timestamptz) RETURNING id`.execute(db);
  await sql`INSERT INTO postings (entry_id, merchant_account, currency, book, account, amount, created_at)
    VALUES (${rows[0]!.id}::bigint, ${account}, ${currency}, 'live', ${debit}, ${amount}::numeric, ${at}::timestamptz),
      (${rows[0]!.id}::bigint, ${account}, ${currency}, 'live', ${credit}, -${amount}::numeric, ${at}::timestamptz)`.execute(
    db,
  );
}

/**
 * Mirror rows (alias `m`) with their next poll as `next_poll_at` (their `poll_schedule` row's; null when
 * the entity is not scheduled): a query to refine with `m.`-qualified columns.
 */
export function mirrorsWithPolls(db: Kysely<Database>) {
  return db
    .selectFrom('mirrors as m')
    .leftJoin('poll_schedule as s', (j) =>
      j
        .onRef('s.merchant_account', '=', 'm.merchant_account')
        .onRef('s.entity_kind', '=', 'm.entity_kind')
        .onRef('s.entity_id', '=', 'm.entity_id'),
    )
    .select('s.next_poll_at');
}

/** Schedules an existing mirror's next poll at `at` (a test's setup; null: none). */
export async function scheduleAt(
  db: Kysely<Database>,
  account: string,
  kind: EntityKind,
  entityId: string,
  at: Date | null,
): Promise<void> {
  await sql`DELETE FROM poll_schedule WHERE merchant_account = ${account} AND entity_kind = ${kind}
    AND entity_id = ${entityId}`.execute(db);
  if (at !== null)
    await sql`INSERT INTO poll_schedule (merchant_account, entity_kind, entity_id, next_poll_at)
      VALUES (${account}, ${kind}, ${entityId}, ${at})`.execute(db);
}

/**
 * Applies the observations in one transaction; returns the updates and HOT updates it made to `table`
 * (`pg_stat_xact_user_tables`' counts after less before: a backend's counts not yet flushed to the
 * cumulative statistics stay in it across transactions).
 */
export async function applyCountingUpdates(
  db: Kysely<Database>,
  table: string,
  o: Observation[],
): Promise<{ updated: number; hot: number }> {
  return withLedgerTransaction(db, async (trx) => {
    const counts = async () => {
      const { rows } = await sql<{ upd: string; hot: string }>`
        SELECT n_tup_upd::text AS upd, n_tup_hot_upd::text AS hot FROM pg_stat_xact_user_tables
        WHERE relname = ${table} AND schemaname = current_schema()`.execute(trx);
      return { updated: Number(rows[0]?.upd ?? 0), hot: Number(rows[0]?.hot ?? 0) };
    };
    const before = await counts();
    await applyObservations(trx, o);
    const after = await counts();
    return { updated: after.updated - before.updated, hot: after.hot - before.hot };
  });
}

/**
 * Brings `mirror_watches` to the mirrors' generated sets, as the ledger's write statement keeps it, for a
 * test that writes mirror rows directly (behind the service's back): side rows of mirrors with no set go, the
 * others are written.
 */
export async function watchMirrors(db: Kysely<Database>): Promise<void> {
  await sql`
    DELETE FROM mirror_watches w WHERE NOT EXISTS (SELECT 1 FROM mirrors m WHERE m.entity_id = w.entity_id
      AND m.entity_kind = w.entity_kind AND m.merchant_account = w.merchant_account AND m.watch IS NOT NULL)`.execute(
    db,
  );
  await sql`
    INSERT INTO mirror_watches (entity_id, entity_kind, merchant_account, watch, watch_at, currency, test)
    SELECT entity_id, entity_kind, merchant_account, watch, watch_at, currency, test FROM mirrors WHERE watch IS NOT NULL
    ON CONFLICT (entity_id, entity_kind, merchant_account) DO UPDATE SET watch = excluded.watch,
      watch_at = excluded.watch_at, currency = excluded.currency, test = excluded.test`.execute(db);
}
