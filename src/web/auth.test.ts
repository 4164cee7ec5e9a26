import { describe, expect, it } from 'vitest';
import {
  authenticate,
  checkCsrf,
  csrfToken,
  decodeSession,
  encodeSession,
  hashPassword,
  newSession,
  verifyPassword,
} from './auth.ts';

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

  it('sessions expire and CSRF tokens belong to one session', () => {
    const now = new Date('2026-11-21T10:00:00Z');
    const s = newSession('ana', 60_000, now);
    expect(decodeSession(encodeSession(s), now)).toEqual(s);
    expect(decodeSession(encodeSession(s), new Date(now.getTime() + 60_000))).toBeNull();
    expect(decodeSession('not base64 json', now)).toBeNull();
    const other = newSession('ana', 60_000, now);
    const token = csrfToken('secret', s.sid);
    expect(checkCsrf('secret', s.sid, token)).toBe(true);
    expect(checkCsrf('secret', other.sid, token)).toBe(false);
    expect(checkCsrf('other secret', s.sid, token)).toBe(false);
    expect(checkCsrf('secret', s.sid, undefined)).toBe(false);
  });
});
