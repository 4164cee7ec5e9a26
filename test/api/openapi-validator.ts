/**
 * Validates responses against the OpenAPI 3.1 document the API serves: the operation is found by method
 * and path template, the status must be documented for it, the content type must be one it lists, and a
 * JSON body must match its schema (ajv, draft 2020-12, with formats). Counts what it checked per
 * operation so a suite can assert it covered every operation.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

// ajv-formats is CommonJS: its default export arrives as the module object under NodeNext.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ??
  addFormatsModule) as unknown as (ajv: Ajv2020) => void;

type Json = Record<string, unknown>;

interface Operation {
  method: string;
  template: string;
  regex: RegExp;
  operationId: string;
  responses: Record<string, { content?: Record<string, { schema?: Json }> }>;
}

export class OpenApiValidator {
  private readonly ajv: Ajv2020;
  private readonly operations: Operation[] = [];
  private readonly compiled = new Map<string, ValidateFunction>();
  readonly checked = new Map<string, Set<number>>();

  constructor(
    readonly document: Json,
    readonly prefix: string,
  ) {
    // The `default`/`examples` keywords of zod's output are annotations: keep strict mode off for them.
    this.ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats(this.ajv);
    const paths = document.paths as Record<string, Record<string, Json>>;
    for (const [template, methods] of Object.entries(paths)) {
      const regex = new RegExp(`^${template.replace(/\{\w+\}/g, '[^/]+')}$`);
      for (const [method, op] of Object.entries(methods)) {
        this.operations.push({
          method: method.toUpperCase(),
          template,
          regex,
          operationId: op.operationId as string,
          responses: op.responses as Operation['responses'],
        });
      }
    }
  }

  get operationIds(): string[] {
    return this.operations.map((o) => o.operationId);
  }

  /** Compiles every schema of the document (a schema zod wrote that ajv cannot read fails here). */
  compileAll(): number {
    let n = 0;
    for (const op of this.operations) {
      for (const [status, response] of Object.entries(op.responses)) {
        for (const [type, media] of Object.entries(response.content ?? {})) {
          if (media.schema) {
            this.schemaFor(op, status, type, media.schema);
            n += 1;
          }
        }
      }
    }
    return n;
  }

  private schemaFor(op: Operation, status: string, type: string, schema: Json): ValidateFunction {
    const key = `${op.operationId} ${status} ${type}`;
    let v = this.compiled.get(key);
    if (!v) {
      // The document's components travel with each schema, so `#/components/...` references resolve.
      v = this.ajv.compile({ ...schema, components: this.document.components });
      this.compiled.set(key, v);
    }
    return v;
  }

  private find(method: string, url: string): Operation {
    const path = (url.split('?')[0] ?? '').slice(this.prefix.length);
    // Literal templates before templated ones (`/payments/lookup` before `/payments/{...}`).
    const candidates = this.operations
      .filter((o) => o.method === method && o.regex.test(path))
      .sort((a, b) => (a.template.includes('{') ? 1 : 0) - (b.template.includes('{') ? 1 : 0));
    const op = candidates[0];
    if (!op) throw new Error(`no documented operation for ${method} ${path}`);
    return op;
  }

  /** Throws unless the response is what the document says this operation answers. */
  validate(method: string, url: string, status: number, contentType: string | undefined, body: string): void {
    const op = this.find(method, url);
    const response = op.responses[String(status)];
    if (!response)
      throw new Error(`${op.operationId}: status ${status} is not documented (body ${body.slice(0, 300)})`);
    const content = response.content ?? {};
    const type = (contentType ?? '').split(';')[0]?.trim() ?? '';
    const entry = Object.entries(content).find(([t]) => t.split(';')[0]?.trim() === type);
    if (!entry) throw new Error(`${op.operationId} ${status}: content type ${contentType} is not documented`);
    const [listed, media] = entry;
    if (listed.endsWith('json') && media.schema) {
      const validate = this.schemaFor(op, String(status), listed, media.schema);
      const data = JSON.parse(body) as unknown;
      if (!validate(data)) {
        throw new Error(
          `${op.operationId} ${status}: body does not match the document: ${this.ajv.errorsText(validate.errors)}\n${body.slice(0, 500)}`,
        );
      }
    }
    const seen = this.checked.get(op.operationId) ?? new Set<number>();
    seen.add(status);
    this.checked.set(op.operationId, seen);
  }
}
