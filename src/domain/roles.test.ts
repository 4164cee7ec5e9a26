import { describe, expect, it } from 'vitest';
import { roleCan } from './roles.ts';

describe('web roles', () => {
  it('a viewer only reads, an operator works exceptions, a controller also signs closes', () => {
    expect(roleCan('viewer', 'work-exceptions')).toBe(false);
    expect(roleCan('viewer', 'sign-close')).toBe(false);
    expect(roleCan('operator', 'work-exceptions')).toBe(true);
    expect(roleCan('operator', 'sign-close')).toBe(false);
    expect(roleCan('controller', 'work-exceptions')).toBe(true);
    expect(roleCan('controller', 'sign-close')).toBe(true);
  });
});
