import { describe, expect, it } from 'vitest';
import { DEFAULT_SETTLEMENT_CONFIG } from './settlement-config.ts';
import { nextCutoff } from './settlements.ts';
import { addDays, isoWeekday, isTimeZone, localDate, zonedInstant } from './zoned-time.ts';

describe('zoned time', () => {
  it('gives local dates and wall-clock instants in a zone, across a daylight-saving change', () => {
    expect(localDate(Date.UTC(2026, 2, 3, 2, 30), 'America/Sao_Paulo')).toBe('2026-03-02');
    expect(localDate(Date.UTC(2026, 2, 3, 2, 30), 'UTC')).toBe('2026-03-03');
    // New York moves from UTC-5 to UTC-4 on 2026-03-08.
    expect(new Date(zonedInstant('2026-03-08', '00:00', 'America/New_York')).toISOString()).toBe(
      '2026-03-08T05:00:00.000Z',
    );
    expect(new Date(zonedInstant('2026-03-09', '00:00', 'America/New_York')).toISOString()).toBe(
      '2026-03-09T04:00:00.000Z',
    );
    expect(new Date(zonedInstant('2026-07-01', '18:30', 'Asia/Kolkata')).toISOString()).toBe(
      '2026-07-01T13:00:00.000Z',
    );
    expect(addDays('2026-02-28', 1)).toBe('2026-03-01');
    expect(isoWeekday('2026-03-02')).toBe(1);
    expect(isoWeekday('2026-03-08')).toBe(7);
    expect(isTimeZone('Europe/Berlin')).toBe(true);
    expect(isTimeZone('Mars/Olympus')).toBe(false);
  });

  it('finds the next cut-off of a daily or weekly schedule strictly after an instant', () => {
    const daily = { ...DEFAULT_SETTLEMENT_CONFIG, cutoff: '18:00' };
    const at = Date.UTC(2026, 2, 2, 21, 0); // 18:00 in São Paulo
    expect(nextCutoff(at - 1, daily, 'America/Sao_Paulo')).toBe(at);
    expect(nextCutoff(at, daily, 'America/Sao_Paulo')).toBe(at + 86_400_000);
    const weekly = { ...DEFAULT_SETTLEMENT_CONFIG, schedule: 'weekly' as const, weekday: 5 };
    expect(new Date(nextCutoff(Date.UTC(2026, 2, 2), weekly, 'UTC')).toISOString()).toBe(
      '2026-03-06T00:00:00.000Z',
    );
    expect(new Date(nextCutoff(Date.UTC(2026, 2, 6), weekly, 'UTC')).toISOString()).toBe(
      '2026-03-13T00:00:00.000Z',
    );
  });
});
