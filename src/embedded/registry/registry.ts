/**
 * A Confluent-compatible schema registry for one machine: the REST subset that
 * `@kafkajs/confluent-schema-registry` and the Confluent serialisers use (see
 * docs/embedded.md), Avro only, state durable in an append-only log (`store.ts`).
 * It never imports the app: the pipeline talks to it over HTTP exactly as to a real registry.
 *
 * Errors answer `{error_code, message}` with Confluent's codes: 40401 subject not found, 40402
 * version not found, 40403 schema not found, 40408 subject has no compatibility config, 409
 * incompatible schema, 42201 invalid schema, 42202 invalid version, 42203 invalid compatibility level,
 * 50001 storage error, 40101 unauthorized (basic auth on, credentials missing or wrong).
 *
 * With `users` every request needs HTTP basic auth (as Confluent Cloud's registry); with `tls` it
 * serves HTTPS.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { type AvroType, canonicalText, compatibilityProblems, parseAvro } from './avro.ts';
import {
  type CompatibilityLevel,
  isCompatibilityLevel,
  RegistryStore,
  type SchemaReference,
  type SubjectVersion,
} from './store.ts';

export interface RegistryOptions {
  host?: string;
  port?: number;
  dataDir: string;
  /** User name to password: every request must carry HTTP basic auth with one of them. */
  users?: Readonly<Record<string, string>>;
  /** Serve HTTPS with this PEM certificate (chain) and key. */
  tls?: { readonly cert: string | Buffer; readonly key: string | Buffer };
  /** Largest accepted request body; a larger one is answered 413 (default 4 MiB). */
  maxBodyBytes?: number;
  /** Connections served at once; more are closed as they arrive (default 256). */
  maxConnections?: number;
  /** Time a request has to arrive whole, headers and body (default 30 s). */
  requestTimeoutMs?: number;
}

const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest();

/**
 * Whether an Authorization header carries basic credentials of one of `users`. Both passwords are hashed
 * before the constant-time comparison, so its time says nothing of their lengths, and an unknown user
 * costs the same as a wrong password.
 */
export function basicAuthAccepts(
  users: Readonly<Record<string, string>>,
  header: string | undefined,
): boolean {
  const m = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header ?? '');
  if (!m) return false;
  const text = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = text.indexOf(':');
  if (colon < 0) return false;
  const user = text.slice(0, colon);
  const known = Object.hasOwn(users, user) ? users[user]! : null;
  const same = timingSafeEqual(digest(text.slice(colon + 1)), digest(known ?? ''));
  return known !== null && same;
}

export interface RunningRegistry {
  /** Base URL, e.g. `http://127.0.0.1:8081`. */
  url: string;
  port: number;
  close(): Promise<void>;
}

const CONTENT_TYPE = 'application/vnd.schemaregistry.v1+json';

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly errorCode: number,
    message: string,
  ) {
    super(message);
  }
}

const subjectNotFound = (subject: string) => new HttpError(404, 40401, `Subject '${subject}' not found.`);
const versionNotFound = (version: string | number) =>
  new HttpError(404, 40402, `Version ${version} not found.`);
const schemaNotFound = (what = 'Schema not found') => new HttpError(404, 40403, what);
const invalidSchema = (why: string) => new HttpError(422, 42201, `Invalid schema: ${why}`);

/** Starts the registry; resolves once it listens. */
export async function startRegistry(options: RegistryOptions): Promise<RunningRegistry> {
  const host = options.host ?? '127.0.0.1';
  const store = RegistryStore.open(options.dataDir);
  const maxBodyBytes = options.maxBodyBytes ?? 4 * 1024 * 1024;
  const api = new RegistryApi(store, maxBodyBytes);
  const users = options.users;
  const listener = (req: IncomingMessage, res: ServerResponse) => {
    if (users && !basicAuthAccepts(users, req.headers.authorization)) {
      // Nothing of an unauthenticated request is read: the connection closes after the answer.
      res.setHeader('www-authenticate', 'Basic realm="schema-registry"');
      res.setHeader('connection', 'close');
      send(res, 401, { error_code: 40101, message: 'Unauthorized' });
      return;
    }
    if (Number(req.headers['content-length'] ?? 0) > maxBodyBytes) {
      res.setHeader('connection', 'close');
      send(res, 413, { error_code: 413, message: 'Request body too large' });
      return;
    }
    api.handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) send(res, 500, { error_code: 50001, message: String(err) });
      else res.destroy();
    });
  };
  // A request has this long to arrive whole, its headers 10 s at most.
  const requestTimeout = options.requestTimeoutMs ?? 30_000;
  const timeouts = {
    requestTimeout,
    headersTimeout: Math.min(requestTimeout, 10_000),
    keepAliveTimeout: 5_000,
    connectionsCheckingInterval: Math.min(1_000, requestTimeout),
  };
  const server = options.tls
    ? createHttpsServer({ cert: options.tls.cert, key: options.tls.key, ...timeouts }, listener)
    : createServer(timeouts, listener);
  server.maxConnections = options.maxConnections ?? 256;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 8081, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `${options.tls ? 'https' : 'http'}://${host}:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => {
          store.close();
          resolve();
        });
        server.closeAllConnections();
      }),
  };
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': CONTENT_TYPE, 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

async function readJson(req: IncomingMessage, maxBytes: number): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > maxBytes) throw new HttpError(413, 413, 'Request body too large');
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return {};
  try {
    return JSON.parse(text);
  } catch {
    throw new HttpError(400, 400, 'Request body is not JSON');
  }
}

interface SchemaRequest {
  schemaType: string;
  schema: string;
  references: SchemaReference[];
}

class RegistryApi {
  /** Parsed types by id, so compatibility checks do not re-parse on every request. */
  private readonly parsed = new Map<number, AvroType>();

  constructor(
    private readonly store: RegistryStore,
    private readonly maxBodyBytes: number,
  ) {}

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://registry');
    const parts = url.pathname
      .split('/')
      .filter((p) => p !== '')
      .map((p) => decodeURIComponent(p));
    const method = req.method ?? 'GET';
    try {
      const body = method === 'POST' || method === 'PUT' ? await readJson(req, this.maxBodyBytes) : undefined;
      const [status, answer] = this.route(method, parts, url.searchParams, body);
      send(res, status, answer);
    } catch (err) {
      if (err instanceof HttpError) {
        // The rest of a body too large is not read: the connection closes after the answer.
        if (err.status === 413) res.setHeader('connection', 'close');
        send(res, err.status, { error_code: err.errorCode, message: err.message });
        return;
      }
      throw err;
    }
  }

  private route(method: string, parts: string[], query: URLSearchParams, body: unknown): [number, unknown] {
    const [a, b, c, d, e] = parts;
    const n = parts.length;
    if (n === 0 && method === 'GET') return [200, {}];
    if (a === 'schemas') {
      if (n === 1 && method === 'GET') return [200, this.allSchemas()];
      if (n === 2 && b === 'types' && method === 'GET') return [200, ['AVRO']];
      if (b === 'ids' && c !== undefined && method === 'GET') {
        if (n === 3) return [200, this.schemaByIdAnswer(c)];
        if (n === 4 && d === 'schema') return [200, JSON.parse(this.schemaOfId(c).schema)];
        if (n === 4 && d === 'subjects') return [200, this.subjectsOfIdAnswer(c).map((v) => v.subject)];
        if (n === 4 && d === 'versions') {
          return [200, this.subjectsOfIdAnswer(c).map((v) => ({ subject: v.subject, version: v.version }))];
        }
      }
    }
    if (a === 'subjects') {
      if (n === 1 && method === 'GET') return [200, this.store.subjectNames(query.get('deleted') === 'true')];
      if (b !== undefined) {
        if (n === 2 && method === 'POST') return [200, this.lookup(b, body)];
        if (n === 2 && method === 'DELETE') return [200, this.deleteSubject(b)];
        if (n === 3 && c === 'versions' && method === 'GET') {
          return [200, this.liveVersions(b).map((v) => v.version)];
        }
        if (n === 3 && c === 'versions' && method === 'POST') return [200, this.register(b, body)];
        if (n >= 4 && c === 'versions' && d !== undefined) {
          if (n === 4 && method === 'GET') return [200, this.versionAnswer(this.findVersion(b, d))];
          if (n === 4 && method === 'DELETE') return [200, this.deleteVersion(b, d)];
          if (n === 5 && e === 'referencedby' && method === 'GET') {
            const v = this.findVersion(b, d);
            return [200, this.referencingIds(v)];
          }
          if (n === 5 && e === 'schema' && method === 'GET') {
            return [200, JSON.parse(this.schemaOfId(String(this.findVersion(b, d).id)).schema)];
          }
        }
      }
    }
    if (a === 'compatibility' && b === 'subjects' && c !== undefined && method === 'POST') {
      if (n === 5 && d === 'versions' && e !== undefined) {
        return [200, this.testCompatibility(c, e, body, query.get('verbose') === 'true')];
      }
      if (n === 4 && d === 'versions')
        return [200, this.testCompatibility(c, null, body, query.get('verbose') === 'true')];
    }
    // Read-only mode is not supported: the registry is always READWRITE.
    if (a === 'mode' && n <= 2 && method === 'GET') return [200, { mode: 'READWRITE' }];
    if (a === 'config') {
      if (n === 1 && method === 'GET') return [200, { compatibilityLevel: this.store.globalConfig() }];
      if (n === 1 && method === 'PUT') return [200, this.putConfig(null, body)];
      if (n === 2 && b !== undefined) {
        if (method === 'GET') return [200, this.getConfig(b, query.get('defaultToGlobal') === 'true')];
        if (method === 'PUT') return [200, this.putConfig(b, body)];
        if (method === 'DELETE') return [200, this.deleteConfig(b)];
      }
    }
    throw new HttpError(404, 404, `HTTP 404 Not Found: ${method} /${parts.join('/')}`);
  }

  // ---- schemas

  private schemaOfId(idText: string) {
    const id = Number(idText);
    const schema = Number.isInteger(id) ? this.store.schemaById(id) : undefined;
    if (!schema) throw schemaNotFound();
    return schema;
  }

  private schemaByIdAnswer(idText: string) {
    const s = this.schemaOfId(idText);
    return {
      schema: s.schema,
      ...(s.schemaType === 'AVRO' ? {} : { schemaType: s.schemaType }),
      ...(s.references.length > 0 ? { references: s.references } : {}),
    };
  }

  private subjectsOfIdAnswer(idText: string): SubjectVersion[] {
    const s = this.schemaOfId(idText);
    return this.store.subjectsOfId(s.id);
  }

  private allSchemas() {
    return this.store
      .subjectNames()
      .flatMap((subject) => this.store.versions(subject))
      .map((v) => this.versionAnswer(v));
  }

  /** Ids of schemas whose references name this subject version. */
  private referencingIds(v: SubjectVersion): number[] {
    const ids = new Set<number>();
    for (const subject of this.store.subjectNames()) {
      for (const other of this.store.versions(subject)) {
        const s = this.store.schemaById(other.id)!;
        if (s.references.some((r) => r.subject === v.subject && r.version === v.version)) ids.add(s.id);
      }
    }
    return [...ids].sort((x, y) => x - y);
  }

  private typeOf(id: number): AvroType {
    let type = this.parsed.get(id);
    if (!type) {
      const s = this.store.schemaById(id);
      if (!s) throw schemaNotFound();
      type = parseAvro(s.schema, this.referencedTexts(s.references));
      this.parsed.set(id, type);
    }
    return type;
  }

  private referencedTexts(references: SchemaReference[], seen = new Set<string>()): string[] {
    const out: string[] = [];
    for (const ref of references) {
      const key = `${ref.subject}/${ref.version}`;
      if (seen.has(key)) continue;
      seen.add(key);
      const v = this.store.versions(ref.subject).find((x) => x.version === ref.version);
      if (!v) throw invalidSchema(`reference ${ref.name} to ${ref.subject} version ${ref.version} not found`);
      const s = this.store.schemaById(v.id)!;
      out.push(...this.referencedTexts(s.references, seen), s.schema);
    }
    return out;
  }

  private parseRequest(body: unknown): SchemaRequest & { type: AvroType } {
    if (typeof body !== 'object' || body === null) throw invalidSchema('request body must be an object');
    const { schema, schemaType, references } = body as Record<string, unknown>;
    if (typeof schema !== 'string') throw invalidSchema('"schema" must be a string');
    const kind = schemaType === undefined || schemaType === null ? 'AVRO' : schemaType;
    if (kind !== 'AVRO')
      throw invalidSchema(`schemaType ${JSON.stringify(kind)} is not supported (AVRO only)`);
    const refs = parseReferences(references);
    let canonical: string;
    let type: AvroType;
    try {
      canonical = canonicalText(schema);
      type = parseAvro(canonical, this.referencedTexts(refs));
    } catch (err) {
      if (err instanceof HttpError) throw err;
      throw invalidSchema(err instanceof Error ? err.message : String(err));
    }
    return { schemaType: 'AVRO', schema: canonical, references: refs, type };
  }

  // ---- subjects

  private liveVersions(subject: string): SubjectVersion[] {
    const versions = this.store.versions(subject);
    if (versions.length === 0) throw subjectNotFound(subject);
    return versions;
  }

  private findVersion(subject: string, versionText: string): SubjectVersion {
    const versions = this.liveVersions(subject);
    if (versionText === 'latest' || versionText === '-1') return versions[versions.length - 1]!;
    const version = Number(versionText);
    if (!Number.isInteger(version) || version < 1) {
      throw new HttpError(
        422,
        42202,
        `The specified version '${versionText}' is not a valid version id. Allowed values are between [1, 2^31-1] and the string "latest"`,
      );
    }
    const found = versions.find((v) => v.version === version);
    if (!found) throw versionNotFound(version);
    return found;
  }

  private versionAnswer(v: SubjectVersion) {
    const s = this.store.schemaById(v.id)!;
    return {
      subject: v.subject,
      version: v.version,
      id: v.id,
      ...(s.schemaType === 'AVRO' ? {} : { schemaType: s.schemaType }),
      ...(s.references.length > 0 ? { references: s.references } : {}),
      schema: s.schema,
    };
  }

  /** `POST /subjects/{subject}/versions`: idempotent, the same schema answers the same id. */
  private register(subject: string, body: unknown) {
    const request = this.parseRequest(body);
    const live = this.store.versions(subject);
    const existingId = this.store.idOf(request.schemaType, request.schema, request.references);
    if (existingId !== undefined && live.some((v) => v.id === existingId)) return { id: existingId };
    const level = this.store.effectiveCompatibility(subject);
    const problems = compatibilityProblems(
      level,
      request.type,
      live.map((v) => this.typeOf(v.id)),
    );
    if (problems.length > 0) {
      throw new HttpError(
        409,
        409,
        `Schema being registered is incompatible with an earlier schema for subject "${subject}" (${level}): ${problems.join('; ')}`,
      );
    }
    const added = this.store.addVersion(subject, request.schemaType, request.schema, request.references);
    this.parsed.set(added.id, request.type);
    return { id: added.id };
  }

  /** `POST /subjects/{subject}`: is this schema registered under the subject? */
  private lookup(subject: string, body: unknown) {
    const request = this.parseRequest(body);
    const live = this.liveVersions(subject);
    const id = this.store.idOf(request.schemaType, request.schema, request.references);
    const found = id === undefined ? undefined : live.find((v) => v.id === id);
    if (!found) throw schemaNotFound();
    return this.versionAnswer(found);
  }

  private deleteSubject(subject: string) {
    this.liveVersions(subject);
    return this.store.deleteSubject(subject);
  }

  private deleteVersion(subject: string, versionText: string) {
    const v = this.findVersion(subject, versionText);
    this.store.deleteVersion(subject, v.version);
    return v.version;
  }

  private testCompatibility(subject: string, versionText: string | null, body: unknown, verbose: boolean) {
    const request = this.parseRequest(body);
    const live = this.store.versions(subject);
    const level = this.store.effectiveCompatibility(subject);
    let existing: AvroType[];
    if (versionText === null) {
      existing = live.map((v) => this.typeOf(v.id));
    } else {
      if (live.length === 0) throw subjectNotFound(subject);
      const v = this.findVersion(subject, versionText);
      // A named version is checked alone; transitive levels look at all of them.
      existing = level.endsWith('_TRANSITIVE') ? live.map((x) => this.typeOf(x.id)) : [this.typeOf(v.id)];
    }
    const problems = compatibilityProblems(level, request.type, existing);
    return verbose
      ? { is_compatible: problems.length === 0, messages: problems }
      : { is_compatible: problems.length === 0 };
  }

  // ---- config

  private getConfig(subject: string, defaultToGlobal: boolean) {
    const own = this.store.subjectCompatibility(subject);
    if (own) return { compatibilityLevel: own };
    if (defaultToGlobal) return { compatibilityLevel: this.store.globalConfig() };
    throw new HttpError(
      404,
      40408,
      `Subject '${subject}' does not have subject-level compatibility configured`,
    );
  }

  private putConfig(subject: string | null, body: unknown) {
    const compatibility = (body as { compatibility?: unknown } | null)?.compatibility;
    if (!isCompatibilityLevel(compatibility)) {
      throw new HttpError(
        422,
        42203,
        `Invalid compatibility level ${JSON.stringify(compatibility)}. Valid values are NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE`,
      );
    }
    this.store.setCompatibility(subject, compatibility);
    return { compatibility };
  }

  private deleteConfig(subject: string) {
    const own: CompatibilityLevel | undefined = this.store.subjectCompatibility(subject);
    if (!own) {
      throw new HttpError(
        404,
        40408,
        `Subject '${subject}' does not have subject-level compatibility configured`,
      );
    }
    this.store.setCompatibility(subject, null);
    return { compatibilityLevel: own };
  }
}

function parseReferences(value: unknown): SchemaReference[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw invalidSchema('"references" must be an array');
  return value.map((r: unknown) => {
    const { name, subject, version } = (r ?? {}) as Record<string, unknown>;
    if (typeof name !== 'string' || typeof subject !== 'string' || typeof version !== 'number') {
      throw invalidSchema('each reference needs name, subject and version');
    }
    return { name, subject, version };
  });
}
