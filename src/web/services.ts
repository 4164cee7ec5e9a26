/**
 * The page's services over the ledger database and the report runner. Queries here read the ledger's
 * tables (`src/db/schema.ts`); the only writes are an exception's acknowledgement or resolution
 * (state, who, when, note).
 */
import { sql } from 'kysely';
import { balancesBefore } from '../db/report-queries.ts';
import type { Db } from '../db/schema.ts';
import { UNRESOLVED_STATES } from '../domain/exception-queue.ts';
import type { ReportRun, ReportRunner } from '../reports/runs.ts';
import type { WebServices } from './app.ts';
import {
  AGE_BUCKETS,
  type BalanceView,
  type ExceptionFilter,
  type ExceptionView,
  type ReportRunView,
} from './views.ts';

/** Statuses in which a cashout or refund holds money in `reserved`. */
export const IN_FLIGHT = {
  cashout: ['PENDING', 'ON_HOLD', 'DELIVERED'],
  refund: ['PENDING', 'INCORRECT_DETAILS', 'DELIVERED'],
} as const;

function runView(run: ReportRun): ReportRunView {
  return {
    id: run.id,
    kind: run.kind,
    account: run.account,
    from: run.from,
    to: run.to,
    status: run.status,
    progress: run.progress,
    rowCounts: run.rowCounts,
    sha256: run.sha256,
    files: run.files.map((f) => ({ name: f.name, label: f.label })),
    requestedBy: run.requestedBy,
    trigger: run.trigger,
    createdAt: run.createdAt,
    finishedAt: run.finishedAt,
    error: run.error ?? (run.deleted ? 'Files removed by retention.' : null),
  };
}

export function ledgerWebServices(db: Db, reports: ReportRunner): WebServices {
  return {
    reports: {
      list: async (limit) => (await reports.list(limit)).map(runView),
      get: async (id) => {
        const run = await reports.get(id);
        return run ? runView(run) : null;
      },
      start: async (params) => {
        const started = await reports.start(
          { kind: params.kind, from: params.from, to: params.to, account: params.account },
          { trigger: 'demand', requestedBy: params.requestedBy },
        );
        if (!started) throw new Error('report run key collision');
        // The page follows progress from the database; a failure is recorded on the run.
        started.done.catch(() => undefined);
        return started.id;
      },
      filePath: (id, name) => reports.filePath(id, name),
      accounts: () => reports.accounts(),
    },

    exceptions: {
      list: async (filter: ExceptionFilter, now: Date): Promise<ExceptionView[]> => {
        const bucket = filter.age ? AGE_BUCKETS.find((b) => b.key === filter.age) : undefined;
        const day = 86_400_000;
        const states = filter.state ? [filter.state] : [...UNRESOLVED_STATES];
        const { rows } = await sql<{
          id: string;
          type: string;
          merchant_account: string;
          entity_kind: string;
          entity_id: string;
          severity: string;
          state: string;
          count: number;
          first_seen_at: Date;
          last_seen_at: Date;
          note: string | null;
          acted_by: string | null;
          acted_at: Date | null;
        }>`
          SELECT id::text AS id, type, merchant_account, entity_kind, entity_id, severity, state, count,
                 first_seen_at, last_seen_at,
                 CASE WHEN state = 'resolved' THEN resolution_note ELSE acknowledgement_note END AS note,
                 CASE WHEN state = 'resolved' THEN resolved_by ELSE acknowledged_by END AS acted_by,
                 CASE WHEN state = 'resolved' THEN resolved_at ELSE acknowledged_at END AS acted_at
            FROM exceptions
           WHERE state IN (${sql.join(states)})
             ${filter.type ? sql`AND type = ${filter.type}` : sql``}
             ${bucket ? sql`AND first_seen_at <= ${new Date(now.getTime() - bucket.minDays * day)}` : sql``}
             ${
               bucket && Number.isFinite(bucket.maxDays)
                 ? sql`AND first_seen_at > ${new Date(now.getTime() - bucket.maxDays * day)}`
                 : sql``
             }
           ORDER BY first_seen_at, id
           LIMIT 500`.execute(db);
        return rows.map((r) => ({
          id: r.id,
          type: r.type,
          account: r.merchant_account,
          kind: r.entity_kind,
          entityId: r.entity_id,
          severity: r.severity,
          state: r.state,
          count: r.count,
          firstSeenAt: r.first_seen_at,
          lastSeenAt: r.last_seen_at,
          note: r.note,
          actedBy: r.acted_by,
          actedAt: r.acted_at,
        }));
      },
      types: async () => {
        const rows = await db.selectFrom('exceptions').select('type').distinct().orderBy('type').execute();
        return rows.map((r) => r.type);
      },
      act: async (id, action, note, username, now) => {
        if (!/^\d{1,18}$/.test(id)) return false;
        const result =
          action === 'acknowledge'
            ? await sql`UPDATE exceptions SET state = 'acknowledged', acknowledged_by = ${username},
                          acknowledged_at = ${now}, acknowledgement_note = ${note}, updated_at = now()
                         WHERE id = ${id} AND state = 'open'`.execute(db)
            : await sql`UPDATE exceptions SET state = 'resolved', resolved_by = ${username}, resolved_at = ${now},
                          resolution_note = ${note}, updated_at = now()
                         WHERE id = ${id} AND state <> 'resolved'`.execute(db);
        return Number(result.numAffectedRows ?? 0n) > 0;
      },
    },

    balances: {
      list: async (at: Date): Promise<BalanceView[]> => {
        const [balances, inflight] = await Promise.all([
          balancesBefore(db, new Date(at.getTime() + 1), null),
          // Refunds of test deposits carry the test flag and are in flight in the test book.
          sql<{
            merchant_account: string;
            currency: string;
            test: boolean;
            cashouts: number;
            refunds: number;
          }>`
            SELECT merchant_account, currency, test,
                   count(*) FILTER (WHERE entity_kind = 'cashout' AND status IN (${sql.join([...IN_FLIGHT.cashout])}))::int AS cashouts,
                   count(*) FILTER (WHERE entity_kind = 'refund' AND status IN (${sql.join([...IN_FLIGHT.refund])}))::int AS refunds
              FROM mirrors WHERE currency IS NOT NULL
             GROUP BY 1, 2, 3`.execute(db),
        ]);
        const views = new Map<string, BalanceView>();
        const view = (account: string, currency: string, book: string): BalanceView => {
          const key = `${account}|${currency}|${book}`;
          let v = views.get(key);
          if (!v) {
            v = {
              account,
              currency,
              book,
              available: 0n,
              reserved: 0n,
              inFlightCashouts: 0,
              inFlightRefunds: 0,
            };
            views.set(key, v);
          }
          return v;
        };
        for (const b of balances) {
          if (b.book === 'live' && b.account === 'available')
            view(b.merchantAccount, b.currency, 'live').available = b.balance;
          if (b.book === 'live' && b.account === 'reserved')
            view(b.merchantAccount, b.currency, 'live').reserved = b.balance;
          if (b.book === 'test' && b.account === 'test_available')
            view(b.merchantAccount, b.currency, 'test').available = b.balance;
          if (b.book === 'test' && b.account === 'test_reserved')
            view(b.merchantAccount, b.currency, 'test').reserved = b.balance;
        }
        for (const r of inflight.rows) {
          if (r.cashouts === 0 && r.refunds === 0) continue;
          const v = view(r.merchant_account, r.currency, r.test ? 'test' : 'live');
          v.inFlightCashouts = r.cashouts;
          v.inFlightRefunds = r.refunds;
        }
        return [...views.values()].sort(
          (a, b) =>
            a.account.localeCompare(b.account) ||
            a.currency.localeCompare(b.currency) ||
            a.book.localeCompare(b.book),
        );
      },
    },
  };
}
