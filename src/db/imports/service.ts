/**
 * Records one imported file in one transaction, all or nothing: the import (who, when, the file's
 * SHA-256, the counts), a bank statement's balances and counts, and every line not stored before. A
 * line is stored once under its identity, so importing a file again or a statement that overlaps another
 * adds only the lines never seen (`new`); a failure leaves no trace of the file. A settlement report's
 * settlements are booked to the ledger's cash leg in the same transaction (src/db/cash-leg/service.ts),
 * each once.
 *
 * The new lines are events too: in the same transaction, the outbox gets one row per batch of up to
 * 1,000 new lines of the file (the value of the kind's `imports.*.v1` topic), which the outbox relay
 * publishes. An import that adds nothing publishes nothing.
 */

import type { ImportKind } from '../../domain/imports.ts';
import { bookSettlementRows, type SettlementsBooked } from '../cash-leg/service.ts';
import { enqueueEvents } from '../runs/outbox.ts';
import type { Db } from '../schema.ts';
import {
  insertBankLines,
  insertImport,
  insertSettlementRows,
  insertStatement,
  insertTransactionRows,
  setImportNewLines,
} from './lines.ts';
import type { BankLineRecord, ImportFile, SettlementRowRecord, TransactionRowRecord } from './tables.ts';

/** The topic of each kind's new lines: the catalog's IMPORT_TOPICS (src/events/topics.ts), checked by a test. */
export const IMPORT_EVENT_TOPICS: Readonly<Record<ImportKind, string>> = {
  'bank-statement': 'imports.bank-lines.v1',
  'provider-transactions': 'imports.provider-transactions.v1',
  'provider-settlements': 'imports.provider-settlements.v1',
};
/** Lines per event (the catalog's IMPORT_BATCH_LINES). */
export const IMPORT_EVENT_LINES = 1000;

const millis = (iso: string | null) => (iso === null ? null : Date.parse(iso));

/** A line as its topic's Avro record (snake_case, decimal text, epoch milliseconds). */
function bankLineEvent(l: BankLineRecord): Record<string, unknown> {
  return {
    identity: l.identity,
    content_hash: l.content_hash,
    bank_account: l.bank_account,
    currency: l.currency,
    reference: l.reference,
    booking_date: l.booking_date,
    value_date: l.value_date,
    amount: l.amount,
    reversal: l.reversal,
    end_to_end_ids: l.end_to_end_ids,
    counterparty: l.counterparty,
    description: l.description,
    transactions: JSON.stringify(l.transactions),
  };
}

function transactionEvent(r: TransactionRowRecord): Record<string, unknown> {
  return { ...r, created_at: millis(r.created_at), updated_at: millis(r.updated_at) };
}

function settlementEvent(r: SettlementRowRecord): Record<string, unknown> {
  return { ...r, period_start: millis(r.period_start), period_end: millis(r.period_end) };
}

/** Collects an import's new lines and writes them to the outbox in batches of IMPORT_EVENT_LINES. */
function importEvents(tx: Db, kind: ImportKind, importId: string, importedAt: Date) {
  const topic = IMPORT_EVENT_TOPICS[kind];
  let pending: Record<string, unknown>[] = [];
  let batch = 0;
  async function write(lines: Record<string, unknown>[]): Promise<void> {
    batch += 1;
    await enqueueEvents(tx, [
      {
        eventId: `${topic}:${importId}:${batch}`,
        topic,
        key: `${kind}:${importId}:${batch}`,
        payload: { import_id: importId, kind, batch, imported_at: importedAt.getTime(), lines },
      },
    ]);
  }
  return {
    async add(lines: Record<string, unknown>[]): Promise<void> {
      pending.push(...lines);
      while (pending.length >= IMPORT_EVENT_LINES) {
        const full = pending.slice(0, IMPORT_EVENT_LINES);
        pending = pending.slice(IMPORT_EVENT_LINES);
        await write(full);
      }
    },
    async flush(): Promise<void> {
      if (pending.length > 0) await write(pending);
      pending = [];
    },
  };
}

export interface RecordedImport {
  id: string;
  importedAt: Date;
  lines: number;
  new: number;
  /** Per statement of a bank statement file, in file order: its new lines. */
  statements: { new: number }[];
  /** A settlement report's rows booked to the ledger's cash leg (null for other kinds). */
  settlements: SettlementsBooked | null;
}

export async function recordImport(db: Db, file: ImportFile): Promise<RecordedImport> {
  return db.transaction().execute(async (tx) => {
    const lines =
      file.kind === 'bank-statement'
        ? file.statements.reduce((sum, s) => sum + s.lines.length, 0)
        : file.rows.length;
    const skipped =
      file.kind === 'bank-statement' ? file.statements.reduce((sum, s) => sum + s.pending, 0) : 0;
    const { id, importedAt } = await insertImport(tx, {
      kind: file.kind,
      fileName: file.fileName,
      sha256: file.sha256,
      profile: file.profile,
      importedBy: file.importedBy,
      lines,
      skipped,
    });
    const events = importEvents(tx, file.kind, id, importedAt);
    const statements: { new: number }[] = [];
    let fresh = 0;
    let settlements: SettlementsBooked | null = null;
    if (file.kind === 'bank-statement') {
      for (const [i, { lines: statementLines, ...statement }] of file.statements.entries()) {
        const added = await insertBankLines(tx, id, statementLines, (added) =>
          events.add(added.map(bankLineEvent)),
        );
        await insertStatement(tx, id, i + 1, { ...statement }, added);
        statements.push({ new: added });
        fresh += added;
      }
    } else if (file.kind === 'provider-transactions') {
      fresh = await insertTransactionRows(tx, id, file.rows, (added) =>
        events.add(added.map(transactionEvent)),
      );
    } else {
      fresh = await insertSettlementRows(tx, id, file.rows, (added) =>
        events.add(added.map(settlementEvent)),
      );
      // Each settlement of the file is booked once, as stored (the rows stored before included).
      settlements = await bookSettlementRows(
        tx,
        file.rows.map((r) => r.identity),
      );
    }
    await events.flush();
    await setImportNewLines(tx, id, fresh);
    return { id, importedAt, lines, new: fresh, statements, settlements };
  });
}
