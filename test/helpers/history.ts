/** History items for the pure rule tests (src/domain/*.test.ts): a BRL 10.00 poll reading by default. */
import type { HistoryItem } from '../../src/domain/effects.ts';
import { NO_FACTS } from '../../src/domain/observation.ts';

/** One recorded observation `eventId` with `status`, observed `at` seconds after the epoch. */
export function historyItem(
  eventId: string,
  status: string | null,
  at: number,
  extra: Partial<HistoryItem> = {},
): HistoryItem {
  return {
    eventId,
    status,
    observedAt: new Date(at * 1000),
    source: 'poll',
    externalRef: null,
    currency: 'BRL',
    amount: 1000n,
    ...NO_FACTS,
    ...extra,
  };
}
