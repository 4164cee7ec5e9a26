import { describe, expect, it } from 'vitest';
import { EXCEPTION_RULE_TEXT } from '../domain/exception-rules.ts';
import { alertFromOutbox } from './outbox-relay.ts';

const base = {
  alertId: 'a',
  severity: 'critical',
  account: 'acme',
  kind: 'cashout',
  entityId: '7',
  raisedAt: '2026-11-24T10:00:00.000Z',
};

const facts = (f: Record<string, string | null>) => ({
  facts: {
    entity: 'cashout:7',
    externalRef: 'ext-7',
    intentAmount: null,
    intentCurrency: null,
    providerAmount: null,
    providerCurrency: null,
    status: 'REJECTED',
    statusReason: null,
    rule: 'x',
    ...f,
  },
});

describe('alert from an outbox row', () => {
  it("carries the provider's amount when known, else the intent's, and the rule as its message", () => {
    const provider = alertFromOutbox({
      ...base,
      type: 'AMOUNT_MISMATCH',
      details: facts({
        providerAmount: '1579.54',
        providerCurrency: 'BRL',
        intentAmount: '1500.00',
        intentCurrency: 'BRL',
      }),
    });
    expect([provider.amount, provider.currency]).toEqual([157_954n, 'BRL']);
    expect(provider.message).toBe(EXCEPTION_RULE_TEXT.AMOUNT_MISMATCH);
    // A cashout: the provider reports no amount; the intent's is known, so the alert has it.
    const intent = alertFromOutbox({
      ...base,
      type: 'LATE_REJECTION',
      details: facts({ intentAmount: '50.00', intentCurrency: 'USD' }),
    });
    expect([intent.amount, intent.currency]).toEqual([5_000n, 'USD']);
    expect(intent.message).toBe(EXCEPTION_RULE_TEXT.LATE_REJECTION);
    // Nothing known: null, not zero.
    const none = alertFromOutbox({ ...base, type: 'UNKNOWN_TRANSACTION', details: facts({}) });
    expect([none.amount, none.currency]).toEqual([null, null]);
  });
});
