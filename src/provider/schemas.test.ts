import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { parseProviderJson } from './json.ts';
import {
  banksResponseSchema,
  cardDepositRequestSchema,
  cardDepositResponseSchema,
  cashoutCancelRequestSchema,
  cashoutCreateRequestSchema,
  cashoutCreateResponseSchema,
  cashoutNotificationSchema,
  cashoutStatusRequestSchema,
  cashoutStatusResponseSchema,
  cashoutUpdateRequestSchema,
  checkReportedInfo,
  depositCreateRequestSchema,
  depositCreateResponseSchema,
  depositSchema,
  formatZodIssues,
  refundCreateRequestSchema,
  refundSchema,
  validationMessages,
} from './schemas.ts';

/** A clone of `base` with `path` set to `value` (`undefined` removes the key). */
function withValue(base: unknown, path: string, value: unknown): unknown {
  const copy = structuredClone(base) as Record<string, unknown>;
  const keys = path.split('.');
  let node: Record<string, unknown> = copy;
  for (const k of keys.slice(0, -1)) {
    node[k] ??= {};
    node = node[k] as Record<string, unknown>;
  }
  const last = keys[keys.length - 1]!;
  if (value === undefined) delete node[last];
  else node[last] = value;
  return copy;
}

// Bodies as parseProviderJson gives them: numbers are text.
const deposit = parseProviderJson(
  '{"invoice_id":"inv-1","country":"BR","currency":"BRL","amount":100.50,"payment_method":"PX","payer":{"email":"ana@example.com"}}',
);
const card = parseProviderJson(`{"country":"BR","amount":10.00,"currency":"BRL","client_ip":"203.0.113.9",
  "payer":{"document":"12345678909","email":"ana@example.com","first_name":"Ana","last_name":"Silva"},
  "credit_card":{"cvv":"123","card_number":"4111111111111111","expiration_month":"07","expiration_year":"30","holder_name":"Ana Silva"}}`);
const cashout =
  parseProviderJson(`{"login":"cashLogin","pass":"cashPass","external_id":"ext-1","country":"BR",
  "amount":50.00,"document_id":"12345678909","beneficiary_name":"Ana","notification_url":"https://m.example.com/n"}`);
const refund = parseProviderJson('{"deposit_id":3000000001,"amount":5.00}');
const cashoutStatus = parseProviderJson('{"login":"l","pass":"p","cashout_id":8405147}');
const cashoutUpdate = parseProviderJson('{"login":"l","pass":"p","cashout_id":8405147,"status":"ON_HOLD"}');

type Row = [schema: string, path: string, good: unknown, bad: unknown, rule: string];
const SCHEMAS: Record<string, [z.ZodType, unknown]> = {
  deposit: [depositCreateRequestSchema, deposit],
  card: [cardDepositRequestSchema, card],
  cashout: [cashoutCreateRequestSchema, cashout],
  refund: [refundCreateRequestSchema, refund],
  cashoutStatus: [cashoutStatusRequestSchema, cashoutStatus],
  cashoutUpdate: [cashoutUpdateRequestSchema, cashoutUpdate],
};

const long = (n: number, ch = 'a') => ch.repeat(n);
const url = (n: number) => `https://e.example.com/${long(n - 22)}`;
const IDS = long(128, 'A');

// One accepted and one rejected value per rule of sections 2.3-2.8 and 8 (and docs/provider.md).
const RULES: Row[] = [
  // amounts (2.3, 2.8, 8): 18 integer digits, 2 decimals, positive
  [
    'deposit',
    'amount',
    '999999999999999999.99',
    '1000000000000000000.00',
    'at most 18 integer digits allowed',
  ],
  ['deposit', 'amount', '0.01', '0.001', 'at most 2 decimals allowed'],
  ['deposit', 'amount', '1', '0.00', 'must be greater than 0'],
  ['deposit', 'amount', '5', '-5', 'must not be negative'],
  ['deposit', 'amount', '5', 'five', 'must be a decimal number with at most 2 decimals'],
  ['deposit', 'amount', 10050n, -1n, 'must not be negative'],
  ['deposit', 'amount', '5', undefined, 'is required'],
  ['deposit', 'bonus_amount', '999999999999999999.99', '1.999', 'at most 2 decimals allowed'],
  ['deposit', 'strikethrough_price', '0', '1e20', 'at most 18 integer digits allowed'],
  // invoice_id
  ['deposit', 'invoice_id', IDS, `${IDS}A`, 'at most 128 characters'],
  ['deposit', 'invoice_id', 'Az09-_', 'inv 1', 'only A-Z a-z 0-9 - _ allowed'],
  ['card', 'invoice_id', 'a_b-C', 'inv#1', 'only A-Z a-z 0-9 - _ allowed'],
  // ISO codes
  ['deposit', 'country', 'MX', 'XX', 'must be an ISO 3166-1 alpha-2 country code'],
  ['deposit', 'country', 'CO', 'br', 'must be an ISO 3166-1 alpha-2 country code'],
  ['deposit', 'currency', 'USD', 'XYZ', 'must be an ISO 4217 currency code'],
  ['card', 'country', 'BR', 'BRA', 'must be an ISO 3166-1 alpha-2 country code'],
  ['card', 'currency', 'BRL', 'R$', 'must be an ISO 4217 currency code'],
  ['cashout', 'country', 'BR', 'ZZ', 'must be an ISO 3166-1 alpha-2 country code'],
  ['cashout', 'currency', 'BRL', 'BRLX', 'must be an ISO 4217 currency code'],
  // payer (2.4)
  ['deposit', 'payer.id', IDS, 'user-1', 'only A-Z a-z 0-9 allowed'],
  ['deposit', 'payer.id', 'u1', `${IDS}1`, 'at most 128 characters'],
  ['deposit', 'payer.document', long(30, '1'), long(31, '1'), 'at most 30 characters'],
  ['deposit', 'payer.document_type', 'CPF', 'DNI', 'must be a document type of BR: CPF, CNPJ, PASS'],
  ['deposit', 'payer.document_type', 'CNPJ', 'CPFCPFCPF12', 'at most 10 characters'],
  ['deposit', 'payer.email', 'a@b.co', 'a@b', 'must be a valid e-mail address'],
  [
    'deposit',
    'payer.email',
    `${long(243)}@example.com`,
    `${long(244)}@example.com`,
    'at most 255 characters',
  ],
  ['deposit', 'payer.first_name', long(128), long(129), 'at most 128 characters'],
  ['deposit', 'payer.last_name', long(128), long(129), 'at most 128 characters'],
  ['deposit', 'payer.phone', '+55 11 91234-5678', '12-ab', 'must be a valid phone number'],
  ['deposit', 'payer.phone', '5511912345678', `+${long(32, '1')}`, 'at most 32 characters'],
  ['deposit', 'payer.birth_date', '19900228', '19900230', 'must be a date in the format yyyyMMdd'],
  ['deposit', 'payer.registration_date', '20240101', '2024-01-01', 'at most 8 characters'],
  ['deposit', 'payer.registration_date', '20240229', '2024011', 'must be a date in the format yyyyMMdd'],
  ['deposit', 'payer.address.street', long(255), long(256), 'at most 255 characters'],
  ['deposit', 'payer.address.city', long(128), long(129), 'at most 128 characters'],
  ['deposit', 'payer.address.state', 'SP', 'SPXX', 'at most 3 characters'],
  ['deposit', 'payer.address.state', 'DF', 'S-', 'must be an ISO 3166-2 state code'],
  ['deposit', 'payer.address.zip_code', '01310-100', long(17, '1'), 'at most 16 characters'],
  ['card', 'payer.email', 'ana@example.com', undefined, 'is required'],
  ['card', 'payer.document', '123', undefined, 'is required'],
  ['card', 'payer.first_name', 'Ana', '', 'must not be empty'],
  // other deposit fields (2.3)
  ['deposit', 'description', long(100), long(101), 'at most 100 characters'],
  ['deposit', 'device_id', long(100), long(101), 'at most 100 characters'],
  ['deposit', 'client_ip', '2001:db8::1', '999.1.1.1', 'must be an IPv4 or IPv6 address'],
  ['deposit', 'client_ip', '192.168.0.1', 'localhost', 'must be an IPv4 or IPv6 address'],
  ['deposit', 'language', 'ja', 'fr', 'must be one of es, en, pt, ja'],
  ['deposit', 'language', 'pt', 'PT', 'must be one of es, en, pt, ja'],
  ['deposit', 'expiration', '99999', '100000', 'at most 5 digits'],
  ['deposit', 'expiration', '60', '1.5', 'must be an integer'],
  ['deposit', 'back_url', url(2048), url(2049), 'at most 2048 characters'],
  ['deposit', 'success_url', 'https://m.example.com/ok', 'http://m.example.com/ok', 'must be an HTTPS URL'],
  ['deposit', 'error_url', 'https://m.example.com/e', 'not a url', 'must be an HTTPS URL'],
  [
    'deposit',
    'notification_url',
    'https://m.example.com/n?x=1',
    'ftp://m.example.com',
    'must be an HTTPS URL',
  ],
  [
    'deposit',
    'logo',
    'https://cdn.example.com/l.png',
    'http://cdn.example.com/l.png',
    'must be an HTTPS URL',
  ],
  ['deposit', 'test', true, 'true', 'must be true or false'],
  ['deposit', 'sub_merchant_id', '12', '0', 'must be an integer'],
  [
    'deposit',
    'payment_types',
    ['BANK_DEPOSIT', 'BANK_TRANSFER'],
    ['bank deposit'],
    'must be an upper-case payment type code',
  ],
  // crypto (2.6)
  [
    'deposit',
    'crypto',
    { currency: 'USDT', wallet: 'w1', network: 'TRC20' },
    { currency: 'BTC', wallet: 'w1', network: 'TRC20' },
    'must be one of BUSD, DAI, RDOC, USDT, USDC',
  ],
  [
    'deposit',
    'crypto',
    { currency: 'USDC', wallet: 'w', network: 'Polygon' },
    { currency: 'USDC', wallet: 'w', network: 'BTC' },
    'must be one of AVAXC, BEP2, BEP20, ERC20, Polygon, Solana, TRC20, Tezos, RSK',
  ],
  [
    'deposit',
    'crypto',
    { currency: 'DAI', wallet: long(128), network: 'ERC20' },
    { currency: 'DAI', wallet: long(129), network: 'ERC20' },
    'at most 128 characters',
  ],
  [
    'deposit',
    'crypto',
    { currency: 'DAI', wallet: 'w', network: 'RSK' },
    { currency: 'DAI', wallet: 'w', network: long(13) },
    'at most 12 characters',
  ],
  // reported_info (2.5) field limits
  ['deposit', 'reported_info.bank_account_number', long(45, '1'), long(46, '1'), 'at most 45 characters'],
  ['deposit', 'reported_info.bank_branch', long(45, '1'), long(46, '1'), 'at most 45 characters'],
  ['deposit', 'reported_info.bank_beneficiary', long(255), long(256), 'at most 255 characters'],
  // card endpoint (2.8)
  ['card', 'installments', '12', '13', 'must be an integer from 1 to 12'],
  ['card', 'installments', '1', '0', 'must be an integer from 1 to 12'],
  ['card', 'card_token', long(50), long(51), 'at most 50 characters'],
  ['card', 'client_ip', '198.51.100.7', undefined, 'is required'],
  ['card', 'credit_card.cvv', '1234', '12', 'must be 3 to 4 digits'],
  ['card', 'credit_card.cvv', '123', '12a', 'must be 3 to 4 digits'],
  ['card', 'credit_card.card_number', '4111111111111111', '41111111111111112', 'at most 16 characters'],
  ['card', 'credit_card.card_number', '4111111111111111', '4111-1111-1111', 'must be up to 16 digits'],
  ['card', 'credit_card.expiration_month', '7', '13', 'must be a month from 1 to 12'],
  ['card', 'credit_card.expiration_month', '12', '00', 'must be a month from 1 to 12'],
  ['card', 'credit_card.expiration_year', '31', '2031', 'at most 2 characters'],
  ['card', 'credit_card.expiration_year', '29', '3', 'must be the last two digits of the year'],
  ['card', 'credit_card.holder_name', long(256), long(257), 'at most 256 characters'],
  // cashouts (docs/provider.md, 4.4-4.6, 8)
  ['cashout', 'login', long(32), long(33), 'at most 32 characters'],
  ['cashout', 'pass', long(32), long(33), 'at most 32 characters'],
  ['cashout', 'external_id', long(100), long(101), 'at most 100 characters'],
  ['cashout', 'document_id', '123', undefined, 'is required'],
  ['cashout', 'beneficiary_name', 'Ana', undefined, 'is required'],
  ['cashout', 'account_type', 'S', 'X', 'must be one of C, S'],
  ['cashout', 'notification_url', 'http://m.example.com/n', 'mailto:x@y.z', 'must be an HTTP or HTTPS URL'],
  ['cashout', 'email', 'a@b.co', 'nope', 'must be a valid e-mail address'],
  ['cashout', 'on_hold', true, 'yes', 'must be true or false'],
  ['cashout', 'amount', '1.00', '0', 'must be greater than 0'],
  ['cashout', 'beneficiary_birthdate', '19800101', '19801301', 'must be a date in the format yyyyMMdd'],
  ['cashoutStatus', 'pass', 'p', long(33), 'at most 32 characters'],
  ['cashoutStatus', 'cashout_id', '8405147', 'abc', 'must be an integer'],
  ['cashoutUpdate', 'status', 'PENDING', 'CANCELLED', 'must be one of ON_HOLD, PENDING'],
  ['cashoutUpdate', 'cashout_id', 8405147, undefined, 'is required'],
  // refunds (docs/provider.md)
  ['refund', 'amount', undefined, '1.001', 'at most 2 decimals allowed'],
  ['refund', 'deposit_id', '1', undefined, 'is required'],
  ['refund', 'notification_url', 'https://m.example.com/r', 'http://m.example.com/r', 'must be an HTTPS URL'],
];

describe('request rules (one accepted and one rejected value each)', () => {
  it.each(RULES.map(([name, path, good, bad, rule]) => ({ name, path, good, bad, rule })))(
    '$name $path: $rule',
    ({ name, path, good, bad, rule }) => {
      const [schema, base] = SCHEMAS[name]!;
      const accepted = schema.safeParse(withValue(base, path, good));
      expect(accepted.success ? [] : validationMessages(accepted.error)).toEqual([]);
      const rejected = schema.safeParse(withValue(base, path, bad));
      expect(rejected.success).toBe(false);
      const issues = rejected.success ? [] : formatZodIssues(rejected.error);
      expect(issues.map((i) => i.rule)).toContain(rule);
      expect(issues.some((i) => i.field.startsWith(path.split('.')[0]!))).toBe(true);
    },
  );

  it('prints every problem of a body as field: rule lines', () => {
    const result = depositCreateRequestSchema.safeParse(
      parseProviderJson(
        '{"country":"BR","currency":"BRL","amount":1.005,"payer":{"email":"x"},"language":"fr"}',
      ),
    );
    expect(result.success ? [] : validationMessages(result.error)).toEqual([
      'amount: at most 2 decimals allowed',
      'payer.email: must be a valid e-mail address',
      'language: must be one of es, en, pt, ja',
    ]);
  });

  it('needs credit_card or card_token on the card endpoint', () => {
    const tokenOnly = withValue(withValue(card, 'credit_card', undefined), 'card_token', 'tok_123');
    expect(cardDepositRequestSchema.safeParse(tokenOnly).success).toBe(true);
    const neither = cardDepositRequestSchema.safeParse(withValue(card, 'credit_card', undefined));
    expect(neither.success ? [] : validationMessages(neither.error)).toEqual([
      'credit_card: credit_card or card_token is required',
    ]);
  });

  it('keeps an 18-digit amount exact and gives Minor', () => {
    const parsed = depositCreateRequestSchema.parse(withValue(deposit, 'amount', '123456789012345678.91'));
    expect(parsed.amount).toBe(12345678901234567891n);
  });

  it('either cashout id identifies a cashout, none is an error', () => {
    expect(cashoutStatusRequestSchema.safeParse({ login: 'l', pass: 'p', external_id: 'e' }).success).toBe(
      true,
    );
    expect(
      cashoutCancelRequestSchema.safeParse({ login: 'l', pass: 'p', cashout_id: 1, external_id: 'e' })
        .success,
    ).toBe(true);
    const none = cashoutCancelRequestSchema.safeParse({ login: 'l', pass: 'p' });
    expect(none.success ? [] : validationMessages(none.error)).toEqual([
      'cashout_id: cashout_id or external_id is required',
    ]);
  });
});

// The 2.5 table: per country and method, one good and one bad value per field.
const REPORTED: [country: string, method: string, field: string, good: string, bad: string][] = [
  ['BR', 'SJ', 'bank_beneficiary', 'Ana Silva', 'Ana'],
  ['BR', 'B', 'bank_beneficiary', 'José da Silva', 'Ana S1lva'],
  ['BR', 'SF', 'bank_beneficiary', 'Ana Silva', 'A Silva'],
  ['BR', 'BB', 'bank_account_number', '12345678901-X', '123456789012-X'],
  ['BR', 'BB', 'bank_branch', '1234-5', '12345'],
  ['BR', 'BB', 'bank_branch', '1234', '1234-56'],
  ['BR', 'BZ', 'bank_branch', '1', '1234-5'],
  ['BR', 'BZ', 'bank_account_number', '123456789-0', '123456789-X'],
  ['BR', 'CA', 'bank_account_type', 'C', ''],
  ['BR', 'CA', 'bank_branch', '0001', 'A001'],
  ['BR', 'CA', 'bank_account_number', '12345678901234-1', '123456789012345-1'],
  ['CL', 'IA', 'bank_beneficiary', 'Ana Perez', 'Ana'],
  ['CL', 'SC', 'bank_beneficiary', 'Ana Perez', `Ana ${long(31)}`],
  ['CL', 'TY', 'bank_beneficiary', 'Ana Perez Soto', 'Ana 2'],
  ['PA', 'DI', 'bank_beneficiary', 'Ana Perez', 'AnaPerez'],
  ['PE', 'BC', 'bank_beneficiary', 'Ana Perez', 'Ana P'],
  ['PE', 'IB', 'bank_beneficiary', 'Ana Perez', '1234 5678'],
];
const FULL: Record<string, Record<string, string>> = {
  'BR:BB': { bank_account_number: '1234-5', bank_branch: '1234' },
  'BR:BZ': { bank_account_number: '1234-5', bank_branch: '1234' },
  'BR:CA': { bank_account_number: '1234-5', bank_branch: '1234', bank_account_type: 'C' },
};

describe('checkReportedInfo (2.5)', () => {
  it.each(REPORTED)('%s %s %s: accepts %j, rejects %j', (country, method, field, good, bad) => {
    const base = FULL[`${country}:${method}`] ?? { bank_beneficiary: 'Ana Silva' };
    expect(checkReportedInfo(country, method, { ...base, [field]: good })).toEqual([]);
    const failures = checkReportedInfo(country, method, { ...base, [field]: bad });
    expect(failures.map((f) => f.field)).toEqual([`reported_info.${field}`]);
  });

  it('reports missing fields as missing, and nothing for other methods', () => {
    expect(checkReportedInfo('BR', 'BB', {})).toEqual([
      { field: 'reported_info.bank_account_number', rule: 'is required for BR BB', missing: true },
      { field: 'reported_info.bank_branch', rule: 'is required for BR BB', missing: true },
    ]);
    expect(checkReportedInfo('BR', 'PX', {})).toEqual([]);
    expect(checkReportedInfo('MX', 'SJ', undefined)).toEqual([]);
  });

  it('rejects a malformed value in the deposit schema but lets a missing one through (HOSTED)', () => {
    const bb = withValue(deposit, 'payment_method', 'BB');
    expect(depositCreateRequestSchema.safeParse(bb).success).toBe(true);
    const bad = depositCreateRequestSchema.safeParse(
      withValue(bb, 'reported_info', { bank_branch: '12345' }),
    );
    expect(bad.success ? [] : validationMessages(bad.error)).toEqual([
      'reported_info.bank_branch: must be 1 to 4 digits, optionally a hyphen and one letter or digit',
    ]);
  });
});

describe('response schemas', () => {
  it('parses a ONE_SHOT deposit creation answer with exact amounts', () => {
    const body = parseProviderJson(`{"checkout_type":"ONE_SHOT","redirect_url":"https://pay.example.com/x",
      "deposit_id":3000000001,"user_id":"u1","merchant_invoice_id":"inv-1","payment_info":{"type":"BANK_DEPOSIT",
      "payment_method":"BB","payment_method_name":"Banco","amount":999999999999999999.99,"currency":"BRL",
      "expiration_date":"2026-11-21 22:00:00","created_at":"2026-11-21 10:00:00","metadata":{"reference":"r"}}}`);
    const parsed = depositCreateResponseSchema.parse(body);
    expect(parsed.deposit_id).toBe(3000000001);
    expect(parsed.payment_info?.amount).toBe(99999999999999999999n);
  });

  it('parses a deposit status view, keeping unknown fields', () => {
    const parsed = depositSchema.parse(
      parseProviderJson(`{"user_id":"u1","deposit_id":3000000001,"invoice_id":"inv-1","country":"BR","currency":"BRL",
        "amount":100.50,"usd_amount":null,"status":"CANCELLED","status_reason":"THIRD_PARTY_PAYER","fee_amount":1.25,
        "payer":{"email":"a@b.co"},"new_field":7}`),
    );
    expect(parsed.amount).toBe(10050n);
    expect(parsed.fee_amount).toBe(125n);
    expect((parsed as Record<string, unknown>).new_field).toBe('7');
  });

  it.each([
    [
      'depositSchema status',
      depositSchema,
      '{"user_id":"u","deposit_id":1,"invoice_id":"i","currency":"BRL","status":"PAID"}',
      'status',
    ],
    [
      'card result',
      cardDepositResponseSchema,
      '{"deposit_id":1,"user_id":"u","merchant_invoice_id":"i","payment_info":{"type":"CREDIT_CARD","result":"MAYBE","amount":1,"currency":"BRL"}}',
      'payment_info.result',
    ],
    ['cashout status code', cashoutStatusResponseSchema, '{"cashout_status":9}', 'cashout_status'],
    ['refund amount', refundSchema, '{"deposit_id":1,"status":"PENDING","amount":1.234}', 'amount'],
    ['bank list', banksResponseSchema, '[{"code":1}]', '[0].name'],
    ['cashout id', cashoutCreateResponseSchema, '{"cashout_id":"abc"}', 'cashout_id'],
  ])('rejects a broken %s', (_what, schema, text, field) => {
    const result = (schema as z.ZodType).safeParse(parseProviderJson(text));
    expect(result.success).toBe(false);
    expect(result.success ? [] : formatZodIssues(result.error).map((i) => i.field)).toContain(field);
  });

  it('accepts the cashout id as a string or a number', () => {
    expect(cashoutCreateResponseSchema.parse({ cashout_id: '8405147' }).cashout_id).toBe(8405147);
    expect(cashoutCreateResponseSchema.parse(parseProviderJson('{"cashout_id":8405147}')).cashout_id).toBe(
      8405147,
    );
  });

  it('parses a form-encoded cashout notification', () => {
    const form = Object.fromEntries(
      new URLSearchParams(
        'date=2026-11-21+10%3A00%3A00&bank_reference_id=b1&comments=&external_id=ext-42&cashout_id=8405147&status_reason=&control=27DF487F09E41D0AA669BA79D020990C57B0BB56F1C5F4FF8E5F3904450BA8AE',
      ),
    );
    const parsed = cashoutNotificationSchema.parse(form);
    expect(parsed.cashout_id).toBe(8405147);
    expect(cashoutNotificationSchema.safeParse({ ...form, control: 'xyz' }).success).toBe(false);
  });
});

describe('issue texts', () => {
  it.each([
    ['{"country":"BR","currency":"BRL","amount":"1","payer":"ana"}', 'payer: must be an object'],
    [
      '{"country":"BR","currency":"BRL","amount":"1","payment_types":"ALL"}',
      'payment_types: must be a list of payment types',
    ],
    [
      '{"country":"BR","currency":"BRL","amount":"1","reported_info":[1]}',
      'reported_info: must be an object',
    ],
    ['[1]', 'body: must be an object'],
  ])('%s gives "%s"', (text, line) => {
    const result = depositCreateRequestSchema.safeParse(parseProviderJson(text));
    expect(result.success ? [] : validationMessages(result.error)).toContain(line);
  });
});
