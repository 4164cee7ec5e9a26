/**
 * A status change inside the set a mirror is looked up in updates it HOT (issue 21 point 4). Five partial
 * indexes of `mirrors` named `status` in their predicates (the stuck sweep's unfinished mirrors, the
 * in-flight cashouts and refunds, the completed ones and the cancelled deposits of the late-move watch, the
 * mirrors with no intent), two of them keyed by `status_since` and `completed_at`, which change with the
 * status: PostgreSQL updates a row HOT only when no column any index reads (key, expression or predicate)
 * changes, so every status change wrote a new entry into every index of `mirrors` (six to eight).
 *
 * Two stored generated columns say which of those sets a mirror is in, and since when, and the indexes read
 * them instead: `watch` is 'open' (not final, or holding money in reserved: the stuck sweep, the in-flight
 * figures, verification, the month close), 'completed' (a completed cashout or refund) or 'cancelled' (a
 * cancelled deposit: the late-move watch), else NULL; `watch_at` is the instant the late-move watch ranges
 * over (`completed_at`, `status_since`), NULL while open. A reading that moves a mirror inside its set
 * (PENDING to DELIVERED, or the same status read again) changes neither, so it is HOT unless it changes
 * another indexed column; only a reading that changes the set (PENDING to COMPLETED) maintains the indexes.
 * Readers keep their status conditions and add the set's (`watch = 'open'` ...), which the partial indexes'
 * predicates are, word for word. Being generated (by `mirror_watch`, the one definition of the sets), the
 * columns cannot disagree with the status (nothing to verify, nothing for a writer to forget).
 *
 * `mirrors_no_intent_ix` is rebuilt for the mirrors with no intent that were seen (`first_seen_at IS NOT
 * NULL`, implied by its reader's range on `first_seen_at`) instead of `status IS NOT NULL`. The table is
 * rewritten once (the generated columns are computed for every row). Imports nothing of the app.
 */
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    -- The sets, in one place: the generated columns and the readers that narrow a status filter to its set
    -- (listPayments) call it; a call with constant arguments is folded by the planner, so a reader's
    -- "watch = mirror_watch('cashout', 'PENDING')" matches the partial index of 'open'.
    CREATE FUNCTION mirror_watch(kind text, status text) RETURNS text
      LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
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
    $fn$;
    ALTER TABLE mirrors
      ADD COLUMN watch text GENERATED ALWAYS AS (mirror_watch(entity_kind, status)) STORED,
      ADD COLUMN watch_at timestamptz GENERATED ALWAYS AS (CASE mirror_watch(entity_kind, status)
        WHEN 'completed' THEN completed_at WHEN 'cancelled' THEN status_since END) STORED;

    DROP INDEX mirrors_unfinished_ix;
    DROP INDEX mirrors_in_flight_ix;
    DROP INDEX mirrors_completed_payouts_ix;
    DROP INDEX mirrors_cancelled_deposits_ix;
    DROP INDEX mirrors_no_intent_ix;
    CREATE INDEX mirrors_open_ix ON mirrors (merchant_account, entity_kind) WHERE watch = 'open';
    CREATE INDEX mirrors_completed_payouts_ix ON mirrors (watch_at) WHERE watch = 'completed';
    CREATE INDEX mirrors_cancelled_deposits_ix ON mirrors (watch_at) WHERE watch = 'cancelled';
    CREATE INDEX mirrors_no_intent_ix ON mirrors (first_seen_at) WHERE intent_id IS NULL AND first_seen_at IS NOT NULL;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX mirrors_no_intent_ix;
    DROP INDEX mirrors_cancelled_deposits_ix;
    DROP INDEX mirrors_completed_payouts_ix;
    DROP INDEX mirrors_open_ix;
    ALTER TABLE mirrors DROP COLUMN watch_at, DROP COLUMN watch;
    DROP FUNCTION mirror_watch(text, text);
    CREATE INDEX mirrors_no_intent_ix ON mirrors (first_seen_at) WHERE intent_id IS NULL AND status IS NOT NULL;
    CREATE INDEX mirrors_cancelled_deposits_ix ON mirrors (status_since)
      WHERE entity_kind = 'deposit' AND status = 'CANCELLED';
    CREATE INDEX mirrors_completed_payouts_ix ON mirrors (completed_at)
      WHERE entity_kind IN ('cashout', 'refund') AND status = 'COMPLETED';
    CREATE INDEX mirrors_in_flight_ix ON mirrors (merchant_account, currency, test, entity_kind)
      WHERE entity_kind IN ('cashout', 'refund') AND status IN ('PENDING', 'ON_HOLD', 'DELIVERED', 'INCORRECT_DETAILS');
    CREATE INDEX mirrors_unfinished_ix ON mirrors (entity_kind, status)
      WHERE (entity_kind = 'deposit' AND status IN ('CREATED', 'PENDING', 'PENDING_AUTHENTICATION', 'FOR_REVIEW',
          'APPROVED', 'EARLY_RELEASED'))
        OR (entity_kind = 'cashout' AND status IN ('PENDING', 'ON_HOLD', 'DELIVERED'))
        OR (entity_kind = 'refund' AND status IN ('PENDING', 'INCORRECT_DETAILS', 'DELIVERED'));
  `.execute(db);
}
