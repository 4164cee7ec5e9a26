/**
 * The cash leg's part of `payrecon db verify` (src/db/ledger/verify.ts runs it with the ledger's checks).
 */
import { sql } from 'kysely';
import type { Db } from '../schema.ts';

/**
 * The cash leg's checks, each failure named: an effect of a settlement or bank match applied more often
 * than reversed plus once; a settlement whose postings to `available` (its gross, negated) and to
 * settlements in transit (its net) differ from its report row; a report row naming a merchant account
 * with something to book that is not booked. Incremental: the entries booked and the rows imported since.
 */
export async function verifyCashLeg(db: Db, since: Date | null): Promise<string[]> {
  const recent = since === null ? sql`` : sql`AND e.created_at >= ${since}`;
  const counts = await sql<{ key: string; n: number }>`
    SELECT min(e.idempotency_key) AS key, sum(e.direction)::int AS n
    FROM journal_entries e
    WHERE e.entity_kind IN ('settlement', 'bank_match') AND (${since}::timestamptz IS NULL OR EXISTS (
      SELECT 1 FROM journal_entries r WHERE r.entity_id = e.entity_id AND r.entity_kind = e.entity_kind
        AND r.merchant_account = e.merchant_account AND r.created_at >= ${since}))
    GROUP BY e.merchant_account, e.entity_kind, e.entity_id, e.effect
    HAVING sum(e.direction) NOT IN (0, 1)`.execute(db);
  const amounts = await sql<{
    merchant_account: string;
    settlement_id: string;
    available: string;
    in_transit: string;
    gross: string | null;
    net: string | null;
  }>`
    WITH b AS (
      SELECT e.merchant_account, e.entity_id,
        coalesce(sum(p.amount) FILTER (WHERE p.account = 'available'), 0) AS available,
        coalesce(sum(p.amount) FILTER (WHERE p.account = 'settlements_in_transit'), 0) AS in_transit
      FROM journal_entries e JOIN postings p ON p.entry_id = e.id
      WHERE e.entity_kind = 'settlement' ${recent}
      GROUP BY e.merchant_account, e.entity_id)
    SELECT b.merchant_account, b.entity_id AS settlement_id, b.available::text, b.in_transit::text,
      s.gross::text, s.net::text
    FROM b LEFT JOIN LATERAL (SELECT s.gross, s.net FROM provider_settlement_rows s
      WHERE s.settlement_id = b.entity_id AND s.account = b.merchant_account ORDER BY s.identity LIMIT 1) s ON true
    WHERE s.gross IS NULL OR b.available <> -s.gross OR b.in_transit <> s.net
    ORDER BY 1, 2`.execute(db);
  const unbooked = await sql<{ account: string; settlement_id: string }>`
    SELECT s.account, s.settlement_id FROM provider_settlement_rows s
    ${since === null ? sql`` : sql`JOIN imports i ON i.id = s.import_id AND i.imported_at >= ${since}`}
    WHERE s.account IS NOT NULL AND (s.gross <> 0 OR s.fees <> 0 OR s.net <> 0)
      AND NOT EXISTS (SELECT 1 FROM journal_entries e WHERE e.entity_id = s.settlement_id
        AND e.entity_kind = 'settlement' AND e.merchant_account = s.account)
    ORDER BY 1, 2`.execute(db);
  return [
    ...counts.rows.map((r) => `${r.key}: applied ${r.n} times net`),
    ...amounts.rows.map((r) =>
      r.gross === null
        ? `settlement ${r.merchant_account}/${r.settlement_id} is booked but not in a settlement report`
        : `settlement ${r.merchant_account}/${r.settlement_id}: booked available ${r.available}, in transit ` +
          `${r.in_transit}; reported gross ${r.gross}, net ${r.net}`,
    ),
    ...unbooked.rows.map((r) => `settlement ${r.account}/${r.settlement_id} is reported but not booked`),
  ];
}
