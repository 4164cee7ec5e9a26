import { describe, expect, it } from 'vitest';
import { settlementCron } from './catalog.ts';
import { fireTimesBetween } from './scheduler.ts';

describe('settlement cron', () => {
  it.each([
    ['00:00', '30 0 * * *'],
    ['18:00', '30 18 * * *'],
    ['23:45', '15 0 * * *'],
  ])('cut-off %s fires at %s', (cutoff, cron) => {
    expect(settlementCron(cutoff)).toBe(cron);
  });

  it('fire times are exact minutes after the start', () => {
    const times = fireTimesBetween(
      '*/30 * * * *',
      'UTC',
      new Date('2026-11-21T10:00:00Z'),
      new Date('2026-11-21T11:00:00Z'),
    );
    expect(times.map((t) => t.toISOString())).toEqual([
      '2026-11-21T10:30:00.000Z',
      '2026-11-21T11:00:00.000Z',
    ]);
  });
});
