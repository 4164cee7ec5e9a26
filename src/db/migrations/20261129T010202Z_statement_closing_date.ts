/**
 * The date of a bank statement's closing balance (camt.053's CLBD `Dt`; for a CSV or XLSX file, its last
 * line's booking date), so a month close names the last statement at its cut-off. Null on statements
 * imported before it was kept. Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE import_statements ADD COLUMN closing_date date`.execute(db);
  await sql`CREATE INDEX import_statements_account_date_idx ON import_statements (bank_account, currency, closing_date)`.execute(
    db,
  );
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX import_statements_account_date_idx`.execute(db);
  await sql`ALTER TABLE import_statements DROP COLUMN closing_date`.execute(db);
}
