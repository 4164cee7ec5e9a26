/**
 * The chaos soak: the sandbox generates mixed traffic while faults are injected — provider 5xx,
 * hanging calls and bursts of 429 on every endpoint; webhooks duplicated, reordered and dropped; late
 * rejections; the reconciler (`payrecon reconcile`, its own process) killed with SIGKILL; the broker
 * (`payrecon broker`, its own process) stopped and started again on its data; PostgreSQL (embedded, so the
 * machine's is left alone) stopped and started again. Ten provider days pass on a manual clock; when
 * everything is quiet the soak measures what the issue asks: the ledger against the sandbox's ground truth
 * per account, currency and book, `payrecon db verify`, duplicate postings, dropped webhooks recovered,
 * late rejections alerted once.
 *
 * Settlements are on: the sandbox pays the account out every day (converting four of its five currencies
 * into BRL) and its bank plants every kind of anomaly. The settlement fetch job, ticked by the provider's
 * clock, imports the reports and statements from the sandbox's control API while the faults go on (a run
 * falls inside the broker and the PostgreSQL outages), the imports match at once and the match consumer
 * matches what they publish. When quiet, after one last fetch of every file and a matching run as of the
 * provider's clock, the soak checks the cash leg too: every ledger cell against the sandbox's settlement
 * records, bank entries and anomalies (test/sandbox/planted-cash.ts), the open reconciliation exceptions
 * against the planted anomalies (none more, none less), the bank proof of each bank account, and that
 * nothing was booked or matched twice. The provider's control API takes no faults (the sandbox applies
 * them to the provider's API only).
 *
 * `runSoak` returns the figures and never asserts: the test (`chaos.test.ts`) and the runner (`run.ts`)
 * decide. Everything talks over the network: the in-process parts (webhook ingress, status fetcher,
 * poller, outbox relay, alert dispatcher, match consumer, the jobs) are wired exactly as `payrecon up`
 * wires them.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import diagnostics from 'node:diagnostics_channel';
import { createWriteStream, mkdirSync, mkdtempSync, readFileSync, rmSync, type WriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import pino from 'pino';
import { JOBS_OFF, loadConfig } from '../../src/config.ts';
import { matchingOptionsFrom } from '../../src/config-rules.ts';
import { startAlertConsumer } from '../../src/consumers/alert-dispatcher.ts';
import { MATCH_CONSUMER_GROUPS } from '../../src/consumers/matcher.ts';
import { runStatusFetcher } from '../../src/consumers/status-fetcher.ts';
import { bankProof } from '../../src/db/closes/bank-proof.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { type MatchingRun, runMatching } from '../../src/db/matching/service.ts';
import { balances } from '../../src/db/read-models/balances.ts';
import { isCashLegAccount } from '../../src/domain/cash-leg.ts';
import type { ImportFileFn, ImportKind } from '../../src/domain/imports.ts';
import { formatAmount, parseAmount } from '../../src/domain/money.ts';
import type { Intent } from '../../src/domain/observation.ts';
import { addDays, localDate } from '../../src/domain/zoned-time.ts';
import { type EmbeddedPostgres, startEmbeddedPostgres } from '../../src/embedded/postgres.ts';
import { type RunningRegistry, startRegistry } from '../../src/embedded/registry/registry.ts';
import { dlqTopicOf, TOPIC_NAMES } from '../../src/events/topics.ts';
import { type Infrastructure, startInfrastructure } from '../../src/infrastructure.ts';
import { type CronTimer, fireTimesBetween, type TickResult } from '../../src/jobs/scheduler.ts';
import { SETTLEMENT_FETCH_USER } from '../../src/jobs/settlement-fetch.ts';
import { logger as rootLogger } from '../../src/logger.ts';
import { recordingClient } from '../../src/producers/intent/recording-client.ts';
import { startOutboxRelay } from '../../src/producers/outbox-relay.ts';
import { createProviderClient } from '../../src/provider/client.ts';
import { DEFAULT_ACCOUNT } from '../../src/sandbox/accounts.ts';
import { loadCatalogue } from '../../src/sandbox/catalogue.ts';
import { ManualClock } from '../../src/sandbox/clock.ts';
import type { FaultDecision } from '../../src/sandbox/faults.ts';
import { computeBalances } from '../../src/sandbox/ground-truth.ts';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/main.ts';
import { providerAccountFor } from '../../src/sandbox/traffic-client.ts';
import type { DeliveryLogEntry } from '../../src/sandbox/webhooks.ts';
import { SANDBOX_ACCOUNT_NAME } from '../../src/sandbox-part.ts';
import { buildServer } from '../../src/server.ts';
import { createServices } from '../../src/services.ts';
import { PART_REGISTRY, startPoller } from '../../src/wiring.ts';
import { emptyStats, type KnownSecret, type ScanStats, scanForSecrets } from '../audit/secrets-scan.ts';
import {
  type CashTruth,
  cashTruthOf,
  expectedCashLeg,
  expectedNotReceived,
  expectedUnmatchedLines,
  PLANTED,
} from '../sandbox/planted-cash.ts';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const ROOT = join(import.meta.dirname, '../..');
/** Real time the broker and PostgreSQL stay down (the clock moves a step meanwhile). */
const OUTAGE_MS = 5_000;
/**
 * How the sandbox pays the account out: daily at midnight in São Paulo, value date T+1, every balance in
 * BRL (BRL as it is; CLP, COP, MXN and PEN converted at the catalogue's rates less the 1.5% spread), a fee
 * of 0.50 plus 10 bp of the converted gross. Its bank plants every kind of anomaly often (PLANTED).
 */
const SETTLEMENT = {
  timeZone: 'America/Sao_Paulo',
  settlement: { currency: 'BRL', fee: { fixed: '0.50', bps: 10 } },
};
/** Who the soak's last fetch of every file imports as. */
const FINAL_FETCH_USER = 'chaos:final-fetch';

/** What goes wrong, and when (provider hours; the soak runs ten provider days). */
export interface FaultPlan {
  provider: { errorRate: number; hangRate: number };
  /** Bursts of 429 on every endpoint: at these provider hours, `rate` of calls for `realMs`. */
  rateLimitBursts: { atHours: number[]; rate: number; realMs: number };
  webhooks: { dropRate: number; duplicateRate: number; reorderRate: number; reorderDelayMs: number };
  lateRejection: { cashoutRate: number; refundRate: number; delayMs: number };
  /**
   * The provider's late payments: this share of the deposits that turn EXPIRED, or CANCELLED
   * without expiring first (a cancelled AMOUNT_MISMATCH or THIRD_PARTY_PAYER payment, a cancelled early
   * release), is completed by hand `delayMs` later (uniform); an EXPIRED one still EXPIRED (before the
   * 7-day cancellation). A CANCELLED deposit is final, so its late completion whose notification was
   * dropped is found only by the re-check of cancelled deposits.
   */
  lateCompletion: { rate: number; delayMs: [number, number] };
  /** Provider hours at which the reconciler process is killed with SIGKILL. */
  killReconcilerAtHours: number[];
  restartBrokerAtHours: number[];
  restartPostgresAtHours: number[];
}

/** The issue's plan. */
export const ISSUE_FAULT_PLAN: FaultPlan = {
  provider: { errorRate: 0.05, hangRate: 0.01 },
  rateLimitBursts: { atHours: [2, 30, 96, 170], rate: 0.6, realMs: 3_000 },
  webhooks: { dropRate: 0.05, duplicateRate: 0.2, reorderRate: 0.1, reorderDelayMs: 20 * MINUTE },
  lateRejection: { cashoutRate: 0.1, refundRate: 0.1, delayMs: 2 * DAY },
  lateCompletion: { rate: 0.2, delayMs: [6 * HOUR, 2 * DAY] },
  killReconcilerAtHours: [3, 60, 150],
  restartBrokerAtHours: [24],
  restartPostgresAtHours: [110],
};

export interface SoakOptions {
  entities: number;
  plan: FaultPlan;
  /** Creations per second asked of the traffic generator (default 150). */
  trafficRate?: number;
  /**
   * Provider hours over which the creations are spread (default 168, the first seven of the ten days;
   * 0: all of them before the clock starts). Before each provider hour the traffic creates its share and
   * stops, so the entities are created while the faults happen and about a day's worth is in flight at
   * once, as at a merchant, instead of every entity at once.
   */
  createOverHours?: number;
  seed?: number;
  /** Polling schedule given to every part through PAYRECON_POLL_* (seconds). */
  polling?: {
    firstDelaySeconds: number;
    maxDelaySeconds: number;
    completedRecheckSeconds: number;
    /** The dense start of the completed re-check (PAYRECON_POLL_COMPLETED_RECHECK_SCHEDULE_SECONDS). */
    completedRecheckScheduleSeconds?: number[];
  };
  /**
   * Status poller: calls in flight, entities per round, seconds an entity picked by a round is leased
   * (defaults 16, 500, 2). A round ends with its slowest call (a hang and its retry), so the poll rate is
   * about a round's size per second or two: a large soak needs large rounds.
   */
  poller?: { concurrency: number; batchSize: number; leaseSeconds: number };
  /** Longest wait for the ledger to catch up at a checkpoint (default 240 s). */
  catchUpMs?: number;
  /**
   * The settlement fetch's cron, on the provider's clock (default ten past every provider hour: the
   * planned broker and PostgreSQL outages start on a whole hour, so a fetch is due inside each).
   */
  settlementFetchCron?: string;
  /** Progress lines. */
  log?: (line: string) => void;
}

export interface LatencyFigures {
  count: number;
  wallSeconds: { p50: number; max: number };
  providerMinutes: { p50: number; max: number };
}

function latencyFigures(samples: readonly { wallMs: number; providerMs: number }[]): LatencyFigures {
  const pick = (xs: number[], q: number) => {
    if (xs.length === 0) return 0;
    const sorted = [...xs].sort((a, b) => a - b);
    return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
  };
  const wall = samples.map((x) => x.wallMs / 1000);
  const provider = samples.map((x) => x.providerMs / MINUTE);
  const r1 = (x: number) => Math.round(x * 10) / 10;
  return {
    count: samples.length,
    wallSeconds: { p50: r1(pick(wall, 0.5)), max: r1(pick(wall, 1)) },
    providerMinutes: { p50: r1(pick(provider, 0.5)), max: r1(pick(provider, 1)) },
  };
}

export interface ChaosEvent {
  what: string;
  providerHour: number;
  /** Seconds since the soak started. */
  atSeconds: number;
  /** Seconds the part was away (kills: until the new process was started). */
  downSeconds: number;
}

export interface SoakFigures {
  entities: {
    total: number;
    /** kind -> currency -> count (kinds: deposit, card deposit, cashout, refund). */
    byKindAndCurrency: Record<string, Record<string, number>>;
    trafficErrors: number;
  };
  webhooks: {
    notifications: number;
    sent: number;
    duplicated: number;
    reordered: number;
    dropped: number;
    deliveredAttempts: number;
    failedAttempts: number;
    gaveUp: number;
  };
  provider: { calls: number; errors5xx: number; hangs: number; rateLimited429: number };
  events: ChaosEvent[];
  droppedRecovery: {
    dropped: number;
    /** Dropped statuses first seen by the ledger through polling. */
    recoveredByPolling: number;
    /** Dropped statuses first seen through another webhook (a late or duplicated one read the status). */
    seenThroughOtherWebhook: number;
    /** Dropped statuses the provider left before anyone read them (no money moved in the meantime). */
    supersededUnread: number;
    /** Dropped statuses still current at the provider and never seen by the ledger: must be 0. */
    unrecovered: number;
  };
  lateRejections: {
    atProvider: number;
    exceptions: number;
    alertsDelivered: number;
    duplicateAlerts: number;
    /** Late rejections without exactly one exception and one alert: must be 0. */
    mismatched: string[];
    /**
     * From the provider's late rejection to the ledger's reversal (its late_reversal entry booked), for
     * every late rejection and for those the ledger learnt by polling (their notification was dropped or
     * came later): wall seconds, and provider minutes (the manual clock's time when the entry was booked
     * minus the rejection's). The clock moves in 10-minute steps, so provider minutes are multiples of 10.
     */
    reversalLatency: {
      all: LatencyFigures;
      learntByPolling: LatencyFigures;
      /** Late rejections whose REJECTED reached the ledger first by webhook, by poll. */
      bySource: Record<string, number>;
    };
  };
  /**
   * The provider's late payments: deposits completed by hand after EXPIRED or CANCELLED, and their
   * LATE_COMPLETION exceptions; `bySource`: how the ledger first read each late COMPLETED (a poll: its
   * notification was dropped or came later).
   */
  lateCompletions: {
    atProvider: number;
    fromExpired: number;
    fromCancelled: number;
    exceptions: number;
    missing: string[];
    bySource: Record<string, number>;
    /** From the provider's late completion to the ledger's credit, for those first read by a poll. */
    learntByPolling: LatencyFigures;
  };
  /** The provider's other documented moves that the traffic made. */
  moves: {
    /** EXPIRED deposits that turned CANCELLED 7 provider days later. */
    expiredToCancelled: number;
    /** Late-rejected cashouts at the provider with code 826, and those whose ledger mirror does not say 826. */
    lateRejected826: number;
    rejectionCodeMismatched: string[];
    /** Cashouts by the bank_code form the merchant sent ("001", "1", 1, ...) and those stored otherwise. */
    bankCodeForms: Record<string, number>;
    bankCodeNotKept: number;
  };
  /** Exceptions by type at the end (FACTS_CHANGED must be 0: the sandbox never changes a fixed fact). */
  exceptionsByType: Record<string, number>;
  /** The cash leg: what the sandbox settled and its bank did, what payrecon fetched, matched and booked. */
  cash: CashFigures;
  /** Every alert the webhook sink received, of every type. */
  alerts: {
    delivered: number;
    byType: Record<string, number>;
    /** Alerts received again with the same alert id: must be 0. */
    duplicateIds: number;
    /** Exceptions (type and entity) alerted more than once under different ids: must be 0. */
    repeatedExceptions: string[];
  };
  ledger: {
    postings: number;
    journalEntries: number;
    duplicateIdempotencyKeys: number;
    observations: number;
    duplicateObservations: number;
    intents: number;
    /** Cells (account, currency, book account) where the ledger and the ground truth differ. */
    groundTruthDiff: number;
    groundTruthDiffSample: string[];
    /** Entities whose ledger status differs from the sandbox at the end. */
    statusDiff: number;
    verifyFailures: string[];
    /** `payrecon db verify`: exit code and last line. */
    verifyCli: { exitCode: number | null; output: string };
  };
  wallSeconds: number;
  /** Observations and intents booked per second of wall time. */
  eventsPerSecond: number;
  /** Messages on the pipeline's topics (end offsets summed). */
  topicMessages: number;
  /** Messages on the DLQ topics: a good message dead-lettered by an outage is lost work (must be 0). */
  deadLettered: number;
  /** The secrets scan (test/audit/secrets-scan.ts) of logs, tables, topics and workbooks: hits must be 0. */
  secrets: { hits: number; sample: string[]; stats: ScanStats; wireSignatures: number };
  /** Log files of every process (for the secrets audit). */
  logFiles: string[];
}

export interface CashFigures {
  settlements: {
    /** Made by the sandbox over the run, of them converted into BRL, and balances carried over instead. */
    atSandbox: number;
    converted: number;
    carriedOver: number;
    /** In an imported settlement report; booked to the ledger (distinct settlement ids). */
    reported: number;
    booked: number;
  };
  /** The settlement fetch job, ticked on the provider's clock while the faults happen. */
  fetch: {
    ticks: number;
    ran: number;
    /** Runs that failed (a download or an import failed, the claim could not be written): retried next tick. */
    failed: number;
    /** Ticks due while the previous run was still going (skipped, as node-cron's noOverlap does). */
    overlapped: number;
    /** Provider times of the failed runs, and why (the first few). */
    failures: string[];
    /** Wall seconds of the runs: total and longest. */
    seconds: { total: number; max: number };
    /** Files the job imported and the lines they brought first. */
    imports: number;
    newLines: number;
    /** Files refused (one line each): must be none. */
    refused: string[];
  };
  /** The last fetch of every file when quiet (all reports, every closed day's statement in camt.053.001.02). */
  finalFetch: { files: number; newLines: number };
  /** The last day whose statement is imported (local to the account). */
  lastStatementDay: string;
  statements: number;
  bankLines: number;
  matchedBankLines: number;
  matchesByRule: Record<string, number>;
  /** The anomalies the sandbox planted by kind, on days up to the last statement day. */
  anomalies: Record<string, number>;
  /** The matching exceptions: expected from the sandbox's records, open at the end, and the differences. */
  exceptions: {
    expected: Record<string, number>;
    open: Record<string, number>;
    missing: string[];
    unexpected: string[];
  };
  /**
   * The provider's balance checks kept at the end (one per merchant account and currency, at its latest
   * cut-off), those that differ, and the PROVIDER_BALANCE_DRIFT raised during the whole soak (none is
   * planted: each would be a false alarm).
   */
  balanceChecks: { checked: number; differing: string[]; driftsRaised: number };
  /** Cash-leg cells (account, currency, ledger account) compared with the sandbox's records, and those differing. */
  cells: number;
  cellDiff: string[];
  /**
   * Per bank account: the last statement's closing balance, the ledger's `bank:<id>`, the bank lines no
   * match covers (planted) and the balance the account had before the sandbox's first entry; explained when
   * closing = opening + ledger + unmatched, and the closing is the sandbox's bank's balance that day.
   */
  bankProof: {
    bankAccount: string;
    closing: string | null;
    ledger: string;
    unmatched: string;
    opening: string;
    explained: boolean;
  }[];
  /** Anything booked or matched twice (a settlement's entries, a line or settlement in two live matches, a match booked twice): must be empty. */
  doubled: string[];
}

interface Child {
  proc: ChildProcess;
  exited: Promise<void>;
}

function spawnPart(args: string[], env: Record<string, string>, logFile: WriteStream): Child {
  const proc = spawn(process.execPath, ['bin/payrecon.mjs', ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  proc.stdout?.pipe(logFile, { end: false });
  proc.stderr?.pipe(logFile, { end: false });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  return { proc, exited };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The broker as its own process; resolves with its port once it listens. */
async function startBrokerProcess(
  dataDir: string,
  port: number,
  logFile: WriteStream,
): Promise<Child & { port: number }> {
  const child = spawnPart(
    ['broker', '--host', '127.0.0.1', '--port', String(port), '--data-dir', dataDir, '--partitions', '3'],
    {},
    logFile,
  );
  const listening = await new Promise<number>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`broker did not start: ${out}`)), 60_000);
    child.proc.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
      const m = /listening [^:\s]+:(\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    child.proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`broker exited ${code}: ${out}`));
    });
  });
  return { ...child, port: listening };
}

/** What the provider's clock made of the settlement fetch's ticks. */
interface TickStats {
  ticks: number;
  ran: number;
  failed: number;
  overlapped: number;
  failures: string[];
  /** Wall seconds of the runs: total and longest. */
  seconds: { total: number; max: number };
}

/**
 * A cron timer on the provider's clock (src/jobs/scheduler.ts's CronTimer, which node-cron is on real
 * time): each named job fires at its cron's times as the manual clock passes them; the other jobs never
 * fire. A tick due while the job's previous run is still going is skipped, as node-cron's noOverlap does.
 * `idle()` waits for the runs in progress.
 */
function providerClockTimer(
  clock: ManualClock,
  names: readonly string[],
): CronTimer & { stats: TickStats; idle(): Promise<void> } {
  const stats: TickStats = {
    ticks: 0,
    ran: 0,
    failed: 0,
    overlapped: 0,
    failures: [],
    seconds: { total: 0, max: 0 },
  };
  const running = new Set<Promise<unknown>>();
  const failed = (at: Date, why: string) => {
    stats.failed++;
    if (stats.failures.length < 5) stats.failures.push(`${at.toISOString().slice(0, 16)}: ${why}`);
  };
  return {
    stats,
    schedule(job, onTick) {
      if (!names.includes(job.name)) return { stop: async () => undefined };
      let stopped = false;
      let cancel: () => void = () => undefined;
      let current: Promise<unknown> | null = null;
      const fire = (at: Date) => {
        stats.ticks++;
        if (current) {
          stats.overlapped++;
          return;
        }
        const started = Date.now();
        const p = onTick(at)
          .then((r) => {
            const result = r as TickResult;
            stats.ran += result.ran.length;
            for (const key of result.failed) failed(at, `${key} failed`);
          })
          .catch((err) => failed(at, String((err as Error)?.message ?? err)))
          .finally(() => {
            const took = (Date.now() - started) / 1000;
            stats.seconds.total = Math.round((stats.seconds.total + took) * 10) / 10;
            stats.seconds.max = Math.max(stats.seconds.max, Math.round(took * 10) / 10);
            running.delete(p);
            current = null;
          });
        current = p;
        running.add(p);
      };
      const arm = () => {
        const now = clock.now();
        const next = fireTimesBetween(job.cron, job.timeZone, new Date(now), new Date(now + DAY))[0];
        if (!next || stopped) return;
        cancel = clock.at(next.getTime(), () => {
          if (stopped) return;
          fire(next);
          arm();
        });
      };
      arm();
      return {
        async stop() {
          stopped = true;
          cancel();
          await current;
        },
      };
    },
    async idle() {
      while (running.size > 0) await Promise.allSettled([...running]);
    },
  };
}

export async function runSoak(options: SoakOptions): Promise<SoakFigures> {
  const started = Date.now();
  const say = options.log ?? (() => undefined);
  const seconds = () => Math.round((Date.now() - started) / 100) / 10;
  const plan = options.plan;
  // The production schedule (1 h, 4 h, 12 h, then daily) compressed: 1 s, 2 s, then every 3 s.
  const polling = options.polling ?? {
    firstDelaySeconds: 1,
    maxDelaySeconds: 3,
    completedRecheckSeconds: 3,
    completedRecheckScheduleSeconds: [1, 2],
  };
  const catchUpMs = options.catchUpMs ?? 240_000;
  const pollerSettings = options.poller ?? { concurrency: 16, batchSize: 500, leaseSeconds: 2 };
  const work = mkdtempSync(join(tmpdir(), 'payrecon-chaos-'));
  const logDir = join(work, 'logs');
  mkdirSync(logDir);
  const logs: { path: string; stream: WriteStream }[] = [];
  const logFile = (name: string) => {
    const path = join(logDir, name);
    const stream = createWriteStream(path, { flags: 'a' });
    logs.push({ path, stream });
    return stream;
  };
  const events: ChaosEvent[] = [];
  // Every line this process logs (the parts share the root logger's stream) goes to a file of the run.
  const inProcessLog = logFile('in-process.log');
  const rootStream = (rootLogger as unknown as Record<symbol, { write(s: string): boolean }>)[
    pino.symbols.streamSym
  ]!;
  const rootWrite = rootStream.write;
  rootStream.write = (line: string) => inProcessLog.write(line);
  // Authorization and Payload-Signature values on the wire (a sample: every one would be a million patterns).
  const wire = new Set<string>();
  let wireSeen = 0;
  const onHeaders = (message: unknown) => {
    const { headers } = message as { headers: string | string[] };
    const text = Array.isArray(headers) ? headers.join('\r\n') : String(headers);
    for (const line of text.split(/\r?\n/)) {
      const m = /^(authorization|payload-signature):\s*(.+)$/i.exec(line.trim());
      if (!m) continue;
      wireSeen++;
      if (wire.size >= 2_000 || (wireSeen > 1_000 && wireSeen % 97 !== 0)) continue;
      const value = m[2]!.trim();
      wire.add(value);
      const credential = value.split(' ').pop()!;
      if (credential !== value) wire.add(credential);
    }
  };
  diagnostics.subscribe('undici:client:sendHeaders', onHeaders);
  const cleanups: (() => Promise<unknown>)[] = [];

  let pg: EmbeddedPostgres | null = null;
  let broker: (Child & { port: number }) | null = null;
  let reconciler: Child | null = null;
  let sink: FastifyInstance | null = null;
  let registry: RunningRegistry | null = null;
  let sandbox: RunningSandbox | null = null;
  let infra: Infrastructure | null = null;
  try {
    // ---------------------------------------------------------------- infrastructure
    const pgDir = join(work, 'pg');
    const pgLog = logFile('postgres.log');
    pg = await startEmbeddedPostgres({ dataDir: pgDir, onLog: (l) => pgLog.write(`${l}\n`) });
    const pgPort = pg.port;
    registry = await startRegistry({ host: '127.0.0.1', port: 0, dataDir: join(work, 'registry') });
    const brokerDir = join(work, 'broker');
    const brokerLog = logFile('broker.log');
    broker = await startBrokerProcess(brokerDir, 0, brokerLog);
    const brokerPort = broker.port;

    const alerts: { alert_id: string; type: string; entity_kind: string | null; entity_id: string | null }[] =
      [];
    sink = Fastify({ bodyLimit: 50 * 1024 * 1024 });
    sink.post('/alerts', async (req) => {
      const body = req.body as { digest?: boolean; alerts?: typeof alerts } & (typeof alerts)[number];
      if (body.digest && body.alerts) alerts.push(...body.alerts);
      else alerts.push(body);
      return 'ok';
    });
    const sinkUrl = `${await sink.listen({ host: '127.0.0.1', port: 0 })}/alerts`;

    const env: Record<string, string> = {
      DATABASE_URL: pg.url,
      KAFKA_BROKERS: `127.0.0.1:${brokerPort}`,
      SCHEMA_REGISTRY_URL: registry.url,
      PAYRECON_DATA_DIR: join(work, 'data'),
      PAYRECON_WEB_PORT: '0',
      PAYRECON_METRICS_PORT: '0',
      LOG_LEVEL: 'warn',
      PAYRECON_ALERT_WEBHOOK_URL: sinkUrl,
      PAYRECON_ALERT_MIN_SEVERITY: 'high',
      PAYRECON_POLL_CONCURRENCY: String(pollerSettings.concurrency),
      PAYRECON_POLL_BATCH_SIZE: String(pollerSettings.batchSize),
      PAYRECON_POLL_MIN_INTERVAL_SECONDS: String(pollerSettings.leaseSeconds),
      PAYRECON_POLL_FIRST_DELAY_SECONDS: String(polling.firstDelaySeconds),
      PAYRECON_POLL_MAX_DELAY_SECONDS: String(polling.maxDelaySeconds),
      PAYRECON_POLL_COMPLETED_RECHECK_SECONDS: String(polling.completedRecheckSeconds),
      ...(polling.completedRecheckScheduleSeconds
        ? {
            PAYRECON_POLL_COMPLETED_RECHECK_SCHEDULE_SECONDS:
              polling.completedRecheckScheduleSeconds.join(','),
          }
        : {}),
      // A hanging provider call is given up after a second (then retried), not ten.
      PAYRECON_PROVIDER_TIMEOUT_MS: '1000',
      PAYRECON_SANDBOX_TRAFFIC: 'false',
      ...JOBS_OFF,
      PAYRECON_CRON_SETTLEMENT_FETCH: options.settlementFetchCron ?? '10 * * * *',
    };
    const config = loadConfig(env);
    infra = await startInfrastructure(config, null);
    const services = createServices(infra);
    const running = infra;
    cleanups.push(() => running.lifecycle.stopAll());
    const db = infra.db;

    // ---------------------------------------------------------------- the sandbox, with counted faults
    // On a whole hour, so the settlement fetch's cron (ten past each provider hour) falls inside each
    // planned outage, which starts on a whole provider hour of the run.
    const clock = new ManualClock(Math.ceil(Date.now() / HOUR) * HOUR);
    const providerFaults = (rateLimitRate: number) => ({
      endpoints: {
        '*': {
          errorRate: plan.provider.errorRate,
          hangRate: plan.provider.hangRate,
          rateLimitRate,
          retryAfterSeconds: 1,
        },
      },
      webhooks: plan.webhooks,
      lateRejection: plan.lateRejection,
    });
    sandbox = await startSandbox({
      host: '127.0.0.1',
      port: 0,
      ccPort: 0,
      seed: options.seed ?? 1,
      clock,
      // Moves of one entity at least six provider hours apart: the pipeline catches up every six hours, so
      // it can observe every intermediate status as a merchant would (as in test/pipeline/e2e.test.ts).
      auto: {
        enabled: true,
        minDelayMs: 6 * HOUR,
        maxDelayMs: 12 * HOUR,
        lateCompletionRate: plan.lateCompletion.rate,
        lateCompletionFrom: ['EXPIRED', 'CANCELLED'],
        lateCompletionDelayMs: plan.lateCompletion.delayMs,
      },
      notificationBaseUrl: 'http://127.0.0.1:1',
      defaultNotificationUrl: `http://127.0.0.1:1/webhooks/${DEFAULT_ACCOUNT.name}`,
      faults: providerFaults(0),
      defaultAccountSettlement: SETTLEMENT,
      bank: PLANTED,
    });
    const sb = sandbox;
    const deps = sb.control.deps;
    const served = { calls: 0, error: 0, hang: 0, rate_limit: 0 };
    const decide = deps.faults.decide.bind(deps.faults);
    deps.faults.decide = (endpoint): FaultDecision => {
      const d = decide(endpoint);
      served.calls++;
      if (d.kind !== 'none') served[d.kind]++;
      return d;
    };
    // Every delivery-log entry is counted (the sandbox keeps only the latest 20,000).
    const hooks = {
      notifications: 0,
      sent: 0,
      duplicated: 0,
      reordered: 0,
      dropped: 0,
      delivered: 0,
      failed: 0,
      gaveUp: 0,
    };
    const droppedList: { kind: string; entityId: number; status: string }[] = [];
    const log = deps.webhooks.log;
    const push = log.push.bind(log);
    log.push = (...entries: DeliveryLogEntry[]) => {
      for (const e of entries) {
        if (e.outcome === 'dropped') {
          hooks.notifications++;
          hooks.dropped++;
          droppedList.push({ kind: e.kind, entityId: e.entityId, status: e.status });
        } else if (e.attempt === 1) {
          hooks.notifications++;
          hooks.sent++;
          if (e.duplicate) hooks.duplicated++;
          else if (e.reordered) hooks.reordered++;
        }
        if (e.outcome === 'delivered') hooks.delivered++;
        if (e.outcome === 'scheduled_retry' || e.outcome === 'failed') hooks.failed++;
        if (e.outcome === 'gave_up') hooks.gaveUp++;
      }
      return push(...entries);
    };
    const account = {
      ...providerAccountFor(DEFAULT_ACCOUNT, { url: sb.url, ccUrl: sb.ccUrl }),
      webhookSignatureMode: 'enforce' as const,
    };

    // ---------------------------------------------------------------- the pipeline's parts
    const metrics = infra.metrics;
    const providerOptions = { timeoutMs: config.provider.timeoutMs, retries: config.provider.retries };
    const fetcher = await runStatusFetcher({
      kafka: infra.kafka,
      serde: infra.serde,
      accounts: [account],
      providerOptions,
      logger: infra.logger,
      db,
    });
    infra.lifecycle.add('status fetcher', () => fetcher.stop());
    const alertConsumer = await startAlertConsumer({
      kafka: infra.kafka,
      serde: infra.serde,
      dlq: infra.publisher,
      db,
      logger: infra.logger,
      onDispatched: (alerts, perSink) => metrics.alertsDispatched(alerts, perSink),
      sinks: services.alertSinks,
      timeoutMs: config.alerts.timeoutMs,
    });
    infra.lifecycle.add('alert dispatcher', () => alertConsumer.stop());
    const relay = startOutboxRelay({ db, publisher: infra.publisher, logger: infra.logger });
    infra.lifecycle.add('outbox relay', () => relay.stop());
    const server = await buildServer(infra, services, {
      accounts: [account],
      metrics,
      page: false,
      webhooks: true,
      intents: false,
      defaultAccount: SANDBOX_ACCOUNT_NAME,
    });
    await server.listen({ host: '127.0.0.1', port: 0 });
    infra.lifecycle.add('web server', () => server.close());
    const address = server.server.address();
    const webUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    deps.webhooks.notificationBaseUrl = webUrl;
    deps.accounts.named(DEFAULT_ACCOUNT.name)!.notificationUrl = `${webUrl}/webhooks/${DEFAULT_ACCOUNT.name}`;

    // The reconciler: its own process, the one the soak kills.
    const reconcilerLog = logFile('reconciler.log');
    let reconcilerStarts = 0;
    const startReconcilerProcess = () => {
      reconcilerStarts++;
      reconcilerLog.write(`--- reconciler start ${reconcilerStarts} at ${seconds()} s\n`);
      reconciler = spawnPart(
        ['reconcile'],
        { ...env, PAYRECON_DATA_DIR: join(work, 'reconciler') },
        reconcilerLog,
      );
    };
    startReconcilerProcess();

    // The cash leg as `payrecon up` wires it: the settlement fetch reads the sandbox's control API and
    // derives the bank accounts from it; the match consumer matches what the imports publish. The jobs
    // run as the jobs part runs them under `up`, their ticks fired by the provider's clock.
    await services.imports.useEmbeddedSandbox(`${sb.url}/_sandbox`);
    const matchPart = PART_REGISTRY.find((p) => p.name === 'match-consumer')!;
    const matcher = await matchPart.start({
      infra,
      services,
      accounts: [account],
      together: true,
      started: new Map(),
      defaultAccount: SANDBOX_ACCOUNT_NAME,
      page: false,
      sandboxUsers: false,
    });
    infra.lifecycle.add('match consumer', () => matcher.stop());
    const fetchTicks = providerClockTimer(clock, ['settlement-fetch']);
    const scheduler = services.jobScheduler({ timer: fetchTicks });
    await scheduler.start();
    infra.lifecycle.add('jobs', () => scheduler.stop());
    await Promise.all([fetcher.ready, alertConsumer.ready, matcher.ready]);
    say(`chaos: infrastructure up at ${seconds()} s (work dir ${work})`);

    // ---------------------------------------------------------------- 1. traffic, every creation's intent recorded
    const entitiesNow = () =>
      deps.engine.deposits.size + deps.engine.cashouts.size + deps.engine.refunds.size;
    // The merchant's client. A creation whose every try times out ends with an unknown outcome although
    // the provider created the entity: the ledger cannot know that entity until it moves (no id to poll,
    // no notification yet), and a catch-up holds the clock, so it would wait for ever. With 2 s (four tries)
    // the first second's burst of creations on the shared machine at load 17 ended so 17 times (CI size,
    // timed out at the hour-6 catch-up): the merchant waits 10 s a try, as a merchant would; hanging calls
    // still cost it a try and are still retried. Six retries (the same idempotency key; a cashout found by
    // its external_id on 511): at 10 s and three retries, 5 of 2,000 creations still ended unknown at load 18.
    const client = createProviderClient(account, { retries: 6, timeoutMs: 10_000 });
    // Intent publishes that failed or are still waiting: a catch-up that times out says so (a creation whose
    // intent was lost is never polled, and one that moves no more gets no webhook either).
    const intentPublishes = { failed: 0, waiting: 0, lastError: '' };
    const recordIntent = async (intent: Intent) => {
      intentPublishes.waiting++;
      try {
        await infra!.publisher.publish('merchant.intent.recorded.v1', [{ value: intent }]);
      } catch (err) {
        intentPublishes.failed++;
        intentPublishes.lastError =
          err instanceof Error ? `${err.message} (${String(err.cause)})` : String(err);
        throw err;
      } finally {
        intentPublishes.waiting--;
      }
    };
    const traffic = sb.control.traffic;
    traffic.useClient(recordingClient(client, recordIntent, { account: account.name }));
    const trafficRate = options.trafficRate ?? 150;
    const createOverHours = options.createOverHours ?? 168;
    if (!(createOverHours >= 0 && createOverHours <= 9 * 24)) {
      throw new Error('createOverHours: must be between 0 and 216 (the last day lets the last ones settle)');
    }
    /** Creates until `target` entities exist, then stops the traffic (calls in flight finish on their own). */
    const createUpTo = async (target: number) => {
      let last = entitiesNow();
      let progressAt = Date.now();
      if (last >= target) return;
      traffic.start(trafficRate);
      try {
        while (entitiesNow() < target) {
          await sleep(20);
          if (entitiesNow() > last) {
            last = entitiesNow();
            progressAt = Date.now();
          } else if (Date.now() - progressAt > 120_000) {
            throw new Error(`traffic stalled at ${last} entities: ${JSON.stringify(traffic.status())}`);
          }
        }
      } finally {
        traffic.stop();
      }
    };
    /** Waits for the creations in flight (before the broker goes away, so no intent is lost to it). */
    const trafficDrained = async () => {
      while ((traffic.status().inFlight as number) > 0) await sleep(50);
    };
    let createdForHour = -1;
    /** Before provider hour `hour` starts: its share of the creations. */
    const createForHour = async (hour: number) => {
      if (hour <= createdForHour) return;
      createdForHour = hour;
      const share = createOverHours === 0 ? 1 : Math.min(1, (hour + 1) / createOverHours);
      const before = entitiesNow();
      await createUpTo(Math.ceil(options.entities * share));
      if (entitiesNow() > before && (createOverHours === 0 || (hour + 1) % 24 === 0 || share === 1)) {
        say(`chaos: ${entitiesNow()} of ${options.entities} entities created by provider hour ${hour + 1}`);
      }
    };
    const poller = startPoller(infra, services, [account], { idleMs: 250 });
    infra.lifecycle.add('status poller', () => poller.stop());

    // ---------------------------------------------------------------- catching up
    /**
     * Entities whose ledger status differs from the sandbox's. With `lateRejectionsPending`, a COMPLETED
     * cashout or refund the provider has since rejected, or a CANCELLED deposit it has since completed,
     * does not count: REJECTED and a deposit's COMPLETED are final, so nothing can supersede them before
     * the re-check of COMPLETED payouts and CANCELLED deposits reads them, and the last catch-up waits for all.
     * An entity found equal is not read again until the sandbox moves it (the ledger never moves an entity
     * away from the provider's status: stale and illegal moves are recorded, not applied), so a check
     * reads the mirrors of the entities that moved since the last one, not all of them; `full` reads all.
     */
    const settled = new Map<string, number>();
    /** The entities found different at the last check (sandbox status, ledger status). */
    let differing: { kind: string; id: number; status: string; ledger: string | null }[] = [];
    const mirrorsDiffer = async (lateRejectionsPending = false, full = false): Promise<number> => {
      const kinds = [
        ['deposit', deps.engine.deposits],
        ['cashout', deps.engine.cashouts],
        ['refund', deps.engine.refunds],
      ] as const;
      const open: { kind: string; key: string; id: number; status: string; moves: number }[] = [];
      for (const [kind, map] of kinds) {
        for (const e of map.values()) {
          const key = `${kind}:${e.id}`;
          if (!full && settled.get(key) === e.history.length) continue;
          open.push({ kind, key, id: e.id, status: e.status, moves: e.history.length });
        }
      }
      const seen = new Map<string, string | null>();
      for (const [kind] of kinds) {
        const ids = open.filter((o) => o.kind === kind).map((o) => String(o.id));
        for (let i = 0; i < ids.length; i += 10_000) {
          const rows = await db
            .selectFrom('mirrors')
            .select(['entity_id', 'status'])
            .where('entity_kind', '=', kind)
            .where('entity_id', 'in', ids.slice(i, i + 10_000))
            .execute();
          for (const r of rows) seen.set(`${kind}:${r.entity_id}`, r.status);
        }
      }
      let differ = 0;
      differing = [];
      for (const o of open) {
        const status = seen.get(o.key);
        if (status === o.status) {
          settled.set(o.key, o.moves);
          continue;
        }
        if (lateRejectionsPending && status === 'COMPLETED' && o.status === 'REJECTED') continue;
        if (
          lateRejectionsPending &&
          o.kind === 'deposit' &&
          status === 'CANCELLED' &&
          o.status === 'COMPLETED'
        )
          continue;
        differ++;
        if (differing.length < 5)
          differing.push({ kind: o.kind, id: o.id, status: o.status, ledger: status ?? null });
      }
      return differ;
    };
    const checkEveryMs = 250;
    const caughtUp = async (what: string, lateRejectionsPending = false) => {
      const end = Date.now() + catchUpMs;
      let differ = -1;
      for (;;) {
        try {
          differ = await mirrorsDiffer(lateRejectionsPending);
          if (differ === 0) return;
        } catch {
          // PostgreSQL restarting: ask again.
        }
        if (Date.now() > end) {
          // Say which, and why: the sandbox's moves, the ledger's readings and exceptions of each.
          const why: string[] = [];
          for (const d of differing) {
            const record = deps.engine.get(d.kind as 'deposit', d.id);
            const readings = await db
              .selectFrom('status_history')
              .select(['to_status', 'source', 'illegal', 'stale'])
              .where('entity_kind', '=', d.kind as 'deposit')
              .where('entity_id', '=', String(d.id))
              .orderBy('observed_at')
              .execute();
            const types = await db
              .selectFrom('exceptions')
              .select('type')
              .where('entity_kind', '=', d.kind as 'deposit')
              .where('entity_id', '=', String(d.id))
              .execute();
            why.push(
              `${d.kind} ${d.id}: sandbox ${d.status} (${(record?.history ?? []).map((h) => `${h.from}->${h.to} ${h.trigger}`).join(', ')}), ` +
                `ledger ${d.ledger} (${readings.map((r) => `${r.to_status}/${r.source}${r.illegal ? '/illegal' : ''}${r.stale ? '/stale' : ''}`).join(', ')}), ` +
                `exceptions ${types.map((x) => x.type).join(', ') || 'none'}`,
            );
          }
          throw new Error(
            `timed out waiting for ${what}: ${differ} entities differ: ${why.join('; ')}; ` +
              `intent publishes failed ${intentPublishes.failed} (${intentPublishes.lastError || 'none'}), ` +
              `waiting ${intentPublishes.waiting}; traffic ${JSON.stringify(traffic.status())}`,
          );
        }
        await sleep(checkEveryMs);
      }
    };

    // ---------------------------------------------------------------- 2. ten provider days, with the faults
    const injections = new Map<number, string[]>();
    const at = (hour: number, what: string) => {
      const step = Math.round((hour * HOUR) / (10 * MINUTE));
      injections.set(step, [...(injections.get(step) ?? []), what]);
    };
    for (const h of plan.killReconcilerAtHours) at(h, 'kill');
    for (const h of plan.restartBrokerAtHours) at(h, 'broker');
    for (const h of plan.restartPostgresAtHours) at(h, 'postgres');
    for (const h of plan.rateLimitBursts.atHours) at(h, '429');
    const steps = (10 * DAY) / (10 * MINUTE);
    /** Wall time at which each clock step started, and the provider time it started from. */
    const clockSteps: { wall: number; providerMs: number }[] = [];
    for (let step = 1; step <= steps; step++) {
      const t = step * 10 * MINUTE;
      const hour = t / HOUR;
      await createForHour(Math.floor((t - 10 * MINUTE) / HOUR));
      clockSteps.push({ wall: Date.now(), providerMs: clock.now() });
      await clock.advance(10 * MINUTE);
      for (const what of injections.get(step) ?? []) {
        const t0 = Date.now();
        if (what === 'kill') {
          // While the batches this step caused are in flight.
          await sleep(300);
          const proc = reconciler!;
          proc.proc.kill('SIGKILL');
          await proc.exited;
          await sleep(200);
          startReconcilerProcess();
        } else if (what === 'broker') {
          await trafficDrained();
          broker!.proc.kill('SIGTERM');
          await broker!.exited;
          const down = Date.now();
          // Webhooks and polls meet the outage: the next step's traffic goes nowhere. The fetch due in
          // that step runs (the one in progress ends first): its lines wait in the outbox.
          await Promise.race([fetchTicks.idle(), sleep(OUTAGE_MS)]);
          await clock.advance(10 * MINUTE);
          step++;
          await sleep(Math.max(0, OUTAGE_MS - (Date.now() - down)));
          broker = await startBrokerProcess(brokerDir, brokerPort, brokerLog);
        } else if (what === 'postgres') {
          await pg!.stop();
          const down = Date.now();
          // The fetch in progress meets the outage; the one due in the next step runs while PostgreSQL is
          // down (it fails, and the next tick fetches the same days again).
          await Promise.race([fetchTicks.idle(), sleep(OUTAGE_MS)]);
          await clock.advance(10 * MINUTE);
          step++;
          await Promise.race([fetchTicks.idle(), sleep(OUTAGE_MS)]);
          await sleep(Math.max(0, OUTAGE_MS - (Date.now() - down)));
          pg = await startEmbeddedPostgres({
            dataDir: pgDir,
            port: pgPort,
            onLog: (l) => pgLog.write(`${l}\n`),
          });
        } else if (what === '429') {
          deps.faults.set(providerFaults(plan.rateLimitBursts.rate));
          setTimeout(() => deps.faults.set(providerFaults(0)), plan.rateLimitBursts.realMs).unref();
        }
        events.push({
          what:
            what === 'kill'
              ? 'reconciler SIGKILL'
              : what === 'broker'
                ? 'broker restart'
                : what === 'postgres'
                  ? 'PostgreSQL restart'
                  : `429 burst (${plan.rateLimitBursts.rate * 100}% for ${plan.rateLimitBursts.realMs / 1000} s)`,
          providerHour: hour,
          atSeconds: Math.round((t0 - started) / 100) / 10,
          downSeconds:
            what === '429' ? plan.rateLimitBursts.realMs / 1000 : Math.round((Date.now() - t0) / 100) / 10,
        });
        say(`chaos: ${events.at(-1)!.what} at provider hour ${hour} (${events.at(-1)!.atSeconds} s)`);
      }
      // Every six provider hours: the sandbox's automatic moves of one entity are at least six hours apart,
      // so each status a cashout or refund reaches is current at some catch-up, which waits until the ledger
      // has read it (by webhook or by poll): a COMPLETED is seen before its late REJECTED.
      if (t % (6 * HOUR) === 0) {
        await caughtUp(`the ledger at provider hour ${hour}`, true);
        if (hour % 24 === 0) say(`chaos: provider day ${hour / 24} caught up at ${seconds()} s`);
      }
    }
    await trafficDrained();
    await caughtUp('the ledger to show every sandbox status');

    // ---------------------------------------------------------------- the cash leg, when quiet
    // The clock has stopped, so no tick is due any more: the runs in progress end, then one last fetch of
    // every file (as a person would import them: the whole settlement report as XLSX, the whole
    // transactions report, each closed day's statement in camt.053.001.02 where the job took 001.08), then
    // the imported lines published and matched, then one matching run as of the provider's clock (the
    // runs so far took real time, which the provider's is ten days ahead of: no settlement was overdue).
    await fetchTicks.idle();
    const finalFetch = await fetchEveryFile(sb.url, services.imports.run, clock.now());
    say(
      `chaos: final fetch of ${finalFetch.files} files brought ${finalFetch.newLines} new lines (statements up to ${finalFetch.lastDay})`,
    );
    await importsMatched(db, infra.admin, catchUpMs);
    const { rules: matchRules, ...matchOptions } = matchingOptionsFrom(config);
    const lastRun: MatchingRun = await runMatching(db, matchRules, {
      ...matchOptions,
      bankAccounts: services.imports.bankAccounts(),
      now: new Date(clock.now()),
    });
    say(
      `chaos: matching as of the provider's clock: ${JSON.stringify(lastRun.byRule)} new, exceptions ${JSON.stringify(lastRun.exceptions.raised)}`,
    );

    // ---------------------------------------------------------------- 3. the figures
    const lateAtProvider = [
      ...[...deps.engine.cashouts.values()].map((e) => ({ kind: 'cashout', e })),
      ...[...deps.engine.refunds.values()].map((e) => ({ kind: 'refund', e })),
    ]
      .filter(({ e }) => {
        const i = e.history.findIndex((h) => h.to === 'COMPLETED');
        return i >= 0 && e.history.slice(i + 1).some((h) => h.to === 'REJECTED');
      })
      .map(({ kind, e }) => `${kind}:${e.id}`)
      .sort();
    // From each late rejection at the provider to its reversal in the ledger.
    const providerAt = (wall: number) => {
      let at = clockSteps[0]?.providerMs ?? clock.now();
      for (const st of clockSteps) if (st.wall <= wall) at = st.providerMs + 10 * MINUTE;
      return Math.min(at, clock.now());
    };
    const wallAt = (providerMs: number) =>
      clockSteps.find((st) => st.providerMs + 10 * MINUTE >= providerMs)?.wall ?? Date.now();
    const reversals = new Map(
      (
        await sql<{ k: string; booked: Date; source: string | null }>`
          SELECT e.entity_kind || ':' || e.entity_id AS k, min(e.created_at) AS booked,
            (SELECT h.source FROM status_history h WHERE h.merchant_account = e.merchant_account
               AND h.entity_kind = e.entity_kind AND h.entity_id = e.entity_id AND h.to_status = 'REJECTED'
             ORDER BY h.recorded_at, h.id LIMIT 1) AS source
          FROM journal_entries e WHERE e.effect = 'late_reversal' AND e.direction = 1
          GROUP BY e.merchant_account, e.entity_kind, e.entity_id`.execute(db)
      ).rows.map((r) => [r.k, r]),
    );
    const latencySamples: { wallMs: number; providerMs: number; source: string }[] = [];
    for (const { kind, e } of [
      ...[...deps.engine.cashouts.values()].map((e) => ({ kind: 'cashout', e })),
      ...[...deps.engine.refunds.values()].map((e) => ({ kind: 'refund', e })),
    ]) {
      const i = e.history.findIndex((h) => h.to === 'COMPLETED');
      const rejected = i >= 0 ? e.history.slice(i + 1).find((h) => h.to === 'REJECTED') : undefined;
      const booked = rejected ? reversals.get(`${kind}:${e.id}`) : undefined;
      if (!rejected || !booked) continue;
      const rejectedAt = Date.parse(rejected.at);
      const bookedWall = new Date(booked.booked).getTime();
      latencySamples.push({
        wallMs: Math.max(0, bookedWall - wallAt(rejectedAt)),
        providerMs: Math.max(0, providerAt(bookedWall) - rejectedAt),
        source: booked.source ?? 'unknown',
      });
    }
    const bySource: Record<string, number> = {};
    for (const x of latencySamples) bySource[x.source] = (bySource[x.source] ?? 0) + 1;
    const reversalLatency = {
      all: latencyFigures(latencySamples),
      learntByPolling: latencyFigures(latencySamples.filter((x) => x.source === 'poll')),
      bySource,
    };

    const lateExceptions = (
      await db
        .selectFrom('exceptions')
        .select(['entity_kind', 'entity_id'])
        .where('type', '=', 'LATE_REJECTION')
        .execute()
    ).map((x) => `${x.entity_kind}:${x.entity_id}`);
    const lateCompletedAtProvider = [...deps.engine.deposits.values()]
      .filter((d) => d.history.some((h) => h.trigger === 'late_payment'))
      .map((d) => `deposit:${d.id}`);
    const lateCompletionExceptions = new Set(
      (
        await db
          .selectFrom('exceptions')
          .select(['entity_kind', 'entity_id'])
          .where('type', '=', 'LATE_COMPLETION')
          .execute()
      ).map((x) => `${x.entity_kind}:${x.entity_id}`),
    );
    // Alerts travel ledger -> outbox -> relay -> topic -> dispatcher -> sink.
    const alertEnd = Date.now() + 60_000;
    const lateAlerts = () => alerts.filter((a) => a.type === 'LATE_REJECTION');
    while (lateAlerts().length < lateAtProvider.length && Date.now() < alertEnd) await sleep(250);
    await sleep(2_000); // a duplicate would arrive now
    const late = lateAlerts();
    const alertsPerEntity = new Map<string, number>();
    const alertKey = (a: (typeof alerts)[number]) => `${a.entity_kind}:${a.entity_id}`;
    for (const a of late) alertsPerEntity.set(alertKey(a), (alertsPerEntity.get(alertKey(a)) ?? 0) + 1);
    const exceptionsPerEntity = new Map<string, number>();
    for (const k of lateExceptions) exceptionsPerEntity.set(k, (exceptionsPerEntity.get(k) ?? 0) + 1);
    const mismatched = [
      ...lateAtProvider.filter((k) => exceptionsPerEntity.get(k) !== 1 || alertsPerEntity.get(k) !== 1),
      ...lateExceptions.filter((k) => !lateAtProvider.includes(k)).map((k) => `unexpected exception ${k}`),
      ...late
        .filter((a) => !lateAtProvider.includes(alertKey(a)))
        .map((a) => `unexpected alert ${alertKey(a)}`),
    ];

    // Dropped webhooks: how the ledger came to know each dropped status.
    const history = await db
      .selectFrom('status_history')
      .select(['entity_kind', 'entity_id', 'to_status', 'source', 'observed_at', 'event_id'])
      .orderBy('observed_at')
      .execute();
    const firstSeen = new Map<string, string>();
    const firstSeenAt = new Map<string, Date>();
    for (const h of history) {
      const k = `${h.entity_kind}:${h.entity_id}:${h.to_status}`;
      if (!firstSeen.has(k)) {
        firstSeen.set(k, h.source);
        firstSeenAt.set(k, new Date(h.observed_at));
      }
    }
    const recovery = {
      recoveredByPolling: 0,
      seenThroughOtherWebhook: 0,
      supersededUnread: 0,
      unrecovered: 0,
    };
    for (const d of droppedList) {
      const source = firstSeen.get(`${d.kind}:${d.entityId}:${d.status}`);
      const record = deps.engine.get(d.kind as 'deposit', d.entityId);
      if (source === 'poll') recovery.recoveredByPolling++;
      else if (source !== undefined) recovery.seenThroughOtherWebhook++;
      else if (record && record.status !== d.status) recovery.supersededUnread++;
      else recovery.unrecovered++;
    }

    // The late payments: from which status, how the ledger first read the late COMPLETED, and how long after.
    const lateCompletionSources: Record<string, number> = {};
    const lateCompletionSamples: { wallMs: number; providerMs: number }[] = [];
    let fromExpired = 0;
    let fromCancelled = 0;
    for (const d of deps.engine.deposits.values()) {
      const move = d.history.find((h) => h.trigger === 'late_payment');
      if (!move) continue;
      if (move.from === 'EXPIRED') fromExpired++;
      else fromCancelled++;
      const k = `deposit:${d.id}:COMPLETED`;
      const source = firstSeen.get(k) ?? 'never';
      lateCompletionSources[source] = (lateCompletionSources[source] ?? 0) + 1;
      const seenAt = firstSeenAt.get(k);
      if (source === 'poll' && seenAt) {
        const completedAt = Date.parse(move.at);
        lateCompletionSamples.push({
          wallMs: Math.max(0, seenAt.getTime() - wallAt(completedAt)),
          providerMs: Math.max(0, providerAt(seenAt.getTime()) - completedAt),
        });
      }
    }
    // The other documented moves: EXPIRED to CANCELLED, 826 on a late-rejected cashout, bank code forms.
    const expiredToCancelled = [...deps.engine.deposits.values()].filter((d) =>
      d.history.some((h) => h.from === 'EXPIRED' && h.to === 'CANCELLED'),
    ).length;
    const lateRejectedCashouts = lateAtProvider
      .filter((k) => k.startsWith('cashout:'))
      .map((k) => k.slice(8));
    const mirrorCodes = new Map<string, string | null>();
    for (let i = 0; i < lateRejectedCashouts.length; i += 10_000) {
      const rows = await db
        .selectFrom('mirrors')
        .select(['entity_id', 'rejection_code'])
        .where('entity_kind', '=', 'cashout')
        .where('entity_id', 'in', lateRejectedCashouts.slice(i, i + 10_000))
        .execute();
      for (const r of rows) mirrorCodes.set(r.entity_id, r.rejection_code);
    }
    const lateRejected826 = lateRejectedCashouts.filter(
      (id) => deps.engine.cashouts.get(Number(id))?.rejectionCode === 826,
    ).length;
    const rejectionCodeMismatched = lateRejectedCashouts
      .filter((id) => mirrorCodes.get(id) !== '826')
      .map((id) => `cashout:${id} ledger ${mirrorCodes.get(id)}`);
    const sentBankCodes = new Map(
      (
        await sql<{ entity_id: string; bank_code: unknown }>`
          SELECT entity_id, request->'bank_code' AS bank_code FROM intents
          WHERE entity_kind = 'cashout' AND entity_id IS NOT NULL`.execute(db)
      ).rows.map((r) => [r.entity_id, r.bank_code]),
    );
    const bankCodeForms: Record<string, number> = {};
    let bankCodeNotKept = 0;
    for (const c of deps.engine.cashouts.values()) {
      const form = JSON.stringify(c.bankCode);
      bankCodeForms[form] = (bankCodeForms[form] ?? 0) + 1;
      // The sandbox stores what the merchant sent, as the intent recorded it (leading zeros kept).
      if (sentBankCodes.has(String(c.id)) && String(sentBankCodes.get(String(c.id))) !== String(c.bankCode))
        bankCodeNotKept++;
    }

    // Ground truth per account, currency and book account. The sandbox's settlements swept `available`:
    // the ledger's is the provider's balance from every movement (computeBalances) less the gross of each
    // settlement whose report row payrecon imported, and the cash leg holds what the sandbox's settlement
    // records, bank entries and planted anomalies give (expectedCashLeg, test/sandbox/planted-cash.ts):
    // in transit the nets of the settlements whose credit no imported statement holds (missing, returned
    // by the bank later, waiting for a batch, not due yet), in `bank:<id>` the settlement credits booked
    // up to the last imported day, in bank fees what the bank kept of them, in settlement fees the fees,
    // in `fx_conversion` the grosses converted less what they converted into.
    const cash = cashTruthOf(deps.settlements);
    const lastDay = finalFetch.lastDay;
    const reportedIds = new Set(
      (await db.selectFrom('provider_settlement_rows').select('settlement_id').distinct().execute()).map(
        (r) => r.settlement_id,
      ),
    );
    const cashLeg = expectedCashLeg(cash, { lastDay, reported: (id) => reportedIds.has(id) });
    const truth = computeBalances(deps.engine);
    const ledger = await balances(db);
    const ledgerOf = new Map<string, bigint>();
    for (const r of ledger) {
      const k = `${r.merchantAccount}|${r.currency}|${r.account}`;
      ledgerOf.set(k, (ledgerOf.get(k) ?? 0n) + r.balance);
    }
    const cells: [string, keyof (typeof truth)[number], bigint][] = [
      ['available', 'available', 1n],
      ['reserved', 'reserved', 1n],
      ['deposits', 'deposits', -1n],
      ['fees', 'fees', 1n],
      ['payouts', 'payouts', 1n],
      ['refunds', 'refunds', 1n],
      ['test_available', 'testAvailable', 1n],
      ['crypto_in_transit', 'cryptoInTransit', 1n],
      ['crypto_customer_wallets', 'cryptoWallets', 1n],
    ];
    const diffs: string[] = [];
    const compared = new Set<string>();
    for (const row of truth) {
      for (const [name, field, sign] of cells) {
        const k = `${row.account}|${row.currency}|${name}`;
        compared.add(k);
        const settled = name === 'available' ? (cashLeg.get(k) ?? 0n) : 0n;
        const want = (row[field] as bigint) * sign + settled;
        const got = ledgerOf.get(k) ?? 0n;
        if (got !== want) diffs.push(`${k}: ledger ${got}, ground truth ${want}`);
      }
    }
    const cashDiffs: string[] = [];
    for (const [k, want] of cashLeg) {
      if (k.endsWith('|available')) continue;
      compared.add(k);
      const got = ledgerOf.get(k) ?? 0n;
      if (got !== want) cashDiffs.push(`${k}: ledger ${got}, sandbox ${want}`);
    }
    for (const [k, v] of ledgerOf) {
      const name = k.split('|')[2]!;
      if (compared.has(k) || v === 0n) continue;
      if (cells.some(([n]) => n === name)) diffs.push(`${k}: ledger ${v}, ground truth 0`);
      else if (isCashLegAccount(name)) cashDiffs.push(`${k}: ledger ${v}, sandbox 0`);
    }
    diffs.push(...cashDiffs);
    const cashFigures = await cashLegFigures({
      db,
      cash,
      lastDay,
      reported: reportedIds.size,
      cells: [...cashLeg.keys()].filter((k) => !k.endsWith('|available')).length,
      cellDiff: cashDiffs,
      // As runMatching's settlement grace counts it: the UTC date of the run.
      today: new Date(clock.now()).toISOString().slice(0, 10),
      graceDays: config.matching.settlementGraceDays,
      bankAccounts: services.imports.bankAccounts(),
      ledger,
      end: new Date(clock.now() + MINUTE),
      ticks: fetchTicks.stats,
      finalFetch,
      carriedOver: deps.settlements.meta.carries.length,
      inProcessLog: async () => {
        await new Promise<void>((resolve) => inProcessLog.write('', () => resolve()));
        return readFileSync(logs[0]!.path, 'utf8');
      },
    });

    const [keys] = await sql<{ n: string; distinct: string }>`
      SELECT count(*)::text AS n, count(DISTINCT idempotency_key)::text AS distinct FROM journal_entries`
      .execute(db)
      .then((r) => r.rows);
    const [postings] = await sql<{ n: string }>`SELECT count(*)::text AS n FROM postings`
      .execute(db)
      .then((r) => r.rows);
    const [intents] = await sql<{ n: string }>`SELECT count(*)::text AS n FROM intents`
      .execute(db)
      .then((r) => r.rows);
    const distinctEvents = new Set(history.map((h) => h.event_id)).size;
    const verified = await verifyLedger(db);
    const verifyCli = await new Promise<{ exitCode: number | null; output: string }>((resolve) => {
      const out: Buffer[] = [];
      const p = spawn(process.execPath, ['bin/payrecon.mjs', 'db', 'verify'], {
        cwd: ROOT,
        env: { PATH: process.env.PATH ?? '', DATABASE_URL: env.DATABASE_URL!, LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      p.stdout.on('data', (c: Buffer) => out.push(c));
      p.stderr.on('data', (c: Buffer) => out.push(c));
      p.on('exit', (code) => {
        const text = Buffer.concat(out).toString('utf8').trim().split('\n');
        resolve({ exitCode: code, output: text.at(-1) ?? '' });
      });
    });
    const messagesOn = async (topics: string[]) =>
      (await Promise.all(topics.map((topic) => infra!.admin.fetchTopicOffsets(topic))))
        .flat()
        .reduce((s, p) => s + Number(p.high), 0);
    const topicMessages = await messagesOn(TOPIC_NAMES);
    const deadLettered = await messagesOn(TOPIC_NAMES.map(dlqTopicOf));

    // Workbooks of the run, then the secrets scan of everything the run wrote.
    const { reports } = services;
    const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
    for (const kind of ['settlement', 'exceptions'] as const) {
      await reports.run({ kind, from: day(started - DAY), to: day(clock.now() + DAY), account: null });
    }
    const secretStats = emptyStats();
    const secrets: KnownSecret[] = [
      { label: 'deposit secret', value: account.depositSecret },
      { label: 'cashout pass', value: account.cashoutPass },
      { label: 'cashout secret', value: account.cashoutSecret },
      { label: 'read-only key', value: account.readOnlyKey },
      { label: 'card 4111111111111111', value: '4111111111111111' },
      ...loadCatalogue().testCards.map((c) => ({ label: `test card ${c.number}`, value: c.number })),
      { label: 'cvv 123', value: '123', kind: 'cvv' as const },
      ...[...wire].map((value, i) => ({ label: `wire signature #${i}`, value })),
    ];
    for (const l of logs) await new Promise<void>((resolve) => l.stream.write('', () => resolve()));
    const hits = await scanForSecrets({
      secrets,
      logFiles: logs.map((l) => l.path),
      database: { url: pg.url },
      kafka: {
        brokers: [`127.0.0.1:${brokerPort}`],
        registryUrl: registry.url,
        timeoutMs: Math.max(240_000, options.entities * 30),
      },
      files: [join(infra.dataDir, 'reports')],
      stats: secretStats,
    });

    const byKindAndCurrency: Record<string, Record<string, number>> = {};
    const count = (kind: string, currency: string) => {
      const row = byKindAndCurrency[kind] ?? {};
      row[currency] = (row[currency] ?? 0) + 1;
      byKindAndCurrency[kind] = row;
    };
    for (const d of deps.engine.deposits.values()) count(d.card ? 'card deposit' : 'deposit', d.currency);
    for (const c of deps.engine.cashouts.values()) count('cashout', c.currency);
    for (const r of deps.engine.refunds.values()) count('refund', r.currency);

    const wallSeconds = (Date.now() - started) / 1000;
    const figures: SoakFigures = {
      entities: {
        total: entitiesNow(),
        byKindAndCurrency,
        trafficErrors: traffic.status().errors as number,
      },
      webhooks: {
        notifications: hooks.notifications,
        sent: hooks.sent,
        duplicated: hooks.duplicated,
        reordered: hooks.reordered,
        dropped: hooks.dropped,
        deliveredAttempts: hooks.delivered,
        failedAttempts: hooks.failed,
        gaveUp: hooks.gaveUp,
      },
      provider: {
        calls: served.calls,
        errors5xx: served.error,
        hangs: served.hang,
        rateLimited429: served.rate_limit,
      },
      events,
      droppedRecovery: { dropped: droppedList.length, ...recovery },
      lateRejections: {
        atProvider: lateAtProvider.length,
        exceptions: lateExceptions.length,
        alertsDelivered: late.length,
        duplicateAlerts: late.length - new Set(late.map((a) => a.alert_id)).size,
        mismatched,
        reversalLatency,
      },
      lateCompletions: {
        atProvider: lateCompletedAtProvider.length,
        fromExpired,
        fromCancelled,
        exceptions: lateCompletionExceptions.size,
        missing: lateCompletedAtProvider.filter((k) => !lateCompletionExceptions.has(k)),
        bySource: lateCompletionSources,
        learntByPolling: latencyFigures(lateCompletionSamples),
      },
      moves: { expiredToCancelled, lateRejected826, rejectionCodeMismatched, bankCodeForms, bankCodeNotKept },
      cash: cashFigures,
      alerts: alertFigures(alerts),
      exceptionsByType: Object.fromEntries(
        (
          await sql<{ type: string; n: number }>`
            SELECT type, count(*)::int AS n FROM exceptions GROUP BY type ORDER BY type`.execute(db)
        ).rows.map((r) => [r.type, r.n]),
      ),
      ledger: {
        postings: Number(postings?.n),
        journalEntries: Number(keys?.n),
        duplicateIdempotencyKeys: Number(keys?.n) - Number(keys?.distinct),
        observations: history.length,
        duplicateObservations: history.length - distinctEvents,
        intents: Number(intents?.n),
        groundTruthDiff: diffs.length,
        groundTruthDiffSample: diffs.slice(0, 10),
        statusDiff: await mirrorsDiffer(false, true),
        verifyFailures: verified.failures,
        verifyCli,
      },
      wallSeconds: Math.round(wallSeconds),
      eventsPerSecond: Math.round((history.length + Number(intents?.n)) / wallSeconds),
      topicMessages,
      deadLettered,
      secrets: {
        hits: hits.length,
        sample: hits.slice(0, 10).map((h) => `${h.detector} ${h.label} @ ${h.location}: ${h.excerpt}`),
        stats: secretStats,
        wireSignatures: wire.size,
      },
      logFiles: logs.map((l) => l.path),
    };
    say(`chaos: done at ${seconds()} s (reconciler started ${reconcilerStarts} times)`);
    return figures;
  } finally {
    diagnostics.unsubscribe('undici:client:sendHeaders', onHeaders);
    rootStream.write = rootWrite;
    // Reverse order: the parts of this process, the sandbox, then the processes and servers.
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
    await sandbox?.close().catch(() => undefined);
    const r = reconciler as Child | null;
    if (r) {
      r.proc.kill('SIGKILL');
      await r.exited;
    }
    if (broker) {
      broker.proc.kill('SIGTERM');
      await broker.exited;
    }
    await registry?.close().catch(() => undefined);
    await sink?.close().catch(() => undefined);
    await pg?.stop().catch(() => undefined);
    for (const l of logs) l.stream.end();
    if (!process.env.CHAOS_KEEP) rmSync(work, { recursive: true, force: true });
  }
}

/**
 * Every file the sandbox has for the account, imported as a person would (src/import-service.ts through
 * the services' import): the whole settlement report (XLSX), the whole transactions report (CSV), and the
 * statement of every day from the first bank account's opening to the last closed day (camt.053.001.02).
 */
async function fetchEveryFile(
  sandboxUrl: string,
  importFile: ImportFileFn,
  now: number,
): Promise<{ files: number; newLines: number; lastDay: string }> {
  const base = `${sandboxUrl}/_sandbox`;
  const download = async (path: string) => {
    const res = await fetch(`${base}${path}`);
    if (!res.ok) throw new Error(`GET ${path}: HTTP ${res.status} ${await res.text()}`);
    return new Uint8Array(await res.arrayBuffer());
  };
  const account = DEFAULT_ACCOUNT.name;
  const lastDay = addDays(localDate(new Date(now), SETTLEMENT.timeZone), -1);
  const banks = (await (await fetch(`${base}/bank-accounts`)).json()) as {
    account: string;
    opened: string;
  }[];
  const opened = banks
    .filter((b) => b.account === account)
    .map((b) => b.opened)
    .sort()[0];
  const files: [ImportKind, string, string][] = [
    ['provider-settlements', `/reports/settlements?account=${account}&format=xlsx`, 'settlements.xlsx'],
    ['provider-transactions', `/reports/transactions?account=${account}&format=csv`, 'transactions.csv'],
  ];
  for (let day = opened; day !== undefined && day <= lastDay; day = addDays(day, 1)) {
    files.push([
      'bank-statement',
      `/bank-statements?account=${account}&date=${day}&format=camt.053.001.02`,
      `statement-${day}.xml`,
    ]);
  }
  let newLines = 0;
  for (const [kind, path, fileName] of files) {
    const { summary } = await importFile({
      kind,
      fileName,
      bytes: await download(path),
      user: FINAL_FETCH_USER,
    });
    newLines +=
      'statements' in summary ? summary.statements.reduce((n, x) => n + (x.new ?? 0), 0) : (summary.new ?? 0);
  }
  return { files: files.length, newLines, lastDay };
}

/** Waits until the imported lines are all published and the match consumer has read them all. */
async function importsMatched(db: Infrastructure['db'], admin: Infrastructure['admin'], timeoutMs: number) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const [pending] = (
      await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM outbox WHERE published_at IS NULL AND topic LIKE 'imports.%'`.execute(
        db,
      )
    ).rows;
    let lag = 0;
    for (const [topic, groupId] of Object.entries(MATCH_CONSUMER_GROUPS)) {
      const high = await admin.fetchTopicOffsets(topic);
      const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] });
      for (const p of high) {
        const at = Number(committed?.partitions.find((c) => c.partition === p.partition)?.offset ?? -1);
        lag += Math.max(0, Number(p.high) - Math.max(at, 0));
      }
    }
    if (pending?.n === 0 && lag === 0) return;
    if (Date.now() > end) throw new Error(`imports not matched: ${pending?.n} unpublished, ${lag} unread`);
    await sleep(250);
  }
}

const MATCHING_EXCEPTIONS = [
  'BANK_LINE_UNMATCHED',
  'SETTLEMENT_NOT_RECEIVED',
  'PROVIDER_REPORT_UNMATCHED',
  'PROVIDER_REPORT_MISMATCH',
  'LEDGER_NOT_IN_REPORT',
  'PROVIDER_BALANCE_DRIFT',
];

/** The cash leg's figures: the sandbox's settlements and bank against what payrecon fetched, matched and booked. */
async function cashLegFigures(o: {
  db: Infrastructure['db'];
  cash: CashTruth;
  lastDay: string;
  reported: number;
  cells: number;
  cellDiff: string[];
  today: string;
  graceDays: number;
  bankAccounts: readonly { id: string; account: string; currency: string }[];
  ledger: readonly { merchantAccount: string; currency: string; account: string; balance: bigint }[];
  end: Date;
  ticks: TickStats;
  finalFetch: { files: number; newLines: number };
  carriedOver: number;
  inProcessLog: () => Promise<string>;
}): Promise<CashFigures> {
  const { db, cash, lastDay } = o;
  const count = async (query: ReturnType<typeof sql<{ n: number }>>) =>
    (await query.execute(db)).rows[0]?.n ?? 0;
  const byKey = (rows: { k: string; n: number }[]) => Object.fromEntries(rows.map((r) => [r.k, r.n]));

  const checks = await db
    .selectFrom('provider_balance_checks')
    .select(['merchant_account', 'currency', 'settlement_id', 'provider', 'ledger'])
    .orderBy(['merchant_account', 'currency'])
    .execute();
  // The matching exceptions open, against the planted anomalies the imported days show.
  const open = await sql<{ type: string; entity_id: string; reference: string | null }>`
    SELECT type, entity_id, details->>'reference' AS reference FROM exceptions
    WHERE state <> 'resolved' AND type = ANY(${MATCHING_EXCEPTIONS}::text[])`.execute(db);
  const got = open.rows.map((r) =>
    r.type === 'BANK_LINE_UNMATCHED' ? `BANK_LINE_UNMATCHED ${r.reference}` : `${r.type} ${r.entity_id}`,
  );
  const bankIds = new Set(o.bankAccounts.map((b) => b.id));
  const want = [
    ...expectedUnmatchedLines(cash, lastDay, bankIds).map((ref) => `BANK_LINE_UNMATCHED ${ref}`),
    ...expectedNotReceived(cash, { lastDay, today: o.today, graceDays: o.graceDays }).map(
      (id) => `SETTLEMENT_NOT_RECEIVED ${id}`,
    ),
  ];
  const tally = (xs: string[]) => {
    const t: Record<string, number> = {};
    for (const x of xs) t[x.split(' ')[0]!] = (t[x.split(' ')[0]!] ?? 0) + 1;
    return t;
  };
  const anomalies: Record<string, number> = {};
  for (const a of cash.anomalies.filter((x) => x.date <= lastDay))
    anomalies[a.kind] = (anomalies[a.kind] ?? 0) + 1;

  // The bank proof per bank account (the month close's, src/db/closes/bank-proof.ts): the ledger's bank
  // account holds the matched settlement credits only; the statement also holds the balance the account
  // had before the sandbox's first entry and the lines no rule matches (unrelated lines, returned
  // credits), so closing = opening + ledger + unmatched lines, and the closing is the sandbox's bank's.
  const proof: CashFigures['bankProof'] = [];
  const mine = o.bankAccounts.filter((b) => b.account === DEFAULT_ACCOUNT.name);
  for (const currency of [...new Set(mine.map((b) => b.currency))].sort()) {
    const balanceOf = (name: string) =>
      o.ledger
        .filter(
          (r) => r.merchantAccount === DEFAULT_ACCOUNT.name && r.currency === currency && r.account === name,
        )
        .reduce((t, r) => t + r.balance, 0n);
    const lines = await bankProof(
      db,
      { merchantAccount: DEFAULT_ACCOUNT.name, currency, period: lastDay.slice(0, 7), end: o.end },
      mine.filter((b) => b.currency === currency),
      balanceOf,
    );
    for (const p of lines) {
      const info = cash.bankAccounts.find((b) => b.id === p.bankAccount);
      const opening = info?.opening ?? 0n;
      const sandboxClosing = cash.entries
        .filter((e) => e.bankAccount === p.bankAccount && e.bookingDate <= lastDay)
        .reduce((t, e) => t + e.amount, opening);
      const amount = (text: string) => parseAmount(text, { allowNegative: true });
      const unmatched = p.unmatched
        .filter((u) => u.kind === 'bank_line')
        .reduce((t, u) => t + amount(u.amount), 0n);
      const closing = p.statementClosing === null ? null : amount(p.statementClosing);
      proof.push({
        bankAccount: p.bankAccount,
        closing: p.statementClosing,
        ledger: p.ledger,
        unmatched: formatAmount(unmatched),
        opening: formatAmount(opening),
        explained: closing === sandboxClosing && closing === opening + amount(p.ledger) + unmatched,
      });
    }
  }

  // Nothing twice: a settlement's entry, a line or a settlement in two live matches, a match booked
  // other than once while it stands (and not reversed once it ended).
  const doubled = [
    ...(
      await sql<{ what: string }>`
        SELECT 'settlement ' || entity_id || ' ' || effect || ' booked ' || count(*) || ' times' AS what
        FROM journal_entries WHERE entity_kind = 'settlement'
        GROUP BY merchant_account, entity_id, effect HAVING count(*) <> 1 OR sum(direction) <> 1`.execute(db)
    ).rows,
    ...(
      await sql<{ what: string }>`
        SELECT side || ' ' || identity || ' in ' || count(*) || ' live matches' AS what FROM match_members
        WHERE live AND side IN ('bank_line', 'settlement', 'provider_row')
        GROUP BY side, identity HAVING count(*) > 1`.execute(db)
    ).rows,
    ...(
      await sql<{ what: string }>`
        SELECT 'match ' || m.id || ' booked ' || coalesce(sum(e.direction), 0) || ' times net' AS what
        FROM matches m LEFT JOIN journal_entries e ON e.entity_kind = 'bank_match' AND e.entity_id = m.id::text
        WHERE m.pair = 'bank-settlement'
        GROUP BY m.id HAVING coalesce(sum(e.direction), 0) <> CASE WHEN m.ended_at IS NULL THEN 1 ELSE 0 END`.execute(
        db,
      )
    ).rows,
  ].map((r) => r.what);

  // A run that failed says why in its claim's row (one that could not claim, the tick's failure says).
  const runErrors = new Map(
    (
      await sql<{ run_key: string; error: string | null }>`
        SELECT run_key, error FROM job_runs WHERE job = 'settlement-fetch' AND status = 'failed'`.execute(db)
    ).rows.map((r) => [r.run_key, r.error ?? '']),
  );
  const failures = o.ticks.failures.map((f) => {
    const key = / (settlement-fetch:\S+) failed$/.exec(f)?.[1];
    if (key === undefined) return f;
    // A run the outage stopped could not record why either.
    const why = runErrors.get(key) || 'the database went away before the run could record why';
    return `${f.slice(0, f.indexOf(' '))} ${why.slice(0, 200)}`;
  });
  const [jobImports] = (
    await sql<{ n: number; fresh: number }>`
      SELECT count(*)::int AS n, coalesce(sum(new_lines), 0)::int AS fresh FROM imports
      WHERE imported_by = ${SETTLEMENT_FETCH_USER}`.execute(db)
  ).rows;
  const refused = (await o.inProcessLog())
    .split('\n')
    .filter((l) => l.includes('settlement fetch: file refused'))
    .map((l) => String((JSON.parse(l) as { refusal?: string }).refusal));
  return {
    settlements: {
      atSandbox: cash.settlements.length,
      converted: cash.settlements.filter((x) => x.currency !== x.settlementCurrency).length,
      carriedOver: o.carriedOver,
      reported: o.reported,
      booked: await count(
        sql<{
          n: number;
        }>`SELECT count(DISTINCT entity_id)::int AS n FROM journal_entries WHERE entity_kind = 'settlement'`,
      ),
    },
    fetch: {
      ...o.ticks,
      failures,
      imports: jobImports?.n ?? 0,
      newLines: jobImports?.fresh ?? 0,
      refused,
    },
    finalFetch: o.finalFetch,
    lastStatementDay: lastDay,
    statements: await count(sql<{ n: number }>`SELECT count(*)::int AS n FROM import_statements`),
    bankLines: await count(sql<{ n: number }>`SELECT count(*)::int AS n FROM bank_statement_lines`),
    matchedBankLines: await count(
      sql<{
        n: number;
      }>`SELECT count(DISTINCT identity)::int AS n FROM match_members WHERE side = 'bank_line' AND live`,
    ),
    matchesByRule: byKey(
      (
        await sql<{ k: string; n: number }>`
          SELECT rule AS k, count(*)::int AS n FROM matches WHERE ended_at IS NULL GROUP BY rule ORDER BY rule`.execute(
          db,
        )
      ).rows,
    ),
    anomalies,
    exceptions: {
      expected: tally(want),
      open: tally(got),
      missing: want.filter((x) => !got.includes(x)),
      unexpected: got.filter((x) => !want.includes(x)),
    },
    balanceChecks: {
      checked: checks.length,
      differing: checks
        .filter((c) => c.provider !== c.ledger)
        .map(
          (c) =>
            `${c.merchant_account} ${c.currency} at ${c.settlement_id}: provider ${c.provider}, ledger ${c.ledger}`,
        ),
      driftsRaised: await count(
        sql<{ n: number }>`SELECT count(*)::int AS n FROM exceptions WHERE type = 'PROVIDER_BALANCE_DRIFT'`,
      ),
    },
    cells: o.cells,
    cellDiff: o.cellDiff,
    bankProof: proof,
    doubled,
  };
}

/** Alerts per type, and any alert id or exception alerted twice. */
function alertFigures(
  alerts: readonly { alert_id: string; type: string; entity_kind: string | null; entity_id: string | null }[],
): SoakFigures['alerts'] {
  const byType: Record<string, number> = {};
  const perException = new Map<string, number>();
  for (const a of alerts) {
    byType[a.type] = (byType[a.type] ?? 0) + 1;
    const k = `${a.type}:${a.entity_kind}:${a.entity_id}`;
    perException.set(k, (perException.get(k) ?? 0) + 1);
  }
  const ids = new Set(alerts.map((a) => a.alert_id));
  return {
    delivered: alerts.length,
    byType,
    duplicateIds: alerts.length - ids.size,
    repeatedExceptions: [...perException].filter(([, n]) => n > 1).map(([k, n]) => `${k} x${n}`),
  };
}

/** The figures as lines for a person. */
export function describeFigures(f: SoakFigures): string[] {
  const kinds = Object.entries(f.entities.byKindAndCurrency)
    .map(
      ([k, byCurrency]) =>
        `${k} ${Object.entries(byCurrency)
          .map(([c, n]) => `${c} ${n}`)
          .join(', ')}`,
    )
    .join('; ');
  return [
    `entities ${f.entities.total}: ${kinds} (traffic calls failed after retries: ${f.entities.trafficErrors})`,
    `webhooks: ${f.webhooks.notifications} notifications, ${f.webhooks.sent} sent (${f.webhooks.duplicated} duplicates, ${f.webhooks.reordered} reordered), ${f.webhooks.dropped} dropped; attempts delivered ${f.webhooks.deliveredAttempts}, failed and retried ${f.webhooks.failedAttempts}, given up ${f.webhooks.gaveUp}`,
    `provider: ${f.provider.calls} calls, ${f.provider.errors5xx} answered 5xx, ${f.provider.hangs} hung, ${f.provider.rateLimited429} answered 429`,
    ...f.events.map(
      (e) =>
        `  ${e.what} at provider hour ${e.providerHour}, ${e.atSeconds} s into the run (${e.downSeconds} s)`,
    ),
    `dropped webhooks ${f.droppedRecovery.dropped}: ${f.droppedRecovery.recoveredByPolling} recovered by polling, ${f.droppedRecovery.seenThroughOtherWebhook} read through another webhook, ${f.droppedRecovery.supersededUnread} superseded before anyone could read them, ${f.droppedRecovery.unrecovered} unrecovered`,
    `late completions ${f.lateCompletions.atProvider} (${f.lateCompletions.fromExpired} from EXPIRED, ${f.lateCompletions.fromCancelled} from CANCELLED; first read by ${JSON.stringify(f.lateCompletions.bySource)}): ${f.lateCompletions.exceptions} LATE_COMPLETION exceptions, ${f.lateCompletions.missing.length} without one; late completion to the ledger's reading, learnt by polling ${describeLatency(f.lateCompletions.learntByPolling)}`,
    `documented moves: ${f.moves.expiredToCancelled} EXPIRED deposits turned CANCELLED; ${f.moves.lateRejected826} late-rejected cashouts with 826 (${f.moves.rejectionCodeMismatched.length} without 826 in the ledger); cashouts by bank_code sent ${JSON.stringify(f.moves.bankCodeForms)}, ${f.moves.bankCodeNotKept} stored otherwise than sent`,
    `late rejections ${f.lateRejections.atProvider}: ${f.lateRejections.exceptions} exceptions, ${f.lateRejections.alertsDelivered} alerts delivered, ${f.lateRejections.duplicateAlerts} duplicate alerts, ${f.lateRejections.mismatched.length} mismatched`,
    `exceptions by type: ${JSON.stringify(f.exceptionsByType)}`,
    ...describeCash(f.cash),
    `late rejection to ledger reversal (${JSON.stringify(f.lateRejections.reversalLatency.bySource)} first seen by source): all ${describeLatency(f.lateRejections.reversalLatency.all)}; learnt by polling ${describeLatency(f.lateRejections.reversalLatency.learntByPolling)}`,
    `alerts at the webhook sink: ${f.alerts.delivered} (${Object.entries(f.alerts.byType)
      .map(([t, n]) => `${t} ${n}`)
      .join(
        ', ',
      )}), ${f.alerts.duplicateIds} ids twice, ${f.alerts.repeatedExceptions.length} exceptions alerted twice`,
    `ledger: ${f.ledger.postings} postings in ${f.ledger.journalEntries} journal entries, ${f.ledger.duplicateIdempotencyKeys} duplicate idempotency keys; ${f.ledger.observations} observations (${f.ledger.duplicateObservations} twice), ${f.ledger.intents} intents`,
    `ground-truth diff ${f.ledger.groundTruthDiff}${f.ledger.groundTruthDiffSample.length ? ` (${f.ledger.groundTruthDiffSample.join('; ')})` : ''}; status diff ${f.ledger.statusDiff}`,
    `verify: ${f.ledger.verifyFailures.length} failures in process; payrecon db verify exit ${f.ledger.verifyCli.exitCode} (${f.ledger.verifyCli.output})`,
    `wall time ${f.wallSeconds} s, ${f.eventsPerSecond} events/s booked, ${f.topicMessages} messages on the topics, ${f.deadLettered} dead-lettered`,
    `secrets scan: ${f.secrets.hits} hits in ${f.secrets.stats.logLines} log lines, ${f.secrets.stats.tables} tables, ${f.secrets.stats.topics} topics (${f.secrets.stats.messages} messages), ${f.secrets.stats.files} files; ${f.secrets.wireSignatures} wire signatures among the known secrets${f.secrets.sample.length ? ` (${f.secrets.sample.join('; ')})` : ''}`,
  ];
}

/** The issue's end conditions; each failed one as a line (empty: the soak passed). */
export function failedChecks(f: SoakFigures, plan: FaultPlan): string[] {
  const failed: string[] = [];
  const check = (ok: boolean, what: string) => {
    if (!ok) failed.push(what);
  };
  const happened = (what: string) => f.events.filter((e) => e.what === what).length;
  check(
    happened('reconciler SIGKILL') === plan.killReconcilerAtHours.length,
    'every planned SIGKILL happened',
  );
  check(
    happened('broker restart') === plan.restartBrokerAtHours.length,
    'every planned broker restart happened',
  );
  check(
    happened('PostgreSQL restart') === plan.restartPostgresAtHours.length,
    'every planned PostgreSQL restart happened',
  );
  check(
    f.ledger.groundTruthDiff === 0,
    `ledger equals ground truth (${f.ledger.groundTruthDiff} cells differ)`,
  );
  check(f.ledger.statusDiff === 0, `every entity's status in the ledger (${f.ledger.statusDiff} differ)`);
  check(f.ledger.verifyFailures.length === 0, `ledger verifies (${f.ledger.verifyFailures.join('; ')})`);
  check(f.ledger.verifyCli.exitCode === 0, `payrecon db verify exits 0 (${f.ledger.verifyCli.exitCode})`);
  check(f.ledger.duplicateIdempotencyKeys === 0, 'no duplicate idempotency keys');
  check(f.ledger.duplicateObservations === 0, 'no observation booked twice');
  check(
    f.droppedRecovery.unrecovered === 0,
    `every dropped webhook recovered (${f.droppedRecovery.unrecovered} not)`,
  );
  check(
    f.lateRejections.mismatched.length === 0 && f.lateRejections.duplicateAlerts === 0,
    `every late rejection alerted once (${f.lateRejections.mismatched.slice(0, 5).join(', ')})`,
  );
  check(
    f.lateCompletions.missing.length === 0,
    `every late payment raised LATE_COMPLETION (${f.lateCompletions.missing.slice(0, 5).join(', ')})`,
  );
  check(
    f.lateCompletions.bySource.never === undefined,
    `the ledger read every late completion (${f.lateCompletions.bySource.never ?? 0} never)`,
  );
  check(
    f.moves.rejectionCodeMismatched.length === 0,
    `every late-rejected cashout carries 826 in the ledger (${f.moves.rejectionCodeMismatched.slice(0, 5).join(', ')})`,
  );
  check(f.moves.bankCodeNotKept === 0, `every bank code stored as sent (${f.moves.bankCodeNotKept} not)`);
  check(
    f.alerts.duplicateIds === 0 && f.alerts.repeatedExceptions.length === 0,
    `every alert delivered once (${f.alerts.duplicateIds} ids twice; ${f.alerts.repeatedExceptions.slice(0, 5).join(', ')})`,
  );
  check(f.deadLettered === 0, `nothing dead-lettered (${f.deadLettered})`);
  const c = f.cash;
  check(
    c.settlements.atSandbox > 0 &&
      c.settlements.reported === c.settlements.atSandbox &&
      c.settlements.booked === c.settlements.reported,
    `every settlement reported and booked (${c.settlements.atSandbox} made, ${c.settlements.reported} reported, ${c.settlements.booked} booked)`,
  );
  check(
    c.fetch.ran > 0 && c.fetch.refused.length === 0,
    `the settlement fetch ran and refused nothing (${c.fetch.ran} runs; ${c.fetch.refused.slice(0, 3).join('; ')})`,
  );
  check(
    c.cellDiff.length === 0,
    `the cash leg equals the sandbox's records (${c.cellDiff.slice(0, 5).join('; ')})`,
  );
  check(
    c.exceptions.missing.length === 0 && c.exceptions.unexpected.length === 0,
    `the matching exceptions are the planted anomalies exactly (missing ${c.exceptions.missing.slice(0, 5).join(', ')}; unexpected ${c.exceptions.unexpected.slice(0, 5).join(', ')})`,
  );
  check(
    c.bankProof.length > 0 && c.bankProof.every((p) => p.explained),
    `every bank proof holds (${c.bankProof
      .filter((p) => !p.explained)
      .map((p) => p.bankAccount)
      .join(', ')})`,
  );
  check(
    c.balanceChecks.checked > 0 &&
      c.balanceChecks.differing.length === 0 &&
      c.balanceChecks.driftsRaised === 0,
    `the provider's balances checked agree and no drift was raised (${c.balanceChecks.checked} checked, ${c.balanceChecks.driftsRaised} raised; ${c.balanceChecks.differing.slice(0, 3).join('; ')})`,
  );
  check(c.doubled.length === 0, `nothing booked or matched twice (${c.doubled.slice(0, 5).join('; ')})`);
  check(
    f.secrets.hits === 0,
    `no secret in logs, tables, topics or workbooks (${f.secrets.sample.join('; ')})`,
  );
  return failed;
}

function describeCash(c: CashFigures): string[] {
  const s = c.settlements;
  return [
    `settlements: ${s.atSandbox} at the sandbox (${s.converted} converted into BRL; ${s.carriedOver} balances carried over), ${s.reported} reported, ${s.booked} booked`,
    `settlement fetch on the provider's clock: ${c.fetch.ticks} ticks, ${c.fetch.ran} runs (${c.fetch.seconds.total} s in all, longest ${c.fetch.seconds.max} s), ${c.fetch.failed} failed and retried next tick${c.fetch.failures.length ? ` (${c.fetch.failures.join('; ')})` : ''}, ${c.fetch.overlapped} skipped while the previous one ran; ${c.fetch.imports} files imported, ${c.fetch.newLines} new lines, ${c.fetch.refused.length} refused${c.fetch.refused.length ? ` (${c.fetch.refused.slice(0, 3).join('; ')})` : ''}`,
    `final fetch: ${c.finalFetch.files} files, ${c.finalFetch.newLines} new lines; ${c.statements} statements up to ${c.lastStatementDay}, ${c.bankLines} bank lines, ${c.matchedBankLines} matched; live matches by rule ${JSON.stringify(c.matchesByRule)}`,
    `planted anomalies ${JSON.stringify(c.anomalies)}; matching exceptions expected ${JSON.stringify(c.exceptions.expected)}, open ${JSON.stringify(c.exceptions.open)}, ${c.exceptions.missing.length} missing${c.exceptions.missing.length ? ` (${c.exceptions.missing.slice(0, 5).join(', ')})` : ''}, ${c.exceptions.unexpected.length} unexpected${c.exceptions.unexpected.length ? ` (${c.exceptions.unexpected.slice(0, 5).join(', ')})` : ''}`,
    `provider balances: ${c.balanceChecks.checked} checked at the end, ${c.balanceChecks.differing.length} differ${c.balanceChecks.differing.length ? ` (${c.balanceChecks.differing.slice(0, 3).join('; ')})` : ''}; ${c.balanceChecks.driftsRaised} PROVIDER_BALANCE_DRIFT raised in all`,
    `cash leg: ${c.cells} cells against the sandbox's records, ${c.cellDiff.length} differ${c.cellDiff.length ? ` (${c.cellDiff.slice(0, 5).join('; ')})` : ''}; bank proof ${c.bankProof
      .map(
        (p) =>
          `${p.bankAccount}: closing ${p.closing} = opening ${p.opening} + ledger ${p.ledger} + unmatched ${p.unmatched} ${p.explained ? 'holds' : 'DOES NOT HOLD'}`,
      )
      .join(
        '; ',
      )}; doubled ${c.doubled.length}${c.doubled.length ? ` (${c.doubled.slice(0, 5).join('; ')})` : ''}`,
  ];
}

function describeLatency(l: LatencyFigures): string {
  return `${l.count} (p50 ${l.wallSeconds.p50} s / ${l.providerMinutes.p50} provider min, max ${l.wallSeconds.max} s / ${l.providerMinutes.max} provider min)`;
}
