/**
 * The sandbox's store and state machines. Records live in memory maps; every status change goes
 * through `move`, which allows only the direct moves of `src/domain/statuses.ts` (the spec's section 3
 * tables), appends to the record's history and tells the listeners (webhook sender, automatic mode,
 * late rejections). Deposits expire on the clock and an EXPIRED deposit turns CANCELLED seven days later.
 */
import type { Minor } from '../domain/money.ts';
import {
  type CashoutStatus,
  type DepositStatus,
  type EntityKind,
  isDirectTransition,
  type RefundStatus,
} from '../domain/statuses.ts';
import type { AccountRegistry } from './accounts.ts';
import type { CatalogueIndex } from './catalogue.ts';
import type { Clock } from './clock.ts';
import type { AnyRecord, CashoutRecord, DepositRecord, RefundRecord } from './entities.ts';
import type { Rng } from './rng.ts';

export interface Change {
  kind: EntityKind;
  record: AnyRecord;
  from: string | null;
  to: string;
  trigger: string;
  /** False when the change must not send a notification (synchronous card results). */
  notify: boolean;
}

export type ChangeListener = (change: Change) => void;

export interface MoveOptions {
  trigger: string;
  reason?: string | null;
  notify?: boolean;
  /** Deposit CANCELLED reason (THIRD_PARTY_PAYER, AMOUNT_MISMATCH). */
  statusReason?: DepositRecord['statusReason'];
  /** Deposit: amount the customer paid (AMOUNT_MISMATCH). */
  paidAmount?: Minor;
  /** Cashout or refund rejection. */
  rejectionCode?: number | string | null;
  rejectionReason?: string | null;
}

export type MoveResult<R> = { ok: true; record: R } | { ok: false; from: string; to: string };

export interface EngineOptions {
  clock: Clock;
  rng: Rng;
  accounts: AccountRegistry;
  catalogue: CatalogueIndex;
  /** Sandbox milliseconds from EXPIRED to CANCELLED (docs/provider.md: 7 days). */
  expiredToCancelledMs?: number;
}

const EXPIRABLE: ReadonlySet<DepositStatus> = new Set([
  'CREATED',
  'PENDING',
  'PENDING_AUTHENTICATION',
  'EARLY_RELEASED',
]);

export const SEVEN_DAYS_MS = 7 * 24 * 3600 * 1000;

/** The id counters (the next id of each kind), kept across restarts so ids never repeat. */
export interface IdCounters {
  deposit: number;
  cashout: number;
  refund: number;
}

export class SandboxEngine {
  readonly clock: Clock;
  readonly rng: Rng;
  readonly accounts: AccountRegistry;
  readonly catalogue: CatalogueIndex;
  readonly deposits = new Map<number, DepositRecord>();
  readonly cashouts = new Map<number, CashoutRecord>();
  readonly refunds = new Map<number, RefundRecord>();
  /** `account\u0000invoice_id` to deposit id. */
  readonly invoices = new Map<string, number>();
  /** `account\u0000external_id` to cashout id. */
  readonly externalIds = new Map<string, number>();
  /** Page token to deposit id (hosted checkout and 3DS pages). */
  readonly pageTokens = new Map<string, number>();
  private readonly listeners: ChangeListener[] = [];
  /** Told the key of every record that changed and of `ids` (the durable store writes them). */
  onDirty: (key: string) => void = () => {};
  private readonly expiredToCancelledMs: number;
  private static readonly FIRST_DEPOSIT_ID = 3_000_000_001;
  private nextDepositId = SandboxEngine.FIRST_DEPOSIT_ID;
  private nextCashoutId = 8_405_147;
  private nextRefundId = 168_284;

  constructor(options: EngineOptions) {
    this.clock = options.clock;
    this.rng = options.rng;
    this.accounts = options.accounts;
    this.catalogue = options.catalogue;
    this.expiredToCancelledMs = options.expiredToCancelledMs ?? SEVEN_DAYS_MS;
  }

  onChange(listener: ChangeListener): void {
    this.listeners.push(listener);
  }

  nowIso(): string {
    return new Date(this.clock.now()).toISOString();
  }

  newDepositId(): number {
    this.onDirty('ids');
    return this.nextDepositId++;
  }
  /** Deposits, newest first: ids are handed out in order, so this costs what it yields, not the map's size. */
  *depositsNewestFirst(): Generator<DepositRecord> {
    for (let id = this.nextDepositId - 1; id >= SandboxEngine.FIRST_DEPOSIT_ID; id--) {
      const d = this.deposits.get(id);
      if (d) yield d;
    }
  }
  newCashoutId(): number {
    this.onDirty('ids');
    return this.nextCashoutId++;
  }
  newRefundId(): number {
    this.onDirty('ids');
    return this.nextRefundId++;
  }

  ids(): IdCounters {
    return { deposit: this.nextDepositId, cashout: this.nextCashoutId, refund: this.nextRefundId };
  }

  /** Marks a record changed outside `move` (fields the status body shows). */
  touch(record: AnyRecord): void {
    this.onDirty(`${record.kind}:${record.id}`);
  }

  // ------------------------------------------------------------------ recovery

  /** Puts back a stored record (no history entry, no listener); counters move past its id. */
  restore(record: AnyRecord): void {
    switch (record.kind) {
      case 'deposit':
        this.deposits.set(record.id, record);
        this.invoices.set(`${record.account}\u0000${record.invoiceId}`, record.id);
        this.pageTokens.set(record.pageToken, record.id);
        this.nextDepositId = Math.max(this.nextDepositId, record.id + 1);
        return;
      case 'cashout':
        this.cashouts.set(record.id, record);
        this.externalIds.set(`${record.account}\u0000${record.externalId}`, record.id);
        this.nextCashoutId = Math.max(this.nextCashoutId, record.id + 1);
        return;
      case 'refund':
        this.refunds.set(record.id, record);
        this.nextRefundId = Math.max(this.nextRefundId, record.id + 1);
        return;
    }
  }

  /** Counters never go back: the stored ones, or past the highest stored id. */
  restoreIds(ids: Partial<IdCounters>): void {
    this.nextDepositId = Math.max(this.nextDepositId, ids.deposit ?? 0);
    this.nextCashoutId = Math.max(this.nextCashoutId, ids.cashout ?? 0);
    this.nextRefundId = Math.max(this.nextRefundId, ids.refund ?? 0);
  }

  /** After a restore: arms the clock moves (expiry, EXPIRED to CANCELLED) the records are owed. */
  rearm(): void {
    for (const d of this.deposits.values()) {
      if (d.expiresAt !== null && EXPIRABLE.has(d.status)) this.scheduleExpiry(d);
      if (d.status === 'EXPIRED') {
        let expiredAt = d.updatedAt;
        for (let i = d.history.length - 1; i >= 0; i--) {
          if (d.history[i]!.to === 'EXPIRED') {
            expiredAt = Date.parse(d.history[i]!.at);
            break;
          }
        }
        this.scheduleCancel(d, expiredAt + this.expiredToCancelledMs);
      }
    }
  }

  // ------------------------------------------------------------------ creation

  addDeposit(record: DepositRecord, trigger: string, notify: boolean): void {
    record.history.push({ from: null, to: record.status, at: this.nowIso(), trigger });
    this.deposits.set(record.id, record);
    this.invoices.set(`${record.account}\u0000${record.invoiceId}`, record.id);
    this.pageTokens.set(record.pageToken, record.id);
    this.touch(record);
    this.flagsOnEnter(record, record.status);
    if (record.expiresAt !== null && EXPIRABLE.has(record.status)) this.scheduleExpiry(record);
    this.emit({ kind: 'deposit', record, from: null, to: record.status, trigger, notify });
  }

  addCashout(record: CashoutRecord): void {
    record.history.push({ from: null, to: record.status, at: this.nowIso(), trigger: 'api' });
    this.cashouts.set(record.id, record);
    this.externalIds.set(`${record.account}\u0000${record.externalId}`, record.id);
    this.touch(record);
    this.emit({ kind: 'cashout', record, from: null, to: record.status, trigger: 'api', notify: false });
  }

  addRefund(record: RefundRecord): void {
    record.history.push({ from: null, to: record.status, at: this.nowIso(), trigger: 'api' });
    this.refunds.set(record.id, record);
    this.touch(record);
    this.emit({ kind: 'refund', record, from: null, to: record.status, trigger: 'api', notify: false });
  }

  depositByInvoice(account: string, invoiceId: string): DepositRecord | undefined {
    const id = this.invoices.get(`${account}\u0000${invoiceId}`);
    return id === undefined ? undefined : this.deposits.get(id);
  }

  cashoutByExternalId(account: string, externalId: string): CashoutRecord | undefined {
    const id = this.externalIds.get(`${account}\u0000${externalId}`);
    return id === undefined ? undefined : this.cashouts.get(id);
  }

  get(kind: EntityKind, id: number): AnyRecord | undefined {
    switch (kind) {
      case 'deposit':
        return this.deposits.get(id);
      case 'cashout':
        return this.cashouts.get(id);
      case 'refund':
        return this.refunds.get(id);
    }
  }

  // ------------------------------------------------------------------ moves

  moveDeposit(record: DepositRecord, to: DepositStatus, options: MoveOptions): MoveResult<DepositRecord> {
    const from = record.status;
    if (!isDirectTransition('deposit', from, to)) return { ok: false, from, to };
    if (to === 'CANCELLED' && options.statusReason) record.statusReason = options.statusReason;
    if (options.paidAmount !== undefined) record.paidAmount = options.paidAmount;
    if (to === 'COMPLETED' && record.paymentMethod) record.completedPaymentMethodCode = record.paymentMethod;
    this.apply(record, to, options);
    this.flagsOnEnter(record, to);
    if (to === 'EXPIRED') this.scheduleCancel(record, this.clock.now() + this.expiredToCancelledMs);
    this.emitMove('deposit', record, from, to, options);
    return { ok: true, record };
  }

  moveCashout(record: CashoutRecord, to: CashoutStatus, options: MoveOptions): MoveResult<CashoutRecord> {
    const from = record.status;
    if (!isDirectTransition('cashout', from, to)) return { ok: false, from, to };
    if (to === 'REJECTED') {
      record.rejectionCode = options.rejectionCode === undefined ? 800 : Number(options.rejectionCode);
      record.rejectionReason = options.rejectionReason ?? 'ERROR_ACCOUNT_INCORRECT';
      record.statusReason = record.rejectionReason;
    }
    if (to === 'DELIVERED' && !record.providerExternalReference) {
      record.providerExternalReference = `E${this.rng.hex(8).toUpperCase()}${record.id}`;
    }
    if (to === 'COMPLETED') record.everCompleted = true;
    if (to === 'CANCELLED') record.statusReason = 'Canceled';
    this.apply(record, to, options);
    this.emitMove('cashout', record, from, to, options);
    return { ok: true, record };
  }

  moveRefund(record: RefundRecord, to: RefundStatus, options: MoveOptions): MoveResult<RefundRecord> {
    const from = record.status;
    if (!isDirectTransition('refund', from, to)) return { ok: false, from, to };
    if (to === 'REJECTED') {
      record.rejectionCode =
        options.rejectionCode == null ? 'REJECTED_BY_BANK' : String(options.rejectionCode);
      record.rejectionReason = options.rejectionReason ?? 'Rejected by the receiving bank';
    }
    if (to === 'COMPLETED') record.everCompleted = true;
    this.apply(record, to, options);
    const deposit = this.deposits.get(record.depositId);
    if (deposit) {
      deposit.refundedAmount = this.refundedTotal(deposit.id);
      deposit.cachedBody = undefined;
      this.touch(deposit);
    }
    this.emitMove('refund', record, from, to, options);
    return { ok: true, record };
  }

  /** Generic move by kind and status text (control API). */
  move(record: AnyRecord, to: string, options: MoveOptions): MoveResult<AnyRecord> {
    switch (record.kind) {
      case 'deposit':
        return this.moveDeposit(record, to as DepositStatus, options);
      case 'cashout':
        return this.moveCashout(record, to as CashoutStatus, options);
      case 'refund':
        return this.moveRefund(record, to as RefundStatus, options);
    }
  }

  /** Sum of the refunds of a deposit that still count (not cancelled, not rejected). */
  refundedTotal(depositId: number): Minor {
    let total = 0n;
    for (const r of this.refunds.values()) {
      if (r.depositId === depositId && r.status !== 'CANCELLED' && r.status !== 'REJECTED') total += r.amount;
    }
    return total;
  }

  // ------------------------------------------------------------------ internals

  private apply(record: AnyRecord, to: string, options: MoveOptions): void {
    const from = record.status;
    record.status = to as never;
    record.updatedAt = this.clock.now();
    record.cachedBody = undefined;
    this.touch(record);
    record.history.push({
      from,
      to,
      at: this.nowIso(),
      trigger: options.trigger,
      reason: options.reason ?? null,
    });
  }

  private flagsOnEnter(record: DepositRecord, to: DepositStatus): void {
    if (to === 'COMPLETED') record.everCompleted = true;
    if (to === 'EARLY_RELEASED') record.everEarlyReleased = true;
  }

  private scheduleCancel(record: DepositRecord, atMs: number): void {
    this.clock.at(atMs, () => {
      if (record.status === 'EXPIRED')
        this.moveDeposit(record, 'CANCELLED', { trigger: 'clock', reason: 'expired 7 days ago' });
    });
  }

  private scheduleExpiry(record: DepositRecord): void {
    const at = record.expiresAt;
    if (at === null) return;
    this.clock.at(at, () => {
      if (EXPIRABLE.has(record.status))
        this.moveDeposit(record, 'EXPIRED', { trigger: 'clock', reason: 'expiration passed' });
    });
  }

  private emitMove(
    kind: EntityKind,
    record: AnyRecord,
    from: string,
    to: string,
    options: MoveOptions,
  ): void {
    this.emit({ kind, record, from, to, trigger: options.trigger, notify: options.notify ?? true });
  }

  private emit(change: Change): void {
    for (const l of this.listeners) {
      try {
        l(change);
      } catch {
        // A listener's failure must not undo a move that already happened.
      }
    }
  }
}
