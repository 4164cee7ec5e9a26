/**
 * API bearer tokens. A token is `prk_<id>_<secret>`: the id names its entry (so one scrypt check, not
 * one per token), the secret is 32 random bytes. Only the scrypt hash of the whole token is kept, with a
 * name and its scopes: in the database (`payrecon api token create`, which prints the token once; a
 * `TokenSource`) or configured (PAYRECON_API_TOKENS, like web users' passwords). A verified token is
 * remembered for a minute under its SHA-256 (never the token itself) so a client's calls do not each pay
 * for scrypt; its entry is looked up again at most `SOURCE_CACHE_MS` later, so a revoked or expired
 * token is refused within that. Nothing here logs a token.
 */
import { createHash, randomBytes } from 'node:crypto';
import { hashSecret, verifySecret } from './secret-hash.ts';

/**
 * What a token may do: read everything, work exceptions (and propose decisions), approve or reject a
 * decision another proposed (a controller's), request reports, record intents, import files.
 */
export const API_SCOPES = [
  'read',
  'exceptions:write',
  'exceptions:approve',
  'reports:write',
  'intents:write',
  'imports:write',
] as const;
export type ApiScope = (typeof API_SCOPES)[number];

/** A token's entry: `hash` is `hashSecret` of the whole token. */
export interface ApiTokenEntry {
  id: string;
  name: string;
  scopes: readonly ApiScope[];
  hash: string;
  /** After this the token is refused; none: never. */
  expiresAt?: Date | null;
}

/** Where entries not configured are found (the database): revoked ones are not found. */
export interface TokenSource {
  find(id: string): Promise<ApiTokenEntry | null>;
  /** Called after a token passed (at most once a minute per token). */
  used?(id: string, at: Date): void;
}

/** Longest a looked-up entry (or its absence) is trusted: the time a revocation takes to count. */
export const SOURCE_CACHE_MS = 1_000;
const USED_EVERY_MS = 60_000;

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

/** Checks `Authorization: Bearer <token>` headers against the configured entries, then the source's. */
export class TokenVerifier {
  private readonly byId: Map<string, ApiTokenEntry>;
  private readonly verified = new Map<string, { entry: ApiTokenEntry; until: number }>();
  private readonly looked = new Map<string, { entry: Promise<ApiTokenEntry | null>; until: number }>();
  private readonly usedAt = new Map<string, number>();

  constructor(
    entries: readonly ApiTokenEntry[],
    private readonly now: () => number = Date.now,
    private readonly source: TokenSource | null = null,
  ) {
    this.byId = new Map(entries.map((e) => [e.id, e]));
  }

  /** Configured entries (the source's are not counted). */
  get size(): number {
    return this.byId.size;
  }

  /** True when tokens may come from somewhere: configured entries or a source. */
  get anyPossible(): boolean {
    return this.byId.size > 0 || this.source !== null;
  }

  private async entryOf(id: string, at: number): Promise<ApiTokenEntry | null> {
    const configured = this.byId.get(id);
    if (configured || !this.source) return configured ?? null;
    const cached = this.looked.get(id);
    if (cached && cached.until > at) return cached.entry;
    if (this.looked.size > 1000) this.looked.clear();
    const entry = this.source.find(id);
    this.looked.set(id, { entry, until: at + SOURCE_CACHE_MS });
    entry.catch(() => this.looked.delete(id));
    return entry;
  }

  async check(header: string | undefined): Promise<TokenCheck> {
    if (!header) return { ok: false, reason: 'missing' };
    const match = /^Bearer ([^\s]+)$/.exec(header);
    const token = match?.[1];
    if (!token) return { ok: false, reason: 'malformed' };
    const parts = TOKEN_RE.exec(token);
    if (!parts) return { ok: false, reason: 'unknown' };
    const at = this.now();
    const entry = await this.entryOf(parts[1] ?? '', at);
    if (!entry) return { ok: false, reason: 'unknown' };
    if (entry.expiresAt && entry.expiresAt.getTime() <= at) return { ok: false, reason: 'unknown' };
    const digest = createHash('sha256').update(token).digest('hex');
    const cached = this.verified.get(digest);
    const known =
      cached && cached.until > at && cached.entry.id === entry.id && cached.entry.hash === entry.hash;
    if (!known) {
      if (!(await verifySecret(token, entry.hash))) return { ok: false, reason: 'unknown' };
      if (this.verified.size > 1000) this.verified.clear();
      this.verified.set(digest, { entry, until: at + CACHE_MS });
    }
    if (
      this.source?.used &&
      !this.byId.has(entry.id) &&
      (this.usedAt.get(entry.id) ?? 0) + USED_EVERY_MS <= at
    ) {
      if (this.usedAt.size > 1000) this.usedAt.clear();
      this.usedAt.set(entry.id, at);
      this.source.used(entry.id, new Date(at));
    }
    return { ok: true, entry };
  }
}
