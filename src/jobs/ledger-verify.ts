/**
 * `ledger-verify`: the daily balance snapshots, then the incremental verification of the last day (the
 * full one is `payrecon db verify`); its outcome goes to the metrics.
 */
import { takeBalanceSnapshots } from '../db/ledger/balance-snapshots.ts';
import { verifyLedger } from '../db/ledger/verify.ts';
import type { Db } from '../db/schema.ts';
import type { Metrics } from '../metrics.ts';
import type { LedgerVerification } from './catalog.ts';

/** What is verified each run: the last day, with an hour's overlap so no hourly run leaves a gap. */
const WINDOW_MS = 25 * 3_600_000;

export function ledgerVerification(
  db: Db,
  metrics: Pick<Metrics, 'verified'>,
): () => Promise<LedgerVerification> {
  return async () => {
    // The snapshots first: a no-op until a new midnight is old enough.
    await takeBalanceSnapshots(db);
    const result = await verifyLedger(db, { since: new Date(Date.now() - WINDOW_MS) });
    metrics.verified(result.failures.length === 0);
    return { failures: result.failures };
  };
}
