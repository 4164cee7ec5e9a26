/**
 * The route machinery's guarantees, on routes declared for the test: a handler that breaks its response
 * schema answers a 500 problem (never a half-valid body) and the log says which operation without the
 * token; an unexpected error is a 500 problem too; a body over the limit is 413; all of them are
 * documented statuses of the operation in the generated document.
 */
import { Writable } from 'node:stream';
import Fastify, { type FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { mountRoutes, openApiDocument, route } from '../../src/api/http.ts';
import { createApiToken, TokenVerifier } from '../../src/domain/api-tokens.ts';
import { OpenApiValidator } from './openapi-validator.ts';

let app: FastifyInstance;
let token = '';
let validator: OpenApiValidator;
const logLines: string[] = [];

const routes = [
  route({
    method: 'GET',
    path: '/broken',
    operationId: 'broken',
    summary: 'answers a body its schema refuses',
    tag: 'test',
    scope: 'read',
    status: 200,
    response: z.object({ amount: z.string().regex(/^\d+\.\d\d$/) }),
    handle: async () => ({ amount: 12.5 as unknown as string }),
  }),
  route({
    method: 'GET',
    path: '/throws',
    operationId: 'throws',
    summary: 'throws an unexpected error',
    tag: 'test',
    scope: 'read',
    status: 200,
    response: z.object({}),
    handle: async () => {
      throw new Error('boom');
    },
  }),
  route({
    method: 'POST',
    path: '/echo',
    operationId: 'echo',
    summary: 'echoes a note',
    tag: 'test',
    scope: 'read',
    body: z.strictObject({ note: z.string() }),
    status: 200,
    response: z.object({ note: z.string() }),
    handle: async ({ body }) => ({ note: body.note }),
  }),
];

beforeAll(async () => {
  const created = await createApiToken('contract', ['read']);
  token = created.token;
  const logger = pino(
    { level: 'debug' },
    new Writable({
      write(chunk, _enc, done) {
        logLines.push(String(chunk));
        done();
      },
    }),
  );
  app = Fastify({ logger: false, bodyLimit: 1024 });
  await app.register(
    async (scope) => mountRoutes(scope, { routes, verifier: new TokenVerifier([created.entry]), logger }),
    { prefix: '/t' },
  );
  validator = new OpenApiValidator(openApiDocument(routes, '/t', { version: 'test' }), '/t');
});

afterAll(async () => {
  await app?.close();
});

async function call(method: 'GET' | 'POST', path: string, payload?: string) {
  const res = await app.inject({
    method,
    url: `/t${path}`,
    headers: {
      authorization: `Bearer ${token}`,
      ...(payload !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(payload !== undefined ? { payload } : {}),
  });
  validator.validate(method, `/t${path}`, res.statusCode, res.headers['content-type'] as string, res.body);
  return res;
}

describe('the route contract', () => {
  it('answers 500 when a handler breaks its response schema, naming the operation in the log', async () => {
    const res = await call('GET', '/broken');
    expect(res.statusCode).toBe(500);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.body).not.toContain('12.5');
    expect(logLines.join('')).toMatch(/"operation":"broken".*api response invalid/);
  });

  it('answers 500 on an unexpected error, logged without the token', async () => {
    const res = await call('GET', '/throws');
    expect(res.statusCode).toBe(500);
    expect(JSON.parse(res.body)).toMatchObject({ status: 500, title: 'Internal Server Error' });
    expect(logLines.join('')).toContain('boom');
  });

  it('answers 413 to a body over the limit and 200 to one within', async () => {
    expect((await call('POST', '/echo', JSON.stringify({ note: 'x'.repeat(2000) }))).statusCode).toBe(413);
    const ok = await call('POST', '/echo', JSON.stringify({ note: 'fine' }));
    expect(JSON.parse(ok.body)).toEqual({ note: 'fine' });
  });

  it('logs each call with its operation, status and client, and never the token', () => {
    expect(logLines.join('')).toMatch(
      /"operation":"echo","status":200,"ms":\d+,"client":"contract".*"msg":"api call"/,
    );
    expect(logLines.join('')).not.toContain(token.slice(4));
  });
});
