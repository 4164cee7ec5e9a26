import { describe, expect, it } from 'vitest';
import { addDays, isoWeekday, isTimeZone, localDate, zonedTimeToInstant } from './zoned-time.ts';

describe('zoned time', () => {
  it('gives local dates and wall-clock instants in a zone, across a daylight-saving change', () => {
    expect(localDate(new Date(Date.UTC(2026, 2, 3, 2, 30)), 'America/Sao_Paulo')).toBe('2026-03-02');
    expect(localDate(new Date(Date.UTC(2026, 2, 3, 2, 30)), 'UTC')).toBe('2026-03-03');
    // New York moves from UTC-5 to UTC-4 on 2026-03-08.
    expect(zonedTimeToInstant('2026-03-08', '00:00', 'America/New_York').toISOString()).toBe(
      '2026-03-08T05:00:00.000Z',
    );
    expect(zonedTimeToInstant('2026-03-09', '00:00', 'America/New_York').toISOString()).toBe(
      '2026-03-09T04:00:00.000Z',
    );
    expect(zonedTimeToInstant('2026-07-01', '18:30', 'Asia/Kolkata').toISOString()).toBe(
      '2026-07-01T13:00:00.000Z',
    );
    expect(addDays('2026-02-28', 1)).toBe('2026-03-01');
    expect(isoWeekday('2026-03-02')).toBe(1);
    expect(isoWeekday('2026-03-08')).toBe(7);
    expect(isTimeZone('Europe/Berlin')).toBe(true);
    expect(isTimeZone('Mars/Olympus')).toBe(false);
  });
});
