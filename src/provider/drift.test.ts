import { describe, expect, it } from 'vitest';
import { unknownFields } from './drift.ts';
import { parseProviderJson } from './json.ts';
import { cashoutStatusResponseSchema, depositSchema } from './schemas.ts';

describe('unknownFields', () => {
  it('finds extra fields at every depth, once per list', () => {
    const body = parseProviderJson(
      `{"cashout_status":1,"new_top":1,"bank":[{"code":"1","swift":"X"},{"code":"2","swift":"Y"}]}`,
    );
    expect(unknownFields(cashoutStatusResponseSchema, body)).toEqual(['new_top', 'bank[].swift']);
  });

  it('goes through optional and nullable objects, and finds nothing in a body that matches', () => {
    const body = parseProviderJson(
      '{"user_id":"u","deposit_id":1,"invoice_id":"i","currency":"BRL","status":"PENDING","payer":{"email":"a@b.co","address":{"city":"X","geo":"1,2"}}}',
    );
    expect(unknownFields(depositSchema, body)).toEqual(['payer.address.geo']);
    const clean = parseProviderJson(
      '{"user_id":"u","deposit_id":1,"invoice_id":"i","currency":"BRL","status":"PENDING","payer":null}',
    );
    expect(unknownFields(depositSchema, clean)).toEqual([]);
  });
});
