/**
 * A job's alert (a failed ledger verification) goes out like every other alert: through the outbox, so
 * it is published once even when the process stops right after.
 */
import { enqueueAlerts } from '../db/runs/outbox.ts';
import type { Db } from '../db/schema.ts';
import type { JobAlert } from './catalog.ts';

/** One alert per type and hour: a job failing every run does not page every run. */
export function jobAlerts(db: Db): (alert: JobAlert) => Promise<void> {
  return async (alert) => {
    const raisedAt = new Date().toISOString();
    const id = `${alert.type}:${raisedAt.slice(0, 13)}`;
    await enqueueAlerts(db, [
      {
        key: `alert:${id}`,
        payload: {
          alertId: id,
          type: alert.type,
          severity: alert.severity === 'warning' ? 'medium' : alert.severity,
          account: '*',
          raisedAt,
          details: { message: alert.message, ...(alert.details ?? {}) },
        },
      },
    ]);
  };
}
