/**
 * The write path of the cash leg's entries (src/domain/cash-leg.ts), a sibling of `writeBatch`: settlements
 * and bank matches have no mirror row and no status history, so they do not go through the batch's claim.
 * Everything else is as in `writeBatch`'s second statement, and the database keeps the same invariants
 * whichever path posts: one statement writes the merchant and ledger accounts, the entries (an idempotency
 * key already booked is skipped, with its postings) and their postings; the postings' statement triggers
 * check that each entry balances per currency in one book and merchant account on known ledger accounts,
 * and keep the running balances and movements in the same transaction.
 */
import { sql } from 'kysely';
import type { CashEntry } from '../../domain/cash-leg.ts';
import { formatAmount } from '../../domain/money.ts';
import type { Db } from '../schema.ts';

export interface CashEntryToBook {
  entry: CashEntry;
  /** When the money moved (a settlement's cut-off, a bank line's booking date). */
  effectiveAt: Date;
  /** What the entry stands on (a bank match's line and settlements), JSON; null for none. */
  memo?: Record<string, unknown> | null;
}

/**
 * Entries per statement: each statement's triggers update a balance row once per account it touches. A
 * caller with many entries to book builds and passes them this many at a time, so they are never all in
 * memory at once.
 */
export const CASH_ENTRIES_PER_STATEMENT = 5_000;

/**
 * Books the entries whose key is not booked yet (an entry given twice is booked once, the first given);
 * returns the keys it booked. Many entries go in a few statements, never one per entry: a balance row
 * updated once per statement stays one row version, where one update per entry in a long transaction
 * leaves a chain of versions that every next update walks.
 */
export async function writeCashEntries(db: Db, entries: readonly CashEntryToBook[]): Promise<string[]> {
  const seen = new Set<string>();
  const rows = entries.filter((e) => {
    if (e.entry.postings.length === 0 || seen.has(e.entry.idempotencyKey)) return false;
    seen.add(e.entry.idempotencyKey);
    return true;
  });
  const booked: string[] = [];
  for (let i = 0; i < rows.length; i += CASH_ENTRIES_PER_STATEMENT) {
    booked.push(...(await writeChunk(db, rows.slice(i, i + CASH_ENTRIES_PER_STATEMENT))));
  }
  return booked;
}

async function writeChunk(db: Db, rows: readonly CashEntryToBook[]): Promise<string[]> {
  const accounts = new Map<string, [string, string, string]>();
  const postings: { k: string; c: string; n: string; x: string; o: number }[] = [];
  for (const { entry } of rows) {
    entry.postings.forEach((p, i) => {
      accounts.set(`${entry.account}\u0000${p.currency}\u0000${p.account}`, [
        entry.account,
        p.currency,
        p.account,
      ]);
      postings.push({
        k: entry.idempotencyKey,
        c: p.currency,
        n: p.account,
        x: formatAmount(p.amount),
        o: i,
      });
    });
  }
  // Accounts in key order, as every writer of them inserts.
  const accountRows = [...accounts.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([, v]) => v);
  const merchants = [...new Set(rows.map((r) => r.entry.account))].sort();
  const e = rows.map((r) => r.entry);
  const { rows: out } = await sql<{ key: string }>`
    WITH ma AS (
      INSERT INTO merchant_accounts (name) SELECT unnest(${merchants}::text[]) ON CONFLICT DO NOTHING
    ), a AS (
      INSERT INTO ledger_accounts (merchant_account, currency, book, name)
      SELECT a, c, 'live', n FROM unnest(${accountRows.map((r) => r[0])}::text[], ${accountRows.map((r) => r[1])}::text[],
        ${accountRows.map((r) => r[2])}::text[]) AS v(a, c, n)
      ON CONFLICT DO NOTHING
    ), e AS (
      INSERT INTO journal_entries (idempotency_key, merchant_account, entity_kind, entity_id, effect, direction, seq,
        book, currency, amount, fee_currency, fee_amount, effective_at, memo, rate)
      SELECT k, a, kind, id, effect, direction, seq, 'live', c, amount, CASE WHEN fee IS NULL THEN NULL ELSE c END, fee,
        at, memo, rate
      FROM unnest(${e.map((x) => x.idempotencyKey)}::text[], ${e.map((x) => x.account)}::text[],
        ${e.map((x) => x.kind)}::text[], ${e.map((x) => x.entityId)}::text[], ${e.map((x) => x.effect)}::text[],
        ${e.map((x) => x.direction)}::smallint[], ${e.map((x) => x.seq)}::int[], ${e.map((x) => x.currency)}::text[],
        ${e.map((x) => formatAmount(x.amount))}::numeric[],
        ${e.map((x) => (x.feeAmount === null ? null : formatAmount(x.feeAmount)))}::numeric[],
        ${rows.map((r) => r.effectiveAt.toISOString())}::timestamptz[],
        ${rows.map((r) => (r.memo ? JSON.stringify(r.memo) : null))}::jsonb[], ${e.map((x) => x.rate)}::numeric[])
        AS v(k, a, kind, id, effect, direction, seq, c, amount, fee, at, memo, rate)
      ON CONFLICT (idempotency_key) DO NOTHING
      RETURNING id, idempotency_key, merchant_account, book
    ), p AS (
      INSERT INTO postings (entry_id, merchant_account, currency, book, account, amount)
      SELECT e.id, e.merchant_account, v.c, e.book, v.n, v.x
      FROM unnest(${postings.map((p) => p.k)}::text[], ${postings.map((p) => p.c)}::text[],
        ${postings.map((p) => p.n)}::text[], ${postings.map((p) => p.x)}::numeric[], ${postings.map((p) => p.o)}::int[])
        AS v(k, c, n, x, o)
        JOIN e ON e.idempotency_key = v.k
      ORDER BY e.id, v.o
    )
    SELECT idempotency_key AS key FROM e`.execute(db);
  return out.map((r) => r.key);
}
