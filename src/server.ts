/**
 * The one HTTP server: the finance page and the JSON API beside it, the webhook and intent routes, and
 * health and metrics. `payrecon up` mounts everything on it; `ingest` the webhooks and intents; `web`
 * the page and the API. PAYRECON_WEBHOOK_LISTEN and PAYRECON_METRICS_LISTEN move the webhook routes
 * and `/metrics` to listeners of their own, closed with the server.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { API_PREFIX, apiRoutes } from './api/app.ts';
import { databaseTokenSource } from './api/token-source.ts';
import type { ProviderAccount } from './config.ts';
import { TokenVerifier } from './domain/api-tokens.ts';
import type { Publisher } from './events/kafka.ts';
import type { DatabaseInfrastructure } from './infrastructure.ts';
import type { Metrics } from './metrics.ts';
import { intentsPlugin } from './producers/intent/http.ts';
import { webhookIngressPlugin } from './producers/webhook-ingress.ts';
import { sandboxWebUsers } from './sandbox-part.ts';
import type { Services } from './services.ts';
import { webRoutes } from './web/app.ts';
import { opsRoutes, startMetricsListener, startOwnListener } from './web/ops.ts';
import { resolveSessionSecret } from './web/session-secret.ts';

/** What the server runs on: the database, and the publisher when it takes webhooks or intents. */
export type ServerInfrastructure = Pick<DatabaseInfrastructure, 'config' | 'logger' | 'dataDir' | 'db'> & {
  publisher?: Publisher;
};

export interface WebServerParts {
  accounts: readonly ProviderAccount[];
  metrics: Metrics;
  /** Mount the finance page (needs users). */
  page: boolean;
  /** Mount the webhook routes. */
  webhooks: boolean;
  /** Mount POST /intents. */
  intents: boolean;
  defaultAccount?: string | null;
  sandboxUsers?: boolean;
  /** The page's clock and session lifetime (default: the wall clock and 8 hours). */
  pageOptions?: { now?: () => Date; sessionTtlMs?: number };
}

/** The listeners of their own a server started, by what they serve. */
const OWN_LISTENERS = new WeakMap<FastifyInstance, { webhooks?: string; metrics?: string }>();

function remember(app: FastifyInstance, serves: 'webhooks' | 'metrics', url: string): void {
  OWN_LISTENERS.set(app, { ...OWN_LISTENERS.get(app), [serves]: url });
}

/**
 * The base URL of the provider's webhook routes of a server `buildServer` built: its own listener
 * (PAYRECON_WEBHOOK_LISTEN), else `url`, the server's own.
 */
export function webhooksBaseUrl(app: FastifyInstance, url: string): string {
  return OWN_LISTENERS.get(app)?.webhooks ?? url;
}

/** The base URL of `/metrics` of a server `buildServer` built: PAYRECON_METRICS_LISTEN's, else `url`. */
export function metricsBaseUrl(app: FastifyInstance, url: string): string {
  return OWN_LISTENERS.get(app)?.metrics ?? url;
}

/** The one HTTP server: page, webhooks, health and metrics. */
export async function buildServer(
  infra: ServerInfrastructure,
  services: Services,
  parts: WebServerParts,
): Promise<FastifyInstance> {
  const { config, db, logger } = infra;
  const app = Fastify({ logger: false, trustProxy: false });
  const metricsToken = config.metrics.token;
  await app.register(opsRoutes, {
    metrics: parts.metrics,
    checks: services.readiness,
    metricsToken,
    serveMetrics: config.metrics.listen === null,
  });
  if (config.metrics.listen !== null) {
    const listener = await startMetricsListener(config.metrics.listen, {
      metrics: parts.metrics,
      metricsToken,
    });
    logger.info({ url: listener.url }, 'metrics listener started');
    remember(app, 'metrics', listener.url);
    app.addHook('onClose', () => listener.close());
  }
  const { publisher } = infra;
  if ((parts.webhooks || parts.intents) && !publisher) {
    throw new Error('webhooks and intents: the server needs a publisher (Kafka)');
  }
  if (parts.webhooks && publisher) {
    const webhooks = webhookIngressPlugin({
      accounts: parts.accounts,
      publisher,
      defaultAccount: parts.defaultAccount ?? null,
      limits: config.webhooks,
      logger,
      onRejected: (reason) => parts.metrics.webhookRejections.inc({ reason }),
      onAccepted: (kind) => parts.metrics.webhookRequests.inc({ kind, outcome: 'accepted' }),
    });
    if (config.webhooks.listen === null) {
      await app.register(webhooks);
    } else {
      // The provider reaches this listener alone: no page, no API, no health, no metrics there.
      const listener = await startOwnListener(config.webhooks.listen, async (own) => {
        await own.register(webhooks);
      });
      logger.info({ url: listener.url }, 'webhook listener started');
      remember(app, 'webhooks', listener.url);
      app.addHook('onClose', () => listener.close());
    }
  }
  if (parts.intents && publisher) {
    await app.register(
      intentsPlugin({
        publisher,
        tokens: new TokenVerifier(config.web.apiTokens, Date.now, databaseTokenSource(db, logger)),
        // Outside the sandbox POST /intents always needs a token with the scope intents:write.
        open: parts.sandboxUsers === true && config.web.apiTokens.length === 0,
        accounts: parts.accounts.map((a) => a.name),
        logger,
      }),
    );
  }
  if (parts.page) {
    const { reports } = services;
    // The JSON API beside the page: it has its own bearer tokens and refuses everything without one.
    await app.register(apiRoutes, {
      prefix: API_PREFIX,
      db,
      reports,
      tokens: config.web.apiTokens,
      exceptionSla: config.exceptions.sla,
      imports: { run: services.imports.run, maxBytes: services.imports.maxBytes },
      bankAccounts: services.imports.bankAccounts,
      timeZone: config.jobs.timeZone,
      logger: logger.child({ module: 'api' }),
    });
    let users = config.web.users.map((u) => ({
      username: u.username,
      passwordHash: u.passwordHash,
      ...(u.role ? { role: u.role } : {}),
    }));
    const secret = () => resolveSessionSecret(config.web.sessionSecret, infra.dataDir);
    if (users.length === 0 && parts.sandboxUsers) users = await sandboxWebUsers(await secret());
    if (users.length === 0) {
      logger.warn('PAYRECON_WEB_USERS is empty: the finance page is not served');
    } else {
      await app.register(webRoutes, {
        prefix: '/',
        users,
        sessionSecret: await secret(),
        timeZone: config.jobs.timeZone,
        // Behind an https public URL the browser must never send the session cookie over plain http.
        secureCookies: config.web.publicUrl !== null && new URL(config.web.publicUrl).protocol === 'https:',
        signInLimits: config.web.signIn,
        services: services.web,
        logger,
        ...parts.pageOptions,
      });
    }
  }
  return app;
}
