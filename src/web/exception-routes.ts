/**
 * The exception queue's routes on the page, registered by `webRoutes` (src/web/app.ts)
 * on its own encapsulated instance: sign-in, CSRF and the error pages apply as to every page. Every read
 * and write goes through the queue's functions in src/db (the ones the API uses), so a filter, a due
 * time, a state change or an export means the same on the page and in `/api/v1`. Viewers read; moves
 * need the operator role (`work-exceptions`); accepting the provider's status or facts is proposed, and
 * only a controller who did not propose it approves or rejects it (`approve-booking`).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { type BulkDecisionOutcome, BulkDecisionRefused } from '../db/exceptions/bulk-decisions.ts';
import type {
  BulkResult,
  QueueChange,
  QueueChangeResult,
  QueueEvent,
  QueueFilter,
} from '../db/exceptions/queue.ts';
import type { PaidAmount } from '../db/read-models/payments.ts';
import { MOVE_FROM } from '../domain/exception-queue.ts';
import { parseAmount } from '../domain/money.ts';
import { roleCan } from '../domain/roles.ts';
import { DECISION_WORKBOOK_MAX_BYTES } from '../reports/decision-workbook.ts';
import { queueCsvName } from '../reports/exception-csv.ts';
import {
  AGE_BUCKETS,
  type AgeBucketKey,
  EXCEPTION_CSS,
  EXCEPTION_STATES,
  type ExceptionState,
  type ExceptionView,
  exceptionPage,
  exceptionsPage,
  QUEUE_FORM_FIELDS,
  type QueueForm,
  uploadRefusedPage,
} from './exception-views.ts';
import { acceptMultipart, fileOf } from './multipart.ts';
import { field, fields, type PageKit } from './page-kit.ts';

/** What the queue reads and does; implemented over the ledger database by src/web/services.ts. */
export interface ExceptionServices {
  /** A page of the queue: `limit` rows after the exception id `afterId`, oldest id first. */
  list(filter: QueueFilter, now: Date, limit: number, afterId: string | null): Promise<ExceptionView[]>;
  ageCounts(filter: QueueFilter, now: Date): Promise<Record<AgeBucketKey, number>>;
  get(id: string, now: Date): Promise<{ exception: ExceptionView; events: QueueEvent[] } | null>;
  types(): Promise<string[]>;
  accounts(): Promise<string[]>;
  /**
   * A state change, an assignment or a comment, with its audit event; resolving an ILLEGAL_TRANSITION or
   * FACTS_CHANGED answers `needs_decision` (see `decide`).
   */
  change(id: string, change: QueueChange, username: string, now: Date): Promise<QueueChangeResult>;
  /** Acknowledge or resolve many with one note; an ILLEGAL_TRANSITION is never resolved in bulk. */
  bulk(
    ids: readonly string[],
    state: 'acknowledged' | 'resolved',
    note: string,
    username: string,
    now: Date,
  ): Promise<BulkResult>;
  /** The filtered queue as the API's CSV export. */
  csv(filter: QueueFilter, now: Date): Promise<Buffer>;
  /**
   * What the customer paid, for the rows whose facts need it (a PROVIDER_AMOUNT_MISMATCH), keyed by
   * `paidKey` (src/db/read-models/payments.ts); absent: the facts say it is not known.
   */
  paid?(rows: readonly ExceptionView[]): Promise<ReadonlyMap<string, PaidAmount>>;
  /**
   * A decision on an ILLEGAL_TRANSITION or FACTS_CHANGED (src/db/exceptions/decisions.ts): keeping the
   * ledger's resolves at once; accepting the provider's is proposed (nothing booked) for a controller to
   * approve. Throws NOT_FOUND, CONFLICT or VALIDATION_FAILED.
   */
  decide?(
    id: string,
    decision: 'accept-provider' | 'keep-ledger',
    note: string,
    username: string,
    now: Date,
  ): Promise<'decided' | 'proposed'>;
  /** A controller approves the proposed decision (booked now); FORBIDDEN for the proposer. */
  approve?(id: string, note: string | null, username: string, now: Date): Promise<void>;
  /** A controller rejects the proposed decision (nothing booked). */
  reject?(id: string, note: string, username: string, now: Date): Promise<void>;
  /**
   * The decisions of an exception workbook uploaded back, all applied or none
   * (src/reports/decision-workbook.ts): throws `BulkDecisionRefused` naming every refused row, or
   * VALIDATION_FAILED for the file.
   */
  decideWorkbook?(
    bytes: Uint8Array,
    username: string,
    mayApprove: boolean,
    now: Date,
  ): Promise<BulkDecisionOutcome[]>;
}

const PAGE_SIZE = 50;

/** The filter of a form as typed, with a message for each field that does not parse (left out). */
export function parseQueueForm(q: Record<string, string | undefined>): {
  form: QueueForm;
  filter: QueueFilter;
  errors: string[];
} {
  const form = Object.fromEntries(
    QUEUE_FORM_FIELDS.map((k) => [k, (q[k] ?? '').trim().slice(0, 200)]),
  ) as unknown as QueueForm;
  const filter: QueueFilter = {};
  const errors: string[] = [];
  if (form.type) filter.type = form.type;
  if (form.state) {
    if ((EXCEPTION_STATES as readonly string[]).includes(form.state))
      filter.state = form.state as ExceptionState;
    else errors.push(`State: one of ${EXCEPTION_STATES.join(', ')}.`);
  }
  if (form.assignee) filter.assignee = form.assignee === '-' ? null : form.assignee;
  if (form.account) filter.merchantAccount = form.account;
  if (form.currency) {
    if (/^[A-Za-z]{3}$/.test(form.currency)) filter.currency = form.currency.toUpperCase();
    else errors.push('Currency: a three-letter code such as BRL.');
  }
  if (form.age) {
    if (AGE_BUCKETS.some((b) => b.key === form.age)) filter.age = form.age as AgeBucketKey;
    else errors.push('Age: one of the buckets.');
  }
  const amount = (text: string, label: string) => {
    try {
      return parseAmount(text.replace(/,/g, ''), { field: label });
    } catch {
      errors.push(`${label}: a decimal amount with at most 2 decimals, such as 1500.00.`);
      return undefined;
    }
  };
  if (form.min) {
    const v = amount(form.min, 'Amount from');
    if (v !== undefined) filter.minAmount = v;
  }
  if (form.max) {
    const v = amount(form.max, 'Amount to');
    if (v !== undefined) filter.maxAmount = v;
  }
  if (
    filter.minAmount !== undefined &&
    filter.maxAmount !== undefined &&
    filter.minAmount > filter.maxAmount
  ) {
    errors.push('Amount: the first bound must not be above the second.');
    delete filter.maxAmount;
  }
  if (form.overdue) {
    if (form.overdue === 'true' || form.overdue === 'false') filter.overdue = form.overdue === 'true';
    else errors.push('Due: overdue or not overdue.');
  }
  return { form, filter, errors };
}

const DONE: Record<string, string> = {
  acknowledge: 'Exception acknowledged.',
  resolve: 'Exception resolved.',
  review: 'Exception in review.',
  take: 'You took the exception.',
  assign: 'Assignee changed.',
  comment: 'Comment added.',
  'accept-provider':
    "Exception resolved: the provider's status or facts are accepted and the ledger booked to match.",
  proposed: 'Decision proposed: nothing is booked until a controller who did not propose it approves it.',
  approve: "Decision approved: the provider's status or facts are accepted and the ledger booked to match.",
  reject: 'Proposal rejected: nothing was booked; the exception stays open.',
  'keep-ledger': "Exception resolved: the ledger's status and bookings are kept.",
};

export function exceptionRoutes(app: FastifyInstance, kit: PageKit, services: ExceptionServices): void {
  const { base, now, ctx, send, problem, refuseUnless } = kit;

  /** Where to go after a move: the page it was made on (the queue or an exception), else the queue. */
  const backTo = (request: FastifyRequest, params: Record<string, string>) => {
    const back = field(request.body, 'back') ?? '';
    const safe =
      back.startsWith(`${base}/exceptions`) && !back.startsWith('//') ? back : `${base}/exceptions`;
    const url = new URL(safe, 'http://page');
    for (const k of ['done', 'changed', 'unchanged']) url.searchParams.delete(k);
    for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
    return `${url.pathname}${url.search}`;
  };

  const notice = (q: Record<string, string | undefined>) => {
    if (q.done === 'bulk-acknowledge' || q.done === 'bulk-resolve') {
      const n = Number(q.changed ?? 0);
      const left = Number(q.unchanged ?? 0);
      return `${n} exception${n === 1 ? '' : 's'} ${q.done === 'bulk-resolve' ? 'resolved' : 'acknowledged'}${
        left ? `; ${left} left as they were (already there, or an illegal move that needs a decision)` : ''
      }.`;
    }
    if (q.done === 'workbook') {
      const parts = (['decided', 'proposed', 'approved', 'rejected'] as const)
        .map((k) => [k, Number(q[k] ?? 0)] as const)
        .filter(([, n]) => n > 0)
        .map(([k, n]) => `${n} ${k}`);
      return `Workbook decisions applied: ${parts.join(', ') || 'none'}.${
        Number(q.proposed ?? 0) > 0
          ? ' Proposals are booked once a controller who did not propose them approves.'
          : ''
      }`;
    }
    return (q.done && DONE[q.done]) || null;
  };

  app.get('/static/exceptions.css', async (_request, reply) =>
    reply
      .header('content-type', 'text/css; charset=utf-8')
      .header('cache-control', 'max-age=3600')
      .send(EXCEPTION_CSS),
  );

  app.get<{ Querystring: Record<string, string | undefined> }>('/exceptions', async (request, reply) => {
    const q = request.query;
    const { form, filter, errors } = parseQueueForm(q);
    const after = q.after && /^\d{1,18}$/.test(q.after) ? q.after : null;
    const at = now();
    const [rows, ageCounts, types, accounts] = await Promise.all([
      services.list(filter, at, PAGE_SIZE + 1, after),
      services.ageCounts(filter, at),
      services.types(),
      services.accounts(),
    ]);
    const pageRows = rows.slice(0, PAGE_SIZE);
    const last = pageRows[pageRows.length - 1];
    const paid = (await services.paid?.(pageRows)) ?? new Map<string, PaidAmount>();
    const page = exceptionsPage(ctx(request), {
      rows: pageRows,
      paid,
      ageCounts,
      types,
      accounts,
      users: kit.users,
      form,
      after,
      nextAfter: rows.length > PAGE_SIZE && last ? last.id : null,
      now: at,
      notice: notice(q),
      error: errors.length ? errors.join(' ') : null,
    });
    return send(reply, page, errors.length ? 400 : 200);
  });

  app.get<{ Querystring: Record<string, string | undefined> }>(
    '/exceptions/export',
    async (request, reply) => {
      const { filter, errors } = parseQueueForm(request.query);
      if (errors.length) return problem(request, reply, 400, 'Request refused', errors.join(' '));
      const at = now();
      const body = await services.csv(filter, at);
      return reply
        .header('content-type', 'text/csv; charset=utf-8')
        .header('content-length', String(body.length))
        .header('content-disposition', `attachment; filename="${queueCsvName(at)}"`)
        .send(body);
    },
  );

  app.post('/exceptions/bulk', async (request, reply) => {
    const refused = refuseUnless(request, reply, 'work-exceptions');
    if (refused) return refused;
    const action = field(request.body, 'action');
    const note = (field(request.body, 'note') ?? '').trim().slice(0, 1000);
    const ids = fields(request.body, 'ids').slice(0, 500);
    if (action !== 'acknowledge' && action !== 'resolve') {
      return problem(request, reply, 400, 'Request refused', 'Unknown action.');
    }
    if (ids.length === 0) return problem(request, reply, 400, 'Nothing selected', 'Select the rows first.');
    if (!note) return problem(request, reply, 400, 'Note required', 'A note is required for a bulk change.');
    const username = request.session?.username ?? 'unknown';
    const state = action === 'resolve' ? 'resolved' : 'acknowledged';
    const result = await services.bulk(ids, state, note, username, now());
    kit.logger?.info(
      { action, username, changed: result.changed.length, unchanged: result.unchanged.length },
      'exceptions changed in bulk from the page',
    );
    return reply.redirect(
      backTo(request, {
        done: `bulk-${action}`,
        changed: String(result.changed.length),
        unchanged: String(result.unchanged.length + result.notFound.length),
      }),
      303,
    );
  });

  // The exception workbook uploaded back (a multipart form): its decisions, all applied or none.
  const decideWorkbook = services.decideWorkbook;
  if (decideWorkbook) {
    app.register(async (upload) => {
      acceptMultipart(upload, DECISION_WORKBOOK_MAX_BYTES + 64 * 1024);
      upload.post('/exceptions/decisions', async (request, reply) => {
        const refused = refuseUnless(request, reply, 'work-exceptions');
        if (refused) return refused;
        const file = fileOf(request.body, 'workbook');
        if (!file || file.bytes.byteLength === 0) {
          return problem(request, reply, 400, 'No file', 'Choose the exception workbook to upload.');
        }
        const username = request.session?.username ?? 'unknown';
        const page = ctx(request);
        const mayApprove = page.role !== undefined && roleCan(page.role, 'approve-booking');
        let outcomes: BulkDecisionOutcome[];
        try {
          outcomes = await decideWorkbook(file.bytes, username, mayApprove, now());
        } catch (err) {
          if (err instanceof BulkDecisionRefused) {
            kit.logger?.info({ username, rows: err.lines.length }, 'workbook decisions refused');
            return send(reply, uploadRefusedPage(page, file.fileName, err.lines), 422);
          }
          if ((err as { code?: string }).code === 'VALIDATION_FAILED') {
            return send(reply, uploadRefusedPage(page, file.fileName, [(err as Error).message]), 422);
          }
          throw err;
        }
        const count = (o: BulkDecisionOutcome['outcome']) =>
          String(outcomes.filter((x) => x.outcome === o).length);
        kit.logger?.info({ username, rows: outcomes.length }, 'workbook decisions applied from the page');
        return reply.redirect(
          `${base}/exceptions?${new URLSearchParams({
            done: 'workbook',
            decided: count('decided'),
            proposed: count('proposed'),
            approved: count('approved'),
            rejected: count('rejected'),
          })}`,
          303,
        );
      });
    });
  }

  app.get<{ Params: { id: string }; Querystring: Record<string, string | undefined> }>(
    '/exceptions/:id',
    async (request, reply) => {
      const at = now();
      const item = await services.get(request.params.id, at);
      if (!item)
        return problem(request, reply, 404, 'Exception not found', 'There is no exception with this id.');
      const paid = (await services.paid?.([item.exception])) ?? new Map<string, PaidAmount>();
      return send(
        reply,
        exceptionPage(ctx(request), item.exception, item.events, kit.users, at, notice(request.query), paid),
      );
    },
  );

  app.post<{ Params: { id: string } }>('/exceptions/:id', async (request, reply) => {
    const refused = refuseUnless(request, reply, 'work-exceptions');
    if (refused) return refused;
    const action = field(request.body, 'action') ?? '';
    const note = (field(request.body, 'note') ?? '').trim().slice(0, 1000) || null;
    const username = request.session?.username ?? 'unknown';
    const id = request.params.id;
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
      let outcome: 'decided' | 'proposed';
      try {
        outcome = await services.decide(id, action, note, username, now());
      } catch (err) {
        const code = (err as { code?: string }).code;
        if (code === 'NOT_FOUND' || code === 'CONFLICT') {
          return problem(request, reply, 409, 'Not done', (err as Error).message);
        }
        throw err;
      }
      kit.logger?.info({ exception: id, action, username, outcome }, 'exception decided from the page');
      return reply.redirect(backTo(request, { done: outcome === 'proposed' ? 'proposed' : action }), 303);
    }
    if (action === 'approve' || action === 'reject') {
      // Approving or rejecting a decision that re-books the ledger is a controller's.
      const denied = refuseUnless(request, reply, 'approve-booking');
      if (denied) return denied;
      if (action === 'reject' && !note) {
        return problem(
          request,
          reply,
          400,
          'Note required',
          'A note is required: say why the proposal is wrong.',
        );
      }
      try {
        if (action === 'approve') await services.approve?.(id, note, username, now());
        else await services.reject?.(id, note ?? '', username, now());
      } catch (err) {
        const code = (err as { code?: string }).code;
        if (code === 'FORBIDDEN') return problem(request, reply, 403, 'Not allowed', (err as Error).message);
        if (code === 'NOT_FOUND' || code === 'CONFLICT') {
          return problem(request, reply, 409, 'Not done', (err as Error).message);
        }
        throw err;
      }
      kit.logger?.info({ exception: id, action, username }, 'proposed decision answered from the page');
      return reply.redirect(backTo(request, { done: action }), 303);
    }
    let change: QueueChange;
    if (action === 'acknowledge') {
      change = { kind: 'state', state: 'acknowledged', note, from: MOVE_FROM.acknowledged };
    } else if (action === 'resolve') {
      change = { kind: 'state', state: 'resolved', note };
    } else if (action === 'review') {
      change = { kind: 'state', state: 'in_review', note, from: MOVE_FROM.in_review };
    } else if (action === 'take') {
      change = { kind: 'assign', assignee: username, note };
    } else if (action === 'assign') {
      const assignee = field(request.body, 'assignee') || null;
      if (assignee !== null && !kit.users.includes(assignee)) {
        return problem(request, reply, 400, 'Request refused', 'Assign to one of the page’s users.');
      }
      change = { kind: 'assign', assignee, note };
    } else if (action === 'comment') {
      if (!note) return problem(request, reply, 400, 'Comment required', 'Write the comment first.');
      change = { kind: 'comment', note };
    } else {
      return problem(request, reply, 400, 'Request refused', 'Unknown action.');
    }
    const result = await services.change(id, change, username, now());
    if (result === 'not_found')
      return problem(request, reply, 404, 'Not done', 'There is no exception with this id.');
    if (result === 'needs_decision') {
      return problem(
        request,
        reply,
        409,
        'Not done',
        "This exception is resolved by a decision: accept the provider's status or facts, or keep the ledger's, with a note.",
      );
    }
    if (result === 'unchanged') {
      return problem(
        request,
        reply,
        409,
        'Not done',
        change.kind === 'assign'
          ? 'The exception already has this assignee.'
          : 'Exception already resolved, or already in that state.',
      );
    }
    kit.logger?.info({ exception: id, action, username }, 'exception updated from the page');
    return reply.redirect(backTo(request, { done: action }), 303);
  });
}
