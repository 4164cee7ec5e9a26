/**
 * Webhook ingress: the provider's notifications (docs/provider.md, "Notifications") in, one
 * `NotificationReceived` event per notification out on `provider.notification.received.v1`. The route
 * only verifies, records and acknowledges; the status fetcher does the work.
 *
 * Routes (an encapsulated fastify plugin, so `payrecon up` and `payrecon ingest` mount the same one):
 *
 * - `POST /webhooks/:account/deposits`, `/webhooks/:account/refunds`, `/webhooks/:account/cashouts`
 * - `POST /webhooks/:account`: any kind, told apart by the body (`deposit_id`, `refund_id`, or a cashout
 *   form), for merchants who give the provider one notification URL for everything;
 * - `POST /webhooks/deposits` (and refunds, cashouts): the default account, when one is configured.
 *
 * Deposit and refund JSON bodies name their own kind, so the deposits and refunds routes take either
 * (the provider sends both to the deposit's notification_url, which is often one URL).
 *
 * Answers: 200 only once Kafka acknowledged the event (acks all); 503 when publishing failed, so the
 * provider retries and nothing is lost; 400 malformed, 401 forged or replayed (enforce mode), 404 unknown
 * account, 413 body over the limit, 415 content type neither JSON nor form, 429 over the rate (per sender
 * and overall, with Retry-After). Every 4xx names the field and the rule and publishes nothing. The
 * signature, the `control` value and the body never reach the event or a log: the event carries a
 * SHA-256 of the raw body and the outcome of the check.
 *
 * A notification is only a hint to ask the provider: the status fetcher reads the entity's status and
 * nothing the notification says reaches the ledger, a reference or a link. So a forged or replayed one
 * that gets through costs at most a status read, and the limits below bound those: a token bucket per
 * sender (remote address) and one overall, and the same notification again within the dedupe window
 * (same account, kind, id and bytes, X-Date included) answers 200 without a second event (but for one
 * trailing event when it comes within `FOLD_SETTLE_MS` of the first, see there).
 */
import { createHash, randomUUID } from 'node:crypto';
import type {
  FastifyError,
  FastifyInstance,
  FastifyPluginAsync,
  FastifyReply,
  FastifyRequest,
} from 'fastify';
import type { ProviderAccount, WebhookLimits, WebhookSignatureMode } from '../config.ts';
import { AppError, type ErrorCode, toAppError } from '../domain/errors.ts';
import { isSecretKey } from '../domain/secrets.ts';
import type { EntityKind } from '../domain/statuses.ts';
import type { Publisher } from '../events/kafka.ts';
import type { Authenticity, NotificationReceived } from '../events/payloads.ts';
import { NOTIFICATION_TOPIC } from '../events/topics.ts';
import { type Logger, logger as rootLogger } from '../logger.ts';
import { parseProviderJson } from '../provider/json.ts';
import {
  cashoutNotificationSchema,
  depositNotificationSchema,
  formatZodIssues,
  refundNotificationSchema,
} from '../provider/schemas.ts';
import {
  isXDateInWindow,
  parseXDate,
  verifyCashoutControl,
  verifyDepositAuthorization,
} from '../provider/signing.ts';

/** Why a notification was turned away (the label of the rejection counter). */
export const WEBHOOK_REJECTIONS = [
  'rate_limited',
  'malformed',
  'forged',
  'replayed',
  'unknown_account',
  'too_large',
  'unsupported_media_type',
  'unavailable',
] as const;
export type WebhookRejection = (typeof WEBHOOK_REJECTIONS)[number];

/** The AppError code of each reason; the HTTP status comes from the code (`ERROR_CODES`). */
const REJECTION_CODES: Record<Exclude<WebhookRejection, 'rate_limited'>, ErrorCode> = {
  malformed: 'VALIDATION_FAILED',
  forged: 'INVALID_SIGNATURE',
  replayed: 'REPLAYED',
  unknown_account: 'NOT_FOUND',
  too_large: 'PAYLOAD_TOO_LARGE',
  unsupported_media_type: 'UNSUPPORTED_MEDIA_TYPE',
  unavailable: 'PUBLISH_FAILED',
};

/** A turned-away notification: an AppError naming the field and the rule. */
function rejection(reason: Exclude<WebhookRejection, 'rate_limited'>, field: string, rule: string): AppError {
  return new AppError(REJECTION_CODES[reason], `${field}: ${rule}`, { details: { field, rule } });
}

/** The reason an error turned a notification away, or null when it is not a rejection (a failure). */
function reasonOf(err: AppError): WebhookRejection | null {
  return WEBHOOK_REJECTIONS.find((r) => r !== 'rate_limited' && REJECTION_CODES[r] === err.code) ?? null;
}

const MEDIA_RULE = 'must be application/json or application/x-www-form-urlencoded';

export interface WebhookIngressDeps {
  accounts: readonly ProviderAccount[];
  publisher: Pick<Publisher, 'publish'>;
  /** Account of the routes without an account segment (`/webhooks/cashouts`); none: those answer 404. */
  defaultAccount?: string | null;
  /** Largest body accepted, bytes (default 64 KiB). */
  bodyLimit?: number;
  now?: () => Date;
  /** Called once per rejected notification (metrics). */
  onRejected?: (reason: WebhookRejection) => void;
  /** Called once per notification published (metrics). */
  onAccepted?: (kind: EntityKind, authenticity: Authenticity) => void;
  logger?: Logger;
  /**
   * Rates and the dedupe window (config.webhooks, whose defaults are DEFAULT_WEBHOOK_LIMITS; the server
   * always passes them). None: no limit and no folding, for tests that drive the parsers at full speed.
   */
  limits?: WebhookLimits;
  /** Milliseconds clock of the rates and the dedupe window (default Date.now). */
  clock?: () => number;
  /** Called once per notification folded into one published within the dedupe window (metrics). */
  onFolded?: (kind: EntityKind) => void;
}

export const DEFAULT_WEBHOOK_BODY_LIMIT = 64 * 1024;

/** A token bucket: `take()` answers 0 when a token was taken, else the milliseconds until one is due. */
export class TokenBucket {
  private tokens: number;
  private at: number;

  constructor(
    private readonly perSecond: number,
    private readonly capacity: number,
    now: number,
  ) {
    this.tokens = capacity;
    this.at = now;
  }

  take(now: number): number {
    this.tokens = Math.min(this.capacity, this.tokens + ((now - this.at) * this.perSecond) / 1000);
    this.at = now;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return 0;
    }
    return Math.ceil(((1 - this.tokens) * 1000) / this.perSecond);
  }

  /** Full again at `now` (a sender idle that long needs no bucket of its own). */
  fullAt(now: number): boolean {
    return this.tokens + ((now - this.at) * this.perSecond) / 1000 >= this.capacity;
  }
}

/** Buckets per sender, bounded: idle senders' full buckets are dropped, the oldest first past the cap. */
class SenderBuckets {
  private readonly buckets = new Map<string, TokenBucket>();

  constructor(
    private readonly perSecond: number,
    private readonly max = 10_000,
  ) {}

  take(sender: string, now: number): number {
    let bucket = this.buckets.get(sender);
    if (bucket === undefined) {
      if (this.buckets.size >= this.max) {
        for (const [k, b] of this.buckets) if (b.fullAt(now)) this.buckets.delete(k);
        if (this.buckets.size >= this.max) this.buckets.delete(this.buckets.keys().next().value as string);
      }
      bucket = new TokenBucket(this.perSecond, this.perSecond * 2, now);
    } else {
      this.buckets.delete(sender);
    }
    this.buckets.set(sender, bucket);
    return bucket.take(now);
  }
}

/**
 * How long after a notification is published the same bytes again may still be a different notification
 * from the provider: X-Date and the cashout `date` count whole seconds, so two changes of one entity in the
 * same second are notified with the same bytes, and the status read for the first may have been made
 * before the second change. Such a duplicate is folded into one more event at the end of this time (one
 * read after both changes); a duplicate later in the window is a replay and folds into nothing.
 */
export const FOLD_SETTLE_MS = 2_000;

interface Published {
  /** When the event was published (the window's start) and until when the window lasts. */
  at: number;
  until: number;
  /** A trailing event was planned (at most one per window). */
  trailing: boolean;
}

/** Recently published notifications of one kind, by key, oldest first; bounded. */
class RecentlyPublished {
  private readonly byKey = new Map<string, Published>();

  constructor(private readonly max = 50_000) {}

  get(key: string, now: number): Published | undefined {
    const p = this.byKey.get(key);
    if (p === undefined || p.until > now) return p;
    this.byKey.delete(key);
    return undefined;
  }

  add(key: string, at: number, until: number): void {
    this.byKey.delete(key);
    this.byKey.set(key, { at, until, trailing: false });
    while (this.byKey.size > this.max) this.byKey.delete(this.byKey.keys().next().value as string);
  }
}

const ROUTE_KINDS: Record<string, EntityKind> = {
  deposits: 'deposit',
  refunds: 'refund',
  cashouts: 'cashout',
};

type ContentKind = 'json' | 'form';

function contentKind(req: FastifyRequest): ContentKind | null {
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type === 'application/json') return 'json';
  if (type === 'application/x-www-form-urlencoded') return 'form';
  return null;
}

/** The body as a flat object of values (JSON numbers kept as their text). */
function parseBody(raw: Buffer, kind: ContentKind): Record<string, unknown> {
  if (raw.length === 0) throw rejection('malformed', 'body', 'must not be empty');
  const text = raw.toString('utf8');
  if (kind === 'form') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of new URLSearchParams(text)) {
      if (!(k in out)) out[k] = v;
    }
    return out;
  }
  let value: unknown;
  try {
    value = parseProviderJson(text);
  } catch {
    throw rejection('malformed', 'body', 'must be valid JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw rejection('malformed', 'body', 'must be a JSON object');
  }
  return value as Record<string, unknown>;
}

/** Which kind the body is: the route's, or for deposit/refund JSON the one the body names. */
function kindOf(body: Record<string, unknown>, routeKind: EntityKind | null): EntityKind {
  const named: EntityKind | null =
    'cashout_id' in body || 'control' in body
      ? 'cashout'
      : 'refund_id' in body
        ? 'refund'
        : 'deposit_id' in body
          ? 'deposit'
          : null;
  if (routeKind === 'cashout' || named === 'cashout') {
    if (routeKind !== null && routeKind !== 'cashout') {
      throw rejection(
        'malformed',
        `${routeKind}_id`,
        'is required (this route takes deposit and refund notifications)',
      );
    }
    return 'cashout';
  }
  if (named !== null) return named;
  if (routeKind !== null) throw rejection('malformed', `${routeKind}_id`, 'is required');
  throw rejection('malformed', 'body', 'must name deposit_id, refund_id or cashout_id');
}

function firstIssue(error: Parameters<typeof formatZodIssues>[0]): AppError {
  const issue = formatZodIssues(error)[0] ?? { field: 'body', rule: 'is invalid' };
  return rejection('malformed', issue.field, issue.rule);
}

/** Text of the non-secret fields, empty values dropped. */
function publicFields(body: Record<string, unknown>, skip: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(body)) {
    if (skip.includes(k) || isSecretKey(k)) continue;
    if (v === undefined || v === null || v === '') continue;
    out[k] = typeof v === 'string' ? v : JSON.stringify(v);
  }
  return out;
}

/** `YYYY-MM-DD HH:MM:SS` GMT, as the cashout notification writes its date. */
function providerDate(text: string | undefined): Date | null {
  if (text === undefined) return null;
  const d = new Date(`${text.replace(' ', 'T')}Z`);
  return Number.isNaN(d.getTime()) ? null : d;
}

function header(req: FastifyRequest, name: string): string | undefined {
  const v = req.headers[name];
  const s = Array.isArray(v) ? v[0] : v;
  return s === undefined || s.trim() === '' ? undefined : s.trim();
}

/** The deposit/refund check: X-Date, X-Login and Authorization like a request (docs/provider.md). */
function checkDepositHeaders(
  req: FastifyRequest,
  raw: Buffer,
  account: ProviderAccount,
  now: Date,
): AppError | null {
  const xDate = header(req, 'x-date');
  const xLogin = header(req, 'x-login');
  const authorization = header(req, 'authorization');
  if (xDate === undefined) return rejection('forged', 'x-date', 'is required');
  if (xLogin === undefined) return rejection('forged', 'x-login', 'is required');
  if (authorization === undefined) return rejection('forged', 'authorization', 'is required');
  if (xLogin !== account.depositLogin)
    return rejection('forged', 'x-login', "must be the account's deposit login");
  if (parseXDate(xDate) === null) return rejection('forged', 'x-date', 'must be yyyy-MM-ddTHH:mm:ssZ in UTC');
  if (
    !verifyDepositAuthorization({ xDate, xLogin, body: raw, secret: account.depositSecret, authorization })
  ) {
    return rejection(
      'forged',
      'authorization',
      'must be "D24 " and the HMAC-SHA256 of X-Date + X-Login + body',
    );
  }
  if (!isXDateInWindow(xDate, now, account.xDateWindowSeconds * 1000)) {
    return rejection(
      'replayed',
      'x-date',
      `must be within ${account.xDateWindowSeconds} s of the receiver's clock`,
    );
  }
  return null;
}

/**
 * Builds the plugin. Register it on any fastify instance: `app.register(webhookIngressPlugin(deps))`.
 * It replaces the content-type parsers inside its own scope only.
 */
export function webhookIngressPlugin(deps: WebhookIngressDeps): FastifyPluginAsync {
  const accounts = new Map(deps.accounts.map((a) => [a.name, a]));
  const bodyLimit = deps.bodyLimit ?? DEFAULT_WEBHOOK_BODY_LIMIT;
  const now = deps.now ?? (() => new Date());
  const log = (deps.logger ?? rootLogger).child({ module: 'webhook-ingress' });
  const limits: WebhookLimits | null = deps.limits ?? null;
  // Rates and the window run on the process clock; `now` is the signature check's (tests move it).
  const clock = deps.clock ?? Date.now;
  const senders = limits && new SenderBuckets(limits.perSenderPerSecond);
  const overall = limits && new TokenBucket(limits.totalPerSecond, limits.totalPerSecond * 2, clock());
  const dedupeMs = (limits?.dedupeSeconds ?? 0) * 1000;
  const recent: Record<EntityKind, RecentlyPublished> = {
    deposit: new RecentlyPublished(),
    refund: new RecentlyPublished(),
    cashout: new RecentlyPublished(),
  };
  const lenient = deps.accounts.filter((a) => a.webhookSignatureMode !== 'enforce');
  if (lenient.length > 0) {
    log.warn(
      { accounts: lenient.map((a) => `${a.name}=${a.webhookSignatureMode}`) },
      'webhook signatures are not enforced for these accounts: forged notifications are accepted (each costs a status read; nothing in them is booked)',
    );
  }

  // Trailing events not yet published; dropped at close (the poller reads those entities in time).
  const trailing = new Set<NodeJS.Timeout>();
  const planTrailing = (event: NotificationReceived, delayMs: number) => {
    const timer = setTimeout(
      () => {
        trailing.delete(timer);
        const again: NotificationReceived = { ...event, notificationId: randomUUID(), receivedAt: now() };
        deps.publisher.publish(NOTIFICATION_TOPIC, [{ value: again }]).then(
          () => deps.onAccepted?.(event.kind, event.authenticity),
          (err: unknown) =>
            log.warn(
              { err, kind: event.kind, entityId: event.entityId },
              'folded notification not published again; the poller reads the entity',
            ),
        );
      },
      Math.max(0, delayMs),
    );
    timer.unref();
    trailing.add(timer);
  };

  let refusedSinceWarned = 0;
  let warnedAt = Number.NEGATIVE_INFINITY;

  /** 0 when the sender and the whole may send one more, else the milliseconds to wait. */
  const admit = (sender: string): number => {
    if (!senders || !overall) return 0;
    const at = clock();
    const own = senders.take(sender, at);
    if (own > 0) return own;
    return overall.take(at);
  };

  const reject = (reply: FastifyReply, r: AppError, context: Record<string, unknown> = {}) => {
    const reason = reasonOf(r) ?? 'malformed';
    const { field, rule } = (r.details ?? {}) as { field?: string; rule?: string };
    deps.onRejected?.(reason);
    log.warn({ ...context, reason, field, rule }, 'notification rejected');
    return reply.code(r.httpStatus).send({ error: reason, field, rule, message: r.message });
  };

  async function handle(
    req: FastifyRequest,
    reply: FastifyReply,
    accountName: string | null,
    routeKind: EntityKind | null,
  ): Promise<FastifyReply> {
    const context: Record<string, unknown> = { account: accountName, route: routeKind };
    const sender = req.ip ?? 'unknown';
    const wait = admit(sender);
    if (wait > 0) {
      deps.onRejected?.('rate_limited');
      // One line per ten seconds at most: a flood must not become a flood of log lines.
      refusedSinceWarned++;
      const at = clock();
      if (at - warnedAt >= 10_000) {
        log.warn(
          { ...context, sender, refused: refusedSinceWarned },
          'notifications refused over the rate (429); the count is since the last such line',
        );
        warnedAt = at;
        refusedSinceWarned = 0;
      }
      const seconds = Math.max(1, Math.ceil(wait / 1000));
      return reply
        .code(429)
        .header('retry-after', String(seconds))
        .send({
          error: 'rate_limited',
          field: 'sender',
          rule: `must send at most ${limits?.perSenderPerSecond} notifications a second (${limits?.totalPerSecond} from all senders)`,
          message: `too many notifications; retry in ${seconds} s`,
        });
    }
    try {
      const account = accountName === null ? undefined : accounts.get(accountName);
      if (!account) {
        throw rejection(
          'unknown_account',
          'account',
          accountName === null
            ? 'no default account is configured'
            : 'must name a configured provider account',
        );
      }
      const type = contentKind(req);
      if (type === null) {
        throw rejection('unsupported_media_type', 'content-type', MEDIA_RULE);
      }
      const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      const body = parseBody(raw, type);
      const kind = kindOf(body, routeKind);
      context.kind = kind;
      const receivedAt = now();
      const mode: WebhookSignatureMode = account.webhookSignatureMode;

      let entityId: string;
      let externalId: string | null = null;
      let notificationDate: Date | null = null;
      let fields: Record<string, string>;
      let problem: AppError | null = null;

      if (kind === 'cashout') {
        // Empty form values mean "absent" (the provider sends every key).
        const present = Object.fromEntries(Object.entries(body).filter(([, v]) => v !== ''));
        const parsed = cashoutNotificationSchema.omit({ control: true }).safeParse(present);
        if (!parsed.success) throw firstIssue(parsed.error);
        entityId = String(parsed.data.cashout_id);
        externalId = parsed.data.external_id;
        notificationDate = providerDate(parsed.data.date);
        fields = publicFields(body, ['cashout_id', 'external_id']);
        // The provider's `control` signs the external id alone, so a captured notification verifies again
        // with any date, comment or bank reference, and again later. That is why nothing in it is trusted:
        // a replay only makes the status fetcher read the cashout's status again, and the same bytes again
        // within the dedupe window are folded before Kafka (at most one read per window).
        if (mode !== 'off') {
          const control = typeof present.control === 'string' ? present.control : undefined;
          if (control === undefined) problem = rejection('forged', 'control', 'is required');
          else if (!verifyCashoutControl(externalId, account.cashoutSecret, control)) {
            problem = rejection(
              'forged',
              'control',
              'must be the HMAC-SHA256 of "Be4" + external_id + "Bo7"',
            );
          }
        }
      } else {
        const schema = kind === 'deposit' ? depositNotificationSchema : refundNotificationSchema;
        const parsed = schema.safeParse(body);
        if (!parsed.success) throw firstIssue(parsed.error);
        const data = parsed.data as { deposit_id?: number; refund_id?: number };
        entityId = String(kind === 'deposit' ? data.deposit_id : data.refund_id);
        fields = publicFields(body, [`${kind}_id`]);
        const xDate = header(req, 'x-date');
        if (xDate !== undefined && parseXDate(xDate) !== null) fields.x_date = xDate;
        if (mode !== 'off') problem = checkDepositHeaders(req, raw, account, receivedAt);
      }

      let authenticity: Authenticity = mode === 'off' ? 'unchecked' : 'verified';
      if (problem !== null) {
        if (mode === 'enforce') throw problem;
        authenticity = 'failed';
        log.warn(
          { ...context, entityId, reason: reasonOf(problem), ...problem.details },
          'notification failed its authenticity check; accepted (warn mode)',
        );
      }

      const bodySha256 = createHash('sha256').update(raw).digest('hex');
      const foldKey = `${account.name}\u0000${entityId}\u0000${header(req, 'x-date') ?? ''}\u0000${bodySha256}`;
      const event: NotificationReceived = {
        notificationId: randomUUID(),
        kind,
        account: account.name,
        entityId,
        externalId,
        notificationDate,
        receivedAt,
        bodySha256,
        sourceIp: req.ip ?? null,
        authenticity,
        fields,
      };
      const published = dedupeMs > 0 ? recent[kind].get(foldKey, clock()) : undefined;
      if (published !== undefined) {
        deps.onFolded?.(kind);
        if (!published.trailing && clock() - published.at < FOLD_SETTLE_MS) {
          published.trailing = true;
          planTrailing(event, published.at + FOLD_SETTLE_MS - clock());
        }
        log.debug({ ...context, entityId }, 'notification folded into the same one published before');
        return reply.code(200).send({ received: true, duplicate: true });
      }

      try {
        await deps.publisher.publish(NOTIFICATION_TOPIC, [{ value: event }]);
      } catch (err) {
        deps.onRejected?.('unavailable');
        log.error(
          { ...context, entityId, err },
          'notification not published; answering 503 so the provider retries',
        );
        const failed = new AppError('PUBLISH_FAILED', 'the notification could not be recorded; retry later', {
          cause: err,
        });
        return reply
          .code(failed.httpStatus)
          .header('retry-after', '5')
          .send({ error: 'unavailable', message: failed.message });
      }
      if (dedupeMs > 0) {
        const at = clock();
        recent[kind].add(foldKey, at, at + dedupeMs);
      }
      deps.onAccepted?.(kind, authenticity);
      log.debug(
        { ...context, entityId, notificationId: event.notificationId, authenticity },
        'notification recorded',
      );
      return reply.code(200).send({ received: true, notification_id: event.notificationId });
    } catch (err) {
      if (err instanceof AppError && reasonOf(err) !== null) return reject(reply, err, context);
      throw err;
    }
  }

  return async (app: FastifyInstance) => {
    app.addHook('onClose', async () => {
      for (const t of trailing) clearTimeout(t);
      trailing.clear();
    });
    // The signature is over the exact bytes: keep them, parse them ourselves.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit }, (_req, body, done) => done(null, body));

    app.setErrorHandler((err: FastifyError, req, reply) => {
      const context = { account: (req.params as { a?: string } | undefined)?.a ?? null };
      const e = toAppError(err);
      if (e.code === 'PAYLOAD_TOO_LARGE') {
        return reject(reply, rejection('too_large', 'body', `must be at most ${bodyLimit} bytes`), context);
      }
      if (e.code === 'UNSUPPORTED_MEDIA_TYPE') {
        return reject(reply, rejection('unsupported_media_type', 'content-type', MEDIA_RULE), context);
      }
      if (e.httpStatus < 500) return reject(reply, rejection('malformed', 'body', e.message), context);
      log.error({ err, ...context }, 'webhook handler failed');
      return reply.code(e.httpStatus).send({ error: 'internal', message: e.message });
    });

    app.post<{ Params: { a: string; b: string } }>('/webhooks/:a/:b', async (req, reply) => {
      const kind = ROUTE_KINDS[req.params.b];
      if (!kind) {
        return reject(reply, rejection('malformed', 'path', 'must end in /deposits, /refunds or /cashouts'), {
          account: req.params.a,
        });
      }
      return handle(req, reply, req.params.a, kind);
    });

    app.post<{ Params: { a: string } }>('/webhooks/:a', async (req, reply) => {
      const kind = ROUTE_KINDS[req.params.a];
      // A kind name is the default account's route; anything else names an account.
      if (kind) return handle(req, reply, deps.defaultAccount ?? null, kind);
      return handle(req, reply, req.params.a, null);
    });
  };
}
