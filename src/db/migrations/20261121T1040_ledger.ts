/**
 * The ledger's first schema: merchant accounts, ledger accounts, journal entries and postings (numeric,
 * balanced per entry and currency by a statement-level trigger, immutable), entity mirrors, the
 * append-only status history, intents, exceptions, the alert outbox, job-run claims and report runs.
 * Statuses are text with CHECK constraints, never enums. This file imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

const BOOK_ACCOUNTS = {
  live: ['available', 'reserved', 'deposits', 'fees', 'payouts', 'refunds'],
  test: ['test_available', 'test_deposits', 'test_fees'],
  crypto: ['crypto_payers', 'crypto_in_transit', 'crypto_customer_wallets'],
} as const;

const EFFECTS = [
  'credit',
  'fee',
  'early_release_reversal',
  'crypto_approved',
  'crypto_delivered',
  'reserve',
  'release',
  'settle',
  'late_reversal',
];

const list = (values: readonly string[]) => sql.raw(values.map((v) => `'${v}'`).join(', '));

export async function up(db: Kysely<unknown>): Promise<void> {
  const bookCheck = sql.raw(
    Object.entries(BOOK_ACCOUNTS)
      .map(([book, names]) => `(book = '${book}' AND name IN (${names.map((n) => `'${n}'`).join(', ')}))`)
      .join(' OR '),
  );

  await sql`
    CREATE TABLE merchant_accounts (
      name text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT merchant_accounts_pk PRIMARY KEY (name)
    );

    CREATE TABLE ledger_accounts (
      merchant_account text NOT NULL,
      currency text NOT NULL,
      book text NOT NULL,
      name text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT ledger_accounts_pk PRIMARY KEY (merchant_account, currency, book, name),
      CONSTRAINT ledger_accounts_merchant_fk FOREIGN KEY (merchant_account) REFERENCES merchant_accounts (name),
      CONSTRAINT ledger_accounts_book_name_ck CHECK (${bookCheck})
    );

    CREATE TABLE journal_entries (
      id bigserial NOT NULL,
      idempotency_key text NOT NULL,
      merchant_account text NOT NULL,
      entity_kind text NOT NULL,
      entity_id text NOT NULL,
      effect text NOT NULL,
      direction smallint NOT NULL,
      seq integer NOT NULL,
      book text NOT NULL,
      currency text NOT NULL,
      amount numeric(22, 2) NOT NULL,
      fee_currency text,
      fee_amount numeric(22, 2),
      effective_at timestamptz NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT journal_entries_pk PRIMARY KEY (id),
      CONSTRAINT journal_entries_idempotency_key_uq UNIQUE (idempotency_key),
      CONSTRAINT journal_entries_kind_ck CHECK (entity_kind IN ('deposit', 'cashout', 'refund')),
      CONSTRAINT journal_entries_effect_ck CHECK (effect IN (${list(EFFECTS)})),
      CONSTRAINT journal_entries_direction_ck CHECK (direction IN (1, -1)),
      CONSTRAINT journal_entries_seq_ck CHECK (seq >= 1),
      CONSTRAINT journal_entries_book_ck CHECK (book IN ('live', 'test', 'crypto')),
      CONSTRAINT journal_entries_amount_ck CHECK (amount >= 0)
    );
    CREATE INDEX journal_entries_entity_ix ON journal_entries (merchant_account, entity_kind, entity_id);
    CREATE INDEX journal_entries_created_ix ON journal_entries (created_at);

    CREATE TABLE postings (
      id bigserial NOT NULL,
      entry_id bigint NOT NULL,
      merchant_account text NOT NULL,
      currency text NOT NULL,
      book text NOT NULL,
      account text NOT NULL,
      amount numeric(22, 2) NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT postings_pk PRIMARY KEY (id),
      CONSTRAINT postings_entry_fk FOREIGN KEY (entry_id) REFERENCES journal_entries (id),
      CONSTRAINT postings_account_fk FOREIGN KEY (merchant_account, currency, book, account)
        REFERENCES ledger_accounts (merchant_account, currency, book, name),
      CONSTRAINT postings_amount_nonzero_ck CHECK (amount <> 0)
    );
    CREATE INDEX postings_entry_ix ON postings (entry_id);
    CREATE INDEX postings_account_ix ON postings (merchant_account, currency, book, account, created_at);

    CREATE FUNCTION postings_check_balanced() RETURNS trigger LANGUAGE plpgsql AS $fn$
    DECLARE
      bad record;
    BEGIN
      SELECT n.entry_id, n.book AS posting_book, e.book AS entry_book INTO bad
        FROM new_postings n JOIN journal_entries e ON e.id = n.entry_id
        WHERE n.book <> e.book OR n.merchant_account <> e.merchant_account
        LIMIT 1;
      IF FOUND THEN
        RAISE EXCEPTION 'ledger: entry % mixes books or accounts (posting book %, entry book %)',
          bad.entry_id, bad.posting_book, bad.entry_book
          USING ERRCODE = 'check_violation', CONSTRAINT = 'postings_single_book';
      END IF;
      SELECT p.entry_id, p.currency, sum(p.amount) AS total INTO bad
        FROM postings p
        WHERE p.entry_id IN (SELECT DISTINCT entry_id FROM new_postings)
        GROUP BY p.entry_id, p.currency
        HAVING sum(p.amount) <> 0
        LIMIT 1;
      IF FOUND THEN
        RAISE EXCEPTION 'ledger: entry % does not balance in % (sum %)', bad.entry_id, bad.currency, bad.total
          USING ERRCODE = 'check_violation', CONSTRAINT = 'postings_balanced';
      END IF;
      RETURN NULL;
    END
    $fn$;
    CREATE TRIGGER postings_balanced_trg AFTER INSERT ON postings
      REFERENCING NEW TABLE AS new_postings FOR EACH STATEMENT EXECUTE FUNCTION postings_check_balanced();

    CREATE FUNCTION ledger_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      RAISE EXCEPTION 'ledger: % on % is refused: entries are immutable, corrections are new entries',
        TG_OP, TG_TABLE_NAME USING ERRCODE = 'check_violation', CONSTRAINT = 'ledger_immutable';
    END
    $fn$;
    CREATE TRIGGER journal_entries_immutable_trg BEFORE UPDATE OR DELETE ON journal_entries
      FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
    CREATE TRIGGER journal_entries_no_truncate_trg BEFORE TRUNCATE ON journal_entries
      FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
    CREATE TRIGGER postings_immutable_trg BEFORE UPDATE OR DELETE ON postings
      FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
    CREATE TRIGGER postings_no_truncate_trg BEFORE TRUNCATE ON postings
      FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

    CREATE TABLE intents (
      intent_id text NOT NULL,
      operation text NOT NULL,
      merchant_account text NOT NULL,
      entity_kind text NOT NULL,
      external_ref text NOT NULL,
      entity_id text,
      currency text NOT NULL,
      amount numeric(22, 2) NOT NULL,
      expected_fee numeric(22, 2),
      test boolean NOT NULL DEFAULT false,
      crypto boolean NOT NULL DEFAULT false,
      fee_on_payer boolean NOT NULL DEFAULT false,
      parent_deposit_id text,
      outcome text NOT NULL,
      created_at timestamptz NOT NULL,
      request jsonb NOT NULL DEFAULT '{}'::jsonb,
      response jsonb,
      recorded_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT intents_pk PRIMARY KEY (intent_id),
      CONSTRAINT intents_operation_ck CHECK (operation IN ('deposit', 'card_deposit', 'cashout', 'refund')),
      CONSTRAINT intents_kind_ck CHECK (entity_kind IN ('deposit', 'cashout', 'refund')),
      CONSTRAINT intents_outcome_ck CHECK (outcome IN ('created', 'declined', 'unknown')),
      CONSTRAINT intents_amount_ck CHECK (amount >= 0)
    );
    CREATE INDEX intents_entity_ix ON intents (merchant_account, entity_kind, entity_id);
    CREATE INDEX intents_external_ref_ix ON intents (merchant_account, entity_kind, external_ref);

    CREATE TABLE mirrors (
      merchant_account text NOT NULL,
      entity_kind text NOT NULL,
      entity_id text NOT NULL,
      external_ref text,
      status text,
      status_since timestamptz,
      ever_completed boolean NOT NULL DEFAULT false,
      ever_early_released boolean NOT NULL DEFAULT false,
      currency text,
      amount numeric(22, 2),
      fee_currency text,
      fee_amount numeric(22, 2),
      fee_on_payer boolean NOT NULL DEFAULT false,
      test boolean NOT NULL DEFAULT false,
      crypto boolean NOT NULL DEFAULT false,
      status_reason text,
      payer_verification text,
      rejection_code text,
      rejection_reason text,
      parent_deposit_id text,
      expires_at timestamptz,
      details jsonb NOT NULL DEFAULT '{}'::jsonb,
      intent_id text,
      first_seen_at timestamptz,
      last_seen_at timestamptz,
      completed_at timestamptz,
      next_poll_at timestamptz,
      poll_attempts integer NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT mirrors_pk PRIMARY KEY (merchant_account, entity_kind, entity_id),
      CONSTRAINT mirrors_kind_ck CHECK (entity_kind IN ('deposit', 'cashout', 'refund')),
      CONSTRAINT mirrors_intent_fk FOREIGN KEY (intent_id) REFERENCES intents (intent_id)
    );
    CREATE INDEX mirrors_next_poll_ix ON mirrors (next_poll_at) WHERE next_poll_at IS NOT NULL;
    CREATE INDEX mirrors_external_ref_ix ON mirrors (merchant_account, entity_kind, external_ref);
    CREATE INDEX mirrors_parent_ix ON mirrors (merchant_account, parent_deposit_id) WHERE parent_deposit_id IS NOT NULL;
    CREATE INDEX mirrors_status_ix ON mirrors (entity_kind, status);

    CREATE TABLE status_history (
      id bigserial NOT NULL,
      event_id text NOT NULL,
      merchant_account text NOT NULL,
      entity_kind text NOT NULL,
      entity_id text NOT NULL,
      from_status text,
      to_status text,
      source text NOT NULL,
      observed_at timestamptz NOT NULL,
      recorded_at timestamptz NOT NULL DEFAULT now(),
      stale boolean NOT NULL DEFAULT false,
      illegal boolean NOT NULL DEFAULT false,
      external_ref text,
      currency text,
      amount numeric(22, 2),
      fee_currency text,
      fee_amount numeric(22, 2),
      fee_on_payer boolean,
      test boolean NOT NULL DEFAULT false,
      crypto boolean NOT NULL DEFAULT false,
      status_reason text,
      payer_verification text,
      rejection_code text,
      rejection_reason text,
      parent_deposit_id text,
      details jsonb NOT NULL DEFAULT '{}'::jsonb,
      CONSTRAINT status_history_pk PRIMARY KEY (id),
      CONSTRAINT status_history_event_uq UNIQUE (event_id),
      CONSTRAINT status_history_kind_ck CHECK (entity_kind IN ('deposit', 'cashout', 'refund')),
      CONSTRAINT status_history_source_ck CHECK (source IN ('webhook', 'poll', 'intent', 'backfill'))
    );
    CREATE INDEX status_history_entity_ix ON status_history (merchant_account, entity_kind, entity_id, observed_at);
    CREATE TRIGGER status_history_immutable_trg BEFORE UPDATE OR DELETE ON status_history
      FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();

    CREATE TABLE exceptions (
      id bigserial NOT NULL,
      type text NOT NULL,
      merchant_account text NOT NULL,
      entity_kind text NOT NULL,
      entity_id text NOT NULL,
      severity text NOT NULL,
      state text NOT NULL DEFAULT 'open',
      count integer NOT NULL DEFAULT 1,
      first_seen_at timestamptz NOT NULL,
      last_seen_at timestamptz NOT NULL,
      details jsonb NOT NULL DEFAULT '{}'::jsonb,
      resolution_note text,
      resolved_by text,
      resolved_at timestamptz,
      updated_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT exceptions_pk PRIMARY KEY (id),
      CONSTRAINT exceptions_entity_uq UNIQUE (type, merchant_account, entity_kind, entity_id),
      CONSTRAINT exceptions_state_ck CHECK (state IN ('open', 'acknowledged', 'resolved')),
      CONSTRAINT exceptions_severity_ck CHECK (severity IN ('info', 'low', 'medium', 'high', 'critical')),
      CONSTRAINT exceptions_count_ck CHECK (count >= 1)
    );
    CREATE INDEX exceptions_open_ix ON exceptions (state, type, first_seen_at);

    CREATE TABLE outbox (
      id bigserial NOT NULL,
      alert_id text NOT NULL,
      topic text NOT NULL,
      key text NOT NULL,
      payload jsonb NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      published_at timestamptz,
      attempts integer NOT NULL DEFAULT 0,
      last_error text,
      CONSTRAINT outbox_pk PRIMARY KEY (id),
      CONSTRAINT outbox_alert_uq UNIQUE (alert_id)
    );
    CREATE INDEX outbox_unpublished_ix ON outbox (id) WHERE published_at IS NULL;

    CREATE TABLE job_runs (
      run_key text NOT NULL,
      job text NOT NULL,
      owner text,
      status text NOT NULL DEFAULT 'running',
      started_at timestamptz NOT NULL DEFAULT now(),
      finished_at timestamptz,
      error text,
      CONSTRAINT job_runs_pk PRIMARY KEY (run_key),
      CONSTRAINT job_runs_status_ck CHECK (status IN ('running', 'succeeded', 'failed'))
    );

    CREATE TABLE report_runs (
      id bigserial NOT NULL,
      run_key text NOT NULL,
      report text NOT NULL,
      merchant_account text,
      period_start timestamptz,
      period_end timestamptz,
      status text NOT NULL DEFAULT 'running',
      file_path text,
      row_count integer,
      error text,
      created_at timestamptz NOT NULL DEFAULT now(),
      finished_at timestamptz,
      CONSTRAINT report_runs_pk PRIMARY KEY (id),
      CONSTRAINT report_runs_key_uq UNIQUE (run_key),
      CONSTRAINT report_runs_status_ck CHECK (status IN ('running', 'succeeded', 'failed'))
    );
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TABLE IF EXISTS report_runs;
    DROP TABLE IF EXISTS job_runs;
    DROP TABLE IF EXISTS outbox;
    DROP TABLE IF EXISTS exceptions;
    DROP TABLE IF EXISTS status_history;
    DROP TABLE IF EXISTS mirrors;
    DROP TABLE IF EXISTS intents;
    DROP TABLE IF EXISTS postings;
    DROP TABLE IF EXISTS journal_entries;
    DROP TABLE IF EXISTS ledger_accounts;
    DROP TABLE IF EXISTS merchant_accounts;
    DROP FUNCTION IF EXISTS ledger_refuse_change();
    DROP FUNCTION IF EXISTS postings_check_balanced();
  `.execute(db);
}
