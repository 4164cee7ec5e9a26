/**
 * A provider client whose owner stops (its `signal` aborted) does not retry: a call failing after the
 * abort fails at once without a "retrying provider call" line, and a back-off under way ends.
 */
import { Writable } from 'node:stream';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.ts';
import type { ProviderConnection } from '../../src/provider/client.ts';
import { createProviderClient } from '../../src/provider/client.ts';
import { ProviderError } from '../../src/provider/errors.ts';

let app: FastifyInstance;
let account: ProviderConnection;
let requests = 0;
/** Resolves the request being held (answering 503), or null: answer 503 at once. */
let hold: ((release: () => void) => void) | null = null;

beforeAll(async () => {
  app = Fastify();
  app.get('/v3/deposits/:id', async (_request, reply) => {
    requests++;
    if (hold) await new Promise<void>((release) => hold?.(release));
    return reply.code(503).send({ code: 503, description: 'unavailable' });
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as { port: number };
  account = {
    name: 'test',
    baseUrl: `http://127.0.0.1:${port}`,
    cardBaseUrl: `http://127.0.0.1:${port}`,
    depositLogin: 'login',
    depositSecret: 'secret',
    cashoutLogin: 'login',
    cashoutPass: 'pass',
    cashoutSecret: 'secret',
    readOnlyKey: 'key',
  };
});

afterAll(async () => {
  await app?.close();
});

function clientWith(signal: AbortSignal, backoffBaseMs: number) {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(String(chunk));
      done();
    },
  });
  const client = createProviderClient(account, {
    retries: 3,
    backoffBaseMs,
    backoffMaxMs: backoffBaseMs,
    timeoutMs: 5_000,
    signal,
    logger: createLogger({ level: 'info' }, stream),
  });
  return { client, lines };
}

describe('a provider client told to stop', () => {
  it('does not retry a call that fails after the abort, and logs no retry', async () => {
    requests = 0;
    const stopping = new AbortController();
    const held = new Promise<() => void>((resolve) => {
      hold = resolve;
    });
    const { client, lines } = clientWith(stopping.signal, 10);
    const call = client.getDeposit(3000000001);
    const release = await held;
    stopping.abort();
    release();
    await expect(call).rejects.toBeInstanceOf(ProviderError);
    await expect(call).rejects.toMatchObject({ status: 503 });
    hold = null;
    expect(requests).toBe(1);
    expect(lines.join('')).not.toContain('retrying provider call');
  });

  it('ends a back-off under way at the abort', async () => {
    requests = 0;
    hold = null;
    const stopping = new AbortController();
    const { client, lines } = clientWith(stopping.signal, 60_000);
    const started = Date.now();
    const call = client.getDeposit(3000000001);
    // The first failure is retried (logged) before the abort: wait for that line.
    while (!lines.join('').includes('retrying provider call')) await new Promise((r) => setImmediate(r));
    stopping.abort();
    await expect(call).rejects.toMatchObject({ status: 503 });
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(requests).toBe(1);
  });
});
