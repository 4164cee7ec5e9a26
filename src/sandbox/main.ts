/**
 * Starting the sandbox: in-process (`startSandbox`, for tests and the pipeline) and from the CLI
 * (`payrecon sandbox`, `runSandboxCli`).
 */
import type { AddressInfo } from 'node:net';
import { logger } from '../logger.ts';
import { loadAccountsFile, type SandboxAccount } from './accounts.ts';
import { buildSandboxApps, createSandboxDeps, type SandboxDeps, type SandboxDepsOptions } from './app.ts';
import { type Clock, RealClock } from './clock.ts';
import { balancesJson, exportEntities } from './ground-truth.ts';
import { TrafficGenerator } from './traffic.ts';

export interface StartSandboxOptions extends SandboxDepsOptions {
  host?: string;
  /** Main API port (0: a free port). */
  port?: number;
  /** Card-data API port (0: a free port). */
  ccPort?: number;
  /** Clock speed when no clock is given: sandbox seconds per real second. */
  speed?: number;
  /** Start generating traffic at this many operations per second. */
  trafficRate?: number;
  accountsFile?: string;
}

export interface SandboxControl {
  deps: SandboxDeps;
  clock: Clock;
  /** Ground truth balances (amounts as decimal text). */
  balances(): Record<string, string>[];
  /** Every entity with its history. */
  exportEntities(account?: string): ReturnType<typeof exportEntities>;
  traffic: TrafficGenerator;
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
  const clock = options.clock ?? new RealClock({ speed: options.speed ?? 1 });
  const deps = createSandboxDeps({ ...options, accounts, clock });
  const apps = buildSandboxApps(deps);
  await apps.api.listen({ host, port: options.port ?? 0 });
  try {
    await apps.cc.listen({ host, port: options.ccPort ?? 0 });
  } catch (err) {
    await apps.api.close();
    throw err;
  }
  const url = baseUrl(apps.api.server.address(), host);
  const ccUrl = baseUrl(apps.cc.server.address(), host);
  deps.urls.api = url;
  deps.urls.cc = ccUrl;
  const traffic = new TrafficGenerator(deps, { url, ccUrl });
  deps.traffic = traffic;
  if (options.trafficRate && options.trafficRate > 0) traffic.start(options.trafficRate);
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
    },
    async close() {
      if (closed) return;
      closed = true;
      traffic.stop();
      clock.stop();
      await Promise.all([apps.api.close(), apps.cc.close()]);
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
  const sandbox = await startSandbox({
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
    ...(opts.faults ? { faults: JSON.parse(readFileSync(opts.faults, 'utf8')) } : {}),
  });
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
