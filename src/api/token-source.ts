/**
 * The database as the API's token source: a token made with `payrecon api token create` is found by the
 * running instance at once, a revoked one is not found (so refused within `SOURCE_CACHE_MS`), and each
 * use is recorded as its last use (at most once a minute per token; a failed write is logged, never the
 * caller's problem).
 */
import { findApiToken, touchApiToken } from '../db/api-tokens.ts';
import type { Db } from '../db/schema.ts';
import type { TokenSource } from '../domain/api-tokens.ts';
import type { Logger } from '../logger.ts';

export function databaseTokenSource(db: Db, logger?: Logger): TokenSource {
  return {
    async find(id) {
      const token = await findApiToken(db, id);
      return token === null || token.revokedAt !== null ? null : token;
    },
    used(id, at) {
      touchApiToken(db, id, at).catch((err: unknown) =>
        logger?.warn({ err, token: id }, 'last use of an API token not recorded'),
      );
    },
  };
}
