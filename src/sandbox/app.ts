/**
 * Builds the sandbox: its state (engine, faults, automatic mode, webhook sender) and its two fastify
 * apps (main API with pages and control API; card-data API), separate from `listen` so tests can
 * `inject` and `main.ts` can bind ports.
 */
import Fastify, { type FastifyInstance } from 'fastify';
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
}

export function createSandboxDeps(options: SandboxDepsOptions = {}): SandboxDeps {
  const seed = options.seed ?? 1;
  const root = new Rng(seed);
  const clock = options.clock ?? new RealClock();
  const defaultAccount: SandboxAccount = {
    ...DEFAULT_ACCOUNT,
    notificationUrl: options.defaultNotificationUrl ?? DEFAULT_ACCOUNT.notificationUrl,
  };
  const accounts = new AccountRegistry([defaultAccount, ...(options.accounts ?? [])]);
  const catalogue = options.catalogue ?? loadCatalogue();
  const engine = new SandboxEngine({ clock, rng: root.fork('engine'), accounts, catalogue });
  const faults = new Faults(root.fork('faults'), options.faults ?? {});
  const auto = new AutomaticMode(engine, root.fork('auto'), faults, options.auto ?? {});
  const webhooks = new WebhookSender({
    clock,
    rng: root.fork('webhooks'),
    faults,
    accountOf: (name) => accounts.named(name),
    notificationBaseUrl: options.notificationBaseUrl ?? null,
    ...(options.webhookTimeoutMs !== undefined ? { timeoutMs: options.webhookTimeoutMs } : {}),
  });
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
    urls: { api: 'http://127.0.0.1', cc: 'http://127.0.0.1' },
    xDateWindowMs: options.xDateWindowMs ?? 5 * 60_000,
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
  installCommon(api, deps.faults);
  installCommon(cc, deps.faults);
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
      traffic: () => deps.traffic,
    }),
  );
  void cc.register(async (scope) => registerCardApi(scope, apiDeps));
  return { api, cc };
}
