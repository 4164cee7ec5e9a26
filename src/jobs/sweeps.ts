/**
 * The sweeps of the job catalog: stuck entities raised as exceptions, and completed payouts and refunds
 * (cancelled deposits) made due for the late-move check of the poller.
 */
import { sweepExceptions } from '../db/exceptions/sweep.ts';
import { scheduleLateRejectionChecks } from '../db/polling/schedule.ts';
import { lastSucceededStart } from '../db/runs/job-runs.ts';
import type { Db } from '../db/schema.ts';
import { withLedgerTransaction } from '../db/transaction.ts';
import type { ExceptionRules } from '../domain/exception-rules.ts';
import type { Logger } from '../logger.ts';

/** `stuck-sweep`: what has stayed too long in a state since the last successful sweep. */
export function stuckSweep(db: Db, rules: ExceptionRules): (now: Date) => Promise<void> {
  return async (now) => {
    const lastSweepAt = await lastSucceededStart(db, 'stuck-sweep');
    await withLedgerTransaction(db, (trx) => sweepExceptions(trx, now, rules, { lastSweepAt }));
  };
}

/**
 * `late-rejection-sweep`: makes the watched entities due, then polls them at once when this process
 * polls on its own (under `payrecon up` the looping poller picks them up).
 */
export function lateRejectionSweep(
  db: Db,
  rules: ExceptionRules,
  logger: Logger,
  poll?: () => Promise<unknown>,
): (now: Date) => Promise<void> {
  return async (now) => {
    const due = await scheduleLateRejectionChecks(db, now, rules.polling);
    if (due > 0) {
      logger.info(
        { due },
        'completed payouts and refunds, cancelled deposits made due for a late-move check',
      );
    }
    if (poll) await poll();
  };
}
