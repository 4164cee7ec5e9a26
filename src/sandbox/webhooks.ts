/**
 * Notification sender (docs/provider.md, "Notifications"): deposits `{"deposit_id": N}` and refunds
 * `{"refund_id": N}` as JSON signed with X-Date, X-Login and Authorization like a request; cashouts as a
 * form with `control`. Sent to the entity's notification_url or the account's default; any non-2xx is
 * retried up to 5 more times after 5, 25, 125, 625 and 3125 minutes of sandbox time. Faults (drop,
 * duplicate, delay, reorder) come from `Faults`. Every attempt is recorded in the delivery log.
 */
import { request } from 'undici';
import type { EntityKind } from '../domain/statuses.ts';
import { cashoutControl, depositAuthorization } from '../provider/signing.ts';
import type { SandboxAccount } from './accounts.ts';
import { type Clock, formatProviderDateTime, formatXDateAt } from './clock.ts';
import type { AnyRecord } from './entities.ts';
import type { Faults } from './faults.ts';
import type { Rng } from './rng.ts';

/** Minutes between attempts: 5 more attempts after the first. */
export const RETRY_SCHEDULE_MINUTES = [5, 25, 125, 625, 3125] as const;

export interface DeliveryLogEntry {
  seq: number;
  notificationId: number;
  kind: EntityKind;
  entityId: number;
  account: string;
  status: string;
  url: string | null;
  attempt: number;
  /** Sandbox time of the attempt. */
  at: string;
  outcome: 'delivered' | 'failed' | 'dropped' | 'no_target' | 'scheduled_retry' | 'gave_up';
  httpStatus: number | null;
  error: string | null;
  duplicate: boolean;
  reordered: boolean;
}

export interface WebhookSenderOptions {
  clock: Clock;
  rng: Rng;
  faults: Faults;
  accountOf(name: string): SandboxAccount | undefined;
  /** Maps every notification URL onto this base (keeps path and query), e.g. http://127.0.0.1:8080. */
  notificationBaseUrl?: string | null;
  /** Real milliseconds a receiver has to answer. */
  timeoutMs?: number;
  logLimit?: number;
  /** Told `delivery:<id>` when a delivery is planned or done, `webhooks` when a counter moves. */
  onDirty?: (key: string) => void;
  /** Awaited before each attempt: a notification never tells what the store could still lose. */
  beforeSend?: () => Promise<void>;
}

/** A planned delivery attempt as the durable store keeps it. */
export interface StoredDelivery {
  id: number;
  kind: EntityKind;
  entityId: number;
  account: string;
  status: string;
  url: string;
  attempt: number;
  /** Sandbox time of the attempt. */
  dueAt: number;
  duplicate: boolean;
  reordered: boolean;
}

interface Notification {
  id: number;
  kind: EntityKind;
  record: AnyRecord;
  status: string;
  account: SandboxAccount;
  url: string;
  duplicate: boolean;
  reordered: boolean;
}

export function mapNotificationUrl(url: string, base: string | null | undefined): string {
  if (!base) return url;
  const u = new URL(url);
  return base.replace(/\/+$/, '') + u.pathname + u.search;
}

export class WebhookSender {
  readonly log: DeliveryLogEntry[] = [];
  private seq = 0;
  private nextNotificationId = 1;
  private inFlight = 0;
  private idleWaiters: (() => void)[] = [];
  private readonly options: WebhookSenderOptions;
  private baseUrl: string | null;
  /** Deliveries planned and not yet delivered or given up, by notification id. */
  readonly pending = new Map<number, StoredDelivery>();

  constructor(options: WebhookSenderOptions) {
    this.options = options;
    this.baseUrl = options.notificationBaseUrl ?? null;
  }

  get notificationBaseUrl(): string | null {
    return this.baseUrl;
  }

  set notificationBaseUrl(url: string | null) {
    this.baseUrl = url;
    this.dirty('webhooks');
  }

  /** Counters and the base URL, for the durable store. */
  state(): { nextNotificationId: number; seq: number; notificationBaseUrl: string | null } {
    return { nextNotificationId: this.nextNotificationId, seq: this.seq, notificationBaseUrl: this.baseUrl };
  }

  /** Puts back the stored counters and planned deliveries (each attempt runs at its time, or now). */
  restore(
    state: { nextNotificationId?: number; seq?: number; notificationBaseUrl?: string | null } | undefined,
    deliveries: Iterable<StoredDelivery>,
    recordOf: (kind: EntityKind, id: number) => AnyRecord | undefined,
  ): void {
    if (state) {
      this.nextNotificationId = Math.max(this.nextNotificationId, state.nextNotificationId ?? 1);
      this.seq = Math.max(this.seq, state.seq ?? 0);
      if (state.notificationBaseUrl !== undefined) this.baseUrl = state.notificationBaseUrl;
    }
    for (const d of deliveries) {
      const record = recordOf(d.kind, d.entityId);
      const account = this.options.accountOf(d.account);
      if (!record || !account) continue;
      this.nextNotificationId = Math.max(this.nextNotificationId, d.id + 1);
      const n: Notification = {
        id: d.id,
        kind: d.kind,
        record,
        status: d.status,
        account,
        url: d.url,
        duplicate: d.duplicate,
        reordered: d.reordered,
      };
      this.schedule(n, d.attempt, Math.max(0, d.dueAt - this.options.clock.now()));
    }
  }

  /** Connects the durable store (see durable.ts). */
  setHooks(hooks: Pick<WebhookSenderOptions, 'onDirty' | 'beforeSend'>): void {
    this.options.onDirty = hooks.onDirty;
    this.options.beforeSend = hooks.beforeSend;
  }

  private dirty(key: string): void {
    this.options.onDirty?.(key);
  }

  /** Queues the notification of a status change of `record`. */
  notify(kind: EntityKind, record: AnyRecord): void {
    const account = this.options.accountOf(record.account);
    if (!account) return;
    this.dirty('webhooks');
    const target = record.notificationUrl ?? account.notificationUrl;
    const base = { kind, record, status: record.status, account };
    if (!target) {
      this.record(
        { ...base, id: this.nextNotificationId++, url: '', duplicate: false, reordered: false },
        0,
        {
          outcome: 'no_target',
          url: null,
        },
      );
      return;
    }
    // The target as the merchant gave it: mapped onto the base URL at each attempt, so attempts waiting
    // for their time (or stored across a restart) go where the base URL points then.
    const url = target;
    const faults = this.options.faults.settings.webhooks;
    const rng = this.options.rng;
    const n: Notification = {
      ...base,
      id: this.nextNotificationId++,
      url,
      duplicate: false,
      reordered: false,
    };
    if (rng.chance(faults.dropRate)) {
      this.record(n, 0, { outcome: 'dropped' });
      return;
    }
    let delay = faults.delayMs;
    if (rng.chance(faults.reorderRate)) {
      n.reordered = true;
      delay += faults.reorderDelayMs;
    }
    this.schedule(n, 1, delay);
    if (rng.chance(faults.duplicateRate)) {
      this.schedule({ ...n, id: this.nextNotificationId++, duplicate: true }, 1, delay);
    }
  }

  /** Resolves when no attempt is running (attempts waiting on the clock do not count). */
  async idle(): Promise<void> {
    if (this.inFlight === 0) return;
    await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  private schedule(n: Notification, attempt: number, delayMs: number): void {
    this.pending.set(n.id, {
      id: n.id,
      kind: n.kind,
      entityId: n.record.id,
      account: n.account.name,
      status: n.status,
      url: n.url,
      attempt,
      dueAt: this.options.clock.now() + delayMs,
      duplicate: n.duplicate,
      reordered: n.reordered,
    });
    this.dirty(`delivery:${n.id}`);
    this.dirty('webhooks');
    const run = () => {
      this.inFlight++;
      void this.attempt(n, attempt).finally(() => {
        this.inFlight--;
        if (this.inFlight === 0) for (const w of this.idleWaiters.splice(0)) w();
      });
    };
    if (delayMs <= 0) setImmediate(run);
    else this.options.clock.at(this.options.clock.now() + delayMs, run);
  }

  private async attempt(n: Notification, attempt: number): Promise<void> {
    let httpStatus: number | null = null;
    let error: string | null = null;
    try {
      await this.options.beforeSend?.();
      const { body, headers } = this.buildRequest(n);
      const res = await request(mapNotificationUrl(n.url, this.baseUrl), {
        method: 'POST',
        headers,
        body,
        headersTimeout: this.options.timeoutMs ?? 10_000,
        bodyTimeout: this.options.timeoutMs ?? 10_000,
      });
      httpStatus = res.statusCode;
      await res.body.dump();
    } catch (err) {
      error = (err as Error).message;
    }
    const ok = httpStatus !== null && httpStatus >= 200 && httpStatus < 300;
    if (ok) {
      this.record(n, attempt, { outcome: 'delivered', httpStatus });
      this.done(n);
      return;
    }
    const waitMinutes = RETRY_SCHEDULE_MINUTES[attempt - 1];
    if (waitMinutes === undefined) {
      this.record(n, attempt, { outcome: 'gave_up', httpStatus, error });
      this.done(n);
      return;
    }
    this.record(n, attempt, { outcome: 'scheduled_retry', httpStatus, error });
    this.schedule(n, attempt + 1, waitMinutes * 60_000);
  }

  private done(n: Notification): void {
    this.pending.delete(n.id);
    this.dirty(`delivery:${n.id}`);
  }

  private buildRequest(n: Notification): { body: string; headers: Record<string, string> } {
    const now = this.options.clock.now();
    if (n.kind === 'cashout') {
      const c = n.record as Extract<AnyRecord, { kind: 'cashout' }>;
      const form = new URLSearchParams({
        date: formatProviderDateTime(now),
        bank_reference_id: c.providerExternalReference ?? '',
        comments: c.comments ?? '',
        external_id: c.externalId,
        control: cashoutControl(c.externalId, n.account.cashoutSecret),
        cashout_id: String(c.id),
        status_reason: c.statusReason ?? '',
      });
      return { body: form.toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } };
    }
    const body = n.kind === 'deposit' ? `{"deposit_id":${n.record.id}}` : `{"refund_id":${n.record.id}}`;
    // Signed with wall-clock time like a request: the receiver checks X-Date against its own clock,
    // whatever the speed of the sandbox clock.
    const xDate = formatXDateAt(Date.now());
    return {
      body,
      headers: {
        'content-type': 'application/json',
        'x-date': xDate,
        'x-login': n.account.login,
        authorization: depositAuthorization({
          xDate,
          xLogin: n.account.login,
          body,
          secret: n.account.depositSecret,
        }),
      },
    };
  }

  private record(
    n: Notification,
    attempt: number,
    extra: Partial<DeliveryLogEntry> & Pick<DeliveryLogEntry, 'outcome'>,
  ): void {
    this.log.push({
      seq: ++this.seq,
      notificationId: n.id,
      kind: n.kind,
      entityId: n.record.id,
      account: n.account.name,
      status: n.status,
      url: n.url ? mapNotificationUrl(n.url, this.baseUrl) : null,
      attempt,
      at: new Date(this.options.clock.now()).toISOString(),
      httpStatus: null,
      error: null,
      duplicate: n.duplicate,
      reordered: n.reordered,
      ...extra,
    });
    const limit = this.options.logLimit ?? 20_000;
    if (this.log.length > limit) this.log.splice(0, this.log.length - limit);
  }
}
