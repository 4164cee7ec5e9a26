/**
 * The finance page: reports, exceptions and balances behind a sign-in. `webRoutes` is an encapsulated
 * fastify plugin (its own cookie handling, form parser and auth hook) so the pipeline's single server
 * can mount it next to the webhook routes and health endpoints without leaking its auth to them;
 * `buildWebApp` wraps it in a stand-alone app for `payrecon web` and tests.
 */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import fastifyCookie from '@fastify/cookie';
import fastifyFormbody from '@fastify/formbody';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { toAppError } from '../domain/errors.ts';
import { DEFAULT_WEB_ROLE, roleCan, type WebPermission, type WebRole } from '../domain/roles.ts';
import { ENTITY_KINDS, type EntityKind } from '../domain/statuses.ts';
import type { Logger } from '../logger.ts';
import { authenticate, checkCsrf, csrfToken, randomId, type Session, type WebUser } from './auth.ts';
import { type BalanceServices, balanceRoutes } from './balance-routes.ts';
import { type CloseServices, closeRoutes } from './close-routes.ts';
import { type ExceptionServices, exceptionRoutes } from './exception-routes.ts';
import { FAVICON_SVG } from './favicon.ts';
import type { SafeHtml } from './html.ts';
import { type ImportPageServices, importRoutes } from './import-routes.ts';
import { acceptMultipart } from './multipart.ts';
import { field, type PageKit } from './page-kit.ts';
import { type PaymentDetailView, type PaymentView, paymentPage, paymentSearchPage } from './payment-views.ts';
import { type ReconciliationServices, reconciliationRoutes } from './reconciliation-routes.ts';
import {
  DEFAULT_SIGN_IN_LIMITS,
  SignInGuard,
  type SignInLimits,
  Slots,
  type WebSessionStore,
  WebSessions,
} from './sessions.ts';
import {
  type BackLink,
  errorPage,
  loginPage,
  type PageContext,
  type ReportForm,
  type ReportKind,
  type ReportRunView,
  reportPage,
  reportsPage,
  STYLE_CSS,
} from './views.ts';

/** What the page reads and does; implemented over the ledger by `src/web/services.ts`. */
export interface WebServices {
  /** The payment look-up (search box on every page) and a payment's page; absent: no search. */
  payments?: {
    /** Every payment an id names (deposit, invoice, cashout, external, refund or intent id). */
    lookup(id: string): Promise<PaymentView[]>;
    get(account: string, kind: EntityKind, entityId: string): Promise<PaymentDetailView | null>;
  };
  reports: {
    list(limit: number): Promise<ReportRunView[]>;
    get(id: string): Promise<ReportRunView | null>;
    /** Starts a run in the background and returns its id at once. */
    start(params: {
      kind: ReportKind;
      from: string;
      to: string;
      account: string | null;
      requestedBy: string;
    }): Promise<string>;
    /** Absolute path of a downloadable file of a finished run, or null. */
    filePath(id: string, name: string): Promise<string | null>;
    accounts(): Promise<string[]>;
  };
  exceptions: ExceptionServices;
  /** The month close (src/web/close-routes.ts); absent: no close pages. */
  closes?: CloseServices;
  /** The Reconciliation pages (src/web/reconciliation-routes.ts); absent: none. */
  reconciliation?: ReconciliationServices;
  balances: BalanceServices;
  /** The Imports page (src/web/import-routes.ts); absent: no Imports page. */
  imports?: ImportPageServices;
  /** Sessions and failed sign-ins, kept server side (src/web/sessions.ts). */
  sessions: WebSessionStore;
}

export interface WebOptions {
  users: readonly WebUser[];
  /** Signs the session cookie and derives CSRF tokens; at least 32 characters. */
  sessionSecret: string;
  /** Session lifetime; default 8 hours. */
  sessionTtlMs?: number;
  /** IANA time zone for dates on the page (the report time zone). */
  timeZone: string;
  /** Mark cookies Secure: the page is reached over https (PAYRECON_PUBLIC_URL). Default false. */
  secureCookies?: boolean;
  /** Failed sign-ins allowed per typed user name and per address within a window (default 5, 20, 15 min). */
  signInLimits?: SignInLimits;
  services: WebServices;
  now?: () => Date;
  logger?: Logger;
}

const SESSION_COOKIE = 'payrecon_session';
const PRELOGIN_COOKIE = 'payrecon_prelogin';
const DATE_RE = /^\d{4}-\d{2}-\d{2}$/;
/** Where sign-in and the root lead: the balances, the page a finance desk opens the day with. */
const LANDING = '/balances';
/**
 * Password checks (scrypt) of the process's sign-ins: two at once, sixteen waiting; more answer 503, so
 * parallel guesses cannot take libuv's thread pool from the rest of the process.
 */
const PASSWORD_CHECKS = new Slots(2, 16);

declare module 'fastify' {
  interface FastifyRequest {
    session: Session | null;
  }
}

function wantsHtml(request: FastifyRequest): boolean {
  return (request.headers.accept ?? '').includes('text/html');
}

function isoDate(date: Date, timeZone: string): string {
  return new Intl.DateTimeFormat('en-CA', {
    timeZone,
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
  }).format(date);
}

/** The page's routes as an encapsulated plugin; register with `{ prefix }` to mount it under a path. */
export async function webRoutes(app: FastifyInstance, options: WebOptions): Promise<void> {
  if (options.sessionSecret.length < 32) throw new Error('web session secret must be at least 32 characters');
  const now = options.now ?? (() => new Date());
  const ttl = options.sessionTtlMs ?? 8 * 3_600_000;
  const base = app.prefix.replace(/\/$/, '');
  const cookiePath = base || '/';
  const secret = options.sessionSecret;
  const signer = fastifyCookie.signerFactory(secret);
  const { services, timeZone } = options;

  if (!app.hasDecorator('parseCookie')) await app.register(fastifyCookie);
  if (!app.hasContentTypeParser('application/x-www-form-urlencoded')) {
    await app.register(fastifyFormbody, { bodyLimit: 64 * 1024 });
  }
  if (services.imports && !app.hasContentTypeParser('multipart/form-data')) {
    // An upload is read whole (at most PAYRECON_IMPORT_MAX_BYTES and the form around it): the import
    // reads all of a file before it records any of it.
    acceptMultipart(app, services.imports.maxBytes + 1024 * 1024);
  }
  app.decorateRequest('session', null);
  // An error answers the status of its code (toAppError, src/domain/errors.ts), as in every handler.
  app.setErrorHandler((err, request, reply) => {
    const e = toAppError(err);
    if (e.httpStatus >= 500) options.logger?.error({ err }, 'page request failed');
    const message = e.httpStatus >= 500 ? 'Something went wrong on our side; it has been logged.' : e.message;
    return problem(
      request,
      reply,
      e.httpStatus,
      e.httpStatus >= 500 ? 'Server error' : 'Request refused',
      message,
    );
  });
  // An unknown path: the page's own 404 for a browser, fastify's JSON answer for anything else.
  app.setNotFoundHandler((request, reply) => {
    if (!wantsHtml(request)) {
      return reply.code(404).send({
        statusCode: 404,
        error: 'Not Found',
        message: `Route ${request.method}:${request.url.split('?')[0]} not found`,
      });
    }
    return problem(request, reply, 404, 'Page not found', 'There is no page at this address.');
  });

  // Sessions live in the database: sign-out, a removed user and a changed password end them everywhere.
  const sessions = new WebSessions(services.sessions, options.users, ttl, now, options.logger);
  const guard = new SignInGuard(
    services.sessions,
    secret,
    options.signInLimits ?? DEFAULT_SIGN_IN_LIMITS,
    now,
  );

  const cookieOptions = {
    path: cookiePath,
    httpOnly: true,
    sameSite: 'lax' as const,
    secure: options.secureCookies ?? false,
  };

  // The role is read from the configured users at each request: a changed role applies at the next start.
  const roles = new Map(options.users.map((u) => [u.username, u.role ?? DEFAULT_WEB_ROLE]));
  const roleOf = (request: FastifyRequest): WebRole =>
    (request.session && roles.get(request.session.username)) || 'viewer';
  /** Refuses (403, the page's own style) a signed-in user whose role lacks the permission. */
  const refuseUnless = (
    request: FastifyRequest,
    reply: FastifyReply,
    permission: WebPermission,
    back?: BackLink,
  ) => {
    if (roleCan(roleOf(request), permission)) return null;
    options.logger?.warn(
      { username: request.session?.username, role: roleOf(request), permission },
      'web action refused by role',
    );
    return problem(
      request,
      reply,
      403,
      'Not allowed',
      `Your role (${roleOf(request)}) cannot do this.`,
      back,
    );
  };

  const ctx = (request: FastifyRequest): PageContext => ({
    base,
    search: services.payments !== undefined,
    username: request.session?.username ?? null,
    role: roleOf(request),
    csrf: request.session ? csrfToken(secret, request.session.sid) : '',
    timeZone,
  });

  const send = (reply: FastifyReply, page: SafeHtml, status = 200) =>
    reply
      .code(status)
      .header('content-type', 'text/html; charset=utf-8')
      .header('cache-control', 'no-store')
      .header('x-frame-options', 'DENY')
      .header('content-security-policy', "default-src 'self'; style-src 'self'; form-action 'self'")
      .send(page.value);

  /** An error as the page's own styled page for a browser, plain text for anything else. */
  const problem = (
    request: FastifyRequest,
    reply: FastifyReply,
    status: number,
    title: string,
    message: string,
    back?: BackLink,
  ) => {
    if (!wantsHtml(request)) {
      return reply.code(status).header('content-type', 'text/plain; charset=utf-8').send(message);
    }
    return send(reply, errorPage(ctx(request), status, title, message, back), status);
  };

  const isPublic = (url: string): boolean => {
    const path = url.split('?')[0] ?? '';
    return path === `${base}/login` || path === `${base}/favicon.ico` || path.startsWith(`${base}/static/`);
  };

  app.addHook('onRequest', async (request, reply) => {
    const cookie = request.cookies[SESSION_COOKIE];
    if (cookie) {
      const unsigned = signer.unsign(cookie);
      request.session = unsigned.valid && unsigned.value ? await sessions.resolve(unsigned.value) : null;
    }
    // An unknown path answers 404 (the not-found handler) signed in or not.
    if (request.session || request.is404 || isPublic(request.url)) return;
    // Browsers asking for a page are sent to sign in; anything else is plainly refused.
    if (request.method === 'GET' && (request.headers.accept ?? '').includes('text/html')) {
      return reply.code(303).header('location', `${base}/login`).send();
    }
    return reply.code(401).header('content-type', 'text/plain; charset=utf-8').send('sign-in required');
  });

  // Every form post carries the token of the session (or pre-sign-in nonce) that rendered it; a post to
  // an unknown path changes nothing and answers 404 (the not-found handler).
  app.addHook('preHandler', async (request, reply) => {
    if (request.method !== 'POST' || request.is404) return;
    const token = field(request.body, '_csrf');
    const id = request.session ? request.session.sid : request.cookies[PRELOGIN_COOKIE];
    if (id && checkCsrf(secret, id, token)) return;
    return reply
      .code(403)
      .header('content-type', 'text/plain; charset=utf-8')
      .send('invalid or missing form token');
  });

  app.get('/static/style.css', async (_request, reply) =>
    reply
      .header('content-type', 'text/css; charset=utf-8')
      .header('cache-control', 'max-age=3600')
      .send(STYLE_CSS),
  );

  app.get('/favicon.ico', async (_request, reply) =>
    reply.header('content-type', 'image/svg+xml').header('cache-control', 'max-age=86400').send(FAVICON_SVG),
  );

  const users = options.users.map((u) => u.username);
  const kit: PageKit = { base, now, logger: options.logger, users, ctx, send, problem, refuseUnless };
  exceptionRoutes(app, kit, services.exceptions);
  if (services.closes) closeRoutes(app, kit, services.closes);
  if (services.reconciliation) reconciliationRoutes(app, kit, services.reconciliation);
  balanceRoutes(app, kit, services.balances);
  if (services.imports) importRoutes(app, kit, services.imports);

  const renderLogin = (reply: FastifyReply, error: string | null, username = '', status = 200) => {
    const nonce = randomId();
    reply.setCookie(PRELOGIN_COOKIE, nonce, { ...cookieOptions, maxAge: 3600 });
    return send(
      reply,
      loginPage({ base, username: null, csrf: csrfToken(secret, nonce), timeZone }, error, username),
      status,
    );
  };

  app.get('/login', async (request, reply) => {
    if (request.session) return reply.redirect(`${base}${LANDING}`, 303);
    return renderLogin(reply, null);
  });

  app.post('/login', async (request, reply) => {
    const username = (field(request.body, 'username') ?? '').trim();
    const password = field(request.body, 'password') ?? '';
    // The typed name is never logged (people type passwords there): the address, and whether it names a user.
    const address = request.ip;
    const knownUser = options.users.some((u) => u.username === username);
    if (!username || !password) {
      options.logger?.warn({ address, knownUser }, 'web sign-in refused');
      return renderLogin(reply, 'Wrong user name or password.', username, 401);
    }
    const gate = await guard.begin(username, address);
    if (!gate.ok) {
      options.logger?.warn({ address, knownUser }, 'web sign-in refused: too many failures');
      const minutes = Math.ceil(gate.retryAfterSeconds / 60);
      reply.header('retry-after', String(gate.retryAfterSeconds));
      return renderLogin(
        reply,
        `Too many failed sign-ins. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`,
        username,
        429,
      );
    }
    const checked = await PASSWORD_CHECKS.run(() => authenticate(options.users, username, password));
    if (!checked) {
      await guard.withdraw(gate.attempt);
      options.logger?.warn({ address }, 'web sign-in refused: password checks busy');
      reply.header('retry-after', '1');
      return renderLogin(reply, 'Too many sign-ins at once. Try again in a moment.', username, 503);
    }
    const user = checked.value;
    if (!user) {
      options.logger?.warn({ address, knownUser }, 'web sign-in refused');
      return renderLogin(reply, 'Wrong user name or password.', username, 401);
    }
    await guard.succeeded(gate.attempt);
    const { token } = await sessions.start(user);
    reply.clearCookie(PRELOGIN_COOKIE, cookieOptions);
    reply.setCookie(SESSION_COOKIE, signer.sign(token), {
      ...cookieOptions,
      maxAge: Math.floor(ttl / 1000),
    });
    options.logger?.info({ username: user.username }, 'web sign-in');
    return reply.redirect(`${base}${LANDING}`, 303);
  });

  app.post('/logout', async (request, reply) => {
    if (request.session) await sessions.end(request.session.sid, 'signed-out');
    reply.clearCookie(SESSION_COOKIE, cookieOptions);
    return reply.redirect(`${base}/login`, 303);
  });

  app.get('/', async (_request, reply) => reply.redirect(`${base}${LANDING}`, 303));

  const reportsView = async (
    request: FastifyRequest,
    reply: FastifyReply,
    error: string | null,
    status = 200,
    typed?: ReportForm,
  ) => {
    // Default period: this month up to today (in the report time zone).
    const today = isoDate(now(), timeZone);
    const form = typed ?? { from: `${today.slice(0, 8)}01`, to: today };
    const [runs, accounts] = await Promise.all([services.reports.list(50), services.reports.accounts()]);
    return send(reply, reportsPage(ctx(request), runs, accounts, form, error), status);
  };

  app.get('/reports', async (request, reply) => reportsView(request, reply, null));

  app.post('/reports', async (request, reply) => {
    const kind = field(request.body, 'kind');
    const from = field(request.body, 'from') ?? '';
    const to = field(request.body, 'to') ?? '';
    const account = field(request.body, 'account') || null;
    // After an error the form shows again with what was typed.
    const typed: ReportForm = { kind, from, to, account };
    if (kind !== 'settlement' && kind !== 'exceptions')
      return reportsView(request, reply, 'Choose a workbook.', 400, typed);
    if (!DATE_RE.test(from) || !DATE_RE.test(to) || from > to) {
      return reportsView(
        request,
        reply,
        'Give a period as two dates, the first not after the second.',
        400,
        typed,
      );
    }
    if (account !== null && !(await services.reports.accounts()).includes(account)) {
      return reportsView(request, reply, 'Unknown account.', 400, typed);
    }
    const id = await services.reports.start({
      kind,
      from,
      to,
      account,
      requestedBy: request.session?.username ?? 'unknown',
    });
    return reply.redirect(`${base}/reports/${encodeURIComponent(id)}`, 303);
  });

  app.get<{ Params: { id: string } }>('/reports/:id', async (request, reply) => {
    const run = await services.reports.get(request.params.id);
    if (!run) return problem(request, reply, 404, 'Report not found', 'There is no report with this id.');
    return send(reply, reportPage(ctx(request), run));
  });

  app.get<{ Params: { id: string; name: string } }>('/reports/:id/download/:name', async (request, reply) => {
    const path = await services.reports.filePath(request.params.id, request.params.name);
    if (!path) return problem(request, reply, 404, 'File not found', 'This report has no such file.');
    const info = await stat(path).catch(() => null);
    if (!info) {
      // A page whatever the request accepts: a browser following a download link may ask for any type.
      const report = `${base}/reports/${encodeURIComponent(request.params.id)}`;
      const page = errorPage(
        ctx(request),
        410,
        'File no longer kept',
        'This file is no longer kept; generate the report again.',
        { href: report, label: 'Back to the report' },
      );
      return send(reply, page, 410);
    }
    const type = path.endsWith('.csv')
      ? 'text/csv; charset=utf-8'
      : 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet';
    const name = path.split('/').pop() ?? request.params.name;
    return reply
      .header('content-type', type)
      .header('content-length', String(info.size))
      .header('content-disposition', `attachment; filename="${name.replace(/[^\w.-]/g, '_')}"`)
      .send(createReadStream(path));
  });

  const payments = services.payments;
  if (payments) {
    // The search box: one match opens its page; several are listed; none says so (404).
    app.get<{ Querystring: { q?: string } }>('/payments', async (request, reply) => {
      const q = (request.query.q ?? '').trim().slice(0, 200);
      if (!q) return send(reply, paymentSearchPage(ctx(request), q, []));
      const rows = await payments.lookup(q);
      const only = rows.length === 1 ? rows[0] : undefined;
      if (only) {
        const path = [only.merchantAccount, only.kind, only.entityId].map(encodeURIComponent).join('/');
        return reply.redirect(`${base}/payments/${path}`, 303);
      }
      return send(reply, paymentSearchPage(ctx(request), q, rows), rows.length ? 200 : 404);
    });

    app.get<{ Params: { account: string; kind: string; id: string } }>(
      '/payments/:account/:kind/:id',
      async (request, reply) => {
        const { account, kind, id } = request.params;
        const detail = (ENTITY_KINDS as readonly string[]).includes(kind)
          ? await payments.get(account, kind as EntityKind, id)
          : null;
        if (!detail) return problem(request, reply, 404, 'Payment not found', 'No payment has this id.');
        return send(reply, paymentPage(ctx(request), detail));
      },
    );
  }
}

/** A stand-alone fastify app serving only the page (for `payrecon web` and tests). */
export async function buildWebApp(options: WebOptions & { prefix?: string }): Promise<FastifyInstance> {
  const app = Fastify({ logger: false, trustProxy: false });
  await app.register(webRoutes, { ...options, prefix: options.prefix ?? '' });
  return app;
}
