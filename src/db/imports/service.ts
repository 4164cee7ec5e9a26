/**
 * Records one imported file in one transaction, all or nothing: the import (who, when, the file's
 * SHA-256, the counts), a bank statement's balances and counts, and every line not stored before. A
 * line is stored once under its identity, so importing a file again or a statement that overlaps another
 * adds only the lines never seen (`new`); a failure leaves no trace of the file. A settlement report's
 * settlements are booked to the ledger's cash leg in the same transaction (src/db/cash-leg/service.ts),
 * each once.
 *
 * The new lines are events too: the same transaction writes an outbox row naming the import, and the
 * outbox relay publishes its new lines to the kind's `imports.*.v1` topic in batches
 * (src/db/imports/events.ts). An import that adds nothing publishes nothing.
 */
import { bookSettlementRows, type SettlementsBooked } from '../cash-leg/service.ts';
import type { Db } from '../schema.ts';
import { enqueueImportLines } from './events.ts';
import {
  insertBankLines,
  insertImport,
  insertSettlementRows,
  insertStatement,
  insertTransactionRows,
  setImportNewLines,
} from './lines.ts';
import type { ImportFile } from './tables.ts';

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
    const statements: { new: number }[] = [];
    let fresh = 0;
    let settlements: SettlementsBooked | null = null;
    if (file.kind === 'bank-statement') {
      for (const [i, { lines: statementLines, ...statement }] of file.statements.entries()) {
        const added = await insertBankLines(tx, id, statementLines);
        await insertStatement(tx, id, i + 1, { ...statement }, added);
        statements.push({ new: added });
        fresh += added;
      }
    } else if (file.kind === 'provider-transactions') {
      fresh = await insertTransactionRows(tx, id, file.rows);
    } else {
      fresh = await insertSettlementRows(tx, id, file.rows);
      // Each settlement of the file is booked once, as stored (the rows stored before included).
      settlements = await bookSettlementRows(
        tx,
        file.rows.map((r) => r.identity),
      );
    }
    await setImportNewLines(tx, id, fresh);
    await enqueueImportLines(tx, file.kind, id, importedAt, fresh);
    return { id, importedAt, lines, new: fresh, statements, settlements };
  });
}
