/**
 * The exception queue as CSV: the same columns for the API's export
 * (`GET /api/v1/exceptions/export`) and the page's (`/exceptions/export`), over the rows `listQueue`
 * (src/db/exception-queue.ts) returns for the same filter. Instants in UTC (ISO 8601), amounts as
 * decimal text, formula-looking text defused (csvField).
 */
import type { QueueRow } from '../db/exceptions/queue.ts';
import { AGE_BUCKETS } from '../domain/exception-queue.ts';
import { formatAmount } from '../domain/money.ts';
import { csvField } from './sheet-writer.ts';

const iso = (d: Date | null) => (d ? d.toISOString() : '');

/** The label of the age bucket an exception first seen at `firstSeenAt` is in at `now`. */
export function ageBucketLabel(firstSeenAt: Date, now: Date): string {
  const days = (now.getTime() - firstSeenAt.getTime()) / 86_400_000;
  return (AGE_BUCKETS.find((b) => days >= b.minDays && days < b.maxDays) ?? AGE_BUCKETS[0]).label;
}

/** The export's columns, in order: the list's fields a desk reads. */
export const QUEUE_CSV_COLUMNS: readonly { header: string; cell: (x: QueueRow, now: Date) => string }[] = [
  { header: 'id', cell: (x) => x.id },
  { header: 'type', cell: (x) => x.type },
  { header: 'severity', cell: (x) => x.severity },
  { header: 'state', cell: (x) => x.state },
  { header: 'merchant_account', cell: (x) => x.merchantAccount },
  { header: 'kind', cell: (x) => x.kind },
  { header: 'entity_id', cell: (x) => x.entityId },
  { header: 'currency', cell: (x) => x.currency ?? '' },
  { header: 'amount', cell: (x) => (x.amount === null ? '' : formatAmount(x.amount)) },
  { header: 'count', cell: (x) => String(x.count) },
  { header: 'first_seen_at', cell: (x) => iso(x.firstSeenAt) },
  { header: 'last_seen_at', cell: (x) => iso(x.lastSeenAt) },
  { header: 'age_bucket', cell: (x, now) => ageBucketLabel(x.firstSeenAt, now) },
  { header: 'due_at', cell: (x) => iso(x.dueAt) },
  { header: 'overdue', cell: (x) => String(x.overdue) },
  { header: 'assignee', cell: (x) => x.assignee ?? '' },
  { header: 'resolved_by', cell: (x) => x.resolvedBy ?? '' },
  { header: 'resolved_at', cell: (x) => iso(x.resolvedAt) },
  { header: 'resolution_note', cell: (x) => x.resolutionNote ?? '' },
  { header: 'last_note', cell: (x) => x.lastNote?.note ?? '' },
  { header: 'last_note_by', cell: (x) => x.lastNote?.actor ?? '' },
  { header: 'last_note_at', cell: (x) => iso(x.lastNote?.at ?? null) },
];

/** The rows as one CSV document (CRLF line ends, a header line first). */
export function queueCsv(rows: readonly QueueRow[], now: Date): Buffer {
  const lines = [QUEUE_CSV_COLUMNS.map((c) => csvField(c.header)).join(',')];
  for (const row of rows) lines.push(QUEUE_CSV_COLUMNS.map((c) => csvField(c.cell(row, now))).join(','));
  return Buffer.from(`${lines.join('\r\n')}\r\n`, 'utf8');
}

/** The export's file name for the instant `now`. */
export const queueCsvName = (now: Date) => `exceptions-${now.toISOString().slice(0, 10)}.csv`;
