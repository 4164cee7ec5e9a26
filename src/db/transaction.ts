/**
 * The ledger's transactions: `withLedgerTransaction` runs a function in a transaction and runs it again
 * after a conflict with a concurrent one (a serialization failure, among them a ledger batch's missed
 * claim; a deadlock; a unique key a concurrent batch took first). A leaf: it imports no other module of
 * src/db but the schema's types.
 */
import type { Transaction } from 'kysely';
import { AppError } from '../domain/errors.ts';
import type { Logger } from '../logger.ts';
import type { Database, Db } from './schema.ts';

const RETRYABLE_PG_CODES = new Set(['40001', '40P01']);

/**
 * The unique keys a batch's write can find taken by a concurrent batch still in progress: a new entity's
 * mirror row (the ledger's write inserts it; run again, the batch reads and claims it), and an event id or entry key that
 * batch is inserting too (the write skips the keys committed before its statement; run again, the batch
 * sees the other's rows and skips them).
 */
const RETRYABLE_UNIQUE_KEYS = new Set([
  'mirrors_pk',
  'status_history_event_uq',
  'journal_entries_idempotency_key_uq',
]);

/** Serialization failures and deadlocks, and a unique key taken by a concurrent batch (above). */
function isTransactionConflict(err: unknown): boolean {
  const { code, constraint } = err as { code?: unknown; constraint?: unknown };
  return (
    typeof code === 'string' &&
    (RETRYABLE_PG_CODES.has(code) ||
      (code === '23505' && typeof constraint === 'string' && RETRYABLE_UNIQUE_KEYS.has(constraint)))
  );
}

export interface RetryOptions {
  maxAttempts?: number;
  isolation?: 'read committed' | 'repeatable read' | 'serializable';
  /**
   * Where conflicts are logged: each retry at debug (concurrent batches conflict in normal running and
   * the retry succeeds), retries exhausted as a warning; none: not logged.
   */
  logger?: Pick<Logger, 'warn' | 'debug'>;
}

/**
 * Runs `fn` in a transaction, retrying on serialization failures and deadlocks (40001, 40P01) and on a
 * unique key taken by a concurrent batch (23505 on `RETRYABLE_UNIQUE_KEYS`) with a short jittered back-off.
 * Anything else propagates.
 */
export async function withLedgerTransaction<T>(
  db: Db,
  fn: (trx: Transaction<Database>) => Promise<T>,
  options: RetryOptions = {},
): Promise<T> {
  const max = options.maxAttempts ?? 8;
  for (let attempt = 1; ; attempt++) {
    try {
      let builder = db.transaction();
      if (options.isolation) builder = builder.setIsolationLevel(options.isolation);
      return await builder.execute(fn);
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (isTransactionConflict(err) && attempt < max) {
        options.logger?.debug({ module: 'ledger', code, attempt }, 'ledger transaction conflict, retrying');
        await new Promise((r) => setTimeout(r, 5 * attempt + Math.floor(Math.random() * 20)));
        continue;
      }
      if (isTransactionConflict(err)) {
        options.logger?.warn(
          { module: 'ledger', code, attempts: attempt },
          'ledger transaction conflict, retries exhausted',
        );
        throw new AppError('SERIALIZATION_CONFLICT', `ledger transaction failed after ${attempt} attempts`, {
          cause: err,
        });
      }
      throw err;
    }
  }
}

/**
 * Runs `fn` in the caller's transaction when `db` is one (the caller's retry covers it), else in its own
 * ledger transaction (`withLedgerTransaction`): a service that joins a larger unit of work when given one.
 */
export function inLedgerTransaction<T>(db: Db, fn: (trx: Db) => Promise<T>): Promise<T> {
  return db.isTransaction ? fn(db) : withLedgerTransaction(db, fn);
}
