/**
 * The sandbox's side of the signatures of provider-facts.md. Thin wrappers so the sandbox has one place
 * that computes and checks signatures.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export function hmacHex(key: string, message: string | Buffer): string {
  return createHmac('sha256', key).update(message).digest('hex');
}

/** `Authorization` of deposit and refund calls and of deposit/refund notifications. */
export function depositAuthorizationFor(
  secret: string,
  xDate: string,
  login: string,
  body: string | Buffer,
): string {
  const h = createHmac('sha256', secret).update(xDate).update(login);
  if (body.length > 0) h.update(body);
  return `D24 ${h.digest('hex')}`;
}

/** `Payload-Signature` of cashout calls. */
export function payloadSignatureFor(secret: string, body: string | Buffer): string {
  return hmacHex(secret, body);
}

/** `control` of cashout notifications. */
export function cashoutControlFor(secret: string, externalId: string): string {
  return hmacHex(secret, `Be4${externalId}Bo7`).toUpperCase();
}

/** Constant-time comparison of two ASCII strings. */
export function safeEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  return timingSafeEqual(Buffer.from(a), Buffer.from(b));
}
