import { describe, expect, it } from 'vitest';
import { AppError } from '../domain/errors.ts';
import {
  CARD_REJECTION_REASONS,
  isProviderErrorCode,
  PROVIDER_ERRORS,
  ProviderError,
  ProviderValidationError,
  providerErrorInfo,
} from './errors.ts';
import { CARD_REJECTION_CODES } from './schemas.ts';

describe('provider error registry', () => {
  it('holds every code of section 7 and docs/provider.md', () => {
    expect(Object.keys(PROVIDER_ERRORS).map(Number)).toEqual([
      100, 101, 102, 103, 104, 105, 208, 300, 302, 303, 401, 402, 502, 508, 509, 510, 511, 514, 526, 533, 702,
      802,
    ]);
  });

  it.each([
    [100, 'INVALID_CREDENTIALS', 401],
    [102, 'INVALID_SIGNATURE', 400],
    [103, 'INVALID_DATE_RANGE', 400],
    [208, 'RESOURCE_NOT_FOUND', 404],
    [401, 'INVALID_CREDENTIALS', 401],
    [509, 'CASHOUT_NOT_FOUND', 412],
    [510, 'INVALID_STATUS_TRANSITION', 412],
    [511, 'EXTERNAL_ID_ALREADY_USED', 412],
    [802, 'INVALID_AMOUNT_TO_REFUND', 400],
  ])('code %i is %s with HTTP %i', (code, name, http) => {
    expect(providerErrorInfo(code)).toMatchObject({ name, http });
    expect(isProviderErrorCode(code)).toBe(true);
  });

  it('knows nothing of other codes', () => {
    expect(providerErrorInfo(999)).toBeUndefined();
    expect(providerErrorInfo(null)).toBeUndefined();
    expect(isProviderErrorCode(200)).toBe(false);
  });

  it('describes every card rejection code of 7.3', () => {
    expect(Object.keys(CARD_REJECTION_REASONS).sort()).toEqual([...CARD_REJECTION_CODES].sort());
  });
});

describe('ProviderError', () => {
  it('carries status, provider code and type, and names the type from the registry', () => {
    const err = new ProviderError('PROVIDER_ERROR', 'x', {
      operation: 'updateCashoutStatus',
      status: 412,
      providerCode: 510,
      body: { code: '510', message: 'Invalid status transition' },
    });
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({
      status: 412,
      providerCode: 510,
      providerType: 'INVALID_STATUS_TRANSITION',
      retryable: false,
    });
    expect(err.httpStatus).toBe(412);
  });

  it('falls back to its code for the HTTP status when no answer arrived', () => {
    const err = new ProviderError('PROVIDER_TIMEOUT', 'x', { operation: 'getDeposit' });
    expect(err).toMatchObject({ status: null, providerCode: null, providerType: null, retryable: true });
    expect(err.httpStatus).toBe(504);
  });

  it('lists the fields of a local validation failure in its message', () => {
    const err = new ProviderValidationError('createDeposit', [
      { field: 'payer.email', rule: 'must be a valid e-mail address' },
      { field: 'amount', rule: 'at most 2 decimals allowed' },
    ]);
    expect(err.message).toBe(
      'createDeposit: payer.email: must be a valid e-mail address; amount: at most 2 decimals allowed',
    );
    expect(err.code).toBe('VALIDATION_FAILED');
  });
});
