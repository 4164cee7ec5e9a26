import {
  countRows,
  type ExceptionRow,
  exceptionQuery,
  exceptionStatsByType,
  forEachBatch,
  type LateRow,
  lateQuery,
} from '../db/read-models/reports.ts';
import type { Db } from '../db/schema.ts';
import { AGE_BUCKETS } from '../domain/exception-queue.ts';
import { DECIDED_TYPES, refusedReading } from '../domain/exception-rules.ts';
import { DEFAULT_SLA_TABLE, type SlaTable } from '../domain/exception-sla.ts';
import { type Minor, parseLedgerMinor } from '../domain/money.ts';
import { paymentPath } from '../domain/payment-path.ts';
import {
  DECISION_HEADER,
  decisionChoices,
  exceptionKey,
  KEY_HEADER,
  NOTE_HEADER,
} from '../domain/workbook-decisions.ts';
import { ageBucketLabel } from './exception-csv.ts';
import { humanInstant, type Period } from './period.ts';
import {
  BOLD,
  type ColumnSpec,
  INT_FORMAT,
  inSnapshot,
  type PrintRule,
  type PrintSetup,
  prepareOutputs,
  printOptions,
  TableSheet,
  WIDE_TABLE,
  workbookWriter,
} from './sheet-writer.ts';

/** The queue's age buckets (src/domain/exception-queue.ts), the summary's columns. */
export const AGE_BUCKET_LABELS = AGE_BUCKETS.map((b) => b.label);

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
  /** The page's public base URL: entity ids become links to their payment page. */
  links?: string | null;
  /** The exception queue's service levels (due times); default DEFAULT_SLA_TABLE. */
  sla?: SlaTable;
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

/** The summary: landscape, the whole sheet on one page, at 100 %: both tables are read together. */
export const EXCEPTION_SUMMARY_PRINT: PrintRule = { orientation: 'landscape', fit: 'page', minScale: 100 };

/**
 * The exceptions: landscape, one page wide, at 70 % or more, the header rows on every page. A page
 * carries what to work on: which exception, its state and owner, which payment, both sides' amounts,
 * what the provider said, its age and when it is due. The queue's history and texts for look-ups
 * (references, the rule, sightings, acknowledgements, resolutions, notes and comments) are folded away
 * and not printed; the CSV has them all.
 */
export const EXCEPTION_DETAIL_PRINT: PrintRule = WIDE_TABLE;

/** Late rejections: landscape, one page wide, at 70 % or more; every column is printed. */
export const LATE_PRINT: PrintRule = WIDE_TABLE;

/** Exception rows; ages are measured at `asOf`. */
export const DETAIL_COLUMNS = (asOf: Date): ColumnSpec<ExceptionRow>[] => [
  { header: 'Id', key: 'id', type: 'int', width: 8, cell: (r) => Number(r.id) },
  { header: 'Type', key: 'type', type: 'text', width: 24, wrap: true, cell: (r) => r.type },
  { header: 'Severity', key: 'severity', type: 'text', width: 10, cell: (r) => r.severity },
  { header: 'State', key: 'state', type: 'text', width: 13, cell: (r) => r.state },
  { header: 'Assignee', key: 'assignee', type: 'text', width: 10, wrap: true, cell: (r) => r.assignee },
  { header: 'Account', key: 'account', type: 'text', width: 12, wrap: true, cell: (r) => r.merchant_account },
  { header: 'Kind', key: 'kind', type: 'text', width: 8, cell: (r) => r.entity_kind },
  {
    header: 'Entity id',
    key: 'entityId',
    type: 'text',
    width: 12,
    cell: (r) => r.entity_id,
    link: (r) => paymentPath(r.merchant_account, r.entity_kind, r.entity_id),
  },
  {
    header: 'Invoice / external id',
    key: 'externalRef',
    type: 'text',
    width: 20,
    printed: false,
    cell: (r) => r.external_ref,
  },
  {
    header: 'Intent amount',
    key: 'intentAmount',
    type: 'money',
    width: 14,
    cell: (r) => (r.intent_amount === null ? null : parseLedgerMinor(r.intent_amount)),
  },
  {
    header: 'Intent currency',
    key: 'intentCurrency',
    type: 'text',
    width: 10,
    cell: (r) => r.intent_currency,
  },
  {
    header: 'Provider amount',
    key: 'providerAmount',
    type: 'money',
    width: 14,
    cell: (r) => (r.provider_amount === null ? null : parseLedgerMinor(r.provider_amount)),
  },
  {
    header: 'Provider currency',
    key: 'providerCurrency',
    type: 'text',
    width: 10,
    cell: (r) => r.provider_currency,
  },
  {
    header: 'Provider status',
    key: 'providerStatus',
    type: 'text',
    width: 14,
    printed: false,
    cell: (r) => r.provider_status,
  },
  {
    header: 'Status reason',
    key: 'statusReason',
    type: 'text',
    width: 20,
    wrap: true,
    printed: false,
    cell: (r) => r.status_reason,
  },
  {
    header: 'Provider said (not applied)',
    key: 'refused',
    type: 'text',
    width: 17,
    wrap: true,
    cell: (r) => refusedReading(r.type, r.refused),
  },
  { header: 'Rule', key: 'rule', type: 'text', width: 60, wrap: true, printed: false, cell: (r) => r.rule },
  // Not totalled: a sum of how often each exception was seen means nothing.
  { header: 'Times seen', key: 'count', type: 'int', width: 11, printed: false, cell: (r) => r.count },
  { header: 'First seen', key: 'firstSeen', type: 'date', printed: false, cell: (r) => r.first_seen_at },
  { header: 'Last seen', key: 'lastSeen', type: 'date', printed: false, cell: (r) => r.last_seen_at },
  {
    header: 'Age (days)',
    key: 'age',
    type: 'int',
    width: 11,
    printed: false,
    cell: (r) => Math.floor((asOf.getTime() - r.first_seen_at.getTime()) / 86_400_000),
  },
  {
    header: 'Age bucket',
    key: 'ageBucket',
    type: 'text',
    width: 10,
    cell: (r) => ageBucketLabel(r.first_seen_at, asOf),
  },
  { header: 'Due', key: 'due', type: 'date', cell: (r) => r.due_at },
  { header: 'Overdue', key: 'overdue', type: 'text', width: 10, cell: (r) => (r.overdue ? 'overdue' : null) },
  // The queue's history, for look-ups: folded away, not printed.
  ...(
    [
      { header: 'Acknowledged by', key: 'ackBy', type: 'text', width: 16, cell: (r) => r.acknowledged_by },
      { header: 'Acknowledged at', key: 'ackAt', type: 'date', cell: (r) => r.acknowledged_at },
      { header: 'Resolved by', key: 'resolvedBy', type: 'text', width: 14, cell: (r) => r.resolved_by },
      { header: 'Resolved at', key: 'resolvedAt', type: 'date', cell: (r) => r.resolved_at },
      {
        header: 'Resolution note',
        key: 'note',
        type: 'text',
        width: 40,
        wrap: true,
        cell: (r) => r.note,
      },
      {
        header: 'Last comment',
        key: 'lastNote',
        type: 'text',
        width: 40,
        wrap: true,
        cell: (r) => r.last_note,
      },
      { header: 'Last comment by', key: 'lastNoteBy', type: 'text', width: 14, cell: (r) => r.last_note_by },
      { header: 'Last comment at', key: 'lastNoteAt', type: 'date', cell: (r) => r.last_note_at },
      {
        header: 'Reopened on',
        key: 'reopened',
        type: 'text',
        width: 40,
        wrap: true,
        cell: (r) => r.reopen_reason,
      },
    ] satisfies ColumnSpec<ExceptionRow>[]
  ).map((c) => ({ ...c, printed: false })),
  // Decisions in bulk: filled in and uploaded back on the exceptions page (src/db/exceptions/bulk-decisions.ts).
  {
    header: DECISION_HEADER,
    key: 'decision',
    type: 'text',
    width: 16,
    role: 'input',
    cell: () => null,
    choices: (r) => (decidable(r) ? decisionChoices(r.proposed_by !== null) : null),
  },
  { header: NOTE_HEADER, key: 'decisionNote', type: 'text', width: 40, role: 'input', cell: () => null },
  {
    header: KEY_HEADER,
    key: 'key',
    type: 'text',
    width: 24,
    role: 'key',
    cell: (r) => exceptionKey(r.id, r.version),
  },
];

/** A row the Decision column offers a list on: an unresolved exception that takes a decision. */
function decidable(r: ExceptionRow): boolean {
  return r.state !== 'resolved' && (DECIDED_TYPES as readonly string[]).includes(r.type);
}

/** Late rejections: the reversal entries booked in the period. */
export const LATE_COLUMNS: ColumnSpec<LateRow>[] = [
  { header: 'Account', key: 'account', type: 'text', width: 12, wrap: true, cell: (r) => r.merchant_account },
  { header: 'Kind', key: 'kind', type: 'text', width: 8, cell: (r) => r.entity_kind },
  {
    header: 'Id',
    key: 'id',
    type: 'text',
    width: 12,
    cell: (r) => r.entity_id,
    link: (r) => paymentPath(r.merchant_account, r.entity_kind, r.entity_id),
  },
  {
    header: 'External id / deposit',
    key: 'ref',
    type: 'text',
    width: 16,
    wrap: true,
    cell: (r) => (r.entity_kind === 'refund' ? r.parent_deposit_id : r.external_ref),
  },
  { header: 'Status', key: 'status', type: 'text', width: 10, cell: (r) => r.status },
  {
    header: 'Rejection',
    key: 'rejection',
    type: 'text',
    width: 24,
    wrap: true,
    cell: (r) => [r.rejection_code, r.rejection_reason].filter(Boolean).join(' ') || null,
  },
  { header: 'Currency', key: 'currency', type: 'text', width: 10, cell: (r) => r.currency },
  { header: 'Amount', key: 'amount', type: 'money', total: true, cell: (r) => parseLedgerMinor(r.amount) },
  { header: 'Completed at', key: 'completedAt', type: 'date', cell: (r) => r.completed_at },
  { header: 'Rejected at', key: 'rejectedAt', type: 'date', cell: (r) => r.status_since },
  { header: 'Reversal booked at', key: 'bookedAt', type: 'date', cell: (r) => r.booked_at },
];

export async function writeExceptionWorkbook(
  db: Db,
  options: ExceptionWorkbookOptions,
): Promise<ExceptionWorkbookResult> {
  const { period, account } = options;
  const tz = period.timeZone;
  const asOf = new Date(Math.min(period.end.getTime(), options.now.getTime()));
  const csvPath = await prepareOutputs(options);

  return inSnapshot(db, async (trx) => {
    const stats = await exceptionStatsByType(trx, period, asOf, account);
    const byType: TypeCounts[] = stats
      .map((s) => ({
        type: s.type,
        open: [s.b0, s.b1, s.b2, s.b3] as [number, number, number, number],
        openedInPeriod: s.opened,
        resolvedInPeriod: s.resolved,
      }))
      .filter((t) => t.open.some((n) => n > 0) || t.openedInPeriod > 0 || t.resolvedInPeriod > 0);

    const detailQuery = exceptionQuery(period, asOf, account, options.sla ?? DEFAULT_SLA_TABLE);
    const late = lateQuery(period, account);
    const total = (await countRows(trx, detailQuery)) + (await countRows(trx, late));
    let done = 0;
    options.onProgress?.(0, total);

    const wb = workbookWriter(options.out);
    wb.creator = 'payrecon';

    // Summary: one table of open exceptions by age, one of opened and resolved in the period.
    const print: PrintSetup = {
      report: `Exceptions · ${account ?? 'all accounts'}`,
      period: `${period.from} to ${period.to}`,
    };
    const ws = wb.addWorksheet('Summary', {
      views: [{ state: 'frozen', ySplit: 3 }],
      ...printOptions(print, 3, EXCEPTION_SUMMARY_PRINT),
    });
    const summaryLabels = [
      'Open exceptions by type',
      'In the period, by type',
      'Total',
      ...byType.map((t) => t.type),
    ];
    ws.columns = [
      { key: 'type', width: Math.max(28, ...summaryLabels.map((l) => l.length + 3)) },
      ...[1, 2, 3, 4, 5, 6].map(() => ({ width: 14, style: { numFmt: INT_FORMAT } })),
    ];
    const title = ws.addRow([`Exceptions · ${account ?? 'all accounts'} · ${period.from} to ${period.to}`]);
    title.font = { ...BOLD, size: 13 };
    title.commit();
    ws.addRow([`Open as of ${humanInstant(asOf, tz)}`]).commit();
    const h1 = ws.addRow(['Open exceptions by type', ...AGE_BUCKET_LABELS, 'Total open']);
    h1.font = BOLD;
    // Count headers stand over their counts.
    for (let c = 2; c <= 6; c++) h1.getCell(c).alignment = { horizontal: 'right' };
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
    totals.font = BOLD;
    totals.commit();
    ws.addRow([]).commit();
    const h2 = ws.addRow(['In the period, by type', 'Opened', 'Resolved']);
    h2.font = BOLD;
    for (const c of [2, 3]) h2.getCell(c).alignment = { horizontal: 'right' };
    h2.commit();
    for (const t of byType) ws.addRow([t.type, t.openedInPeriod, t.resolvedInPeriod]).commit();
    ws.commit();

    const rowCounts: Record<string, number> = {};
    const files = [options.out];

    const exPath = csvPath('exceptions');
    const detail = new TableSheet(wb, 'Exceptions', DETAIL_COLUMNS(asOf), {
      timeZone: tz,
      print,
      linkBase: options.links,
      csvPath: exPath,
      preamble: [`Exceptions open at ${period.to} or opened or resolved in the period · times in ${tz}`],
      rule: EXCEPTION_DETAIL_PRINT,
    });
    await forEachBatch(trx, detailQuery, 5000, async (rows) => {
      for (const r of rows) detail.add(r);
      done += rows.length;
      options.onProgress?.(done, total);
      await detail.drain();
    });
    await detail.finish({ currencies: [''] });
    rowCounts.Exceptions = detail.rowCount;
    if (exPath) files.push(exPath);

    const latePath = csvPath('late-rejections');
    const lateSheet = new TableSheet(wb, 'Late rejections', LATE_COLUMNS, {
      timeZone: tz,
      print,
      linkBase: options.links,
      csvPath: latePath,
      preamble: [
        `Cashouts and refunds REJECTED after COMPLETED, reversal booked in the period · times in ${tz}`,
      ],
      currencyKey: 'currency',
      rule: LATE_PRINT,
    });
    await forEachBatch(trx, late, 5000, async (rows) => {
      for (const r of rows) lateSheet.add(r);
      done += rows.length;
      options.onProgress?.(done, total);
      await lateSheet.drain();
    });
    await lateSheet.finish();
    rowCounts['Late rejections'] = lateSheet.rowCount;
    if (latePath) files.push(latePath);

    await wb.commit();
    return {
      asOf,
      byType,
      rowCounts,
      files,
      lateRejections: [...lateSheet.totals()].map(([currency, t]) => ({
        currency,
        amount: (t.amount as Minor | undefined) ?? 0n,
      })),
    };
  });
}
