/**
 * Ledger traffic for the report, page and job tests, fed through the ledger's own
 * `recordIntents`/`applyObservations` (no rows written by hand). `seedBefore` books what should land
 * in the opening balances, `seedPeriod` the period's traffic: live deposits (with fees, one released
 * early then cancelled, one fee on payer), a second currency, a test deposit, a crypto deposit,
 * cashouts (settled, cancelled, rejected after completion), refunds.
 */
import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import { applyObservations, recordIntents } from '../../src/db/ledger/service.ts';
import type { Database } from '../../src/db/schema.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import type { Minor } from '../../src/domain/money.ts';
import { type Intent, NO_FACTS, type Observation } from '../../src/domain/observation.ts';
import type { EntityKind } from '../../src/domain/statuses.ts';

export const ACCOUNT = 'acme';

let seq = 0;

function ob(
  kind: EntityKind,
  entityId: string,
  status: string,
  extra: Partial<Observation> = {},
): Observation {
  seq += 1;
  return {
    eventId: randomUUID(),
    kind,
    account: ACCOUNT,
    entityId,
    externalRef: kind === 'refund' ? null : `ref-${entityId}`,
    status,
    // Observations a few minutes ago, in order of creation.
    observedAt: new Date(Date.now() - 600_000 + seq * 1000),
    source: 'webhook',
    currency: kind === 'cashout' ? null : 'BRL',
    amount: null,
    ...NO_FACTS,
    feeOnPayer: false,
    details: {},
    ...extra,
  };
}

function intentOf(kind: EntityKind, entityId: string, amount: Minor, extra: Partial<Intent> = {}): Intent {
  return {
    intentId: randomUUID(),
    operation: kind,
    account: ACCOUNT,
    externalRef: kind === 'refund' ? `refund-${entityId}` : `ref-${entityId}`,
    entityId,
    currency: 'BRL',
    amount,
    expectedFee: null,
    test: false,
    crypto: false,
    feeOnPayer: false,
    parentDepositId: null,
    outcome: 'created',
    createdAt: new Date(Date.now() - 900_000),
    request: {},
    response: null,
    ...extra,
  };
}

const dep = (
  id: string,
  status: string,
  amount: Minor,
  fee: Minor | null,
  extra: Partial<Observation> = {},
) =>
  ob('deposit', id, status, { amount, feeAmount: fee, feeCurrency: fee === null ? null : 'BRL', ...extra });

async function feed(db: Kysely<Database>, intents: Intent[], batches: Observation[][]): Promise<void> {
  if (intents.length) await withLedgerTransaction(db, (trx) => recordIntents(trx, intents));
  for (const batch of batches) await withLedgerTransaction(db, (trx) => applyObservations(trx, batch));
}

/** Opening traffic: a completed deposit and a pending cashout (reserved). */
export async function seedBefore(db: Kysely<Database>): Promise<void> {
  await feed(
    db,
    [intentOf('deposit', '1001', 100_000n), intentOf('cashout', '2001', 30_000n)],
    [[dep('1001', 'COMPLETED', 100_000n, 2_500n), ob('cashout', '2001', 'PENDING')]],
  );
}

/** The period's traffic. */
export async function seedPeriod(db: Kysely<Database>): Promise<void> {
  await feed(
    db,
    [
      intentOf('deposit', '1002', 50_050n),
      intentOf('deposit', '1003', 20_000n),
      intentOf('deposit', '1004', 12_000n),
      intentOf('deposit', '1005', 9_900n),
      intentOf('deposit', '1101', 4_200n, { currency: 'USD' }),
      intentOf('deposit', '1201', 77_777n, { test: true }),
      intentOf('deposit', '1301', 33_333n, { crypto: true }),
      intentOf('cashout', '2002', 15_000n),
      intentOf('cashout', '2003', 8_000n),
      intentOf('refund', '3001', 10_000n, { parentDepositId: '1001' }),
      intentOf('refund', '3002', 5_000n, { parentDepositId: '1001' }),
    ],
    [
      [
        dep('1002', 'COMPLETED', 50_050n, 1_010n),
        dep('1003', 'EARLY_RELEASED', 20_000n, 500n),
        dep('1004', 'EARLY_RELEASED', 12_000n, 300n),
        dep('1005', 'COMPLETED', 9_900n, 99n, { feeOnPayer: true }),
        dep('1101', 'COMPLETED', 4_200n, 100n, { currency: 'USD', feeCurrency: 'USD' }),
        dep('1201', 'COMPLETED', 77_777n, 777n, { test: true }),
        dep('1301', 'APPROVED', 33_333n, null, { crypto: true }),
        // The bank's end-to-end id, as the provider gives it once the cashout is delivered.
        ob('cashout', '2001', 'COMPLETED', { bankReference: 'E12345678202611250001' }),
        ob('cashout', '2002', 'PENDING'),
        ob('cashout', '2003', 'PENDING'),
        ob('refund', '3001', 'PENDING', { amount: 10_000n, parentDepositId: '1001' }),
        ob('refund', '3002', 'PENDING', { amount: 5_000n, parentDepositId: '1001' }),
      ],
      [
        dep('1003', 'CANCELLED', 20_000n, 500n),
        dep('1301', 'COMPLETED', 33_333n, null, { crypto: true }),
        ob('cashout', '2002', 'CANCELLED'),
        ob('cashout', '2003', 'COMPLETED'),
        ob('refund', '3002', 'COMPLETED', { amount: 5_000n, parentDepositId: '1001' }),
      ],
      [ob('cashout', '2003', 'REJECTED', { rejectionCode: 'R03', rejectionReason: 'account closed' })],
    ],
  );
}

/**
 * A busier period in several currencies, for the print tests: per currency `deposits` deposits (most
 * completed with a fee, some pending, cancelled or released early then completed), `cashouts` cashouts
 * (settled with the bank's reference, cancelled, pending, one rejected after completion) and refunds of
 * the first deposits. Amounts vary deterministically; ids do not clash with `seedBefore`/`seedPeriod`.
 */
export async function seedCurrencies(
  db: Kysely<Database>,
  currencies: readonly string[],
  deposits: number,
  cashouts: number,
): Promise<void> {
  const intents: Intent[] = [];
  const first: Observation[] = [];
  const second: Observation[] = [];
  const third: Observation[] = [];
  currencies.forEach((currency, ci) => {
    const base = 5_000_000 + ci * 10_000;
    for (let i = 0; i < deposits; i++) {
      const id = String(base + i);
      const amount = BigInt(1_000 + ((i * 7_919 + ci * 104_729) % 2_500_000));
      const fee = (amount * 2n) / 100n;
      intents.push(intentOf('deposit', id, amount, { currency }));
      const d = (status: string) => dep(id, status, amount, fee, { currency, feeCurrency: currency });
      if (i % 10 === 7) first.push(d('PENDING'));
      else if (i % 10 === 8) {
        first.push(d('PENDING'));
        second.push(d('CANCELLED'));
      } else if (i % 10 === 9) {
        first.push(d('EARLY_RELEASED'));
        second.push(d('COMPLETED'));
      } else first.push(d('COMPLETED'));
    }
    for (let i = 0; i < cashouts; i++) {
      const id = String(base + 5_000 + i);
      intents.push(intentOf('cashout', id, BigInt(500 + ((i * 3_571) % 400_000)), { currency }));
      const bankReference = `E${String(base + i).padStart(8, '0')}${currency}${i}`;
      first.push(ob('cashout', id, 'PENDING'));
      if (i % 5 === 1) second.push(ob('cashout', id, 'CANCELLED'));
      else if (i % 5 !== 2) second.push(ob('cashout', id, 'COMPLETED', { bankReference }));
      if (i === 3) {
        third.push(
          ob('cashout', id, 'REJECTED', { rejectionCode: 'R01', rejectionReason: 'insufficient funds' }),
        );
      }
    }
    for (let i = 0; i < Math.min(3, deposits); i++) {
      const id = String(base + 8_000 + i);
      const amount = 500n + BigInt(i) * 100n;
      const parentDepositId = String(base + i);
      intents.push(intentOf('refund', id, amount, { currency, parentDepositId }));
      first.push(ob('refund', id, 'PENDING', { amount, currency, parentDepositId }));
      if (i !== 2) second.push(ob('refund', id, 'COMPLETED', { amount, currency, parentDepositId }));
    }
  });
  await feed(db, intents, [first, second, third]);
}
