/**
 * The control API under `/_sandbox/` (documented in src/sandbox/README.md): provider-side moves of any entity
 * along any legal transition (generic `transition` plus named actions: customer pays, pays another
 * amount, third-party payer, expiry, bank delivers, confirms, rejects, returns a completed payout),
 * ground truth (balances, export), the webhook delivery log, fault and automatic-mode settings, the
 * clock and the traffic generator; the settlements, reports and bank statements (settlement-routes.ts).
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import { AppError, toAppError } from '../domain/errors.ts';
import { formatAmount } from '../domain/money.ts';
import { type EntityKind, isStatus, TRANSITIONS } from '../domain/statuses.ts';
import type { AccountRegistry } from './accounts.ts';
import { type AutomaticMode, WITHDRAWAL_REVERSED } from './automatic.ts';
import { type Clock, ManualClock, RealClock } from './clock.ts';
import { controlAmount } from './deposits.ts';
import type { MoveOptions, SandboxEngine } from './engine.ts';
import type { AnyRecord, DepositRecord } from './entities.ts';
import type { Faults } from './faults.ts';
import { balancesJson, exportEntities } from './ground-truth.ts';
import { registerSettlementRoutes } from './settlement-routes.ts';
import { type Settlements, settlementConfigOf, timeZoneOf } from './settlements.ts';
import type { WebhookSender } from './webhooks.ts';

export interface TrafficControl {
  start(rate: number): void;
  stop(): void;
  status(): Record<string, unknown>;
}

export interface ControlDeps {
  engine: SandboxEngine;
  accounts: AccountRegistry;
  faults: Faults;
  auto: AutomaticMode;
  webhooks: WebhookSender;
  clock: Clock;
  settlements: Settlements;
  traffic: () => TrafficControl | undefined;
}

const KINDS: Record<string, EntityKind> = { deposits: 'deposit', cashouts: 'cashout', refunds: 'refund' };

export function jsonText(value: unknown): string {
  return JSON.stringify(value, (_k, v) => (typeof v === 'bigint' ? formatAmount(v) : v));
}

function sendJson(reply: FastifyReply, status: number, value: unknown): FastifyReply {
  return reply.code(status).type('application/json').send(jsonText(value));
}

function recordJson(record: AnyRecord): Record<string, unknown> {
  const { cachedBody: _cached, ...rest } = record;
  return rest;
}

type Body = Record<string, unknown>;

function bodyOf(raw: unknown): Body {
  if (typeof raw !== 'string' || raw.trim() === '') return {};
  const value = JSON.parse(raw) as unknown;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new AppError('VALIDATION_FAILED', 'body: must be a JSON object');
  }
  return value as Body;
}

function str(v: unknown): string | null {
  return typeof v === 'string' ? v : v == null ? null : String(v);
}

/** Named actions: (record, body) -> [target status, move options]. */
type Action = (record: AnyRecord, body: Body) => [string, Partial<MoveOptions>];

const DEPOSIT_ACTIONS: Record<string, Action> = {
  // The customer pays: full amount, another amount (AMOUNT_MISMATCH) or from a third party's account.
  pay: (r, body) => {
    const d = r as DepositRecord;
    if (body.third_party === true) return ['CANCELLED', { statusReason: 'THIRD_PARTY_PAYER' }];
    const paid = controlAmount(body.amount);
    const expected = d.feeOnPayer ? d.amount + d.feeAmount : d.amount;
    if (paid !== undefined && paid !== expected) {
      return ['CANCELLED', { statusReason: 'AMOUNT_MISMATCH', paidAmount: paid }];
    }
    return [d.crypto ? 'APPROVED' : d.earlyRelease ? 'EARLY_RELEASED' : 'COMPLETED', {}];
  },
  fill: () => ['PENDING', { reason: 'customer completed the hosted checkout' }],
  'early-release': () => ['EARLY_RELEASED', {}],
  review: () => ['FOR_REVIEW', {}],
  approve: () => ['APPROVED', {}],
  complete: () => ['COMPLETED', {}],
  decline: () => ['DECLINED', {}],
  cancel: (_r, body) => ['CANCELLED', { statusReason: (str(body.status_reason) as never) ?? null }],
  expire: () => ['EXPIRED', { reason: 'expiration passed' }],
  authenticate: () => ['COMPLETED', { reason: '3DS authentication passed' }],
  'fail-authentication': () => ['DECLINED', { reason: '3DS authentication failed' }],
  // The provider completes an EXPIRED or CANCELLED deposit by hand (a late payment, docs/provider.md).
  'late-payment': () => ['COMPLETED', { reason: 'late payment matched by the provider' }],
};

const rejection = (
  body: Body,
  defaultCode: number | string,
  defaultReason: string,
): Partial<MoveOptions> => ({
  rejectionCode: (body.code as number | string | undefined) ?? defaultCode,
  rejectionReason: str(body.reason) ?? defaultReason,
});

const CASHOUT_ACTIONS: Record<string, Action> = {
  deliver: () => ['DELIVERED', { reason: 'sent to the bank' }],
  confirm: () => ['COMPLETED', { reason: 'bank confirmed' }],
  reject: (_r, body) => ['REJECTED', rejection(body, 800, 'ERROR_ACCOUNT_INCORRECT')],
  return: (_r, body) => [
    'REJECTED',
    { reason: 'returned by the beneficiary bank', ...rejection(body, 826, WITHDRAWAL_REVERSED) },
  ],
  hold: () => ['ON_HOLD', { reason: 'Merchant Panel' }],
  release: () => ['PENDING', { reason: 'Merchant Panel' }],
  cancel: () => ['CANCELLED', { reason: 'Merchant Panel' }],
};

const REFUND_ACTIONS: Record<string, Action> = {
  deliver: () => ['DELIVERED', { reason: 'sent for processing' }],
  confirm: () => ['COMPLETED', { reason: 'processor confirmed' }],
  reject: (_r, body) => ['REJECTED', rejection(body, 'REJECTED_BY_BANK', 'Rejected by the processor')],
  return: (_r, body) => [
    'REJECTED',
    {
      reason: 'returned by the receiving bank',
      ...rejection(body, 'RETURNED', 'Returned by the receiving bank'),
    },
  ],
  'incorrect-details': () => ['INCORRECT_DETAILS', { reason: 'details incorrect' }],
  correct: () => ['PENDING', { reason: 'correct details provided' }],
  cancel: () => ['CANCELLED', { reason: 'merchant cancelled' }],
};

const ACTIONS: Record<EntityKind, Record<string, Action>> = {
  deposit: DEPOSIT_ACTIONS,
  cashout: CASHOUT_ACTIONS,
  refund: REFUND_ACTIONS,
};

export function registerControl(app: FastifyInstance, deps: ControlDeps): void {
  const { engine } = deps;

  // The control API is the sandbox's own (not the provider's): payrecon's errors, statuses by code.
  app.setErrorHandler((err, _req, reply) => {
    if (err instanceof SyntaxError)
      return sendJson(reply, 400, { code: 'VALIDATION_FAILED', message: err.message });
    if (err && typeof err === 'object' && 'issues' in err) {
      return sendJson(reply, 400, {
        code: 'VALIDATION_FAILED',
        message: 'invalid settings',
        issues: (err as { issues: unknown }).issues,
      });
    }
    const e = toAppError(err);
    return sendJson(reply, e.httpStatus, { code: e.code, message: e.message, details: e.details });
  });

  registerSettlementRoutes(app, {
    engine,
    accounts: deps.accounts,
    settlements: deps.settlements,
    send: sendJson,
    body: bodyOf,
  });

  app.get('/_sandbox/health', async (_req, reply) =>
    sendJson(reply, 200, { ok: true, now: engine.nowIso() }),
  );

  app.get('/_sandbox/accounts', async (_req, reply) =>
    sendJson(
      reply,
      200,
      deps.accounts.all().map((a) => ({
        name: a.name,
        login: a.login,
        cashout_login: a.cashoutLogin,
        notification_url: a.notificationUrl,
        pci: a.pci,
        time_zone: timeZoneOf(a),
        settlement: settlementConfigOf(a),
      })),
    ),
  );

  app.get('/_sandbox/catalogue', async (_req, reply) => sendJson(reply, 200, engine.catalogue));

  const findRecord = (kindText: string, idText: string): AnyRecord => {
    const kind = KINDS[kindText];
    if (!kind) throw new AppError('NOT_FOUND', `unknown entity kind ${kindText}`);
    const record = /^\d+$/.test(idText) ? engine.get(kind, Number(idText)) : undefined;
    if (!record) throw new AppError('NOT_FOUND', `${kind} ${idText} not found`);
    return record;
  };

  const doMove = (reply: FastifyReply, record: AnyRecord, to: string, options: Partial<MoveOptions>) => {
    if (!isStatus(record.kind, to)) {
      throw new AppError('VALIDATION_FAILED', `to: unknown ${record.kind} status ${to}`);
    }
    const from = record.status;
    const result = engine.move(record, to, { trigger: 'control', ...options });
    if (!result.ok) {
      const table = TRANSITIONS[record.kind] as Readonly<Record<string, readonly string[]>>;
      return sendJson(reply, 409, {
        code: 'ILLEGAL_TRANSITION',
        message: `${record.kind} ${record.id}: ${from} -> ${to} is not a transition of the spec`,
        from,
        to,
        allowed: table[from] ?? [],
      });
    }
    return sendJson(reply, 200, { id: record.id, kind: record.kind, from, to, status: record.status });
  };

  app.get<{ Params: { kind: string; id: string } }>('/_sandbox/:kind/:id', async (req, reply) =>
    sendJson(reply, 200, recordJson(findRecord(req.params.kind, req.params.id))),
  );

  app.post<{ Params: { kind: string; id: string } }>('/_sandbox/:kind/:id/transition', async (req, reply) => {
    const record = findRecord(req.params.kind, req.params.id);
    const body = bodyOf(req.body);
    const to = str(body.to);
    if (!to) throw new AppError('VALIDATION_FAILED', 'to: is required');
    const options: Partial<MoveOptions> = { reason: str(body.reason) };
    if (body.status_reason !== undefined) options.statusReason = str(body.status_reason) as never;
    if (body.paid_amount !== undefined) options.paidAmount = controlAmount(body.paid_amount)!;
    if (body.rejection_code !== undefined) options.rejectionCode = body.rejection_code as number | string;
    if (body.rejection_reason !== undefined) options.rejectionReason = str(body.rejection_reason);
    return doMove(reply, record, to, options);
  });

  app.post<{ Params: { kind: string; id: string; action: string } }>(
    '/_sandbox/:kind/:id/:action',
    async (req, reply) => {
      const record = findRecord(req.params.kind, req.params.id);
      const action = ACTIONS[record.kind][req.params.action];
      if (!action) throw new AppError('NOT_FOUND', `unknown ${record.kind} action ${req.params.action}`);
      const [to, options] = action(record, bodyOf(req.body));
      return doMove(reply, record, to, options);
    },
  );

  app.get<{ Querystring: { account?: string } }>('/_sandbox/balances', async (req, reply) => {
    const rows = balancesJson(engine).filter((r) => !req.query.account || r.account === req.query.account);
    return sendJson(reply, 200, rows);
  });

  app.get<{ Querystring: { account?: string } }>('/_sandbox/export', async (req, reply) =>
    sendJson(reply, 200, exportEntities(engine, req.query.account)),
  );

  app.get<{ Querystring: { kind?: string; entity_id?: string; limit?: string } }>(
    '/_sandbox/webhooks',
    async (req, reply) => {
      let rows = deps.webhooks.log;
      if (req.query.kind) rows = rows.filter((r) => r.kind === req.query.kind);
      if (req.query.entity_id) rows = rows.filter((r) => String(r.entityId) === req.query.entity_id);
      const limit = req.query.limit ? Number(req.query.limit) : 1000;
      return sendJson(reply, 200, rows.slice(-limit));
    },
  );

  // Sends an entity's notification again (replays, duplicate handling in the receiver).
  app.post<{ Params: { kind: string; id: string } }>(
    '/_sandbox/webhooks/:kind/:id/resend',
    async (req, reply) => {
      const record = findRecord(req.params.kind, req.params.id);
      deps.webhooks.notify(record.kind, record);
      return sendJson(reply, 202, { kind: record.kind, id: record.id, status: record.status });
    },
  );

  app.put('/_sandbox/webhooks/base-url', async (req, reply) => {
    const body = bodyOf(req.body);
    deps.webhooks.notificationBaseUrl = str(body.url);
    return sendJson(reply, 200, { url: deps.webhooks.notificationBaseUrl });
  });

  app.get('/_sandbox/faults', async (_req, reply) => sendJson(reply, 200, deps.faults.settings));
  app.put('/_sandbox/faults', async (req, reply) => sendJson(reply, 200, deps.faults.set(bodyOf(req.body))));

  app.get('/_sandbox/auto', async (_req, reply) => sendJson(reply, 200, deps.auto.settings));
  app.put('/_sandbox/auto', async (req, reply) => sendJson(reply, 200, deps.auto.set(bodyOf(req.body))));

  app.get('/_sandbox/clock', async (_req, reply) =>
    sendJson(reply, 200, {
      now: engine.nowIso(),
      manual: deps.clock instanceof ManualClock,
      // Sandbox seconds per real second of a real clock; null for a manual one.
      speed: deps.clock instanceof RealClock ? deps.clock.speed : null,
    }),
  );
  app.post('/_sandbox/clock/advance', async (req, reply) => {
    if (!(deps.clock instanceof ManualClock)) {
      throw new AppError('CONFLICT', 'the clock is not manual (start the sandbox with a manual clock)');
    }
    const ms = Number(bodyOf(req.body).ms);
    if (!Number.isFinite(ms) || ms < 0)
      throw new AppError('VALIDATION_FAILED', 'ms: must be a non-negative number');
    await deps.clock.advance(ms);
    return sendJson(reply, 200, { now: engine.nowIso() });
  });

  app.get('/_sandbox/traffic', async (_req, reply) => {
    const t = deps.traffic();
    return sendJson(reply, 200, t ? t.status() : { running: false });
  });
  app.post('/_sandbox/traffic', async (req, reply) => {
    const t = deps.traffic();
    if (!t) throw new AppError('CONFLICT', 'traffic generator unavailable');
    const rate = Number(bodyOf(req.body).rate);
    if (!Number.isFinite(rate) || rate <= 0)
      throw new AppError('VALIDATION_FAILED', 'rate: must be a positive number');
    t.start(rate);
    return sendJson(reply, 200, t.status());
  });
  app.delete('/_sandbox/traffic', async (_req, reply) => {
    deps.traffic()?.stop();
    return sendJson(reply, 200, deps.traffic()?.status() ?? { running: false });
  });
}
