/**
 * `payrecon api token create | list | revoke`: the API's bearer tokens in the database, which the running
 * instance reads (a new token works at once, a revoked one is refused within a second). `create` prints
 * the token once; payrecon keeps only its scrypt hash, so a lost token is replaced by a new one.
 * `create --print-entry` writes nothing and prints the entry for PAYRECON_API_TOKENS instead (tokens
 * configured there are honoured too, and cannot be revoked but by removing them).
 */
import { localUser } from '../config.ts';
import { findApiToken, insertApiToken, listApiTokens, revokeApiToken } from '../db/api-tokens.ts';
import { createDb } from '../db/connection.ts';
import type { Db } from '../db/schema.ts';
import { API_SCOPES, type ApiScope, createApiToken } from '../domain/api-tokens.ts';
import { AppError } from '../domain/errors.ts';

/** Opens the database the CLI chose (`--database-url`, DATABASE_URL, the running `payrecon up` ...). */
export type OpenDatabase = () => Promise<{ url: string; stop(): Promise<void> }>;

type Out = (line: string) => void;
const stdout: Out = (l) => process.stdout.write(`${l}\n`);

export interface TokenCreateOptions {
  name: string;
  scopes: string;
  /** `YYYY-MM-DD` (the end of that day, UTC), an ISO instant with its offset, or `<n>d` days from now. */
  expires?: string;
  /** Who makes it (default: $USER). */
  by?: string;
  /** Print the PAYRECON_API_TOKENS entry; write nothing. */
  printEntry?: boolean;
}

/** Parses `--scopes`: a comma-separated list of known scopes, at least one. */
export function parseScopes(text: string): ApiScope[] {
  const scopes = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  const unknown = scopes.filter((s) => !(API_SCOPES as readonly string[]).includes(s));
  if (scopes.length === 0 || unknown.length > 0) {
    throw new AppError(
      'VALIDATION_FAILED',
      `--scopes: must be a comma-separated list of ${API_SCOPES.join(', ')}${unknown.length > 0 ? ` (unknown: ${unknown.join(', ')})` : ''}`,
    );
  }
  return [...new Set(scopes as ApiScope[])];
}

const EXPIRES_RULE =
  'must be a date YYYY-MM-DD, an instant YYYY-MM-DDTHH:MM:SSZ (or with an offset) or a number of days such as 90d, in the future';

/** Parses `--expires` against `now`. */
export function parseExpires(text: string, now: Date): Date {
  const fail = () => new AppError('VALIDATION_FAILED', `--expires: ${EXPIRES_RULE}`);
  let at: Date;
  const days = /^(\d{1,5})d$/.exec(text);
  if (days) {
    at = new Date(now.getTime() + Number(days[1]) * 86_400_000);
  } else if (/^\d{4}-\d{2}-\d{2}$/.test(text)) {
    at = new Date(`${text}T23:59:59.999Z`);
    if (Number.isNaN(at.getTime()) || at.toISOString().slice(0, 10) !== text) throw fail();
  } else if (/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})$/.test(text)) {
    at = new Date(text);
  } else {
    throw fail();
  }
  if (Number.isNaN(at.getTime()) || at.getTime() <= now.getTime()) throw fail();
  return at;
}

const TOKEN_ID = /^[0-9a-f]{12}$/;

async function withDb<T>(open: OpenDatabase, work: (db: Db) => Promise<T>): Promise<T> {
  const database = await open();
  const db = createDb(database.url, 2);
  try {
    return await work(db);
  } catch (err) {
    if ((err as { code?: unknown }).code === '42P01') {
      throw new AppError(
        'VALIDATION_FAILED',
        'database: has no api_tokens table; run `payrecon db migrate` (or start payrecon once)',
      );
    }
    throw err;
  } finally {
    await db.destroy();
    await database.stop();
  }
}

export async function runApiTokenCreateCli(
  opts: TokenCreateOptions,
  open: OpenDatabase | null,
  out: Out = stdout,
  now: () => Date = () => new Date(),
): Promise<void> {
  if (!/^[A-Za-z0-9._@-]{1,64}$/.test(opts.name)) {
    throw new AppError('VALIDATION_FAILED', '--name: must be 1-64 characters A-Z a-z 0-9 . _ @ -');
  }
  const scopes = parseScopes(opts.scopes);
  const at = now();
  const expiresAt = opts.expires === undefined ? null : parseExpires(opts.expires, at);
  if (opts.printEntry && expiresAt !== null) {
    throw new AppError(
      'VALIDATION_FAILED',
      '--expires: only for tokens kept in the database (PAYRECON_API_TOKENS entries do not expire)',
    );
  }
  const createdBy = opts.by ?? localUser() ?? 'unknown';
  if (!/^[A-Za-z0-9._@-]{1,64}$/.test(createdBy)) {
    throw new AppError('VALIDATION_FAILED', '--by: must be 1-64 characters A-Z a-z 0-9 . _ @ -');
  }
  const { token, entry } = await createApiToken(opts.name, scopes);
  if (opts.printEntry || open === null) {
    out(`token (shown once; give it to the client): ${token}`);
    out(`entry for PAYRECON_API_TOKENS (a JSON array of such entries): ${JSON.stringify(entry)}`);
    return;
  }
  await withDb(open, (db) => insertApiToken(db, { ...entry, createdBy, createdAt: at, expiresAt }));
  out(`token (shown once; give it to the client): ${token}`);
  out(
    `token ${entry.id} "${entry.name}" (${entry.scopes.join(', ')}) recorded${expiresAt ? `, expires ${expiresAt.toISOString()}` : ''}; the running instance accepts it now`,
  );
}

/** One line per token: id, name, scopes, state, created, expires, last used. */
export async function runApiTokenListCli(open: OpenDatabase, out: Out = stdout): Promise<void> {
  const at = new Date();
  const tokens = await withDb(open, (db) => listApiTokens(db));
  if (tokens.length === 0) {
    out('no tokens in the database (PAYRECON_API_TOKENS may configure others)');
    return;
  }
  for (const t of tokens) {
    const state =
      t.revokedAt !== null
        ? `revoked ${t.revokedAt.toISOString()}`
        : t.expiresAt !== null && t.expiresAt.getTime() <= at.getTime()
          ? `expired ${t.expiresAt.toISOString()}`
          : 'active';
    out(
      [
        t.id,
        t.name,
        t.scopes.join(','),
        state,
        `created ${t.createdAt.toISOString()} by ${t.createdBy}`,
        `expires ${t.expiresAt?.toISOString() ?? 'never'}`,
        `last used ${t.lastUsedAt?.toISOString() ?? 'never'}`,
      ].join('  '),
    );
  }
}

export async function runApiTokenRevokeCli(id: string, open: OpenDatabase, out: Out = stdout): Promise<void> {
  if (!TOKEN_ID.test(id)) {
    throw new AppError('VALIDATION_FAILED', 'id: must be the 12 hexadecimal digits `api token list` shows');
  }
  await withDb(open, async (db) => {
    const at = new Date();
    if (await revokeApiToken(db, id, at)) {
      out(`token ${id} revoked; the running instance refuses it within a second`);
      return;
    }
    const known = await findApiToken(db, id);
    throw new AppError(
      'VALIDATION_FAILED',
      known === null
        ? `id: no token ${id} in the database (a PAYRECON_API_TOKENS entry is revoked by removing it)`
        : `id: token ${id} was revoked already, at ${known.revokedAt?.toISOString()}`,
    );
  });
}
