/**
 * API bearer tokens. A token is `prk_<id>_<secret>`: the id names its configured entry (so one scrypt
 * check, not one per configured token), the secret is 32 random bytes. Only the scrypt hash of the whole
 * token is configured (PAYRECON_API_TOKENS, like web users' passwords), with a name and its scopes;
 * `payrecon api token create` makes one and prints the token once. A verified token is remembered for a
 * minute under its SHA-256 (never the token itself) so a client's calls do not each pay for scrypt.
 * Nothing here logs a token.
 */
import { createHash, randomBytes } from 'node:crypto';
import { hashSecret, verifySecret } from './secret-hash.ts';

/** What a token may do: read everything, work exceptions, request reports, record intents. */
export const API_SCOPES = ['read', 'exceptions:write', 'reports:write', 'intents:write'] as const;
export type ApiScope = (typeof API_SCOPES)[number];

/** A configured token: `hash` is `hashSecret` of the whole token. */
export interface ApiTokenEntry {
  id: string;
  name: string;
  scopes: readonly ApiScope[];
  hash: string;
}

const TOKEN_RE = /^prk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$/;

/** A new token and the entry to configure for it. */
export async function createApiToken(
  name: string,
  scopes: readonly ApiScope[],
): Promise<{ token: string; entry: ApiTokenEntry }> {
  const id = randomBytes(6).toString('hex');
  const token = `prk_${id}_${randomBytes(32).toString('base64url')}`;
  return { token, entry: { id, name, scopes: [...scopes], hash: await hashSecret(token) } };
}

export type TokenCheck =
  | { ok: true; entry: ApiTokenEntry }
  | { ok: false; reason: 'missing' | 'malformed' | 'unknown' };

const CACHE_MS = 60_000;

/** Checks `Authorization: Bearer <token>` headers against the configured entries. */
export class TokenVerifier {
  private readonly byId: Map<string, ApiTokenEntry>;
  private readonly verified = new Map<string, { entry: ApiTokenEntry; until: number }>();

  constructor(
    entries: readonly ApiTokenEntry[],
    private readonly now: () => number = Date.now,
  ) {
    this.byId = new Map(entries.map((e) => [e.id, e]));
  }

  get size(): number {
    return this.byId.size;
  }

  async check(header: string | undefined): Promise<TokenCheck> {
    if (!header) return { ok: false, reason: 'missing' };
    const match = /^Bearer ([^\s]+)$/.exec(header);
    const token = match?.[1];
    if (!token) return { ok: false, reason: 'malformed' };
    const parts = TOKEN_RE.exec(token);
    if (!parts) return { ok: false, reason: 'unknown' };
    const entry = this.byId.get(parts[1] ?? '');
    if (!entry) return { ok: false, reason: 'unknown' };
    const digest = createHash('sha256').update(token).digest('hex');
    const at = this.now();
    const cached = this.verified.get(digest);
    if (cached && cached.until > at && cached.entry === entry) return { ok: true, entry };
    if (!(await verifySecret(token, entry.hash))) return { ok: false, reason: 'unknown' };
    if (this.verified.size > 1000) this.verified.clear();
    this.verified.set(digest, { entry, until: at + CACHE_MS });
    return { ok: true, entry };
  }
}
