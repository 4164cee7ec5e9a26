/**
 * The Imports page's routes, registered by `webRoutes` (src/web/app.ts): sign-in, CSRF and the error
 * pages apply as to every page. Everyone signed in sees the imports; operators and controllers upload a
 * file (a multipart form, its CSRF token among the fields), which goes through the one import of a file
 * (the same as `payrecon import` and `POST /api/v1/imports`). A refused file shows its one line and
 * nothing is imported.
 */

import type { FastifyInstance } from 'fastify';
import type { ImportDetail, ImportView } from '../db/imports/read.ts';
import { IMPORT_KINDS, type ImportFileFn, type ImportKind, type ImportOutcome } from '../domain/imports.ts';
import { ImportRefusal } from '../imports/refusal.ts';
import { IMPORTS_CSS, type ImportForm, importPage, importsPage } from './import-views.ts';
import { fileOf } from './multipart.ts';
import { field, type PageKit } from './page-kit.ts';

/** What the Imports page reads and does; implemented by src/web/import-services.ts. */
export interface ImportPageServices {
  run: ImportFileFn;
  /** The largest file an upload may be. */
  maxBytes: number;
  /** Configured profiles the form offers besides the built-in ones. */
  profiles?: readonly { name: string; kind: ImportKind }[];
  list(limit: number): Promise<ImportView[]>;
  get(id: string): Promise<ImportDetail | null>;
}

/** A recorded import as the result of its upload (what the page shows after the redirect). */
function outcomeOf(i: ImportView): ImportOutcome {
  const summary: ImportOutcome['summary'] =
    i.kind === 'bank-statement'
      ? {
          statements: i.statements.map((s) => ({
            account: s.bankAccount,
            currency: s.currency,
            opening: s.opening,
            closing: s.closing,
            credits: s.credits,
            debits: s.debits,
            booked: s.booked,
            pending: s.pending,
            new: s.newLines,
          })),
        }
      : { kind: i.kind, rows: i.lines, new: i.newLines };
  return { id: i.id, kind: i.kind, fileName: i.fileName, summary, matching: i.matching };
}

export function importRoutes(app: FastifyInstance, kit: PageKit, services: ImportPageServices): void {
  const { ctx, send, refuseUnless } = kit;
  const back = { href: `${kit.base}/imports`, label: 'Back to the imports' };

  app.get('/static/imports.css', async (_request, reply) =>
    reply
      .header('content-type', 'text/css; charset=utf-8')
      .header('cache-control', 'max-age=3600')
      .send(IMPORTS_CSS),
  );

  const listPage = async (
    request: Parameters<PageKit['ctx']>[0],
    reply: Parameters<PageKit['send']>[0],
    extra: { form?: ImportForm; outcome?: ImportOutcome; imported?: string; error?: string },
    status = 200,
  ) => {
    const imports = await services.list(100);
    let outcome = extra.outcome ?? null;
    if (extra.imported !== undefined) {
      const done =
        imports.find((i) => i.id === extra.imported) ?? (await services.get(extra.imported))?.import;
      if (done) outcome = outcomeOf(done);
    }
    return send(
      reply,
      importsPage(ctx(request), {
        imports,
        form: extra.form ?? {},
        maxBytes: services.maxBytes,
        profiles: services.profiles ?? [],
        outcome,
        error: extra.error ?? null,
      }),
      status,
    );
  };

  // `?imported=<id>`: where an upload leads, showing what it imported (a reload uploads nothing again).
  app.get<{ Querystring: { imported?: string } }>('/imports', async (request, reply) => {
    const imported = request.query.imported;
    return listPage(request, reply, imported && /^\d{1,18}$/.test(imported) ? { imported } : {});
  });

  app.get<{ Params: { id: string } }>('/imports/:id', async (request, reply) => {
    const detail = await services.get(request.params.id);
    if (!detail) {
      return kit.problem(
        request,
        reply,
        404,
        'Import not found',
        `There is no import ${request.params.id}.`,
        back,
      );
    }
    return send(reply, importPage(ctx(request), detail));
  });

  app.post('/imports', async (request, reply) => {
    const refused = refuseUnless(request, reply, 'import-files', back);
    if (refused) return refused;
    const kind = field(request.body, 'kind');
    const profile = field(request.body, 'profile') || undefined;
    const account = field(request.body, 'account')?.trim() || undefined;
    const dryRun = field(request.body, 'dryRun') === '1';
    const form: ImportForm = {
      ...(kind === undefined ? {} : { kind }),
      ...(profile === undefined ? {} : { profile }),
      ...(account === undefined ? {} : { account }),
      dryRun,
    };
    if (!(IMPORT_KINDS as readonly string[]).includes(kind ?? '')) {
      return listPage(request, reply, { form, error: 'Choose what the file is.' }, 400);
    }
    const file = fileOf(request.body, 'file');
    if (!file || file.bytes.byteLength === 0) {
      return listPage(
        request,
        reply,
        { form, error: 'Choose a file to import (it must not be empty).' },
        400,
      );
    }
    const username = request.session?.username ?? 'unknown';
    try {
      const outcome = await services.run({
        kind: kind as ImportKind,
        fileName: file.fileName,
        bytes: file.bytes,
        user: username,
        ...(profile === undefined ? {} : { profile }),
        ...(account === undefined ? {} : { account }),
        ...(dryRun ? { dryRun: true } : {}),
      });
      kit.logger?.info(
        { importId: outcome.id, kind, fileName: file.fileName, username, dryRun },
        'file imported from the page',
      );
      // A dry run recorded nothing: its result shows at once; an import is shown after a redirect.
      if (outcome.id === null) return listPage(request, reply, { form, outcome });
      return reply.redirect(`${kit.base}/imports?imported=${encodeURIComponent(outcome.id)}`, 303);
    } catch (err) {
      if (!(err instanceof ImportRefusal)) throw err;
      return listPage(request, reply, { form, error: `Nothing imported. ${err.message}` }, 422);
    }
  });
}
