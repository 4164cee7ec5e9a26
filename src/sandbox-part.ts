/**
 * The sandbox as `payrecon up` runs it when no provider account is configured: the provider's
 * simulator in this process, its account as the pipeline's, notifications delivered to the pipeline's
 * own webhook routes, and traffic sent through payrecon's provider client, each creation recording its
 * intent. Loaded only by `up` (the sandbox's modules are imported when it starts).
 */
import { createHash } from 'node:crypto';
import type { ProviderAccount } from './config.ts';
import type { Intent } from './domain/observation.ts';
import type { Logger } from './logger.ts';
import type { Clock } from './sandbox/clock.ts';
import { hashPassword, type WebUser } from './web/auth.ts';

/** The sandbox as `payrecon up` runs it when no provider account is configured. */
export const SANDBOX_ACCOUNT_NAME = 'sandbox';
/**
 * Web sign-ins when payrecon runs against the sandbox and no users are configured (documented): an
 * operator who works the exception queue, and two controllers, so a month close can be prepared by one
 * and approved by the other.
 */
export const SANDBOX_WEB_USERS = [
  { username: 'finance', password: 'sandbox', role: 'operator' },
  { username: 'ana', password: 'sandbox', role: 'controller' },
  { username: 'bob', password: 'sandbox', role: 'controller' },
] as const;

/**
 * The sandbox's users as the page and the commands that act as a user check them: SANDBOX_WEB_USERS with
 * each password as a scrypt hash. Salted from `secret` when given (the page's session secret: the same
 * hashes at every start, so the users' sessions, which keep a fingerprint of the hash, survive a
 * restart), else at random.
 */
export function sandboxWebUsers(secret?: string): Promise<WebUser[]> {
  return Promise.all(
    SANDBOX_WEB_USERS.map(async (u) => ({
      username: u.username,
      passwordHash: await hashPassword(
        u.password,
        secret === undefined
          ? undefined
          : createHash('sha256').update(`sandbox-user:${u.username}:${secret}`).digest().subarray(0, 16),
      ),
      role: u.role,
    })),
  );
}

const DAY_MS = 86_400_000;
/** Real time from a first start under `up` to the sandbox's first settlement. */
export const FIRST_SETTLEMENT_AFTER_MS = 2 * 60_000;

/**
 * Sandbox time at a first start under `up`: the default account settles at midnight UTC, so the
 * clock starts that long (in sandbox time: real time times `speed`) before the next midnight, and the
 * first settlement comes about two real minutes after the start instead of up to a sandbox day (24 real
 * minutes at speed 60) later. Never before now: sandbox time does not go back.
 */
export function upSandboxStart(nowMs: number, speed: number): number {
  const midnight = Math.ceil(nowMs / DAY_MS) * DAY_MS;
  return Math.max(nowMs, midnight - FIRST_SETTLEMENT_AFTER_MS * speed);
}

/** The sandbox as `payrecon up` runs it. */
export interface SandboxRun {
  accounts: ProviderAccount[];
  urls: Record<string, string>;
  /** Delivers notifications to the pipeline listening at `baseUrl` (known once it listens). */
  deliverTo(baseUrl: string): Promise<void>;
  /** Starts traffic once the pipeline is ready; intents go through `recordIntent`. */
  startTraffic(recordIntent: (intent: Intent) => Promise<void>): Promise<void>;
  stop(): Promise<void>;
}

export interface SandboxForUpOptions {
  webBaseUrl: string;
  logger: Logger;
  /** Traffic client retries (default 1: traffic must not retry into the sandbox's own faults forever). */
  clientRetries?: number;
  /** Window in which a creation with an unknown outcome is sent again (default: recordingClient's). */
  settleWindowMs?: number;
  /** Sandbox seconds per real second (default 60: a minute of provider time per second). */
  speed?: number;
  /** Creations per second (default 2). */
  trafficRate?: number;
  seed?: number;
  /** Fault settings of the sandbox (see src/sandbox/faults.ts). */
  faults?: unknown;
  /** Automatic-mode settings (see src/sandbox/automatic.ts); enabled unless said otherwise. */
  auto?: Record<string, unknown>;
  /** The sandbox's clock (tests pass a manual one); default: real time times `speed`. */
  clock?: Clock;
  /** Keep the sandbox's state here across restarts (`payrecon up`: `<PAYRECON_DATA_DIR>/sandbox`). */
  dataDir?: string;
  /** Sandbox time at a first start (default now; `payrecon up` gives `upSandboxStart`). */
  startMs?: number;
}

/**
 * The sandbox as `payrecon up` runs it: the default account (`sandbox`), notifications delivered to the
 * pipeline's own webhook routes, the automatic mode on a fast clock, and traffic sent through the
 * project's provider client wrapped so that every creation records its intent.
 */
export async function startSandboxForUp(options: SandboxForUpOptions): Promise<SandboxRun> {
  const { startSandbox } = await import('./sandbox/main.ts');
  const { providerAccountFor } = await import('./sandbox/traffic-client.ts');
  const { DEFAULT_ACCOUNT } = await import('./sandbox/accounts.ts');
  const { createProviderClient } = await import('./provider/client.ts');
  const { recordingClient } = await import('./producers/intent/recording-client.ts');
  const sandbox = await startSandbox({
    host: '127.0.0.1',
    port: 0,
    ccPort: 0,
    seed: options.seed ?? 1,
    speed: options.speed ?? 60,
    ...(options.startMs === undefined ? {} : { startMs: options.startMs }),
    auto: { enabled: true, ...(options.auto ?? {}) },
    notificationBaseUrl: options.webBaseUrl,
    defaultNotificationUrl: `${options.webBaseUrl}/webhooks/${DEFAULT_ACCOUNT.name}`,
    ...(options.faults === undefined ? {} : { faults: options.faults }),
    ...(options.clock === undefined ? {} : { clock: options.clock }),
    // Traffic starts below, once its client records intents: a stored "running" must not start it first.
    ...(options.dataDir === undefined ? {} : { dataDir: options.dataDir, restoreTraffic: false }),
  });
  const restored = sandbox.control.restored;
  if (restored) {
    options.logger
      .child({ module: 'sandbox' })
      .info(
        { dataDir: options.dataDir, ...restored },
        `sandbox state restored: ${restored.deposits} deposits, ${restored.cashouts} cashouts, ${restored.refunds} refunds`,
      );
  }
  const account = {
    ...providerAccountFor(DEFAULT_ACCOUNT, { url: sandbox.url, ccUrl: sandbox.ccUrl }),
    // The sandbox signs its notifications like a request; check them as production would.
    webhookSignatureMode: 'enforce' as const,
  };
  // Aborted as the sandbox stops: traffic in flight then fails quietly instead of retrying into it.
  const stopping = new AbortController();
  const control = `${sandbox.url}/_sandbox`;
  const put = async (path: string, body: unknown, method = 'PUT') => {
    const res = await fetch(`${control}${path}`, {
      method,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`sandbox: ${method} ${path}: HTTP ${res.status} ${await res.text()}`);
  };
  return {
    accounts: [account],
    urls: { api: sandbox.url, 'card api': sandbox.ccUrl, control: `${control}/` },
    // Notification URLs keep their path (/webhooks/<account>/...): only the base moves.
    deliverTo: (baseUrl) => put('/webhooks/base-url', { url: baseUrl }),
    async startTraffic(recordIntent) {
      // Traffic goes through payrecon's own provider client, wrapped to record each creation's intent.
      const client = createProviderClient(account, {
        retries: options.clientRetries ?? 1,
        logger: options.logger,
        signal: stopping.signal,
      });
      sandbox.control.traffic.useClient(
        recordingClient(client, recordIntent, {
          account: account.name,
          logger: options.logger.child({ module: 'merchant' }),
          ...(options.settleWindowMs === undefined ? {} : { settle: { windowMs: options.settleWindowMs } }),
        }),
      );
      const rate = options.trafficRate ?? 2;
      if (rate > 0) await put('/traffic', { rate }, 'POST');
    },
    stop: () => {
      stopping.abort();
      return sandbox.close();
    },
  };
}
