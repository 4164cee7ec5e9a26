/**
 * What can be closed: the (merchant account, currency) pairs with a live ledger, and when each first
 * booked a posting. A month before that first posting has no figures at all, so it is neither listed
 * nor signed.
 */
import { sql } from 'kysely';
import { AppError } from '../../domain/errors.ts';
import type { Db } from '../schema.ts';

export interface CloseLedger {
  merchantAccount: string;
  currency: string;
  /** When its first live posting was booked; null: none yet. */
  firstPostingAt: Date | null;
}

/**
 * Every live ledger's first posting. The earliest hourly bucket of `ledger_movements` is read from its
 * key; the postings of that hour (and the one either side, for entries stamped apart from their
 * postings) then give the exact instant from the entries' creation index.
 */
export async function closeLedgers(
  db: Db,
  only: { merchantAccount: string; currency: string } | null = null,
): Promise<CloseLedger[]> {
  const { rows } = await sql<{ merchant_account: string; currency: string; first: Date | null }>`
    SELECT a.merchant_account, a.currency,
      coalesce((SELECT min(p.created_at) FROM journal_entries e JOIN postings p ON p.entry_id = e.id
        WHERE e.created_at >= f.bucket - interval '1 hour' AND e.created_at < f.bucket + interval '2 hours'
          AND p.merchant_account = a.merchant_account AND p.currency = a.currency AND p.book = 'live'),
        f.bucket) AS first
    FROM (SELECT DISTINCT merchant_account, currency FROM ledger_accounts WHERE book = 'live'
      ${only ? sql`AND merchant_account = ${only.merchantAccount} AND currency = ${only.currency}` : sql``}) a
    LEFT JOIN LATERAL (SELECT min(m.bucket) AS bucket FROM ledger_movements m
      WHERE m.merchant_account = a.merchant_account AND m.currency = a.currency AND m.book = 'live'
        AND m.hours = 1) f ON true
    ORDER BY a.merchant_account, a.currency`.execute(db);
  return rows.map((r) => ({
    merchantAccount: r.merchant_account,
    currency: r.currency,
    firstPostingAt: r.first === null ? null : new Date(r.first),
  }));
}

/**
 * The one check of a close's account and currency against the ledger (the command line, the page and
 * the services that sign): the live ledger of the pair, or NOT_FOUND naming the field (`account` or
 * `currency`, in `details.field`) and the ones the ledger has.
 */
export async function closeLedgerOf(db: Db, merchantAccount: string, currency: string): Promise<CloseLedger> {
  const [ledger] = await closeLedgers(db, { merchantAccount, currency });
  if (ledger) return ledger;
  const pairs = await db
    .selectFrom('ledger_accounts')
    .select(['merchant_account', 'currency'])
    .distinct()
    .where('book', '=', 'live')
    .orderBy('merchant_account')
    .orderBy('currency')
    .execute();
  const accounts = [...new Set(pairs.map((p) => p.merchant_account))];
  if (!accounts.includes(merchantAccount)) {
    throw new AppError(
      'NOT_FOUND',
      `no merchant account ${merchantAccount} in the ledger (${accounts.length ? `known: ${accounts.join(', ')}` : 'it has none yet'})`,
      { details: { field: 'account' } },
    );
  }
  const mine = pairs.filter((p) => p.merchant_account === merchantAccount).map((p) => p.currency);
  throw new AppError(
    'NOT_FOUND',
    `${merchantAccount} has no ledger in ${currency} (known: ${mine.join(', ')})`,
    {
      details: { field: 'currency' },
    },
  );
}
