/**
 * Ledger entries booked by hand at given instants (the ledger service stamps now), for the month close's
 * tests: one balanced live entry of merchant account `acme` with its postings in one statement (the
 * balance trigger checks each statement).
 */
import { type Kysely, sql } from 'kysely';
import type { Database } from '../../src/db/schema.ts';

let seq = 0;

/** Books one entry at `booked` (effect date `effective`, default the same); postings as [account, amount]. */
export async function bookEntry(
  db: Kysely<Database>,
  kind: string,
  id: string,
  effect: string,
  postings: [string, string][],
  booked: string,
  currency = 'BRL',
  effective = booked,
): Promise<void> {
  seq++;
  const { rows } = await sql<{ id: string }>`
    INSERT INTO journal_entries (idempotency_key, merchant_account, entity_kind, entity_id, effect, direction, seq, book,
      currency, amount, effective_at, created_at)
    VALUES (${`${kind}:acme:${id}:${effect}:${seq}`}, 'acme', ${kind}, ${id}, ${effect}, 1, 1, 'live', ${currency},
      ${postings[0]![1].replace('-', '')}::numeric, ${effective}::timestamptz, ${booked}::timestamptz) RETURNING id`.execute(
    db,
  );
  const entryId = rows[0]!.id;
  const values = postings.map(
    ([account, amount]) =>
      sql`(${entryId}::bigint, 'acme', ${currency}, 'live', ${account}, ${amount}::numeric, ${booked}::timestamptz)`,
  );
  await sql`INSERT INTO postings (entry_id, merchant_account, currency, book, account, amount, created_at)
    VALUES ${sql.join(values)}`.execute(db);
}

/** The merchant account `acme` with a live ledger in BRL and USD. */
export async function closeLedger(db: Kysely<Database>): Promise<void> {
  await sql`INSERT INTO merchant_accounts (name) VALUES ('acme')`.execute(db);
  await sql`INSERT INTO ledger_accounts (merchant_account, currency, book, name)
    SELECT 'acme', c, 'live', n FROM unnest(ARRAY['BRL', 'USD']) c,
      unnest(ARRAY['available', 'reserved', 'deposits', 'fees', 'payouts', 'refunds']) n`.execute(db);
}
