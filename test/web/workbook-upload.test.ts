/**
 * The exception workbook uploaded back over HTTP, against a real server and database: on the page (a
 * multipart form behind sign-in and its CSRF token; operators and controllers, never viewers; a refusal
 * lists every refused row and decides nothing) and through `POST /api/v1/exceptions/decisions` (the
 * xlsx bytes, scope exceptions:write; approving takes exceptions:approve; 422 names each refused row).
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX, buildApiApp } from '../../src/api/app.ts';
import { applyObservations } from '../../src/db/ledger/service.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import { type ApiTokenEntry, createApiToken } from '../../src/domain/api-tokens.ts';
import type { Observation } from '../../src/domain/observation.ts';
import { DECISION_WORKBOOK_MAX_BYTES } from '../../src/reports/decision-workbook.ts';
import { writeExceptionWorkbook } from '../../src/reports/exception-workbook.ts';
import { ReportRunner } from '../../src/reports/runs.ts';
import { buildWebApp } from '../../src/web/app.ts';
import { hashPassword } from '../../src/web/auth.ts';
import { ledgerWebServices } from '../../src/web/services.ts';
import { obs } from '../db/fixtures.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { fillDecisions } from '../reports/decision-fill.ts';

const PASSWORD = 'upload test pass phrase';
const XLSX = 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet';

let t: TestDatabase;
let dir: string;
let runner: ReportRunner;
let web: FastifyInstance;
let api: FastifyInstance;
let webBase: string;
let apiBase: string;
let writer: { token: string; entry: ApiTokenEntry };
let approver: { token: string; entry: ApiTokenEntry };
let reader: { token: string; entry: ApiTokenEntry };
let n = 0;

const apply = (o: Observation[]) => withLedgerTransaction(t.db, (trx) => applyObservations(trx, o));

async function illegal(account: string): Promise<string> {
  await apply([
    { ...obs('deposit', 'd1', 'COMPLETED', 1), account } as Observation,
    { ...obs('deposit', 'd1', 'PENDING', 2), account } as Observation,
  ]);
  return (await exceptionOf(account)).id;
}

const exceptionOf = (account: string) =>
  t.db
    .selectFrom('exceptions')
    .selectAll()
    .where('merchant_account', '=', account)
    .where('type', '=', 'ILLEGAL_TRANSITION')
    .executeTakeFirstOrThrow();

async function download(): Promise<Buffer> {
  const now = new Date();
  const day = now.toISOString().slice(0, 10);
  const out = join(dir, `exceptions-${++n}.xlsx`);
  await writeExceptionWorkbook(t.db, {
    period: {
      from: day,
      to: day,
      start: new Date(now.getTime() - 86_400_000),
      end: new Date(now.getTime() + 60_000),
      timeZone: 'UTC',
      cutoff: '00:00',
    },
    account: null,
    out,
    now: new Date(now.getTime() + 1_000),
  });
  return readFile(out);
}

/** A browser's cookies, kept across requests. */
class Jar {
  private readonly cookies = new Map<string, string>();
  header(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }
  take(res: Response): void {
    for (const c of res.headers.getSetCookie()) {
      const [pair = ''] = c.split(';');
      const at = pair.indexOf('=');
      this.cookies.set(pair.slice(0, at), pair.slice(at + 1));
    }
  }
  async fetch(path: string, init: RequestInit = {}): Promise<Response> {
    const res = await fetch(`${webBase}${path}`, {
      ...init,
      redirect: 'manual',
      headers: { ...(init.headers as Record<string, string>), cookie: this.header() },
    });
    this.take(res);
    return res;
  }
}

const csrfOf = (body: string) => /name="_csrf" value="([^"]+)"/.exec(body)?.[1] ?? '';

async function signIn(username: string): Promise<Jar> {
  const jar = new Jar();
  const login = await jar.fetch('/login');
  const res = await jar.fetch('/login', {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ _csrf: csrfOf(await login.text()), username, password: PASSWORD }).toString(),
  });
  expect(res.status).toBe(303);
  return jar;
}

async function uploadPage(jar: Jar, bytes: Uint8Array, csrf?: string): Promise<Response> {
  const token = csrf ?? csrfOf(await (await jar.fetch('/exceptions')).text());
  const form = new FormData();
  form.set('_csrf', token);
  form.set('workbook', new Blob([bytes], { type: XLSX }), 'exceptions.xlsx');
  return jar.fetch('/exceptions/decisions', { method: 'POST', body: form });
}

const postApi = (token: string, body: Uint8Array | string, type = XLSX) =>
  fetch(`${apiBase}${API_PREFIX}/exceptions/decisions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': type },
    body,
  });

beforeAll(async () => {
  t = await createTestDatabase();
  dir = await mkdtemp(join(tmpdir(), 'payrecon-upload-'));
  runner = new ReportRunner({ db: t.db, dir, timeZone: 'UTC' });
  const passwordHash = await hashPassword(PASSWORD);
  web = await buildWebApp({
    users: [
      { username: 'otto', passwordHash, role: 'operator' },
      { username: 'carla', passwordHash, role: 'controller' },
      { username: 'vera', passwordHash, role: 'viewer' },
    ],
    sessionSecret: 'upload-test-secret-0123456789-abcdefghijklmn',
    timeZone: 'UTC',
    services: ledgerWebServices(t.db, runner),
  });
  webBase = await web.listen({ host: '127.0.0.1', port: 0 });
  writer = await createApiToken('erp', ['read', 'exceptions:write']);
  approver = await createApiToken('controller-bot', ['exceptions:write', 'exceptions:approve']);
  reader = await createApiToken('reader', ['read']);
  api = await buildApiApp({
    db: t.db,
    reports: runner,
    tokens: [writer.entry, approver.entry, reader.entry],
  });
  apiBase = await api.listen({ host: '127.0.0.1', port: 0 });
}, 60_000);

afterAll(async () => {
  await web?.close();
  await api?.close();
  await runner?.idle();
  await t?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('the workbook uploaded on the page', () => {
  it('an operator sees the upload form; a viewer neither sees it nor may post', async () => {
    const otto = await signIn('otto');
    expect(await (await otto.fetch('/exceptions')).text()).toContain('id="workbook-upload"');
    const vera = await signIn('vera');
    const page = await (await vera.fetch('/exceptions')).text();
    expect(page).not.toContain('id="workbook-upload"');
    const a = await illegal('page-viewer');
    const filled = await fillDecisions(await download(), { [a]: { decision: 'keep-ledger', note: 'no' } });
    const res = await uploadPage(vera, filled.bytes, csrfOf(page));
    expect(res.status).toBe(403);
    expect((await exceptionOf('page-viewer')).state).toBe('open');
  });

  it('refuses a form without its CSRF token', async () => {
    const otto = await signIn('otto');
    const a = (await exceptionOf('page-viewer')).id;
    const filled = await fillDecisions(await download(), { [a]: { decision: 'keep-ledger', note: 'x' } });
    const res = await uploadPage(otto, filled.bytes, 'not-the-token');
    expect(res.status).toBe(403);
    expect((await exceptionOf('page-viewer')).state).toBe('open');
  });

  it('decides every row or lists every refused row and decides none', async () => {
    const otto = await signIn('otto');
    const [a, b, c] = [
      (await exceptionOf('page-viewer')).id,
      await illegal('page-b'),
      await illegal('page-c'),
    ];
    const bad = await fillDecisions(await download(), {
      [a]: { decision: 'keep-ledger', note: 'kept after checking with the provider' },
      [b]: { decision: 'approve' },
      [c]: { decision: 'accept-provider' },
    });
    const refused = await uploadPage(otto, bad.bytes);
    expect(refused.status).toBe(422);
    const body = await refused.text();
    const lines = [...body.matchAll(/<li>([^<]*)<\/li>/g)].map((m) => m[1]);
    expect(lines).toEqual([
      `Exceptions row ${bad.rows[b]}: approve: a controller approves or rejects a proposal`,
      `Exceptions row ${bad.rows[c]}: Note: required for accept-provider (why the decision is right)`,
    ]);
    for (const acc of ['page-viewer', 'page-b', 'page-c'])
      expect((await exceptionOf(acc)).state).toBe('open');

    const good = await fillDecisions(await download(), {
      [a]: { decision: 'keep-ledger', note: 'kept after checking with the provider' },
      [c]: { decision: 'accept-provider', note: 'the provider reopened it' },
    });
    const done = await uploadPage(otto, good.bytes);
    expect(done.status).toBe(303);
    const location = done.headers.get('location') ?? '';
    expect(location).toMatch(/\/exceptions\?done=workbook&decided=1&proposed=1&approved=0&rejected=0$/);
    expect(await (await otto.fetch(location)).text()).toContain(
      'Workbook decisions applied: 1 decided, 1 proposed.',
    );
    expect(await exceptionOf('page-viewer')).toMatchObject({ state: 'resolved', resolved_by: 'otto' });
    expect(await exceptionOf('page-c')).toMatchObject({ state: 'open', proposal: { by: 'otto' } });

    // The controller approves the proposal from a new workbook.
    const carla = await signIn('carla');
    const approve = await fillDecisions(await download(), { [c]: { decision: 'approve' } });
    const approved = await uploadPage(carla, approve.bytes);
    expect(approved.status).toBe(303);
    expect(approved.headers.get('location')).toMatch(/approved=1/);
    expect(await exceptionOf('page-c')).toMatchObject({ state: 'resolved', resolved_by: 'carla' });
  });

  it('refuses a file that is not the workbook, and one larger than the cap', async () => {
    const otto = await signIn('otto');
    const notXlsx = await uploadPage(otto, new TextEncoder().encode('id,decision\n1,keep-ledger\n'));
    expect(notXlsx.status).toBe(422);
    expect(await notXlsx.text()).toContain('file: not an xlsx workbook');
    const huge = await uploadPage(otto, new Uint8Array(DECISION_WORKBOOK_MAX_BYTES + 128 * 1024));
    expect(huge.status).toBe(413);
  });
});

describe('POST /api/v1/exceptions/decisions', () => {
  it('decides from the xlsx bytes; approving takes exceptions:approve; 422 names each refused row', async () => {
    const [d, e] = [await illegal('api-d'), await illegal('api-e')];
    const wb = await fillDecisions(await download(), {
      [d]: { decision: 'accept-provider', note: 'the provider is right' },
      [e]: { decision: 'keep-ledger', note: 'the ledger is right' },
    });
    // A read-only token may not; the wrong content type is refused.
    expect((await postApi(reader.token, wb.bytes)).status).toBe(403);
    expect((await postApi(writer.token, '{}', 'application/json')).status).toBe(415);
    const res = await postApi(writer.token, wb.bytes);
    const out = (await res.json()) as Record<string, unknown>;
    expect(res.status, JSON.stringify(out)).toBe(200);
    expect(out).toMatchObject({
      decided: 1,
      proposed: 1,
      approved: 0,
      rejected: 0,
      rows: [
        { sheet: 'Exceptions', row: wb.rows[d], id: d, decision: 'accept-provider', outcome: 'proposed' },
        { sheet: 'Exceptions', row: wb.rows[e], id: e, decision: 'keep-ledger', outcome: 'decided' },
      ],
    });
    expect(await exceptionOf('api-d')).toMatchObject({ state: 'open', proposal: { by: 'erp' } });

    const approve = await fillDecisions(await download(), { [d]: { decision: 'approve' } });
    const refused = await postApi(writer.token, approve.bytes);
    expect(refused.status).toBe(422);
    const problem = (await refused.json()) as {
      detail: string;
      errors: { in: string; field: string; rule: string }[];
    };
    expect(problem.errors).toEqual([
      {
        in: 'body',
        field: `Exceptions row ${approve.rows[d]}`,
        rule: 'approve: a controller approves or rejects a proposal',
      },
    ]);
    expect(problem.detail).toMatch(/^nothing decided: 1 row refused\n/);
    const ok = await postApi(approver.token, approve.bytes);
    expect(ok.status).toBe(200);
    expect(await exceptionOf('api-d')).toMatchObject({ state: 'resolved', resolved_by: 'controller-bot' });
    // Over the cap: 413.
    expect((await postApi(writer.token, new Uint8Array(DECISION_WORKBOOK_MAX_BYTES + 1))).status).toBe(413);
  });
});
