/**
 * Makes sure the report-run and acknowledgement columns of
 * `src/db/migrations/20261121T1200_report_runs_detail.ts` exist. That migration is idempotent, so
 * running it here is harmless once the ledger's migration list includes it as well.
 */
import type { Kysely } from 'kysely';
import { up } from '../db/migrations/20261121T1200_report_runs_detail.ts';
import type { Db } from '../db/schema.ts';

export async function ensureReportSchema(db: Db): Promise<void> {
  await up(db as unknown as Kysely<unknown>);
}
