/**
 * The signed, frozen record of a month close (`closes`), read back with its hash checked; preparing and
 * approving are in `service.ts`.
 */
import { type Selectable, sql } from 'kysely';
import { type CloseDocument, type CloseStatus, canonicalJson, sha256Hex } from '../../domain/close.ts';
import type { ClosesTable, Db } from '../schema.ts';

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
