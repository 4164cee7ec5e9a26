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
 * at first: the check is made again by every matching run and the exception resolves itself, as payrecon,
 * when the figures agree (the ledger caught up, or a later cut-off agrees). An open drift of an earlier
 * cut-off is resolved when a later cut-off is checked, naming it. The check is a function of the stored
 * lines and the ledger: importing a file again changes nothing.
 */
import { sql } from 'kysely';
import type { ExceptionRules, ExceptionType } from '../../domain/exception-rules.ts';
import { formatAmount, LEDGER_NUMERIC, type Minor, parseMinor } from '../../domain/money.ts';
import type { ExceptionToRaise } from '../exceptions/raise.ts';
import { resolveAsPayrecon } from '../exceptions/resolve.ts';
import { ledgerAvailable } from '../read-models/settlements.ts';
import type { Db } from '../schema.ts';
import { raiseMatchingExceptions } from './exceptions.ts';

/** One check: the provider's balance at a cut-off against the ledger's, and how the ledger's is made. */
export interface BalanceCheck {
  merchantAccount: string;
  currency: string;
  /** The settlement whose report row gives the balance. */
  settlementId: string;
  cutoff: Date;
  provider: Minor;
  ledger: Minor;
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
 * When the latest transactions report that brought rows was imported, and the one before it (null: none).
 * Null when none was.
 */
async function reportImports(db: Db): Promise<{ latest: Date; before: Date | null } | null> {
  const { rows } = await sql<{ imported_at: Date }>`
    SELECT imported_at FROM imports WHERE kind = 'provider-transactions' AND new_lines > 0
    ORDER BY imported_at DESC, id DESC LIMIT 2`.execute(db);
  if (rows.length === 0) return null;
  return { latest: rows[0]!.imported_at, before: rows[1]?.imported_at ?? null };
}

/** The `available` postings of the merchant account's settlements booked with a cut-off at or after `cutoff`. */
async function settlementsFrom(db: Db, account: string, currency: string, cutoff: Date): Promise<Minor> {
  const { rows } = await sql<{ total: string }>`
    SELECT coalesce(sum(p.amount), 0)::text AS total
    FROM journal_entries e JOIN postings p ON p.entry_id = e.id
    WHERE e.idempotency_key LIKE ${`settlement:${likeLiteral(account)}:%`}
      AND e.entity_kind = 'settlement' AND e.merchant_account = ${account} AND e.effective_at >= ${cutoff}
      AND p.account = 'available' AND p.book = 'live' AND p.currency = ${currency}`.execute(db);
  return amount(rows[0]!.total);
}

/** What the ledger and the report say of one payment matched to report rows, in minor units. */
interface PaymentFigures {
  /** What the payment adds to `available` now. */
  ledgerNow: Minor;
  /** What it added as booked when the latest transactions report was imported. */
  ledgerAtReport: Minor;
  /** What its rows (and a deposit's `fee` rows) dated before the cut-off add, and all of them. */
  reportBefore: Minor;
  reportAll: Minor;
  /** Its latest row's date. */
  lastAt: Date;
}

/**
 * The merchant account's payments in `currency` that a live match names and that either a report row
 * dates at or after `cutoff`, or the ledger booked an entry of after `reportedAt`, with their figures.
 */
async function paymentFigures(
  db: Db,
  account: string,
  currency: string,
  cutoff: Date,
  reportedAt: Date,
): Promise<PaymentFigures[]> {
  const { rows } = await sql<{
    ledger_now: string;
    ledger_at_report: string;
    report_before: string;
    report_all: string;
    last_at: Date;
  }>`
    WITH chosen AS (
      SELECT x2.identity
      FROM provider_transaction_rows r
      JOIN match_members x1 ON x1.side = 'provider_row' AND x1.identity = r.identity AND x1.live
      JOIN match_members x2 ON x2.match_id = x1.match_id AND x2.side = 'ledger_payment' AND x2.live
      WHERE coalesce(r.updated_at, r.created_at) >= ${cutoff} AND r.currency = ${currency}
        AND split_part(x2.identity, ':', 2) = ${account}
      UNION
      SELECT e.entity_kind || ':' || e.merchant_account || ':' || e.entity_id
      FROM journal_entries e
      WHERE e.created_at > ${reportedAt} AND e.merchant_account = ${account}
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
      SELECT identity, net, at FROM matched
      UNION ALL
      -- A deposit undone gives its fee back in a row of type fee under its transaction id.
      SELECT d.identity, f.net, coalesce(f.updated_at, f.created_at)
      FROM (SELECT DISTINCT identity, transaction_id FROM matched WHERE type = 'deposit') d
      JOIN provider_transaction_rows f ON f.transaction_id = d.transaction_id AND f.type = 'fee'
        AND f.currency = ${currency}),
    ledger AS (
      SELECT pay.identity, sum(p.amount) AS now_total,
        sum(p.amount) FILTER (WHERE e.created_at <= ${reportedAt}) AS at_report
      FROM payment pay
      JOIN journal_entries e ON e.entity_id = pay.entity_id AND e.entity_kind = pay.kind
        AND e.merchant_account = ${account}
      JOIN postings p ON p.entry_id = e.id
      WHERE p.account = 'available' AND p.book = 'live' AND p.currency = ${currency}
      GROUP BY pay.identity)
    SELECT coalesce(l.now_total, 0)::text AS ledger_now, coalesce(l.at_report, 0)::text AS ledger_at_report,
      coalesce(sum(o.net) FILTER (WHERE o.at < ${cutoff}), 0)::text AS report_before,
      coalesce(sum(o.net), 0)::text AS report_all, max(o.at) AS last_at
    FROM payment pay
    JOIN reported o ON o.identity = pay.identity
    LEFT JOIN ledger l ON l.identity = pay.identity
    GROUP BY pay.identity, l.now_total, l.at_report`.execute(db);
  return rows.map((r) => ({
    ledgerNow: amount(r.ledger_now),
    ledgerAtReport: amount(r.ledger_at_report),
    reportBefore: amount(r.report_before),
    reportAll: amount(r.report_all),
    lastAt: r.last_at,
  }));
}

/**
 * What the ledger holds now of the payments the report dates, beyond what counts at the cut-off: a payment
 * the provider moved at or after the cut-off counts as its rows before the cut-off say; one the ledger
 * moved after the latest report was imported, while it agreed with the report then, counts as it was
 * then (the report could not list the move, made after it); every other one counts as the ledger has it
 * now (one the ledger has not caught up with shows as a difference until it has).
 */
function movedFromCutoff(payments: readonly PaymentFigures[], cutoff: Date): Minor {
  let total = 0n;
  for (const p of payments) {
    if (p.lastAt.getTime() >= cutoff.getTime()) total += p.ledgerNow - p.reportBefore;
    else if (p.ledgerAtReport === p.reportAll) total += p.ledgerNow - p.ledgerAtReport;
  }
  return total;
}

/**
 * What the merchant account's payments named by no live match and first booked after `since` (all of
 * them when null) add to `available`.
 */
async function unreportedSince(
  db: Db,
  account: string,
  currency: string,
  since: Date | null,
): Promise<Minor> {
  const { rows } = await sql<{ total: string }>`
    SELECT coalesce(sum(p.amount), 0)::text AS total
    FROM journal_entries e JOIN postings p ON p.entry_id = e.id
    WHERE e.created_at > coalesce(${since}::timestamptz, '-infinity'::timestamptz)
      AND e.merchant_account = ${account} AND e.entity_kind IN ('deposit', 'cashout', 'refund')
      AND e.book = 'live' AND p.account = 'available' AND p.currency = ${currency}
      AND NOT EXISTS (SELECT 1 FROM match_members x WHERE x.side = 'ledger_payment' AND x.live
        AND x.identity = e.entity_kind || ':' || e.merchant_account || ':' || e.entity_id)
      AND NOT EXISTS (SELECT 1 FROM journal_entries f WHERE f.entity_id = e.entity_id
        AND f.entity_kind = e.entity_kind AND f.merchant_account = e.merchant_account
        AND f.created_at <= coalesce(${since}::timestamptz, '-infinity'::timestamptz))`.execute(db);
  return amount(rows[0]!.total);
}

/** The checks the stored lines and the ledger allow now, one per merchant account and balance currency. */
export async function providerBalanceChecks(db: Db): Promise<BalanceCheck[]> {
  const latest = await latestCutoffs(db);
  const reports = await reportImports(db);
  if (latest.length === 0 || reports === null) return [];
  const availableOf = new Map<string, Minor>();
  for (const account of new Set(latest.map((l) => l.account))) {
    for (const a of await ledgerAvailable(db, { merchantAccount: account })) {
      availableOf.set(`${a.merchantAccount}\u0000${a.currency}`, a.available);
    }
  }
  const checks: BalanceCheck[] = [];
  for (const l of latest) {
    const available = availableOf.get(`${l.account}\u0000${l.currency}`) ?? 0n;
    const settledFromCutoff = -(await settlementsFrom(db, l.account, l.currency, l.period_end));
    const moved = movedFromCutoff(
      await paymentFigures(db, l.account, l.currency, l.period_end, reports.latest),
      l.period_end,
    );
    const notYetReported = await unreportedSince(db, l.account, l.currency, reports.before);
    const ledger = available + settledFromCutoff - moved - notYetReported;
    const provider = amount(l.balance);
    checks.push({
      merchantAccount: l.account,
      currency: l.currency,
      settlementId: l.settlement_id,
      cutoff: l.period_end,
      provider,
      ledger,
      difference: provider - ledger,
      basis: { available, settledFromCutoff, movedFromCutoff: moved, notYetReported },
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
 * Checks the provider's balances (`providerBalanceChecks`): raises PROVIDER_BALANCE_DRIFT for each check
 * that differs (a condition: an open one is not counted again) and resolves, as payrecon with a note, the
 * open ones of a merchant account and currency whose check now agrees or was made at a later cut-off.
 */
export async function checkProviderBalances(
  db: Db,
  now: Date,
  rules: ExceptionRules,
): Promise<{ raised: Partial<Record<ExceptionType, number>>; resolved: number }> {
  const checks = await providerBalanceChecks(db);
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
    checks.filter((c) => c.difference !== 0n).map(balanceDriftException),
    now,
    rules,
  );
  return { raised, resolved: await resolveAsPayrecon(db, resolutions, now) };
}
