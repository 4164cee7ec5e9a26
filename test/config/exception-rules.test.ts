/**
 * The exception rules the parts run with come from the configuration: every deadline of
 * PAYRECON_EXCEPTION_DEADLINES and every severity of PAYRECON_EXCEPTION_SEVERITIES (a documented setting
 * that the rules ignored would leave an operator believing, say, LATE_COMPLETION is critical when it is not).
 */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { exceptionRulesFrom } from '../../src/config-rules.ts';
import { DEFAULT_EXCEPTION_RULES } from '../../src/domain/exception-rules.ts';

const H = 3_600_000;

describe('exceptionRulesFrom', () => {
  it('keeps the defaults when nothing is configured', () => {
    const rules = exceptionRulesFrom(loadConfig({}));
    expect(rules.severity).toEqual(DEFAULT_EXCEPTION_RULES.severity);
    expect(rules.stuck).toEqual(DEFAULT_EXCEPTION_RULES.stuck);
    expect(rules.unknownTransactionGraceMs).toBe(DEFAULT_EXCEPTION_RULES.unknownTransactionGraceMs);
    expect(rules.missedNotificationGraceMs).toBe(DEFAULT_EXCEPTION_RULES.missedNotificationGraceMs);
    expect(rules.outcomeUnknownGraceMs).toBe(DEFAULT_EXCEPTION_RULES.outcomeUnknownGraceMs);
  });

  it('applies every configured deadline and severity', () => {
    const rules = exceptionRulesFrom(
      loadConfig({
        PAYRECON_EXCEPTION_SEVERITIES: '{"LATE_COMPLETION":"critical","OUTCOME_UNKNOWN":"medium"}',
        PAYRECON_EXCEPTION_DEADLINES: JSON.stringify({
          depositExpiryGraceMinutes: 5,
          depositNoExpiryHours: 6,
          cashoutPendingHours: 7,
          cashoutOnHoldHours: 8,
          cashoutDeliveredHours: 9,
          refundPendingHours: 10,
          refundIncorrectDetailsHours: 11,
          refundDeliveredHours: 12,
          lateRejectionWatchDays: 13,
          lateCompletionWatchDays: 14,
          unknownTransactionGraceMinutes: 15 + 1,
          missedNotificationGraceMinutes: 17,
          outcomeUnknownGraceMinutes: 18,
        }),
      }),
    );
    expect(rules.severity.LATE_COMPLETION).toBe('critical');
    expect(rules.severity.OUTCOME_UNKNOWN).toBe('medium');
    expect(rules.severity.STUCK).toBe(DEFAULT_EXCEPTION_RULES.severity.STUCK);
    expect(rules.stuck).toEqual({
      depositAfterExpiryMs: 5 * 60_000,
      depositNoExpiryMs: 6 * H,
      cashoutPendingMs: 7 * H,
      cashoutOnHoldMs: 8 * H,
      cashoutDeliveredMs: 9 * H,
      refundPendingMs: 10 * H,
      refundIncorrectDetailsMs: 11 * H,
      refundDeliveredMs: 12 * H,
    });
    expect(rules.polling.lateRejectionWindowMs).toBe(13 * 24 * H);
    expect(rules.polling.lateCompletionWindowMs).toBe(14 * 24 * H);
    expect(rules.unknownTransactionGraceMs).toBe(16 * 60_000);
    expect(rules.missedNotificationGraceMs).toBe(17 * 60_000);
    expect(rules.outcomeUnknownGraceMs).toBe(18 * 60_000);
  });
});
