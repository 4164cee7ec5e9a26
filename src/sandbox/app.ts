/**
 * Builds the sandbox: its state (engine, faults, automatic mode, webhook sender) and its two fastify
 * apps (main API with pages and control API; card-data API), separate from `listen` so tests can
 * `inject` and `main.ts` can bind ports.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import type { Logger } from '../logger.ts';
import { AccountRegistry, DEFAULT_ACCOUNT, type SandboxAccount } from './accounts.ts';
import { type ApiDeps, installCommon, registerCardApi, registerMainApi } from './api.ts';
import { AutomaticMode } from './automatic.ts';
import { type CatalogueIndex, loadCatalogue } from './catalogue.ts';
import { type Clock, RealClock } from './clock.ts';
import { registerControl, type TrafficControl } from './control.ts';
import { SandboxEngine } from './engine.ts';
import { Faults } from './faults.ts';
import { registerPages } from './pages.ts';
import { IdempotencyStore } from './protocol.ts';
import { Rng } from './rng.ts';
import type { SettlementConfig } from './settlement-config.ts';
import { Settlements } from './settlements.ts';
import { WebhookSender } from './webhooks.ts';

export interface SandboxDepsOptions {
  /** Accounts besides the default one. */
  accounts?: SandboxAccount[];
  /** Default notification URL of the default account (http allowed). */
  defaultNotificationUrl?: string | null;
  seed?: number;
  clock?: Clock;
  catalogue?: CatalogueIndex;
  /** Fault settings (see faults.ts). */
  faults?: unknown;
  /** Automatic mode settings (see automatic.ts). */
  auto?: unknown;
  /** Maps every notification URL onto this base URL (local runs). */
  notificationBaseUrl?: string | null;
  /** Allowed X-Date distance from real time, ms (default 5 minutes). */
  xDateWindowMs?: number;
  /** Real ms a webhook receiver has to answer. */
  webhookTimeoutMs?: number;
  /** Where requests that failed inside the sandbox are logged (none: not logged). */
  log?: Pick<Logger, 'error'>;
  /** Time zone and settlement settings of the default account. */
  defaultAccountSettlement?: { timeZone?: string; settlement?: Partial<SettlementConfig> };
  /** Bank-side settings of the settlements (see settlement-config.ts). */
  bank?: unknown;
}

export interface SandboxDeps {
  engine: SandboxEngine;
  accounts: AccountRegistry;
  faults: Faults;
  auto: AutomaticMode;
  webhooks: WebhookSender;
  clock: Clock;
  idempotency: IdempotencyStore;
  /** Base URLs once known (set by `startSandbox` after listen). */
  urls: { api: string; cc: string };
  xDateWindowMs: number;
  traffic?: TrafficControl;
  /** Payouts, bank entries and bank anomalies (started by `startSandbox`). */
  settlements: Settlements;
  /** Every random stream by name (the durable store keeps their positions). */
  rngs: Record<string, Rng>;
  /** The durable store when running with a data directory: answers wait for `sync`. */
  durable?: { sync(): Promise<void>; readonly clean: boolean };
  log?: Pick<Logger, 'error'>;
}

export function createSandboxDeps(options: SandboxDepsOptions = {}): SandboxDeps {
  const seed = options.seed ?? 1;
  const root = new Rng(seed);
  const clock = options.clock ?? new RealClock();
  const defaultAccount: SandboxAccount = {
    ...DEFAULT_ACCOUNT,
    notificationUrl: options.defaultNotificationUrl ?? DEFAULT_ACCOUNT.notificationUrl,
    ...options.defaultAccountSettlement,
  };
  const accounts = new AccountRegistry([defaultAccount, ...(options.accounts ?? [])]);
  const catalogue = options.catalogue ?? loadCatalogue();
  const rngs = {
    engine: root.fork('engine'),
    faults: root.fork('faults'),
    auto: root.fork('auto'),
    webhooks: root.fork('webhooks'),
    settlements: root.fork('settlements'),
  };
  const engine = new SandboxEngine({ clock, rng: rngs.engine, accounts, catalogue });
  const faults = new Faults(rngs.faults, options.faults ?? {});
  const auto = new AutomaticMode(engine, rngs.auto, faults, options.auto ?? {});
  const webhooks = new WebhookSender({
    clock,
    rng: rngs.webhooks,
    faults,
    accountOf: (name) => accounts.named(name),
    notificationBaseUrl: options.notificationBaseUrl ?? null,
    ...(options.webhookTimeoutMs !== undefined ? { timeoutMs: options.webhookTimeoutMs } : {}),
  });
  const settlements = new Settlements({ engine, clock, rng: rngs.settlements, bank: options.bank });
  engine.onChange((change) => {
    if (change.notify) webhooks.notify(change.kind, change.record);
  });
  return {
    engine,
    accounts,
    faults,
    auto,
    webhooks,
    clock,
    idempotency: new IdempotencyStore(),
    settlements,
    urls: { api: 'http://127.0.0.1', cc: 'http://127.0.0.1' },
    xDateWindowMs: options.xDateWindowMs ?? 5 * 60_000,
    rngs,
    ...(options.log ? { log: options.log } : {}),
  };
}

export interface SandboxApps {
  api: FastifyInstance;
  cc: FastifyInstance;
}

export function buildSandboxApps(deps: SandboxDeps): SandboxApps {
  const common = { logger: false, forceCloseConnections: true, bodyLimit: 1024 * 1024 } as const;
  const api = Fastify(common);
  const cc = Fastify(common);
  const apiDeps: ApiDeps = {
    engine: deps.engine,
    accounts: deps.accounts,
    faults: deps.faults,
    idempotency: deps.idempotency,
    auth: { xDateWindowMs: deps.xDateWindowMs, now: () => Date.now() },
    deposits: { engine: deps.engine, pagesUrl: () => deps.urls.api },
  };
  installCommon(api, deps.faults, deps.log);
  installCommon(cc, deps.faults, deps.log);
  // With a data directory nothing is answered before what it shows is on disk (group commit: one
  // fsync serves every answer waiting at the time).
  for (const app of [api, cc]) {
    app.addHook('onSend', async (_req, _reply, payload) => {
      const durable = deps.durable;
      if (durable && !durable.clean) await durable.sync();
      return payload;
    });
  }
  // Each area is its own encapsulated plugin (the control API has its own error handler).
  void api.register(async (scope) => registerMainApi(scope, apiDeps));
  void api.register(async (scope) => registerPages(scope, deps.engine));
  void api.register(async (scope) =>
    registerControl(scope, {
      engine: deps.engine,
      accounts: deps.accounts,
      faults: deps.faults,
      auto: deps.auto,
      webhooks: deps.webhooks,
      clock: deps.clock,
      settlements: deps.settlements,
      traffic: () => deps.traffic,
    }),
  );
  void cc.register(async (scope) => registerCardApi(scope, apiDeps));
  return { api, cc };
}
