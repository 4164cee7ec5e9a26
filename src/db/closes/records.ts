/**
 * The signed, frozen record of a month close (`closes`): preparing signs the figures of
 * `closeDocument` with their SHA-256, a second controller approves, and every read checks the hash.
 */
import { type Selectable, sql } from 'kysely';
import { type CloseDocument, type CloseStatus, canonicalJson, sha256Hex } from '../../domain/close.ts';
import { AppError } from '../../domain/errors.ts';
import { parseLedgerMinor } from '../../domain/money.ts';
import type { ClosesTable, Db } from '../schema.ts';
import { type CloseScope, closeDocument } from './document.ts';
import { closeLedgers } from './scopes.ts';

const iso = (d: Date): string => d.toISOString();

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
  const [ledger] = await closeLedgers(db, { merchantAccount: s.merchantAccount, currency: s.currency });
  if (!ledger) throw new AppError('NOT_FOUND', `${s.merchantAccount} has no ledger in ${s.currency}`);
  const first = ledger.firstPostingAt;
  if (first === null || first.getTime() >= s.end.getTime()) {
    throw new AppError(
      'CONFLICT',
      `${s.merchantAccount} ${s.currency} has no entries ${first === null ? 'yet' : `before ${s.monthOf(first)}`}: ${s.period} has no figures to sign`,
    );
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
  return rows.map(summaryOf);
}

function summaryOf(
  r: Pick<
    Selectable<ClosesTable>,
    | 'merchant_account'
    | 'currency'
    | 'period'
    | 'status'
    | 'prepared_by'
    | 'prepared_at'
    | 'approved_by'
    | 'approved_at'
    | 'sha256'
  >,
): CloseSummary {
  return {
    merchantAccount: r.merchant_account,
    currency: r.currency,
    period: r.period,
    status: r.status,
    preparedBy: r.prepared_by,
    preparedAt: r.prepared_at,
    approvedBy: r.approved_by,
    approvedAt: r.approved_at,
    sha256: r.sha256,
  };
}

export interface CloseRow {
  id: string;
  merchantAccount: string;
  currency: string;
  period: string;
  status: 'prepared' | 'approved';
  preparedBy: string;
  preparedAt: Date;
  approvedBy: string | null;
  approvedAt: Date | null;
  sha256: string | null;
  figures: Record<string, unknown>;
}

function closeOf(r: Selectable<ClosesTable>): CloseRow {
  return { id: String(r.id), ...summaryOf(r), figures: r.figures };
}

/** Month closes, newest period first. */
export async function listCloses(
  db: Db,
  filter: { merchantAccount?: string; currency?: string; period?: string },
): Promise<CloseRow[]> {
  let q = db.selectFrom('closes').selectAll();
  if (filter.merchantAccount !== undefined) q = q.where('merchant_account', '=', filter.merchantAccount);
  if (filter.currency !== undefined) q = q.where('currency', '=', filter.currency);
  if (filter.period !== undefined) q = q.where('period', '=', filter.period);
  const rows = await q
    .orderBy('period', 'desc')
    .orderBy('merchant_account')
    .orderBy('currency')
    .limit(500)
    .execute();
  return rows.map(closeOf);
}

export async function getClose(db: Db, id: string): Promise<CloseRow | null> {
  if (!/^\d{1,18}$/.test(id)) return null;
  const row = await db.selectFrom('closes').selectAll().where('id', '=', id).executeTakeFirst();
  return row ? closeOf(row) : null;
}
