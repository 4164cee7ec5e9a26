/**
 * Operations routes: `/healthz` (the process answers), `/readyz` (every dependency answers: database,
 * Kafka, schema registry, each with its own time limit) and `/metrics` (Prometheus text format).
 */
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

  app.get('/metrics', async (_req, reply) => {
    const text = await options.metrics.registry.metrics();
    return reply.header('content-type', options.metrics.registry.contentType).send(text);
  });
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
