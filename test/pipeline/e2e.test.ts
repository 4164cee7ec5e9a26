/**
 * End to end: the sandbox with generated traffic and webhook faults (duplicated, reordered, dropped),
 * late rejections, and the whole pipeline as `payrecon up` runs it (embedded broker and registry over
 * TCP and HTTP, a real PostgreSQL database). When everything is quiet, the ledger must equal the
 * sandbox's ground truth, verify clean, and hold exactly the exceptions the sandbox's anomalies call for.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JOBS_OFF, loadConfig } from '../../src/config.ts';
import { sweepExceptions } from '../../src/db/exceptions/sweep.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { balances } from '../../src/db/read-models/balances.ts';
import { DEFAULT_EXCEPTION_RULES } from '../../src/domain/exception-rules.ts';
import { ManualClock } from '../../src/sandbox/clock.ts';
import { type SandboxRun, startSandboxForUp } from '../../src/sandbox-part.ts';
import { type RunningPipeline, startPipeline } from '../../src/wiring.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { waitFor } from '../helpers/wait.ts';
import { TEST_EMBEDDED } from './helpers.ts';

const ENTITIES = Number(process.env.E2E_ENTITIES ?? 1500);
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

interface HistoryEntry {
  from: string | null;
  to: string;
  trigger: string;
  reason?: string | null;
}
interface SbEntity {
  id: number;
  status: string;
  history: HistoryEntry[];
  statusReason?: string | null;
  test?: boolean;
}
interface SbExport {
  deposits: SbEntity[];
  cashouts: SbEntity[];
  refunds: SbEntity[];
}

describe('the pipeline end to end against the sandbox', () => {
  let tdb: TestDatabase;
  let dataDir: string;
  let pipeline: RunningPipeline;
  let sandboxRun: SandboxRun;
  let sink: FastifyInstance;
  const clock = new ManualClock(Date.now());
  const alerts: { alert_id: string; type: string; entity_id: string | null }[] = [];
  let sandboxApi = '';

  beforeAll(async () => {
    tdb = await createTestDatabase();
    dataDir = mkdtempSync(join(tmpdir(), 'payrecon-e2e-'));
    sink = Fastify({ bodyLimit: 10 * 1024 * 1024 });
    sink.post('/alerts', async (req) => {
      const body = req.body as { digest?: boolean; alerts?: typeof alerts } & (typeof alerts)[number];
      if (body.digest && body.alerts) alerts.push(...body.alerts);
      else alerts.push(body);
      return 'ok';
    });
    const sinkUrl = `${await sink.listen({ host: '127.0.0.1', port: 0 })}/alerts`;
    const config = loadConfig({
      DATABASE_URL: tdb.url,
      PAYRECON_DATA_DIR: dataDir,
      PAYRECON_WEB_PORT: '0',
      LOG_LEVEL: 'error',
      PAYRECON_ALERT_WEBHOOK_URL: sinkUrl,
      PAYRECON_ALERT_MIN_SEVERITY: 'high',
      PAYRECON_POLL_CONCURRENCY: '16',
      PAYRECON_POLL_BATCH_SIZE: '500',
      PAYRECON_POLL_MIN_INTERVAL_SECONDS: '2',
      PAYRECON_SANDBOX_TRAFFIC: 'true',
      ...JOBS_OFF,
    });
    pipeline = await startPipeline(config, {
      embedded: TEST_EMBEDDED,
      sandbox: async ({ webBaseUrl, logger }) => {
        sandboxRun = await startSandboxForUp({
          webBaseUrl,
          logger,
          clock,
          trafficRate: 0,
          clientRetries: 3,
          // Moves of one entity at least six provider hours apart: the pipeline syncs every six hours, so it
          // observes every intermediate status (EARLY_RELEASED, COMPLETED) as a merchant would.
          auto: { minDelayMs: 6 * HOUR, maxDelayMs: 12 * HOUR },
          faults: {
            webhooks: { dropRate: 0.05, duplicateRate: 0.2, reorderRate: 0.1, reorderDelayMs: 20 * MINUTE },
            lateRejection: { cashoutRate: 0.1, refundRate: 0.1, delayMs: 2 * DAY },
          },
        });
        return sandboxRun;
      },
      rules: {
        polling: {
          ...DEFAULT_EXCEPTION_RULES.polling,
          firstDelayMs: 1_000,
          maxDelayMs: 3_000,
          completedRecheckMs: 3_000,
          lateRejectionWindowMs: 60 * MINUTE,
        },
      },
      pollerOverrides: { idleMs: 250 },
      print: () => undefined,
    });
    sandboxApi = sandboxRun.urls.api!;
  }, 180_000);

  afterAll(async () => {
    await pipeline?.stop();
    await sink?.close();
    await tdb?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  async function sandboxExport(): Promise<SbExport> {
    const res = await fetch(`${sandboxApi}/_sandbox/export`);
    return (await res.json()) as SbExport;
  }

  it('converges on the ground truth with exactly the exceptions the anomalies call for', async () => {
    // 1. Create the entities (traffic through the project's client, every creation recording its intent).
    const created = async () => {
      const e = await sandboxExport();
      return e.deposits.length + e.cashouts.length + e.refunds.length;
    };
    const res = await fetch(`${sandboxApi}/_sandbox/traffic`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ rate: 150 }),
    });
    expect(res.status).toBeLessThan(300);
    await waitFor(
      'the entities to be created',
      async () => ((await created()) >= ENTITIES ? true : undefined),
      120_000,
    );
    await fetch(`${sandboxApi}/_sandbox/traffic`, { method: 'DELETE' });

    // 2. Let ten provider days pass in ten-minute steps: payments, expiries, bank answers, late rejections.
    // Every six provider hours the pipeline catches up (a provider day is not milliseconds long in
    // production): a late rejection comes two days after COMPLETED, so COMPLETED is seen first.
    const entities = (x: SbExport) => [
      ...x.deposits.map((e) => ({ kind: 'deposit', e })),
      ...x.cashouts.map((e) => ({ kind: 'cashout', e })),
      ...x.refunds.map((e) => ({ kind: 'refund', e })),
    ];
    const caughtUp = async (what: string) => {
      const now = entities(await sandboxExport());
      await waitFor(
        what,
        async () => {
          const rows = await tdb.db
            .selectFrom('mirrors')
            .select(['entity_kind', 'entity_id', 'status'])
            .execute();
          const seen = new Map(rows.map((r) => [`${r.entity_kind}:${r.entity_id}`, r.status]));
          return now.every(({ kind, e }) => seen.get(`${kind}:${e.id}`) === e.status) ? true : undefined;
        },
        180_000,
      );
    };
    for (let t = 10 * MINUTE; t <= 10 * DAY; t += 10 * MINUTE) {
      await clock.advance(10 * MINUTE);
      // Hourly on the first day, when early releases race the deposits' 12-hour expiry.
      if (t % (t <= DAY ? HOUR : 6 * HOUR) === 0) await caughtUp(`the ledger at provider hour ${t / HOUR}`);
    }

    // 3. Quiet: every entity's mirror in the ledger shows the sandbox's status.
    await caughtUp('the ledger to show every sandbox status');
    const truth = await sandboxExport();
    const all = entities(truth);

    // 4. Balances per account, currency and book equal the ground truth.
    const gt = (await (await fetch(`${sandboxApi}/_sandbox/balances`)).json()) as Record<string, string>[];
    const ledger = await balances(tdb.db);
    const of = (currency: string, account: string) => {
      const v = ledger.find((r) => r.currency === currency && r.account === account)?.balance ?? 0n;
      const abs = v < 0n ? -v : v;
      return `${v < 0n ? '-' : ''}${abs / 100n}.${(abs % 100n).toString().padStart(2, '0')}`;
    };
    const neg = (text: string) =>
      text.startsWith('-') ? text.slice(1) : text === '0.00' ? text : `-${text}`;
    for (const row of gt) {
      const c = row.currency!;
      expect({ currency: c, available: of(c, 'available'), reserved: of(c, 'reserved') }).toEqual({
        currency: c,
        available: row.available,
        reserved: row.reserved,
      });
      expect({ c, deposits: neg(of(c, 'deposits')), fees: of(c, 'fees') }).toEqual({
        c,
        deposits: row.deposits,
        fees: row.fees,
      });
      expect({ c, payouts: of(c, 'payouts'), refunds: of(c, 'refunds') }).toEqual({
        c,
        payouts: row.payouts,
        refunds: row.refunds,
      });
      expect({ c, test: of(c, 'test_available'), transit: of(c, 'crypto_in_transit') }).toEqual({
        c,
        test: row.test_available,
        transit: row.crypto_in_transit,
      });
      expect({ c, wallets: of(c, 'crypto_customer_wallets') }).toEqual({ c, wallets: row.crypto_wallets });
    }

    // 5. The ledger verifies, and no effect was booked twice.
    const verified = await verifyLedger(tdb.db);
    expect(verified.failures).toEqual([]);
    const keys = await tdb.db.selectFrom('journal_entries').select('idempotency_key').execute();
    expect(new Set(keys.map((k) => k.idempotency_key)).size).toBe(keys.length);

    // 6. Exactly the exceptions the anomalies call for.
    await sweepExceptions(tdb.db, new Date(Date.now() + 2 * 3_600_000), pipeline.services.rules);
    const exceptions = await tdb.db
      .selectFrom('exceptions')
      .select(['type', 'entity_kind', 'entity_id'])
      .execute();
    const ids = (type: string) =>
      exceptions
        .filter((x) => x.type === type)
        .map((x) => `${x.entity_kind}:${x.entity_id}`)
        .sort();
    const went = (h: HistoryEntry[], from: string, to: readonly string[]) => {
      const at = h.findIndex((x) => x.to === from);
      return at >= 0 && h.slice(at + 1).some((x) => to.includes(x.to));
    };
    // An anomaly is the pipeline's to report once it observed its first half (the COMPLETED of a late
    // rejection, the EARLY_RELEASED of a reversal): a status the provider left before anyone could read it
    // moved no money in the merchant's books, and the balances above already prove those converge.
    const observed = new Set(
      (
        await tdb.db
          .selectFrom('status_history')
          .select(['entity_kind', 'entity_id', 'to_status'])
          .where('illegal', '=', false)
          .where('to_status', 'in', ['COMPLETED', 'EARLY_RELEASED'])
          .execute()
      ).map((h) => `${h.entity_kind}:${h.entity_id}:${h.to_status}`),
    );
    const sbLate = all
      .filter(({ kind, e }) => kind !== 'deposit' && went(e.history, 'COMPLETED', ['REJECTED']))
      .map(({ kind, e }) => `${kind}:${e.id}`)
      .sort();
    const expectLate = sbLate.filter((k) => observed.has(`${k}:COMPLETED`));
    const sbReversed = truth.deposits
      .filter((e) => went(e.history, 'EARLY_RELEASED', ['CANCELLED', 'DECLINED', 'EXPIRED']))
      .map((e) => `deposit:${e.id}`)
      .sort();
    const expectReversed = sbReversed.filter((k) => observed.has(`${k}:EARLY_RELEASED`));
    // Late rejections come two provider days after COMPLETED: the pipeline must have seen every one.
    expect(expectLate).toEqual(sbLate);
    expect(expectReversed.length).toBeGreaterThanOrEqual(Math.floor(sbReversed.length * 0.6));
    const expectThirdParty = truth.deposits
      .filter((e) => e.statusReason === 'THIRD_PARTY_PAYER')
      .map((e) => `deposit:${e.id}`)
      .sort();
    expect(expectLate.length).toBeGreaterThan(0);
    const explain = async (type: string, want: string[]) => {
      const got = ids(type);
      const missing = want.filter((k) => !got.includes(k));
      const extra = got.filter((k) => !want.includes(k));
      for (const k of [...missing, ...extra].slice(0, 5)) {
        const [kind, id] = k.split(':');
        const sb = all.find((x) => x.kind === kind && String(x.e.id) === id)?.e;
        const seen = await tdb.db
          .selectFrom('status_history')
          .select(['to_status', 'source', 'stale', 'illegal', 'status_reason'])
          .where('entity_kind', '=', kind as 'deposit')
          .where('entity_id', '=', id!)
          .orderBy('observed_at')
          .execute();
        console.info(
          `${type} ${missing.includes(k) ? 'missing' : 'extra'} ${k}: sandbox ${JSON.stringify(sb?.history.map((h) => [h.to, h.reason ?? null]))} ${sb?.statusReason ?? ''}; ledger saw ${JSON.stringify(seen)}`,
        );
      }
      expect({ type, ids: got }).toEqual({ type, ids: want });
    };
    await explain('LATE_REJECTION', expectLate);
    await explain('EARLY_RELEASE_REVERSED', expectReversed);
    await explain('THIRD_PARTY_PAYER', expectThirdParty);
    expect(ids('UNKNOWN_TRANSACTION')).toEqual([]);
    expect(ids('MISSING_AT_PROVIDER')).toEqual([]);
    expect(ids('ILLEGAL_TRANSITION')).toEqual([]);

    // 7. Every late rejection reached the alert sink, once.
    await waitFor(
      'every late rejection at the sink',
      async () => {
        const late = alerts.filter((a) => a.type === 'LATE_REJECTION');
        return late.length >= expectLate.length ? late : undefined;
      },
      30_000,
    );
    const late = alerts.filter((a) => a.type === 'LATE_REJECTION');
    expect(new Set(late.map((a) => a.alert_id)).size).toBe(late.length);
    expect(late.map((a) => a.entity_id).sort()).toEqual(expectLate.map((k) => k.split(':')[1]).sort());

    // 8. Nothing was lost: the dropped webhooks were made up for by polling.
    const log = (await (await fetch(`${sandboxApi}/_sandbox/webhooks?limit=100000`)).json()) as unknown;
    const entries = (Array.isArray(log) ? log : ((log as { entries?: unknown[] }).entries ?? [])) as {
      outcome: string;
    }[];
    expect(entries.filter((x) => x.outcome === 'dropped').length).toBeGreaterThan(0);
    const polled = await tdb.db
      .selectFrom('status_history')
      .select('event_id')
      .where('source', '=', 'poll')
      .execute();
    expect(polled.length).toBeGreaterThan(0);
    // A MISSED_NOTIFICATION only where the provider really never notified the entity's final status.
    const deliveries = entries as unknown as {
      kind: string;
      entityId: number;
      status: string;
      outcome: string;
    }[];
    const notified = new Set(
      deliveries.filter((x) => x.outcome === 'delivered').map((x) => `${x.kind}:${x.entityId}:${x.status}`),
    );
    const neverNotified = new Set(
      all
        .filter(({ kind, e }) => !notified.has(`${kind}:${e.id}:${e.status}`))
        .map(({ kind, e }) => `${kind}:${e.id}`),
    );
    const missed = ids('MISSED_NOTIFICATION');
    expect(missed.filter((k) => !neverNotified.has(k))).toEqual([]);
    expect(missed.length).toBeGreaterThan(0);
    const count = (outcome: string) => entries.filter((x) => x.outcome === outcome).length;
    const duplicated = entries.filter((x) => (x as { duplicate?: boolean }).duplicate).length;
    console.info(
      `e2e: ${all.length} entities (${truth.deposits.length} deposits, ${truth.cashouts.length} cashouts, ` +
        `${truth.refunds.length} refunds) in ${gt.length} currencies; webhooks ${count('delivered')} delivered, ` +
        `${count('dropped')} dropped, ${duplicated} duplicates; ${polled.length} poll observations; ` +
        `late rejections ${expectLate.length}; early releases reversed ${expectReversed.length} of ` +
        `${sbReversed.length} at the provider; third-party payers ${expectThirdParty.length}; ` +
        `exceptions ${JSON.stringify(Object.fromEntries([...new Set(exceptions.map((x) => x.type))].map((t) => [t, ids(t).length])))}; ` +
        `${neverNotified.size} entities whose final status was never notified; ${keys.length} journal entries`,
    );
  }, 600_000);
});
