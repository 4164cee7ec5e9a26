import { describe, expect, it } from 'vitest';
import { DEFAULT_SETTLEMENT_CONFIG } from './settlement-config.ts';
import { nextCutoff } from './settlements.ts';

describe('settlement cut-offs', () => {
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
