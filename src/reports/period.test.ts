import { describe, expect, it } from 'vitest';
import { isIsoDate, zonedTimeToInstant, zoneOffsetMs } from '../domain/zoned-time.ts';
import { businessDayEnd, excelDate, lastClosedBusinessDay, periodOf } from './period.ts';

describe('periods in a time zone', () => {
  it.each([
    // [date, time, zone, instant]
    ['2026-11-21', '00:00', 'UTC', '2026-11-21T00:00:00.000Z'],
    ['2026-11-21', '00:00', 'Europe/Berlin', '2026-11-20T23:00:00.000Z'],
    ['2026-07-01', '00:00', 'Europe/Berlin', '2026-06-30T22:00:00.000Z'],
    ['2026-11-21', '18:30', 'America/Sao_Paulo', '2026-11-21T21:30:00.000Z'],
    // Clocks go forward at 02:00 on 2026-03-29 in Berlin: 03:00 local is 01:00Z.
    ['2026-03-29', '03:00', 'Europe/Berlin', '2026-03-29T01:00:00.000Z'],
  ])('%s %s in %s is %s', (date, time, zone, iso) => {
    expect(zonedTimeToInstant(date, time, zone).toISOString()).toBe(iso);
  });

  it('a business day ends at its cut-off, or at the next midnight with cut-off 00:00', () => {
    expect(businessDayEnd('2026-11-21', '00:00', 'UTC').toISOString()).toBe('2026-11-22T00:00:00.000Z');
    expect(businessDayEnd('2026-11-21', '18:00', 'UTC').toISOString()).toBe('2026-11-21T18:00:00.000Z');
    const p = periodOf('2026-11-20', '2026-11-21', 'UTC', '18:00');
    expect([p.start.toISOString(), p.end.toISOString()]).toEqual([
      '2026-11-19T18:00:00.000Z',
      '2026-11-21T18:00:00.000Z',
    ]);
  });

  it('finds the last closed business day', () => {
    expect(lastClosedBusinessDay(new Date('2026-11-22T00:30:00Z'), '00:00', 'UTC')).toBe('2026-11-21');
    expect(lastClosedBusinessDay(new Date('2026-11-21T17:59:00Z'), '18:00', 'UTC')).toBe('2026-11-20');
    expect(lastClosedBusinessDay(new Date('2026-11-21T18:00:00Z'), '18:00', 'UTC')).toBe('2026-11-21');
    expect(lastClosedBusinessDay(new Date('2026-11-21T23:30:00Z'), '00:00', 'Europe/Berlin')).toBe(
      '2026-11-21',
    );
  });

  it('refuses malformed periods', () => {
    expect(() => periodOf('2026-11-31', '2026-12-01', 'UTC')).toThrow(/YYYY-MM-DD/);
    expect(() => periodOf('2026-11-22', '2026-11-21', 'UTC')).toThrow(/after/);
    expect(() => periodOf('2026-11-21', '2026-11-21', 'UTC', '25:00')).toThrow(/cut-off/);
    expect(isIsoDate('2026-02-29')).toBe(false);
    expect(isIsoDate('2028-02-29')).toBe(true);
  });

  it('shifts an instant to the wall clock of the zone for Excel', () => {
    const instant = new Date('2026-11-21T10:00:00Z');
    expect(zoneOffsetMs(instant, 'Asia/Kolkata')).toBe(5.5 * 3_600_000);
    expect(excelDate(instant, 'Asia/Kolkata').toISOString()).toBe('2026-11-21T15:30:00.000Z');
  });
});
