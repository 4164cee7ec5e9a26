import { describe, expect, it } from 'vitest';
import {
  cashoutControl,
  depositAuthorization,
  formatXDate,
  isXDateInWindow,
  parseXDate,
  payloadSignature,
  verifyCashoutControl,
  verifyDepositAuthorization,
  verifyPayloadSignature,
} from './signing.ts';

// Test vectors of docs/provider.md (computed with openssl dgst -sha256 -hmac KEY).
const X_DATE = '2020-06-21T12:33:20Z';
const DEPOSIT_BODY = '{"invoice_id":"inv-1","amount":100.5,"country":"BR","currency":"BRL"}';
const CASHOUT_BODY = '{"login":"cashLogin","pass":"cashPass","cashout_id":8405147}';

describe('provider signature vectors', () => {
  it('signs a deposit POST', () => {
    expect(
      depositAuthorization({
        xDate: X_DATE,
        xLogin: 'merchantLogin',
        body: DEPOSIT_BODY,
        secret: 'depositSecret',
      }),
    ).toBe('D24 523420dc046d47b3dc9b9e2012524d18322e13eca4c7023227b476893b935714');
  });

  it('signs a GET with an empty body', () => {
    expect(depositAuthorization({ xDate: X_DATE, xLogin: 'merchantLogin', secret: 'depositSecret' })).toBe(
      'D24 82a061f6370df70029dc310360f090dbb09645aa54d20d6d6b1ad6d36e620d83',
    );
  });

  it('signs a cashout payload', () => {
    expect(payloadSignature(CASHOUT_BODY, 'cashoutSecret')).toBe(
      'c219e4e3db2bd8e86e376029c86ef67d2090a39a853fca0e319e1e34dda3f919',
    );
    expect(payloadSignature(Buffer.from(CASHOUT_BODY), 'cashoutSecret')).toBe(
      'c219e4e3db2bd8e86e376029c86ef67d2090a39a853fca0e319e1e34dda3f919',
    );
  });

  it('computes the cashout notification control in upper case', () => {
    expect(cashoutControl('ext-42', 'cashoutSecret')).toBe(
      '27DF487F09E41D0AA669BA79D020990C57B0BB56F1C5F4FF8E5F3904450BA8AE',
    );
  });
});

describe('verification', () => {
  const base = { xDate: X_DATE, xLogin: 'merchantLogin', body: DEPOSIT_BODY, secret: 'depositSecret' };
  const good = 'D24 523420dc046d47b3dc9b9e2012524d18322e13eca4c7023227b476893b935714';

  it.each<[string, string | undefined, boolean, { body?: string; secret?: string }?]>([
    ['the right header', good, true],
    ['a changed body', good, false, { body: DEPOSIT_BODY.replace('100.5', '100.6') }],
    ['another key', good, false, { secret: 'other' }],
    ['a truncated header', good.slice(0, -2), false],
    ['no header', undefined, false],
  ])('deposit Authorization: %s', (_what, authorization, ok, change = {}) => {
    expect(verifyDepositAuthorization({ ...base, ...change, authorization })).toBe(ok);
  });

  it('checks Payload-Signature', () => {
    const sig = payloadSignature(CASHOUT_BODY, 'cashoutSecret');
    expect(verifyPayloadSignature(CASHOUT_BODY, 'cashoutSecret', sig)).toBe(true);
    expect(verifyPayloadSignature(CASHOUT_BODY, 'cashoutSecret', sig.toUpperCase())).toBe(true);
    expect(verifyPayloadSignature(`${CASHOUT_BODY} `, 'cashoutSecret', sig)).toBe(false);
    expect(verifyPayloadSignature(CASHOUT_BODY, 'depositSecret', sig)).toBe(false);
    expect(verifyPayloadSignature(CASHOUT_BODY, 'cashoutSecret', undefined)).toBe(false);
  });

  it('checks control', () => {
    const control = '27DF487F09E41D0AA669BA79D020990C57B0BB56F1C5F4FF8E5F3904450BA8AE';
    expect(verifyCashoutControl('ext-42', 'cashoutSecret', control)).toBe(true);
    expect(verifyCashoutControl('ext-43', 'cashoutSecret', control)).toBe(false);
    expect(verifyCashoutControl('ext-42', 'cashoutSecret', '')).toBe(false);
  });
});

describe('X-Date', () => {
  it('formats UTC without milliseconds', () => {
    expect(formatXDate(new Date(Date.UTC(2020, 5, 21, 12, 33, 20, 987)))).toBe(X_DATE);
  });

  it.each([
    [X_DATE, true],
    ['2020-06-21T12:33:20.000Z', false],
    ['2020-06-21 12:33:20', false],
    ['2020-02-30T12:33:20Z', false],
  ])('parses %s: %s', (text, ok) => {
    expect(parseXDate(text) !== null).toBe(ok);
  });

  it('checks the window', () => {
    const now = new Date(Date.UTC(2020, 5, 21, 12, 33, 20));
    expect(isXDateInWindow('2020-06-21T12:37:20Z', now, 5 * 60_000)).toBe(true);
    expect(isXDateInWindow('2020-06-21T12:39:20Z', now, 5 * 60_000)).toBe(false);
    expect(isXDateInWindow('2020-06-21T12:27:20Z', now, 5 * 60_000)).toBe(false);
  });
});
