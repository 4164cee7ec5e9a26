/**
 * `POST /intents`: one intent or an array, JSON, validated by `intentInputSchema`, answered 200 only
 * once Kafka acknowledged, 400 naming field and rule, 401 without the bearer token when one is set.
 */
import { timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, toAppError } from '../../domain/errors.ts';
import type { Publisher } from '../../events/kafka.ts';
import { INTENT_TOPIC } from '../../events/topics.ts';
import { type Logger, logger as rootLogger } from '../../logger.ts';
import { parseProviderJson } from '../../provider/json.ts';
import { issueText, parseIntents } from './input.ts';

export interface IntentsPluginDeps {
  publisher: Pick<Publisher, 'publish'>;
  /** Bearer token required on `POST /intents`; null or absent: the route is open (say so at start-up). */
  token?: string | null;
  /** Configured account names; an intent for another account is refused. */
  accounts?: readonly string[];
  /** Largest body, bytes (default 1 MiB). */
  bodyLimit?: number;
  logger?: Logger;
}

function tokenMatches(req: FastifyRequest, token: string): boolean {
  const given = req.headers.authorization ?? '';
  const a = Buffer.from(given);
  const b = Buffer.from(`Bearer ${token}`);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** `POST /intents`: an encapsulated plugin (its own JSON parser: amounts must stay exact). */
export function intentsPlugin(deps: IntentsPluginDeps): FastifyPluginAsync {
  const log = (deps.logger ?? rootLogger).child({ module: 'intent-recorder' });
  if (!deps.token)
    log.warn('POST /intents has no bearer token configured: anyone who reaches it can record intents');
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
    if (deps.token) {
      const token = deps.token;
      app.addHook('onRequest', async (req, reply) => {
        if (!tokenMatches(req, token)) {
          return reply
            .code(401)
            .header('www-authenticate', 'Bearer')
            .send({ error: 'unauthorized', message: 'authorization: must be "Bearer <token>"' });
        }
      });
    }
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
