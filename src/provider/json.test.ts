import { describe, expect, it } from 'vitest';
import { jsonNumber, parseProviderJson, stringifyProviderJson } from './json.ts';

describe('parseProviderJson', () => {
  it('keeps every number as its decimal text', () => {
    expect(
      parseProviderJson('{"amount":123456789012345678.99,"ids":[1,2e3,-0.5],"t":true,"n":null}'),
    ).toEqual({
      amount: '123456789012345678.99',
      ids: ['1', '2e3', '-0.5'],
      t: true,
      n: null,
    });
  });

  it('rejects malformed text with a field and rule', () => {
    expect(() => parseProviderJson('{"a":')).toThrowError(/^body: must be valid JSON/);
  });
});

describe('stringifyProviderJson', () => {
  it('writes bigint minor units as two-decimal numbers', () => {
    expect(stringifyProviderJson({ amount: 10050n, zero: 0n, max: 99999999999999999999n })).toBe(
      '{"amount":100.50,"zero":0.00,"max":999999999999999999.99}',
    );
  });

  it('writes numbers, raw number text and leaves out undefined', () => {
    expect(
      stringifyProviderJson({
        cashout_id: 8405147,
        big: jsonNumber('12345678901234567890'),
        gone: undefined,
        s: 'x',
      }),
    ).toBe('{"cashout_id":8405147,"big":12345678901234567890,"s":"x"}');
  });

  it('round-trips a max amount through parse and stringify text-exactly', () => {
    const text = '{"amount":999999999999999999.99}';
    const parsed = parseProviderJson(text) as { amount: string };
    expect(parsed.amount).toBe('999999999999999999.99');
    expect(stringifyProviderJson({ amount: jsonNumber(parsed.amount) })).toBe(text);
  });

  it('refuses non-number text as a raw number', () => {
    expect(() => jsonNumber('1e')).toThrowError(/not a JSON number/);
  });
});
