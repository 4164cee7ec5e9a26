/** The page and the API of a bench, signed in: the page with a session cookie, the API with a read token. */
import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { API_PREFIX, buildApiApp } from '../src/api/app.ts';
import type { Db } from '../src/db/schema.ts';
import { createApiToken } from '../src/domain/api-tokens.ts';
import { ReportRunner } from '../src/reports/runs.ts';
import { buildWebApp } from '../src/web/app.ts';
import { hashPassword } from '../src/web/auth.ts';
import { ledgerWebServices } from '../src/web/services.ts';

/** The page over `db`, signed in as a finance user: the app and the session's cookie header. */
export async function signedInWeb(db: Db, dir: string): Promise<{ app: FastifyInstance; cookie: string }> {
  const runner = new ReportRunner({ db, dir, timeZone: 'UTC' });
  const app = await buildWebApp({
    users: [{ username: 'finance', passwordHash: await hashPassword('bench pass phrase') }],
    sessionSecret: randomBytes(32).toString('hex'),
    timeZone: 'UTC',
    services: ledgerWebServices(db, runner),
  });
  const cookies = new Map<string, string>();
  const take = (res: { cookies: { name: string; value: string }[] }) => {
    for (const c of res.cookies) cookies.set(c.name, c.value);
  };
  const jar = () => [...cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  const page = await app.inject({ method: 'GET', url: '/login', headers: { accept: 'text/html' } });
  take(page);
  const csrf = /name="_csrf" value="([^"]+)"/.exec(page.body)?.[1] ?? '';
  const res = await app.inject({
    method: 'POST',
    url: '/login',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: jar() },
    payload: new URLSearchParams({
      _csrf: csrf,
      username: 'finance',
      password: 'bench pass phrase',
    }).toString(),
  });
  take(res);
  if (res.statusCode !== 303) throw new Error(`sign-in answered ${res.statusCode}`);
  return { app, cookie: jar() };
}

/** The API over `db` with a read token: the app and the authorization header's value. */
export async function signedInApi(
  db: Db,
  dir: string,
): Promise<{ app: FastifyInstance; authorization: string; prefix: string }> {
  const { token, entry } = await createApiToken('bench', ['read']);
  const app = await buildApiApp({
    db,
    reports: new ReportRunner({ db, dir, timeZone: 'UTC' }),
    tokens: [entry],
  });
  return { app, authorization: `Bearer ${token}`, prefix: API_PREFIX };
}
