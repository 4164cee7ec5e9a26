import { describe, expect, it } from 'vitest';
import { loadCatalogue, luhnValid } from './catalogue.ts';
import { convert, feeOf } from './deposits.ts';
import { Rng } from './rng.ts';
import { mapNotificationUrl } from './webhooks.ts';

const catalogue = loadCatalogue();

describe('catalogue', () => {
  it('names every payment method code of the spec', () => {
    for (const code of ['SJ', 'B', 'SF', 'BB', 'BZ', 'CA', 'IA', 'SC', 'TY', 'DI', 'BC', 'IB']) {
      expect(catalogue.method(code), code).toBeDefined();
    }
  });

  it('has a Luhn-valid test card for each rejection result and 3DS, for four brands', () => {
    const brands = new Set(catalogue.testCards.map((c) => c.brand));
    expect(brands.size).toBe(4);
    for (const brand of brands) {
      const cards = catalogue.testCards.filter((c) => c.brand === brand);
      expect(cards.map((c) => c.reasonCode ?? c.result).sort()).toEqual([
        'CARD_DECLINED',
        'CARD_EXPIRED',
        'CARD_REPORTED_STOLEN',
        'EXTERNAL_HIGH_RISK',
        'INSUFFICIENT_FUNDS',
        'PENDING_AUTHENTICATION',
      ]);
      for (const c of cards) {
        expect(luhnValid(c.number), c.number).toBe(true);
        expect(catalogue.brandOf(c.number)?.brand).toBe(brand);
        expect(c.number.length).toBeLessThanOrEqual(16);
      }
    }
  });

  it('every method country exists with banks, and every country currency has a rate', () => {
    for (const m of catalogue.paymentMethods)
      for (const c of m.countries) expect(catalogue.countries[c], c).toBeDefined();
    for (const [code, c] of Object.entries(catalogue.countries)) {
      expect(catalogue.currencies[c.currency], code).toBeDefined();
      expect(catalogue.banks[code]?.length, code).toBeGreaterThan(0);
    }
  });
});

describe('money helpers', () => {
  it('rounds fees and conversions half up on cents', () => {
    expect(feeOf(10050n, 150)).toBe(151n); // 1.5075 -> 1.51
    expect(feeOf(10000n, 250)).toBe(250n);
    expect(feeOf(1n, 150)).toBe(0n);
    expect(convert(10050n, '0.19')).toBe(1910n); // 19.095 -> 19.10
    expect(convert(12345678901234567899n, '1')).toBe(12345678901234567899n);
  });
});

describe('Rng', () => {
  it('repeats the same stream for the same seed and forks independent streams', () => {
    const a = new Rng(5);
    const b = new Rng(5);
    expect([a.next(), a.hex(8), a.int(1, 6)]).toEqual([b.next(), b.hex(8), b.int(1, 6)]);
    expect(new Rng(5).fork('x').next()).not.toBe(new Rng(5).fork('y').next());
    const counts = { a: 0, b: 0 };
    const r = new Rng(1);
    for (let i = 0; i < 1000; i++) counts[r.weighted({ a: 3, b: 1 })]++;
    expect(counts.a).toBeGreaterThan(650);
    expect(counts.a).toBeLessThan(850);
  });
});

describe('mapNotificationUrl', () => {
  it('keeps path and query on the local base', () => {
    expect(mapNotificationUrl('https://shop.example/hooks/d?x=1', 'http://127.0.0.1:8080/')).toBe(
      'http://127.0.0.1:8080/hooks/d?x=1',
    );
    expect(mapNotificationUrl('https://shop.example/h', null)).toBe('https://shop.example/h');
  });
});
