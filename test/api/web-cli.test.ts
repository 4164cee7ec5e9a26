/**
 * `payrecon web` on its own (the production layout) serves `/api/v1` beside the page: the document, 401
 * without a token, the data with one; every response validated against the served document, and the
 * token never in what the process writes (debug level).
 */

import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiToken } from '../../src/domain/api-tokens.ts';
import { hashPassword } from '../../src/web/auth.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { waitFor } from '../helpers/wait.ts';

import { OpenApiValidator } from './openapi-validator.ts';

const ROOT = join(import.meta.dirname, '../..');
let tdb: TestDatabase;
let dataDir: string;

beforeAll(async () => {
  tdb = await createTestDatabase();
  dataDir = mkdtempSync(join(tmpdir(), 'payrecon-api-web-'));
});

afterAll(async () => {
  await tdb?.drop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

describe('payrecon web', () => {
  it('serves /api/v1 beside the page, behind the API tokens', async () => {
    const { token, entry } = await createApiToken('erp', ['read']);
    const web = spawn(process.execPath, ['bin/payrecon.mjs', 'web', '--port', '0'], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH,
        DATABASE_URL: tdb.url,
        PAYRECON_DATA_DIR: dataDir,
        PAYRECON_WEB_USERS: JSON.stringify([
          { username: 'ops', passwordHash: await hashPassword('ops-password') },
        ]),
        PAYRECON_API_TOKENS: JSON.stringify([entry]),
        LOG_LEVEL: 'debug',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    web.stdout?.on('data', (c: Buffer) => {
      log += c.toString('utf8');
    });
    web.stderr?.on('data', (c: Buffer) => {
      log += c.toString('utf8');
    });
    try {
      const url = await waitFor(
        'payrecon web to listen',
        async () => /"address":"(http:\/\/[^"]+)".*finance page listening/.exec(log)?.[1],
        60_000,
      ).catch((err: Error) => {
        throw new Error(`${err.message}\n${log}`);
      });
      const doc = await fetch(`${url}/api/v1/openapi.json`);
      expect(doc.status).toBe(200);
      const validator = new OpenApiValidator((await doc.json()) as Record<string, unknown>, '/api/v1');
      const get = async (path: string, auth?: string) => {
        const res = await fetch(`${url}/api/v1${path}`, auth ? { headers: { authorization: auth } } : {});
        const body = await res.text();
        validator.validate(
          'GET',
          `/api/v1${path}`,
          res.status,
          res.headers.get('content-type') ?? undefined,
          body,
        );
        return { status: res.status, body };
      };
      expect((await get('/balances')).status).toBe(401);
      expect((await get('/exceptions', `Bearer ${token}x`)).status).toBe(401);
      const ok = await get('/exceptions?state=open', `Bearer ${token}`);
      expect(ok.status).toBe(200);
      expect(JSON.parse(ok.body)).toEqual({ items: [], nextCursor: null });
      expect((await get('/closes', `Bearer ${token}`)).status).toBe(200);
      expect(log).not.toContain(token.slice(4));
    } finally {
      const exited = new Promise((r) => web.once('exit', r));
      web.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
      if (web.exitCode === null) web.kill('SIGKILL');
    }
  }, 90_000);
});
