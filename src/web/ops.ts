/**
 * Operations routes: `/healthz` (the process answers), `/readyz` (every dependency answers: database,
 * Kafka, schema registry, each with its own time limit) and `/metrics` (Prometheus text format).
 */
import type { FastifyInstance } from 'fastify';
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
