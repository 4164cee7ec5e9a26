import { describe, expect, it } from 'vitest';
import { AppError, ERROR_CODES, httpStatusOf, toAppError } from './errors.ts';

describe('toAppError: the one mapping of errors to HTTP statuses', () => {
  it('keeps an AppError, whose code gives the status', () => {
    const err = new AppError('REPLAYED', 'x-date: must be within 300 s');
    expect(toAppError(err)).toBe(err);
    expect(httpStatusOf(err)).toBe(401);
    for (const code of Object.keys(ERROR_CODES) as (keyof typeof ERROR_CODES)[]) {
      expect(new AppError(code, 'm').httpStatus).toBe(ERROR_CODES[code].http);
    }
  });

  it('maps a framework 4xx to the matching client error, keeping its message', () => {
    const tooLarge = Object.assign(new Error('Request body is too large'), {
      statusCode: 413,
      code: 'FST_ERR_CTP_BODY_TOO_LARGE',
    });
    expect(toAppError(tooLarge)).toMatchObject({
      code: 'PAYLOAD_TOO_LARGE',
      message: 'Request body is too large',
    });
    expect(toAppError(Object.assign(new Error('bad media'), { statusCode: 415 })).code).toBe(
      'UNSUPPORTED_MEDIA_TYPE',
    );
    expect(toAppError(Object.assign(new Error('bad json'), { statusCode: 400 })).code).toBe(
      'VALIDATION_FAILED',
    );
  });

  it('answers anything else as INTERNAL 500 without its message', () => {
    const e = toAppError(new TypeError('cannot read secret of undefined'));
    expect(e.code).toBe('INTERNAL');
    expect(e.httpStatus).toBe(500);
    expect(e.message).toBe('internal error');
    expect(httpStatusOf('a string')).toBe(500);
  });
});
