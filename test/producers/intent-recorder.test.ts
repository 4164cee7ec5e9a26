import Fastify, { type FastifyInstance } from 'fastify';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiToken, TokenVerifier } from '../../src/domain/api-tokens.ts';
import { refundWriteAheadRef } from '../../src/domain/intent.ts';
import type { Intent } from '../../src/domain/observation.ts';
import { intentsPlugin } from '../../src/producers/intent/http.ts';
import { intentIdFor, recordingClient } from '../../src/producers/intent/recording-client.ts';
import { createProviderClient, type ProviderClient } from '../../src/provider/client.ts';
import { ProviderError } from '../../src/provider/errors.ts';
import { DEFAULT_ACCOUNT } from '../../src/sandbox/accounts.ts';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/main.ts';
import { trafficClientFor } from '../../src/sandbox/traffic-client.ts';
import { waitFor } from '../helpers/wait.ts';
import {
  type Collector,
  collect,
  type Infra,
  move,
  PAYER,
  quiet,
  sandboxAccount,
  startInfra,
  uniqueRef,
} from './helpers.ts';

let infra: Infra;
let sandbox: RunningSandbox;
let app: FastifyInstance;
let base: string;
let intents: Collector<Intent>;

let writer: Awaited<ReturnType<typeof createApiToken>>;
let reader: Awaited<ReturnType<typeof createApiToken>>;

beforeAll(async () => {
  writer = await createApiToken('recorder', ['intents:write']);
  reader = await createApiToken('reader', ['read']);
  infra = await startInfra();
  sandbox = await startSandbox({ seed: 9 });
  intents = await collect(infra, 'merchant.intent.recorded.v1');
  app = Fastify({ logger: false, forceCloseConnections: true });
  await app.register(
    intentsPlugin({
      publisher: infra.publisher,
      tokens: new TokenVerifier([writer.entry, reader.entry]),
      accounts: ['main'],
      logger: quiet,
    }),
  );
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no address');
  base = `http://127.0.0.1:${address.port}`;
}, 60_000);

afterAll(async () => {
  await intents?.stop();
  await app?.close();
  await sandbox?.close();
  await infra?.close();
});

async function postIntents(body: string, headers: Record<string, string> = {}) {
  const res = await request(`${base}/intents`, {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${writer.token}`, ...headers },
  });
  return { status: res.statusCode, json: (await res.body.json()) as Record<string, unknown> };
}

const GOOD = {
  intentId: 'http-1',
  operation: 'cashout',
  account: 'main',
  externalRef: 'ext-http-1',
  entityId: '8405147',
  currency: 'BRL',
  amount: '123456789012345678.99',
  createdAt: '2026-11-21T10:00:00Z',
  request: { login: 'cash-login', pass: 'cash-pass', amount: '100.00' },
};

describe('POST /intents', () => {
  it('takes a request without a token only when open (the sandbox), never a wrong token', async () => {
    const open = Fastify({ logger: false });
    await open.register(
      intentsPlugin({
        publisher: infra.publisher,
        tokens: new TokenVerifier([writer.entry]),
        open: true,
        accounts: ['main'],
        logger: quiet,
      }),
    );
    try {
      const bad = JSON.stringify({ ...GOOD, amount: '1.001' });
      const post = (headers: Record<string, string>) =>
        open.inject({
          method: 'POST',
          url: '/intents',
          headers: { 'content-type': 'application/json', ...headers },
          payload: bad,
        });
      // Past the token check (a 400 on the amount), and nothing published.
      expect((await post({})).statusCode).toBe(400);
      expect((await post({ authorization: 'Bearer wrong-token' })).statusCode).toBe(401);
      expect((await post({ authorization: `Bearer ${writer.token}` })).statusCode).toBe(400);
    } finally {
      await open.close();
    }
    // The closed route (outside the sandbox) refuses the same request without a token.
    const closed = await request(`${base}/intents`, {
      method: 'POST',
      body: JSON.stringify({ ...GOOD, amount: '1.001' }),
      headers: { 'content-type': 'application/json' },
    });
    expect(closed.statusCode).toBe(401);
    await closed.body.dump();
  });

  it('refuses a request without a valid API token (401), or with one lacking intents:write (403)', async () => {
    const before = intents.values.length;
    expect((await postIntents(JSON.stringify(GOOD), { authorization: 'Bearer wrong-token' })).status).toBe(
      401,
    );
    expect(
      (await postIntents(JSON.stringify(GOOD), { authorization: `Bearer ${writer.token}x` })).status,
    ).toBe(401);
    const forbidden = await postIntents(JSON.stringify(GOOD), { authorization: `Bearer ${reader.token}` });
    expect(forbidden.status).toBe(403);
    expect(String(forbidden.json.message)).toMatch(/intents:write/);
    expect(intents.values.length).toBe(before);
  });

  it('answers 400 naming every field and rule, and publishes nothing', async () => {
    const before = intents.values.length;
    const res = await postIntents(
      JSON.stringify([
        { ...GOOD, amount: '10.005' },
        { ...GOOD, currency: 'reais', operation: 'refund' },
        { ...GOOD, account: 'other' },
      ]),
    );
    expect(res.status).toBe(400);
    const issues = res.json.issues as { index: number; field: string; rule: string }[];
    expect(issues).toContainEqual({
      index: 0,
      field: 'amount',
      rule: 'at most 2 decimals allowed',
    });
    expect(issues).toContainEqual({
      index: 1,
      field: 'currency',
      rule: 'must be an ISO 4217 code such as BRL',
    });
    expect(issues).toContainEqual({ index: 1, field: 'parentDepositId', rule: 'is required for a refund' });
    expect(issues).toContainEqual({
      index: 2,
      field: 'account',
      rule: 'must name a configured provider account',
    });
    const bad = await postIntents('{"operation": ');
    expect(bad.status).toBe(400);
    expect(await intents.drain()).toHaveLength(before);
  });

  it('answers 200 once the intents are on the topic, amounts exact, credentials dropped', async () => {
    const before = intents.values.length;
    const res = await postIntents(
      JSON.stringify([
        GOOD,
        {
          ...GOOD,
          intentId: 'http-2',
          operation: 'refund',
          externalRef: 'r-1',
          entityId: 99,
          parentDepositId: 3000000001,
          amount: 12.5,
        },
      ]),
    );
    expect(res.status).toBe(200);
    expect(res.json.recorded).toBe(2);
    const values = (await intents.waitFor(before + 2)).slice(before);
    const cashout = values.find((v) => v.intentId === 'http-1')!;
    expect(cashout).toMatchObject({
      amount: 123456789012345678_99n,
      operation: 'cashout',
      entityId: '8405147',
      outcome: 'created',
    });
    expect(cashout.createdAt.toISOString()).toBe('2026-11-21T10:00:00.000Z');
    expect(cashout.request).toEqual({ amount: '100.00' });
    expect(values.find((v) => v.intentId === 'http-2')).toMatchObject({
      amount: 12_50n,
      parentDepositId: '3000000001',
    });
  });
});

describe('recordingClient', () => {
  let client: ProviderClient;
  const recorded: Intent[] = [];

  beforeAll(() => {
    const account = sandboxAccount(sandbox, { name: 'main' });
    client = recordingClient(createProviderClient(account, { retries: 0, logger: quiet }), (i) => {
      recorded.push(i);
    });
  });

  it('records deposit, card deposit, cashout and refund intents without card data or credentials', async () => {
    const invoice = uniqueRef('inv');
    const deposit = await client.createDeposit({
      invoice_id: invoice,
      country: 'BR',
      currency: 'BRL',
      amount: 150_00n,
      payment_method: 'IX',
      payer: PAYER,
    });
    const card = await client.createCardDeposit({
      invoice_id: uniqueRef('card'),
      country: 'BR',
      currency: 'BRL',
      amount: 42_00n,
      client_ip: '203.0.113.7',
      payer: PAYER,
      credit_card: {
        card_number: '4111111111111111',
        cvv: '123',
        expiration_month: '12',
        expiration_year: String((new Date().getUTCFullYear() + 2) % 100).padStart(2, '0'),
        holder_name: 'Ana Silva',
      },
    });
    const externalId = uniqueRef('ext');
    const cashout = await client.createCashout({
      external_id: externalId,
      country: 'BR',
      amount: 20_00n,
      document_id: '12345678909',
      beneficiary_name: 'Ana',
      bank_code: '341',
      bank_account: '123456-7',
      bank_branch: '0001',
      account_type: 'C',
      notification_url: 'https://merchant.example/webhooks/main/cashouts',
    });
    const refund = await client.createRefund({ deposit_id: card.deposit_id, amount: 10_00n });

    // The pending intent ahead of the call (keyed by the merchant's reference, no provider id), then the
    // same intent id completed with the answer; a refund's reference is its deposit and amount until the
    // provider's refund id is known.
    expect(recorded).toHaveLength(8);
    const [dPending, d, cPending, c, pPending, p, rPending, r] = recorded as Intent[] as [
      Intent,
      Intent,
      Intent,
      Intent,
      Intent,
      Intent,
      Intent,
      Intent,
    ];
    expect(rPending).toMatchObject({
      intentId: r.intentId,
      operation: 'refund',
      externalRef: refundWriteAheadRef(String(card.deposit_id), 10_00n),
      parentDepositId: String(card.deposit_id),
      amount: 10_00n,
      currency: 'BRL',
      entityId: null,
      outcome: 'unknown',
      response: null,
    });
    expect(r.externalRef).toBe(`refund-${refund.refund_id}`);
    for (const [pending, done] of [
      [dPending, d],
      [cPending, c],
      [pPending, p],
    ] as const) {
      expect(pending).toMatchObject({
        intentId: done.intentId,
        externalRef: done.externalRef,
        amount: done.amount,
        currency: done.currency,
        entityId: null,
        outcome: 'unknown',
        response: null,
      });
      expect(pending.createdAt).toEqual(done.createdAt);
    }
    expect(d).toMatchObject({
      operation: 'deposit',
      externalRef: invoice,
      entityId: String(deposit.deposit_id),
      amount: 150_00n,
      currency: 'BRL',
      outcome: 'created',
    });
    expect(c).toMatchObject({ operation: 'card_deposit', entityId: String(card.deposit_id), amount: 42_00n });
    expect(p).toMatchObject({
      operation: 'cashout',
      externalRef: externalId,
      entityId: String(cashout.cashout_id),
      currency: 'BRL',
      amount: 20_00n,
    });
    expect(r).toMatchObject({
      operation: 'refund',
      entityId: String(refund.refund_id),
      parentDepositId: String(card.deposit_id),
      currency: 'BRL',
      amount: 10_00n,
    });
    const text = JSON.stringify(recorded, (_k, v) => (typeof v === 'bigint' ? String(v) : v));
    for (const secret of [
      '4111111111111111',
      '"cvv"',
      'Ana Silva',
      DEFAULT_ACCOUNT.cashoutPass,
      DEFAULT_ACCOUNT.cashoutLogin,
      'credit_card',
    ]) {
      expect(text).not.toContain(secret);
    }
  });

  it('records a refused creation as declined and still throws', async () => {
    recorded.length = 0;
    const externalId = uniqueRef('dup');
    const body = {
      external_id: externalId,
      country: 'BR',
      currency: 'BRL',
      amount: 5_00n,
      document_id: '12345678909',
      beneficiary_name: 'Ana',
      notification_url: 'https://merchant.example/webhooks/main/cashouts',
    };
    await client.createCashout(body);
    await expect(client.createCashout(body)).rejects.toThrow(/511/);
    expect(recorded.map((i) => i.outcome)).toEqual(['unknown', 'created', 'unknown', 'declined']);
    expect(recorded[3]!.entityId).toBeNull();
    expect(recorded[3]!.intentId).toBe(recorded[2]!.intentId);
    expect(recorded[3]!.response).toMatchObject({ code: 511 });
  });
});

describe('recordingClient around the sandbox traffic client', () => {
  it("records the intents of the traffic generator's client, refund currency read from the deposit", async () => {
    const recorded: Intent[] = [];
    const plain = createProviderClient(sandboxAccount(sandbox, { name: 'main' }), {
      retries: 0,
      logger: quiet,
    });
    const traffic = recordingClient(
      trafficClientFor(DEFAULT_ACCOUNT, sandbox),
      (i) => {
        recorded.push(i);
      },
      { account: 'main', depositCurrency: async (id) => (await plain.getDeposit(id)).currency },
    );
    const invoice = uniqueRef('trf');
    const deposit = await traffic.createDeposit({
      invoice_id: invoice,
      country: 'MX',
      currency: 'MXN',
      amount: 33_00n,
      payment_method: 'SE',
      payer: { ...PAYER, document_type: undefined },
    });
    await move(sandbox.url, 'deposit', deposit.deposit_id, 'COMPLETED');
    await traffic.createRefund({
      deposit_id: deposit.deposit_id,
      amount: 3_00n,
      bank_account: {
        beneficiary: 'Ana Silva',
        bank_code: '002',
        branch: '0001',
        account_number: '123456-7',
        account_type: 'C',
      },
    });
    expect(recorded).toHaveLength(4);
    expect(recorded[0]).toMatchObject({ operation: 'deposit', externalRef: invoice, outcome: 'unknown' });
    expect(recorded[1]).toMatchObject({
      operation: 'deposit',
      externalRef: invoice,
      amount: 33_00n,
      outcome: 'created',
    });
    expect(recorded[1]!.entityId).toBe(String(deposit.deposit_id));
    expect(recorded[2]).toMatchObject({ operation: 'refund', currency: 'MXN', outcome: 'unknown' });
    expect(recorded[3]).toMatchObject({
      operation: 'refund',
      currency: 'MXN',
      amount: 3_00n,
      outcome: 'created',
    });
  });
});

describe('recordingClient settling a creation whose answer was lost', () => {
  let slow: RunningSandbox;
  let recorded: Intent[];
  let client: ProviderClient;

  beforeAll(async () => {
    slow = await startSandbox({ seed: 23 });
    recorded = [];
    // A 300 ms timeout and no retry: a creation held 1.5 s by the provider is answered after the client gave up.
    client = recordingClient(
      createProviderClient(sandboxAccount(slow, { name: 'main' }), {
        retries: 0,
        timeoutMs: 300,
        logger: quiet,
      }),
      (i) => {
        recorded.push(i);
      },
      { settle: { windowMs: 60_000, firstDelayMs: 200, maxDelayMs: 1_000 }, logger: quiet },
    );
  }, 30_000);

  afterAll(async () => {
    await slow?.close();
  });

  const slowDown = (endpoint: string) =>
    slow.control.deps.faults.set({ endpoints: { [endpoint]: { latencyMs: 1_500 } } });
  const settled = (intentId: string) =>
    waitFor(
      `the intent ${intentId} to settle`,
      () => recorded.some((i) => i.intentId === intentId && i.outcome !== 'unknown'),
      20_000,
    );

  it('sends a deposit again with the same idempotency key: one deposit at the provider, its id recorded', async () => {
    const invoice = uniqueRef('settle');
    const key = `key-${invoice}`;
    slowDown('deposit.create');
    const failed = client.createDeposit(
      {
        invoice_id: invoice,
        country: 'BR',
        currency: 'BRL',
        amount: 99_00n,
        payment_method: 'IX',
        payer: PAYER,
      },
      { idempotencyKey: key },
    );
    await expect(failed).rejects.toMatchObject({ code: 'PROVIDER_TIMEOUT' });
    slow.control.deps.faults.set({});
    const intentId = intentIdFor('main', 'deposit', key);
    expect(recorded.filter((i) => i.intentId === intentId).map((i) => i.outcome)).toEqual([
      'unknown',
      'unknown',
    ]);
    await settled(intentId);
    const mine = recorded.filter((i) => i.intentId === intentId);
    expect(mine.map((i) => i.outcome)).toEqual(['unknown', 'unknown', 'created']);
    // One deposit at the provider for the invoice, the one the intent names.
    const deposits = [...slow.control.deps.engine.deposits.values()].filter((d) => d.invoiceId === invoice);
    expect(deposits).toHaveLength(1);
    expect(mine[2]).toMatchObject({
      externalRef: invoice,
      entityId: String(deposits[0]!.id),
      amount: 99_00n,
    });
  }, 60_000);

  it('settles a card deposit without the card ever leaving memory', async () => {
    const invoice = uniqueRef('settle-card');
    const before = recorded.length;
    slowDown('card.create');
    await expect(
      client.createCardDeposit({
        invoice_id: invoice,
        country: 'BR',
        currency: 'BRL',
        amount: 31_00n,
        client_ip: '203.0.113.7',
        payer: PAYER,
        credit_card: {
          card_number: '4111111111111111',
          cvv: '123',
          expiration_month: '12',
          expiration_year: String((new Date().getUTCFullYear() + 2) % 100).padStart(2, '0'),
          holder_name: 'Ana Silva',
        },
      }),
    ).rejects.toBeInstanceOf(ProviderError);
    slow.control.deps.faults.set({});
    const intentId = recorded[before]!.intentId;
    await settled(intentId);
    const done = recorded.find((i) => i.intentId === intentId && i.outcome === 'created')!;
    const deposits = [...slow.control.deps.engine.deposits.values()].filter((d) => d.invoiceId === invoice);
    expect(deposits.map((d) => String(d.id))).toEqual([done.entityId]);
    const text = JSON.stringify(recorded.slice(before), (_k, v) => (typeof v === 'bigint' ? String(v) : v));
    expect(text).not.toContain('4111111111111111');
    expect(text).not.toContain('credit_card');
  }, 60_000);

  it('settles a cashout by looking its external_id up, never creating it twice', async () => {
    const externalId = uniqueRef('settle-ext');
    const before = recorded.length;
    // Cashout creations the sandbox received, and those it answered (after their latency).
    const { faults, idempotency } = slow.control.deps;
    let received = 0;
    let answered = 0;
    const decide = faults.decide.bind(faults);
    const run = idempotency.run.bind(idempotency);
    faults.decide = (endpoint) => {
      if (endpoint === 'cashout.create') received += 1;
      return decide(endpoint);
    };
    idempotency.run = (scope, ...rest) =>
      run(scope, ...rest).finally(() => {
        if (scope.endsWith(':cashout')) answered += 1;
      });
    slowDown('cashout.create');
    await expect(
      client.createCashout({
        external_id: externalId,
        country: 'BR',
        currency: 'BRL',
        amount: 12_00n,
        document_id: '12345678909',
        beneficiary_name: 'Ana',
        bank_code: '341',
        bank_account: '123456-7',
        bank_branch: '0001',
        account_type: 'C',
        notification_url: 'https://merchant.example/webhooks/main/cashouts',
      }),
    ).rejects.toBeInstanceOf(ProviderError);
    slow.control.deps.faults.set({});
    const intentId = recorded[before]!.intentId;
    await settled(intentId);
    // The first request lands 1.5 s after it was sent: by then the settle may have created the cashout, and
    // that late first request is refused (511). Wait for it, then count.
    await waitFor('every cashout creation answered', () => received > 0 && answered === received, 20_000);
    faults.decide = decide;
    idempotency.run = run;
    const cashouts = [...slow.control.deps.engine.cashouts.values()].filter(
      (c) => c.externalId === externalId,
    );
    expect(cashouts).toHaveLength(1);
    const done = recorded.find((i) => i.intentId === intentId && i.outcome !== 'unknown')!;
    expect(done).toMatchObject({
      outcome: 'created',
      entityId: String(cashouts[0]!.id),
      externalRef: externalId,
    });
  }, 60_000);

  it('records a refusal met while settling as declined, and stops', async () => {
    const invoice = uniqueRef('settle-refused');
    const body = {
      invoice_id: invoice,
      country: 'BR',
      currency: 'BRL',
      amount: 5_00n,
      payment_method: 'IX',
      payer: PAYER,
    };
    await client.createDeposit(body);
    const before = recorded.length;
    // The same invoice again, under a new key: the 5xx fault answers before the provider sees it (outcome
    // unknown); the replay reaches it and is refused (the invoice_id is taken).
    slow.control.deps.faults.set({ endpoints: { 'deposit.create': { errorRate: 1, errorStatus: 503 } } });
    await expect(client.createDeposit(body)).rejects.toMatchObject({ status: 503 });
    slow.control.deps.faults.set({});
    const intentId = recorded[before]!.intentId;
    await settled(intentId);
    expect(recorded.filter((i) => i.intentId === intentId).map((i) => i.outcome)).toEqual([
      'unknown',
      'unknown',
      'declined',
    ]);
    expect(
      [...slow.control.deps.engine.deposits.values()].filter((d) => d.invoiceId === invoice),
    ).toHaveLength(1);
  }, 60_000);
});
