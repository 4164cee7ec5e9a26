/**
 * The merchant-facing routes of the Payment Service API v3 (section 4 and docs/provider.md), on two
 * fastify apps: the main API and the card-data API. Bodies are read raw (the signatures cover the exact
 * bytes) and parsed losslessly. Each route has an endpoint name for the fault settings.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from '../logger.ts';
import { parseProviderJson, stringifyProviderJson } from '../provider/json.ts';
import type { AccountRegistry, SandboxAccount } from './accounts.ts';
import { createCardDeposit, createDeposit, type DepositContext } from './deposits.ts';
import type { SandboxEngine } from './engine.ts';
import type { EndpointName, Faults } from './faults.ts';
import {
  cancelCashout,
  cashoutStatus,
  createCashout,
  createRefund,
  refundStatus,
  updateCashout,
} from './payouts.ts';
import {
  type Answer,
  type AuthOptions,
  CASHOUT_ERRORS,
  checkBearer,
  checkCashoutAuth,
  checkDepositHeaders,
  headerError,
  type IdempotencyStore,
  isAnswer,
  providerError,
  resourceNotFound,
  validationError,
} from './protocol.ts';
import { depositBody } from './views.ts';

export interface ApiDeps {
  engine: SandboxEngine;
  accounts: AccountRegistry;
  faults: Faults;
  idempotency: IdempotencyStore;
  auth: AuthOptions;
  deposits: DepositContext;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    endpoint?: EndpointName;
  }
}

/** Sends an answer; a string is an already-serialized 200 JSON body. */
export function send(reply: FastifyReply, answer: Answer | string): FastifyReply {
  if (typeof answer === 'string') return reply.code(200).type('application/json').send(answer);
  if (answer.headers) reply.headers(answer.headers);
  return reply.code(answer.status).type('application/json').send(stringifyProviderJson(answer.body));
}

function rawOf(req: FastifyRequest): string {
  return typeof req.body === 'string' ? req.body : '';
}

/**
 * Registers the raw-body parser, the fault hook and the provider-style error answer on an app (the
 * simulator answers as the provider does, not with payrecon's own errors); failures go to `log`.
 */
export function installCommon(app: FastifyInstance, faults: Faults, log?: Pick<Logger, 'error'>): void {
  app.setErrorHandler((err, req, reply) => {
    const status = (err as { statusCode?: number }).statusCode ?? 500;
    // Only the method and path: bodies may carry card data and credentials.
    if (status >= 500)
      log?.error({ err, method: req.method, path: req.routeOptions.url }, 'sandbox request failed');
    return reply
      .code(status)
      .type('application/json')
      .send({
        code: status,
        description: status >= 500 ? 'Internal error' : String((err as Error).message),
        type: 'ERROR',
      });
  });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (req, body, done) => {
    const refused = refuseBody(req, body as Buffer);
    if (typeof refused === 'string') done(null, refused);
    else done(refused, undefined);
  });
  app.addHook('onRequest', (req, reply, done) => {
    const endpoint = req.routeOptions.config.endpoint;
    // Fast path: no fault configured, no promise, no draw.
    if (!endpoint || faults.quiet) {
      done();
      return;
    }
    const decision = faults.decide(endpoint);
    const act = () => {
      switch (decision.kind) {
        case 'none':
          done();
          return;
        case 'hang':
          // Never answer: the connection stays open until the client gives up or the sandbox closes.
          reply.hijack();
          return;
        case 'rate_limit':
          reply
            .code(429)
            .header('retry-after', String(decision.retryAfterSeconds))
            .type('application/json')
            .send({ code: 429, description: 'Too many requests', type: 'RATE_LIMITED' });
          return;
        case 'error':
          reply.code(decision.status).type('application/json').send({
            code: decision.status,
            description: 'Service unavailable (sandbox fault)',
            type: 'SERVER_ERROR',
          });
          return;
      }
    };
    if (decision.latencyMs > 0) setTimeout(act, decision.latencyMs);
    else act();
  });
}

// BOM kept: the signatures cover the exact bytes, so the text must give them back.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

function httpError(statusCode: number, message: string): Error {
  return Object.assign(new Error(message), { statusCode });
}

/**
 * The body as text, or why it is refused: a Content-Encoding (the sandbox takes no compressed bodies:
 * 415, RFC 9110), a Content-Type other than application/json on an API route (the contract's headers;
 * the pages take forms), bytes that are not UTF-8 (400; decoding them with replacement characters
 * would check the signature against other bytes than those sent).
 */
function refuseBody(req: FastifyRequest, body: Buffer): string | Error {
  const encoding = req.headers['content-encoding']?.trim().toLowerCase();
  if (encoding && encoding !== 'identity') {
    return httpError(415, `Content-Encoding ${encoding} is not supported`);
  }
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (req.routeOptions.config.endpoint && type !== 'application/json') {
    return httpError(415, 'Content-Type must be application/json');
  }
  try {
    return utf8.decode(body);
  } catch {
    return httpError(400, 'Body is not valid UTF-8');
  }
}

function parseJsonBody(raw: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: parseProviderJson(raw) };
  } catch {
    return { ok: false };
  }
}

function parsePlainJson(raw: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(raw) };
  } catch {
    return { ok: false };
  }
}

function idempotencyKey(req: FastifyRequest): string | undefined {
  const v = req.headers['x-idempotency-key'];
  return Array.isArray(v) ? v[0] : v;
}

/** Deposit-style POST: header auth, idempotency, JSON body. */
async function depositStylePost(
  deps: ApiDeps,
  req: FastifyRequest,
  scope: string,
  handler: (account: SandboxAccount, body: unknown) => Answer | Promise<Answer>,
  invalidJson: () => Answer,
): Promise<Answer> {
  const raw = rawOf(req);
  const account = checkDepositHeaders(req.headers, raw, deps.accounts, deps.auth);
  if (isAnswer(account)) return account;
  return deps.idempotency.run(
    `${account.name}:${scope}`,
    idempotencyKey(req),
    raw,
    () => headerError(104),
    async () => {
      const parsed = parseJsonBody(raw);
      if (!parsed.ok) return invalidJson();
      return handler(account, parsed.value);
    },
  );
}

export function registerMainApi(app: FastifyInstance, deps: ApiDeps): void {
  const { engine } = deps;

  app.post('/v3/deposits', { config: { endpoint: 'deposit.create' } }, async (req, reply) =>
    send(
      reply,
      await depositStylePost(
        deps,
        req,
        'deposits',
        (account, body) => createDeposit(deps.deposits, account, body),
        () => validationError(['body: must be valid JSON']),
      ),
    ),
  );

  app.get<{ Params: { id: string } }>(
    '/v3/deposits/:id',
    { config: { endpoint: 'deposit.status' } },
    async (req, reply) => {
      const account = checkDepositHeaders(req.headers, '', deps.accounts, deps.auth);
      if (isAnswer(account)) return send(reply, account);
      const text = req.params.id;
      if (!/^\d{1,15}$/.test(text)) {
        return send(
          reply,
          providerError(400, 300, 'INVALID_PARAMETERS', 'deposit_id not valid', [
            'deposit_id: must be an integer',
          ]),
        );
      }
      const d = engine.deposits.get(Number(text));
      if (!d || d.account !== account.name) return send(reply, resourceNotFound('Deposit not found'));
      return send(reply, depositBody(d, engine.catalogue));
    },
  );

  app.post('/v3/refunds', { config: { endpoint: 'refund.create' } }, async (req, reply) =>
    send(
      reply,
      await depositStylePost(
        deps,
        req,
        'refunds',
        (account, body) => createRefund(engine, account, body),
        () => providerError(400, 300, 'INVALID_PARAMETERS', 'Invalid request', ['body: must be valid JSON']),
      ),
    ),
  );

  app.get<{ Params: { id: string }; Querystring: { voucher?: string } }>(
    '/v3/refunds/:id',
    { config: { endpoint: 'refund.status' } },
    async (req, reply) => {
      const account = checkDepositHeaders(req.headers, '', deps.accounts, deps.auth);
      if (isAnswer(account)) return send(reply, account);
      return send(reply, refundStatus(engine, account, req.params.id, req.query.voucher === 'true'));
    },
  );

  app.get<{ Querystring: { country?: string } }>(
    '/v3/banks',
    { config: { endpoint: 'banks' } },
    async (req, reply) => {
      const account = checkBearer(req.headers, deps.accounts);
      if (isAnswer(account)) return send(reply, account);
      const country = req.query.country;
      if (!country || !/^[A-Z]{2}$/.test(country)) {
        return send(
          reply,
          providerError(400, 300, 'INVALID_PARAMETERS', 'Invalid request', [
            'country: must be an ISO 3166-1 alpha-2 country code',
          ]),
        );
      }
      return send(reply, { status: 200, body: engine.catalogue.banks[country] ?? [] });
    },
  );

  // ---------------------------------------------------------------- cashouts: body credentials

  const cashoutRoute =
    (handler: (account: SandboxAccount, body: unknown) => Answer | string, withIdempotency: boolean) =>
    async (req: FastifyRequest, reply: FastifyReply) => {
      const raw = rawOf(req);
      // Creation carries an amount (lossless parse); status, update and cancel carry only ids and text,
      // where JSON.parse is exact for every valid id (an id past 2^53 fails the schema's integer rule).
      const parsed = withIdempotency ? parseJsonBody(raw) : parsePlainJson(raw);
      if (!parsed.ok || typeof parsed.value !== 'object' || parsed.value === null) {
        return send(reply, CASHOUT_ERRORS.invalidJson());
      }
      const body = parsed.value as Record<string, unknown>;
      const account = checkCashoutAuth(req.headers, raw, body, deps.accounts);
      if (isAnswer(account)) return send(reply, account);
      if (!withIdempotency) return send(reply, handler(account, body));
      const answer = await deps.idempotency.run(
        `${account.name}:cashout`,
        idempotencyKey(req),
        raw,
        CASHOUT_ERRORS.idempotency,
        async () => {
          const a = handler(account, body);
          return typeof a === 'string' ? { status: 200, body: JSON.parse(a) } : a;
        },
      );
      return send(reply, answer);
    };

  app.post(
    '/v3/cashout',
    { config: { endpoint: 'cashout.create' } },
    cashoutRoute((a, b) => createCashout(engine, a, b), true),
  );
  app.post(
    '/v3/cashout/status',
    { config: { endpoint: 'cashout.status' } },
    cashoutRoute((a, b) => cashoutStatus(engine, a, b), false),
  );
  app.put(
    '/v3/cashout/status',
    { config: { endpoint: 'cashout.update' } },
    cashoutRoute((a, b) => updateCashout(engine, a, b), false),
  );
  app.delete(
    '/v3/cashout/cancel',
    { config: { endpoint: 'cashout.cancel' } },
    cashoutRoute((a, b) => cancelCashout(engine, a, b), false),
  );
}

export function registerCardApi(app: FastifyInstance, deps: ApiDeps): void {
  app.post('/v3/deposits', { config: { endpoint: 'card.create' } }, async (req, reply) =>
    send(
      reply,
      await depositStylePost(
        deps,
        req,
        'card-deposits',
        (account, body) => createCardDeposit(deps.deposits, account, body),
        () => providerError(400, 300, 'INVALID_PARAMETERS', 'Invalid request', ['body: must be valid JSON']),
      ),
    ),
  );
}
