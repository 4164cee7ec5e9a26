import { describe, expect, it } from 'vitest';
import { parseRetryAfter } from './client.ts';

// The client itself is tested over HTTP in test/provider/client.test.ts; this is its one pure rule.
describe('parseRetryAfter', () => {
  const now = new Date('2026-11-21T10:00:00Z');
  it.each([
    ['2', 2000],
    ['0', 0],
    ['Sat, 21 Nov 2026 10:00:30 GMT', 30_000],
    ['Sat, 21 Nov 2026 09:59:00 GMT', 0],
    ['soon', null],
    [undefined, null],
  ])('%s -> %s ms', (value, ms) => {
    expect(parseRetryAfter(value, now)).toBe(ms);
  });
});
