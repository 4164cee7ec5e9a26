import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { applyObservations } from '../../src/db/ledger/service.ts';
import { type Intent, NO_FACTS, type Observation } from '../../src/domain/observation.ts';
import { writeEndpoints } from '../../src/endpoints.ts';
import { connectPublisher } from '../../src/infrastructure.ts';
import {
  backfillPoll,
  csvIssueText,
  parseIntentsCsv,
  parseRangeDate,
  runBackfillIntentsCli,
  runBackfillPollCli,
} from '../../src/producers/backfill.ts';
import type { ConnectPublisher } from '../../src/producers/connect.ts';
import { createProviderClient } from '../../src/provider/client.ts';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/main.ts';
import { runningSandboxAccounts } from '../../src/sandbox/traffic-client.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import {
  type Collector,
  collect,
  type Infra,
  PAYER,
  quiet,
  sandboxAccount,
  startInfra,
  uniqueRef,
} from './helpers.ts';

/** What the CLI gives the commands: a connection from the configuration of the moment. */
const connect: ConnectPublisher = (clientId) => connectPublisher(loadConfig(), clientId);

let infra: Infra;
let intents: Collector<Intent>;
let observed: Collector<Observation>;
let dir: string;

beforeAll(async () => {
  infra = await startInfra();
  intents = await collect(infra, 'merchant.intent.recorded.v1');
  observed = await collect(infra, 'provider.status.observed.v1');
  dir = mkdtempSync(join(tmpdir(), 'payrecon-backfill-'));
}, 60_000);

afterAll(async () => {
  await intents?.stop();
  await observed?.stop();
  await infra?.close();
  rmSync(dir, { recursive: true, force: true });
});

const GOOD_CSV = [
  'operation,account,external_ref,entity_id,currency,amount,parent_deposit_id,created_at,test',
  'deposit,main,INV-1,3000000001,BRL,100.50,,2026-11-01T10:00:00Z,false',
  'cashout,main,"ext,with,commas",8405147,BRL,123456789012345678.99,,2026-11-01T11:00:00Z,',
  'refund,main,R-1,168284,BRL,10,3000000001,,1',
].join('\n');

/** Runs a CLI action with the infra's addresses in the environment; answers the exit code. */
async function runCli(action: () => Promise<void>): Promise<number> {
  const saved = { ...process.env };
  process.env.KAFKA_BROKERS = `127.0.0.1:${infra.broker.port}`;
  process.env.SCHEMA_REGISTRY_URL = infra.registry.url;
  delete process.env.PAYRECON_ACCOUNTS;
  delete process.env.PAYRECON_ACCOUNTS_FILE;
  process.exitCode = 0;
  try {
    await action();
    return Number(process.exitCode ?? 0);
  } finally {
    process.exitCode = 0;
    for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
    Object.assign(process.env, saved);
  }
}

describe('backfill intents from CSV', () => {
  it('parses a valid file into intents with exact amounts and derived ids', () => {
    const parsed = parseIntentsCsv(GOOD_CSV, ['main']);
    if (!parsed.ok) throw new Error(parsed.issues.map(csvIssueText).join('\n'));
    expect(parsed.intents).toHaveLength(3);
    const [d, c, r] = parsed.intents as [Intent, Intent, Intent];
    expect(d).toMatchObject({
      intentId: 'main:deposit:INV-1',
      amount: 100_50n,
      entityId: '3000000001',
      test: false,
    });
    expect(d.createdAt.toISOString()).toBe('2026-11-01T10:00:00.000Z');
    expect(c).toMatchObject({ externalRef: 'ext,with,commas', amount: 123456789012345678_99n });
    expect(r).toMatchObject({
      operation: 'refund',
      parentDepositId: '3000000001',
      amount: 10_00n,
      test: true,
    });
  });

  it('names the line, column and rule of every problem', () => {
    const bad = [
      'operation,account,external_ref,entity_id,currency,amount,parent_deposit_id',
      'deposit,main,INV-1,3000000001,BRL,100.50,',
      'deposit,main,INV-2,3000000002,BRL,1.234,',
      'refund,main,R-1,168284,brl,10,',
      'payout,main,P-1,1,BRL,5,',
      'deposit,main,INV-1,3000000003,BRL,1,',
    ].join('\n');
    const parsed = parseIntentsCsv(bad, ['main']);
    expect(parsed.ok).toBe(false);
    if (parsed.ok) return;
    const lines = parsed.issues.map(csvIssueText);
    expect(lines).toContain('line 3, column amount: at most 2 decimals allowed');
    expect(lines).toContain('line 4, column currency: must be an ISO 4217 code such as BRL');
    expect(lines).toContain('line 4, column parent_deposit_id: is required for a refund');
    expect(lines).toContain(
      'line 5, column operation: must be one of deposit, card_deposit, cashout, refund',
    );
    expect(lines).toContain('line 6, column intent_id: must be unique in the file (line 2 has the same)');

    const header = parseIntentsCsv('operation,account,amount,colour\ndeposit,main,1,red', ['main']);
    expect(header.ok).toBe(false);
    if (!header.ok) {
      const text = header.issues.map(csvIssueText);
      expect(text.some((t) => t.startsWith('line 1, column colour: is not a known column'))).toBe(true);
      expect(text).toContain('line 1, column external_ref: is a required column');
    }
  });

  it('the CLI publishes a valid file, and nothing at all from a file with one bad row', async () => {
    const good = join(dir, 'good.csv');
    writeFileSync(good, GOOD_CSV);
    const before = intents.values.length;
    expect(await runCli(() => runBackfillIntentsCli({ csv: good }, connect))).toBe(0);
    const values = (await intents.waitFor(before + 3)).slice(before);
    expect(values.map((v) => v.intentId).sort()).toEqual([
      'main:cashout:ext,with,commas',
      'main:deposit:INV-1',
      'main:refund:R-1',
    ]);

    const bad = join(dir, 'bad.csv');
    writeFileSync(bad, `${GOOD_CSV.replace('INV-1', 'INV-9')}\ndeposit,main,INV-10,1,BRL,-5,,,`);
    const after = intents.values.length;
    expect(await runCli(() => runBackfillIntentsCli({ csv: bad }, connect))).toBe(1);
    expect(await intents.drain()).toHaveLength(after);
  }, 60_000);

  it('the CLI fails with one line when KAFKA_BROKERS is not set', async () => {
    const errors: string[] = [];
    const write = process.stderr.write.bind(process.stderr);
    process.stderr.write = ((chunk: string) => {
      errors.push(String(chunk));
      return true;
    }) as typeof process.stderr.write;
    try {
      const code = await runCli(async () => {
        delete process.env.KAFKA_BROKERS;
        await runBackfillIntentsCli({ csv: join(dir, 'good.csv') }, connect);
      });
      expect(code).toBe(1);
    } finally {
      process.stderr.write = write;
    }
    expect(errors).toEqual(['payrecon: KAFKA_BROKERS: must be set for this command (host:port,...)\n']);
  });
});

describe('backfill poll', () => {
  let sandbox: RunningSandbox;
  let database: TestDatabase;

  beforeAll(async () => {
    sandbox = await startSandbox({ seed: 13 });
    database = await createTestDatabase();
  }, 60_000);

  afterAll(async () => {
    await sandbox?.close();
    await database?.drop();
  });

  it('reads again every entity first seen in the range, source backfill', async () => {
    const account = sandboxAccount(sandbox, { name: 'main' });
    const client = createProviderClient(account, { retries: 0, logger: quiet });
    const deposit = await client.createDeposit({
      invoice_id: uniqueRef('bf'),
      country: 'BR',
      currency: 'BRL',
      amount: 20_00n,
      payment_method: 'IX',
      payer: PAYER,
    });
    const seen = (entityId: string, at: string): Observation => ({
      eventId: randomUUID(),
      kind: 'deposit',
      account: 'main',
      entityId,
      externalRef: null,
      status: 'PENDING',
      observedAt: new Date(at),
      source: 'webhook',
      currency: 'BRL',
      amount: 20_00n,
      ...NO_FACTS,
      details: {},
    });
    await database.db
      .transaction()
      .execute((trx) =>
        applyObservations(trx, [
          seen(String(deposit.deposit_id), '2026-01-10T08:00:00Z'),
          seen('999999991', '2026-01-11T23:59:00Z'),
          seen('999999992', '2026-01-12T00:00:00Z'),
        ]),
      );

    const before = observed.values.length;
    const result = await backfillPoll(
      {
        db: database.db,
        clientFor: (n) => (n === 'main' ? client : undefined),
        publisher: infra.publisher,
        logger: quiet,
      },
      { from: parseRangeDate('2026-01-10', '--from', false), to: parseRangeDate('2026-01-11', '--to', true) },
    );
    expect(result).toEqual({ entities: 2, published: 2, failed: 0 });
    const values = (await observed.waitFor(before + 2)).slice(before);
    expect(values.every((v) => v.source === 'backfill')).toBe(true);
    expect(values.map((v) => v.entityId).sort()).toEqual([String(deposit.deposit_id), '999999991'].sort());
    expect(values.find((v) => v.entityId === '999999991')?.status).toBeNull();

    const other = await backfillPoll(
      { db: database.db, clientFor: () => client, publisher: infra.publisher, logger: quiet },
      { from: new Date('2026-01-01T00:00:00Z'), to: new Date('2026-02-01T00:00:00Z'), account: 'elsewhere' },
    );
    expect(other.entities).toBe(0);
  }, 60_000);

  it('the CLI reaches the sandbox of the payrecon up running on its data directory when no account is configured', async () => {
    // As `npm start` runs it: the sandbox's own account (DEFAULT_ACCOUNT, named sandbox).
    const [account] = runningSandboxAccounts({ api: sandbox.url, 'card api': sandbox.ccUrl });
    expect(account?.name).toBe('sandbox');
    const client = createProviderClient(account!, { retries: 0, logger: quiet });
    const deposit = await client.createDeposit({
      invoice_id: uniqueRef('bf-up'),
      country: 'BR',
      currency: 'BRL',
      amount: 30_00n,
      payment_method: 'IX',
      payer: PAYER,
    });
    await database.db.transaction().execute((trx) =>
      applyObservations(trx, [
        {
          eventId: randomUUID(),
          kind: 'deposit',
          account: 'sandbox',
          entityId: String(deposit.deposit_id),
          externalRef: null,
          status: 'PENDING',
          observedAt: new Date('2026-02-10T08:00:00Z'),
          source: 'webhook',
          currency: 'BRL',
          amount: 30_00n,
          ...NO_FACTS,
          details: {},
        },
      ]),
    );
    // A stand-in for the running `payrecon up`: another live process owns the endpoints file.
    const holder = spawn('sleep', ['600'], { stdio: 'ignore' });
    const data = join(dir, 'up-data');
    mkdirSync(data, { recursive: true });
    writeEndpoints(data, {
      pid: holder.pid!,
      startedAt: new Date().toISOString(),
      databaseUrl: database.url,
      brokers: [`127.0.0.1:${infra.broker.port}`],
      registryUrl: infra.registry.url,
      web: 'http://127.0.0.1:9',
      sandbox: { api: sandbox.url, 'card api': sandbox.ccUrl, control: `${sandbox.url}/_sandbox/` },
    });
    const errors: string[] = [];
    const write = process.stderr.write.bind(process.stderr);
    const out = process.stdout.write.bind(process.stdout);
    const printed: string[] = [];
    process.stderr.write = ((chunk: string) => {
      errors.push(String(chunk));
      return true;
    }) as typeof process.stderr.write;
    process.stdout.write = ((chunk: string) => {
      printed.push(String(chunk));
      return true;
    }) as typeof process.stdout.write;
    const backfillOnUp = () =>
      runCli(async () => {
        for (const k of ['KAFKA_BROKERS', 'SCHEMA_REGISTRY_URL', 'DATABASE_URL']) delete process.env[k];
        process.env.PAYRECON_DATA_DIR = data;
        await runBackfillPollCli({ from: '2026-02-10', to: '2026-02-10' }, connect);
      });
    try {
      const before = observed.values.length;
      expect(await backfillOnUp()).toBe(0);
      expect(errors).toEqual([]);
      expect(printed).toEqual(['re-polled 1 entity: 1 observation(s) published, 0 failed\n']);
      const [value] = (await observed.waitFor(before + 1)).slice(before);
      expect(value).toMatchObject({
        source: 'backfill',
        account: 'sandbox',
        entityId: String(deposit.deposit_id),
      });
      expect(value?.status).not.toBeNull();
      // That instance gone: one line, exit 1.
      holder.kill();
      await new Promise((r) => holder.once('exit', r));
      errors.length = 0;
      expect(
        await runCli(async () => {
          process.env.PAYRECON_DATA_DIR = data;
          process.env.DATABASE_URL = database.url;
          await runBackfillPollCli({ from: '2026-02-10', to: '2026-02-10' }, connect);
        }),
      ).toBe(1);
      expect(errors.at(-1)).toBe(
        'payrecon: PAYRECON_ACCOUNTS: must name the provider accounts to poll (or a payrecon up with its sandbox running)\n',
      );
    } finally {
      process.stderr.write = write;
      process.stdout.write = out;
      holder.kill();
    }
  }, 60_000);

  it('reads range dates strictly', () => {
    expect(parseRangeDate('2026-01-10', '--to', true).toISOString()).toBe('2026-01-11T00:00:00.000Z');
    expect(parseRangeDate('2026-01-10T05:00:00Z', '--from', false).toISOString()).toBe(
      '2026-01-10T05:00:00.000Z',
    );
    expect(() => parseRangeDate('2026-02-30', '--from', false)).toThrow('--from: must be a date');
    expect(() => parseRangeDate('yesterday', '--to', true)).toThrow('--to: must be a date');
  });
});
