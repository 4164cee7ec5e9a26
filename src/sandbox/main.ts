/**
 * Starting the sandbox: in-process (`startSandbox`, for tests and the pipeline) and from the CLI
 * (`payrecon sandbox`, `runSandboxCli`).
 */
import type { AddressInfo } from 'node:net';
import { logger } from '../logger.ts';
import { loadAccountsFile, type SandboxAccount } from './accounts.ts';
import { buildSandboxApps, createSandboxDeps, type SandboxDeps, type SandboxDepsOptions } from './app.ts';
import { type Clock, ManualClock, RealClock } from './clock.ts';
import {
  type AttachedStore,
  attachSandbox,
  type RestoreSummary,
  restoreSandbox,
  storedClock,
  storedPending,
} from './durable.ts';
import { balancesJson, exportEntities } from './ground-truth.ts';
import { Journal, JournalLockedError, type JournalOptions } from './journal.ts';
import { TrafficGenerator } from './traffic.ts';

export interface StartSandboxOptions extends SandboxDepsOptions {
  host?: string;
  /** Main API port (0: a free port). */
  port?: number;
  /** Card-data API port (0: a free port). */
  ccPort?: number;
  /** Clock speed when no clock is given: sandbox seconds per real second. */
  speed?: number;
  /** Sandbox time at a first start when no clock is given (default: now); a restart resumes its own. */
  startMs?: number;
  /** Start generating traffic at this many operations per second. */
  trafficRate?: number;
  accountsFile?: string;
  /**
   * Keep the state in this directory across restarts (journal + snapshots, see durable.ts); without
   * it the sandbox lives in memory. Settings found there replace the start-up ones.
   */
  dataDir?: string;
  journal?: JournalOptions;
  /** False: a stored running traffic generator is not started again (the caller starts it). */
  restoreTraffic?: boolean;
}

export interface SandboxControl {
  deps: SandboxDeps;
  clock: Clock;
  /** Ground truth balances (amounts as decimal text). */
  balances(): Record<string, string>[];
  /** Every entity with its history. */
  exportEntities(account?: string): ReturnType<typeof exportEntities>;
  traffic: TrafficGenerator;
  /** What a start on a data directory found (null: in memory, or a fresh directory). */
  restored: (RestoreSummary & { replayed: number; tornBytes: number }) | null;
  journal: Journal | null;
}

export interface RunningSandbox {
  url: string;
  ccUrl: string;
  control: SandboxControl;
  close(): Promise<void>;
}

function baseUrl(address: AddressInfo | string | null, host: string): string {
  if (address === null || typeof address === 'string') throw new Error('sandbox: no TCP address');
  const h = address.family === 'IPv6' ? `[${address.address}]` : host;
  return `http://${h}:${address.port}`;
}

export async function startSandbox(options: StartSandboxOptions = {}): Promise<RunningSandbox> {
  const host = options.host ?? '127.0.0.1';
  const accounts: SandboxAccount[] = [...(options.accounts ?? [])];
  if (options.accountsFile) accounts.push(...loadAccountsFile(options.accountsFile));
  const opened = options.dataDir ? await Journal.open(options.dataDir, options.journal) : null;
  let store: AttachedStore | null = null;
  try {
    const values = opened?.recovered.values ?? new Map<string, unknown>();
    const savedNow = storedClock(values);
    // Sandbox time never goes back: it resumes where it stopped, or at real time when that is later.
    let clock = options.clock;
    if (!clock) {
      clock = new RealClock({
        speed: options.speed ?? 1,
        ...(savedNow !== undefined
          ? { startMs: Math.max(savedNow, Date.now()) }
          : options.startMs !== undefined
            ? { startMs: options.startMs }
            : {}),
      });
    } else if (savedNow !== undefined && clock instanceof ManualClock && savedNow > clock.now()) {
      await clock.set(savedNow);
    }
    const deps = createSandboxDeps({ ...options, accounts, clock, log: logger.child({ module: 'sandbox' }) });
    // The traffic generator reads its URLs when it starts (after listen).
    const urls = { url: '', ccUrl: '' };
    const traffic = new TrafficGenerator(deps, urls);
    deps.traffic = traffic;
    const restored = opened && !opened.recovered.fresh ? restoreSandbox(deps, values) : null;
    const storedTraffic = values.get('traffic') as Parameters<TrafficGenerator['restore']>[0] | undefined;
    if (storedTraffic) traffic.restore({ ...storedTraffic, running: false });
    if (restored) for (const [id, creation] of storedPending(values)) traffic.restorePending(id, creation);
    // Attached before anything can move (timers of restored records may be due now), so every change is
    // journaled and every notification waits for the disk.
    if (opened) store = attachSandbox(deps, opened.journal, traffic, restored?.boots ?? 1);
    // Planned after the restore and the journal (a missed cut-off runs on the clock's next turn).
    deps.settlements.start();
    const apps = buildSandboxApps(deps);
    try {
      await apps.api.listen({ host, port: options.port ?? 0 });
    } catch (err) {
      store?.detach();
      throw err;
    }
    try {
      await apps.cc.listen({ host, port: options.ccPort ?? 0 });
    } catch (err) {
      store?.detach();
      await apps.api.close();
      throw err;
    }
    const url = baseUrl(apps.api.server.address(), host);
    const ccUrl = baseUrl(apps.cc.server.address(), host);
    deps.urls.api = url;
    deps.urls.cc = ccUrl;
    urls.url = url;
    urls.ccUrl = ccUrl;
    if (storedTraffic) {
      if (storedTraffic.running && storedTraffic.rate && options.restoreTraffic !== false) {
        traffic.start(storedTraffic.rate);
      }
    } else if (options.trafficRate && options.trafficRate > 0) traffic.start(options.trafficRate);
    return running(
      apps,
      deps,
      clock,
      traffic,
      url,
      ccUrl,
      store,
      restored && opened
        ? { ...restored, replayed: opened.recovered.replayed, tornBytes: opened.recovered.tornBytes }
        : null,
    );
  } catch (err) {
    await opened?.journal.close({ snapshot: false });
    throw err;
  }
}

function running(
  apps: ReturnType<typeof buildSandboxApps>,
  deps: SandboxDeps,
  clock: Clock,
  traffic: TrafficGenerator,
  url: string,
  ccUrl: string,
  store: AttachedStore | null,
  restored: SandboxControl['restored'],
): RunningSandbox {
  let closed = false;
  return {
    url,
    ccUrl,
    control: {
      deps,
      clock,
      balances: () => balancesJson(deps.engine),
      exportEntities: (account) => exportEntities(deps.engine, account),
      traffic,
      restored,
      journal: store?.journal ?? null,
    },
    async close() {
      if (closed) return;
      closed = true;
      store?.detach();
      traffic.stop();
      clock.stop();
      await Promise.all([apps.api.close(), apps.cc.close()]);
      await store?.journal.close();
    },
  };
}

export interface SandboxCliOptions {
  host: string;
  port: string;
  ccPort: string;
  seed?: string;
  accounts?: string;
  traffic?: string;
  speed?: string;
  auto?: boolean;
  notificationBaseUrl?: string;
  notificationUrl?: string;
  faults?: string;
  dataDir?: string;
}

function intOption(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new Error(`--${name}: must be a non-negative integer`);
  return n;
}

export async function runSandboxCli(opts: SandboxCliOptions): Promise<void> {
  const log = logger.child({ module: 'sandbox' });
  const { readFileSync } = await import('node:fs');
  const speed = opts.speed === undefined ? 1 : Number(opts.speed);
  if (!(speed > 0)) throw new Error('--speed: must be a positive number');
  const traffic = opts.traffic === undefined ? 0 : Number(opts.traffic);
  if (!(traffic >= 0)) throw new Error('--traffic: must be a non-negative number');
  const faults = opts.faults ? JSON.parse(readFileSync(opts.faults, 'utf8')) : undefined;
  let sandbox: RunningSandbox;
  try {
    sandbox = await startSandbox({
      host: opts.host,
      port: intOption('port', opts.port, 8700),
      ccPort: intOption('cc-port', opts.ccPort, 8701),
      seed: intOption('seed', opts.seed, 1),
      speed,
      // Traffic without moves would only pile up PENDING entities: --traffic turns the automatic mode on.
      auto: { enabled: Boolean(opts.auto) || traffic > 0 },
      trafficRate: traffic,
      notificationBaseUrl: opts.notificationBaseUrl ?? null,
      defaultNotificationUrl: opts.notificationUrl ?? null,
      ...(opts.accounts ? { accountsFile: opts.accounts } : {}),
      ...(faults !== undefined ? { faults } : {}),
      ...(opts.dataDir ? { dataDir: opts.dataDir } : {}),
    });
  } catch (err) {
    if (err instanceof JournalLockedError) {
      process.stderr.write(`payrecon: sandbox: --data-dir: ${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  const { control } = sandbox;
  if (control.restored) {
    // The stored settings won; flags given on this command line win over them.
    const { deps } = control;
    if (faults !== undefined) deps.faults.set(faults);
    if (opts.auto || traffic > 0) deps.auto.set({ ...deps.auto.settings, enabled: true });
    if (opts.traffic !== undefined) {
      if (traffic > 0) control.traffic.start(traffic);
      else control.traffic.stop();
    }
    if (opts.notificationBaseUrl) deps.webhooks.notificationBaseUrl = opts.notificationBaseUrl;
    const r = control.restored;
    log.info(
      {
        dataDir: opts.dataDir,
        deposits: r.deposits,
        cashouts: r.cashouts,
        refunds: r.refunds,
        deliveries: r.deliveries,
        replayed: r.replayed,
        tornBytes: r.tornBytes,
        starts: r.boots,
      },
      'sandbox state restored',
    );
  }
  // Printed plainly so scripts can read the ports chosen with --port 0.
  process.stdout.write(`sandbox api ${sandbox.url}\nsandbox card api ${sandbox.ccUrl}\n`);
  log.info({ url: sandbox.url, ccUrl: sandbox.ccUrl, speed, traffic }, 'sandbox listening');
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  await sandbox.close();
}
