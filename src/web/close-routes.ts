/**
 * The month close's routes on the page, registered by `webRoutes` (src/web/app.ts):
 * sign-in, CSRF and the error pages apply as to every page. Everyone signed in sees the closes; only a
 * controller prepares, signs and approves, and never their own close.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { CLOSE_PERIOD_RE } from '../domain/close.ts';
import { AppError } from '../domain/errors.ts';
import {
  CLOSE_CSS,
  type CloseList,
  type ClosePageView,
  closePage,
  closePath,
  closesListPage,
} from './close-views.ts';
import type { PageKit } from './page-kit.ts';

/** What the close pages read and do; implemented over the ledger database by src/web/close-services.ts. */
export interface CloseServices {
  /**
   * Per merchant account and currency, the months from its first posting's to the last complete one,
   * newest first, with their closes; and the ledgers with no such month yet.
   */
  list(now: Date): Promise<CloseList>;
  /** One month's close page, or null when the account and currency have no ledger. */
  page(account: string, currency: string, period: string, now: Date): Promise<ClosePageView | null>;
  /** Prepares and signs; throws CONFLICT (not over, already signed, proof not zero). */
  prepare(account: string, currency: string, period: string, by: string, now: Date): Promise<void>;
  /** Approves; throws FORBIDDEN (own close), NOT_FOUND (not prepared) or CONFLICT (already approved). */
  approve(account: string, currency: string, period: string, by: string, now: Date): Promise<void>;
}

type Params = { account: string; currency: string; period: string };

const DONE: Record<string, string> = {
  prepare:
    'Close prepared and signed: its figures are frozen with their SHA-256. Another controller must approve it.',
  approve: 'Close approved.',
};

export function closeRoutes(app: FastifyInstance, kit: PageKit, services: CloseServices): void {
  const { base, now, ctx, send, problem, refuseUnless } = kit;

  app.get('/static/close.css', async (_request, reply) =>
    reply
      .header('content-type', 'text/css; charset=utf-8')
      .header('cache-control', 'max-age=3600')
      .send(CLOSE_CSS),
  );

  app.get('/closes', async (request, reply) =>
    send(reply, closesListPage(ctx(request), await services.list(now()))),
  );

  const notAMonth = (request: FastifyRequest, reply: FastifyReply) =>
    problem(
      request,
      reply,
      404,
      'Close not found',
      'A close is addressed by account, currency and month (YYYY-MM).',
    );

  app.get<{ Params: Params; Querystring: { done?: string } }>(
    '/closes/:account/:currency/:period',
    async (request, reply) => {
      const { account, currency, period } = request.params;
      if (!CLOSE_PERIOD_RE.test(period)) return notAMonth(request, reply);
      const view = await services.page(account, currency, period, now());
      if (!view) {
        return problem(request, reply, 404, 'Close not found', `No ledger for ${account} in ${currency}.`);
      }
      const done = request.query.done;
      return send(reply, closePage(ctx(request), view, (done && DONE[done]) || null));
    },
  );

  for (const action of ['prepare', 'approve'] as const) {
    app.post<{ Params: Params }>(`/closes/:account/:currency/:period/${action}`, async (request, reply) => {
      const { account, currency, period } = request.params;
      if (!CLOSE_PERIOD_RE.test(period)) return notAMonth(request, reply);
      // A refusal leads back to the close it was asked from.
      const back = { href: closePath(ctx(request), account, currency, period), label: 'Back to the close' };
      const refused = refuseUnless(request, reply, 'sign-close', back);
      if (refused) return refused;
      const username = request.session?.username ?? 'unknown';
      try {
        await services[action](account, currency, period, username, now());
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
        if (err.code === 'FORBIDDEN') return problem(request, reply, 403, 'Not allowed', err.message, back);
        if (err.code === 'CONFLICT' || err.code === 'NOT_FOUND') {
          return problem(request, reply, 409, 'Not done', err.message, back);
        }
        throw err;
      }
      kit.logger?.info({ account, currency, period, action, username }, 'month close from the page');
      const path = [account, currency, period].map(encodeURIComponent).join('/');
      return reply.redirect(`${base}/closes/${path}?done=${action}`, 303);
    });
  }
}
