/**
 * The one list of secret keys: passwords, credentials, tokens, signatures, card data. Their values
 * never reach a log (the logger redacts every spelling below by path), an event (the webhook ingress
 * drops them from a notification's fields), an intent (`withoutSecrets` drops them from the stored
 * request and response), the database, a topic or a workbook.
 *
 * Each spelling the code meets is listed, because the logger's redaction matches keys exactly;
 * `isSecretKey` compares without case, `-` or `_`, so `Card-Number` is as secret as `cardNumber`.
 */
import { formatAmount } from './money.ts';

export const SECRET_KEYS = [
  // credentials
  'login',
  'pass',
  'cashoutPass',
  'password',
  'passwordHash',
  'password_hash',
  'secret',
  'secretKey',
  'secret_key',
  'depositSecret',
  'cashoutSecret',
  'readOnlyKey',
  'read_only_key',
  'sessionSecret',
  'session_secret',
  'apiKey',
  'token',
  'checkout_token',
  'cookie',
  'set-cookie',
  // signatures
  'authorization',
  'Authorization',
  'payload-signature',
  'Payload-Signature',
  'payload_signature',
  'signature',
  'control',
  // card data
  'card_number',
  'cardNumber',
  'cvv',
  'CVV',
  'credit_card',
  'card_token',
  'expiration_month',
  'expiration_year',
  'holder_name',
  'authentication_url',
] as const;

const normal = (key: string) => key.toLowerCase().replace(/[-_]/g, '');
const NORMALISED = new Set(SECRET_KEYS.map(normal));

/** Whether a key names a secret, whatever its case or separators. */
export function isSecretKey(key: string): boolean {
  return NORMALISED.has(normal(key));
}

/**
 * A deep copy without secret keys, at any depth; bigints (every bigint in a provider body is a minor
 * amount) become decimal text, dates ISO text, functions and symbols dropped.
 */
export function withoutSecrets(value: unknown): unknown {
  if (typeof value === 'bigint') return formatAmount(value);
  if (Array.isArray(value)) return value.map(withoutSecrets);
  if (value !== null && typeof value === 'object') {
    if (value instanceof Date) return value.toISOString();
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      if (isSecretKey(k) || v === undefined) continue;
      out[k] = withoutSecrets(v);
    }
    return out;
  }
  if (typeof value === 'function' || typeof value === 'symbol') return undefined;
  return value;
}

/** `withoutSecrets` of an object as a record; anything else gives `{}`. */
export function recordWithoutSecrets(value: unknown): Record<string, unknown> {
  const s = withoutSecrets(value);
  return s !== null && typeof s === 'object' && !Array.isArray(s) ? (s as Record<string, unknown>) : {};
}
