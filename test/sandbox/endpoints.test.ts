import { inflateSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cardBody,
  cashoutBody,
  cashoutCall,
  control,
  get,
  oneShotBody,
  PAYER,
  signed,
  startTestSandbox,
} from './helpers.ts';

let sb: Awaited<ReturnType<typeof startTestSandbox>>;
beforeAll(async () => {
  sb = await startTestSandbox();
});
afterAll(async () => {
  await sb.close();
});

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

describe('POST /v3/deposits (4.1)', () => {
  it('answers ONE_SHOT with payment_info, metadata and a real PNG QR code for PIX', async () => {
    const res = await signed(sb.url, '/v3/deposits', {
      body: '{"country":"BR","currency":"BRL","amount":100.50,"payment_method":"IX","payer":{"document":"12345678909","email":"ana@example.com","first_name":"Ana","last_name":"Silva"}}',
    });
    expect(res.status).toBe(200);
    expect(res.json.checkout_type).toBe('ONE_SHOT');
    expect(res.text).toContain('"amount":100.50');
    const info = res.json.payment_info;
    expect(info).toMatchObject({
      type: 'BANK_TRANSFER',
      payment_method: 'IX',
      payment_method_name: 'PIX',
      currency: 'BRL',
    });
    expect(info.expiration_date).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/);
    expect(info.created_at).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/);
    expect(typeof info.metadata.reference).toBe('string');
    const png = Buffer.from(res.json.secondary_metadata.qr_code, 'base64');
    expect(png.subarray(0, 8).equals(PNG_SIGNATURE)).toBe(true);
    // The IHDR chunk declares a square image; the IDAT data inflates (a real PNG, not a placeholder).
    const width = png.readUInt32BE(16);
    expect(png.readUInt32BE(20)).toBe(width);
    const data: Buffer[] = [];
    for (let at = 8; at < png.length; ) {
      const len = png.readUInt32BE(at);
      if (png.toString('latin1', at + 4, at + 8) === 'IDAT') data.push(png.subarray(at + 8, at + 8 + len));
      at += 12 + len;
    }
    expect(inflateSync(Buffer.concat(data)).length).toBeGreaterThan(width);
    expect(res.json.secondary_metadata.digitable_line).toContain('sandbox');
    expect(res.json.merchant_invoice_id).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(res.json.user_id).toBeTruthy();
  });

  it('gives bank-deposit and voucher metadata keys', async () => {
    const bank = await signed(sb.url, '/v3/deposits', {
      body: oneShotBody({ payment_method: 'SJ', reported_info: { bank_beneficiary: 'Ana Silva' } }),
    });
    expect(bank.json.checkout_type).toBe('ONE_SHOT');
    expect(Object.keys(bank.json.payment_info.metadata)).toEqual(
      expect.arrayContaining([
        'beneficiary_name',
        'agency',
        'account',
        'CNPJ',
        'reference',
        'payer_document',
      ]),
    );
    const voucher = await signed(sb.url, '/v3/deposits', {
      body: oneShotBody({
        payment_method: 'BL',
        payer: { ...PAYER, address: { state: 'SP', zip_code: '01310-100' } },
      }),
    });
    expect(voucher.json.checkout_type).toBe('ONE_SHOT');
    expect(voucher.json.payment_info.metadata.bar_code).toMatch(/^\d{44}$/);
    expect(voucher.json.payment_info.metadata.digitable_line).toBeTruthy();
  });

  it('answers HOSTED with a redirect_url when a required field is missing (rule 2), and only the 2.7 keys', async () => {
    const res = await signed(sb.url, '/v3/deposits', {
      body: { country: 'BR', currency: 'BRL', amount: 10 },
    });
    expect(res.status).toBe(200);
    expect(Object.keys(res.json).sort()).toEqual(
      ['checkout_type', 'deposit_id', 'merchant_invoice_id', 'redirect_url', 'user_id'].sort(),
    );
    expect(res.json.checkout_type).toBe('HOSTED');
    const page = await get(res.json.redirect_url);
    expect(page.status).toBe(200);
    expect(page.text).toContain('Complete your payment');
    const noReported = await signed(sb.url, '/v3/deposits', { body: oneShotBody({ payment_method: 'SJ' }) });
    expect(noReported.json.checkout_type).toBe('HOSTED');
    const hostedOnly = await signed(sb.url, '/v3/deposits', {
      body: oneShotBody({
        country: 'CO',
        currency: 'COP',
        payment_method: 'PC',
        payer: { ...PAYER, document_type: 'CC' },
      }),
    });
    expect(hostedOnly.json.checkout_type).toBe('HOSTED');
  });

  it('the hosted checkout offers the methods of payment_types only', async () => {
    const res = await signed(sb.url, '/v3/deposits', {
      body: { country: 'BR', currency: 'BRL', amount: 10, payment_types: ['VOUCHER'] },
    });
    const page = await get(res.json.redirect_url);
    expect(page.text).toContain('value="BL"');
    expect(page.text).not.toContain('value="IX"');
    const all = await signed(sb.url, '/v3/deposits', {
      body: { country: 'BR', currency: 'BRL', amount: 10, payment_type: 'ALL' },
    });
    expect((await get(all.json.redirect_url)).text).toContain('value="IX"');
  });

  it('returns checkout_token only when requested', async () => {
    const a = await signed(sb.url, '/v3/deposits', { body: oneShotBody({ requested_token: true }) });
    expect(typeof a.json.checkout_token).toBe('string');
    const b = await signed(sb.url, '/v3/deposits', { body: oneShotBody() });
    expect(b.json.checkout_token).toBeUndefined();
  });

  it('rejects unknown methods, a method of another country and a foreign currency', async () => {
    const m = await signed(sb.url, '/v3/deposits', { body: oneShotBody({ payment_method: 'ZZ' }) });
    expect(m.json.details).toEqual(['payment_method: must be a payment method of BR']);
    const c = await signed(sb.url, '/v3/deposits', { body: oneShotBody({ payment_method: 'OX' }) });
    expect(c.status).toBe(400);
    const cur = await signed(sb.url, '/v3/deposits', { body: oneShotBody({ currency: 'MXN' }) });
    expect(cur.json.details).toEqual(['currency: must be BRL or USD for BR']);
  });

  it('marks a crypto deposit and its crypto view', async () => {
    const res = await signed(sb.url, '/v3/deposits', {
      body: oneShotBody({ crypto: { currency: 'USDT', wallet: '0xabc', network: 'ERC20' } }),
    });
    expect(res.status).toBe(200);
    const st = await signed(sb.url, `/v3/deposits/${res.json.deposit_id}`);
    expect(st.json.crypto).toMatchObject({ currency: 'USDT', wallet: '0xabc', network: 'ERC20' });
  });
});

describe('GET /v3/deposits/{id} (4.2)', () => {
  it('answers 200 with the 2.1 fields', async () => {
    const c = await signed(sb.url, '/v3/deposits', {
      body: oneShotBody({ invoice_id: 'status-1', fee_on_payer: true }),
    });
    const res = await signed(sb.url, `/v3/deposits/${c.json.deposit_id}`);
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({
      deposit_id: c.json.deposit_id,
      invoice_id: 'status-1',
      user_id: c.json.user_id,
      country: 'BR',
      currency: 'BRL',
      payment_method: 'IX',
      status: 'PENDING',
      fee_currency: 'BRL',
      payer: { email: PAYER.email, first_name: 'Ana' },
      fee_on_payer: true,
    });
    expect(res.text).toContain('"amount":100.50');
    expect(res.text).toContain('"local_amount":100.50');
    expect(res.json.status_reason).toBeUndefined();
  });

  it('answers 400 for an invalid id and 404 for an unknown one', async () => {
    expect((await signed(sb.url, '/v3/deposits/abc')).status).toBe(400);
    expect((await signed(sb.url, '/v3/deposits/-5')).status).toBe(400);
    expect((await signed(sb.url, '/v3/deposits/3999999999')).status).toBe(404);
  });

  it('shows status_reason only on CANCELLED', async () => {
    const c = await signed(sb.url, '/v3/deposits', { body: oneShotBody() });
    await control(sb.url, `/deposits/${c.json.deposit_id}/pay`, { third_party: true });
    const res = await signed(sb.url, `/v3/deposits/${c.json.deposit_id}`);
    expect(res.json).toMatchObject({ status: 'CANCELLED', status_reason: 'THIRD_PARTY_PAYER' });
  });
});

describe('POST {cc}/v3/deposits (4.3): the test-card table', () => {
  it.each([
    ['VISA', '4000000000000010', 'CARD_DECLINED'],
    ['VISA', '4000000000000028', 'CARD_EXPIRED'],
    ['VISA', '4000000000000036', 'INSUFFICIENT_FUNDS'],
    ['VISA', '4000000000000044', 'CARD_REPORTED_STOLEN'],
    ['VISA', '4000000000000051', 'EXTERNAL_HIGH_RISK'],
    ['MASTERCARD', '5100000000000016', 'CARD_DECLINED'],
    ['MASTERCARD', '5100000000000024', 'CARD_EXPIRED'],
    ['MASTERCARD', '5100000000000032', 'INSUFFICIENT_FUNDS'],
    ['MASTERCARD', '5100000000000040', 'CARD_REPORTED_STOLEN'],
    ['MASTERCARD', '5100000000000057', 'EXTERNAL_HIGH_RISK'],
    ['AMEX', '370000000000010', 'CARD_DECLINED'],
    ['AMEX', '370000000000028', 'CARD_EXPIRED'],
    ['AMEX', '370000000000036', 'INSUFFICIENT_FUNDS'],
    ['AMEX', '370000000000044', 'CARD_REPORTED_STOLEN'],
    ['AMEX', '370000000000051', 'EXTERNAL_HIGH_RISK'],
    ['DINERS', '36000000000016', 'CARD_DECLINED'],
    ['DINERS', '36000000000024', 'CARD_EXPIRED'],
    ['DINERS', '36000000000032', 'INSUFFICIENT_FUNDS'],
    ['DINERS', '36000000000040', 'CARD_REPORTED_STOLEN'],
    ['DINERS', '36000000000057', 'EXTERNAL_HIGH_RISK'],
  ])('%s %s is REJECTED with %s, synchronously and without a notification', async (brand, number, code) => {
    const res = await signed(sb.ccUrl, '/v3/deposits', { body: cardBody(number) });
    expect(res.status).toBe(200);
    expect(res.json.payment_info).toMatchObject({
      type: 'CREDIT_CARD',
      result: 'REJECTED',
      reason_code: code,
    });
    expect(res.json.authentication_url).toBeUndefined();
    const st = await signed(sb.url, `/v3/deposits/${res.json.deposit_id}`);
    expect(st.json.status).toBe('DECLINED');
    expect(st.json.card_detail.brand).toBe(brand);
    expect(st.json.card_detail.masked_card).toBe(
      `${number.slice(0, 6)}${'*'.repeat(number.length - 10)}${number.slice(-4)}`,
    );
    expect(st.text).not.toContain(number);
    expect(sb.control.deps.webhooks.log.some((l) => l.entityId === res.json.deposit_id)).toBe(false);
  });

  it.each([['4000000000000069'], ['5100000000000065'], ['370000000000069'], ['36000000000065']])(
    '%s asks for 3DS: PENDING_AUTHENTICATION with an authentication_url and a notification',
    async (number) => {
      const res = await signed(sb.ccUrl, '/v3/deposits', { body: cardBody(number) });
      expect(res.json.payment_info.result).toBe('PENDING_AUTHENTICATION');
      expect(res.json.authentication_url).toMatch(/\/3ds\//);
      expect((await get(res.json.authentication_url)).status).toBe(200);
      expect(sb.control.deps.webhooks.log.some((l) => l.entityId === res.json.deposit_id)).toBe(true);
    },
  );

  it.each([['4111111111111111'], ['5555555555554444'], ['378282246310005'], ['36227206271667']])(
    'any other valid number (%s) succeeds and the deposit is COMPLETED',
    async (number) => {
      const res = await signed(sb.ccUrl, '/v3/deposits', { body: cardBody(number) });
      expect(res.json.payment_info.result).toBe('SUCCESS');
      expect(res.json.payment_info.reason_code).toBeUndefined();
      expect((await signed(sb.url, `/v3/deposits/${res.json.deposit_id}`)).json.status).toBe('COMPLETED');
    },
  );

  it('rejects a number failing Luhn, and a past expiry', async () => {
    const luhn = await signed(sb.ccUrl, '/v3/deposits', { body: cardBody('4111111111111112') });
    expect(luhn.json.payment_info.reason_code).toBe('INVALID_CARD_NUMBER');
    const body = cardBody();
    (body.credit_card as Record<string, string>).expiration_year = '20';
    const expired = await signed(sb.ccUrl, '/v3/deposits', { body });
    expect(expired.json.payment_info.reason_code).toBe('INVALID_CARD_EXPIRATION');
  });

  it('is not served on the main API port, and the main deposit endpoint is not the card one', async () => {
    const res = await signed(sb.url, '/v3/deposits', { body: cardBody() });
    expect(res.json.checkout_type).toBeDefined();
  });
});

describe('cashouts (docs/provider.md creation, 4.4-4.6)', () => {
  it('creates, finds by either id, holds, releases and cancels', async () => {
    const body = cashoutBody();
    const created = await cashoutCall(sb.url, '/v3/cashout', body);
    expect(created.status).toBe(200);
    expect(typeof created.json.cashout_id).toBe('string');
    const id = Number(created.json.cashout_id);
    const byId = await cashoutCall(sb.url, '/v3/cashout/status', { cashout_id: id });
    expect(byId.json).toMatchObject({ cashout_id: id, external_id: body.external_id, cashout_status: 0 });
    expect(byId.json.bank[0]).toMatchObject({ code: '341', branch: '0001', account: '123456-7' });
    const byExt = await cashoutCall(sb.url, '/v3/cashout/status', { external_id: body.external_id });
    expect(byExt.text).toBe(byId.text);
    const both = await cashoutCall(sb.url, '/v3/cashout/status', { cashout_id: id, external_id: 'other' });
    expect(both.json.code).toBe(509);
    const hold = await cashoutCall(
      sb.url,
      '/v3/cashout/status',
      { cashout_id: id, status: 'ON_HOLD' },
      { method: 'PUT' },
    );
    expect(hold.json).toEqual({ cashout_status: 5, cashout_status_description: 'On hold' });
    const release = await cashoutCall(
      sb.url,
      '/v3/cashout/status',
      { cashout_id: id, status: 'PENDING' },
      { method: 'PUT' },
    );
    expect(release.json.cashout_status).toBe(0);
    const cancel = await cashoutCall(
      sb.url,
      '/v3/cashout/cancel',
      { cashout_id: id, external_id: body.external_id },
      { method: 'DELETE' },
    );
    expect(cancel.json).toEqual({ cashout_status: 2, cashout_status_description: 'Canceled' });
  });

  it('answers 509 (HTTP 412) for unknown cashouts on status, update and cancel', async () => {
    for (const [method, path, body] of [
      ['POST', '/v3/cashout/status', { cashout_id: 1 }],
      ['PUT', '/v3/cashout/status', { cashout_id: 1, status: 'ON_HOLD' }],
      ['DELETE', '/v3/cashout/cancel', { cashout_id: 1, external_id: 'x' }],
    ] as const) {
      const res = await cashoutCall(sb.url, path, body, { method });
      expect(res.status).toBe(412);
      expect(res.json).toEqual({ code: 509, message: 'Cashout not found with this ID' });
    }
  });

  it('refuses a reused external_id (511), bad bank code (303), currency (526), amount (533)', async () => {
    const body = cashoutBody();
    await cashoutCall(sb.url, '/v3/cashout', body);
    expect((await cashoutCall(sb.url, '/v3/cashout', body)).json.code).toBe(511);
    expect((await cashoutCall(sb.url, '/v3/cashout', cashoutBody({ bank_code: '99999' }))).json.code).toBe(
      303,
    );
    expect((await cashoutCall(sb.url, '/v3/cashout', cashoutBody({ currency: 'MXN' }))).json.code).toBe(526);
    expect((await cashoutCall(sb.url, '/v3/cashout', cashoutBody({ amount: 0.5 }))).json.code).toBe(533);
  });

  it('creates ON_HOLD with on_hold true', async () => {
    const created = await cashoutCall(sb.url, '/v3/cashout', cashoutBody({ on_hold: true }));
    const st = await cashoutCall(sb.url, '/v3/cashout/status', {
      cashout_id: Number(created.json.cashout_id),
    });
    expect(st.json.cashout_status).toBe(5);
  });
});

describe('refunds (docs/provider.md creation, 4.7 status)', () => {
  async function completedDeposit(card = false): Promise<number> {
    if (card) return (await signed(sb.ccUrl, '/v3/deposits', { body: cardBody() })).json.deposit_id;
    const c = await signed(sb.url, '/v3/deposits', { body: oneShotBody() });
    await control(sb.url, `/deposits/${c.json.deposit_id}/pay`, {});
    return c.json.deposit_id;
  }
  const bankAccount = {
    beneficiary: 'Ana Silva',
    bank_code: '341',
    branch: '0001',
    account_number: '1234-5',
  };

  it('creates full and partial refunds, answers their status and voucher', async () => {
    const depositId = await completedDeposit();
    const partial = await signed(sb.url, '/v3/refunds', {
      body: { deposit_id: depositId, amount: 40.25, bank_account: bankAccount },
    });
    expect(partial.status).toBe(200);
    expect(typeof partial.json.refund_id).toBe('number');
    const st = await signed(sb.url, `/v3/refunds/${partial.json.refund_id}`);
    expect(st.json).toMatchObject({ deposit_id: depositId, status: 'PENDING' });
    expect(st.text).toContain('"amount":40.25');
    expect(st.json.voucher).toBeUndefined();
    const v = await signed(sb.url, `/v3/refunds/${partial.json.refund_id}?voucher=true`);
    expect(Buffer.from(v.json.voucher, 'base64').toString('latin1')).toMatch(/^%PDF-1\.4[\s\S]*%%EOF\n$/);
    const rest = await signed(sb.url, '/v3/refunds', {
      body: { deposit_id: depositId, bank_account: bankAccount },
    });
    expect(rest.status).toBe(200);
    const st2 = await signed(sb.url, `/v3/refunds/${rest.json.refund_id}`);
    expect(st2.text).toContain('"amount":60.25');
    const dep = await signed(sb.url, `/v3/deposits/${depositId}`);
    expect(dep.json.refunded).toBe(true);
  });

  it('answers 802 for an amount above what is left, 208 (404) for unknown refunds and deposits', async () => {
    const depositId = await completedDeposit();
    const over = await signed(sb.url, '/v3/refunds', {
      body: { deposit_id: depositId, amount: 100.51, bank_account: bankAccount },
    });
    expect(over.status).toBe(400);
    expect(over.json).toEqual({
      code: 802,
      description: 'Amount to refund not valid',
      type: 'INVALID_AMOUNT_TO_REFUND',
    });
    const unknown = await signed(sb.url, '/v3/refunds/999');
    expect(unknown.status).toBe(404);
    expect(unknown.json).toMatchObject({ code: 208, type: 'RESOURCE_NOT_FOUND' });
    const noDeposit = await signed(sb.url, '/v3/refunds', { body: { deposit_id: 42 } });
    expect(noDeposit.json.code).toBe(208);
  });

  it('card refunds need no bank account and return refund_info', async () => {
    const depositId = await completedDeposit(true);
    const res = await signed(sb.url, '/v3/refunds', { body: { deposit_id: depositId } });
    expect(res.status).toBe(200);
    expect(res.json.refund_info).toMatchObject({ type: 'CREDIT_CARD', currency: 'BRL' });
  });

  it('refuses a deposit that is not COMPLETED', async () => {
    const c = await signed(sb.url, '/v3/deposits', { body: oneShotBody() });
    const res = await signed(sb.url, '/v3/refunds', {
      body: { deposit_id: c.json.deposit_id, bank_account: bankAccount },
    });
    expect(res.status).toBe(400);
  });
});

describe('concurrency', () => {
  it('two concurrent creations with one invoice_id create one deposit', async () => {
    const body = oneShotBody({ invoice_id: 'race-1' });
    const [a, b] = await Promise.all([
      signed(sb.url, '/v3/deposits', { body }),
      signed(sb.url, '/v3/deposits', { body }),
    ]);
    expect([a.status, b.status].sort()).toEqual([200, 400]);
    const all = sb.control.exportEntities().deposits.filter((d) => d.invoiceId === 'race-1');
    expect(all).toHaveLength(1);
  });
});
