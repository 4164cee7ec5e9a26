/**
 * A month with a bank account for the close's bank proof (September 2026 of `acme` BRL, bank account
 * `BR00ACME`), built as rows: the ledger's cash leg (a settlement of 500.00 in transit, then its bank
 * credit), two imported statements (September's closing at 470.50, October's), their lines and the
 * settlement report's rows, the matches (one standing since 12 September, one created in October) and the
 * exceptions of what is unmatched.
 *
 * At the cut-off: statement S-0930 of 2026-09-29 closes at 470.50, the ledger's bank:BR00ACME holds
 * 500.00 (difference -29.50); unmatched are the rent debit L-RENT (-30.00, no note yet), a 0.50 credit
 * L-SMALL (no note), and the settlement ST-2 (200.00, value date 29 September, matched in October only).
 * S-0930 is the account's first statement (opening 0.00), so the two lines explain the difference:
 * 470.50 - 0.00 - (-29.50) = 500.00, nothing unexplained; ST-2 is in transit, no part of it.
 */
import { type Kysely, sql } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import { bookEntry, closeLedger } from './close-fixtures.ts';

export const BANK = { id: 'BR00ACME', currency: 'BRL', account: 'acme', name: 'Acme settlement account' };

const SHA = 'a'.repeat(64);

/** An import row of the given kind, file and instant; its id. */
export async function importOf(
  db: Kysely<Database>,
  kind: string,
  file: string,
  at: string,
): Promise<string> {
  const { rows } = await sql<{ id: string }>`
    INSERT INTO imports (kind, file_name, sha256, imported_by, imported_at, lines, new_lines)
    VALUES (${kind}, ${file}, ${SHA}, 'ana', ${at}::timestamptz, 0, 0) RETURNING id::text AS id`.execute(db);
  return rows[0]!.id;
}

/** A bank line of BR00ACME brought by the import. */
export async function line(db: Kysely<Database>, importId: string, id: string, day: string, amount: string) {
  await sql`INSERT INTO bank_statement_lines (identity, import_id, content_hash, bank_account, currency, reference,
      booking_date, value_date, amount, reversal, end_to_end_ids, description, transactions)
    VALUES (${id}, ${importId}::bigint, ${id}, ${BANK.id}, 'BRL', ${`REF-${id}`}, ${day}::date, ${day}::date,
      ${amount}::numeric, false, '{}', ${id}, '[]')`.execute(db);
}

async function settlement(db: Kysely<Database>, importId: string, id: string, day: string, net: string) {
  await sql`INSERT INTO provider_settlement_rows (identity, import_id, content_hash, settlement_id, account, currency,
      gross, fees, settlement_currency, rate, net, value_date, bank_reference)
    VALUES (${`acme:${id}`}, ${importId}::bigint, ${id}, ${id}, 'acme', 'BRL', ${net}::numeric, 0, 'BRL', 1,
      ${net}::numeric, ${day}::date, ${`BR-${id}`})`.execute(db);
}

async function match(db: Kysely<Database>, at: string, members: [string, string][]) {
  const { rows } = await sql<{ id: string }>`
    INSERT INTO matches (pair, rule, created_at, created_by) VALUES ('bank-settlement', 'settlement-id', ${at}::timestamptz, 'payrecon')
    RETURNING id::text AS id`.execute(db);
  for (const [side, identity] of members) {
    await sql`INSERT INTO match_members (match_id, side, identity) VALUES (${rows[0]!.id}::bigint, ${side}, ${identity})`.execute(
      db,
    );
  }
}

/** The exception ids of the unmatched items, by entity id. */
export async function bankProofMonth(db: Kysely<Database>): Promise<Record<string, string>> {
  await closeLedger(db);
  await sql`INSERT INTO ledger_accounts (merchant_account, currency, book, name)
    VALUES ('acme', 'BRL', 'live', ${`bank:${BANK.id}`}), ('acme', 'BRL', 'live', 'settlements_in_transit')`.execute(
    db,
  );
  await bookEntry(
    db,
    'deposit',
    'd1',
    'credit',
    [
      ['available', '700.00'],
      ['deposits', '-700.00'],
    ],
    '2026-09-03T10:00Z',
  );
  await bookEntry(
    db,
    'settlement',
    'ST-1',
    'settlement',
    [
      ['settlements_in_transit', '500.00'],
      ['available', '-500.00'],
    ],
    '2026-09-10T10:00Z',
  );
  await bookEntry(
    db,
    'bank_match',
    'm1',
    'bank_match',
    [
      [`bank:${BANK.id}`, '500.00'],
      ['settlements_in_transit', '-500.00'],
    ],
    '2026-09-12T12:00Z',
  );
  const sept = await importOf(db, 'bank-statement', 'sept.xml', '2026-09-30T20:00Z');
  await sql`INSERT INTO import_statements (import_id, position, statement_id, format, bank_account, currency, opening,
      closing, credits, debits, booked, pending, new_lines)
    VALUES (${sept}::bigint, 1, 'S-0930', 'camt.053.001.08', ${BANK.id}, 'BRL', 0, 470.50, 500.50, -30.00, 3, 0, 3)`.execute(
    db,
  );
  await line(db, sept, 'L-ST1', '2026-09-12', '500.00');
  await line(db, sept, 'L-RENT', '2026-09-28', '-30.00');
  await line(db, sept, 'L-SMALL', '2026-09-29', '0.50');
  const oct = await importOf(db, 'bank-statement', 'oct.xml', '2026-10-03T20:00Z');
  await sql`INSERT INTO import_statements (import_id, position, statement_id, format, bank_account, currency, opening,
      closing, credits, debits, booked, pending, new_lines)
    VALUES (${oct}::bigint, 1, 'S-1002', 'camt.053.001.08', ${BANK.id}, 'BRL', 470.50, 670.50, 200.00, 0, 1, 0, 1)`.execute(
    db,
  );
  await line(db, oct, 'L-ST2', '2026-10-02', '200.00');
  const report = await importOf(db, 'provider-settlements', 'settlements.csv', '2026-10-03T20:00Z');
  await settlement(db, report, 'ST-1', '2026-09-11', '500.00');
  await settlement(db, report, 'ST-2', '2026-09-29', '200.00');
  await match(db, '2026-09-12T12:00Z', [
    ['bank_line', 'L-ST1'],
    ['settlement', 'acme:ST-1'],
  ]);
  await match(db, '2026-10-02T12:00Z', [
    ['bank_line', 'L-ST2'],
    ['settlement', 'acme:ST-2'],
  ]);
  // As matching raises them: the facts name the amount and currency (src/db/matching/exceptions.ts).
  const details = (ref: string, amount: string) =>
    JSON.stringify({ facts: { externalRef: ref, providerAmount: amount, providerCurrency: 'BRL' } });
  const { rows } = await sql<{ id: string; entity_id: string }>`
    INSERT INTO exceptions (type, merchant_account, entity_kind, entity_id, severity, state, first_seen_at, last_seen_at, details)
    VALUES ('BANK_LINE_UNMATCHED', 'acme', 'bank_line', 'L-RENT', 'medium', 'open', '2026-09-30T21:00Z', '2026-09-30T21:00Z',
        ${details('REF-L-RENT', '-30.00')}::jsonb),
      ('BANK_LINE_UNMATCHED', 'acme', 'bank_line', 'L-SMALL', 'low', 'open', '2026-09-30T21:00Z', '2026-09-30T21:00Z',
        ${details('REF-L-SMALL', '0.50')}::jsonb),
      ('SETTLEMENT_NOT_RECEIVED', 'acme', 'settlement', 'ST-2', 'high', 'open', '2026-10-01T21:00Z', '2026-10-01T21:00Z',
        ${details('BR-ST-2', '200.00')}::jsonb)
    RETURNING id::text AS id, entity_id`.execute(db);
  return Object.fromEntries(rows.map((r) => [r.entity_id, r.id]));
}

/** A comment on an exception (what the queue's comment writes). */
export async function commentOn(db: Kysely<Database>, exceptionId: string, note: string): Promise<void> {
  await sql`INSERT INTO exception_events (exception_id, actor, action, note) VALUES (${exceptionId}::bigint, 'ana', 'comment', ${note})`.execute(
    db,
  );
}

/**
 * A close of July 2026 (acme BRL) as version 1 signed it, before the bank proof explained its difference:
 * its canonical text and SHA-256 as stored then, with a bank proof of one total over lines and
 * settlements. Whatever the code writes now, this text must keep verifying and reading.
 */
export const SIGNED_V1 = {
  period: '2026-07',
  canonical:
    '{"accounts":[],"bankProof":[{"bankAccount":"BR00OLD","difference":"-29.50","ledger":"500.00","name":null,"statement":{"date":"2026-07-30","importId":"1","position":1,"statementId":"S-0730"},"statementClosing":"470.50","unmatched":[{"ageDays":1,"amount":"-30.00","date":"2026-07-30","exceptionId":null,"id":"L-OLD-RENT","kind":"bank_line","noted":true,"reference":"REF-OLD"},{"ageDays":0,"amount":"200.00","date":"2026-07-31","exceptionId":null,"id":"ST-OLD","kind":"settlement","noted":true,"reference":null}],"unmatchedTotal":"170.00"}],"currency":"BRL","earlierPeriodAdjustments":[],"end":"2026-08-01T00:00:00.000Z","exceptions":[],"exceptionsTotal":"0.00","inFlight":[],"inFlightTotal":"0.00","merchantAccount":"acme","movements":[],"noteAbove":"1.00","period":"2026-07","proof":"0.00","reservedAtEnd":"0.00","start":"2026-07-01T00:00:00.000Z","timeZone":"UTC","v":1}',
  sha256: '407fa68245e007e9956d832a25abe9c40ac6c3af1f1d869448473d7b992582ba',
};

/** Stores SIGNED_V1 as prepared by `ana`, as a close signed then was stored. */
export async function storeSignedV1(db: Kysely<Database>): Promise<void> {
  await sql`INSERT INTO closes (merchant_account, currency, period, prepared_by, prepared_at, figures, canonical, sha256,
      period_start, period_end, time_zone)
    VALUES ('acme', 'BRL', ${SIGNED_V1.period}, 'ana', '2026-08-02T09:00Z', ${SIGNED_V1.canonical}::jsonb,
      ${SIGNED_V1.canonical}, ${SIGNED_V1.sha256}, '2026-07-01T00:00Z', '2026-08-01T00:00Z', 'UTC')`.execute(
    db,
  );
}
