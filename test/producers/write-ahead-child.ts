/**
 * Child process of `intent-write-ahead.test.ts`: creates deposits, cashouts and refunds at the sandbox
 * through `recordingClient`, each intent recorded in PostgreSQL as the reconciler records it
 * (`recordIntents`). When the provider has answered the creation whose merchant reference is `hangOn` (a
 * refund's: `refundWriteAheadRef` of its deposit and amount), it prints
 * `ANSWERED <provider id>` and stops before recording that completed intent: the test kills it there
 * with SIGKILL. Otherwise it prints `DONE` and exits.
 */
import { createDb } from '../../src/db/connection.ts';
import { recordIntents } from '../../src/db/ledger/service.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import { refundWriteAheadRef } from '../../src/domain/intent.ts';
import { createLogger } from '../../src/logger.ts';
import { recordingClient } from '../../src/producers/intent/recording-client.ts';
import { createProviderClient } from '../../src/provider/client.ts';
import { DEFAULT_ACCOUNT } from '../../src/sandbox/accounts.ts';
import { providerAccountFor } from '../../src/sandbox/traffic-client.ts';

const args = JSON.parse(process.argv[2] ?? '{}') as {
  databaseUrl: string;
  url: string;
  ccUrl: string;
  deposits: string[];
  cashouts: string[];
  /** Refunds: the deposit id and the amount in minor units (text). */
  refunds?: { depositId: number; amount: string }[];
  hangOn: string | null;
};
const db = createDb(args.databaseUrl, 2);
const account = providerAccountFor(DEFAULT_ACCOUNT, { url: args.url, ccUrl: args.ccUrl });
const logger = createLogger({ level: 'silent' });
// The account the test reads the entities under ('main').
const client = recordingClient(
  createProviderClient(account, { retries: 0, logger }),
  async (intent) => {
    const ref =
      intent.operation === 'refund' && intent.parentDepositId !== null
        ? refundWriteAheadRef(intent.parentDepositId, intent.amount)
        : intent.externalRef;
    if (ref === args.hangOn && intent.entityId !== null) {
      process.stdout.write(`ANSWERED ${intent.entityId}\n`);
      // The provider answered; the completed intent is never recorded: the test kills this process now.
      setInterval(() => undefined, 60_000);
      await new Promise(() => undefined);
    }
    await withLedgerTransaction(db, (trx) => recordIntents(trx, [intent]));
  },
  { account: 'main' },
);
for (const invoice of args.deposits) {
  await client.createDeposit({
    invoice_id: invoice,
    country: 'BR',
    currency: 'BRL',
    amount: 250_00n,
    payment_method: 'IX',
    payer: { email: 'ana@example.com', document: '12345678909', first_name: 'Ana', last_name: 'Silva' },
  });
}
for (const externalId of args.cashouts) {
  await client.createCashout({
    external_id: externalId,
    country: 'BR',
    currency: 'BRL',
    amount: 40_00n,
    document_id: '12345678909',
    beneficiary_name: 'Ana',
    bank_code: '001',
    bank_account: '123456-7',
    bank_branch: '0001',
    account_type: 'C',
    notification_url: 'https://merchant.example/webhooks/main/cashouts',
  });
}
for (const r of args.refunds ?? []) {
  await client.createRefund({
    deposit_id: r.depositId,
    amount: BigInt(r.amount),
    bank_account: {
      beneficiary: 'Ana Silva',
      bank_code: '341',
      branch: '0001',
      account_number: '123456-7',
      account_type: 'C',
    },
  });
}
await db.destroy();
process.stdout.write('DONE\n');
