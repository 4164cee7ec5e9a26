/**
 * The page's sessions and sign-in back-off, kept in PostgreSQL so that every instance and every restart
 * sees the same: a session row is named by the SHA-256 of a random token that only the (signed) cookie
 * carries; each request finds its row (remembered for at most `SESSION_CACHE_MS`), and refuses it when it
 * has ended or expired, its user is no longer configured, or the user's configured password hash changed
 * since sign-in (the row keeps a SHA-256 fingerprint of that hash). A removed user or a changed password
 * ends the row at its next use.
 *
 * Failed sign-ins are counted per typed user name and per client address, each as an HMAC under the
 * session secret (the typed text is never stored): past the limit within the window, a sign-in is
 * answered 429 before any password is checked. Password checks (scrypt) run a few at a time, with a
 * short queue, so parallel guesses cannot fill libuv's thread pool.
 */
import { createHash, createHmac, randomBytes } from 'node:crypto';
import type { StoredWebSession } from '../db/web-sessions.ts';
import { DEFAULT_WEB_ROLE } from '../domain/roles.ts';
import type { Logger } from '../logger.ts';
import type { Session, WebUser } from './auth.ts';

/** Where sessions and failed sign-ins are kept (the database: src/db/web-sessions.ts). */
export interface WebSessionStore {
  insert(
    s: Pick<StoredWebSession, 'id' | 'username' | 'passwordFingerprint' | 'role' | 'createdAt' | 'expiresAt'>,
  ): Promise<void>;
  find(id: string): Promise<StoredWebSession | null>;
  end(id: string, at: Date, reason: SessionEndReason): Promise<boolean>;
  touch(id: string, at: Date): Promise<void>;
  prune(before: Date): Promise<void>;
  recordAttempt(
    subjects: readonly string[],
    at: Date,
    since: Date,
  ): Promise<{ ids: string[]; counts: Map<string, { count: number; oldest: Date }> }>;
  forgetAttempts(ids: readonly string[]): Promise<void>;
  clearFailures(subject: string): Promise<void>;
  pruneFailures(before: Date): Promise<void>;
}

export type SessionEndReason = 'signed-out' | 'user-removed' | 'password-changed';

/** Longest a session row read is trusted: the time a sign-out on another instance takes to count. */
export const SESSION_CACHE_MS = 1_000;
/** How often the last use of a session is written (at most). */
const TOUCH_EVERY_MS = 60_000;
/** Ended or expired session rows are kept this long after their expiry, then deleted. */
const KEEP_EXPIRED_MS = 7 * 86_400_000;

/** Failed sign-ins allowed within the window, per typed user name and per address. */
export interface SignInLimits {
  perUser: number;
  perAddress: number;
  windowMs: number;
}

export const DEFAULT_SIGN_IN_LIMITS: SignInLimits = { perUser: 5, perAddress: 20, windowMs: 15 * 60_000 };

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** What a session row keeps of a user's password: the SHA-256 of its configured scrypt hash. */
export function passwordFingerprint(passwordHash: string): string {
  return sha256Hex(passwordHash);
}

/** A new random session token (the cookie's) and its id (the row's). */
export function newSessionToken(): { token: string; id: string } {
  const token = randomBytes(32).toString('base64url');
  return { token, id: sha256Hex(token) };
}

const TOKEN_RE = /^[A-Za-z0-9_-]{43}$/;

/** Sessions over the store, checked against the configured users. */
export class WebSessions {
  private readonly users: Map<string, WebUser>;
  private readonly cache = new Map<string, { row: StoredWebSession | null; until: number }>();
  private readonly touched = new Map<string, number>();
  private lastPrune = 0;

  constructor(
    private readonly store: WebSessionStore,
    users: readonly WebUser[],
    private readonly ttlMs: number,
    private readonly now: () => Date,
    private readonly logger?: Logger,
  ) {
    this.users = new Map(users.map((u) => [u.username, u]));
  }

  /** Starts a session for a user who just signed in; the token goes into the cookie. */
  async start(user: WebUser): Promise<{ token: string; session: Session }> {
    const { token, id } = newSessionToken();
    const at = this.now();
    const expiresAt = new Date(at.getTime() + this.ttlMs);
    await this.store.insert({
      id,
      username: user.username,
      passwordFingerprint: passwordFingerprint(user.passwordHash),
      role: user.role ?? DEFAULT_WEB_ROLE,
      createdAt: at,
      expiresAt,
    });
    if (Date.now() - this.lastPrune > 3_600_000) {
      this.lastPrune = Date.now();
      await this.store.prune(new Date(at.getTime() - KEEP_EXPIRED_MS));
    }
    return { token, session: { sid: id, username: user.username, exp: expiresAt.getTime() } };
  }

  /** The live session a cookie's token names, or null (ending it when its user or password changed). */
  async resolve(token: string): Promise<Session | null> {
    if (!TOKEN_RE.test(token)) return null;
    const id = sha256Hex(token);
    const row = await this.read(id);
    if (!row || row.endedAt) return null;
    const at = this.now();
    if (row.expiresAt.getTime() <= at.getTime()) return null;
    const user = this.users.get(row.username);
    const reason: SessionEndReason | null = !user
      ? 'user-removed'
      : passwordFingerprint(user.passwordHash) !== row.passwordFingerprint
        ? 'password-changed'
        : null;
    if (reason) {
      this.cache.delete(id);
      if (await this.store.end(id, at, reason)) {
        this.logger?.info({ reason }, 'web session ended');
      }
      return null;
    }
    const last = this.touched.get(id) ?? row.lastSeenAt.getTime();
    if (at.getTime() - last >= TOUCH_EVERY_MS) {
      this.touched.set(id, at.getTime());
      this.store
        .touch(id, at)
        .catch((err) => this.logger?.warn({ err }, 'web session: last use not recorded'));
    }
    return { sid: id, username: row.username, exp: row.expiresAt.getTime() };
  }

  /** Ends a session (sign-out) on every instance. */
  async end(id: string, reason: SessionEndReason): Promise<void> {
    this.cache.delete(id);
    this.touched.delete(id);
    await this.store.end(id, this.now(), reason);
  }

  private async read(id: string): Promise<StoredWebSession | null> {
    const t = Date.now();
    const hit = this.cache.get(id);
    if (hit && hit.until > t) return hit.row;
    const row = await this.store.find(id);
    if (this.cache.size > 10_000) {
      for (const [k, v] of this.cache) if (v.until <= t) this.cache.delete(k);
      if (this.cache.size > 10_000) this.cache.clear();
    }
    if (this.touched.size > 10_000) this.touched.clear();
    this.cache.set(id, { row, until: t + SESSION_CACHE_MS });
    return row;
  }
}

/** An attempt let through to the password check; settle it with `succeeded` or `failed`. */
export interface SignInAttempt {
  readonly ids: string[];
  readonly userSubject: string;
}

export type SignInGate = { ok: true; attempt: SignInAttempt } | { ok: false; retryAfterSeconds: number };

/** The back-off of sign-ins: counts attempts per typed user name and per address. */
export class SignInGuard {
  private lastPrune = 0;

  constructor(
    private readonly store: WebSessionStore,
    private readonly secret: string,
    private readonly limits: SignInLimits,
    private readonly now: () => Date,
  ) {}

  private subject(kind: 'user' | 'address', text: string): string {
    return `${kind}:${createHmac('sha256', this.secret).update(`sign-in:${kind}:${text}`).digest('hex')}`;
  }

  /**
   * Records the attempt first, then counts (so parallel guesses count each other); past a limit the
   * attempt is taken back and refused with the seconds until the oldest counted failure leaves the window.
   */
  async begin(username: string, address: string): Promise<SignInGate> {
    const at = this.now();
    const since = new Date(at.getTime() - this.limits.windowMs);
    if (Date.now() - this.lastPrune > 60_000) {
      this.lastPrune = Date.now();
      await this.store.pruneFailures(since);
    }
    const userSubject = this.subject('user', username);
    const addressSubject = this.subject('address', address);
    const { ids, counts } = await this.store.recordAttempt([userSubject, addressSubject], at, since);
    const over = (
      [
        [userSubject, this.limits.perUser],
        [addressSubject, this.limits.perAddress],
      ] as const
    ).filter(([s, limit]) => (counts.get(s)?.count ?? 0) > limit);
    if (over.length === 0) return { ok: true, attempt: { ids, userSubject } };
    await this.store.forgetAttempts(ids);
    const until = Math.max(
      ...over.map(([s]) => (counts.get(s)?.oldest.getTime() ?? at.getTime()) + this.limits.windowMs),
    );
    return { ok: false, retryAfterSeconds: Math.max(1, Math.ceil((until - at.getTime()) / 1000)) };
  }

  /** An attempt whose password was never checked (the checks were busy) does not count. */
  async withdraw(attempt: SignInAttempt): Promise<void> {
    await this.store.forgetAttempts(attempt.ids);
  }

  /** A right password: the attempt is not a failure, and the user's earlier failures are forgotten. */
  async succeeded(attempt: SignInAttempt): Promise<void> {
    await this.store.forgetAttempts(attempt.ids);
    await this.store.clearFailures(attempt.userSubject);
  }
}

/** Runs at most `max` tasks at once with at most `queue` waiting; beyond that `run` answers null. */
export class Slots {
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(
    private readonly max: number,
    private readonly queue: number,
  ) {}

  async run<T>(task: () => Promise<T>): Promise<{ value: T } | null> {
    if (this.running >= this.max) {
      if (this.waiting.length >= this.queue) return null;
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else {
      this.running += 1;
    }
    try {
      return { value: await task() };
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.running -= 1;
    }
  }
}
