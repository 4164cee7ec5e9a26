/**
 * The month close (issue 18 point 3): the figures of one merchant account, currency and month, and the
 * signed, frozen record of them (`closes`).
 *
 * Periods use booking time (`created_at`), like the settlement workbook and the daily snapshots, so a
 * period's figures never change once it is over: opening and closing balances are the latest daily
 * snapshot at or before the instant plus what moved since (`balanceAsOf`: at most a day of movements
 * and an hour of entries), movements are the period's entries read by their creation time and their
 * postings by entry (`entryPostings`). Nothing sums the whole history. An entry booked after a period whose effect date (`effective_at`) lies inside it is a
 * post-close adjustment: it moves the next period's figures, and is listed on both pages.
 */
import { sql } from 'kysely';
import {
  type CloseAccountLine,
  type CloseAdjustmentLine,
  type CloseDocument,
  type CloseExceptionLine,
  type CloseInFlightLine,
  type CloseMovementLine,
  type CloseStatus,
  canonicalJson,
  sha256Hex,
} from '../domain/close.ts';
import { PAYOUT_IN_FLIGHT } from '../domain/effects.ts';
import { AppError } from '../domain/errors.ts';
import { formatAmount, type Minor, parseLedgerMinor, parseMinorOrNull } from '../domain/money.ts';
import { balanceAsOf, entryPostings } from './ledger-periods.ts';
import type { Db } from './schema.ts';

/** One merchant account, currency and month, with the month's instants in the report time zone. */
export interface CloseScope {
  merchantAccount: string;
  currency: string;
  /** `YYYY-MM`. */
  period: string;
  timeZone: string;
  /** [start, end): the cut-off is `end`. */
  start: Date;
  end: Date;
  /** The close month (`YYYY-MM`) an instant falls in, under the same time zone and cut-off. */
  monthOf(instant: Date): string;
}

const amount = (minor: Minor): string => formatAmount(minor);
const iso = (d: Date): string => d.toISOString();

/** Each ledger account of the scope's merchant account and currency: balances before `start` and `end`. */
async function accountBalances(
  db: Db,
  s: CloseScope,
): Promise<{ book: string; account: string; opening: Minor; closing: Minor }[]> {
  // The latest daily snapshot plus what moved since, at the period's start and at its end.
  const opening = balanceAsOf(s.start, false, 'so');
  const closing = balanceAsOf(s.end, false, 'sc');
  const { rows } = await sql<{ book: string; name: string; opening: string; closing: string }>`
    SELECT a.book, a.name, ${opening.balance} AS opening, ${closing.balance} AS closing
    FROM ledger_accounts a ${opening.join} ${closing.join}
    WHERE a.merchant_account = ${s.merchantAccount} AND a.currency = ${s.currency}
    ORDER BY a.book, a.name`.execute(db);
  return rows.map((r) => ({
    book: r.book,
    account: r.name,
    opening: parseLedgerMinor(r.opening),
    closing: parseLedgerMinor(r.closing),
  }));
}

/** The period's postings per ledger account, entity kind, effect and direction. */
async function periodMovements(db: Db, s: CloseScope): Promise<CloseMovementLine[]> {
  const { rows } = await sql<{
    book: string;
    account: string;
    entity_kind: string;
    effect: string;
    direction: number;
    amount: string;
    entries: number;
  }>`
    SELECT x.book, x.account, e.entity_kind, e.effect, e.direction, sum(x.amount)::text AS amount,
      count(DISTINCT e.id)::int AS entries
    FROM ${entryPostings(s.start, s.end)}
      AND e.merchant_account = ${s.merchantAccount} AND x.currency = ${s.currency}
    GROUP BY x.book, x.account, e.entity_kind, e.effect, e.direction
    ORDER BY x.book, x.account, e.entity_kind, e.effect, e.direction DESC`.execute(db);
  return rows.map((r) => ({
    book: r.book,
    account: r.account,
    entityKind: r.entity_kind,
    effect: r.effect,
    direction: r.direction,
    amount: amount(parseLedgerMinor(r.amount)),
    entries: r.entries,
  }));
}

/**
 * Cashouts and refunds holding money in the live `reserved` account at the cut-off. The candidates are
 * the entities in flight now and those whose reservation moved after the cut-off (both small sets, found
 * through indexes); each one's reserved balance at the cut-off is summed from its own entries.
 */
async function inFlightAt(db: Db, s: CloseScope): Promise<CloseInFlightLine[]> {
  const { rows } = await sql<{
    entity_kind: string;
    entity_id: string;
    external_ref: string | null;
    reserved_at: Date;
    amount: string;
  }>`
    WITH candidates AS (
      -- (only cashouts and refunds reserve: the other entries' postings are not read)
      SELECT e.entity_kind, e.entity_id FROM ${entryPostings(s.end, null)}
        AND e.merchant_account = ${s.merchantAccount} AND e.book = 'live' AND e.entity_kind IN ('cashout', 'refund')
        AND x.currency = ${s.currency} AND x.account = 'reserved'
      UNION
      -- the open cashouts and refunds (mirror_watches_in_flight_ix)
      SELECT m.entity_kind, m.entity_id FROM mirror_watches w
      JOIN mirrors m ON m.entity_id = w.entity_id AND m.entity_kind = w.entity_kind AND m.merchant_account = w.merchant_account
      WHERE w.watch = 'open' AND w.entity_kind IN ('cashout', 'refund') AND m.status = ANY(${[...PAYOUT_IN_FLIGHT]}::text[])
        AND w.merchant_account = ${s.merchantAccount} AND w.currency = ${s.currency} AND NOT w.test
    )
    SELECT c.entity_kind, c.entity_id, m.external_ref, r.reserved_at, r.amount
    FROM candidates c
    CROSS JOIN LATERAL (
      SELECT min(e.created_at) AS reserved_at, sum(p.amount)::text AS amount
      FROM journal_entries e JOIN postings p ON p.entry_id = e.id
      WHERE e.merchant_account = ${s.merchantAccount} AND e.entity_kind = c.entity_kind AND e.entity_id = c.entity_id
        AND e.created_at < ${s.end} AND p.book = 'live' AND p.account = 'reserved' AND p.currency = ${s.currency}) r
    -- each candidate's mirror by its key, whatever the estimate of the candidates (never a scan of mirrors)
    LEFT JOIN LATERAL (SELECT m.external_ref FROM mirrors m WHERE m.merchant_account = ${s.merchantAccount}
      AND m.entity_kind = c.entity_kind AND m.entity_id = c.entity_id OFFSET 0) m ON true
    WHERE r.amount IS NOT NULL AND r.amount::numeric <> 0
    ORDER BY r.reserved_at, c.entity_kind, c.entity_id`.execute(db);
  return rows.map((r) => ({
    kind: r.entity_kind,
    entityId: r.entity_id,
    externalRef: r.external_ref,
    reservedAt: iso(r.reserved_at),
    amount: amount(parseLedgerMinor(r.amount)),
  }));
}

/** An amount text from an exception's facts, or null when absent or unreadable. */
function factAmount(text: string | null): Minor | null {
  try {
    return parseMinorOrNull(text, { allowNegative: true, field: 'amount' });
  } catch {
    return null;
  }
}

/** Exceptions of the account open at the cut-off whose entity is in the close's currency. */
async function exceptionsOpenAt(db: Db, s: CloseScope): Promise<CloseExceptionLine[]> {
  const { rows } = await sql<{
    id: string;
    type: string;
    severity: string;
    entity_kind: string;
    entity_id: string;
    first_seen_at: Date;
    amount: string | null;
  }>`
    SELECT x.id::text AS id, x.type, x.severity, x.entity_kind, x.entity_id, x.first_seen_at,
      coalesce(m.amount::text, x.details #>> '{facts,providerAmount}', x.details #>> '{facts,intentAmount}') AS amount
    FROM exceptions x
    LEFT JOIN mirrors m ON m.merchant_account = x.merchant_account AND m.entity_kind = x.entity_kind
      AND m.entity_id = x.entity_id
    WHERE x.merchant_account = ${s.merchantAccount} AND x.first_seen_at < ${s.end}
      AND (x.resolved_at IS NULL OR x.resolved_at >= ${s.end})
      AND coalesce(m.currency, x.details #>> '{facts,providerCurrency}', x.details #>> '{facts,intentCurrency}')
        = ${s.currency}
    ORDER BY x.first_seen_at, x.id`.execute(db);
  return rows.map((r) => {
    const minor = factAmount(r.amount);
    return {
      id: r.id,
      type: r.type,
      severity: r.severity,
      entityKind: r.entity_kind,
      entityId: r.entity_id,
      firstSeenAt: iso(r.first_seen_at),
      amount: minor === null ? null : amount(minor),
    };
  });
}

/** Entries of the account and currency booked in [bookedFrom, bookedTo) with effect dates in [effFrom, effTo). */
async function adjustments(
  db: Db,
  s: CloseScope,
  booked: { from: Date; to: Date | null },
  effective: { from: Date | null; to: Date },
): Promise<CloseAdjustmentLine[]> {
  const { rows } = await sql<{
    id: string;
    entity_kind: string;
    entity_id: string;
    effect: string;
    direction: number;
    book: string;
    effective_at: Date;
    created_at: Date;
    postings: { account: string; amount: string }[];
  }>`
    SELECT e.id::text AS id, e.entity_kind, e.entity_id, e.effect, e.direction, e.book, e.effective_at, e.created_at,
      (SELECT json_agg(json_build_object('account', p.account, 'amount', p.amount::text) ORDER BY p.id)
         FROM postings p WHERE p.entry_id = e.id) AS postings
    FROM journal_entries e
    WHERE e.created_at >= ${booked.from} AND (${booked.to}::timestamptz IS NULL OR e.created_at < ${booked.to})
      AND e.effective_at < ${effective.to}
      AND (${effective.from}::timestamptz IS NULL OR e.effective_at >= ${effective.from})
      AND e.merchant_account = ${s.merchantAccount} AND e.currency = ${s.currency}
    ORDER BY e.created_at, e.id`.execute(db);
  return rows.map((r) => {
    const postings = (r.postings ?? []).map((p) => ({
      account: p.account,
      amount: amount(parseLedgerMinor(p.amount)),
    }));
    const main =
      postings.find((p) => p.account === 'available' || p.account === 'test_available') ?? postings[0];
    return {
      entry: r.id,
      entityKind: r.entity_kind,
      entityId: r.entity_id,
      effect: r.effect,
      direction: r.direction,
      book: r.book,
      effectiveAt: iso(r.effective_at),
      bookedAt: iso(r.created_at),
      effectPeriod: s.monthOf(r.effective_at),
      bookedPeriod: s.monthOf(r.created_at),
      available: main?.amount ?? '0.00',
      postings,
    };
  });
}

/** The figures of a close, computed now from the ledger (what preparing signs). */
export async function closeDocument(db: Db, s: CloseScope): Promise<CloseDocument> {
  const [balances, movements, inFlight, exceptions, earlier] = await Promise.all([
    accountBalances(db, s),
    periodMovements(db, s),
    inFlightAt(db, s),
    exceptionsOpenAt(db, s),
    adjustments(db, s, { from: s.start, to: s.end }, { from: null, to: s.start }),
  ]);
  const moved = new Map<string, Minor>();
  for (const m of movements) {
    const key = `${m.book}|${m.account}`;
    moved.set(key, (moved.get(key) ?? 0n) + parseLedgerMinor(m.amount));
  }
  let proof = 0n;
  const accounts: CloseAccountLine[] = balances.map((b) => {
    const movement = moved.get(`${b.book}|${b.account}`) ?? 0n;
    const line = b.opening + movement - b.closing;
    proof += line < 0n ? -line : line;
    return {
      book: b.book,
      account: b.account,
      opening: amount(b.opening),
      movements: amount(movement),
      closing: amount(b.closing),
      proof: amount(line),
    };
  });
  const reserved = balances.find((b) => b.book === 'live' && b.account === 'reserved')?.closing ?? 0n;
  const sum = (values: (string | null)[]) =>
    amount(values.reduce<Minor>((t, v) => t + (v === null ? 0n : parseLedgerMinor(v)), 0n));
  return {
    v: 1,
    merchantAccount: s.merchantAccount,
    currency: s.currency,
    period: s.period,
    timeZone: s.timeZone,
    start: iso(s.start),
    end: iso(s.end),
    accounts,
    movements,
    proof: amount(proof),
    inFlight,
    inFlightTotal: sum(inFlight.map((f) => f.amount)),
    reservedAtEnd: amount(reserved),
    exceptions,
    exceptionsTotal: sum(exceptions.map((x) => x.amount)),
    earlierPeriodAdjustments: earlier,
  };
}

/** Entries booked after the period whose effect date lies inside it (never part of its frozen figures). */
export function postCloseAdjustments(db: Db, s: CloseScope): Promise<CloseAdjustmentLine[]> {
  return adjustments(db, s, { from: s.end, to: null }, { from: s.start, to: s.end });
}

// ---------------------------------------------------------------- the signed record

export interface CloseRecord {
  id: string;
  merchantAccount: string;
  currency: string;
  period: string;
  status: CloseStatus;
  preparedBy: string;
  preparedAt: Date;
  approvedBy: string | null;
  approvedAt: Date | null;
  sha256: string;
  /** The signed canonical text. */
  canonical: string;
  document: CloseDocument;
  /** The stored hash is the SHA-256 of the stored text, and the stored figures are that text. */
  verified: boolean;
}

/** Checks a stored close: the hash of its text, and its figures against its text. */
export function verifyClose(row: { canonical: string; sha256: string; figures: unknown }): boolean {
  return sha256Hex(row.canonical) === row.sha256 && canonicalJson(row.figures) === row.canonical;
}

/** The close of one merchant account, currency and month, or null when none is signed. */
export async function getCloseRecord(
  db: Db,
  merchantAccount: string,
  currency: string,
  period: string,
): Promise<CloseRecord | null> {
  const { rows } = await sql<{
    id: string;
    status: CloseStatus;
    prepared_by: string;
    prepared_at: Date;
    approved_by: string | null;
    approved_at: Date | null;
    sha256: string | null;
    canonical: string | null;
    figures: unknown;
  }>`
    SELECT id::text AS id, status, prepared_by, prepared_at, approved_by, approved_at, sha256, canonical, figures
    FROM closes WHERE merchant_account = ${merchantAccount} AND currency = ${currency} AND period = ${period}`.execute(
    db,
  );
  const r = rows[0];
  if (!r) return null;
  const canonical = r.canonical ?? '';
  const sha256 = r.sha256 ?? '';
  return {
    id: r.id,
    merchantAccount,
    currency,
    period,
    status: r.status,
    preparedBy: r.prepared_by,
    preparedAt: r.prepared_at,
    approvedBy: r.approved_by,
    approvedAt: r.approved_at,
    sha256,
    canonical,
    document: (canonical ? JSON.parse(canonical) : r.figures) as CloseDocument,
    verified: canonical !== '' && verifyClose({ canonical, sha256, figures: r.figures }),
  };
}

/**
 * Prepares and signs a close: computes the figures, refuses a period not over yet or a proof that is
 * not zero, and stores the canonical text with its SHA-256. One close per account, currency and month.
 */
export async function prepareClose(db: Db, s: CloseScope, by: string, now: Date): Promise<CloseRecord> {
  if (s.end.getTime() > now.getTime()) {
    throw new AppError('CONFLICT', `${s.period} is not over yet: it can be closed from ${iso(s.end)}`);
  }
  const existing = await getCloseRecord(db, s.merchantAccount, s.currency, s.period);
  if (existing) {
    throw new AppError(
      'CONFLICT',
      `${s.period} of ${s.merchantAccount} ${s.currency} is already signed by ${existing.preparedBy}`,
    );
  }
  const document = await db.transaction().execute(async (trx) => {
    // One snapshot of the ledger for every figure, so the proof is computed over one state.
    await sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY`.execute(trx);
    return closeDocument(trx, s);
  });
  if (parseLedgerMinor(document.proof) !== 0n) {
    throw new AppError(
      'CONFLICT',
      `the proof of ${s.period} is not zero (${document.proof}): opening + movements - closing must be 0 on every account`,
    );
  }
  const canonical = canonicalJson(document);
  const inserted = await db
    .insertInto('closes')
    .values({
      merchant_account: s.merchantAccount,
      currency: s.currency,
      period: s.period,
      status: 'prepared',
      prepared_by: by,
      prepared_at: now,
      figures: sql<Record<string, unknown>>`${canonical}::jsonb`,
      canonical,
      sha256: sha256Hex(canonical),
      period_start: s.start,
      period_end: s.end,
      time_zone: s.timeZone,
    })
    .onConflict((oc) => oc.constraint('closes_period_uq').doNothing())
    .returning('id')
    .executeTakeFirst();
  if (!inserted) {
    throw new AppError(
      'CONFLICT',
      `${s.period} of ${s.merchantAccount} ${s.currency} was just signed by someone else`,
    );
  }
  const record = await getCloseRecord(db, s.merchantAccount, s.currency, s.period);
  if (!record) throw new AppError('INTERNAL', 'close vanished after insert');
  return record;
}

/**
 * Approves a prepared close. The preparer cannot approve their own close (403, and the database's
 * CHECK `closes_approver_ck` refuses it too); a close whose stored hash no longer matches is refused.
 */
export async function approveClose(
  db: Db,
  key: { merchantAccount: string; currency: string; period: string },
  by: string,
  now: Date,
): Promise<CloseRecord> {
  const { merchantAccount, currency, period } = key;
  await db.transaction().execute(async (trx) => {
    const row = await trx
      .selectFrom('closes')
      .select(['id', 'status', 'prepared_by', 'approved_by', 'canonical', 'sha256', 'figures'])
      .where('merchant_account', '=', merchantAccount)
      .where('currency', '=', currency)
      .where('period', '=', period)
      .forUpdate()
      .executeTakeFirst();
    if (!row)
      throw new AppError('NOT_FOUND', `${period} of ${merchantAccount} ${currency} is not prepared yet`);
    if (row.status === 'approved') {
      throw new AppError(
        'CONFLICT',
        `${period} of ${merchantAccount} ${currency} is already approved by ${row.approved_by}`,
      );
    }
    if (row.prepared_by === by) {
      throw new AppError(
        'FORBIDDEN',
        `You prepared and signed ${period} of ${merchantAccount} ${currency}, so a different controller must approve it.`,
      );
    }
    if (!verifyClose({ canonical: row.canonical ?? '', sha256: row.sha256 ?? '', figures: row.figures })) {
      throw new AppError(
        'CONFLICT',
        `the stored figures of ${period} no longer match their SHA-256; not approved`,
      );
    }
    await trx
      .updateTable('closes')
      .set({ status: 'approved', approved_by: by, approved_at: now })
      .where('id', '=', row.id)
      .execute();
  });
  const record = await getCloseRecord(db, merchantAccount, currency, period);
  if (!record) throw new AppError('INTERNAL', 'close vanished after approval');
  return record;
}

export interface CloseSummary {
  merchantAccount: string;
  currency: string;
  period: string;
  status: CloseStatus;
  preparedBy: string;
  preparedAt: Date;
  approvedBy: string | null;
  approvedAt: Date | null;
  sha256: string | null;
}

/** Signed closes of the given months (any account and currency), for the list page and the workbook. */
export async function closesOfPeriods(
  db: Db,
  periods: readonly string[],
  merchantAccount: string | null = null,
): Promise<CloseSummary[]> {
  if (periods.length === 0) return [];
  let q = db
    .selectFrom('closes')
    .select([
      'merchant_account',
      'currency',
      'period',
      'status',
      'prepared_by',
      'prepared_at',
      'approved_by',
      'approved_at',
      'sha256',
    ])
    .where('period', 'in', [...periods]);
  if (merchantAccount !== null) q = q.where('merchant_account', '=', merchantAccount);
  const rows = await q.orderBy('period', 'desc').orderBy('merchant_account').orderBy('currency').execute();
  return rows.map((r) => ({
    merchantAccount: r.merchant_account,
    currency: r.currency,
    period: r.period,
    status: r.status,
    preparedBy: r.prepared_by,
    preparedAt: r.prepared_at,
    approvedBy: r.approved_by,
    approvedAt: r.approved_at,
    sha256: r.sha256,
  }));
}

/** The (merchant account, currency) pairs with a live ledger, the rows of the close list. */
export async function closeScopes(db: Db): Promise<{ merchantAccount: string; currency: string }[]> {
  const rows = await db
    .selectFrom('ledger_accounts')
    .select(['merchant_account', 'currency'])
    .where('book', '=', 'live')
    .distinct()
    .orderBy('merchant_account')
    .orderBy('currency')
    .execute();
  return rows.map((r) => ({ merchantAccount: r.merchant_account, currency: r.currency }));
}
