/**
 * The provider's signatures (docs/provider.md, "Signatures"):
 *
 * - deposits and refunds: `Authorization: D24 <hex HMAC-SHA256(X-Date + X-Login + body)>` with the
 *   deposit secret; a GET signs `X-Date + X-Login`.
 * - cashouts: `Payload-Signature: <hex HMAC-SHA256(raw JSON body)>` with the cashout secret.
 * - cashout notifications: `control = UPPERCASE hex HMAC-SHA256("Be4" + external_id + "Bo7")` with the
 *   cashout secret.
 *
 * Verification compares in constant time. Bodies are the exact bytes sent (string or Buffer).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export type Body = string | Uint8Array;

function hmacHex(secret: string, parts: readonly Body[]): string {
  const mac = createHmac('sha256', Buffer.from(secret, 'utf8'));
  for (const p of parts) mac.update(typeof p === 'string' ? Buffer.from(p, 'utf8') : p);
  return mac.digest('hex');
}

/** Constant-time comparison of two hex strings (case-insensitive when `ignoreCase`). */
function safeEqualText(expected: string, given: string): boolean {
  const a = Buffer.from(expected, 'utf8');
  const b = Buffer.from(given, 'utf8');
  if (a.length !== b.length) {
    // Compare anyway so the timing does not reveal where the mismatch is.
    timingSafeEqual(a, a);
    return false;
  }
  return timingSafeEqual(a, b);
}

/** `yyyy-MM-dd'T'HH:mm:ssZ` in UTC without milliseconds, e.g. `2020-06-21T12:33:20Z`. */
export function formatXDate(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** Parses an X-Date; null when it does not follow `yyyy-MM-ddTHH:mm:ssZ`. */
export function parseXDate(text: string): Date | null {
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/.test(text)) return null;
  const d = new Date(text);
  return Number.isNaN(d.getTime()) || formatXDate(d) !== text ? null : d;
}

/** True when an X-Date lies within `windowMs` of `now` (either side). */
export function isXDateInWindow(text: string, now: Date, windowMs: number): boolean {
  const d = parseXDate(text);
  return d !== null && Math.abs(d.getTime() - now.getTime()) <= windowMs;
}

export interface DepositSignatureInput {
  xDate: string;
  xLogin: string;
  /** The exact body bytes; empty (or omitted) for a GET. */
  body?: Body;
  secret: string;
}

/** The deposit/refund `Authorization` header value: `"D24 <lowercase hex>"`. */
export function depositAuthorization({ xDate, xLogin, body = '', secret }: DepositSignatureInput): string {
  return `D24 ${hmacHex(secret, [xDate, xLogin, body])}`;
}

/** Checks a received `Authorization` header in constant time. */
export function verifyDepositAuthorization(
  input: DepositSignatureInput & { authorization: string | undefined },
): boolean {
  if (!input.authorization) return false;
  return safeEqualText(depositAuthorization(input), input.authorization.trim());
}

/** The cashout `Payload-Signature`: lowercase hex HMAC-SHA256 of the raw JSON body. */
export function payloadSignature(body: Body, secret: string): string {
  return hmacHex(secret, [body]);
}

/** Checks a received `Payload-Signature` in constant time (hex case ignored). */
export function verifyPayloadSignature(body: Body, secret: string, signature: string | undefined): boolean {
  if (!signature) return false;
  return safeEqualText(payloadSignature(body, secret), signature.trim().toLowerCase());
}

/** The cashout notification `control`: UPPERCASE hex HMAC-SHA256 of `"Be4" + externalId + "Bo7"`. */
export function cashoutControl(externalId: string, secret: string): string {
  return hmacHex(secret, ['Be4', externalId, 'Bo7']).toUpperCase();
}

/** Checks a received `control` in constant time (hex case ignored). */
export function verifyCashoutControl(
  externalId: string,
  secret: string,
  control: string | undefined,
): boolean {
  if (!control) return false;
  return safeEqualText(cashoutControl(externalId, secret), control.trim().toUpperCase());
}
