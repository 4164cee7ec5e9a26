/**
 * Provider-side moves without a person: the automatic mode moves every entity along a realistic path
 * with configured probabilities and delays (sandbox time, so a fast clock makes a day pass in minutes),
 * and late rejection (a fault setting, active even when the automatic mode is off) turns COMPLETED
 * cashouts and refunds REJECTED later.
 */
import { z } from 'zod';
import type { Change, SandboxEngine } from './engine.ts';
import type { CashoutRecord, DepositRecord, RefundRecord } from './entities.ts';
import type { Faults } from './faults.ts';
import type { Rng } from './rng.ts';

const p = z.number().min(0);

export const autoSettingsSchema = z.object({
  enabled: z.boolean().default(false),
  /** Sandbox milliseconds between two moves of one entity: uniform in [min, max]. */
  minDelayMs: z.number().min(0).default(5_000),
  maxDelayMs: z.number().min(0).default(120_000),
  /** What a customer does with a PENDING deposit (weights). `none` leaves it to expire. */
  deposit: z
    .object({
      pay: p.default(85),
      amountMismatch: p.default(2),
      thirdParty: p.default(2),
      review: p.default(3),
      decline: p.default(3),
      none: p.default(5),
    })
    .default({ pay: 85, amountMismatch: 2, thirdParty: 2, review: 3, decline: 3, none: 5 }),
  /** Probability a HOSTED deposit's customer fills the checkout (else it expires). */
  hostedFillRate: z.number().min(0).max(1).default(0.9),
  /** Probability a 3DS challenge passes. */
  threeDsPassRate: z.number().min(0).max(1).default(0.9),
  /** Probability a reviewed or early-released deposit ends COMPLETED. */
  reviewApproveRate: z.number().min(0).max(1).default(0.8),
  earlyReleaseCompleteRate: z.number().min(0).max(1).default(0.95),
  /** Probability the bank confirms a delivered cashout/refund (else rejects). */
  cashoutConfirmRate: z.number().min(0).max(1).default(0.95),
  refundConfirmRate: z.number().min(0).max(1).default(0.95),
  refundIncorrectDetailsRate: z.number().min(0).max(1).default(0.05),
  /**
   * Probability that a deposit which turned EXPIRED or CANCELLED is completed later by the provider's
   * manual action (a late payment matched by hand; docs/provider.md). 0 by default.
   */
  lateCompletionRate: z.number().min(0).max(1).default(0),
  /** Which deposits may be completed late: EXPIRED ones, CANCELLED ones (not through EXPIRED), or both. */
  lateCompletionFrom: z.array(z.enum(['EXPIRED', 'CANCELLED'])).default(['EXPIRED', 'CANCELLED']),
  /** Sandbox milliseconds from EXPIRED or CANCELLED to the late completion: uniform in [min, max]. */
  lateCompletionDelayMs: z
    .tuple([z.number().min(0), z.number().min(0)])
    .default([3_600_000, 3 * 24 * 3_600_000]),
});
export type AutoSettings = z.infer<typeof autoSettingsSchema>;

/**
 * Bank rejection codes of a cashout that never completed: 800-825 (docs/provider.md); a few with
 * names. 826 is the late rejection of a completed cashout (`LATE_REJECTION_CODE`).
 */
export const BANK_REJECTIONS: readonly [number, string][] = [
  [800, 'ERROR_ACCOUNT_INCORRECT'],
  [801, 'ERROR_OWNER_INCORRECT'],
  [802, 'ERROR_OWNER_DOCUMENT_INCORRECT'],
  [803, 'ERROR_ACCOUNT_CLOSED'],
  [805, 'ERROR_BANK_INVALID'],
  [810, 'ERROR_AMOUNT_LIMIT_EXCEEDED'],
  [825, 'ERROR_OTHER'],
];

/** A COMPLETED cashout that the beneficiary's bank returns later: REJECTED with code 826. */
export const LATE_REJECTION_CODE = 826;
export const WITHDRAWAL_REVERSED = 'Withdrawal reversed';

export class AutomaticMode {
  settings: AutoSettings;
  /** Told when the settings change (the durable store keeps them). */
  onSettings: () => void = () => {};
  private readonly engine: SandboxEngine;
  private readonly rng: Rng;
  private readonly faults: Faults;

  constructor(engine: SandboxEngine, rng: Rng, faults: Faults, settings: unknown = {}) {
    this.engine = engine;
    this.rng = rng;
    this.faults = faults;
    this.settings = autoSettingsSchema.parse(settings);
    engine.onChange((change) => this.onChange(change));
  }

  set(settings: unknown): AutoSettings {
    const wasEnabled = this.settings.enabled;
    this.settings = autoSettingsSchema.parse(settings);
    this.onSettings();
    // Switched on: entities already waiting get their next move planned too.
    if (this.settings.enabled && !wasEnabled) this.planAll();
    return this.settings;
  }

  /**
   * After a restart: the stored late moves get their timers back, and with the automatic mode on every
   * entity gets its next move planned again (planned moves are not stored: nothing has seen them).
   */
  rearm(): void {
    for (const d of this.engine.deposits.values()) {
      if (d.lateCompletionAt != null) this.armLateCompletion(d, d.lateCompletionAt);
    }
    for (const r of [...this.engine.cashouts.values(), ...this.engine.refunds.values()]) {
      if (r.lateRejectAt != null && r.status === 'COMPLETED') this.armLateRejection(r, r.lateRejectAt);
    }
    if (this.settings.enabled) this.planAll();
  }

  private planAll(): void {
    for (const d of this.engine.deposits.values()) this.planDeposit(d);
    for (const c of this.engine.cashouts.values()) this.planCashout(c);
    for (const r of this.engine.refunds.values()) this.planRefund(r);
  }

  private onChange(change: Change): void {
    const { record } = change;
    if (record.kind !== 'deposit' && record.status === 'COMPLETED') this.maybeLateReject(record);
    if (!this.settings.enabled) return;
    if (
      record.kind === 'deposit' &&
      (record.status === 'EXPIRED' || (record.status === 'CANCELLED' && change.from !== 'EXPIRED'))
    ) {
      this.maybeLateComplete(record);
    }
    switch (record.kind) {
      case 'deposit':
        this.planDeposit(record);
        return;
      case 'cashout':
        this.planCashout(record);
        return;
      case 'refund':
        this.planRefund(record);
        return;
    }
  }

  /** Runs `fn` after a random delay unless the record moved in the meantime. */
  private later(record: { history: unknown[] }, fn: () => void, extraMs = 0): void {
    const { minDelayMs, maxDelayMs } = this.settings;
    const delay = minDelayMs + this.rng.next() * Math.max(0, maxDelayMs - minDelayMs) + extraMs;
    const version = record.history.length;
    this.engine.clock.at(this.engine.clock.now() + delay, () => {
      if (record.history.length === version && this.settings.enabled) fn();
    });
  }

  private planDeposit(d: DepositRecord): void {
    const e = this.engine;
    const s = this.settings;
    const t = { trigger: 'auto' };
    switch (d.status) {
      case 'CREATED':
        if (this.rng.chance(s.hostedFillRate)) this.later(d, () => e.moveDeposit(d, 'PENDING', t));
        return;
      case 'PENDING': {
        const choice = this.rng.weighted(s.deposit);
        if (choice === 'none') return;
        this.later(d, () => {
          switch (choice) {
            case 'pay':
              e.moveDeposit(d, d.crypto ? 'APPROVED' : d.earlyRelease ? 'EARLY_RELEASED' : 'COMPLETED', t);
              return;
            case 'amountMismatch':
              e.moveDeposit(d, 'CANCELLED', {
                ...t,
                statusReason: 'AMOUNT_MISMATCH',
                paidAmount: d.amount / 2n,
              });
              return;
            case 'thirdParty':
              e.moveDeposit(d, 'CANCELLED', { ...t, statusReason: 'THIRD_PARTY_PAYER' });
              return;
            case 'review':
              e.moveDeposit(d, 'FOR_REVIEW', t);
              return;
            case 'decline':
              e.moveDeposit(d, 'DECLINED', t);
              return;
          }
        });
        return;
      }
      case 'PENDING_AUTHENTICATION':
        this.later(d, () =>
          e.moveDeposit(d, this.rng.chance(s.threeDsPassRate) ? 'COMPLETED' : 'DECLINED', t),
        );
        return;
      case 'FOR_REVIEW':
        this.later(d, () =>
          e.moveDeposit(d, this.rng.chance(s.reviewApproveRate) ? 'COMPLETED' : 'DECLINED', t),
        );
        return;
      case 'EARLY_RELEASED':
        this.later(d, () =>
          e.moveDeposit(d, this.rng.chance(s.earlyReleaseCompleteRate) ? 'COMPLETED' : 'CANCELLED', t),
        );
        return;
      case 'APPROVED':
        this.later(d, () => e.moveDeposit(d, 'COMPLETED', t));
        return;
      default:
        return;
    }
  }

  private planCashout(c: CashoutRecord): void {
    const e = this.engine;
    const t = { trigger: 'auto' };
    if (c.status === 'PENDING') this.later(c, () => e.moveCashout(c, 'DELIVERED', t));
    if (c.status === 'DELIVERED') {
      this.later(c, () => {
        if (this.rng.chance(this.settings.cashoutConfirmRate)) e.moveCashout(c, 'COMPLETED', t);
        else {
          const [code, reason] = this.rng.pick(BANK_REJECTIONS);
          e.moveCashout(c, 'REJECTED', { ...t, rejectionCode: code, rejectionReason: reason });
        }
      });
    }
  }

  private planRefund(r: RefundRecord): void {
    const e = this.engine;
    const s = this.settings;
    const t = { trigger: 'auto' };
    if (r.status === 'PENDING') {
      this.later(r, () =>
        e.moveRefund(r, this.rng.chance(s.refundIncorrectDetailsRate) ? 'INCORRECT_DETAILS' : 'DELIVERED', t),
      );
    }
    if (r.status === 'INCORRECT_DETAILS') this.later(r, () => e.moveRefund(r, 'PENDING', t));
    if (r.status === 'DELIVERED') {
      this.later(r, () =>
        e.moveRefund(r, this.rng.chance(s.refundConfirmRate) ? 'COMPLETED' : 'REJECTED', t),
      );
    }
  }

  /** A deposit that expired or was cancelled: maybe the provider completes it later by hand. */
  private maybeLateComplete(d: DepositRecord): void {
    // Crypto deposits complete through APPROVED; a late payment is a fiat move. Planned once per deposit.
    if (d.crypto || d.lateCompletionAt != null || d.everCompleted) return;
    if (!this.settings.lateCompletionFrom.includes(d.status as 'EXPIRED' | 'CANCELLED')) return;
    if (!this.rng.chance(this.settings.lateCompletionRate)) return;
    const [min, max] = this.settings.lateCompletionDelayMs;
    const at = this.engine.clock.now() + min + Math.floor(this.rng.next() * Math.max(0, max - min));
    d.lateCompletionAt = at;
    this.engine.touch(d);
    this.armLateCompletion(d, at);
  }

  private armLateCompletion(d: DepositRecord, at: number): void {
    this.engine.clock.at(at, () => {
      if (d.lateCompletionAt !== at || (d.status !== 'EXPIRED' && d.status !== 'CANCELLED')) return;
      d.lateCompletionAt = null;
      this.engine.moveDeposit(d, 'COMPLETED', {
        trigger: 'late_payment',
        reason: 'late payment matched by the provider',
      });
    });
  }

  private maybeLateReject(record: CashoutRecord | RefundRecord): void {
    const late = this.faults.settings.lateRejection;
    const rate = record.kind === 'cashout' ? late.cashoutRate : late.refundRate;
    if (!this.rng.chance(rate)) return;
    const at = this.engine.clock.now() + late.delayMs;
    record.lateRejectAt = at;
    this.engine.touch(record);
    this.armLateRejection(record, at);
  }

  private armLateRejection(record: CashoutRecord | RefundRecord, at: number): void {
    this.engine.clock.at(at, () => {
      if (record.lateRejectAt !== at || record.status !== 'COMPLETED') return;
      record.lateRejectAt = null;
      const options = { trigger: 'late_rejection', reason: 'returned by the beneficiary bank' };
      if (record.kind === 'cashout') {
        this.engine.moveCashout(record, 'REJECTED', {
          ...options,
          rejectionCode: LATE_REJECTION_CODE,
          rejectionReason: WITHDRAWAL_REVERSED,
        });
      } else {
        this.engine.moveRefund(record, 'REJECTED', options);
      }
    });
  }
}
