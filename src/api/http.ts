/**
 * The machinery of `/api/v1`: a route is declared once (`route(...)`: method, path, scope, zod schemas
 * of its path, query, body and response, the statuses it may answer) and that one declaration both
 * registers the fastify route (token and scope check, request and response validation) and becomes the
 * route's operation in the OpenAPI 3.1 document. Errors are RFC 9457 problem details naming the field
 * and the rule.
 */
import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { type ZodType, z } from 'zod';
import type { ApiScope, ApiTokenEntry, TokenVerifier } from '../domain/api-tokens.ts';
import { AppError, type ErrorCode, toAppError } from '../domain/errors.ts';
import type { Logger } from '../logger.ts';
import { Problem } from './schemas.ts';

export const PROBLEM_TYPE = 'application/problem+json';

/**
 * A problem a handler answers with (NOT_FOUND, CONFLICT, ...): an AppError whose code gives the status
 * (src/domain/errors.ts), with the fields and rules it names; sent as `application/problem+json`. Any
 * other AppError a handler throws is answered the same way, by its code.
 */
export class ApiProblem extends AppError {
  constructor(
    code: ErrorCode,
    detail: string,
    readonly errors?: Problem['errors'],
  ) {
    super(code, detail);
  }
}

/** A file a handler answers with instead of JSON (report downloads). */
export class FileReply {
  constructor(
    readonly stream: Readable,
    readonly contentType: string,
    readonly name: string,
    readonly size: number,
  ) {}
}

export interface HandlerInput<P, Q, B> {
  params: P;
  query: Q;
  body: B;
  token: ApiTokenEntry;
  request: FastifyRequest;
}

type AnyObject = z.ZodObject<z.ZodRawShape>;

/** The query of a route that takes none. */
const NO_QUERY: AnyObject = z.object({});

export interface Upload {
  contentTypes: readonly string[];
  maxBytes: number;
}

export interface RouteSpec<P extends AnyObject, Q extends AnyObject, B extends ZodType, R extends ZodType> {
  method: 'GET' | 'POST';
  /** OpenAPI path template relative to the prefix, e.g. `/exceptions/{id}`. */
  path: string;
  operationId: string;
  summary: string;
  tag: string;
  scope: ApiScope;
  params?: P;
  query?: Q;
  body?: B;
  /**
   * The body is a file, not JSON: its raw bytes (a Buffer) of one of these content types, at most
   * `maxBytes` (413 beyond, 415 for another type).
   */
  upload?: Upload;
  /** Success status (200, 202). */
  status: number;
  /** Response body schema, or the content types of a file answer. */
  response: R | { files: readonly string[] };
  /** Problem statuses this route may answer besides 400 (when it takes input), 401, 403 and 500. */
  problems?: readonly (404 | 409 | 410 | 422 | 503)[];
  handle(input: HandlerInput<z.output<P>, z.output<Q>, z.output<B>>): Promise<z.input<R> | FileReply>;
}

/** A declared route with its types erased, as the plugin and the document generator see it. */
export interface Route {
  method: 'GET' | 'POST';
  path: string;
  operationId: string;
  summary: string;
  tag: string;
  scope: ApiScope;
  params?: AnyObject;
  query?: AnyObject;
  body?: ZodType;
  upload?: Upload;
  status: number;
  response: ZodType | { files: readonly string[] };
  problems: readonly number[];
  handle(input: HandlerInput<unknown, unknown, unknown>): Promise<unknown>;
}

export function route<P extends AnyObject, Q extends AnyObject, B extends ZodType, R extends ZodType>(
  spec: RouteSpec<P, Q, B, R>,
): Route {
  return { ...spec, problems: spec.problems ?? [], handle: spec.handle as Route['handle'] };
}

const TITLES: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  409: 'Conflict',
  410: 'Gone',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Content',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

/** Every status a route may answer with a problem, in the order the document lists them. */
export function problemStatuses(r: Route): number[] {
  // Every route refuses unknown query parameters with a 400.
  const input = [400];
  const body = r.body || r.upload ? [413, 415] : [];
  return [...new Set([...input, 401, 403, ...body, ...r.problems, 500])].sort((a, b) => a - b);
}

function sendProblem(reply: FastifyReply, problem: Problem): FastifyReply {
  return reply.code(problem.status).header('content-type', PROBLEM_TYPE).send(JSON.stringify(problem));
}

export function problem(
  status: number,
  detail: string,
  extra: { errors?: Problem['errors']; title?: string; instance?: string } = {},
): Problem {
  return {
    type: status === 400 && extra.errors ? 'urn:payrecon:problem:invalid-request' : 'about:blank',
    title: extra.title ?? TITLES[status] ?? 'Error',
    status,
    detail,
    ...(extra.instance ? { instance: extra.instance } : {}),
    ...(extra.errors ? { errors: extra.errors } : {}),
  };
}

/** 415: the content types the route takes (JSON, or an upload's). */
function unsupportedMediaType(upload: Upload | undefined): Problem {
  const rule = upload ? `must be one of ${upload.contentTypes.join(', ')}` : 'must be application/json';
  return problem(415, `content-type: ${rule}`, { errors: [{ in: 'header', field: 'content-type', rule }] });
}

type Where = 'path' | 'query' | 'body';

function issuesOf(error: z.ZodError, where: Where): NonNullable<Problem['errors']> {
  const out: NonNullable<Problem['errors']> = [];
  for (const issue of error.issues) {
    const base = issue.path.map(String).join('.');
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys)
        out.push({ in: where, field: base ? `${base}.${key}` : key, rule: 'is not a known field' });
      continue;
    }
    const missing = issue.code === 'invalid_type' && /received undefined/.test(issue.message);
    out.push({ in: where, field: base || where, rule: missing ? 'is required' : issue.message });
  }
  return out;
}

export interface MountOptions {
  routes: readonly Route[];
  verifier: TokenVerifier;
  logger?: Logger;
}

/** Registers the routes on an (encapsulated) fastify instance with auth, validation and problem errors. */
export function mountRoutes(app: FastifyInstance, options: MountOptions): void {
  const { verifier } = options;
  const log = options.logger;

  app.setErrorHandler((err, request, reply) => {
    const e = toAppError(err);
    if (e.code === 'UNSUPPORTED_MEDIA_TYPE') {
      const upload = (request.routeOptions.config as { upload?: Upload } | undefined)?.upload;
      return sendProblem(reply, unsupportedMediaType(upload));
    }
    if (e.code === 'PAYLOAD_TOO_LARGE') return sendProblem(reply, problem(e.httpStatus, 'body: too large'));
    if (e.httpStatus < 500) {
      return sendProblem(
        reply,
        problem(400, `body: ${e.message}`, {
          errors: [{ in: 'body', field: 'body', rule: 'must be a valid JSON document' }],
        }),
      );
    }
    log?.error({ err, url: request.url.split('?')[0] }, 'api request failed');
    return sendProblem(reply, problem(500, 'internal error; the server log has the details'));
  });

  app.setNotFoundHandler((request, reply) =>
    sendProblem(reply, problem(404, `no route ${request.method} ${request.url.split('?')[0]}`)),
  );

  const register = (target: FastifyInstance, r: Route) => {
    const url = r.path.replace(/\{(\w+)\}/g, ':$1');
    // A parameter the route does not know is refused, never ignored: `?q=` on a list that has no `q`
    // would otherwise answer the unfiltered list, which a client can take for a match.
    const querySchema = (r.query ?? NO_QUERY).strict();
    target.route({
      method: r.method,
      url,
      ...(r.upload ? { bodyLimit: r.upload.maxBytes, config: { upload: r.upload } } : {}),
      // One line per call: which operation, its status and time, and which client (the token's name,
      // never the token). Debug level: a busy client must not flood the log at info.
      onResponse: async (request, reply) => {
        log?.debug(
          {
            operation: r.operationId,
            status: reply.statusCode,
            ms: Math.round(reply.elapsedTime),
            client: request.apiToken?.name ?? null,
          },
          'api call',
        );
      },
      onRequest: async (request, reply) => {
        const checked = await verifier.check(request.headers.authorization);
        if (!checked.ok) {
          reply.header('www-authenticate', 'Bearer');
          return sendProblem(
            reply,
            problem(
              401,
              checked.reason === 'missing'
                ? 'authorization: a bearer token is required'
                : 'authorization: must be "Bearer <token>" with a valid token',
              { errors: [{ in: 'header', field: 'authorization', rule: 'must carry a valid bearer token' }] },
            ),
          );
        }
        if (!checked.entry.scopes.includes(r.scope)) {
          reply.header('www-authenticate', `Bearer error="insufficient_scope", scope="${r.scope}"`);
          return sendProblem(
            reply,
            problem(403, `authorization: the token lacks the scope ${r.scope}`, {
              errors: [{ in: 'header', field: 'authorization', rule: `must grant the scope ${r.scope}` }],
            }),
          );
        }
        request.apiToken = checked.entry;
      },
      handler: async (request, reply) => {
        const errors: NonNullable<Problem['errors']> = [];
        const parse = (schema: ZodType | undefined, value: unknown, where: Where): unknown => {
          if (!schema) return undefined;
          const result = schema.safeParse(value ?? (where === 'body' ? undefined : {}));
          if (result.success) return result.data;
          errors.push(...issuesOf(result.error, where));
          return undefined;
        };
        const params = parse(r.params, request.params, 'path');
        const query = parse(querySchema, request.query, 'query');
        const body = r.upload ? request.body : parse(r.body, request.body, 'body');
        if (errors.length > 0) {
          const detail = errors.map((e) => `${e.field}: ${e.rule}`).join('; ');
          return sendProblem(reply, problem(400, detail, { errors }));
        }
        // An upload is the raw bytes of one of its content types (a JSON body was parsed as JSON).
        if (r.upload && !Buffer.isBuffer(body)) return sendProblem(reply, unsupportedMediaType(r.upload));
        const token = request.apiToken as ApiTokenEntry;
        let out: unknown;
        try {
          out = await r.handle({ params, query, body, token, request });
        } catch (err) {
          if (err instanceof AppError && err.httpStatus < 500) {
            const errors = err instanceof ApiProblem ? err.errors : undefined;
            return sendProblem(reply, problem(err.httpStatus, err.message, errors ? { errors } : {}));
          }
          throw err;
        }
        if (out instanceof FileReply) {
          return reply
            .code(r.status)
            .header('content-type', out.contentType)
            .header('content-length', String(out.size))
            .header('content-disposition', `attachment; filename="${out.name.replace(/[^\w.-]/g, '_')}"`)
            .send(out.stream);
        }
        const schema = r.response as ZodType;
        const checked = schema.safeParse(out);
        if (!checked.success) {
          // The handler broke the contract: a bug, never a half-valid answer.
          log?.error(
            { operation: r.operationId, issues: checked.error.issues.slice(0, 5) },
            'api response invalid',
          );
          return sendProblem(reply, problem(500, 'internal error; the server log has the details'));
        }
        return reply
          .code(r.status)
          .header('content-type', 'application/json; charset=utf-8')
          .send(JSON.stringify(checked.data));
      },
    });
  };

  for (const r of options.routes) {
    const upload = r.upload;
    if (!upload) {
      register(app, r);
      continue;
    }
    // An upload's content types are parsed as raw bytes in a context of its own, so the JSON routes
    // keep refusing them with a 415.
    app.register(async (child) => {
      child.addContentTypeParser(
        [...upload.contentTypes],
        { parseAs: 'buffer', bodyLimit: upload.maxBytes },
        (_request, body, done) => done(null, body),
      );
      register(child, r);
    });
  }
}

declare module 'fastify' {
  interface FastifyRequest {
    apiToken?: ApiTokenEntry;
  }
}

// ---------------------------------------------------------------- OpenAPI

type JsonSchema = Record<string, unknown>;

/**
 * zod writes its own regular expression beside `format: date-time` and `format: date`; the format says
 * the same (RFC 3339) and the expression, repeated on every instant, tripled the document's size.
 */
function dropFormatPatterns(node: unknown): void {
  if (Array.isArray(node)) {
    for (const item of node) dropFormatPatterns(item);
    return;
  }
  if (node === null || typeof node !== 'object') return;
  const o = node as Record<string, unknown>;
  if ((o.format === 'date-time' || o.format === 'date') && typeof o.pattern === 'string') delete o.pattern;
  for (const value of Object.values(o)) dropFormatPatterns(value);
}

function jsonSchema(schema: ZodType, io: 'input' | 'output'): JsonSchema {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, {
    target: 'draft-2020-12',
    io,
    unrepresentable: 'any',
  }) as JsonSchema;
  dropFormatPatterns(rest);
  return rest;
}

function parameters(schema: AnyObject | undefined, where: 'path' | 'query'): JsonSchema[] {
  if (!schema) return [];
  return Object.entries(schema.shape).map(([name, field]) => {
    const s = jsonSchema(field as ZodType, 'input');
    const { description, ...rest } = s;
    return {
      name,
      in: where,
      required: where === 'path' || !(field as ZodType).safeParse(undefined).success,
      ...(typeof description === 'string' ? { description } : {}),
      schema: rest,
    };
  });
}

/** The OpenAPI 3.1 document of the routes, mounted under `prefix`. */
export function openApiDocument(
  routes: readonly Route[],
  prefix: string,
  info: { version: string },
): JsonSchema {
  const paths: Record<string, Record<string, unknown>> = {};
  const problemSchema = jsonSchema(Problem, 'output');
  for (const r of routes) {
    const responses: Record<string, unknown> = {};
    responses[String(r.status)] =
      'files' in r.response
        ? {
            description: 'The file',
            content: Object.fromEntries(
              r.response.files.map((t) => [t, { schema: { type: 'string', contentMediaType: t } }]),
            ),
          }
        : {
            description: 'Success',
            content: { 'application/json': { schema: jsonSchema(r.response as ZodType, 'output') } },
          };
    for (const status of problemStatuses(r)) {
      responses[String(status)] = {
        description: TITLES[status] ?? 'Error',
        content: { [PROBLEM_TYPE]: { schema: { $ref: '#/components/schemas/Problem' } } },
      };
    }
    const operation: Record<string, unknown> = {
      operationId: r.operationId,
      summary: r.summary,
      description: `Needs a bearer token with the scope \`${r.scope}\`.`,
      tags: [r.tag],
      security: [{ bearer: [r.scope] }],
      parameters: [...parameters(r.params, 'path'), ...parameters(r.query, 'query')],
      responses,
    };
    if (r.body) {
      operation.requestBody = {
        required: true,
        content: { 'application/json': { schema: jsonSchema(r.body, 'input') } },
      };
    }
    if (r.upload) {
      operation.requestBody = {
        required: true,
        description: `The file's bytes, at most ${r.upload.maxBytes} bytes.`,
        content: Object.fromEntries(
          r.upload.contentTypes.map((t) => [t, { schema: { type: 'string', contentMediaType: t } }]),
        ),
      };
    }
    paths[r.path] ??= {};
    (paths[r.path] as Record<string, unknown>)[r.method.toLowerCase()] = operation;
  }
  return {
    openapi: '3.1.0',
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    info: {
      title: 'payrecon API',
      version: info.version,
      description:
        'Balances, movements, payments, the exception queue, reports and month closes of payrecon. Amounts are decimal strings in major units; instants are ISO 8601 with an offset; errors are RFC 9457 problem details.',
    },
    servers: [{ url: prefix }],
    components: {
      schemas: { Problem: problemSchema },
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description: 'A token from `payrecon api token create`, with the scopes each operation names.',
        },
      },
    },
    paths,
  };
}
