/**
 * API tokens kept in the database (`api_tokens`): the scrypt hash of each, never the token. Plain
 * functions over `db` or a transaction; the API's verifier reads them by id, the CLI writes them.
 */
import { sql } from 'kysely';
import type { ApiScope, ApiTokenEntry } from '../domain/api-tokens.ts';
import type { Db } from './schema.ts';

/** A stored token: its entry and its life. */
export interface StoredApiToken extends ApiTokenEntry {
  createdAt: Date;
  createdBy: string;
  expiresAt: Date | null;
  revokedAt: Date | null;
  lastUsedAt: Date | null;
}

interface Row {
  id: string;
  name: string;
  scopes: string[];
  hash: string;
  created_at: Date;
  created_by: string;
  expires_at: Date | null;
  revoked_at: Date | null;
  last_used_at: Date | null;
}

function stored(r: Row): StoredApiToken {
  return {
    id: r.id,
    name: r.name,
    scopes: r.scopes as ApiScope[],
    hash: r.hash,
    createdAt: r.created_at,
    createdBy: r.created_by,
    expiresAt: r.expires_at,
    revokedAt: r.revoked_at,
    lastUsedAt: r.last_used_at,
  };
}

export async function insertApiToken(
  db: Db,
  token: ApiTokenEntry & { createdBy: string; expiresAt: Date | null; createdAt: Date },
): Promise<void> {
  await sql`
    INSERT INTO api_tokens (id, name, scopes, hash, created_at, created_by, expires_at)
    VALUES (${token.id}, ${token.name}, ${[...token.scopes]}::text[], ${token.hash}, ${token.createdAt},
      ${token.createdBy}, ${token.expiresAt})`.execute(db);
}

/** Every stored token, revoked ones included, newest first. */
export async function listApiTokens(db: Db): Promise<StoredApiToken[]> {
  const { rows } = await sql<Row>`
    SELECT id, name, scopes, hash, created_at, created_by, expires_at, revoked_at, last_used_at
    FROM api_tokens ORDER BY created_at DESC, id`.execute(db);
  return rows.map(stored);
}

/** A token by id, or null. */
export async function findApiToken(db: Db, id: string): Promise<StoredApiToken | null> {
  const { rows } = await sql<Row>`
    SELECT id, name, scopes, hash, created_at, created_by, expires_at, revoked_at, last_used_at
    FROM api_tokens WHERE id = ${id}`.execute(db);
  return rows[0] ? stored(rows[0]) : null;
}

/** Revokes a token at `at`; false when there is no such token or it was revoked already. */
export async function revokeApiToken(db: Db, id: string, at: Date): Promise<boolean> {
  const result = await sql`
    UPDATE api_tokens SET revoked_at = ${at} WHERE id = ${id} AND revoked_at IS NULL`.execute(db);
  return Number(result.numAffectedRows ?? 0) > 0;
}

/** Records a use of a token; an earlier time never replaces a later one. */
export async function touchApiToken(db: Db, id: string, at: Date): Promise<void> {
  await sql`
    UPDATE api_tokens SET last_used_at = ${at}
    WHERE id = ${id} AND (last_used_at IS NULL OR last_used_at < ${at})`.execute(db);
}
