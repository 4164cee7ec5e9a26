/**
 * Imported files and their lines. `imports` records every import of a file (who, when, the file's
 * SHA-256, the counts), the same file imported again included; each line of a bank statement, a provider
 * transactions report or a provider settlement report is stored once under its identity (the account and
 * the bank's or provider's reference, else a hash of the line's content), with the import that first
 * brought it, so a file imported twice or two overlapping statements add each line once. A bank
 * statement's balances and counts are kept per import too. Amounts are numeric major units, never floats.
 * Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE imports (
      id bigserial CONSTRAINT imports_pkey PRIMARY KEY,
      kind text NOT NULL CONSTRAINT imports_kind_check
        CHECK (kind IN ('bank-statement', 'provider-transactions', 'provider-settlements')),
      file_name text NOT NULL CONSTRAINT imports_file_name_check CHECK (file_name <> ''),
      sha256 text NOT NULL CONSTRAINT imports_sha256_check CHECK (sha256 ~ '^[0-9a-f]{64}$'),
      profile text,
      imported_by text NOT NULL CONSTRAINT imports_imported_by_check CHECK (imported_by <> ''),
      imported_at timestamptz NOT NULL DEFAULT now(),
      lines integer NOT NULL CONSTRAINT imports_lines_check CHECK (lines >= 0),
      new_lines integer NOT NULL CONSTRAINT imports_new_lines_check CHECK (new_lines BETWEEN 0 AND lines),
      skipped integer NOT NULL DEFAULT 0 CONSTRAINT imports_skipped_check CHECK (skipped >= 0)
    )`.execute(db);
  await sql`CREATE INDEX imports_sha256_idx ON imports (sha256)`.execute(db);
  await sql`CREATE INDEX imports_imported_at_idx ON imports (imported_at)`.execute(db);

  await sql`
    CREATE TABLE import_statements (
      import_id bigint NOT NULL CONSTRAINT import_statements_import_fkey REFERENCES imports (id) ON DELETE CASCADE,
      position integer NOT NULL CONSTRAINT import_statements_position_check CHECK (position >= 1),
      statement_id text,
      format text NOT NULL,
      bank_account text NOT NULL,
      currency char(3) NOT NULL,
      opening numeric,
      closing numeric,
      credits numeric NOT NULL CONSTRAINT import_statements_credits_check CHECK (credits >= 0),
      debits numeric NOT NULL CONSTRAINT import_statements_debits_check CHECK (debits <= 0),
      booked integer NOT NULL CONSTRAINT import_statements_booked_check CHECK (booked >= 0),
      pending integer NOT NULL CONSTRAINT import_statements_pending_check CHECK (pending >= 0),
      new_lines integer NOT NULL CONSTRAINT import_statements_new_lines_check CHECK (new_lines BETWEEN 0 AND booked),
      CONSTRAINT import_statements_pkey PRIMARY KEY (import_id, position),
      CONSTRAINT import_statements_balance_check
        CHECK (opening IS NULL OR closing IS NULL OR opening + credits + debits = closing)
    )`.execute(db);

  await sql`
    CREATE TABLE bank_statement_lines (
      identity text CONSTRAINT bank_statement_lines_pkey PRIMARY KEY,
      import_id bigint NOT NULL CONSTRAINT bank_statement_lines_import_fkey REFERENCES imports (id),
      content_hash text NOT NULL,
      bank_account text NOT NULL,
      currency char(3) NOT NULL,
      reference text,
      booking_date date NOT NULL,
      value_date date,
      amount numeric NOT NULL,
      reversal boolean NOT NULL,
      end_to_end_ids text[] NOT NULL,
      counterparty text,
      description text,
      transactions jsonb NOT NULL
    )`.execute(db);
  await sql`CREATE INDEX bank_statement_lines_account_date_idx ON bank_statement_lines (bank_account, booking_date)`.execute(
    db,
  );
  await sql`CREATE INDEX bank_statement_lines_import_idx ON bank_statement_lines (import_id)`.execute(db);

  await sql`
    CREATE TABLE provider_transaction_rows (
      identity text CONSTRAINT provider_transaction_rows_pkey PRIMARY KEY,
      import_id bigint NOT NULL CONSTRAINT provider_transaction_rows_import_fkey REFERENCES imports (id),
      content_hash text NOT NULL,
      transaction_id text NOT NULL,
      type text NOT NULL CONSTRAINT provider_transaction_rows_type_check
        CHECK (type IN ('deposit', 'cashout', 'refund', 'fee', 'settlement')),
      status text NOT NULL,
      external_id text,
      invoice_id text,
      currency char(3) NOT NULL,
      gross numeric NOT NULL,
      fee numeric NOT NULL,
      net numeric NOT NULL,
      created_at timestamptz NOT NULL,
      updated_at timestamptz,
      settlement_id text,
      CONSTRAINT provider_transaction_rows_net_check CHECK (net = gross - fee)
    )`.execute(db);
  await sql`CREATE INDEX provider_transaction_rows_settlement_idx ON provider_transaction_rows (settlement_id)`.execute(
    db,
  );
  await sql`CREATE INDEX provider_transaction_rows_import_idx ON provider_transaction_rows (import_id)`.execute(
    db,
  );

  await sql`
    CREATE TABLE provider_settlement_rows (
      identity text CONSTRAINT provider_settlement_rows_pkey PRIMARY KEY,
      import_id bigint NOT NULL CONSTRAINT provider_settlement_rows_import_fkey REFERENCES imports (id),
      content_hash text NOT NULL,
      settlement_id text NOT NULL,
      account text,
      period_start timestamptz,
      period_end timestamptz,
      currency char(3) NOT NULL,
      gross numeric NOT NULL,
      fees numeric NOT NULL CONSTRAINT provider_settlement_rows_fees_check CHECK (fees >= 0),
      settlement_currency char(3) NOT NULL,
      rate numeric NOT NULL CONSTRAINT provider_settlement_rows_rate_check CHECK (rate > 0),
      net numeric NOT NULL,
      value_date date NOT NULL,
      bank_reference text
    )`.execute(db);
  await sql`CREATE INDEX provider_settlement_rows_bank_reference_idx ON provider_settlement_rows (bank_reference)`.execute(
    db,
  );
  await sql`CREATE INDEX provider_settlement_rows_import_idx ON provider_settlement_rows (import_id)`.execute(
    db,
  );
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE provider_settlement_rows`.execute(db);
  await sql`DROP TABLE provider_transaction_rows`.execute(db);
  await sql`DROP TABLE bank_statement_lines`.execute(db);
  await sql`DROP TABLE import_statements`.execute(db);
  await sql`DROP TABLE imports`.execute(db);
}
