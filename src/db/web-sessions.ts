/**
 * The page's sessions (`web_sessions`) and failed sign-ins (`web_sign_in_failures`). Plain functions
 * over `db`; the page (src/web/sessions.ts) decides what they mean. Only hashes are stored: the SHA-256
 * of the token of a session, of a user's password hash, and HMACs of typed user names and addresses.
 */
import { sql } from 'kysely';
import type { Db } from './schema.ts';

/** A stored session. */
export interface StoredWebSession {
  id: string;
  username: string;
  passwordFingerprint: string;
  role: string;
  createdAt: Date;
  lastSeenAt: Date;
  expiresAt: Date;
  endedAt: Date | null;
  endedReason: string | null;
}

interface SessionRow {
  id: string;
  username: string;
  password_fingerprint: string;
  role: string;
  created_at: Date;
  last_seen_at: Date;
  expires_at: Date;
  ended_at: Date | null;
  ended_reason: string | null;
}

export async function insertWebSession(
  db: Db,
  s: Pick<StoredWebSession, 'id' | 'username' | 'passwordFingerprint' | 'role' | 'createdAt' | 'expiresAt'>,
): Promise<void> {
  await sql`
    INSERT INTO web_sessions (id, username, password_fingerprint, role, created_at, last_seen_at, expires_at)
    VALUES (${s.id}, ${s.username}, ${s.passwordFingerprint}, ${s.role}, ${s.createdAt}, ${s.createdAt},
      ${s.expiresAt})`.execute(db);
}

export async function findWebSession(db: Db, id: string): Promise<StoredWebSession | null> {
  const { rows } = await sql<SessionRow>`
    SELECT id, username, password_fingerprint, role, created_at, last_seen_at, expires_at, ended_at,
      ended_reason
    FROM web_sessions WHERE id = ${id}`.execute(db);
  const r = rows[0];
  if (!r) return null;
  return {
    id: r.id,
    username: r.username,
    passwordFingerprint: r.password_fingerprint,
    role: r.role,
    createdAt: r.created_at,
    lastSeenAt: r.last_seen_at,
    expiresAt: r.expires_at,
    endedAt: r.ended_at,
    endedReason: r.ended_reason,
  };
}

/** Ends a session; false when there is none or it had ended already (the first reason stays). */
export async function endWebSession(db: Db, id: string, at: Date, reason: string): Promise<boolean> {
  const result = await sql`
    UPDATE web_sessions SET ended_at = ${at}, ended_reason = ${reason}
    WHERE id = ${id} AND ended_at IS NULL`.execute(db);
  return Number(result.numAffectedRows ?? 0) > 0;
}

/** Records that a session was used; an earlier time never replaces a later one. */
export async function touchWebSession(db: Db, id: string, at: Date): Promise<void> {
  await sql`
    UPDATE web_sessions SET last_seen_at = ${at}
    WHERE id = ${id} AND last_seen_at < ${at}`.execute(db);
}

/** Deletes sessions that expired before `before` (ended or not). */
export async function pruneWebSessions(db: Db, before: Date): Promise<void> {
  await sql`DELETE FROM web_sessions WHERE expires_at < ${before}`.execute(db);
}

/**
 * Records one attempt under each subject at `at` and answers, per subject, the attempts since `since`
 * (this one included) and the oldest of them. The ids returned take the attempt back (`forgetAttempts`).
 */
export async function recordSignInAttempt(
  db: Db,
  subjects: readonly string[],
  at: Date,
  since: Date,
): Promise<{ ids: string[]; counts: Map<string, { count: number; oldest: Date }> }> {
  const inserted = await sql<{ id: string }>`
    INSERT INTO web_sign_in_failures (subject, failed_at)
    SELECT s, ${at}::timestamptz FROM unnest(${[...subjects]}::text[]) AS s
    RETURNING id`.execute(db);
  const { rows } = await sql<{ subject: string; n: string; oldest: Date }>`
    SELECT subject, count(*) AS n, min(failed_at) AS oldest FROM web_sign_in_failures
    WHERE subject = ANY(${[...subjects]}::text[]) AND failed_at > ${since}
    GROUP BY subject`.execute(db);
  return {
    ids: inserted.rows.map((r) => r.id),
    counts: new Map(rows.map((r) => [r.subject, { count: Number(r.n), oldest: r.oldest }])),
  };
}

/** Takes attempts back (a sign-in that succeeded or was not let through). */
export async function forgetSignInAttempts(db: Db, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  await sql`DELETE FROM web_sign_in_failures WHERE id = ANY(${[...ids]}::bigint[])`.execute(db);
}

/** Forgets every failure of a subject (a user who signed in). */
export async function clearSignInFailures(db: Db, subject: string): Promise<void> {
  await sql`DELETE FROM web_sign_in_failures WHERE subject = ${subject}`.execute(db);
}

/** Deletes failures older than `before`. */
export async function pruneSignInFailures(db: Db, before: Date): Promise<void> {
  await sql`DELETE FROM web_sign_in_failures WHERE failed_at < ${before}`.execute(db);
}
