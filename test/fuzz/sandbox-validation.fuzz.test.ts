/**
 * Fuzzing the sandbox's request validation over real HTTP: generated bad requests to every endpoint of
 * the provider contract (deposits, card deposits, refunds, cashouts, status calls, bank codes): broken
 * field rules, wrong types, bodies that are not JSON, wrong content types, oversized bodies, bad
 * encodings, missing or wrong credentials and signatures, X-Date out of the window. Every one must get
 * the provider's error answer (4xx, a JSON body with a numeric `code` and a text), the sandbox must
 * create and change nothing, stay up and keep its memory flat. A small share of valid requests is mixed
 * in as a control: each must succeed and create exactly its entity.
 * `FUZZ_REQUESTS` sets the count (CI: 2,000; `npm run fuzz`: 10,000).
 */
import { createHmac } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ACCOUNT,
  cardBody,
  cashoutBody,
  cashoutCall,
  control,
  long,
  oneShotBody,
  raw,
  signed,
  startTestSandbox,
  toJson,
  withPath,
  xDateNow,
} from '../sandbox/helpers.ts';
import { sendInHalves } from './storm.ts';

const REQUESTS = Number(process.env.FUZZ_REQUESTS ?? 2_000);

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';
type Auth =
  | {
      kind: 'deposit';
      login?: string;
      secret?: string;
      /** X-Date relative to send time, or a literal value. */
      xDateOffsetMs?: number;
      xDate?: string;
      /** Sign these bytes instead of the body. */
      signOver?: Buffer;
      omit?: string;
      empty?: string;
      idempotencyKey?: string;
    }
  | { kind: 'cashout'; secret?: string; signature?: string | null }
  | { kind: 'bearer'; key: string | null }
  | { kind: 'none' };

type Control = 'deposit' | 'card' | 'cashout';

interface FuzzRequest {
  category: string;
  api: 'main' | 'cc';
  method: Method;
  path: string;
  body?: Buffer;
  auth: Auth;
  /** Header overrides (undefined removes). */
  headers?: Record<string, string | undefined>;
  /** HTTP statuses the provider answers to this request. */
  expect: readonly number[];
  /** A details line must start with this field name. */
  field?: string;
  /** The body's `code`. */
  code?: readonly number[];
  /** A valid request: must answer 200 and create one entity of this kind. */
  control?: Control;
}

const hmac = (key: string, message: Buffer) => createHmac('sha256', key).update(message).digest('hex');

function headersOf(r: FuzzRequest): Record<string, string> {
  const body = r.body ?? Buffer.alloc(0);
  const h: Record<string, string> = {};
  const a = r.auth;
  if (a.kind === 'deposit') {
    h['content-type'] = 'application/json';
    const xDate = a.xDate ?? xDateNow(a.xDateOffsetMs ?? 0);
    const login = a.login ?? ACCOUNT.login;
    h['x-date'] = xDate;
    h['x-login'] = login;
    h.authorization = `D24 ${hmac(a.secret ?? ACCOUNT.depositSecret, Buffer.concat([Buffer.from(xDate + login), a.signOver ?? body]))}`;
    if (a.idempotencyKey) h['x-idempotency-key'] = a.idempotencyKey;
    if (a.omit) delete h[a.omit];
    if (a.empty) h[a.empty] = ' ';
  } else if (a.kind === 'cashout') {
    h['content-type'] = 'application/json';
    const sig = a.signature === undefined ? hmac(a.secret ?? ACCOUNT.cashoutSecret, body) : a.signature;
    if (sig !== null) h['payload-signature'] = sig;
  } else if (a.kind === 'bearer') {
    if (a.key !== null) h.authorization = `Bearer ${a.key}`;
  }
  for (const [k, v] of Object.entries(r.headers ?? {})) {
    if (v === undefined) delete h[k];
    else h[k] = v;
  }
  return h;
}

const cashoutCreds = { login: ACCOUNT.cashoutLogin, pass: ACCOUNT.cashoutPass };

// ---------------------------------------------------------------- bad values, by rule

const threeDecimals = fc
  .tuple(
    fc.integer({ min: 0, max: 10 ** 9 }),
    fc.integer({ min: 1, max: 999 }).filter((d) => d % 10 !== 0),
  )
  .map(([i, d]) => raw(`${i}.${String(d).padStart(3, '0')}`));
const negative = fc.integer({ min: 1, max: 10 ** 9 }).map((n) => raw(`-${n}.50`));
const tooManyDigits = fc.integer({ min: 19, max: 30 }).map((n) => raw(`${long(n, '9')}.00`));
const wrongTyped = fc.oneof(
  fc.boolean(),
  fc.constant({}),
  fc.array(fc.nat(), { maxLength: 3 }),
  fc.constant(null),
);
const wrongTypedAmount = fc.oneof(
  fc.boolean(),
  fc.constant({}),
  fc.array(fc.nat(), { maxLength: 3 }),
  fc.stringMatching(/^[a-z ]{1,10}$/),
);
const badAmount = fc.oneof(threeDecimals, negative, tooManyDigits, wrongTypedAmount);
const badCountry = fc.oneof(
  fc.stringMatching(/^[A-Za-z]{0,5}$/).filter((s) => !/^[A-Z]{2}$/.test(s)),
  fc.constantFrom('XX', 'ZZ', 'QQ'),
  fc.integer(),
);
const badCurrency = fc.oneof(
  fc.stringMatching(/^[a-z]{3}$/),
  fc.stringMatching(/^[A-Z]{4,6}$/),
  fc.stringMatching(/^[A-Z]{1,2}$/),
  fc.integer(),
);
const badEmail = fc.oneof(
  fc.stringMatching(/^[a-z0-9.]{1,30}$/),
  fc.stringMatching(/^[a-z]{1,10}@$/),
  fc.stringMatching(/^@[a-z]{1,10}\.[a-z]{2,3}$/),
  fc.integer({ min: 0, max: 100 }).map((n) => `${long(250 + n)}@example.com`),
);
const tooLong = (max: number) => fc.integer({ min: max + 1, max: max + 300 }).map((n) => long(n));
const badEnum = (good: readonly string[]) =>
  fc.oneof(fc.stringMatching(/^[A-Za-z_ ]{1,12}$/), fc.integer()).filter((v) => !good.includes(String(v)));

type Rule = [field: string, bad: fc.Arbitrary<unknown>];

const DEPOSIT_RULES: Rule[] = [
  ['amount', badAmount],
  ['amount', fc.constant(undefined)],
  ['country', fc.oneof(badCountry, wrongTyped)],
  ['currency', fc.oneof(badCurrency, wrongTyped)],
  ['payer.email', badEmail],
  ['payer.document', tooLong(30)],
  ['payer.first_name', tooLong(128)],
  ['payer.phone', fc.constantFrom('call me', 'phone', '12-ab')],
  ['payer.address.state', fc.constantFrom('SPXX', 'ZZ')],
  ['payer.address.street', tooLong(255)],
  ['description', tooLong(100)],
  ['device_id', tooLong(100)],
  ['invoice_id', fc.oneof(tooLong(128), fc.constantFrom('bad id!', 'a b', 'x/y'))],
  ['language', badEnum(['es', 'en', 'pt', 'ja'])],
  ['payment_type', badEnum(['ALL', 'BANK_DEPOSIT', 'BANK_TRANSFER', 'CASH', 'CREDIT_CARD', 'DEBIT_CARD'])],
  ['notification_url', fc.constantFrom('http://x.example/hook', 'not a url', 'ftp://x.example/h')],
  ['expiration', fc.oneof(fc.integer({ min: 100_000, max: 10 ** 9 }), fc.constant('soon'))],
  ['bonus_amount', threeDecimals],
  ['client_ip', fc.constantFrom('999.1.1.1', 'localhost', '1.2.3')],
  ['fee_on_payer', fc.oneof(fc.constantFrom('yes', 'true', 1), fc.integer())],
  ['sub_merchant_id', fc.constantFrom('abc', 1.5, true)],
  ['payer', fc.oneof(fc.string({ maxLength: 10 }), fc.array(fc.nat(), { maxLength: 2 }), fc.integer())],
];

const CARD_RULES: Rule[] = [
  ['amount', badAmount],
  ['country', badCountry],
  ['currency', badCurrency],
  [
    'credit_card.cvv',
    fc.oneof(fc.stringMatching(/^\d{1,2}$/), fc.stringMatching(/^\d{5,8}$/), fc.constant('12a')),
  ],
  ['credit_card.card_number', fc.stringMatching(/^\d{17,24}$/)],
  ['credit_card.expiration_month', fc.constantFrom('13', '00', 'ab', '99')],
  ['credit_card.expiration_year', fc.constantFrom('2030', 'x', '123')],
  ['credit_card.holder_name', tooLong(256)],
  ['installments', fc.oneof(fc.integer({ min: 13, max: 1000 }), fc.constantFrom(0, -1, 'two'))],
  ['card_token', tooLong(50)],
  ['client_ip', fc.constantFrom(undefined, 'localhost', '999.1.1.1')],
  ['payer.email', fc.oneof(fc.constant(undefined), badEmail)],
  ['payer.document', fc.constant(undefined)],
  ['description', tooLong(100)],
  ['invoice_id', fc.constantFrom('no spaces allowed', 'x/y')],
  ['credit_card', fc.oneof(fc.constant(undefined), fc.string({ maxLength: 8 }), fc.integer())],
];

const CASHOUT_RULES: Rule[] = [
  ['external_id', fc.oneof(tooLong(100), fc.constant(undefined))],
  ['country', fc.oneof(badCountry, fc.constant(undefined))],
  ['currency', fc.stringMatching(/^[a-z]{3}$/)],
  ['amount', fc.oneof(badAmount, fc.constant(undefined))],
  ['document_id', fc.oneof(tooLong(30), fc.constant(undefined))],
  ['document_type', fc.constantFrom('DNI', 'XYZ')],
  ['beneficiary_name', fc.oneof(tooLong(255), fc.constant(undefined), wrongTyped)],
  ['beneficiary_lastname', tooLong(255)],
  ['email', badEmail],
  ['phone', fc.constantFrom('call me', 'phone')],
  ['bank_account', fc.integer({ min: 46, max: 200 }).map((n) => long(n, '1'))],
  ['bank_branch', fc.integer({ min: 46, max: 200 }).map((n) => long(n, '1'))],
  ['account_type', badEnum(['C', 'S'])],
  ['address', tooLong(255)],
  ['city', tooLong(128)],
  ['beneficiary_birthdate', fc.constantFrom('1990-01-01', 'yesterday')],
  ['comments', tooLong(255)],
  ['on_hold', fc.constantFrom('yes', 1, 'true')],
  ['notification_url', fc.constantFrom('ftp://x.example/h', undefined, 'nope')],
];

describe(`sandbox request validation under ${REQUESTS} hostile requests`, () => {
  let sb: Awaited<ReturnType<typeof startTestSandbox>>;
  let main: Pool;
  let cc: Pool;
  // Fixtures made before the storm: a completed deposit (refunds), a pending cashout (status calls), a
  // refund, and an idempotency key already used.
  let depositId = 0;
  let cashoutId = 0;
  let cashoutExternal = '';
  let refundId = 0;
  const usedKey = 'fuzz-fixture-key';

  beforeAll(async () => {
    sb = await startTestSandbox();
    const d = await signed(sb.url, '/v3/deposits', {
      body: oneShotBody({ invoice_id: 'fuzz-fixture-1' }),
      idempotencyKey: usedKey,
    });
    expect(d.status, d.text).toBe(200);
    depositId = d.json.deposit_id;
    expect((await control(sb.url, `/deposits/${depositId}/pay`, {})).status).toBe(200);
    const c = await cashoutCall(sb.url, '/v3/cashout', cashoutBody());
    expect(c.status, c.text).toBe(200);
    cashoutId = Number(c.json.cashout_id);
    cashoutExternal = sb.control.deps.engine.cashouts.get(cashoutId)!.externalId;
    const r = await signed(sb.url, '/v3/refunds', {
      body: {
        deposit_id: depositId,
        amount: 10,
        bank_account: { beneficiary: 'Ana Silva', bank_code: '341', branch: '1', account_number: '1' },
      },
    });
    expect(r.status, r.text).toBe(200);
    refundId = r.json.refund_id;
    main = new Pool(sb.url, { connections: 12 });
    cc = new Pool(sb.ccUrl, { connections: 4 });
  }, 60_000);

  afterAll(async () => {
    await main?.close();
    await cc?.close();
    await sb?.close();
  });

  function generators(): { weight: number; arbitrary: fc.Arbitrary<FuzzRequest> }[] {
    let n = 0;
    const req = (r: FuzzRequest) => r;
    const json = (v: unknown) => Buffer.from(toJson(v));
    const depositBody = () => ({ ...oneShotBody(), invoice_id: `fz-${++n}` });
    const cardJson = () => ({ ...cardBody(), invoice_id: `fz-${++n}` });
    const cashoutJson = () => ({ ...cashoutCreds, ...cashoutBody(), external_id: `fz-${++n}` });
    const refundBody = () => ({
      deposit_id: depositId,
      amount: 1,
      bank_account: { beneficiary: 'Ana Silva', bank_code: '341', branch: '1', account_number: '1' },
    });
    // Unknown extra fields ride along (the provider ignores them; they must not hide the broken rule).
    const extra = fc.dictionary(fc.stringMatching(/^x_[a-z]{1,8}$/), fc.jsonValue({ maxDepth: 2 }), {
      maxKeys: 3,
    });
    const rule = (rules: Rule[]) =>
      fc
        .constantFrom(...rules)
        .chain(([field, bad]) => fc.tuple(bad, extra).map(([value, more]) => ({ field, value, more })));
    const depositAuth: Auth = { kind: 'deposit' };
    const cashoutAuth: Auth = { kind: 'cashout' };
    interface Endpoint {
      api: 'main' | 'cc';
      method: Method;
      path: string;
      auth: Auth;
      /** A valid body of the endpoint. */
      valid(): Buffer | undefined;
    }
    const POST_DEPOSIT: Endpoint = {
      api: 'main',
      method: 'POST',
      path: '/v3/deposits',
      auth: depositAuth,
      valid: () => json(depositBody()),
    };
    const POST_CARD: Endpoint = {
      api: 'cc',
      method: 'POST',
      path: '/v3/deposits',
      auth: depositAuth,
      valid: () => json(cardJson()),
    };
    const POST_REFUND: Endpoint = {
      api: 'main',
      method: 'POST',
      path: '/v3/refunds',
      auth: depositAuth,
      valid: () => json(refundBody()),
    };
    const cashoutEndpoint = (method: Method, path: string, valid: () => object): Endpoint => ({
      api: 'main',
      method,
      path,
      auth: cashoutAuth,
      valid: () => json(valid()),
    });
    const CASHOUT_ENDPOINTS = [
      cashoutEndpoint('POST', '/v3/cashout', cashoutJson),
      cashoutEndpoint('POST', '/v3/cashout/status', () => ({ ...cashoutCreds, cashout_id: cashoutId })),
      cashoutEndpoint('PUT', '/v3/cashout/status', () => ({
        ...cashoutCreds,
        cashout_id: cashoutId,
        status: 'ON_HOLD',
      })),
      cashoutEndpoint('DELETE', '/v3/cashout/cancel', () => ({
        ...cashoutCreds,
        cashout_id: cashoutId,
        external_id: cashoutExternal,
      })),
    ];
    const BODY_ENDPOINTS = [POST_DEPOSIT, POST_CARD, POST_REFUND, ...CASHOUT_ENDPOINTS];
    /** Every deposit-style endpoint, the status calls included. */
    const DEPOSIT_STYLE: Endpoint[] = [
      POST_DEPOSIT,
      POST_CARD,
      POST_REFUND,
      {
        api: 'main',
        method: 'GET',
        path: `/v3/deposits/${depositId}`,
        auth: depositAuth,
        valid: () => undefined,
      },
      {
        api: 'main',
        method: 'GET',
        path: `/v3/refunds/${refundId}`,
        auth: depositAuth,
        valid: () => undefined,
      },
    ];
    const at = (e: Endpoint) => ({ api: e.api, method: e.method, path: e.path, auth: e.auth });
    const isCashout = (e: Endpoint) => e.auth.kind === 'cashout';

    return [
      // Each field rule of deposit creation broken once, correctly signed: 400, code 300, the field named.
      {
        weight: 10,
        arbitrary: rule(DEPOSIT_RULES).map(({ field, value, more }) =>
          req({
            category: 'deposit-field',
            ...at(POST_DEPOSIT),
            body: json(withPath({ ...depositBody(), ...more }, field, value)),
            expect: [400],
            code: [300],
            field,
          }),
        ),
      },
      {
        weight: 7,
        arbitrary: rule(CARD_RULES).map(({ field, value }) =>
          req({
            category: 'card-field',
            ...at(POST_CARD),
            body: json(withPath(cardJson(), field, value)),
            expect: [400],
            code: [300],
            field,
          }),
        ),
      },
      {
        weight: 8,
        arbitrary: rule(CASHOUT_RULES).map(({ field, value, more }) =>
          req({
            category: 'cashout-field',
            ...at(CASHOUT_ENDPOINTS[0]!),
            body: json(withPath({ ...cashoutJson(), ...more }, field, value)),
            expect: [412],
            code: [300],
            field,
          }),
        ),
      },
      // Refunds: field rules, an amount above the deposit, unknown deposits.
      {
        weight: 6,
        arbitrary: fc.oneof(
          rule([
            ['amount', fc.oneof(threeDecimals, negative, fc.constant(0), wrongTypedAmount)],
            ['deposit_id', fc.constantFrom(undefined, 'abc', 1.5, -3, true)],
            ['comments', tooLong(255)],
            ['notification_url', fc.constantFrom('http://x.example/r', 'nope')],
            ['bank_account.beneficiary', tooLong(255)],
            ['bank_account.account_number', fc.integer({ min: 46, max: 100 }).map((k) => long(k, '1'))],
          ]).map(({ field, value }) =>
            req({
              category: 'refund-field',
              ...at(POST_REFUND),
              body: json(withPath(refundBody(), field, value)),
              expect: [400],
              code: [300],
              field,
            }),
          ),
          fc.integer({ min: 1_000, max: 10 ** 9 }).map((amount) =>
            req({
              category: 'refund-amount',
              ...at(POST_REFUND),
              body: json({ ...refundBody(), amount }),
              expect: [400],
              code: [802],
            }),
          ),
          fc
            .integer({ min: 1, max: 2 ** 40 })
            .filter((id) => id !== depositId)
            .map((id) =>
              req({
                category: 'refund-unknown-deposit',
                ...at(POST_REFUND),
                body: json({ ...refundBody(), deposit_id: id }),
                expect: [404],
                code: [208],
              }),
            ),
        ),
      },
      // Status calls with invalid or unknown ids; a status update to a status the API does not take.
      {
        weight: 7,
        arbitrary: fc.oneof(
          fc
            .oneof(fc.stringMatching(/^[a-z]{1,8}$/), fc.constantFrom('-1', '1.5', '1e3', long(16, '1')))
            .map((id) =>
              req({
                category: 'status-bad-id',
                api: 'main',
                method: 'GET',
                path: `/v3/deposits/${encodeURIComponent(id)}`,
                auth: depositAuth,
                expect: [400],
                code: [300],
              }),
            ),
          fc
            .integer({ min: 1, max: 2 ** 40 })
            .filter((id) => id !== depositId)
            .map((id) =>
              req({
                category: 'status-unknown',
                api: 'main',
                method: 'GET',
                path: `/v3/deposits/${id}`,
                auth: depositAuth,
                expect: [404],
                code: [208],
              }),
            ),
          fc
            .oneof(
              fc
                .integer({ min: 1, max: 2 ** 40 })
                .filter((id) => id !== refundId)
                .map(String),
              fc.stringMatching(/^[a-z]{1,8}$/),
            )
            .map((id) =>
              req({
                category: 'status-unknown',
                api: 'main',
                method: 'GET',
                path: `/v3/refunds/${id}`,
                auth: depositAuth,
                expect: [400, 404],
                code: [208, 300],
              }),
            ),
          fc
            .tuple(
              fc.oneof(
                fc
                  .integer({ min: 1, max: 2 ** 40 })
                  .filter((id) => id !== cashoutId)
                  .map((id) => ({ ids: { cashout_id: id } as object, code: 509 })),
                fc.constantFrom('abc', -1, 1.5, true).map((id) => ({ ids: { cashout_id: id }, code: 300 })),
                fc.constant({ ids: {}, code: 300 }),
              ),
              fc.constantFrom(CASHOUT_ENDPOINTS[1]!, CASHOUT_ENDPOINTS[3]!),
            )
            .map(([{ ids, code }, e]) =>
              req({
                category: 'cashout-bad-id',
                ...at(e),
                body: json({ ...cashoutCreds, ...ids }),
                expect: [412],
                code: [code],
              }),
            ),
          badEnum(['PENDING', 'ON_HOLD']).map((status) =>
            req({
              category: 'cashout-bad-status',
              ...at(CASHOUT_ENDPOINTS[2]!),
              body: json({ ...cashoutCreds, cashout_id: cashoutId, status }),
              expect: [412],
              code: [300],
              field: 'status',
            }),
          ),
        ),
      },
      // Bank codes: bad country, bad or missing key.
      {
        weight: 4,
        arbitrary: fc.oneof(
          fc
            .oneof(
              fc.constant(''),
              fc.stringMatching(/^[a-z]{2}$/),
              fc.stringMatching(/^[A-Z]{3,4}$/),
              fc.constant('B1'),
            )
            .map((country) =>
              req({
                category: 'banks',
                api: 'main',
                method: 'GET',
                path: `/v3/banks?country=${country}`,
                auth: { kind: 'bearer', key: ACCOUNT.readOnlyKey },
                expect: [400],
                code: [300],
              }),
            ),
          fc
            .oneof(
              fc.constant(null),
              fc.stringMatching(/^[a-z0-9-]{1,30}$/),
              fc.constant(ACCOUNT.depositSecret),
            )
            .map((key) =>
              req({
                category: 'banks',
                api: 'main',
                method: 'GET',
                path: '/v3/banks?country=BR',
                auth: { kind: 'bearer', key },
                expect: [401],
                code: [401],
              }),
            ),
        ),
      },
      // Not JSON, or JSON that is not an object, correctly signed.
      {
        weight: 8,
        arbitrary: fc
          .tuple(
            fc.constantFrom(...BODY_ENDPOINTS),
            fc.oneof(
              fc.string({ minLength: 1, maxLength: 200 }).filter((s) => {
                try {
                  JSON.parse(s);
                  return false;
                } catch {
                  return true;
                }
              }),
              fc.constantFrom('[]', '1', '"text"', 'null', 'true', '[{"amount":1}]'),
            ),
          )
          .map(([e, text]) => {
            // An array is an object without credentials to a cashout endpoint (401).
            const array =
              text.trimStart().startsWith('[') &&
              (() => {
                try {
                  return Array.isArray(JSON.parse(text));
                } catch {
                  return false;
                }
              })();
            return req({
              category: 'not-json',
              ...at(e),
              body: Buffer.from(text),
              expect: isCashout(e) ? (array ? [401] : [400]) : [400],
              code: isCashout(e) ? (array ? [401] : [502]) : [300],
            });
          }),
      },
      // Content types the API does not take, on a valid signed body.
      {
        weight: 6,
        arbitrary: fc
          .tuple(
            fc.constantFrom(...BODY_ENDPOINTS),
            fc.constantFrom(
              'text/plain',
              'application/xml',
              'application/x-www-form-urlencoded',
              'multipart/form-data; boundary=x',
              'application/octet-stream',
              'text/json',
            ),
          )
          .map(([e, type]) =>
            req({
              category: 'wrong-type',
              ...at(e),
              body: e.valid(),
              headers: { 'content-type': type },
              expect: [415],
              code: [415],
            }),
          ),
      },
      // Bodies over the 1 MiB limit.
      {
        weight: 3,
        arbitrary: fc
          .tuple(
            fc.constantFrom(...BODY_ENDPOINTS),
            fc.integer({ min: 1024 * 1024 + 1, max: 2 * 1024 * 1024 }),
          )
          .map(([e, size]) =>
            req({
              category: 'oversized',
              ...at(e),
              body: oversized.subarray(0, size),
              expect: [413],
              code: [413],
            }),
          ),
      },
      // Wrongly encoded, correctly signed over the bytes sent: invalid UTF-8, gzip not declared, gzip
      // declared (whether the body is gzip or not: the API takes no compressed bodies).
      {
        weight: 6,
        arbitrary: fc
          .tuple(
            fc.constantFrom(...BODY_ENDPOINTS),
            fc.uint8Array({ minLength: 1, maxLength: 64 }),
            fc.constantFrom('bad-utf8', 'gzip-unsaid', 'gzip-lie', 'gzip-real'),
          )
          .map(([e, bytes, how]) => {
            const valid = e.valid()!;
            if (how === 'bad-utf8') {
              const noise = Buffer.from(bytes.map((b) => 0x80 | b));
              const body = Buffer.concat([
                valid.subarray(0, valid.length - 1),
                Buffer.from(',"description":"'),
                Buffer.from([0xff, 0xc3, 0x28]),
                noise,
                Buffer.from('"}'),
              ]);
              return req({ category: how, ...at(e), body, expect: [400], code: [400] });
            }
            if (how === 'gzip-unsaid') {
              return req({ category: how, ...at(e), body: gzipSync(valid), expect: [400], code: [400] });
            }
            return req({
              category: 'gzip-declared',
              ...at(e),
              body: how === 'gzip-real' ? gzipSync(valid) : valid,
              headers: { 'content-encoding': 'gzip' },
              expect: [415],
              code: [415],
            });
          }),
      },
      // Deposit-style credentials: missing or empty header, unknown login, wrong secret, another body's
      // signature, malformed X-Date, X-Date 6 minutes to 30 days off. The request itself is valid.
      {
        weight: 14,
        arbitrary: fc
          .tuple(
            fc.constantFrom(...DEPOSIT_STYLE),
            fc.oneof(
              fc
                .constantFrom('x-date', 'x-login', 'authorization')
                .map((h) => ({ auth: { omit: h }, code: 101 })),
              fc
                .constantFrom('x-date', 'x-login', 'authorization')
                .map((h) => ({ auth: { empty: h }, code: 105 })),
              fc
                .stringMatching(/^[a-z0-9-]{1,20}$/)
                .filter((l) => l !== ACCOUNT.login)
                .map((login) => ({ auth: { login }, code: 100 })),
              fc.stringMatching(/^[a-z0-9]{8,32}$/).map((secret) => ({ auth: { secret }, code: 102 })),
              fc
                .string({ maxLength: 40 })
                .map((other) => ({ auth: { signOver: Buffer.from(`${other}!`) }, code: 102 })),
              fc
                .constantFrom(
                  '2026-11-21 10:00:00',
                  'yesterday',
                  '2026-11-21T10:00:00.000Z',
                  '21/11/2026',
                  '2026-13-45T99:99:99Z',
                )
                .map((xDate) => ({ auth: { xDate }, code: 103 })),
              fc.tuple(fc.integer({ min: 6, max: 60 * 24 * 30 }), fc.boolean()).map(([minutes, future]) => ({
                auth: { xDateOffsetMs: (future ? 1 : -1) * minutes * 60_000 },
                code: 103,
              })),
            ),
          )
          .map(([e, { auth, code }]) =>
            req({
              category: 'auth-deposit',
              ...at(e),
              body: e.valid(),
              auth: { kind: 'deposit', ...auth },
              expect: code === 100 ? [401] : [400],
              code: [code],
            }),
          ),
      },
      // Cashout credentials: wrong login or pass, missing or wrong Payload-Signature. The body is valid
      // (a creation, a status read, an ON_HOLD update and a cancel of the fixture cashout).
      {
        weight: 10,
        arbitrary: fc
          .tuple(
            fc.constantFrom(...CASHOUT_ENDPOINTS),
            fc.oneof(
              fc
                .stringMatching(/^[a-z0-9-]{1,32}$/)
                .map((login) => ({ creds: { login } as object, auth: cashoutAuth, code: 401 })),
              fc
                .stringMatching(/^[a-z0-9-]{1,32}$/)
                .map((pass) => ({ creds: { pass } as object, auth: cashoutAuth, code: 401 })),
              fc.constant({ creds: { login: undefined }, auth: cashoutAuth, code: 401 }),
              fc.constant({ creds: {}, auth: { kind: 'cashout', signature: null } as Auth, code: 302 }),
              fc
                .stringMatching(/^[0-9a-f]{64}$/)
                .map((signature) => ({ creds: {}, auth: { kind: 'cashout', signature } as Auth, code: 302 })),
              fc
                .stringMatching(/^[a-z0-9]{8,32}$/)
                .map((secret) => ({ creds: {}, auth: { kind: 'cashout', secret } as Auth, code: 302 })),
            ),
          )
          .map(([e, { creds, auth, code }]) => {
            const body = { ...(JSON.parse(e.valid()!.toString('utf8')) as object), ...creds };
            return req({
              category: 'auth-cashout',
              ...at(e),
              body: json(body),
              auth,
              expect: code === 401 ? [401] : [412],
              code: [code],
            });
          }),
      },
      // An idempotency key already used, with another (valid) body.
      {
        weight: 3,
        arbitrary: fc.constant(0).map(() =>
          req({
            category: 'idempotency-reused',
            ...at(POST_DEPOSIT),
            body: json(depositBody()),
            auth: { kind: 'deposit', idempotencyKey: usedKey },
            expect: [400],
            code: [104],
          }),
        ),
      },
      // Controls: valid creations, which must succeed and create exactly one entity each.
      {
        weight: 3,
        arbitrary: fc.constantFrom<Control>('deposit', 'card', 'cashout').map((kind) => {
          const e = kind === 'deposit' ? POST_DEPOSIT : kind === 'card' ? POST_CARD : CASHOUT_ENDPOINTS[0]!;
          return req({ category: 'valid', ...at(e), body: e.valid(), expect: [200], control: kind });
        }),
      },
    ];
  }

  const oversized = Buffer.alloc(2 * 1024 * 1024, 'x');

  it('answers every bad request with the provider error, creates and changes nothing, stays up with flat memory', async () => {
    const engine = sb.control.deps.engine;
    const counts = () => ({
      deposits: engine.deposits.size,
      cashouts: engine.cashouts.size,
      refunds: engine.refunds.size,
    });
    const before = counts();
    const snapshot = JSON.stringify(sb.control.exportEntities());

    const only = process.env.FUZZ_ONLY;
    const requests = fc
      .sample(fc.oneof(...generators()), {
        numRuns: REQUESTS,
        seed: 42,
      })
      .filter((r) => !only || only.split(',').includes(r.category));
    const statuses = new Map<string, Map<number, number>>();
    const wrong: string[] = [];
    let wrongCount = 0;
    const created = { deposit: 0, card: 0, cashout: 0 };
    const started = Date.now();
    const send = async (r: FuzzRequest) => {
      const pool = r.api === 'cc' ? cc : main;
      const res = await pool.request({
        path: r.path,
        method: r.method,
        headers: headersOf(r),
        ...(r.body ? { body: r.body } : {}),
      });
      const text = await res.body.text();
      const byCategory = statuses.get(r.category) ?? new Map<number, number>();
      byCategory.set(res.statusCode, (byCategory.get(res.statusCode) ?? 0) + 1);
      statuses.set(r.category, byCategory);
      let body: Record<string, unknown> | undefined;
      try {
        body = JSON.parse(text) as Record<string, unknown>;
      } catch {
        body = undefined;
      }
      const why: string[] = [];
      if (!r.expect.includes(res.statusCode)) why.push(`HTTP ${res.statusCode}`);
      if (r.control) {
        if (res.statusCode === 200) created[r.control]++;
      } else {
        const described = typeof body?.description === 'string' || typeof body?.message === 'string';
        if (typeof body?.code !== 'number' || !described) why.push('not an error body');
        else if (r.code && !r.code.includes(body.code)) why.push(`code ${body.code}`);
        if (r.field) {
          const details = Array.isArray(body?.details) ? (body.details as string[]) : [];
          if (!details.some((d) => d.startsWith(`${r.field}: `) || d.startsWith(`${r.field}.`)))
            why.push(`field ${r.field} not named`);
        }
      }
      if (why.length > 0) {
        wrongCount++;
        const shown =
          r.body && r.body.length < 600 ? r.body.toString('utf8') : `${r.body?.length ?? 0} bytes`;
        if (wrong.length < 30)
          wrong.push(
            `${r.category} ${r.method} ${r.api}${r.path} [${why.join(', ')}] ${shown} -> ${text.slice(0, 300)}`,
          );
      }
    };
    const { heapMid, heapEnd } = await sendInHalves(requests, send);
    const seconds = (Date.now() - started) / 1000;

    const summary = Object.fromEntries([...statuses].map(([c, m]) => [c, Object.fromEntries(m)]));
    expect(wrong, `${wrongCount} wrong answers; ${JSON.stringify(summary)}`).toEqual([]);
    // The controls prove the requests could succeed: each created exactly its entity, nothing else was.
    const controls = requests.filter((r) => r.control);
    expect(controls.length).toBeGreaterThan(0);
    expect(created.deposit + created.card + created.cashout).toBe(controls.length);
    expect(counts()).toEqual({
      deposits: before.deposits + created.deposit + created.card,
      cashouts: before.cashouts + created.cashout,
      refunds: before.refunds,
    });
    // The entities there before the storm are unchanged (no status update, cancel or refund went through).
    const after = sb.control.exportEntities();
    const old = JSON.parse(snapshot) as typeof after;
    const pick = (e: typeof after, ids: Set<string>) =>
      JSON.stringify(
        Object.fromEntries(
          Object.entries(e).map(([k, v]) => [
            k,
            Array.isArray(v) ? v.filter((x: { id?: unknown }) => ids.has(String(x.id))) : v,
          ]),
        ),
      );
    const oldIds = new Set(
      Object.values(old).flatMap((v) =>
        Array.isArray(v) ? v.map((x: { id?: unknown }) => String(x.id)) : [],
      ),
    );
    expect(oldIds.size).toBe(3);
    expect(pick(after, oldIds)).toBe(pick(old, oldIds));
    // Still alive and still answering correctly.
    expect((await control(sb.url, '/health')).status).toBe(200);
    const ok = await signed(sb.url, '/v3/deposits', { body: { ...oneShotBody(), invoice_id: 'fz-after' } });
    expect(ok.status, ok.text).toBe(200);
    // Flat: the second half of the storm did not grow the live heap by more than 8 MiB.
    expect(heapEnd - heapMid).toBeLessThan(8 * 1024 * 1024);
    const total = [...statuses.values()].reduce((s, m) => s + [...m.values()].reduce((a, b) => a + b, 0), 0);
    const fourxx = [...statuses.values()].reduce(
      (s, m) => s + [...m].filter(([st]) => st >= 400 && st < 500).reduce((a, [, c]) => a + c, 0),
      0,
    );
    console.info(
      `sandbox fuzz: ${requests.length} requests in ${seconds.toFixed(1)} s, ${controls.length} valid controls (${JSON.stringify(created)}), 4xx ${fourxx}/${total - controls.length} bad; heap ${(heapMid / 1048576).toFixed(1)} -> ${(heapEnd / 1048576).toFixed(1)} MiB (${((heapEnd - heapMid) / 1048576).toFixed(1)} MiB over the second half); ${JSON.stringify(summary)}`,
    );
  }, 600_000);
});
