/**
 * PROVIDER_BALANCE_DRIFT: the balance a settlement report row gives (`balance_at_cutoff`, what the
 * provider held unsettled for the merchant account at the cut-off, before the payout) against the
 * ledger's `available` of that merchant account and currency at the same cut-off. Run by every matching
 * run, in its transaction, after the report rows are matched.
 *
 * What is checked. Of each merchant account and balance currency, the latest cut-off whose row gives a
 * balance and which the transactions report reaches (it holds that settlement's own `settlement` row, so
 * it dates the provider's moves around the cut-off). `available` is cumulative, so a difference that lasts
 * shows at the latest cut-off; one that was only timing does not. At most one PROVIDER_BALANCE_DRIFT is
 * open per merchant account and currency: that of the latest cut-off checked.
 *
 * The ledger at the cut-off. A ledger entry's `effective_at` is when payrecon read the status, not when
 * the provider moved it (a reading comes after the move, and a provider running on another clock, as the
 * sandbox under `payrecon up` does, makes the two incomparable); the provider's own time of each move is
 * the transactions report's `updated_at`. So the ledger's figure is its `available` now, taken back to the
 * cut-off with the provider's dates:
 * - plus the grosses of the settlements booked with a cut-off at or after this one (the ledger's
 *   settlement entries carry their cut-off: the settlements before it reduce the figure, as they reduce
 *   the provider's unsettled balance);
 * - less, for each payment the provider moved at or after the cut-off (a report row of it dated then,
 *   matched to the payment), what the payment adds to `available` now, plus what the provider's rows of it
 *   dated before the cut-off add: such a payment counts as the provider had it at the cut-off;
 * - less, for each payment the ledger moved after the latest transactions report was imported while it
 *   agreed with that report, what the move added: the report could not list it, so the provider made it
 *   after the download, after the cut-off. Every other payment counts as the ledger has it now, so one the
 *   ledger has not caught up with shows as a difference until it has;
 * - less what the payments no report row names add, of those the ledger first booked after the last
 *   transactions report but one that brought rows was imported: what the reports cannot have listed yet is
 *   not placed before the cut-off; a payment still named by no report a whole import after the ledger had
 *   it is, with all it holds now (a payment the provider never made among them).
 *
 * Timing. A move the provider made before the cut-off that the ledger has not read yet is a difference
 * at first, gone once the ledger reads it. So every check is kept (`provider_balance_checks`, one row per
 * merchant account and currency, with since when its checks have differed without a break), and a
 * difference raises only when the checks have differed for the ledger's wait (`waitMs`,
 * PAYRECON_MATCH_LEDGER_WAIT_SECONDS, as report rows wait): the first matching run after the wait raises
 * it, and one check that agrees starts the wait again. An open drift resolves itself, as payrecon, when
 * the figures agree (the ledger caught up, or a later cut-off agrees); an open drift of an earlier cut-off
 * is resolved when a later cut-off is checked, naming it. The check is a function of the stored lines and
 * the ledger: importing a file again changes nothing.
 */
import { sql } from 'kysely';
import type { ExceptionRules, ExceptionType } from '../../domain/exception-rules.ts';
import { formatAmount, LEDGER_NUMERIC, type Minor, parseMinor } from '../../domain/money.ts';
import type { ExceptionToRaise } from '../exceptions/raise.ts';
import { resolveAsPayrecon } from '../exceptions/resolve.ts';
import { RUNNING_BALANCE } from '../read-models/balances.ts';
import type { ProviderBalanceFigures } from '../read-models/settlements.ts';
import type { Db } from '../schema.ts';
import { raiseMatchingExceptions } from './exceptions.ts';

/** One check: the provider's balance at a cut-off against the ledger's, and how the ledger's is made. */
export interface BalanceCheck extends ProviderBalanceFigures {
  /** provider - ledger. */
  difference: Minor;
  /** The ledger's figure: available + settledFromCutoff - movedFromCutoff - notYetReported. */
  basis: {
    /** The ledger's `available` now. */
    available: Minor;
    /** The grosses of the settlements booked with a cut-off at or after this one. */
    settledFromCutoff: Minor;
    /**
     * What the payments the report dates hold now beyond what counts at the cut-off: those the provider
     * moved at or after it, less what they held before it; those the ledger moved after the latest report,
     * while it agreed with it, less what they held then.
     */
    movedFromCutoff: Minor;
    /** What the payments no report names add, of those first booked after the last transactions report but one. */
    notYetReported: Minor;
  };
}

const amount = (text: string) => parseMinor(text, LEDGER_NUMERIC);

/** `text` as a LIKE pattern matching itself only. */
const likeLiteral = (text: string) => text.replace(/[\\%_]/g, (c) => `\\${c}`);

/**
 * The latest cut-off of each merchant account and balance currency that can be checked: its settlement
 * row gives a balance, a merchant account and a cut-off, and the transactions report holds the
 * settlement's own row.
 */
async function latestCutoffs(db: Db) {
  const { rows } = await sql<{
    settlement_id: string;
    account: string;
    currency: string;
    period_end: Date;
    balance: string;
  }>`
    SELECT DISTINCT ON (s.account, s.currency) s.settlement_id, s.account, s.currency, s.period_end,
      s.balance_at_cutoff::text AS balance
    FROM provider_settlement_rows s
    WHERE s.balance_at_cutoff IS NOT NULL AND s.account IS NOT NULL AND s.period_end IS NOT NULL
      AND EXISTS (SELECT 1 FROM provider_transaction_rows r
        WHERE r.transaction_id = s.settlement_id AND r.type = 'settlement')
    ORDER BY s.account, s.currency, s.period_end DESC, s.settlement_id DESC`.execute(db);
  return rows.map((r) => ({ ...r, currency: r.currency.trim() }));
}

/**
 * The ledger's figure at the cut-off of one check, and its parts, in one statement, so every part is read
 * from one snapshot (matching runs at read committed while the ledger books; figures read by separate
 * statements could each see another set of entries). Null when no transactions report brought rows.
 *
 * `report`: when the latest transactions report that brought rows was imported, and the one before it.
 * `settled`: the `available` postings of the merchant account's settlements with a cut-off at or after this
 * one. `chosen`: the payments a live match names that a report row dates at or after the cut-off, or that
 * the ledger booked an entry of after the latest report; for each, what it adds to `available` now and as
 * booked at the latest report (`ledger`), and what its rows (a deposit's `fee` rows with them) add before
 * the cut-off and in all (`reported`). `unreported`: the payments no live match names, first booked after
 * the report before the latest (all of them when there is none).
 */
async function ledgerAtCutoff(
  db: Db,
  account: string,
  currency: string,
  cutoff: Date,
): Promise<BalanceCheck['basis'] | null> {
  const { rows } = await sql<{
    reported: boolean;
    available: string;
    settled: string;
    moved: string;
    unreported: string;
  }>`
    WITH report AS (
      SELECT max(imported_at) FILTER (WHERE n = 1) AS latest, max(imported_at) FILTER (WHERE n = 2) AS before
      FROM (SELECT imported_at, row_number() OVER (ORDER BY imported_at DESC, id DESC) AS n
        FROM imports WHERE kind = 'provider-transactions' AND new_lines > 0
        ORDER BY imported_at DESC, id DESC LIMIT 2) x),
    available AS (
      SELECT ${RUNNING_BALANCE}::numeric AS total FROM ledger_accounts a
      WHERE a.merchant_account = ${account} AND a.currency = ${currency} AND a.book = 'live'
        AND a.name = 'available'),
    settled AS (
      SELECT sum(p.amount) AS total
      FROM journal_entries e JOIN postings p ON p.entry_id = e.id
      WHERE e.idempotency_key LIKE ${`settlement:${likeLiteral(account)}:%`}
        AND e.entity_kind = 'settlement' AND e.merchant_account = ${account} AND e.effective_at >= ${cutoff}
        AND p.account = 'available' AND p.book = 'live' AND p.currency = ${currency}),
    chosen AS (
      SELECT x2.identity
      FROM provider_transaction_rows r
      JOIN match_members x1 ON x1.side = 'provider_row' AND x1.identity = r.identity AND x1.live
      JOIN match_members x2 ON x2.match_id = x1.match_id AND x2.side = 'ledger_payment' AND x2.live
      WHERE coalesce(r.updated_at, r.created_at) >= ${cutoff} AND r.currency = ${currency}
        AND split_part(x2.identity, ':', 2) = ${account}
      UNION
      SELECT e.entity_kind || ':' || e.merchant_account || ':' || e.entity_id
      FROM report, journal_entries e
      WHERE e.created_at > report.latest AND e.merchant_account = ${account}
        AND e.entity_kind IN ('deposit', 'cashout', 'refund') AND e.book = 'live'
        AND EXISTS (SELECT 1 FROM match_members x WHERE x.side = 'ledger_payment' AND x.live
          AND x.identity = e.entity_kind || ':' || e.merchant_account || ':' || e.entity_id)),
    payment AS (
      SELECT c.identity, split_part(c.identity, ':', 1) AS kind,
        substr(c.identity, length(split_part(c.identity, ':', 1)) + length(${account}) + 3) AS entity_id
      FROM chosen c),
    matched AS (
      SELECT pay.identity, r.type, r.transaction_id, r.net, coalesce(r.updated_at, r.created_at) AS at
      FROM payment pay
      JOIN match_members y1 ON y1.side = 'ledger_payment' AND y1.identity = pay.identity AND y1.live
      JOIN match_members y2 ON y2.match_id = y1.match_id AND y2.side = 'provider_row' AND y2.live
      JOIN provider_transaction_rows r ON r.identity = y2.identity
      WHERE r.currency = ${currency}),
    reported AS (
      SELECT o.identity, sum(o.net) FILTER (WHERE o.at < ${cutoff}) AS before_cutoff, sum(o.net) AS total,
        max(o.at) AS last_at
      FROM (
        SELECT identity, net, at FROM matched
        UNION ALL
        -- A deposit undone gives its fee back in a row of type fee under its transaction id.
        SELECT d.identity, f.net, coalesce(f.updated_at, f.created_at)
        FROM (SELECT DISTINCT identity, transaction_id FROM matched WHERE type = 'deposit') d
        JOIN provider_transaction_rows f ON f.transaction_id = d.transaction_id AND f.type = 'fee'
          AND f.currency = ${currency}) o
      GROUP BY o.identity),
    ledger AS (
      SELECT pay.identity, sum(p.amount) AS now_total,
        coalesce(sum(p.amount) FILTER (WHERE e.created_at <= report.latest), 0) AS at_report
      FROM report, payment pay
      JOIN journal_entries e ON e.entity_id = pay.entity_id AND e.entity_kind = pay.kind
        AND e.merchant_account = ${account}
      JOIN postings p ON p.entry_id = e.id
      WHERE p.account = 'available' AND p.book = 'live' AND p.currency = ${currency}
      GROUP BY pay.identity, report.latest),
    moved AS (
      -- Moved by the provider at or after the cut-off: as its rows before it say. Moved by the ledger after
      -- the latest report while agreeing with it: as it was then.
      SELECT sum(CASE
        WHEN o.last_at >= ${cutoff} THEN coalesce(l.now_total, 0) - coalesce(o.before_cutoff, 0)
        WHEN coalesce(l.at_report, 0) = o.total THEN coalesce(l.now_total, 0) - coalesce(l.at_report, 0)
        ELSE 0 END) AS total
      FROM reported o LEFT JOIN ledger l ON l.identity = o.identity),
    unreported AS (
      SELECT sum(p.amount) AS total
      FROM report, journal_entries e JOIN postings p ON p.entry_id = e.id
      WHERE e.created_at > coalesce(report.before, '-infinity'::timestamptz)
        AND e.merchant_account = ${account} AND e.entity_kind IN ('deposit', 'cashout', 'refund')
        AND e.book = 'live' AND p.account = 'available' AND p.currency = ${currency}
        AND NOT EXISTS (SELECT 1 FROM match_members x WHERE x.side = 'ledger_payment' AND x.live
          AND x.identity = e.entity_kind || ':' || e.merchant_account || ':' || e.entity_id)
        AND NOT EXISTS (SELECT 1 FROM journal_entries f WHERE f.entity_id = e.entity_id
          AND f.entity_kind = e.entity_kind AND f.merchant_account = e.merchant_account
          AND f.created_at <= coalesce(report.before, '-infinity'::timestamptz)))
    SELECT (SELECT latest IS NOT NULL FROM report) AS reported,
      coalesce((SELECT total FROM available), 0)::text AS available,
      coalesce((SELECT total FROM settled), 0)::text AS settled,
      coalesce((SELECT total FROM moved), 0)::text AS moved,
      coalesce((SELECT total FROM unreported), 0)::text AS unreported`.execute(db);
  const r = rows[0]!;
  if (!r.reported) return null;
  return {
    available: amount(r.available),
    settledFromCutoff: -amount(r.settled),
    movedFromCutoff: amount(r.moved),
    notYetReported: amount(r.unreported),
  };
}

/** The checks the stored lines and the ledger allow now, one per merchant account and balance currency. */
export async function providerBalanceChecks(db: Db): Promise<BalanceCheck[]> {
  const checks: BalanceCheck[] = [];
  for (const l of await latestCutoffs(db)) {
    const basis = await ledgerAtCutoff(db, l.account, l.currency, l.period_end);
    if (basis === null) continue;
    const ledger = basis.available + basis.settledFromCutoff - basis.movedFromCutoff - basis.notYetReported;
    const provider = amount(l.balance);
    checks.push({
      merchantAccount: l.account,
      currency: l.currency,
      settlementId: l.settlement_id,
      cutoff: l.period_end,
      provider,
      ledger,
      difference: provider - ledger,
      basis,
    });
  }
  return checks;
}

export function balanceDriftException(c: BalanceCheck): ExceptionToRaise {
  const provider = formatAmount(c.provider);
  const ledger = formatAmount(c.ledger);
  return {
    type: 'PROVIDER_BALANCE_DRIFT',
    account: c.merchantAccount,
    kind: 'settlement',
    entityId: c.settlementId,
    details: {
      settlementId: c.settlementId,
      currency: c.currency,
      cutoff: c.cutoff.toISOString(),
      provider,
      ledger,
      difference: formatAmount(c.difference),
      ledgerBasis: {
        available: formatAmount(c.basis.available),
        settledFromCutoff: formatAmount(c.basis.settledFromCutoff),
        movedFromCutoff: formatAmount(c.basis.movedFromCutoff),
        notYetReported: formatAmount(c.basis.notYetReported),
      },
    },
    facts: { externalRef: null, providerAmount: provider, providerCurrency: c.currency },
    fact: `provider ${provider} ${c.currency}, ledger ${ledger} ${c.currency}`,
  };
}

/**
 * Keeps each check as the latest of its merchant account and currency, and returns since when each has
 * differed without a break (null for those that agree).
 */
async function recordBalanceChecks(
  db: Db,
  checks: readonly BalanceCheck[],
  now: Date,
): Promise<Map<string, Date | null>> {
  const { rows } = await sql<{ merchant_account: string; currency: string; differs_since: Date | null }>`
    INSERT INTO provider_balance_checks AS c
      (merchant_account, currency, settlement_id, cutoff, provider, ledger, checked_at, differs_since)
    SELECT x.merchant_account, x.currency, x.settlement_id, x.cutoff, x.provider, x.ledger, ${now}::timestamptz,
      CASE WHEN x.provider = x.ledger THEN NULL ELSE ${now}::timestamptz END
    FROM unnest(${checks.map((c) => c.merchantAccount)}::text[], ${checks.map((c) => c.currency)}::text[],
      ${checks.map((c) => c.settlementId)}::text[], ${checks.map((c) => c.cutoff)}::timestamptz[],
      ${checks.map((c) => formatAmount(c.provider))}::numeric[], ${checks.map((c) => formatAmount(c.ledger))}::numeric[])
      AS x(merchant_account, currency, settlement_id, cutoff, provider, ledger)
    ON CONFLICT (merchant_account, currency) DO UPDATE SET
      settlement_id = EXCLUDED.settlement_id, cutoff = EXCLUDED.cutoff, provider = EXCLUDED.provider,
      ledger = EXCLUDED.ledger, checked_at = EXCLUDED.checked_at,
      differs_since = CASE WHEN EXCLUDED.differs_since IS NULL THEN NULL
        ELSE coalesce(c.differs_since, EXCLUDED.differs_since) END
    RETURNING merchant_account, currency, differs_since`.execute(db);
  return new Map(rows.map((r) => [`${r.merchant_account}\u0000${r.currency}`, r.differs_since]));
}

/**
 * Checks the provider's balances (`providerBalanceChecks`) and keeps the checks: raises
 * PROVIDER_BALANCE_DRIFT for each check that has differed for `waitMs` (a condition: an open one is not
 * counted again) and resolves, as payrecon with a note, the open ones of a merchant account and currency
 * whose check now agrees or was made at a later cut-off.
 */
export async function checkProviderBalances(
  db: Db,
  now: Date,
  rules: ExceptionRules,
  waitMs = 0,
): Promise<{ raised: Partial<Record<ExceptionType, number>>; resolved: number }> {
  const checks = await providerBalanceChecks(db);
  if (checks.length === 0) return { raised: {}, resolved: 0 };
  const differsSince = await recordBalanceChecks(db, checks, now);
  const { rows: open } = await sql<{
    id: string;
    state: string;
    merchant_account: string;
    entity_id: string;
    currency: string | null;
  }>`
    SELECT id::text AS id, state, merchant_account, entity_id, details->>'currency' AS currency
    FROM exceptions WHERE type = 'PROVIDER_BALANCE_DRIFT' AND state <> 'resolved'`.execute(db);
  const checkOf = new Map(checks.map((c) => [`${c.merchantAccount}\u0000${c.currency}`, c]));
  const resolutions: { id: string; state: string; note: string }[] = [];
  for (const e of open) {
    const c = checkOf.get(`${e.merchant_account}\u0000${e.currency ?? ''}`);
    if (c === undefined) continue;
    const agrees = `the ledger's available is the provider's balance, ${formatAmount(c.provider)} ${c.currency}`;
    if (e.entity_id === c.settlementId) {
      if (c.difference === 0n) resolutions.push({ ...e, note: `agrees at the cut-off: ${agrees}` });
    } else {
      const later = `checked at the later cut-off of settlement ${c.settlementId} (${c.cutoff.toISOString()})`;
      resolutions.push({
        ...e,
        note:
          c.difference === 0n
            ? `${later}: ${agrees}`
            : `${later}, which differs by ${formatAmount(c.difference)} ${c.currency}`,
      });
    }
  }
  const raised = await raiseMatchingExceptions(
    db,
    checks
      .filter((c) => {
        const since = differsSince.get(`${c.merchantAccount}\u0000${c.currency}`);
        return c.difference !== 0n && since != null && now.getTime() - since.getTime() >= waitMs;
      })
      .map(balanceDriftException),
    now,
    rules,
  );
  return { raised, resolved: await resolveAsPayrecon(db, resolutions, now) };
}
