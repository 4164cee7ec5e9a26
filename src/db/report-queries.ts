/**
 * The reads behind the workbooks and the page, over the ledger's tables (`schema.ts`). Sums are
 * computed by PostgreSQL on `numeric` and returned as text, then parsed to bigint minor units: an
 * amount never passes through a JavaScript number. Periods use the booking time of journal entries
 * (`journal_entries.created_at`), so a period's report never changes once the period is over, and
 * opening + movements = closing holds by construction of the same filter.
 */
import { type RawBuilder, sql } from 'kysely';
import { type Minor, parseLedgerMinor } from '../domain/money.ts';
import type { Db } from './schema.ts';

const accountFilter = (account: string | null, column = 'e.merchant_account') =>
  account === null ? sql`` : sql` AND ${sql.ref(column)} = ${account}`;

export interface AccountBalance {
  merchantAccount: string;
  currency: string;
  book: string;
  account: string;
  balance: Minor;
}

/** Balance of every ledger account from entries booked strictly before `instant`. */
export async function balancesBefore(
  db: Db,
  instant: Date,
  account: string | null,
): Promise<AccountBalance[]> {
  const { rows } = await sql<{
    merchant_account: string;
    currency: string;
    book: string;
    account: string;
    balance: string;
  }>`
    SELECT p.merchant_account, p.currency, p.book, p.account, sum(p.amount)::text AS balance
      FROM postings p JOIN journal_entries e ON e.id = p.entry_id
     WHERE e.created_at < ${instant}${accountFilter(account)}
     GROUP BY 1, 2, 3, 4
     ORDER BY 1, 2, 3, 4`.execute(db);
  return rows.map((r) => ({
    merchantAccount: r.merchant_account,
    currency: r.currency,
    book: r.book,
    account: r.account,
    balance: parseLedgerMinor(r.balance),
  }));
}

export interface Movement {
  book: string;
  currency: string;
  entityKind: string;
  effect: string;
  account: string;
  amount: Minor;
  /** Number of postings in the group (journal lines). */
  lines: number;
}

export interface LedgerTotals {
  /** Balances from entries booked before the period. */
  opening: AccountBalance[];
  /** Balances from entries booked before the period's end (summed, not derived from the movements). */
  closing: AccountBalance[];
  /** Postings booked in the period per book, currency, entity kind, effect and ledger account. */
  movements: Movement[];
}

/**
 * Opening balances, closing balances and the period's movements by effect in one pass over the
 * postings booked before `end`.
 */
export async function ledgerTotals(
  db: Db,
  start: Date,
  end: Date,
  account: string | null,
): Promise<LedgerTotals> {
  const { rows } = await sql<{
    merchant_account: string;
    currency: string;
    book: string;
    account: string;
    entity_kind: string;
    effect: string;
    before_start: string;
    in_period: string;
    lines: string;
    before_end: string;
  }>`
    SELECT p.merchant_account, p.currency, p.book, p.account, e.entity_kind, e.effect,
           coalesce(sum(p.amount) FILTER (WHERE e.created_at < ${start}), 0)::text AS before_start,
           coalesce(sum(p.amount) FILTER (WHERE e.created_at >= ${start}), 0)::text AS in_period,
           count(*) FILTER (WHERE e.created_at >= ${start})::text AS lines,
           sum(p.amount)::text AS before_end
      FROM postings p JOIN journal_entries e ON e.id = p.entry_id
     WHERE e.created_at < ${end}${accountFilter(account)}
     GROUP BY 1, 2, 3, 4, 5, 6`.execute(db);
  const balances = (pick: (r: (typeof rows)[number]) => string): AccountBalance[] => {
    const map = new Map<string, AccountBalance>();
    for (const r of rows) {
      const key = `${r.merchant_account}|${r.currency}|${r.book}|${r.account}`;
      const b = map.get(key) ?? {
        merchantAccount: r.merchant_account,
        currency: r.currency,
        book: r.book,
        account: r.account,
        balance: 0n,
      };
      b.balance += parseLedgerMinor(pick(r));
      map.set(key, b);
    }
    return [...map.entries()].sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)).map(([, b]) => b);
  };
  const movements = new Map<string, Movement>();
  for (const r of rows) {
    const lines = Number(r.lines);
    if (lines === 0) continue;
    const key = `${r.book}|${r.currency}|${r.entity_kind}|${r.effect}|${r.account}`;
    const m = movements.get(key) ?? {
      book: r.book,
      currency: r.currency,
      entityKind: r.entity_kind,
      effect: r.effect,
      account: r.account,
      amount: 0n,
      lines: 0,
    };
    m.amount += parseLedgerMinor(r.in_period);
    m.lines += lines;
    movements.set(key, m);
  }
  return {
    opening: balances((r) => r.before_start),
    closing: balances((r) => r.before_end),
    movements: [...movements.values()],
  };
}

/** Live entities (with a mirror) per kind with journal activity in [start, end): the entity sheets' rows. */
export async function activeEntityCounts(
  db: Db,
  start: Date,
  end: Date,
  account: string | null,
): Promise<Record<string, number>> {
  const { rows } = await sql<{ entity_kind: string; n: string }>`
    SELECT entity_kind, count(*)::text AS n FROM (
      SELECT DISTINCT e.entity_kind, e.merchant_account, e.entity_id, e.currency
        FROM journal_entries e
        JOIN mirrors m ON m.merchant_account = e.merchant_account AND m.entity_kind = e.entity_kind
                      AND m.entity_id = e.entity_id
       WHERE e.created_at >= ${start} AND e.created_at < ${end} AND e.book = 'live'${accountFilter(account)}
    ) x GROUP BY 1`.execute(db);
  return Object.fromEntries(rows.map((r) => [r.entity_kind, Number(r.n)]));
}

/** Gross credited in [start, end) on live deposits that were released early, per currency. */
export async function earlyReleasedCredits(
  db: Db,
  start: Date,
  end: Date,
  account: string | null,
): Promise<Map<string, Minor>> {
  const { rows } = await sql<{ currency: string; amount: string }>`
    SELECT e.currency, sum(e.amount * e.direction)::text AS amount
      FROM journal_entries e
      JOIN mirrors m ON m.merchant_account = e.merchant_account AND m.entity_kind = e.entity_kind
                    AND m.entity_id = e.entity_id
     WHERE e.created_at >= ${start} AND e.created_at < ${end} AND e.book = 'live' AND e.effect = 'credit'
       AND m.ever_early_released${accountFilter(account)}
     GROUP BY 1`.execute(db);
  return new Map(rows.map((r) => [r.currency, parseLedgerMinor(r.amount)]));
}

/** Merchant accounts known to the ledger. */
export async function merchantAccounts(db: Db): Promise<string[]> {
  const rows = await db.selectFrom('merchant_accounts').select('name').orderBy('name').execute();
  return rows.map((r) => r.name);
}

/**
 * Reads a query's rows in batches through a server-side cursor (`DECLARE ... CURSOR`, `FETCH n`), so
 * a million rows never sit in memory at once. Must run inside a transaction (`trx`). `onBatch` may
 * be async (to wait for a write stream to drain).
 */
export async function forEachBatch<Row>(
  trx: Db,
  query: RawBuilder<Row>,
  batchSize: number,
  onBatch: (rows: Row[]) => void | Promise<void>,
): Promise<number> {
  const name = `payrecon_cur_${Math.random().toString(36).slice(2, 10)}`;
  await sql`DECLARE ${sql.raw(name)} NO SCROLL CURSOR FOR ${query}`.execute(trx);
  let total = 0;
  const fetch = () => {
    const p = sql<Row>`FETCH ${sql.raw(String(batchSize))} FROM ${sql.raw(name)}`.execute(trx);
    // Awaited below; this only keeps a prefetch failing after an earlier error from going unhandled.
    p.catch(() => undefined);
    return p;
  };
  try {
    // The next batch is fetched while the current one is written: PostgreSQL works while we format.
    let next = fetch();
    for (;;) {
      const { rows } = await next;
      if (rows.length === 0) break;
      const more = rows.length === batchSize;
      if (more) next = fetch();
      total += rows.length;
      await onBatch(rows);
      if (!more) break;
    }
  } finally {
    await sql`CLOSE ${sql.raw(name)}`.execute(trx);
  }
  return total;
}

/** Number of rows a query would return (for progress). */
export async function countRows(db: Db, query: RawBuilder<unknown>): Promise<number> {
  const { rows } = await sql<{ n: string }>`SELECT count(*)::text AS n FROM (${query}) q`.execute(db);
  return Number(rows[0]?.n ?? 0);
}

export { accountFilter };
