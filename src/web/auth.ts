/**
 * Sign-in pieces: scrypt password hashes (node:crypto), the session of a signed-in request, and CSRF
 * tokens derived from the session id (synchronizer token: a form posted without the token of the session
 * that rendered it is refused). Sessions themselves live server side (src/web/sessions.ts). Nothing here logs or stores a
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

/** A signed-in request's session (its row is kept server side, src/web/sessions.ts). */
export interface Session {
  /** The session row's id (SHA-256 of the cookie's token); the CSRF token is derived from it. */
  sid: string;
  username: string;
  /** Expiry, epoch milliseconds. */
  exp: number;
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
