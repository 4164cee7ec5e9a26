import { describe, expect, it } from 'vitest';
import { isSecretKey, SECRET_KEYS, withoutSecrets } from './secrets.ts';

describe('the one list of secret keys', () => {
  it('knows every listed key in any case or separator', () => {
    for (const key of SECRET_KEYS) {
      expect(isSecretKey(key), key).toBe(true);
      expect(isSecretKey(key.toUpperCase()), key).toBe(true);
    }
    expect(isSecretKey('Card-Number')).toBe(true);
    expect(isSecretKey('checkoutToken')).toBe(true);
    expect(isSecretKey('invoice_id')).toBe(false);
    expect(isSecretKey('amount')).toBe(false);
  });

  it('drops secrets at any depth and writes amounts as decimal text', () => {
    const copy = withoutSecrets({
      invoice_id: 'inv-1',
      amount: 12_345n,
      credit_card: { card_number: '4111111111111111', cvv: '123' },
      payer: { document: '123', nested: [{ Authorization: 'D24 abc', keep: 1 }] },
      Password: 'x',
    });
    expect(copy).toEqual({
      invoice_id: 'inv-1',
      amount: '123.45',
      payer: { document: '123', nested: [{ keep: 1 }] },
    });
  });
});
