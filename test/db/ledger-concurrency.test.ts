/**
 * Two connections apply the same batches at the same time (in opposite orders): row locks, unique keys
 * and retries leave exactly one posting set per effect.
 */
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb } from '../../src/db/connection.ts';
import { applyObservations, recordIntents } from '../../src/db/ledger/service.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { balances } from '../../src/db/read-models/balances.ts';
import type { Database } from '../../src/db/schema.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import type { Observation } from '../../src/domain/observation.ts';
import { intent, obs } from './fixtures.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

let t: TestDatabase;
let other: Kysely<Database>;
beforeAll(async () => {
  t = await createTestDatabase();
  other = createDb(t.url, 4);
});
afterAll(async () => {
  await other?.destroy();
  await t?.drop();
});

describe('concurrent batches', () => {
  it('never double-posts when two connections apply the same observations at once', async () => {
    const batches: Observation[][] = [];
    for (let b = 0; b < 6; b++) {
      const batch: Observation[] = [];
      for (let e = 0; e < 40; e++) {
        const id = `${e}`;
        batch.push(
          obs('deposit', `d${id}`, b % 2 === 0 ? 'PENDING' : 'COMPLETED', b + 1, {
            eventId: `d${id}-${b}`,
            feeAmount: 10n,
            feeCurrency: 'BRL',
          }),
        );
        batch.push(
          obs('cashout', `c${id}`, b < 3 ? 'PENDING' : 'DELIVERED', b + 1, { eventId: `c${id}-${b}` }),
        );
      }
      batches.push(batch);
    }
    const intents = Array.from({ length: 40 }, (_, e) => intent('cashout', `c${e}`, 1_000n));
    const run = async (db: Kysely<Database>, order: Observation[][]) => {
      let booked = 0;
      for (const batch of order) {
        const r = await withLedgerTransaction(db, (trx) => applyObservations(trx, batch));
        booked += r.entriesBooked;
      }
      await withLedgerTransaction(db, (trx) => recordIntents(trx, intents));
      return booked;
    };
    const [a, b] = await Promise.all([run(t.db, batches), run(other, [...batches].reverse())]);
    const entries = await t.db
      .selectFrom('journal_entries')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirstOrThrow();
    // 40 deposits completed (credit + fee) and 40 cashouts reserved.
    expect(Number(entries.n)).toBe(40 * 3);
    expect(a + b).toBeLessThanOrEqual(40 * 3);
    const rows = await balances(t.db, { merchantAccount: 'acme' });
    const bal = Object.fromEntries(rows.map((r) => [r.account, r.balance]));
    expect(bal).toMatchObject({
      deposits: -40n * 10_000n,
      fees: 40n * 10n,
      reserved: 40n * 1_000n,
      available: 40n * (10_000n - 10n) - 40n * 1_000n,
    });
    const history = await t.db
      .selectFrom('status_history')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirstOrThrow();
    expect(Number(history.n)).toBe(6 * 80);
    expect((await verifyLedger(t.db)).failures).toEqual([]);
  });
});
