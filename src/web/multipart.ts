/**
 * A multipart form (a file upload) as the page's handlers read a form: each text field by name (the CSRF
 * check reads `_csrf` from it like from any form), and the files under `FORM_FILES` (name, bytes). Parsed
 * by the platform's own form-data reader (undici's `Response.formData`), whole: the route's body limit
 * caps what it reads.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../domain/errors.ts';

/** Where a parsed multipart form keeps its files: field name to file. */
export const FORM_FILES = '__files';

export interface UploadedFile {
  fileName: string;
  bytes: Uint8Array;
}

export async function parseMultipart(
  contentType: string | undefined,
  body: Buffer,
): Promise<Record<string, unknown>> {
  let form: FormData;
  try {
    form = await new Response(body, { headers: { 'content-type': contentType ?? '' } }).formData();
  } catch {
    throw new AppError('VALIDATION_FAILED', 'the form could not be read (multipart/form-data expected)');
  }
  const fields: Record<string, unknown> = {};
  const files: Record<string, UploadedFile> = {};
  for (const [name, value] of form) {
    if (typeof value === 'string') {
      if (fields[name] === undefined) fields[name] = value;
      continue;
    }
    // The name as the browser gives it, without any folder, cut to 200 characters.
    const fileName = (value.name.split(/[\\/]/).pop() ?? '').trim().slice(0, 200) || 'upload';
    files[name] ??= { fileName, bytes: new Uint8Array(await value.arrayBuffer()) };
  }
  fields[FORM_FILES] = files;
  return fields;
}

/** The file a parsed multipart form carries under `name`. */
export function fileOf(body: unknown, name: string): UploadedFile | undefined {
  const files = (body as Record<string, unknown> | undefined)?.[FORM_FILES] as
    | Record<string, UploadedFile>
    | undefined;
  return files?.[name];
}

/**
 * Makes `app` (an encapsulated instance) read multipart forms of at most `maxBytes`, replacing a parser
 * it inherited, so each upload keeps its own limit.
 */
export function acceptMultipart(app: FastifyInstance, maxBytes: number): void {
  if (app.hasContentTypeParser('multipart/form-data')) app.removeContentTypeParser('multipart/form-data');
  app.addContentTypeParser(
    'multipart/form-data',
    { parseAs: 'buffer', bodyLimit: maxBytes },
    async (request: FastifyRequest, body: Buffer) => parseMultipart(request.headers['content-type'], body),
  );
}
