/**
 * The Reconciliation pages, registered by `webRoutes` (src/web/app.ts): sign-in, CSRF and the error
 * pages apply as to every page. Everyone signed in reads them; operators and controllers (work-exceptions)
 * match lines by hand and end matches, each with a note, recorded under their user name.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ReconciliationAccountRow, ReconciliationDay } from '../db/read-models/reconciliation.ts';
import { AppError } from '../domain/errors.ts';
import { field, fields, type PageKit } from './page-kit.ts';
import {
  type BankFeed,
  dayPath,
  RECONCILIATION_CSS,
  reconciliationDayPage,
  reconciliationListPage,
} from './reconciliation-views.ts';

/** What the pages read and do; implemented by src/web/reconciliation-services.ts. */
export interface ReconciliationServices {
  accounts(): Promise<ReconciliationAccountRow[]>;
  /** Where the bank accounts and statements come from (absent: configured, nothing more said). */
  feed?(): Promise<BankFeed>;
  /** The day of a configured bank account, or null when no such bank account is configured. */
  day(bankAccount: string, date: string, now: Date): Promise<ReconciliationDay | null>;
  /** The bank account and day an exception's entity (bank_line, settlement) is reconciled on. */
  locate(kind: string, entityId: string): Promise<{ bankAccount: string; date: string } | null>;
  /** Matches bank lines to settlements by hand; throws VALIDATION_FAILED, NOT_FOUND or CONFLICT. */
  match(lines: string[], settlements: string[], note: string, by: string, now: Date): Promise<string>;
  /** Ends a live match; throws VALIDATION_FAILED or NOT_FOUND. */
  unmatch(matchId: string, note: string, by: string, now: Date): Promise<{ id: string; rule: string }>;
}

const DATE_RE = /^\d{4}-\d{2}-\d{2}$/;
type Params = { bankAccount: string; date: string };

export function reconciliationRoutes(
  app: FastifyInstance,
  kit: PageKit,
  services: ReconciliationServices,
): void {
  const { base, now, ctx, send, problem, refuseUnless } = kit;

  app.get('/static/reconciliation.css', async (_request, reply) =>
    reply
      .header('content-type', 'text/css; charset=utf-8')
      .header('cache-control', 'max-age=3600')
      .send(RECONCILIATION_CSS),
  );

  app.get('/reconciliation', async (request, reply) =>
    send(
      reply,
      reconciliationListPage(ctx(request), await services.accounts(), (await services.feed?.()) ?? null),
    ),
  );

  app.get<{ Params: { kind: string; id: string } }>(
    '/reconciliation/for/:kind/:id',
    async (request, reply) => {
      const at = await services.locate(request.params.kind, request.params.id);
      if (!at) {
        return problem(request, reply, 404, 'Day not found', 'No bank account and day reconcile this line.');
      }
      return reply.redirect(dayPath(ctx(request), at.bankAccount, at.date), 303);
    },
  );

  const day = async (
    request: FastifyRequest<{ Params: Params }>,
    reply: FastifyReply,
    notice: string | null,
  ) => {
    const { bankAccount, date } = request.params;
    const view = DATE_RE.test(date) ? await services.day(bankAccount, date, now()) : null;
    if (!view) {
      return problem(
        request,
        reply,
        404,
        'Day not found',
        'A reconciliation day is addressed by a configured bank account and a date (YYYY-MM-DD).',
        { href: `${base}/reconciliation`, label: 'Back to the bank accounts' },
      );
    }
    return send(reply, reconciliationDayPage(ctx(request), view, notice));
  };

  app.get<{ Params: Params; Querystring: { done?: string; match?: string } }>(
    '/reconciliation/:bankAccount/:date',
    async (request, reply) => {
      const { done, match } = request.query;
      const id = match && /^\d{1,18}$/.test(match) ? match : null;
      const notice =
        id === null
          ? null
          : done === 'match'
            ? `Match ${id} made by hand; the exceptions it covers are resolved.`
            : done === 'unmatch'
              ? `Match ${id} ended; its lines are unmatched again, left to persons, and the next matching run raises their exceptions again.`
              : null;
      return day(request, reply, notice);
    },
  );

  for (const action of ['match', 'unmatch'] as const) {
    app.post<{ Params: Params }>(`/reconciliation/:bankAccount/:date/${action}`, async (request, reply) => {
      const { bankAccount, date } = request.params;
      const back = { href: dayPath(ctx(request), bankAccount, date), label: 'Back to the day' };
      const refused = refuseUnless(request, reply, 'work-exceptions', back);
      if (refused) return refused;
      const username = request.session?.username ?? 'unknown';
      const note = field(request.body, 'note') ?? '';
      let id: string;
      try {
        if (action === 'match') {
          const lines = fields(request.body, 'lines');
          const settlements = fields(request.body, 'with');
          if (settlements.length === 0) {
            return problem(request, reply, 400, 'Not matched', 'Pick at least one settlement.', back);
          }
          id = await services.match(lines, settlements, note, username, now());
        } else {
          id = (await services.unmatch(field(request.body, 'match') ?? '', note, username, now())).id;
        }
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
        const title = action === 'match' ? 'Not matched' : 'Not unmatched';
        if (err.code === 'VALIDATION_FAILED') return problem(request, reply, 400, title, err.message, back);
        if (err.code === 'CONFLICT' || err.code === 'NOT_FOUND') {
          return problem(request, reply, 409, title, err.message, back);
        }
        throw err;
      }
      kit.logger?.info({ bankAccount, date, action, match: id, username }, 'match by hand from the page');
      return reply.redirect(`${back.href}?done=${action}&match=${id}`, 303);
    });
  }
}
