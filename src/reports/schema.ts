/**
 * Makes sure the report-run and acknowledgement columns the reports read exist: they are part of the
 * ledger's schema, so this is the ledger's migration to the latest (a no-op on a migrated database).
 */
import { migrateToLatest } from '../db/connection.ts';
import type { Db } from '../db/schema.ts';

export async function ensureReportSchema(db: Db): Promise<void> {
  await migrateToLatest(db);
}
