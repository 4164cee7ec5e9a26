import { describe, expect, it } from 'vitest';
import { authenticate, checkCsrf, csrfToken, hashPassword, randomId, verifyPassword } from './auth.ts';

describe('auth', () => {
  it('hashes with scrypt and verifies; a wrong password or a malformed hash never matches', async () => {
    const hash = await hashPassword('correct horse');
    expect(hash).toMatch(/^scrypt\$16384\$8\$1\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+$/);
    expect(hash).not.toContain('correct horse');
    expect(await verifyPassword('correct horse', hash)).toBe(true);
    expect(await verifyPassword('correct horsE', hash)).toBe(false);
    expect(await verifyPassword('x', 'plain')).toBe(false);
    expect(await verifyPassword('x', 'scrypt$16384$8$1$AAAA$AAAA')).toBe(false);
    expect(await hashPassword('correct horse')).not.toBe(hash);
    const users = [{ username: 'ana', passwordHash: hash }];
    expect(await authenticate(users, 'ana', 'correct horse')).toEqual(users[0]);
    expect(await authenticate(users, 'bob', 'correct horse')).toBeNull();
  });

  it('CSRF tokens belong to one session', () => {
    const s = { sid: randomId() };
    const other = { sid: randomId() };
    const token = csrfToken('secret', s.sid);
    expect(checkCsrf('secret', s.sid, token)).toBe(true);
    expect(checkCsrf('secret', other.sid, token)).toBe(false);
    expect(checkCsrf('other secret', s.sid, token)).toBe(false);
    expect(checkCsrf('secret', s.sid, undefined)).toBe(false);
  });
});
