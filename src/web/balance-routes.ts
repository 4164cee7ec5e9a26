/**
 * The balances page's routes: `/balances` (balances and their movements) and
 * `/balances/charts` (balances over time, daily volumes, open exceptions by age), registered by `webRoutes` (src/web/app.ts) on its own
 * encapsulated instance: sign-in, CSRF and the error pages apply as to every page. The periods are the
 * page's: today and this month from local midnight in the page's time zone, the balance chart's days at
 * UTC midnights (when the daily snapshots are taken), the volume chart's days local.
 */
import type { FastifyInstance } from 'fastify';
import type { AgeBucketRow, BalanceMovementRow, BalancePoint, VolumeRow } from '../db/read-models/charts.ts';
import type { ProviderBalanceCheckRow } from '../db/read-models/settlements.ts';
import { addDays, localDate, zonedTimeToInstant } from '../domain/zoned-time.ts';
import {
  type BalanceView,
  balanceChartsPage,
  balancesPage,
  type CashLegView,
  CHART_DAYS,
} from './balance-views.ts';
import type { PageKit } from './page-kit.ts';

/** What the balances page reads; implemented over the ledger database by src/web/balance-services.ts. */
export interface BalanceServices {
  /** Available and reserved per account, currency and book as of `at`, with in-flight counts. */
  list(at: Date): Promise<BalanceView[]>;
  /** The cash leg's balances per account and currency as of `at` (settlements in transit, bank ...). */
  cashLeg(at: Date): Promise<CashLegView[]>;
  /** The latest check of the provider's balance per account and currency (made by matching runs). */
  providerBalances(): Promise<ProviderBalanceCheckRow[]>;
  /** Postings in and out of each balance in [monthStart, at), by effect, with the part since todayStart. */
  movements(monthStart: Date, todayStart: Date, at: Date): Promise<BalanceMovementRow[]>;
  /** Daily snapshots of the balances at the UTC midnights in [from, to]. */
  history(from: Date, to: Date): Promise<BalancePoint[]>;
  /** Entities first seen in [from, to) per local day, kind, status, currency and test flag. */
  volumes(from: Date, to: Date, timeZone: string): Promise<VolumeRow[]>;
  /** Unresolved exceptions per age bucket and severity at `now`. */
  exceptionAges(now: Date): Promise<AgeBucketRow[]>;
}

const DAY_MS = 86_400_000;

/** The local periods of the page at `at`: today's and the month's starts (local midnights in `tz`). */
function periods(at: Date, tz: string) {
  const today = localDate(at, tz);
  return {
    today,
    todayStart: zonedTimeToInstant(today, '00:00', tz),
    monthStart: zonedTimeToInstant(`${today.slice(0, 8)}01`, '00:00', tz),
  };
}

export function balanceRoutes(app: FastifyInstance, kit: PageKit, services: BalanceServices): void {
  // The balances with today's and this month's movements: running balances, in-flight counts and the
  // per-day and per-hour movements, nothing that grows with the period's traffic (the charts have their own page).
  app.get('/balances', async (request, reply) => {
    const ctx = kit.ctx(request);
    const at = kit.now();
    const { todayStart, monthStart } = periods(at, ctx.timeZone);
    const [balances, cashLeg, providerBalances, movements] = await Promise.all([
      services.list(at),
      services.cashLeg(at),
      services.providerBalances(),
      services.movements(monthStart, todayStart, at),
    ]);
    return kit.send(reply, balancesPage(ctx, { at, balances, cashLeg, providerBalances, movements }));
  });

  app.get<{ Querystring: { days?: string; currency?: string } }>(
    '/balances/charts',
    async (request, reply) => {
      const ctx = kit.ctx(request);
      const at = kit.now();
      const tz = ctx.timeZone;
      const wanted = Number(request.query.days);
      const days = CHART_DAYS.find((d) => d === wanted) ?? 30;
      const { today } = periods(at, tz);
      const utcMidnight = Math.floor(at.getTime() / DAY_MS) * DAY_MS;
      const historyDays = Array.from(
        { length: days },
        (_, i) => new Date(utcMidnight - (days - 1 - i) * DAY_MS),
      );
      const volumeDays = Array.from({ length: days }, (_, i) => addDays(today, i - (days - 1)));
      const [balances, history, volumes, exceptionAges] = await Promise.all([
        services.list(at),
        services.history(historyDays[0] ?? at, at),
        services.volumes(zonedTimeToInstant(volumeDays[0] ?? today, '00:00', tz), at, tz),
        services.exceptionAges(at),
      ]);
      const currencies = [...new Set(balances.map((b) => b.currency))].sort();
      const currency = currencies.find((c) => c === request.query.currency) ?? currencies[0] ?? null;
      return kit.send(
        reply,
        balanceChartsPage(ctx, {
          at,
          balances,
          history,
          historyDays,
          volumes,
          volumeDays,
          currency,
          currencies,
          days,
          exceptionAges,
        }),
      );
    },
  );
}
