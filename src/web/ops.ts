/**
 * Operations routes: `/healthz` (the process answers), `/readyz` (every dependency answers: database,
 * Kafka, schema registry, each with its own time limit) and `/metrics` (Prometheus text format).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Metrics } from '../metrics.ts';

/** A named readiness probe; it throws (or rejects) when the dependency is not usable. */
export interface ReadinessCheck {
  name: string;
  check(): Promise<void>;
}

export interface OpsOptions {
  metrics: Metrics;
  checks: readonly ReadinessCheck[];
  /** Per-check time limit, ms (default 2 s). */
  timeoutMs?: number;
  /** `/metrics` answers only to `Authorization: Bearer <token>` (PAYRECON_METRICS_TOKEN). */
  metricsToken?: string | null;
  /** false: `/metrics` is served elsewhere (PAYRECON_METRICS_LISTEN), not by these routes. */
  serveMetrics?: boolean;
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** Hashing both sides first makes the comparison's time independent of the lengths too. */
export function bearerMatches(header: string | undefined, token: string): boolean {
  const match = /^Bearer (.+)$/.exec(header ?? '');
  return match !== null && timingSafeEqual(digest(match[1]!), digest(token));
}

function withTimeout(p: Promise<void>, ms: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    p.then(
      () => {
        clearTimeout(t);
        resolve();
      },
      (err: unknown) => {
        clearTimeout(t);
        reject(err);
      },
    );
  });
}

export async function opsRoutes(app: FastifyInstance, options: OpsOptions): Promise<void> {
  const timeoutMs = options.timeoutMs ?? 2_000;

  app.get('/healthz', async () => ({ status: 'ok' }));

  app.get('/readyz', async (_req, reply) => {
    const results = await Promise.all(
      options.checks.map(async (c) => {
        try {
          await withTimeout(c.check(), timeoutMs);
          return [c.name, 'ok'] as const;
        } catch (err) {
          return [c.name, (err as Error).message || 'failed'] as const;
        }
      }),
    );
    const ready = results.every(([, r]) => r === 'ok');
    return reply
      .code(ready ? 200 : 503)
      .send({ status: ready ? 'ready' : 'not ready', checks: Object.fromEntries(results) });
  });

  if (options.serveMetrics !== false) await metricsRoute(app, options);
}

export async function metricsRoute(
  app: FastifyInstance,
  options: Pick<OpsOptions, 'metrics' | 'metricsToken'>,
): Promise<void> {
  const token = options.metricsToken ?? null;
  app.get('/metrics', async (req, reply) => {
    if (token !== null && !bearerMatches(req.headers.authorization, token)) {
      return reply.code(401).header('www-authenticate', 'Bearer').send({ error: 'unauthorized' });
    }
    const text = await options.metrics.registry.metrics();
    return reply.header('content-type', options.metrics.registry.contentType).send(text);
  });
}

export interface OwnListener {
  /** `http://host:port` as listening (the port chosen when 0 was asked). */
  url: string;
  close(): Promise<void>;
}

/**
 * A listener of its own on `listen` (`host:port`, an IPv6 address in brackets) serving only what
 * `routes` registers: `/metrics` (PAYRECON_METRICS_LISTEN), the provider's webhooks
 * (PAYRECON_WEBHOOK_LISTEN).
 */
export async function startOwnListener(
  listen: string,
  routes: (app: FastifyInstance) => Promise<void>,
): Promise<OwnListener> {
  const at = listen.lastIndexOf(':');
  const host = listen.slice(0, at).replace(/^\[(.*)\]$/, '$1');
  const port = Number(listen.slice(at + 1));
  const app = Fastify({ logger: false });
  await app.register(routes);
  await app.listen({ host, port });
  const address = app.server.address();
  const actual = typeof address === 'object' && address ? address.port : port;
  return { url: `http://${host.includes(':') ? `[${host}]` : host}:${actual}`, close: () => app.close() };
}

/** `/metrics` alone on its own `host:port` (PAYRECON_METRICS_LISTEN), away from the provider's webhooks. */
export function startMetricsListener(
  listen: string,
  options: Pick<OpsOptions, 'metrics' | 'metricsToken'>,
): Promise<OwnListener> {
  return startOwnListener(listen, (app) => metricsRoute(app, options));
}

export interface OpsServerOptions extends OpsOptions {
  host: string;
  port: number;
}

export interface OpsServer {
  /** `http://host:port` as listening (the port chosen when 0 was asked). */
  url: string;
  close(): Promise<void>;
}

/**
 * `/healthz`, `/readyz` and `/metrics` on their own port, for a part that serves no web routes
 * (PAYRECON_METRICS_HOST and PAYRECON_METRICS_PORT).
 */
export async function startOpsServer(options: OpsServerOptions): Promise<OpsServer> {
  const app = Fastify({ logger: false });
  await app.register(opsRoutes, options);
  await app.listen({ host: options.host, port: options.port });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : options.port;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  return { url: `http://${host}:${port}`, close: () => app.close() };
}
