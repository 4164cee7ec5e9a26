/**
 * Two checks of the provider's balance kept as a matching run keeps them (src/db/matching/balance-drift.ts),
 * for the readers' tests: BRL agreeing at 1,234.56, MXN differing by 0.01 at 17 integer digits since an
 * hour before `checkedAt`. Returns a function that removes them.
 */
import type { Db } from '../../src/db/schema.ts';

export async function keepTwoBalanceChecks(
  db: Db,
  o: { account: string; settlementId: string; cutoff: Date; checkedAt: Date },
): Promise<() => Promise<void>> {
  const base = {
    merchant_account: o.account,
    settlement_id: o.settlementId,
    cutoff: o.cutoff,
    checked_at: o.checkedAt,
  };
  await db
    .insertInto('provider_balance_checks')
    .values([
      { ...base, currency: 'BRL', provider: '1234.56', ledger: '1234.56', differs_since: null },
      {
        ...base,
        currency: 'MXN',
        provider: '99999999999999999.99',
        ledger: '99999999999999999.98',
        differs_since: new Date(o.checkedAt.getTime() - 3600_000),
      },
    ])
    .execute();
  return async () => {
    await db.deleteFrom('provider_balance_checks').where('merchant_account', '=', o.account).execute();
  };
}
