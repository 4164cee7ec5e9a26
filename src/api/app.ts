/**
 * `/api/v1`: the JSON API other back-office services use. `apiRoutes` is an
 * encapsulated fastify plugin (its own auth hook, error handler and not-found handler) that the single
 * server mounts under `/api/v1`; `buildApiApp` wraps it in a stand-alone app for tests. Each route is
 * declared once in `apiRouteTable` and becomes both a fastify route and an OpenAPI operation, served at
 * `/api/v1/openapi.json`. Handlers are thin: parse (done by the route's schemas), call `src/db`, shape.
 */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { Readable } from 'node:stream';
import Fastify, { type FastifyInstance } from 'fastify';
import type { z } from 'zod';
import { getClose, listCloses } from '../db/closes/records.ts';
import { BulkDecisionRefused } from '../db/exceptions/bulk-decisions.ts';
import { approveDecision, decideException, rejectDecision } from '../db/exceptions/decisions.ts';
import {
  getQueueItem,
  listQueue,
  type QueueChange,
  type QueueFilter,
  type QueueRow,
} from '../db/exceptions/queue.ts';
import { changeQueueItem } from '../db/exceptions/queue-service.ts';
import { getImport, type ImportView, listImports } from '../db/imports/read.ts';
import { matchByHand, unmatchByHand } from '../db/matching/by-hand.ts';
import { balances, movements } from '../db/read-models/balances.ts';
import {
  getPayment,
  listPayments,
  lookupPayments,
  type PaymentCursor,
  type PaymentRow,
} from '../db/read-models/payments.ts';
import {
  getMatch,
  listMatches,
  type MatchListRow,
  type ReconciliationBankAccount,
  reconciliationDay,
} from '../db/read-models/reconciliation.ts';
import { latestBalanceChecks } from '../db/read-models/settlements.ts';
import type { Db } from '../db/schema.ts';
import { type ApiTokenEntry, TokenVerifier } from '../domain/api-tokens.ts';
import { AppError } from '../domain/errors.ts';
import { DEFAULT_SLA_TABLE, type SlaTable } from '../domain/exception-sla.ts';
import type { ImportFileFn } from '../domain/imports.ts';
import { formatAmount, type Minor } from '../domain/money.ts';
import { ImportRefusal } from '../imports/refusal.ts';
import type { Logger } from '../logger.ts';
import { DECISION_WORKBOOK_MAX_BYTES, decideFromWorkbook } from '../reports/decision-workbook.ts';
import { queueCsv, queueCsvName } from '../reports/exception-csv.ts';
import type { ReportKind, ReportRun } from '../reports/runs.ts';
import { ApiProblem, FileReply, mountRoutes, openApiDocument, type Route, route } from './http.ts';
import {
  ApprovalBody,
  AssignBody,
  BalancesQuery,
  BalancesResponse,
  BulkStateBody,
  BulkStateResponse,
  CloseListQuery,
  CloseListResponse,
  CloseParams,
  Close as CloseSchema,
  CommentBody,
  DecisionBody,
  DecisionResponse,
  ExceptionDetailResponse,
  ExceptionExportQuery,
  ExceptionListQuery,
  ExceptionListResponse,
  ExceptionParams,
  ImportDetailResponse,
  ImportListQuery,
  ImportListResponse,
  ImportParams,
  ImportQuery,
  ImportResultResponse,
  type Import as ImportSchema,
  ManualMatchBody,
  MatchListQuery,
  MatchListResponse,
  MatchParams,
  MatchResponse,
  MovementsQuery,
  MovementsResponse,
  PaymentDetailResponse,
  PaymentListQuery,
  PaymentListResponse,
  PaymentLookupQuery,
  PaymentLookupResponse,
  PaymentParams,
  ProviderBalancesQuery,
  ProviderBalancesResponse,
  ReconciliationDayResponse,
  ReconciliationParams,
  RejectionResponse,
  ReportFileParams,
  ReportListQuery,
  ReportListResponse,
  ReportParams,
  ReportRequestBody,
  Report as ReportSchema,
  StateChangeBody,
  UnmatchBody,
  WorkbookDecisionsResponse,
} from './schemas.ts';
import { databaseTokenSource } from './token-source.ts';

export const API_PREFIX = '/api/v1';
export const API_VERSION = '1.0.0';

/** What the API needs of the report runner (`src/reports/runs.ts`). */
export interface ApiReports {
  list(limit: number): Promise<ReportRun[]>;
  get(id: string): Promise<ReportRun | null>;
  start(
    params: { kind: ReportKind; from: string; to: string; account: string | null },
    options: { trigger: 'demand'; requestedBy: string },
  ): Promise<{ id: string; done: Promise<unknown> } | null>;
  filePath(id: string, name: string): Promise<string | null>;
  accounts(): Promise<string[]>;
}

export interface ApiOptions {
  db: Db;
  reports: ApiReports;
  /** The exception queue's service levels (config.exceptions.sla); default DEFAULT_SLA_TABLE. */
  exceptionSla?: SlaTable;
  /**
   * The one import of a file (src/import-service.ts) and the largest upload (PAYRECON_IMPORT_MAX_BYTES);
   * absent: `POST /imports` answers 503.
   */
  imports?: { run: ImportFileFn; maxBytes: number };
  /** The bank accounts reconciled, read at each use (configured, or the embedded sandbox's); none: 404s. */
  bankAccounts?: () => readonly ReconciliationBankAccount[];
  /** The time zone a reconciliation day ends in (PAYRECON_TIMEZONE); default UTC. */
  timeZone?: string;
  /** Configured tokens (hashed, PAYRECON_API_TOKENS), checked before those in the database. */
  tokens: readonly ApiTokenEntry[];
  now?: () => Date;
  logger?: Logger;
}

const iso = (d: Date) => d.toISOString();
const isoOrNull = (d: Date | null) => (d ? d.toISOString() : null);
const amountOrNull = (m: Minor | null) => (m === null ? null : formatAmount(m));

function encodeCursor(parts: readonly string[]): string {
  return Buffer.from(JSON.stringify(parts)).toString('base64url');
}

/** Sort-key text of a payments cursor: `created_at` in UTC to the microsecond. */
const KEY_TEXT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}$/;
const ANY_TEXT = /^[\s\S]{1,200}$/;
const ID_TEXT = /^\d{1,18}$/;

/** The parts of a cursor this API wrote, each matching its shape; anything else is a 400 naming `cursor`. */
function decodeCursor(cursor: string, shape: readonly RegExp[]): string[] {
  try {
    const parts = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    if (
      Array.isArray(parts) &&
      parts.length === shape.length &&
      parts.every((p, i) => typeof p === 'string' && (shape[i] as RegExp).test(p))
    ) {
      return parts as string[];
    }
  } catch {
    // falls through to the problem below
  }
  throw new ApiProblem('VALIDATION_FAILED', 'cursor: must be a cursor returned by a previous page', [
    { in: 'query', field: 'cursor', rule: 'must be a cursor returned by a previous page' },
  ]);
}

function paymentOut(p: PaymentRow): z.input<typeof PaymentListResponse>['items'][number] {
  return {
    merchantAccount: p.merchantAccount,
    kind: p.kind,
    entityId: p.entityId,
    externalRef: p.externalRef,
    bankReference: p.bankReference,
    intentId: p.intentId,
    status: p.status,
    statusSince: isoOrNull(p.statusSince),
    statusReason: p.statusReason,
    currency: p.currency,
    amount: amountOrNull(p.amount),
    fee:
      p.feeAmount !== null && p.feeCurrency !== null
        ? { currency: p.feeCurrency, amount: formatAmount(p.feeAmount) }
        : null,
    test: p.test,
    crypto: p.crypto,
    parentDepositId: p.parentDepositId,
    firstSeenAt: isoOrNull(p.firstSeenAt),
    lastSeenAt: isoOrNull(p.lastSeenAt),
    knownSince: iso(p.knownSince),
  };
}

function exceptionOut(x: QueueRow, now: Date): z.input<typeof ExceptionListResponse>['items'][number] {
  return {
    id: x.id,
    type: x.type,
    severity: x.severity,
    state: x.state,
    merchantAccount: x.merchantAccount,
    kind: x.kind,
    entityId: x.entityId,
    count: x.count,
    firstSeenAt: iso(x.firstSeenAt),
    lastSeenAt: iso(x.lastSeenAt),
    ageSeconds: Math.max(0, Math.floor((now.getTime() - x.firstSeenAt.getTime()) / 1000)),
    dueAt: iso(x.dueAt),
    overdue: x.overdue,
    assignee: x.assignee,
    assignedAt: isoOrNull(x.assignedAt),
    currency: x.currency,
    amount: amountOrNull(x.amount),
    details: x.details,
    resolvedBy: x.resolvedBy,
    resolvedAt: isoOrNull(x.resolvedAt),
    resolutionNote: x.resolutionNote,
    reopenedAt: isoOrNull(x.reopenedAt),
    reopenReason: x.reopenReason,
    previous: x.previous,
    decision: x.decision,
    proposal: x.proposal,
    updatedAt: iso(x.updatedAt),
  };
}

function reportOut(run: ReportRun, base: string): z.input<typeof ReportSchema> {
  return {
    id: run.id,
    kind: run.kind,
    account: run.account,
    from: run.from,
    to: run.to,
    status: run.status,
    progress: run.progress,
    rowCounts: run.rowCounts,
    sha256: run.sha256,
    files: run.files.map((f) => ({
      name: f.name,
      label: f.label,
      href: `${base}/reports/${encodeURIComponent(run.id)}/files/${encodeURIComponent(f.name)}`,
    })),
    requestedBy: run.requestedBy,
    trigger: run.trigger,
    createdAt: iso(run.createdAt),
    finishedAt: isoOrNull(run.finishedAt),
    error: run.error ?? (run.deleted ? 'files removed by retention' : null),
  };
}

const notFound = (what: string) => new ApiProblem('NOT_FOUND', what);

/** Content types `POST /imports` takes: the file's bytes as they are. */
export const IMPORT_CONTENT_TYPES = [
  'application/octet-stream',
  'text/csv',
  'application/xml',
  'text/xml',
  'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
] as const;
/** The default largest upload: 50 MiB. */
export const DEFAULT_IMPORT_MAX_BYTES = 50 * 1024 * 1024;

function importOut(i: ImportView): z.input<typeof ImportSchema> {
  return { ...i, importedAt: iso(i.importedAt) };
}

function matchOut(m: MatchListRow): z.input<typeof MatchResponse> {
  return {
    id: m.id,
    pair: m.pair,
    rule: m.rule,
    difference: formatAmount(m.difference),
    createdAt: iso(m.createdAt),
    createdBy: m.createdBy,
    note: m.note,
    endedAt: isoOrNull(m.endedAt),
    endedBy: m.endedBy,
    endNote: m.endNote,
    members: m.members.map((x) => ({ ...x, amount: amountOrNull(x.amount) })),
  };
}

/** Every route of the API, declared once. */
export function apiRouteTable(options: ApiOptions, base = API_PREFIX): Route[] {
  const { db, reports } = options;
  const now = options.now ?? (() => new Date());
  const sla = options.exceptionSla ?? DEFAULT_SLA_TABLE;
  /** An exception as it stands after a change, with its audit trail. */
  const exceptionWithEvents = async (id: string, at: Date) => {
    const item = await getQueueItem(db, id, at, sla);
    if (!item) throw notFound(`no exception ${id}`);
    return {
      exception: exceptionOut(item.exception, at),
      events: item.events.map((e) => ({ ...e, at: iso(e.at) })),
    };
  };

  const banks = options.bankAccounts ?? (() => []);
  const timeZone = options.timeZone ?? 'UTC';
  const matchById = async (id: string) => {
    const m = await getMatch(db, id);
    if (!m) throw notFound(`no match ${id}`);
    return matchOut(m);
  };

  const queueFilter = (query: z.output<typeof ExceptionExportQuery>): QueueFilter => ({
    ...(query.type !== undefined ? { type: query.type } : {}),
    ...(query.state !== undefined ? { state: query.state } : {}),
    ...(query.assignee !== undefined ? { assignee: query.assignee === '-' ? null : query.assignee } : {}),
    ...(query.account !== undefined ? { merchantAccount: query.account } : {}),
    ...(query.currency !== undefined ? { currency: query.currency } : {}),
    ...(query.age !== undefined ? { age: query.age } : {}),
    ...(query.minAmount !== undefined ? { minAmount: query.minAmount } : {}),
    ...(query.maxAmount !== undefined ? { maxAmount: query.maxAmount } : {}),
    ...(query.overdue !== undefined ? { overdue: query.overdue } : {}),
  });

  const queueChange = async (id: string, change: QueueChange, actor: string) => {
    const at = now();
    const result = await changeQueueItem(db, id, change, actor, at);
    if (result === 'not_found') throw notFound(`no exception ${id}`);
    if (result === 'needs_decision') {
      throw new ApiProblem(
        'CONFLICT',
        `state: exception ${id} is resolved by a decision (POST /exceptions/${id}/decision), not a state change`,
      );
    }
    if (result === 'unchanged') {
      throw new ApiProblem(
        'CONFLICT',
        change.kind === 'state'
          ? `state: the exception already is ${change.state}`
          : 'assignee: the exception already has this assignee',
      );
    }
    return exceptionWithEvents(id, at);
  };

  return [
    route({
      method: 'POST',
      path: '/imports',
      operationId: 'importFile',
      summary:
        "Import a bank statement (camt.053, CSV, XLSX) or a provider transactions or settlement report: the file's bytes as the body; each line once",
      tag: 'imports',
      scope: 'imports:write',
      query: ImportQuery,
      upload: {
        contentTypes: IMPORT_CONTENT_TYPES,
        maxBytes: options.imports?.maxBytes ?? DEFAULT_IMPORT_MAX_BYTES,
      },
      status: 200,
      response: ImportResultResponse,
      problems: [422, 503],
      handle: async ({ query, body, token }) => {
        if (!options.imports) throw new ApiProblem('PROVIDER_UNAVAILABLE', 'imports are not configured here');
        const bytes = body as Buffer;
        try {
          const outcome = await options.imports.run({
            kind: query.kind,
            fileName: query.fileName ?? 'upload',
            bytes: new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength),
            user: `api:${token.name}`,
            ...(query.profile === undefined ? {} : { profile: query.profile }),
            ...(query.account === undefined ? {} : { account: query.account }),
            ...(query.dryRun ? { dryRun: true } : {}),
          });
          options.logger?.info(
            { importId: outcome.id, kind: outcome.kind, client: token.name },
            'file imported through the API',
          );
          return {
            id: outcome.id,
            kind: outcome.kind,
            fileName: outcome.fileName,
            result: { ...outcome.summary, matching: outcome.matching },
          };
        } catch (err) {
          // A refused file: one line naming the file, the row or entry and the rule; nothing imported.
          if (err instanceof ImportRefusal) throw new ApiProblem('UNPROCESSABLE', err.message);
          throw err;
        }
      },
    }),
    route({
      method: 'GET',
      path: '/imports',
      operationId: 'listImports',
      summary: 'Imported files newest first: who, when, SHA-256, lines and new lines, statements',
      tag: 'imports',
      scope: 'read',
      query: ImportListQuery,
      status: 200,
      response: ImportListResponse,
      handle: async ({ query }) => ({ items: (await listImports(db, query.limit)).map(importOut) }),
    }),
    route({
      method: 'GET',
      path: '/imports/{id}',
      operationId: 'getImport',
      summary: 'One import: its counts, statements and the lines it brought first (up to 1,000)',
      tag: 'imports',
      scope: 'read',
      params: ImportParams,
      status: 200,
      response: ImportDetailResponse,
      problems: [404],
      handle: async ({ params }) => {
        const detail = await getImport(db, params.id);
        if (!detail) throw notFound(`no import ${params.id}`);
        return { import: importOut(detail.import), lines: detail.lines, more: detail.more };
      },
    }),
    route({
      method: 'GET',
      path: '/balances',
      operationId: 'getBalances',
      summary: 'Balances per merchant account, currency, book and ledger account, now or at an instant',
      tag: 'ledger',
      scope: 'read',
      query: BalancesQuery,
      status: 200,
      response: BalancesResponse,
      handle: async ({ query }) => {
        const at = query.at ?? now();
        const rows = await balances(db, {
          ...(query.at !== undefined ? { at } : {}),
          ...(query.account !== undefined ? { merchantAccount: query.account } : {}),
          ...(query.book !== undefined ? { book: query.book } : {}),
        });
        return {
          at: iso(at),
          balances: rows
            .filter((r) => query.currency === undefined || r.currency === query.currency)
            .map((r) => ({
              merchantAccount: r.merchantAccount,
              currency: r.currency,
              book: r.book,
              account: r.account,
              balance: formatAmount(r.balance),
            })),
        };
      },
    }),
    route({
      method: 'GET',
      path: '/provider-balances',
      operationId: 'getProviderBalances',
      summary:
        "The provider's balance at its latest cut-off against the ledger's available then, per merchant account and currency, as the last matching run checked it",
      tag: 'reconciliation',
      scope: 'read',
      query: ProviderBalancesQuery,
      status: 200,
      response: ProviderBalancesResponse,
      handle: async ({ query }) => ({
        checks: (await latestBalanceChecks(db))
          .filter(
            (c) =>
              (query.account === undefined || c.merchantAccount === query.account) &&
              (query.currency === undefined || c.currency === query.currency),
          )
          .map((c) => ({
            merchantAccount: c.merchantAccount,
            currency: c.currency,
            settlementId: c.settlementId,
            cutoff: iso(c.cutoff),
            provider: formatAmount(c.provider),
            ledger: formatAmount(c.ledger),
            difference: formatAmount(c.provider - c.ledger),
            checkedAt: iso(c.checkedAt),
            differsSince: c.differsSince && iso(c.differsSince),
          })),
      }),
    }),
    route({
      method: 'GET',
      path: '/movements',
      operationId: 'getMovements',
      summary: 'Postings booked between two instants, grouped by effect, direction and ledger account',
      tag: 'ledger',
      scope: 'read',
      query: MovementsQuery,
      status: 200,
      response: MovementsResponse,
      handle: async ({ query }) => {
        if (query.from.getTime() >= query.to.getTime()) {
          throw new ApiProblem('VALIDATION_FAILED', 'to: must be after from', [
            { in: 'query', field: 'to', rule: 'must be after from' },
          ]);
        }
        const rows = await movements(db, query.from, query.to, query.account);
        return {
          from: iso(query.from),
          to: iso(query.to),
          movements: rows
            .filter((r) => query.currency === undefined || r.currency === query.currency)
            .filter((r) => query.book === undefined || r.book === query.book)
            .map((r) => ({
              merchantAccount: r.merchantAccount,
              currency: r.currency,
              book: r.book,
              effect: r.effect,
              direction: r.direction,
              account: r.account,
              amount: formatAmount(r.amount),
              entries: r.entries,
            })),
        };
      },
    }),
    route({
      method: 'GET',
      path: '/payments/lookup',
      operationId: 'lookupPayment',
      summary:
        'Find the payments an id names: deposit, invoice, cashout, external, refund or intent id, bank reference',
      tag: 'payments',
      scope: 'read',
      query: PaymentLookupQuery,
      status: 200,
      response: PaymentLookupResponse,
      problems: [404],
      handle: async ({ query }) => {
        const rows = await lookupPayments(db, query.id, query.idKind);
        if (rows.length === 0) throw notFound(`no payment has the id ${query.id}`);
        return { matches: rows.map(paymentOut) };
      },
    }),
    route({
      method: 'GET',
      path: '/payments',
      operationId: 'listPayments',
      summary: 'Payments newest first, filtered, a page at a time (keyset cursor)',
      tag: 'payments',
      scope: 'read',
      query: PaymentListQuery,
      status: 200,
      response: PaymentListResponse,
      handle: async ({ query }) => {
        let after: PaymentCursor | null = null;
        if (query.cursor !== undefined) {
          const [key, merchantAccount, kind, entityId] = decodeCursor(query.cursor, [
            KEY_TEXT,
            ANY_TEXT,
            ANY_TEXT,
            ANY_TEXT,
          ]) as [string, string, string, string];
          after = { key, merchantAccount, kind, entityId };
        }
        const rows = await listPayments(
          db,
          {
            ...(query.account !== undefined ? { merchantAccount: query.account } : {}),
            ...(query.kind !== undefined ? { kind: query.kind } : {}),
            ...(query.status !== undefined ? { status: query.status } : {}),
            ...(query.currency !== undefined ? { currency: query.currency } : {}),
            ...(query.test !== undefined ? { test: query.test } : {}),
            ...(query.from !== undefined ? { from: query.from } : {}),
            ...(query.to !== undefined ? { to: query.to } : {}),
          },
          query.limit + 1,
          after,
        );
        const page = rows.slice(0, query.limit);
        const last = page[page.length - 1];
        return {
          items: page.map(paymentOut),
          nextCursor:
            rows.length > query.limit && last
              ? encodeCursor([last.key, last.merchantAccount, last.kind, last.entityId])
              : null,
        };
      },
    }),
    route({
      method: 'GET',
      path: '/payments/{account}/{kind}/{entityId}',
      operationId: 'getPayment',
      summary:
        'One payment: the intent, the provider view, status history, journal entries, exceptions, alerts',
      tag: 'payments',
      scope: 'read',
      params: PaymentParams,
      status: 200,
      response: PaymentDetailResponse,
      problems: [404],
      handle: async ({ params }) => {
        const d = await getPayment(db, params.account, params.kind, params.entityId);
        if (!d) throw notFound(`no ${params.kind} ${params.entityId} in ${params.account}`);
        return {
          payment: paymentOut(d.payment),
          intent: d.intent
            ? {
                ...d.intent,
                amount: formatAmount(d.intent.amount),
                createdAt: iso(d.intent.createdAt),
              }
            : null,
          history: d.history.map((h) => ({
            ...h,
            observedAt: iso(h.observedAt),
            recordedAt: iso(h.recordedAt),
            amount: amountOrNull(h.amount),
          })),
          entries: d.entries.map((e) => ({
            ...e,
            amount: formatAmount(e.amount),
            effectiveAt: iso(e.effectiveAt),
            bookedAt: iso(e.bookedAt),
            postings: e.postings.map((p) => ({ account: p.account, amount: formatAmount(p.amount) })),
          })),
          exceptions: d.exceptions,
          alerts: d.alerts.map((a) => ({
            ...a,
            raisedAt: iso(a.raisedAt),
            publishedAt: isoOrNull(a.publishedAt),
          })),
        };
      },
    }),
    route({
      method: 'GET',
      path: '/exceptions',
      operationId: 'listExceptions',
      summary: 'The exception queue, filtered by type, state, assignee, account, currency, age and amount',
      tag: 'exceptions',
      scope: 'read',
      query: ExceptionListQuery,
      status: 200,
      response: ExceptionListResponse,
      handle: async ({ query }) => {
        const at = now();
        const afterId =
          query.cursor !== undefined ? (decodeCursor(query.cursor, [ID_TEXT])[0] ?? null) : null;
        const rows = await listQueue(db, queueFilter(query), at, sla, query.limit + 1, afterId);
        const page = rows.slice(0, query.limit);
        const last = page[page.length - 1];
        return {
          items: page.map((x) => exceptionOut(x, at)),
          nextCursor: rows.length > query.limit && last ? encodeCursor([last.id]) : null,
        };
      },
    }),
    route({
      method: 'GET',
      path: '/exceptions/export',
      operationId: 'exportExceptions',
      summary: 'The filtered queue as CSV (the same filters as the list; at most 100,000 rows)',
      tag: 'exceptions',
      scope: 'read',
      query: ExceptionExportQuery,
      status: 200,
      response: { files: ['text/csv; charset=utf-8'] },
      handle: async ({ query }) => {
        const at = now();
        const rows = await listQueue(db, queueFilter(query), at, sla, 100_000, null);
        const body = queueCsv(rows, at);
        return new FileReply(Readable.from([body]), 'text/csv; charset=utf-8', queueCsvName(at), body.length);
      },
    }),
    route({
      method: 'GET',
      path: '/exceptions/{id}',
      operationId: 'getException',
      summary: 'One exception with its audit trail (state changes, assignments, comments)',
      tag: 'exceptions',
      scope: 'read',
      params: ExceptionParams,
      status: 200,
      response: ExceptionDetailResponse,
      problems: [404],
      handle: async ({ params }) => {
        const at = now();
        return exceptionWithEvents(params.id, at);
      },
    }),
    route({
      method: 'POST',
      path: '/exceptions/{id}/state',
      operationId: 'changeExceptionState',
      summary: 'Move an exception to open, in_review, acknowledged or resolved, with an optional note',
      tag: 'exceptions',
      scope: 'exceptions:write',
      params: ExceptionParams,
      body: StateChangeBody,
      status: 200,
      response: ExceptionDetailResponse,
      problems: [404, 409],
      handle: ({ params, body, token }) =>
        queueChange(params.id, { kind: 'state', state: body.state, note: body.note ?? null }, token.name),
    }),
    route({
      method: 'POST',
      path: '/exceptions/{id}/assignee',
      operationId: 'assignException',
      summary: 'Assign an exception to a user (null unassigns), with an optional note',
      tag: 'exceptions',
      scope: 'exceptions:write',
      params: ExceptionParams,
      body: AssignBody,
      status: 200,
      response: ExceptionDetailResponse,
      problems: [404, 409],
      handle: ({ params, body, token }) =>
        queueChange(
          params.id,
          { kind: 'assign', assignee: body.assignee, note: body.note ?? null },
          token.name,
        ),
    }),
    route({
      method: 'POST',
      path: '/exceptions/{id}/comments',
      operationId: 'commentException',
      summary: "Add a comment to an exception's audit trail",
      tag: 'exceptions',
      scope: 'exceptions:write',
      params: ExceptionParams,
      body: CommentBody,
      status: 200,
      response: ExceptionDetailResponse,
      problems: [404],
      handle: ({ params, body, token }) =>
        queueChange(params.id, { kind: 'comment', note: body.note }, token.name),
    }),
    route({
      method: 'POST',
      path: '/exceptions/bulk-state',
      operationId: 'changeExceptionStates',
      summary: 'Move many exceptions to one state with one note (bulk acknowledge or resolve)',
      tag: 'exceptions',
      scope: 'exceptions:write',
      body: BulkStateBody,
      status: 200,
      response: BulkStateResponse,
      handle: async ({ body, token }) => {
        const at = now();
        const results = [];
        // One transaction per exception: each keeps its own audit event, and one missing id does not
        // undo the others (the answer says what happened to each).
        for (const id of [...new Set(body.ids)]) {
          const change = { kind: 'state', state: body.state, note: body.note ?? null } as const;
          results.push({ id, outcome: await changeQueueItem(db, id, change, token.name, at) });
        }
        return { results };
      },
    }),
    route({
      method: 'POST',
      path: '/exceptions/{id}/decision',
      operationId: 'decideIllegalTransition',
      summary:
        "Decide an ILLEGAL_TRANSITION or FACTS_CHANGED: keep the ledger's (resolved at once) or propose accepting the provider's status or facts (booked once another token with exceptions:approve approves it)",
      tag: 'exceptions',
      scope: 'exceptions:write',
      params: ExceptionParams,
      body: DecisionBody,
      status: 200,
      response: DecisionResponse,
      problems: [404, 409],
      handle: async ({ params, body, token }) => {
        const at = now();
        // NOT_FOUND and CONFLICT answer as 404 and 409 by their codes; a refused note names its field.
        const result = await decideException(db, {
          id: params.id,
          decision: body.decision,
          by: token.name,
          note: body.note,
          now: at,
        }).catch((err: unknown) => {
          if (err instanceof AppError && err.code === 'VALIDATION_FAILED') {
            throw new ApiProblem('VALIDATION_FAILED', err.message, [
              { in: 'body', field: 'note', rule: err.message },
            ]);
          }
          throw err;
        });
        return { ...result, ...(await exceptionWithEvents(params.id, at)) };
      },
    }),
    route({
      method: 'POST',
      path: '/exceptions/{id}/decision/approve',
      operationId: 'approveDecision',
      summary:
        'Approve the decision proposed on an exception: the ledger books it now (never by the token that proposed it)',
      tag: 'exceptions',
      scope: 'exceptions:approve',
      params: ExceptionParams,
      body: ApprovalBody,
      status: 200,
      response: DecisionResponse,
      problems: [404, 409],
      handle: async ({ params, body, token }) => {
        const at = now();
        const result = await approveDecision(db, {
          id: params.id,
          by: token.name,
          ...(body.note !== undefined ? { note: body.note } : {}),
          now: at,
        }).catch((err: unknown) => {
          if (err instanceof AppError && err.code === 'FORBIDDEN')
            throw new ApiProblem('FORBIDDEN', err.message);
          throw err;
        });
        return { ...result, ...(await exceptionWithEvents(params.id, at)) };
      },
    }),
    route({
      method: 'POST',
      path: '/exceptions/{id}/decision/reject',
      operationId: 'rejectDecision',
      summary: 'Reject the decision proposed on an exception: nothing is booked, the exception stays open',
      tag: 'exceptions',
      scope: 'exceptions:approve',
      params: ExceptionParams,
      body: ApprovalBody,
      status: 200,
      response: RejectionResponse,
      problems: [404, 409],
      handle: async ({ params, body, token }) => {
        const at = now();
        await rejectDecision(db, { id: params.id, by: token.name, note: body.note ?? '', now: at }).catch(
          (err: unknown) => {
            if (err instanceof AppError && err.code === 'VALIDATION_FAILED') {
              throw new ApiProblem('VALIDATION_FAILED', err.message, [
                { in: 'body', field: 'note', rule: 'required' },
              ]);
            }
            throw err;
          },
        );
        return exceptionWithEvents(params.id, at);
      },
    }),
    route({
      method: 'POST',
      path: '/exceptions/decisions',
      operationId: 'decideFromWorkbook',
      summary:
        'Decide in bulk from the exception workbook: its Decision, Note and Key columns filled in and uploaded back (the xlsx bytes); every row checked, all applied or none (422 naming each refused row)',
      tag: 'exceptions',
      scope: 'exceptions:write',
      upload: {
        contentTypes: [
          'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
          'application/octet-stream',
        ],
        maxBytes: DECISION_WORKBOOK_MAX_BYTES,
      },
      status: 200,
      response: WorkbookDecisionsResponse,
      problems: [422],
      handle: async ({ body, token }) => {
        const rows = await decideFromWorkbook(db, body as Buffer, {
          by: token.name,
          mayApprove: token.scopes.includes('exceptions:approve'),
          now: now(),
        }).catch((err: unknown) => {
          if (err instanceof BulkDecisionRefused) {
            throw new ApiProblem(
              'UNPROCESSABLE',
              err.message,
              err.lines.map((line) => {
                const at = line.indexOf(': ');
                return { in: 'body' as const, field: line.slice(0, at), rule: line.slice(at + 2) };
              }),
            );
          }
          if (err instanceof AppError && err.code === 'VALIDATION_FAILED') {
            throw new ApiProblem('UNPROCESSABLE', err.message, [
              { in: 'body', field: 'file', rule: err.message },
            ]);
          }
          throw err;
        });
        const count = (o: string) => rows.filter((r) => r.outcome === o).length;
        return {
          decided: count('decided'),
          proposed: count('proposed'),
          approved: count('approved'),
          rejected: count('rejected'),
          rows,
        };
      },
    }),
    route({
      method: 'GET',
      path: '/reconciliation/{bankAccount}/{date}',
      operationId: 'getReconciliationDay',
      summary:
        "A bank account's day: statement balances against the ledger's bank account, matched share, unmatched lines, open settlements, matches",
      tag: 'reconciliation',
      scope: 'read',
      params: ReconciliationParams,
      status: 200,
      response: ReconciliationDayResponse,
      problems: [404],
      handle: async ({ params }) => {
        const bank = banks().find((b) => b.id === params.bankAccount);
        if (!bank) throw notFound(`bankAccount: no configured bank account ${params.bankAccount}`);
        const d = await reconciliationDay(db, bank, params.date, timeZone, now());
        return {
          bankAccount: bank.id,
          currency: bank.currency,
          merchantAccount: bank.account,
          date: d.date,
          dayEnd: iso(d.dayEnd),
          statement: {
            opening: amountOrNull(d.statement.opening),
            closing: amountOrNull(d.statement.closing),
          },
          ledger: formatAmount(d.ledger),
          ledgerOpening: formatAmount(d.ledgerOpening),
          difference: amountOrNull(d.difference),
          proof: {
            firstStatement: d.proof.firstStatement && {
              importId: d.proof.firstStatement.importId,
              statementId: d.proof.firstStatement.statementId,
              date: d.proof.firstStatement.date,
              opening: amountOrNull(d.proof.firstStatement.opening),
            },
            openingBeforeFirst: amountOrNull(d.proof.firstStatement?.opening ?? null),
            notInLedger: {
              count: d.proof.notInLedger.count,
              total: formatAmount(d.proof.notInLedger.total),
              lines: d.proof.notInLedger.lines.map((l) => ({
                identity: l.identity,
                reference: l.reference,
                bookingDate: l.bookingDate,
                amount: formatAmount(l.amount),
                missing: formatAmount(l.missing),
                counted: l.counted,
                description: l.description,
                matchedNow: l.matchedNow,
                ageDays: l.ageDays,
              })),
            },
            explained: amountOrNull(d.proof.explained),
            unexplained: amountOrNull(d.proof.unexplained),
          },
          share: {
            lines: d.share.lines,
            matchedLines: d.share.matchedLines,
            amount: formatAmount(d.share.amount),
            matchedAmount: formatAmount(d.share.matchedAmount),
          },
          lines: d.lines.map((l) => ({
            identity: l.identity,
            reference: l.reference,
            bookingDate: l.bookingDate,
            valueDate: l.valueDate,
            amount: formatAmount(l.amount),
            reversal: l.reversal,
            description: l.description,
            ageDays: l.ageDays,
            match: l.match,
          })),
          openSettlements: d.openSettlements.map((s) => ({ ...s, net: formatAmount(s.net) })),
          matches: (await Promise.all(d.matches.map((m) => getMatch(db, m.id))))
            .filter((m) => m !== null)
            .map(matchOut),
          previous: d.previous,
          next: d.next,
        };
      },
    }),
    route({
      method: 'GET',
      path: '/matches',
      operationId: 'listMatches',
      summary:
        'Matches of bank lines to settlements, live and ended (who, why), newest first, by bank account and booking dates',
      tag: 'reconciliation',
      scope: 'read',
      query: MatchListQuery,
      status: 200,
      response: MatchListResponse,
      handle: async ({ query }) => {
        if (query.from !== undefined && query.to !== undefined && query.from > query.to) {
          throw new ApiProblem('VALIDATION_FAILED', 'from: must not be after to', [
            { in: 'query', field: 'from', rule: 'must not be after to' },
          ]);
        }
        const rows = await listMatches(db, {
          bankAccount: query.bankAccount ?? null,
          from: query.from ?? null,
          to: query.to ?? null,
          limit: query.limit,
        });
        return { items: rows.map(matchOut) };
      },
    }),
    route({
      method: 'POST',
      path: '/matches',
      operationId: 'matchByHand',
      summary:
        'Match lines by hand (rule manual) with a note; resolves the exceptions the match covers. Refused (409) when a line is already matched',
      tag: 'reconciliation',
      scope: 'exceptions:write',
      body: ManualMatchBody,
      status: 201,
      response: MatchResponse,
      problems: [404, 409],
      handle: async ({ body, token }) => {
        const id = await matchByHand(db, {
          bankAccounts: banks(),
          pair: body.pair ?? 'bank-settlement',
          left: body.lines,
          right: body.with,
          note: body.note,
          by: `api:${token.name}`,
          now: now(),
        });
        return matchById(id);
      },
    }),
    route({
      method: 'POST',
      path: '/matches/{id}/unmatch',
      operationId: 'unmatch',
      summary:
        'End a live match (rule or manual) with a note; its lines are unmatched again and left to persons',
      tag: 'reconciliation',
      scope: 'exceptions:write',
      params: MatchParams,
      body: UnmatchBody,
      status: 200,
      response: MatchResponse,
      problems: [404],
      handle: async ({ params, body, token }) => {
        await unmatchByHand(db, { matchId: params.id, note: body.note, by: `api:${token.name}`, now: now() });
        return matchById(params.id);
      },
    }),
    route({
      method: 'GET',
      path: '/reports',
      operationId: 'listReports',
      summary: 'Generated workbooks, newest first',
      tag: 'reports',
      scope: 'read',
      query: ReportListQuery,
      status: 200,
      response: ReportListResponse,
      handle: async ({ query }) => ({
        items: (await reports.list(query.limit)).map((r) => reportOut(r, base)),
      }),
    }),
    route({
      method: 'POST',
      path: '/reports',
      operationId: 'requestReport',
      summary:
        'Request a settlement or exception workbook for business days from..to; generated in the background',
      tag: 'reports',
      scope: 'reports:write',
      body: ReportRequestBody,
      status: 202,
      response: ReportSchema,
      handle: async ({ body, token }) => {
        const account = body.account ?? null;
        if (account !== null && !(await reports.accounts()).includes(account)) {
          throw new ApiProblem('VALIDATION_FAILED', 'account: must name a merchant account', [
            { in: 'body', field: 'account', rule: 'must name a merchant account' },
          ]);
        }
        const started = await reports.start(
          { kind: body.kind, from: body.from, to: body.to, account },
          { trigger: 'demand', requestedBy: `api:${token.name}` },
        );
        if (!started) throw new Error('report run key collision');
        // The client follows the run through GET /reports/{id}; a failure is recorded on the run.
        started.done.catch(() => undefined);
        const run = await reports.get(started.id);
        if (!run) throw new Error(`report run ${started.id} vanished`);
        return reportOut(run, base);
      },
    }),
    route({
      method: 'GET',
      path: '/reports/{id}',
      operationId: 'getReport',
      summary: 'One report run: status, progress, row counts, SHA-256 and its files',
      tag: 'reports',
      scope: 'read',
      params: ReportParams,
      status: 200,
      response: ReportSchema,
      problems: [404],
      handle: async ({ params }) => {
        const run = await reports.get(params.id);
        if (!run) throw notFound(`no report ${params.id}`);
        return reportOut(run, base);
      },
    }),
    route({
      method: 'GET',
      path: '/reports/{id}/files/{name}',
      operationId: 'downloadReportFile',
      summary: 'Download a file of a finished report (the workbook or a CSV)',
      tag: 'reports',
      scope: 'read',
      params: ReportFileParams,
      status: 200,
      response: {
        files: [
          'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
          'text/csv; charset=utf-8',
        ],
      },
      problems: [404, 410],
      handle: async ({ params }) => {
        const path = await reports.filePath(params.id, params.name);
        if (!path) throw notFound(`no file ${params.name} on a finished report ${params.id}`);
        const info = await stat(path).catch(() => null);
        if (!info) throw new ApiProblem('GONE', `${params.name}: the file is no longer kept`);
        const type = path.endsWith('.csv')
          ? 'text/csv; charset=utf-8'
          : 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet';
        return new FileReply(createReadStream(path), type, path.split('/').pop() ?? params.name, info.size);
      },
    }),
    route({
      method: 'GET',
      path: '/closes',
      operationId: 'listCloses',
      summary: 'Month closes per merchant account and currency, newest period first',
      tag: 'closes',
      scope: 'read',
      query: CloseListQuery,
      status: 200,
      response: CloseListResponse,
      handle: async ({ query }) => {
        const rows = await listCloses(db, {
          ...(query.account !== undefined ? { merchantAccount: query.account } : {}),
          ...(query.currency !== undefined ? { currency: query.currency } : {}),
          ...(query.period !== undefined ? { period: query.period } : {}),
        });
        return {
          items: rows.map((c) => ({
            ...c,
            preparedAt: iso(c.preparedAt),
            approvedAt: isoOrNull(c.approvedAt),
          })),
        };
      },
    }),
    route({
      method: 'GET',
      path: '/closes/{id}',
      operationId: 'getClose',
      summary: 'One month close: its figures, who prepared and approved it, and its SHA-256',
      tag: 'closes',
      scope: 'read',
      params: CloseParams,
      status: 200,
      response: CloseSchema,
      problems: [404],
      handle: async ({ params }) => {
        const c = await getClose(db, params.id);
        if (!c) throw notFound(`no close ${params.id}`);
        return { ...c, preparedAt: iso(c.preparedAt), approvedAt: isoOrNull(c.approvedAt) };
      },
    }),
  ];
}

/** The API as an encapsulated plugin; register with `{ prefix: '/api/v1' }`. */
export async function apiRoutes(app: FastifyInstance, options: ApiOptions): Promise<void> {
  const base = app.prefix.replace(/\/$/, '') || API_PREFIX;
  const routes = apiRouteTable(options, base);
  const document = JSON.stringify(openApiDocument(routes, base, { version: API_VERSION }));
  // Configured tokens first, then the database's (`payrecon api token create` while this runs).
  const verifier = new TokenVerifier(
    options.tokens,
    Date.now,
    databaseTokenSource(options.db, options.logger),
  );
  app.get('/openapi.json', async (_request, reply) =>
    reply.header('content-type', 'application/json; charset=utf-8').send(document),
  );
  mountRoutes(app, { routes, verifier, ...(options.logger ? { logger: options.logger } : {}) });
}

/** A stand-alone fastify app serving only the API under `/api/v1` (tests). */
export async function buildApiApp(options: ApiOptions): Promise<FastifyInstance> {
  const app = Fastify({ logger: false, trustProxy: false });
  await app.register(apiRoutes, { ...options, prefix: API_PREFIX });
  return app;
}
