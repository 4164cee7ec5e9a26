/** Repository of `alert_deliveries`: which alert already reached which sink. */
import { sql } from 'kysely';
import type { Db } from '../schema.ts';

/** The subset of `alertIds` already delivered to `sink`. */
export async function deliveredAlertIds(
  db: Db,
  sink: string,
  alertIds: readonly string[],
): Promise<Set<string>> {
  if (alertIds.length === 0) return new Set();
  const rows = await db
    .selectFrom('alert_deliveries')
    .select('alert_id')
    .where('sink', '=', sink)
    .where('alert_id', 'in', [...alertIds])
    .execute();
  return new Set(rows.map((r) => r.alert_id));
}

/** Records deliveries; a pair already present stays as it was. */
export async function recordAlertDeliveries(
  db: Db,
  sink: string,
  alertIds: readonly string[],
  digest: boolean,
): Promise<void> {
  if (alertIds.length === 0) return;
  await db
    .insertInto('alert_deliveries')
    .values(alertIds.map((alert_id) => ({ alert_id, sink, digest, delivered_at: sql<Date>`now()` })))
    .onConflict((oc) => oc.columns(['alert_id', 'sink']).doNothing())
    .execute();
}
