/**
 * The lines an import brought, as events. `recordImport` writes one outbox row per import that added
 * lines (`enqueueImportLines`, in its transaction: the row is tiny, so recording a million lines costs
 * no more); the outbox relay then reads the import's lines in batches (`importLineBatches`, a cursor in
 * its transaction) and publishes each batch. The lines are stored once and never change, so what the
 * relay reads is what the import stored. Each batch is the Avro record of the kind's topic
 * (`schemas/imports.*.avsc`): snake_case fields, amounts and rates as decimal text, dates `YYYY-MM-DD`,
 * instants as epoch milliseconds.
 */
import { type RawBuilder, sql } from 'kysely';
import type { ImportKind } from '../../domain/imports.ts';
import { enqueueEvents } from '../runs/outbox.ts';
import type { Db } from '../schema.ts';

/** The topic of each kind's new lines: the catalog's IMPORT_TOPICS (src/events/topics.ts), checked by a test. */
export const IMPORT_EVENT_TOPICS: Readonly<Record<ImportKind, string>> = {
  'bank-statement': 'imports.bank-lines.v1',
  'provider-transactions': 'imports.provider-transactions.v1',
  'provider-settlements': 'imports.provider-settlements.v1',
};

/** What the outbox row of an import's lines holds. */
export interface ImportLinesPayload {
  import_id: string;
  kind: ImportKind;
  /** How many lines the import brought (the relay publishes them all). */
  new_lines: number;
  imported_at: number;
}

/** Adds the outbox row that has the relay publish an import's new lines (nothing when it added none). */
export async function enqueueImportLines(
  db: Db,
  kind: ImportKind,
  importId: string,
  importedAt: Date,
  newLines: number,
): Promise<void> {
  if (newLines === 0) return;
  const topic = IMPORT_EVENT_TOPICS[kind];
  const payload: ImportLinesPayload = {
    import_id: importId,
    kind,
    new_lines: newLines,
    imported_at: importedAt.getTime(),
  };
  await enqueueEvents(db, [
    { eventId: `${topic}:${importId}`, topic, key: `${kind}:${importId}`, payload: { ...payload } },
  ]);
}

const ms = (d: Date | null) => (d === null ? null : d.getTime());

const SELECTS: Record<ImportKind, (importId: string) => RawBuilder<Record<string, unknown>>> = {
  'bank-statement': (id) => sql`
    SELECT identity, content_hash, bank_account, currency, reference, booking_date::text AS booking_date,
      value_date::text AS value_date, amount::text AS amount, reversal, end_to_end_ids, counterparty,
      description, transactions
    FROM bank_statement_lines WHERE import_id = ${id}`,
  'provider-transactions': (id) => sql`
    SELECT identity, content_hash, transaction_id, type, status, external_id, invoice_id, currency,
      gross::text AS gross, fee::text AS fee, net::text AS net, created_at, updated_at, settlement_id
    FROM provider_transaction_rows WHERE import_id = ${id}`,
  'provider-settlements': (id) => sql`
    SELECT identity, content_hash, settlement_id, account, period_start, period_end, currency,
      gross::text AS gross, fees::text AS fees, settlement_currency, rate::text AS rate, net::text AS net,
      value_date::text AS value_date, bank_reference, balance_at_cutoff::text AS balance_at_cutoff
    FROM provider_settlement_rows WHERE import_id = ${id}`,
};

function toRecord(kind: ImportKind, r: Record<string, unknown>): Record<string, unknown> {
  if (kind === 'bank-statement') return { ...r, transactions: JSON.stringify(r.transactions ?? []) };
  if (kind === 'provider-transactions') {
    return { ...r, created_at: ms(r.created_at as Date), updated_at: ms(r.updated_at as Date | null) };
  }
  return {
    ...r,
    period_start: ms(r.period_start as Date | null),
    period_end: ms(r.period_end as Date | null),
  };
}

/**
 * The import's lines in batches of `size` (the kind's topic record, batches numbered from 1), read with
 * a cursor: call it inside a transaction (`trx`); a million lines never sit in memory at once.
 */
export async function* importLineBatches(
  trx: Db,
  payload: ImportLinesPayload,
  size: number,
): AsyncGenerator<Record<string, unknown>> {
  const cursor = `import_lines_${payload.import_id.replace(/\D/g, '')}`;
  await sql`DECLARE ${sql.raw(cursor)} NO SCROLL CURSOR FOR ${SELECTS[payload.kind](payload.import_id)}`.execute(
    trx,
  );
  try {
    for (let batch = 1; ; batch++) {
      const { rows } = await sql<Record<string, unknown>>`FETCH ${sql.raw(String(size))} FROM ${sql.raw(
        cursor,
      )}`.execute(trx);
      if (rows.length === 0) return;
      yield {
        import_id: payload.import_id,
        kind: payload.kind,
        batch,
        imported_at: payload.imported_at,
        lines: rows.map((r) => toRecord(payload.kind, r)),
      };
      if (rows.length < size) return;
    }
  } finally {
    // In a transaction that failed the cursor is gone with it: the first error is the one to tell.
    await sql`CLOSE ${sql.raw(cursor)}`.execute(trx).catch(() => undefined);
  }
}
