/**
 * Sign-in pieces: scrypt password hashes (node:crypto), the session carried in a signed cookie with an
 * expiry checked on the server, and CSRF tokens derived from the session id (synchronizer token: a form
 * posted without the token of the session that rendered it is refused). Nothing here logs or stores a
 * password; only the hash lives in configuration.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { WebRole } from '../domain/roles.ts';
import { hashSecret, verifySecret } from '../domain/secret-hash.ts';

/** A finance or operations user, as configured. `passwordHash` comes from `payrecon web hash-password`. */
export interface WebUser {
  username: string;
  passwordHash: string;
  /** Default operator (src/domain/roles.ts). */
  role?: WebRole;
}

/** Hashes a password as `scrypt$N$r$p$<salt base64>$<key base64>` (the form config accepts). */
export const hashPassword = hashSecret;
/** Constant-time check of a password against a stored hash; a malformed hash never matches. */
export const verifyPassword = verifySecret;

// A hash to compare against when the user does not exist, so timing does not reveal user names.
let dummyHash: Promise<string> | undefined;

/** Finds the user and checks the password; same work whether or not the user exists. */
export async function authenticate(
  users: readonly WebUser[],
  username: string,
  password: string,
): Promise<WebUser | null> {
  const user = users.find((u) => u.username === username);
  if (!user) {
    dummyHash ??= hashPassword('not-a-user');
    await verifyPassword(password, await dummyHash);
    return null;
  }
  return (await verifyPassword(password, user.passwordHash)) ? user : null;
}

/** What the session cookie carries (signed, so it cannot be forged or altered). */
export interface Session {
  /** Random id; the CSRF token is derived from it. */
  sid: string;
  username: string;
  /** Expiry, epoch milliseconds, checked on every request. */
  exp: number;
}

export function newSession(username: string, ttlMs: number, now: Date): Session {
  return { sid: randomBytes(18).toString('base64url'), username, exp: now.getTime() + ttlMs };
}

export function encodeSession(session: Session): string {
  return Buffer.from(JSON.stringify(session)).toString('base64url');
}

/** Decodes an (already signature-checked) cookie value; null when malformed or expired. */
export function decodeSession(value: string, now: Date): Session | null {
  try {
    const data = JSON.parse(Buffer.from(value, 'base64url').toString('utf8')) as Partial<Session>;
    if (typeof data.sid !== 'string' || typeof data.username !== 'string' || typeof data.exp !== 'number') {
      return null;
    }
    if (data.exp <= now.getTime()) return null;
    return { sid: data.sid, username: data.username, exp: data.exp };
  } catch {
    return null;
  }
}

/** The CSRF token of a session (or of a pre-sign-in nonce): HMAC of its id under the server secret. */
export function csrfToken(secret: string, id: string): string {
  return createHmac('sha256', secret).update(`csrf:${id}`).digest('base64url');
}

export function checkCsrf(secret: string, id: string, token: unknown): boolean {
  if (typeof token !== 'string' || token.length === 0) return false;
  const expected = Buffer.from(csrfToken(secret, id));
  const given = Buffer.from(token);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

export function randomId(): string {
  return randomBytes(18).toString('base64url');
}
