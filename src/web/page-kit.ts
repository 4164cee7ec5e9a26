/**
 * What a page module (src/web/*-routes.ts) needs from the page's plugin (`webRoutes`, src/web/app.ts):
 * the mount base, the clock, the page context of a request, the HTML sender, the styled error answer and
 * the role check. A module registers its routes on the same encapsulated instance, so the sign-in hook,
 * the CSRF check and the error handlers of app.ts apply to them unchanged.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { WebPermission } from '../domain/roles.ts';
import type { Logger } from '../logger.ts';
import type { SafeHtml } from './html.ts';
import type { BackLink, PageContext } from './views.ts';

export interface PageKit {
  /** The mount prefix without a trailing slash ('' at the root). */
  base: string;
  now: () => Date;
  logger?: Logger;
  /** The configured users' names (assignees of the exception queue). */
  users: readonly string[];
  ctx(request: FastifyRequest): PageContext;
  send(reply: FastifyReply, page: SafeHtml, status?: number): FastifyReply;
  /**
   * An error as the page's own styled page for a browser (leading `back`, default the reports), plain
   * text for anything else.
   */
  problem(
    request: FastifyRequest,
    reply: FastifyReply,
    status: number,
    title: string,
    message: string,
    back?: BackLink,
  ): FastifyReply;
  /** Refuses (403) a signed-in user whose role lacks the permission; null when allowed. */
  refuseUnless(
    request: FastifyRequest,
    reply: FastifyReply,
    permission: WebPermission,
    back?: BackLink,
  ): FastifyReply | null;
}

type FormBody = Record<string, string | string[] | undefined>;

/** One field of a parsed form (the first value when repeated). */
export function field(body: unknown, name: string): string | undefined {
  const value = (body as FormBody | undefined)?.[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Every value of a repeated form field (checkboxes). */
export function fields(body: unknown, name: string): string[] {
  const value = (body as FormBody | undefined)?.[name];
  return value === undefined ? [] : Array.isArray(value) ? value : [value];
}
