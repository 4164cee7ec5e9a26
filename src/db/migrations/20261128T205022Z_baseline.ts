/**
 * The schema of the ledger database, whole: every table, constraint, index, trigger and function, grouped
 * by concept. It replaces the migrations the schema was built up with before any release: a database
 * made by those is re-created (dropped, then `payrecon db migrate`), there is no upgrade path from it.
 * Every change from here on is a new migration, listed after this one in src/db/connection.ts.
 *
 * Conventions: statuses and kinds are text with named CHECK constraints, never enums; money is
 * numeric(22, 2) (amounts of one entity) or numeric (sums); constraints and indexes are named
 * `<table>_<what>_{pk,fk,uq,ck,ix}` (`_brin` a BRIN index), triggers `<table>_<what>_trg`; a trigger that
 * refuses a row raises under a constraint name of its own (`postings_balanced`, `ledger_immutable` ...),
 * which the error carries as a constraint violation's would. Text keys that are only ever looked up
 * by equality and that the ledger's write path inserts into on every batch use `text_pattern_ops` (bytes
 * compared instead of strcoll under the database's collation; equality is the same, the database's
 * collations being deterministic), which makes the unique ones indexes rather than constraints (a constraint
 * cannot name an operator class). `mirrors` and `poll_schedule` keep room on each page (`fillfactor`) so
 * that updates that change no indexed column stay HOT. Nothing is analyzed here: an empty table must keep
 * the planner's never-analyzed minimum size, or the write statement's first plans (and the generic plan the
 * server keeps after five) scan and hash it whole instead of probing its key.
 *
 * Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // Merchant accounts and their ledger accounts. An account name belongs to one book: the test book has
  // counterparts of the live accounts (a refund of a test deposit reserves, settles and reverses in it,
  // never touching live money), the crypto book has its own. Ledger accounts, like entries and postings,
  // are never changed or deleted.
  await sql`
    CREATE FUNCTION ledger_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'ledger: % on % is refused: entries are immutable, corrections are new entries',
        TG_OP, TG_TABLE_NAME USING ERRCODE = 'check_violation', CONSTRAINT = 'ledger_immutable';
    END
    $$;

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
      CONSTRAINT ledger_accounts_book_name_ck CHECK (
        (book = 'live' AND name IN ('available', 'reserved', 'deposits', 'fees', 'payouts', 'refunds'))
        OR (book = 'test' AND name IN ('test_available', 'test_deposits', 'test_fees', 'test_reserved', 'test_refunds'))
        OR (book = 'crypto' AND name IN ('crypto_payers', 'crypto_in_transit', 'crypto_customer_wallets')))
    );
    CREATE TRIGGER ledger_accounts_immutable_trg BEFORE UPDATE OR DELETE ON ledger_accounts
      FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
  `.execute(db);

  // Journal entries and their postings: immutable, an entry's postings sum to zero per currency. The
  // postings have no foreign keys (one lookup per row): the statement-level trigger checks a statement's
  // postings as a set, once per INSERT, and raises the first fault in a fixed order (an entry that mixes
  // books or merchant accounts, differs from its postings' or does not exist; then an unknown ledger
  // account; then an entry that does not balance). Since every entry balanced before the statement, it
  // balances after it exactly when the statement's postings of it sum to zero: the trigger reads the
  // transition table and one key probe per entry group (LATERAL ... OFFSET 0, so a plan cached with
  // other statistics cannot hash the whole of journal_entries). Groups and their min/max compare under
  // "C" (equality is all they need). Neither table has a key on `id` (nothing looks a row up by it);
  // the ids order an entry's postings. An account's postings over time are read from ledger_movements.
  await sql`
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
      -- Who booked an operator's decision, and why.
      memo jsonb,
      CONSTRAINT journal_entries_pk PRIMARY KEY (id),
      CONSTRAINT journal_entries_kind_ck CHECK (entity_kind IN ('deposit', 'cashout', 'refund')),
      CONSTRAINT journal_entries_effect_ck CHECK (effect IN ('credit', 'fee', 'early_release_reversal',
        'crypto_approved', 'crypto_delivered', 'reserve', 'release', 'settle', 'late_reversal')),
      CONSTRAINT journal_entries_direction_ck CHECK (direction IN (1, -1)),
      CONSTRAINT journal_entries_seq_ck CHECK (seq >= 1),
      CONSTRAINT journal_entries_book_ck CHECK (book IN ('live', 'test', 'crypto')),
      CONSTRAINT journal_entries_amount_ck CHECK (amount >= 0)
    );
    -- The writer's ON CONFLICT (idempotency_key) arbiter; a duplicate fails naming it (23505).
    CREATE UNIQUE INDEX journal_entries_idempotency_key_uq ON journal_entries (idempotency_key text_pattern_ops);
    -- Entity id first: the other two columns are nearly the same for every key.
    CREATE INDEX journal_entries_entity_ix ON journal_entries
      (entity_id text_pattern_ops, entity_kind text_pattern_ops, merchant_account text_pattern_ops);
    CREATE INDEX journal_entries_created_ix ON journal_entries (created_at);
    CREATE TRIGGER journal_entries_immutable_trg BEFORE UPDATE OR DELETE ON journal_entries
      FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
    CREATE TRIGGER journal_entries_no_truncate_trg BEFORE TRUNCATE ON journal_entries
      FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

    CREATE TABLE postings (
      id bigserial NOT NULL,
      entry_id bigint NOT NULL,
      merchant_account text NOT NULL,
      currency text NOT NULL,
      book text NOT NULL,
      account text NOT NULL,
      amount numeric(22, 2) NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT postings_amount_nonzero_ck CHECK (amount <> 0)
    );
    CREATE INDEX postings_entry_ix ON postings (entry_id);
    CREATE TRIGGER postings_immutable_trg BEFORE UPDATE OR DELETE ON postings
      FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
    CREATE TRIGGER postings_no_truncate_trg BEFORE TRUNCATE ON postings
      FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

    CREATE FUNCTION postings_check_balanced() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      bad record;
      unbalanced_or_mixed boolean;
      acct record;
    BEGIN
      SELECT x.entry_id, x.currency, x.total, x.book_fault INTO bad
        FROM (SELECT g.entry_id, g.currency, g.total,
                g.mixed OR e.id IS NULL OR e.book COLLATE "C" <> g.book
                  OR e.merchant_account COLLATE "C" <> g.account AS book_fault
              FROM (SELECT n.entry_id, n.currency COLLATE "C" AS currency, sum(n.amount) AS total,
                      min(n.book COLLATE "C") AS book, min(n.merchant_account COLLATE "C") AS account,
                      min(n.book COLLATE "C") <> max(n.book COLLATE "C")
                        OR min(n.merchant_account COLLATE "C") <> max(n.merchant_account COLLATE "C") AS mixed
                    FROM new_postings n GROUP BY n.entry_id, n.currency COLLATE "C") g
                LEFT JOIN LATERAL (SELECT e.id, e.book, e.merchant_account FROM journal_entries e
                  WHERE e.id = g.entry_id OFFSET 0) e ON true) x
        WHERE x.book_fault OR x.total <> 0
        ORDER BY x.book_fault DESC
        LIMIT 1;
      unbalanced_or_mixed := FOUND;
      IF unbalanced_or_mixed AND bad.book_fault THEN
        RAISE EXCEPTION 'ledger: entry % mixes books or accounts, or does not exist', bad.entry_id
          USING ERRCODE = 'check_violation', CONSTRAINT = 'postings_single_book';
      END IF;
      SELECT a.merchant_account, a.currency, a.book, a.account INTO acct
        FROM (SELECT DISTINCT merchant_account, currency, book, account FROM new_postings) a
        WHERE NOT EXISTS (SELECT 1 FROM ledger_accounts l WHERE l.merchant_account = a.merchant_account
          AND l.currency = a.currency AND l.book = a.book AND l.name = a.account)
        LIMIT 1;
      IF FOUND THEN
        RAISE EXCEPTION 'ledger: posting to unknown ledger account % % % %', acct.merchant_account, acct.currency,
          acct.book, acct.account USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'postings_account_known';
      END IF;
      IF unbalanced_or_mixed THEN
        RAISE EXCEPTION 'ledger: entry % does not balance in % (sum %)', bad.entry_id, bad.currency, bad.total
          USING ERRCODE = 'check_violation', CONSTRAINT = 'postings_balanced';
      END IF;
      RETURN NULL;
    END
    $$;
    -- Statement-level AFTER triggers fire in name order: the check (balanced) before the balances (running).
    CREATE TRIGGER postings_balanced_trg AFTER INSERT ON postings
      REFERENCING NEW TABLE AS new_postings FOR EACH STATEMENT EXECUTE FUNCTION postings_check_balanced();
  `.execute(db);

  // What the postings add up to, kept by a trigger in the transaction that posts, so no write path can
  // post without them. `ledger_balances`: one row per ledger account, the sum of its postings.
  // `ledger_movements`: per account, effect and direction, the sums into (`amount_in`, positive) and out of
  // (`amount_out`, negative) the account of the postings created in each UTC hour (`hours` 1) and day
  // (`hours` 24, `bucket` its midnight); a month reads about 31 day rows and 47 hour rows per account and
  // effect, from the index alone (its key INCLUDEs the sums). Both upserts are ordered by key: a batch locks
  // its rows once and in key order, so concurrent batches queue on the busiest account instead of
  // deadlocking. They group under "C" and sort only the groups under the default collation (the key order
  // every writer locks in). `ledger_balance_snapshots`: per account and UTC midnight `at`, the sum of the
  // postings created before `at` (src/db/balance-snapshots.ts writes them); a balance at an instant is the
  // latest snapshot at or before it plus the movements since.
  await sql`
    CREATE TABLE ledger_balances (
      merchant_account text NOT NULL,
      currency text NOT NULL,
      book text NOT NULL,
      account text NOT NULL,
      balance numeric NOT NULL DEFAULT 0,
      updated_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT ledger_balances_pk PRIMARY KEY (merchant_account, currency, book, account),
      CONSTRAINT ledger_balances_account_fk FOREIGN KEY (merchant_account, currency, book, account)
        REFERENCES ledger_accounts (merchant_account, currency, book, name)
    );

    CREATE TABLE ledger_movements (
      merchant_account text NOT NULL,
      currency text NOT NULL,
      book text NOT NULL,
      account text NOT NULL,
      hours smallint NOT NULL,
      bucket timestamptz NOT NULL,
      effect text NOT NULL,
      direction smallint NOT NULL,
      amount_in numeric NOT NULL,
      amount_out numeric NOT NULL,
      CONSTRAINT ledger_movements_pk
        PRIMARY KEY (merchant_account, currency, book, account, hours, bucket, effect, direction)
        INCLUDE (amount_in, amount_out),
      CONSTRAINT ledger_movements_account_fk FOREIGN KEY (merchant_account, currency, book, account)
        REFERENCES ledger_accounts (merchant_account, currency, book, name),
      CONSTRAINT ledger_movements_hours_ck CHECK (hours IN (1, 24))
    );

    CREATE TABLE ledger_balance_snapshots (
      merchant_account text NOT NULL,
      currency text NOT NULL,
      book text NOT NULL,
      account text NOT NULL,
      at timestamptz NOT NULL,
      balance numeric NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT ledger_balance_snapshots_pk PRIMARY KEY (merchant_account, currency, book, account, at),
      CONSTRAINT ledger_balance_snapshots_account_fk FOREIGN KEY (merchant_account, currency, book, account)
        REFERENCES ledger_accounts (merchant_account, currency, book, name)
    );

    CREATE FUNCTION postings_running_balances() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO ledger_balances AS b (merchant_account, currency, book, account, balance)
      SELECT s.merchant_account COLLATE "default", s.currency COLLATE "default", s.book COLLATE "default",
          s.account COLLATE "default", s.balance
        FROM (SELECT n.merchant_account COLLATE "C" AS merchant_account, n.currency COLLATE "C" AS currency,
                n.book COLLATE "C" AS book, n.account COLLATE "C" AS account, sum(n.amount) AS balance
              FROM new_postings n GROUP BY 1, 2, 3, 4) s
        ORDER BY 1, 2, 3, 4
      ON CONFLICT (merchant_account, currency, book, account)
        DO UPDATE SET balance = b.balance + excluded.balance, updated_at = now();
      INSERT INTO ledger_movements AS m (merchant_account, currency, book, account, hours, bucket, effect,
        direction, amount_in, amount_out)
      SELECT s.merchant_account COLLATE "default", s.currency COLLATE "default", s.book COLLATE "default",
          s.account COLLATE "default", g.hours,
          date_trunc(CASE g.hours WHEN 24 THEN 'day' ELSE 'hour' END, s.created_at, 'UTC') AS bucket,
          s.effect COLLATE "default", s.direction, sum(s.amount_in), sum(s.amount_out)
        FROM (SELECT n.merchant_account COLLATE "C" AS merchant_account, n.currency COLLATE "C" AS currency,
                n.book COLLATE "C" AS book, n.account COLLATE "C" AS account, n.created_at,
                e.effect COLLATE "C" AS effect, e.direction,
                coalesce(sum(n.amount) FILTER (WHERE n.amount > 0), 0) AS amount_in,
                coalesce(sum(n.amount) FILTER (WHERE n.amount < 0), 0) AS amount_out
              FROM new_postings n CROSS JOIN LATERAL (SELECT e.effect, e.direction FROM journal_entries e
                WHERE e.id = n.entry_id OFFSET 0) e
              GROUP BY 1, 2, 3, 4, 5, 6, 7) s
          CROSS JOIN (VALUES (1::smallint), (24::smallint)) AS g(hours)
        GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
        ORDER BY 1, 2, 3, 4, 5, 6, 7, 8
      ON CONFLICT (merchant_account, currency, book, account, hours, bucket, effect, direction)
        DO UPDATE SET amount_in = m.amount_in + excluded.amount_in, amount_out = m.amount_out + excluded.amount_out;
      RETURN NULL;
    END
    $$;
    CREATE TRIGGER postings_running_balances_trg AFTER INSERT ON postings
      REFERENCING NEW TABLE AS new_postings FOR EACH STATEMENT EXECUTE FUNCTION postings_running_balances();
  `.execute(db);

  // Intents: what payrecon asked the provider for, and what it answered (`unknown`: no answer, the
  // creation may or may not exist). Looked up by the entity, by the merchant's reference, and, for those of
  // unknown outcome with no provider id yet, by creation time (the OUTCOME_UNKNOWN sweep, the poller).
  await sql`
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
      request jsonb NOT NULL DEFAULT '{}',
      response jsonb,
      recorded_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT intents_pk PRIMARY KEY (intent_id),
      CONSTRAINT intents_operation_ck CHECK (operation IN ('deposit', 'card_deposit', 'cashout', 'refund')),
      CONSTRAINT intents_kind_ck CHECK (entity_kind IN ('deposit', 'cashout', 'refund')),
      CONSTRAINT intents_outcome_ck CHECK (outcome IN ('created', 'declined', 'unknown')),
      CONSTRAINT intents_amount_ck CHECK (amount >= 0)
    );
    CREATE INDEX intents_entity_ix ON intents (entity_id, merchant_account, entity_kind);
    CREATE INDEX intents_external_ref_ix ON intents (external_ref, merchant_account, entity_kind);
    CREATE INDEX intents_unknown_outcome_ix ON intents (created_at) WHERE outcome = 'unknown' AND entity_id IS NULL;
  `.execute(db);

  // Mirrors: the latest known state of each provider entity, one row per entity, updated by every batch
  // that reads it. Its indexes are few and keyed on columns a reading rarely changes, so most updates are
  // HOT (fillfactor 50 leaves the room on the page). The primary key leads with `entity_id`, so it also
  // serves the look-up by id alone; `bank_reference` is the provider's bank-side id of a cashout (the
  // reference a bank statement shows).
  //
  // The sets a mirror is looked up in are defined once, by `mirror_watch(kind, status)`: 'open' (not
  // final, or holding money in reserved: the stuck sweep, in-flight figures, verification, the month
  // close), 'completed' (a completed cashout or refund) and 'cancelled' (a cancelled deposit: the
  // late-move watch), else NULL. `watch` and `watch_at` (the instant the late-move watch ranges over) are
  // generated from it, so they cannot disagree with the status, and are not indexed: their partial indexes
  // live on the narrow side table `mirror_watches`, one row per mirror with a set, which the ledger's write
  // statement keeps equal to them (`payrecon db verify` checks it); a status change then rewrites the side
  // row, not every index of `mirrors`. A call of `mirror_watch` with constant arguments is folded by the
  // planner, so a reader's "watch = mirror_watch('cashout', 'PENDING')" matches the partial indexes.
  // The side table and the schedule have no foreign key to `mirrors` (a query per inserted row): their
  // writers write them with the mirror row, locked or created in the same statement.
  await sql`
    CREATE FUNCTION mirror_watch(kind text, status text) RETURNS text
      LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
      SELECT CASE
        -- not final (the stuck sweep), or holding money in reserved (in-flight figures, verify, month close)
        WHEN (kind = 'deposit' AND status IN ('CREATED', 'PENDING', 'PENDING_AUTHENTICATION', 'FOR_REVIEW',
            'APPROVED', 'EARLY_RELEASED'))
          OR (kind IN ('cashout', 'refund') AND status IN ('PENDING', 'ON_HOLD', 'DELIVERED', 'INCORRECT_DETAILS'))
          THEN 'open'
        -- the late-move watch
        WHEN kind IN ('cashout', 'refund') AND status = 'COMPLETED' THEN 'completed'
        WHEN kind = 'deposit' AND status = 'CANCELLED' THEN 'cancelled'
      END
    $$;

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
      details jsonb NOT NULL DEFAULT '{}',
      intent_id text,
      first_seen_at timestamptz,
      last_seen_at timestamptz,
      completed_at timestamptz,
      poll_attempts integer NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      bank_reference text,
      watch text GENERATED ALWAYS AS (mirror_watch(entity_kind, status)) STORED,
      watch_at timestamptz GENERATED ALWAYS AS (CASE mirror_watch(entity_kind, status)
        WHEN 'completed' THEN completed_at WHEN 'cancelled' THEN status_since END) STORED,
      CONSTRAINT mirrors_pk PRIMARY KEY (entity_id, entity_kind, merchant_account),
      CONSTRAINT mirrors_intent_fk FOREIGN KEY (intent_id) REFERENCES intents (intent_id),
      CONSTRAINT mirrors_kind_ck CHECK (entity_kind IN ('deposit', 'cashout', 'refund'))
    ) WITH (fillfactor = 50);
    -- The payment list, newest first (rows of one transaction share created_at: the sort finishes them).
    CREATE INDEX mirrors_created_ix ON mirrors (created_at);
    -- Looked up by equality only, the kind and merchant account checked on the few rows a reference names.
    CREATE INDEX mirrors_external_ref_ix ON mirrors (external_ref text_pattern_ops) WHERE external_ref IS NOT NULL;
    CREATE INDEX mirrors_intent_ix ON mirrors (intent_id text_pattern_ops) WHERE intent_id IS NOT NULL;
    CREATE INDEX mirrors_bank_reference_ix ON mirrors (bank_reference) WHERE bank_reference IS NOT NULL;
    CREATE INDEX mirrors_parent_ix ON mirrors (parent_deposit_id, merchant_account) WHERE parent_deposit_id IS NOT NULL;
    -- The balances page's charts and entitiesFirstSeenBetween read a period by this expression.
    CREATE INDEX mirrors_first_seen_ix ON mirrors (coalesce(first_seen_at, created_at));
    -- The stuck sweep's UNKNOWN_TRANSACTION check: seen entities no intent of ours created.
    CREATE INDEX mirrors_no_intent_ix ON mirrors (first_seen_at) WHERE intent_id IS NULL AND first_seen_at IS NOT NULL;

    CREATE TABLE mirror_watches (
      entity_id text NOT NULL,
      entity_kind text NOT NULL,
      merchant_account text NOT NULL,
      watch text NOT NULL,
      watch_at timestamptz,
      currency text,
      test boolean NOT NULL,
      CONSTRAINT mirror_watches_watch_ck CHECK (watch IN ('open', 'completed', 'cancelled'))
    );
    CREATE UNIQUE INDEX mirror_watches_pk ON mirror_watches
      (entity_id text_pattern_ops, entity_kind text_pattern_ops, merchant_account text_pattern_ops);
    -- Each partial index's predicate is its readers' condition, word for word, so the planner matches it.
    CREATE INDEX mirror_watches_open_ix ON mirror_watches (merchant_account, entity_kind) WHERE watch = 'open';
    CREATE INDEX mirror_watches_in_flight_ix ON mirror_watches (merchant_account, currency, test, entity_kind)
      WHERE watch = 'open' AND entity_kind IN ('cashout', 'refund');
    CREATE INDEX mirror_watches_completed_ix ON mirror_watches (watch_at) WHERE watch = 'completed';
    CREATE INDEX mirror_watches_cancelled_ix ON mirror_watches (watch_at) WHERE watch = 'cancelled';
  `.execute(db);

  // The status history: every reading of an entity (webhook, poll, intent, backfill, an operator's
  // decision), append-only. The event id is its unique key (the writer's ON CONFLICT (event_id) arbiter);
  // there is no key on `id` (nothing looks a row up by it; the ids order an entity's history). The
  // incremental verification finds a period's entities by `recorded_at`, which grows with the physical
  // order: a BRIN index is a few pages and next to nothing to keep up on insert.
  await sql`
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
      details jsonb NOT NULL DEFAULT '{}',
      CONSTRAINT status_history_kind_ck CHECK (entity_kind IN ('deposit', 'cashout', 'refund')),
      CONSTRAINT status_history_source_ck CHECK (source IN ('webhook', 'poll', 'intent', 'backfill', 'operator'))
    );
    CREATE UNIQUE INDEX status_history_event_uq ON status_history (event_id text_pattern_ops);
    CREATE INDEX status_history_entity_ix ON status_history
      (entity_id text_pattern_ops, entity_kind text_pattern_ops, merchant_account text_pattern_ops, observed_at);
    CREATE INDEX status_history_recorded_brin ON status_history USING brin (recorded_at);
    CREATE TRIGGER status_history_immutable_trg BEFORE UPDATE OR DELETE ON status_history
      FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
  `.execute(db);

  // Polling: one row per entity while it is scheduled (none once it is not). Off the mirror row, so that
  // moving the next poll does not touch `mirrors`. The poller's index holds `due_from`, the hour the next
  // poll falls in (never later than `next_poll_at`), not the instant: a reschedule inside the same hour
  // changes no indexed column and is HOT. The poller asks for `due_from <= now AND next_poll_at <= now`
  // in the order `due_from, next_poll_at, entity_id`. The attempts so far are on the mirror
  // (`poll_attempts`, not indexed).
  await sql`
    CREATE TABLE poll_schedule (
      merchant_account text NOT NULL,
      entity_kind text NOT NULL,
      entity_id text NOT NULL,
      next_poll_at timestamptz NOT NULL,
      due_from timestamptz NOT NULL
        GENERATED ALWAYS AS (date_bin('1 hour', next_poll_at, timestamptz '2000-01-01 00:00:00+00')) STORED
    ) WITH (fillfactor = 50);
    CREATE UNIQUE INDEX poll_schedule_pk ON poll_schedule
      (merchant_account text_pattern_ops, entity_kind text_pattern_ops, entity_id text_pattern_ops);
    CREATE INDEX poll_schedule_due_ix ON poll_schedule (due_from);
  `.execute(db);

  // Exceptions and the queue people work them in. One exception per type and entity; `fact` is what it
  // is about (the same fact seen again never reopens a resolved exception, a new one does, keeping what it
  // was in `previous`); `decision` records an operator's choice on an illegal transition. The queue lists
  // and counts the unresolved ones (`exceptions_unresolved_ix`: its predicate is the unresolved states).
  // `exception_events` is the append-only audit trail of every state change, assignment and comment.
  await sql`
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
      details jsonb NOT NULL DEFAULT '{}',
      resolution_note text,
      resolved_by text,
      resolved_at timestamptz,
      updated_at timestamptz NOT NULL DEFAULT now(),
      acknowledged_by text,
      acknowledged_at timestamptz,
      acknowledgement_note text,
      fact text,
      reopened_at timestamptz,
      reopen_reason text,
      previous jsonb,
      decision jsonb,
      assignee text,
      assigned_at timestamptz,
      CONSTRAINT exceptions_pk PRIMARY KEY (id),
      CONSTRAINT exceptions_entity_uq UNIQUE (type, merchant_account, entity_kind, entity_id),
      CONSTRAINT exceptions_state_ck CHECK (state IN ('open', 'in_review', 'acknowledged', 'resolved')),
      CONSTRAINT exceptions_severity_ck CHECK (severity IN ('info', 'low', 'medium', 'high', 'critical')),
      CONSTRAINT exceptions_count_ck CHECK (count >= 1)
    );
    CREATE INDEX exceptions_open_ix ON exceptions (state, type, first_seen_at);
    CREATE INDEX exceptions_unresolved_ix ON exceptions (id) WHERE state IN ('open', 'in_review', 'acknowledged');
    CREATE INDEX exceptions_entity_ix ON exceptions (merchant_account, entity_kind, entity_id);
    CREATE INDEX exceptions_assignee_ix ON exceptions (assignee) WHERE assignee IS NOT NULL;

    CREATE TABLE exception_events (
      id bigserial NOT NULL,
      exception_id bigint NOT NULL,
      at timestamptz NOT NULL DEFAULT now(),
      actor text NOT NULL,
      action text NOT NULL,
      from_state text,
      to_state text,
      from_assignee text,
      to_assignee text,
      note text,
      CONSTRAINT exception_events_pk PRIMARY KEY (id),
      CONSTRAINT exception_events_exception_fk FOREIGN KEY (exception_id) REFERENCES exceptions (id),
      CONSTRAINT exception_events_action_ck CHECK (action IN ('state', 'assign', 'comment'))
    );
    CREATE INDEX exception_events_exception_ix ON exception_events (exception_id, id);
    CREATE TRIGGER exception_events_immutable_trg BEFORE UPDATE OR DELETE ON exception_events
      FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
  `.execute(db);

  // The month close: one row per month, merchant account and currency, with the period's instants (in the
  // report time zone and cut-off) and `canonical`, the signed figures as canonical JSON text whose SHA-256
  // is `sha256`. The database checks that the hash matches the text and that `figures` is that text, so no
  // writer can store figures that do not match their hash. A close is frozen: it cannot be deleted, and
  // the only change allowed is its one approval, by someone other than the preparer.
  await sql`
    CREATE TABLE closes (
      id bigserial NOT NULL,
      merchant_account text NOT NULL,
      currency text NOT NULL,
      period text NOT NULL,
      status text NOT NULL DEFAULT 'prepared',
      prepared_by text NOT NULL,
      prepared_at timestamptz NOT NULL DEFAULT now(),
      approved_by text,
      approved_at timestamptz,
      figures jsonb NOT NULL DEFAULT '{}',
      sha256 text,
      period_start timestamptz,
      period_end timestamptz,
      time_zone text,
      canonical text,
      CONSTRAINT closes_pk PRIMARY KEY (id),
      CONSTRAINT closes_period_uq UNIQUE (merchant_account, currency, period),
      CONSTRAINT closes_period_ck CHECK (period ~ '^[0-9]{4}-(0[1-9]|1[0-2])$'),
      CONSTRAINT closes_status_ck CHECK (status IN ('prepared', 'approved')),
      CONSTRAINT closes_approver_ck CHECK (approved_by IS NULL OR approved_by <> prepared_by),
      CONSTRAINT closes_approved_ck CHECK ((status = 'approved') = (approved_by IS NOT NULL AND approved_at IS NOT NULL)),
      CONSTRAINT closes_signed_ck CHECK (canonical IS NOT NULL AND sha256 IS NOT NULL AND period_start IS NOT NULL
        AND period_end IS NOT NULL AND time_zone IS NOT NULL AND period_start < period_end),
      CONSTRAINT closes_sha256_ck CHECK (
        sha256 = encode(sha256(convert_to(canonical, 'UTF8')), 'hex') AND figures = canonical::jsonb)
    );

    CREATE FUNCTION closes_frozen() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'close % of % % is signed and cannot be deleted', OLD.period, OLD.merchant_account, OLD.currency
          USING ERRCODE = 'check_violation';
      END IF;
      IF OLD.status <> 'prepared' OR NEW.status <> 'approved'
         OR (NEW.merchant_account, NEW.currency, NEW.period, NEW.prepared_by, NEW.prepared_at, NEW.figures, NEW.sha256,
             NEW.canonical, NEW.period_start, NEW.period_end, NEW.time_zone)
           IS DISTINCT FROM
            (OLD.merchant_account, OLD.currency, OLD.period, OLD.prepared_by, OLD.prepared_at, OLD.figures, OLD.sha256,
             OLD.canonical, OLD.period_start, OLD.period_end, OLD.time_zone) THEN
        RAISE EXCEPTION 'close % of % % is frozen: only its approval may be recorded', OLD.period, OLD.merchant_account,
          OLD.currency USING ERRCODE = 'check_violation';
      END IF;
      RETURN NEW;
    END
    $$;
    CREATE TRIGGER closes_frozen_trg BEFORE UPDATE OR DELETE ON closes
      FOR EACH ROW EXECUTE FUNCTION closes_frozen();
  `.execute(db);

  // Alerts leave through the outbox, written in the transaction that raised them and published after;
  // its key is `<kind>:<entity id>`, so the alerts a payment raised are found by it. The dispatcher
  // consumes them at least once, so it records each (alert, sink) delivery and skips the pairs present.
  await sql`
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
    CREATE INDEX outbox_key_ix ON outbox (key);

    CREATE TABLE alert_deliveries (
      alert_id text NOT NULL,
      sink text NOT NULL,
      delivered_at timestamptz NOT NULL DEFAULT now(),
      digest boolean NOT NULL DEFAULT false,
      CONSTRAINT alert_deliveries_pk PRIMARY KEY (alert_id, sink)
    );
  `.execute(db);

  // Scheduled jobs claim each period's run by its key (the insert that wins runs it), and report runs record what each
  // workbook run was asked, what it produced (files, row counts per sheet, the workbook's SHA-256) and
  // how far it got.
  await sql`
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
      parameters jsonb NOT NULL DEFAULT '{}',
      row_counts jsonb NOT NULL DEFAULT '{}',
      sha256 text,
      files jsonb NOT NULL DEFAULT '[]',
      requested_by text,
      trigger text NOT NULL DEFAULT 'demand',
      progress_done bigint NOT NULL DEFAULT 0,
      progress_total bigint NOT NULL DEFAULT 0,
      deleted_at timestamptz,
      CONSTRAINT report_runs_pk PRIMARY KEY (id),
      CONSTRAINT report_runs_key_uq UNIQUE (run_key),
      CONSTRAINT report_runs_status_ck CHECK (status IN ('running', 'succeeded', 'failed'))
    );
    CREATE INDEX report_runs_created_ix ON report_runs (created_at DESC);
  `.execute(db);
}

/** Drops the whole schema: the database as it was before any migration. */
export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TABLE report_runs, job_runs;
    DROP TABLE alert_deliveries, outbox;
    DROP TABLE closes;
    DROP FUNCTION closes_frozen();
    DROP TABLE exception_events, exceptions;
    DROP TABLE poll_schedule;
    DROP TABLE status_history;
    DROP TABLE mirror_watches, mirrors;
    DROP FUNCTION mirror_watch(text, text);
    DROP TABLE intents;
    DROP TABLE ledger_balance_snapshots, ledger_movements, ledger_balances;
    DROP TABLE postings, journal_entries;
    DROP FUNCTION postings_running_balances(), postings_check_balanced();
    DROP TABLE ledger_accounts, merchant_accounts;
    DROP FUNCTION ledger_refuse_change();
  `.execute(db);
}
