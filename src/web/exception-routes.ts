/**
 * The exception queue's routes on the page (issue 18 point 2), registered by `webRoutes` (src/web/app.ts)
 * on its own encapsulated instance: sign-in, CSRF and the error pages apply as to every page.
 */
import type { FastifyInstance } from 'fastify';
import {
  AGE_BUCKETS,
  type AgeBucketKey,
  EXCEPTION_STATES,
  type ExceptionFilter,
  type ExceptionState,
  type ExceptionView,
  exceptionsPage,
} from './exception-views.ts';
import { field, type PageKit } from './page-kit.ts';

/** What the queue reads and does; implemented over the ledger database by src/web/services.ts. */
export interface ExceptionServices {
  list(filter: ExceptionFilter, now: Date): Promise<ExceptionView[]>;
  types(): Promise<string[]>;
  /** Acknowledges or resolves; false when the exception does not exist or is already resolved. */
  act(
    id: string,
    action: 'acknowledge' | 'resolve',
    note: string | null,
    username: string,
    now: Date,
  ): Promise<boolean>;
  /**
   * An operator's decision on an ILLEGAL_TRANSITION (src/db/decisions.ts): accept the provider's status
   * (the ledger books to match) or keep the ledger's. Throws NOT_FOUND, CONFLICT or VALIDATION_FAILED.
   */
  decide?(
    id: string,
    decision: 'accept-provider' | 'keep-ledger',
    note: string,
    username: string,
    now: Date,
  ): Promise<void>;
}

export function exceptionRoutes(app: FastifyInstance, kit: PageKit, services: ExceptionServices): void {
  const { base, now, ctx, send, problem, refuseUnless } = kit;

  app.get<{ Querystring: Record<string, string | undefined> }>('/exceptions', async (request, reply) => {
    const q = request.query;
    const filter: ExceptionFilter = {};
    if (q.type) filter.type = q.type;
    if (q.state && (EXCEPTION_STATES as readonly string[]).includes(q.state))
      filter.state = q.state as ExceptionState;
    if (q.age && AGE_BUCKETS.some((b) => b.key === q.age)) filter.age = q.age as AgeBucketKey;
    const at = now();
    const [rows, types] = await Promise.all([services.list(filter, at), services.types()]);
    const notice =
      q.done === 'acknowledge'
        ? 'Exception acknowledged.'
        : q.done === 'resolve'
          ? 'Exception resolved.'
          : q.done === 'accept-provider'
            ? "Exception resolved: the provider's status is accepted and the ledger booked to match."
            : q.done === 'keep-ledger'
              ? "Exception resolved: the ledger's status is kept."
              : null;
    return send(reply, exceptionsPage(ctx(request), rows, types, filter, at, notice));
  });

  app.post<{ Params: { id: string } }>('/exceptions/:id', async (request, reply) => {
    const refused = refuseUnless(request, reply, 'work-exceptions');
    if (refused) return refused;
    const action = field(request.body, 'action');
    const note = (field(request.body, 'note') ?? '').trim().slice(0, 1000) || null;
    const username = request.session?.username ?? 'unknown';
    if ((action === 'accept-provider' || action === 'keep-ledger') && services.decide) {
      if (!note) {
        return problem(
          request,
          reply,
          400,
          'Note required',
          'A note is required: say why the decision is right.',
        );
      }
      try {
        await services.decide(request.params.id, action, note, username, now());
      } catch (err) {
        const code = (err as { code?: string }).code;
        if (code === 'NOT_FOUND' || code === 'CONFLICT') {
          return problem(request, reply, 409, 'Not done', (err as Error).message);
        }
        throw err;
      }
      kit.logger?.info({ exception: request.params.id, action, username }, 'exception decided from the page');
      return reply.redirect(`${base}/exceptions?done=${action}`, 303);
    }
    if (action !== 'acknowledge' && action !== 'resolve') {
      return problem(request, reply, 400, 'Request refused', 'Unknown action.');
    }
    const ok = await services.act(request.params.id, action, note, username, now());
    if (!ok) return problem(request, reply, 409, 'Not done', 'Exception not found or already resolved.');
    kit.logger?.info({ exception: request.params.id, action, username }, 'exception updated from the page');
    return reply.redirect(`${base}/exceptions?done=${action}`, 303);
  });
}
