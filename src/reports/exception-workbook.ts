import ExcelJS from 'exceljs';
import { type RawBuilder, sql } from 'kysely';
import { accountFilter, countRows, forEachBatch } from '../db/report-queries.ts';
import type { Db } from '../db/schema.ts';
import { type Minor, parseLedgerMinor } from '../domain/money.ts';
import type { Period } from './period.ts';
import { type ColumnSpec, INT_FORMAT, inSnapshot, prepareOutputs, TableSheet } from './sheet-writer.ts';

export const AGE_BUCKET_LABELS = ['under 1 day', '1-3 days', '3-7 days', 'over 7 days'] as const;

/** Index into AGE_BUCKET_LABELS of an age in milliseconds. */
export function ageBucket(ageMs: number): 0 | 1 | 2 | 3 {
  const days = ageMs / 86_400_000;
  if (days < 1) return 0;
  if (days < 3) return 1;
  if (days < 7) return 2;
  return 3;
}

export interface ExceptionWorkbookOptions {
  period: Period;
  account: string | null;
  out: string;
  csvDir?: string | null;
  /** Start of each CSV's name (`<prefix>-<sheet>.csv`; default: the sheet's name alone). */
  csvPrefix?: string;
  /** Ages are measured at min(period end, now). */
  now: Date;
  onProgress?: (done: number, total: number) => void;
}

export interface TypeCounts {
  type: string;
  /** Open (open or acknowledged) at the as-of instant, per age bucket. */
  open: [number, number, number, number];
  openedInPeriod: number;
  resolvedInPeriod: number;
}

export interface ExceptionWorkbookResult {
  asOf: Date;
  byType: TypeCounts[];
  rowCounts: Record<string, number>;
  files: string[];
  lateRejections: { currency: string; amount: Minor }[];
}

const DETAIL_COLUMNS: ColumnSpec[] = [
  { header: 'Id', key: 'id', type: 'int', width: 8 },
  { header: 'Type', key: 'type', type: 'text', width: 24 },
  { header: 'Severity', key: 'severity', type: 'text', width: 10 },
  { header: 'State', key: 'state', type: 'text', width: 13 },
  { header: 'Account', key: 'account', type: 'text', width: 14 },
  { header: 'Kind', key: 'kind', type: 'text', width: 9 },
  { header: 'Entity id', key: 'entityId', type: 'text', width: 16 },
  { header: 'Times seen', key: 'count', type: 'int', width: 11, total: true },
  { header: 'First seen', key: 'firstSeen', type: 'date' },
  { header: 'Last seen', key: 'lastSeen', type: 'date' },
  { header: 'Age (days)', key: 'age', type: 'int', width: 11 },
  { header: 'Acknowledged by', key: 'ackBy', type: 'text', width: 16 },
  { header: 'Acknowledged at', key: 'ackAt', type: 'date' },
  { header: 'Resolved by', key: 'resolvedBy', type: 'text', width: 14 },
  { header: 'Resolved at', key: 'resolvedAt', type: 'date' },
  { header: 'Note', key: 'note', type: 'text', width: 40 },
];

const LATE_COLUMNS: ColumnSpec[] = [
  { header: 'Account', key: 'account', type: 'text', width: 14 },
  { header: 'Kind', key: 'kind', type: 'text', width: 9 },
  { header: 'Id', key: 'id', type: 'text', width: 16 },
  { header: 'External id / deposit', key: 'ref', type: 'text', width: 22 },
  { header: 'Status', key: 'status', type: 'text', width: 12 },
  { header: 'Rejection', key: 'rejection', type: 'text', width: 28 },
  { header: 'Currency', key: 'currency', type: 'text', width: 9 },
  { header: 'Amount', key: 'amount', type: 'money', total: true },
  { header: 'Completed at', key: 'completedAt', type: 'date' },
  { header: 'Rejected at', key: 'rejectedAt', type: 'date' },
  { header: 'Reversal booked at', key: 'bookedAt', type: 'date' },
];

interface ExceptionRow {
  id: string;
  type: string;
  severity: string;
  state: string;
  merchant_account: string;
  entity_kind: string;
  entity_id: string;
  count: number;
  first_seen_at: Date;
  last_seen_at: Date;
  acknowledged_by: string | null;
  acknowledged_at: Date | null;
  resolved_by: string | null;
  resolved_at: Date | null;
  note: string | null;
}

/** Exceptions open at `asOf`, or opened or resolved in the period. */
function exceptionQuery(p: Period, asOf: Date, account: string | null): RawBuilder<ExceptionRow> {
  return sql<ExceptionRow>`
    SELECT x.id::text AS id, x.type, x.severity, x.state, x.merchant_account, x.entity_kind, x.entity_id, x.count,
           x.first_seen_at, x.last_seen_at, x.acknowledged_by, x.acknowledged_at, x.resolved_by, x.resolved_at,
           coalesce(x.resolution_note, x.acknowledgement_note) AS note
      FROM exceptions x
     WHERE x.first_seen_at < ${asOf}
       AND (x.resolved_at IS NULL OR x.resolved_at >= ${p.start})${accountFilter(account, 'x.merchant_account')}
     ORDER BY x.type, x.first_seen_at, x.id`;
}

interface LateRow {
  merchant_account: string;
  entity_kind: string;
  entity_id: string;
  external_ref: string | null;
  parent_deposit_id: string | null;
  status: string | null;
  rejection_code: string | null;
  rejection_reason: string | null;
  currency: string;
  amount: string;
  completed_at: Date | null;
  status_since: Date | null;
  booked_at: Date;
}

function lateQuery(p: Period, account: string | null): RawBuilder<LateRow> {
  return sql<LateRow>`
    SELECT e.merchant_account, e.entity_kind, e.entity_id, m.external_ref, m.parent_deposit_id, m.status,
           m.rejection_code, m.rejection_reason, e.currency, (e.amount * e.direction)::text AS amount,
           m.completed_at, m.status_since, e.created_at AS booked_at
      FROM journal_entries e
      LEFT JOIN mirrors m ON m.merchant_account = e.merchant_account AND m.entity_kind = e.entity_kind
                         AND m.entity_id = e.entity_id
     WHERE e.effect = 'late_reversal' AND e.book = 'live'
       AND e.created_at >= ${p.start} AND e.created_at < ${p.end}${accountFilter(account)}
     ORDER BY e.created_at, e.id`;
}

export async function writeExceptionWorkbook(
  db: Db,
  options: ExceptionWorkbookOptions,
): Promise<ExceptionWorkbookResult> {
  const { period, account } = options;
  const tz = period.timeZone;
  const asOf = new Date(Math.min(period.end.getTime(), options.now.getTime()));
  const csvPath = await prepareOutputs(options);

  return inSnapshot(db, async (trx) => {
    const { rows: stats } = await sql<{
      type: string;
      b0: number;
      b1: number;
      b2: number;
      b3: number;
      opened: number;
      resolved: number;
    }>`
        WITH x AS (
          SELECT type, first_seen_at, resolved_at,
                 (first_seen_at < ${asOf} AND (resolved_at IS NULL OR resolved_at > ${asOf})) AS open_at,
                 extract(epoch FROM (${asOf}::timestamptz - first_seen_at)) / 86400 AS age
            FROM exceptions x
           WHERE true${accountFilter(account, 'x.merchant_account')}
        )
        SELECT type,
               count(*) FILTER (WHERE open_at AND age < 1)::int AS b0,
               count(*) FILTER (WHERE open_at AND age >= 1 AND age < 3)::int AS b1,
               count(*) FILTER (WHERE open_at AND age >= 3 AND age < 7)::int AS b2,
               count(*) FILTER (WHERE open_at AND age >= 7)::int AS b3,
               count(*) FILTER (WHERE first_seen_at >= ${period.start} AND first_seen_at < ${period.end})::int AS opened,
               count(*) FILTER (WHERE resolved_at >= ${period.start} AND resolved_at < ${period.end})::int AS resolved
          FROM x GROUP BY type ORDER BY type`.execute(trx);
    const byType: TypeCounts[] = stats
      .map((s) => ({
        type: s.type,
        open: [s.b0, s.b1, s.b2, s.b3] as [number, number, number, number],
        openedInPeriod: s.opened,
        resolvedInPeriod: s.resolved,
      }))
      .filter((t) => t.open.some((n) => n > 0) || t.openedInPeriod > 0 || t.resolvedInPeriod > 0);

    const detailQuery = exceptionQuery(period, asOf, account);
    const late = lateQuery(period, account);
    const total = (await countRows(trx, detailQuery)) + (await countRows(trx, late));
    let done = 0;
    options.onProgress?.(0, total);

    const wb = new ExcelJS.stream.xlsx.WorkbookWriter({
      filename: options.out,
      useStyles: true,
      useSharedStrings: false,
    });
    wb.creator = 'payrecon';

    // Summary: one table of open exceptions by age, one of opened and resolved in the period.
    const ws = wb.addWorksheet('Summary', { views: [{ state: 'frozen', ySplit: 3 }] });
    ws.columns = [
      { key: 'type', width: 28 },
      ...[1, 2, 3, 4, 5, 6].map(() => ({ width: 14, style: { numFmt: INT_FORMAT } })),
    ];
    const title = ws.addRow([
      `Exceptions · ${account ?? 'all accounts'} · ${period.from} to ${period.to} · open as of ${asOf.toISOString()}`,
    ]);
    title.font = { bold: true, size: 13 };
    title.commit();
    ws.addRow([]).commit();
    const h1 = ws.addRow(['Open exceptions by type', ...AGE_BUCKET_LABELS, 'Total open']);
    h1.font = { bold: true };
    h1.commit();
    const firstTypeRow = 4;
    byType.forEach((t, i) => {
      const r = firstTypeRow + i;
      ws.addRow([
        t.type,
        ...t.open,
        { formula: `SUM(B${r}:E${r})`, result: t.open.reduce((a, b) => a + b, 0) },
      ]).commit();
    });
    const lastTypeRow = firstTypeRow + byType.length - 1;
    const col = (c: string, values: number[]) =>
      byType.length
        ? {
            formula: `SUM(${c}${firstTypeRow}:${c}${lastTypeRow})`,
            result: values.reduce((a, b) => a + b, 0),
          }
        : 0;
    const totals = ws.addRow([
      'Total',
      ...[0, 1, 2, 3].map((b) =>
        col(
          String.fromCharCode(66 + b),
          byType.map((t) => t.open[b]!),
        ),
      ),
      col(
        'F',
        byType.map((t) => t.open.reduce((a, b) => a + b, 0)),
      ),
    ]);
    totals.font = { bold: true };
    totals.commit();
    ws.addRow([]).commit();
    const h2 = ws.addRow(['In the period, by type', 'Opened', 'Resolved']);
    h2.font = { bold: true };
    h2.commit();
    for (const t of byType) ws.addRow([t.type, t.openedInPeriod, t.resolvedInPeriod]).commit();
    ws.commit();

    const rowCounts: Record<string, number> = {};
    const files = [options.out];

    const exPath = csvPath('exceptions');
    const detail = new TableSheet(wb, 'Exceptions', DETAIL_COLUMNS, {
      timeZone: tz,
      csvPath: exPath,
      preamble: [`Exceptions open at ${period.to} or opened or resolved in the period · times in ${tz}`],
    });
    let seen = 0;
    await forEachBatch(trx, detailQuery, 5000, async (rows) => {
      for (const r of rows) {
        seen += r.count;
        detail.add([
          Number(r.id),
          r.type,
          r.severity,
          r.state,
          r.merchant_account,
          r.entity_kind,
          r.entity_id,
          r.count,
          r.first_seen_at,
          r.last_seen_at,
          Math.floor((asOf.getTime() - r.first_seen_at.getTime()) / 86_400_000),
          r.acknowledged_by,
          r.acknowledged_at,
          r.resolved_by,
          r.resolved_at,
          r.note,
        ]);
      }
      done += rows.length;
      options.onProgress?.(done, total);
      await detail.drain();
    });
    await detail.finish(new Map([['', { count: seen }]]));
    rowCounts.Exceptions = detail.rowCount;
    if (exPath) files.push(exPath);

    const latePath = csvPath('late-rejections');
    const lateSheet = new TableSheet(wb, 'Late rejections', LATE_COLUMNS, {
      timeZone: tz,
      csvPath: latePath,
      preamble: [
        `Cashouts and refunds REJECTED after COMPLETED, reversal booked in the period · times in ${tz}`,
      ],
      currencyKey: 'currency',
    });
    const lateTotals = new Map<string, { amount: Minor }>();
    await forEachBatch(trx, late, 5000, async (rows) => {
      for (const r of rows) {
        const amount = parseLedgerMinor(r.amount);
        lateSheet.add([
          r.merchant_account,
          r.entity_kind,
          r.entity_id,
          r.entity_kind === 'refund' ? r.parent_deposit_id : r.external_ref,
          r.status,
          [r.rejection_code, r.rejection_reason].filter(Boolean).join(' ') || null,
          r.currency,
          amount,
          r.completed_at,
          r.status_since,
          r.booked_at,
        ]);
        const t = lateTotals.get(r.currency) ?? { amount: 0n };
        t.amount += amount;
        lateTotals.set(r.currency, t);
      }
      done += rows.length;
      options.onProgress?.(done, total);
      await lateSheet.drain();
    });
    await lateSheet.finish(lateTotals);
    rowCounts['Late rejections'] = lateSheet.rowCount;
    if (latePath) files.push(latePath);

    await wb.commit();
    return {
      asOf,
      byType,
      rowCounts,
      files,
      lateRejections: [...lateTotals].map(([currency, t]) => ({ currency, amount: t.amount })),
    };
  });
}
