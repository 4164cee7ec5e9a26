import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cardBody,
  cashoutCall,
  control,
  long,
  oneShotBody,
  PAYER,
  raw,
  signed,
  startTestSandbox,
  toJson,
  withPath,
} from './helpers.ts';

let sb: Awaited<ReturnType<typeof startTestSandbox>>;
beforeAll(async () => {
  sb = await startTestSandbox();
});
afterAll(async () => {
  await sb.close();
});

const httpsOf = (n: number) => `https://x.example/${long(n - 'https://x.example/'.length)}`;

let invoice = 0;
const fresh = (b: Record<string, unknown>) => ({ ...b, invoice_id: `val-${++invoice}` });

// [field, bad value, good value, base body]
type Row = [string, unknown, unknown, Record<string, unknown>?];

const BR_SJ = oneShotBody({ payment_method: 'SJ', reported_info: { bank_beneficiary: 'Ana Silva' } });
const BR_BB = oneShotBody({
  payment_method: 'BB',
  reported_info: { bank_account_number: '12345-6', bank_branch: '1234' },
});
const BR_BZ = oneShotBody({
  payment_method: 'BZ',
  reported_info: { bank_account_number: '12345-6', bank_branch: '1234' },
});
const BR_CA = oneShotBody({
  payment_method: 'CA',
  reported_info: { bank_account_type: 'C', bank_account_number: '12345-6', bank_branch: '1234' },
});
const other = (country: string, currency: string, method: string, documentType: string) =>
  oneShotBody({
    country,
    currency,
    payment_method: method,
    payer: { ...PAYER, document_type: documentType },
    reported_info: { bank_beneficiary: 'Ana Silva' },
  });

const DEPOSIT_RULES: Row[] = [
  ['amount', 100.505, 100.55],
  ['amount', raw('1234567890123456789.00'), raw('123456789012345678.99')],
  ['amount', -5, 5],
  ['invoice_id', 'bad id!', 'good_id-1'],
  ['invoice_id', long(129), long(128, 'b')],
  ['payer.id', 'bad-id', 'goodid1'],
  ['payer.id', long(129), long(128)],
  ['payer.document', long(31, '1'), long(30, '1')],
  ['payer.document_type', 'DNI', 'CNPJ'],
  ['payer.email', 'ana@', 'ana@example.org'],
  ['payer.email', `${long(250)}@x.com`, `${long(240)}@x.com`],
  ['payer.first_name', long(129), long(128)],
  ['payer.last_name', long(129), long(128)],
  ['payer.phone', 'call me', '+55 11 91234-5678'],
  ['payer.phone', `+${long(32, '1')}`, '+5511912345678'],
  ['payer.birth_date', '19901332', '19900131'],
  ['payer.registration_date', '2020-01-01', '20200101'],
  ['payer.address.state', 'SPXX', 'SP'],
  ['payer.address.state', 'ZZ', 'RJ'],
  ['payer.address.zip_code', long(17, '1'), '01310-100'],
  ['payer.address.zip_code', '1234', '01310100'],
  ['payer.address.street', long(256), long(255)],
  ['payer.address.city', long(129), long(128)],
  ['description', long(101), long(100)],
  ['device_id', long(101), long(100)],
  ['language', 'fr', 'pt'],
  ['back_url', 'http://x.example/back', 'https://x.example/back'],
  ['success_url', httpsOf(2049), httpsOf(2048)],
  ['error_url', 'not a url', 'https://x.example/error'],
  ['notification_url', 'http://x.example/hook', 'https://x.example/hook'],
  ['logo', 'ftp://x.example/logo.png', 'https://x.example/logo.png'],
  ['client_ip', '999.1.1.1', '2001:db8::1'],
  ['expiration', 123456, 30],
  ['expiration', 61, 60],
  ['bonus_amount', 1.234, 1.23],
  ['strikethrough_price', 1.234, 1.5],
  ['bonus_relative', 'yes', true],
  ['test', 'true', true],
  ['fee_on_payer', 1, false],
  ['mobile', 'no', false],
  ['early_release', 'x', true],
  ['requested_token', 0, true],
  ['allow_installments', 'y', true],
  ['surcharge_on_payer', 'n', false],
  ['request_payer_data_on_validation_failure', 'x', true],
  ['sub_merchant_id', 'abc', 12],
  ['payment_type', 'bank deposit', 'BANK_DEPOSIT'],
  [
    'crypto',
    { currency: 'BTC', wallet: 'w', network: 'TRC20' },
    { currency: 'USDC', wallet: 'w', network: 'TRC20' },
  ],
  [
    'crypto',
    { currency: 'USDT', wallet: 'w', network: 'BTC' },
    { currency: 'USDT', wallet: 'w', network: 'Polygon' },
  ],
  [
    'crypto',
    { currency: 'USDT', wallet: long(129), network: 'RSK' },
    { currency: 'USDT', wallet: long(128), network: 'RSK' },
  ],
  ['reported_info.bank_account_number', long(46, '1'), long(45, '1')],
  ['reported_info.bank_branch', long(46, '1'), long(45, '1')],
  ['reported_info.bank_beneficiary', long(256), long(255)],
  // The reported_info table of 2.5, one row per (country, method, field).
  ['reported_info.bank_beneficiary', 'Ana', 'Ana Silva', BR_SJ],
  ['reported_info.bank_beneficiary', 'Ana S1lva', 'Ana Maria Silva', oneShotBody({ payment_method: 'B' })],
  ['reported_info.bank_beneficiary', 'A Silva', 'Ana Silva', oneShotBody({ payment_method: 'SF' })],
  ['reported_info.bank_account_number', '123456789012-1', '12345678901-X', BR_BB],
  ['reported_info.bank_branch', '12345', '1234-5', BR_BB],
  ['reported_info.bank_branch', '1234-5', '1234', BR_BZ],
  ['reported_info.bank_account_number', '1234567890-1', '123456789-1', BR_BZ],
  ['reported_info.bank_branch', '12a', '1', BR_CA],
  ['reported_info.bank_account_number', '123456789012345-1', '12345678901234-1', BR_CA],
  ['reported_info.bank_beneficiary', 'Ana', 'Ana Silva', other('CL', 'CLP', 'IA', 'RUT')],
  ['reported_info.bank_beneficiary', 'Ana', 'Ana Silva', other('CL', 'CLP', 'SC', 'RUT')],
  ['reported_info.bank_beneficiary', 'Ana', 'Ana Silva', other('CL', 'CLP', 'TY', 'RUT')],
  ['reported_info.bank_beneficiary', 'Ana', 'Ana Silva', other('PA', 'USD', 'DI', 'CIP')],
  ['reported_info.bank_beneficiary', 'Ana', 'Ana Silva', other('PE', 'PEN', 'BC', 'DNI')],
  ['reported_info.bank_beneficiary', 'Ana', 'Ana Silva', other('PE', 'PEN', 'IB', 'DNI')],
];

describe('deposit creation field rules (2.3-2.6, 8): rejected and accepted', () => {
  it.each(DEPOSIT_RULES.map((r, i) => [i, ...r] as const))(
    '#%i %s: %j is rejected naming the field, %j is accepted',
    async (_i, field, bad, good, base) => {
      const body = base ?? oneShotBody();
      const rejected = await signed(sb.url, '/v3/deposits', {
        body: toJson(withPath(fresh(body), field, bad)),
      });
      expect(rejected.status).toBe(400);
      expect(rejected.json.description).toBeTruthy();
      const prefix = field.startsWith('crypto') ? 'crypto.' : `${field}: `;
      expect(rejected.json.details.some((d: string) => d.startsWith(prefix))).toBe(true);
      const accepted = await signed(sb.url, '/v3/deposits', {
        body: toJson(withPath(fresh(body), field, good)),
      });
      expect(accepted.status, accepted.text).toBe(200);
    },
  );

  it('names every failing field and rule in one answer', async () => {
    const body = oneShotBody({ language: 'fr', description: long(101), payer: { ...PAYER, email: 'x' } });
    const res = await signed(sb.url, '/v3/deposits', { body });
    expect(res.status).toBe(400);
    expect(res.json.details).toEqual(
      expect.arrayContaining([
        'payer.email: must be a valid e-mail address',
        'description: at most 100 characters',
        expect.stringMatching(/^language: must be one of es, en, pt, ja$/),
      ]),
    );
  });

  it('a missing reported_info field the method needs gives HOSTED, not an error (rule 2)', async () => {
    const res = await signed(sb.url, '/v3/deposits', {
      body: fresh(withPath(BR_CA, 'reported_info.bank_account_type', undefined)),
    });
    expect(res.status).toBe(200);
    expect(res.json.checkout_type).toBe('HOSTED');
    for (const field of ['payer.email', 'payer.document', 'payer.first_name', 'payer.last_name']) {
      const r = await signed(sb.url, '/v3/deposits', {
        body: fresh(withPath(oneShotBody(), field, undefined)),
      });
      expect(r.json.checkout_type).toBe('HOSTED');
    }
  });
});

describe('rule 4.1.6: request_payer_data_on_validation_failure', () => {
  it('ignores an invalid value the method does not need and answers ONE_SHOT', async () => {
    const body = fresh(
      oneShotBody({ request_payer_data_on_validation_failure: true, payer: { ...PAYER, phone: 'call me' } }),
    );
    const res = await signed(sb.url, '/v3/deposits', { body });
    expect(res.json.checkout_type).toBe('ONE_SHOT');
    const st = await signed(sb.url, `/v3/deposits/${res.json.deposit_id}`);
    expect(st.json.payer.phone).toBeUndefined();
  });

  it('sends the customer to the hosted page when the method needs the invalid value', async () => {
    const body = fresh(
      oneShotBody({
        payment_method: 'BL',
        request_payer_data_on_validation_failure: true,
        payer: { ...PAYER, address: { state: 'SP', zip_code: '1234' } },
      }),
    );
    const res = await signed(sb.url, '/v3/deposits', { body });
    expect(res.status).toBe(200);
    expect(res.json.checkout_type).toBe('HOSTED');
    const oxxo = await signed(sb.url, '/v3/deposits', {
      body: fresh({
        country: 'MX',
        currency: 'MXN',
        amount: 10,
        payment_method: 'OX',
        request_payer_data_on_validation_failure: true,
        payer: { ...PAYER, document_type: 'CURP', phone: 'call me' },
      }),
    });
    expect(oxxo.json.checkout_type).toBe('HOSTED');
  });

  it('declines the invalid value when false or absent', async () => {
    for (const flag of [false, undefined]) {
      const body = fresh(
        oneShotBody({
          request_payer_data_on_validation_failure: flag,
          payer: { ...PAYER, phone: 'call me' },
        }),
      );
      const res = await signed(sb.url, '/v3/deposits', { body });
      expect(res.status).toBe(400);
      expect(res.json.details).toContain('payer.phone: must be a valid phone number');
    }
  });

  it('still declines other invalid fields', async () => {
    const body = fresh(
      oneShotBody({
        request_payer_data_on_validation_failure: true,
        payer: { ...PAYER, email: 'x', phone: 'no' },
      }),
    );
    const res = await signed(sb.url, '/v3/deposits', { body });
    expect(res.status).toBe(400);
    expect(res.json.details).toEqual(['payer.email: must be a valid e-mail address']);
  });
});

const CARD_RULES: Row[] = [
  ['credit_card.cvv', '12', '1234'],
  ['credit_card.cvv', '12a', '999'],
  ['credit_card.card_number', '12345678901234567', '4111111111111111'],
  ['credit_card.expiration_month', '13', '1'],
  ['credit_card.expiration_month', '00', '09'],
  ['credit_card.expiration_year', '2030', '39'],
  ['credit_card.holder_name', long(257), long(256)],
  ['installments', 13, 12],
  ['installments', 0, 1],
  ['card_token', long(51), undefined],
  ['client_ip', undefined, '198.51.100.1'],
  ['client_ip', 'localhost', '::1'],
  ['country', 'XX', 'BR'],
  ['country', 'BRA', 'BR'],
  ['currency', 'usd', 'USD'],
  ['amount', 1.001, 1.01],
  ['payer.email', undefined, 'a@b.co'],
  ['payer.document', undefined, '123'],
  ['payer.first_name', undefined, 'Ana'],
  ['payer.last_name', undefined, 'Silva'],
  ['description', long(101), long(100)],
  ['device_id', long(101), long(100)],
  ['invoice_id', 'no spaces allowed', 'ok_1'],
  ['fee_on_payer', 'yes', true],
  ['sub_merchant_id', -1, 3],
  [
    'credit_card',
    undefined,
    {
      card_number: '4111111111111111',
      cvv: '123',
      expiration_month: '1',
      expiration_year: '39',
      holder_name: 'A',
    },
  ],
];

describe('card deposit field rules (2.8, 8): rejected and accepted', () => {
  it.each(CARD_RULES.map((r, i) => [i, ...r] as const))(
    '#%i %s: %j is rejected naming the field, %j is accepted',
    async (_i, field, bad, good) => {
      const rejected = await signed(sb.ccUrl, '/v3/deposits', {
        body: toJson(withPath(fresh(cardBody()), field, bad)),
      });
      expect(rejected.status).toBe(400);
      expect(rejected.json.code).toBe(300);
      expect(
        rejected.json.details.some((d: string) => d.startsWith(`${field}: `) || d.startsWith(`${field}.`)),
      ).toBe(true);
      const accepted = await signed(sb.ccUrl, '/v3/deposits', {
        body: toJson(withPath(fresh(cardBody()), field, good)),
      });
      expect(accepted.status, accepted.text).toBe(200);
    },
  );

  it('accepts a card token without card data', async () => {
    const body = fresh(withPath(cardBody(), 'credit_card', undefined));
    const res = await signed(sb.ccUrl, '/v3/deposits', { body: { ...body, card_token: 'tok_abc' } });
    expect(res.json.payment_info.result).toBe('SUCCESS');
  });
});

const CASHOUT_RULES: Row[] = [
  ['external_id', long(101), long(100)],
  ['external_id', undefined, 'present-1'],
  ['country', 'XX', 'BR'],
  ['country', undefined, 'BR'],
  ['currency', 'brl', 'BRL'],
  ['amount', 1.001, 1.01],
  ['amount', undefined, 2],
  ['document_id', long(31, '1'), long(30, '1')],
  ['document_id', undefined, '1'],
  ['document_type', 'DNI', 'CPF'],
  ['beneficiary_name', long(256), long(255)],
  ['beneficiary_name', undefined, 'Ana'],
  ['beneficiary_lastname', long(256), long(255)],
  ['email', 'ana@', 'ana@example.com'],
  ['phone', 'call me', '+55 11 91234-5678'],
  ['bank_account', long(46, '1'), long(45, '1')],
  ['bank_branch', long(46, '1'), long(45, '1')],
  ['account_type', 'X', 'S'],
  ['address', long(256), long(255)],
  ['city', long(129), long(128)],
  ['postal_code', long(17, '1'), long(16, '1')],
  ['beneficiary_birthdate', '1990-01-01', '19900101'],
  ['comments', long(256), long(255)],
  ['on_hold', 'yes', true],
  ['type', long(33), 'BANK'],
  ['notification_url', 'ftp://x.example/h', 'http://x.example/h'],
  ['notification_url', undefined, 'https://x.example/h'],
];

describe('cashout creation field rules (docs/provider.md): rejected with 300, accepted', () => {
  let n = 0;
  const base = () => ({
    external_id: `cv-${++n}`,
    country: 'BR',
    currency: 'BRL',
    amount: 25,
    document_id: '12345678909',
    beneficiary_name: 'Ana',
    notification_url: 'https://x.example/h',
  });
  it.each(CASHOUT_RULES.map((r, i) => [i, ...r] as const))(
    '#%i %s: %j is rejected naming the field, %j is accepted',
    async (_i, field, bad, good) => {
      const rejected = await cashoutCall(sb.url, '/v3/cashout', withPath(base(), field, bad));
      expect(rejected.status).toBe(412);
      expect(rejected.json.code).toBe(300);
      expect(rejected.json.details.some((d: string) => d.startsWith(`${field}: `))).toBe(true);
      const accepted = await cashoutCall(sb.url, '/v3/cashout', withPath(base(), field, good));
      expect(accepted.status, accepted.text).toBe(200);
    },
  );

  it('checks the ids and status of status, update and cancel calls', async () => {
    const created = await cashoutCall(sb.url, '/v3/cashout', base());
    const id = Number(created.json.cashout_id);
    const cases = [
      ['POST', '/v3/cashout/status', {}, 'cashout_id'],
      ['POST', '/v3/cashout/status', { cashout_id: 'abc' }, 'cashout_id'],
      ['POST', '/v3/cashout/status', { external_id: long(101) }, 'external_id'],
      ['PUT', '/v3/cashout/status', { cashout_id: id }, 'status'],
      ['PUT', '/v3/cashout/status', { cashout_id: id, status: 'DELIVERED' }, 'status'],
      ['PUT', '/v3/cashout/status', { status: 'ON_HOLD' }, 'cashout_id'],
      ['DELETE', '/v3/cashout/cancel', {}, 'cashout_id'],
    ] as const;
    for (const [method, path, body, field] of cases) {
      const res = await cashoutCall(sb.url, path, body, { method });
      expect(res.status, `${method} ${path} ${JSON.stringify(body)}`).toBe(412);
      expect(res.json.code).toBe(300);
      expect(res.json.details.some((d: string) => d.startsWith(`${field}: `))).toBe(true);
    }
    expect((await cashoutCall(sb.url, '/v3/cashout/status', { cashout_id: id })).status).toBe(200);
  });
});

describe('refund creation field rules: rejected naming the field, accepted', () => {
  const bank = { beneficiary: 'Ana Silva', bank_code: '341', branch: '1', account_number: '1' };
  const REFUND_RULES: Row[] = [
    ['amount', 1.001, 1.01],
    ['amount', 0, 1],
    ['invoice_id', 'bad id', undefined],
    ['comments', long(256), long(255)],
    ['notification_url', 'http://x.example/r', 'https://x.example/r'],
    ['bank_account.beneficiary', long(256), 'Ana Silva'],
    ['bank_account.account_number', long(46, '1'), long(45, '1')],
  ];
  it.each(REFUND_RULES.map((r, i) => [i, ...r] as const))(
    '#%i %s: %j rejected, %j accepted',
    async (_i, field, bad, good) => {
      const d = await signed(sb.url, '/v3/deposits', { body: fresh(oneShotBody()) });
      await control(sb.url, `/deposits/${d.json.deposit_id}/pay`, {});
      const body = { deposit_id: d.json.deposit_id, amount: 10, bank_account: bank };
      const rejected = await signed(sb.url, '/v3/refunds', { body: toJson(withPath(body, field, bad)) });
      expect(rejected.status).toBe(400);
      expect(rejected.json.details.some((x: string) => x.startsWith(`${field}: `))).toBe(true);
      const accepted = await signed(sb.url, '/v3/refunds', { body: toJson(withPath(body, field, good)) });
      expect(accepted.status, accepted.text).toBe(200);
    },
  );

  it('rejects a missing or non-integer deposit_id', async () => {
    for (const body of [{}, { deposit_id: 'abc' }, { deposit_id: 1.5 }]) {
      const res = await signed(sb.url, '/v3/refunds', { body });
      expect(res.status).toBe(400);
      expect(res.json.details.some((x: string) => x.startsWith('deposit_id: '))).toBe(true);
    }
  });
});
