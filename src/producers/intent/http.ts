/**
 * `POST /intents`: one intent or an array, JSON, validated by `intentInputSchema`, answered 200 only
 * once Kafka acknowledged, 400 naming field and rule. It takes the API's bearer tokens: 401 without a
 * valid one, 403 when it lacks the scope `intents:write`; only the sandbox with no token configured
 * leaves the route open.
 */
import type { FastifyInstance, FastifyPluginAsync, FastifyReply } from 'fastify';
import type { TokenVerifier } from '../../domain/api-tokens.ts';
import { AppError, toAppError } from '../../domain/errors.ts';
import type { Publisher } from '../../events/kafka.ts';
import { INTENT_TOPIC } from '../../events/topics.ts';
import { type Logger, logger as rootLogger } from '../../logger.ts';
import { parseProviderJson } from '../../provider/json.ts';
import { issueText, parseIntents } from './input.ts';

export interface IntentsPluginDeps {
  publisher: Pick<Publisher, 'publish'>;
  /** API bearer tokens; a request needs one with the scope `intents:write` unless `open`. */
  tokens: TokenVerifier;
  /** Accept requests that carry no token (the sandbox with no token configured; said at start-up). */
  open?: boolean;
  /** Configured account names; an intent for another account is refused. */
  accounts?: readonly string[];
  /** Largest body, bytes (default 1 MiB). */
  bodyLimit?: number;
  logger?: Logger;
}

/** `POST /intents`: an encapsulated plugin (its own JSON parser: amounts must stay exact). */
export function intentsPlugin(deps: IntentsPluginDeps): FastifyPluginAsync {
  const log = (deps.logger ?? rootLogger).child({ module: 'intent-recorder' });
  if (deps.open)
    log.warn(
      'POST /intents takes requests without a token (sandbox): anyone who reaches it can record intents',
    );
  return async (app: FastifyInstance) => {
    app.removeAllContentTypeParsers();
    app.addContentTypeParser(
      'application/json',
      { parseAs: 'string', bodyLimit: deps.bodyLimit ?? 1024 * 1024 },
      (_req, body, done) => {
        try {
          done(null, parseProviderJson(String(body)));
        } catch {
          done(new AppError('VALIDATION_FAILED', 'body: must be valid JSON'), undefined);
        }
      },
    );
    app.setErrorHandler((err, _req, reply: FastifyReply) => {
      const e = toAppError(err);
      if (e.code === 'UNSUPPORTED_MEDIA_TYPE') {
        return reply
          .code(e.httpStatus)
          .send({ error: 'unsupported_media_type', message: 'content-type: must be application/json' });
      }
      if (e.code === 'PAYLOAD_TOO_LARGE') {
        return reply.code(e.httpStatus).send({ error: 'too_large', message: 'body: too large' });
      }
      if (e.httpStatus < 500)
        return reply.code(e.httpStatus).send({ error: 'malformed', message: e.message });
      log.error({ err }, 'intent request failed');
      return reply.code(e.httpStatus).send({ error: 'internal', message: e.message });
    });
    app.addHook('onRequest', async (req, reply) => {
      const header = req.headers.authorization;
      if (header === undefined && deps.open) return;
      const checked = await deps.tokens.check(header);
      if (!checked.ok) {
        return reply.code(401).header('www-authenticate', 'Bearer').send({
          error: 'unauthorized',
          message: 'authorization: must be "Bearer <token>" with a valid token',
        });
      }
      if (!checked.entry.scopes.includes('intents:write')) {
        return reply
          .code(403)
          .header('www-authenticate', 'Bearer error="insufficient_scope", scope="intents:write"')
          .send({ error: 'forbidden', message: 'authorization: the token lacks the scope intents:write' });
      }
    });
    app.post('/intents', async (req, reply) => {
      const parsed = parseIntents(req.body, deps.accounts);
      if (!parsed.ok) {
        return reply.code(400).send({
          error: 'invalid',
          issues: parsed.issues,
          message: parsed.issues.map(issueText).join('; '),
        });
      }
      try {
        await deps.publisher.publish(
          INTENT_TOPIC,
          parsed.intents.map((value) => ({ value })),
        );
      } catch (err) {
        log.error({ err, intents: parsed.intents.length }, 'intents not published');
        return reply
          .code(503)
          .send({ error: 'unavailable', message: 'the intents could not be recorded; retry' });
      }
      return reply
        .code(200)
        .send({ recorded: parsed.intents.length, intent_ids: parsed.intents.map((i) => i.intentId) });
    });
  };
}
