/**
 * The exception page over a real ledger database: each exception shows its
 * facts and the rule; an ILLEGAL_TRANSITION is decided from the page (accepting the provider's status is
 * proposed by an operator and approved by a controller, a note required); a resolved exception reopened by a new fact says what changed and keeps
 * the earlier note and resolver visible.
 */
import Fastify, { type FastifyInstance, type LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { changeQueueItem } from '../../src/db/exceptions/queue-service.ts';
import { applyObservations, recordIntents } from '../../src/db/ledger/service.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import type { Observation } from '../../src/domain/observation.ts';
import { ReportRunner } from '../../src/reports/runs.ts';
import { webRoutes } from '../../src/web/app.ts';
import { hashPassword } from '../../src/web/auth.ts';
import { ledgerWebServices } from '../../src/web/services.ts';
import { intent, obs } from '../db/fixtures.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';

let t: TestDatabase;
let app: FastifyInstance;
let cookie = '';
let financeCookie = '';
const PASSWORD = 'correct horse battery';

const apply = (o: Observation[]) => withLedgerTransaction(t.db, (trx) => applyObservations(trx, o));
const csrfOf = (body: string): string => /name="_csrf" value="([^"]+)"/.exec(body)?.[1] ?? '';

function take(res: LightMyRequestResponse) {
  const jar = new Map(cookie ? cookie.split('; ').map((c) => c.split('=') as [string, string]) : []);
  for (const c of res.cookies) jar.set(c.name, c.value);
  cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
}

async function get(url: string) {
  const res = await app.inject({ method: 'GET', url, headers: { accept: 'text/html', cookie } });
  take(res);
  return res;
}

async function post(url: string, form: Record<string, string>) {
  const res = await app.inject({
    method: 'POST',
    url,
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
    payload: new URLSearchParams(form).toString(),
  });
  take(res);
  return res;
}

const rowOf = (body: string, id: string) => {
  const start = body.indexOf(`data-exception="${id}"`);
  return start < 0 ? '' : body.slice(start, body.indexOf('</tr>', start));
};

beforeAll(async () => {
  t = await createTestDatabase();
  app = Fastify();
  await app.register(webRoutes, {
    users: [
      { username: 'finance', passwordHash: await hashPassword(PASSWORD) },
      { username: 'carla', passwordHash: await hashPassword(PASSWORD), role: 'controller' },
    ],
    sessionSecret: 'a-test-session-secret-of-enough-length-0123456789',
    sessionTtlMs: 3_600_000,
    timeZone: 'UTC',
    services: ledgerWebServices(t.db, new ReportRunner({ db: t.db, dir: '/nonexistent', timeZone: 'UTC' })),
    prefix: '',
  });
  financeCookie = await signIn('finance');
});

/** Signs in as `username` (a fresh cookie jar); the jar's cookies. */
async function signIn(username: string): Promise<string> {
  cookie = '';
  const login = await get('/login');
  const res = await post('/login', { _csrf: csrfOf(login.body), username, password: PASSWORD });
  expect(res.statusCode).toBe(303);
  return cookie;
}

afterAll(async () => {
  await app?.close();
  await t?.drop();
});

describe('the exception page', () => {
  it("shows the facts, and decides an illegal move by accepting the provider's status", async () => {
    await withLedgerTransaction(t.db, (trx) => recordIntents(trx, [intent('deposit', 'w1', 10_000n)]));
    await apply([obs('deposit', 'w1', 'COMPLETED', 1), obs('deposit', 'w1', 'PENDING', 2)]);
    const ex = await t.db
      .selectFrom('exceptions')
      .select('id')
      .where('entity_id', '=', 'w1')
      .where('type', '=', 'ILLEGAL_TRANSITION')
      .executeTakeFirstOrThrow();
    const page = await get('/exceptions');
    const row = rowOf(page.body, ex.id);
    expect(row).toContain('ref-w1');
    expect(row).toContain('100.00 BRL');
    expect(row).toContain('COMPLETED');
    expect(row).toContain('no document allows');
    expect(row).toContain('value="accept-provider"');
    expect(row).toContain('value="keep-ledger"');
    // A plain resolve (a crafted form: the page offers none) would leave no decision: refused.
    const plain = await post(`/exceptions/${ex.id}`, {
      _csrf: csrfOf(page.body),
      action: 'resolve',
      note: 'looks fine',
    });
    expect(plain.statusCode).toBe(409);
    expect(plain.body).toContain('This exception is resolved by a decision');
    // A note is required.
    expect(
      (await post(`/exceptions/${ex.id}`, { _csrf: csrfOf(page.body), action: 'accept-provider' }))
        .statusCode,
    ).toBe(400);
    const done = await post(`/exceptions/${ex.id}`, {
      _csrf: csrfOf(page.body),
      action: 'accept-provider',
      note: 'chargeback reopened it',
    });
    expect(done.statusCode).toBe(303);
    expect(done.headers.location).toContain('done=proposed');
    const row0 = () =>
      t.db.selectFrom('exceptions').selectAll().where('id', '=', ex.id).executeTakeFirstOrThrow();
    // Proposed by an operator: nothing booked, and an operator cannot approve.
    expect(await row0()).toMatchObject({ state: 'open', proposal: { by: 'finance' } });
    expect(rowOf((await get('/exceptions')).body, ex.id)).toContain('decision waiting for approval');
    const waiting = await get(`/exceptions/${ex.id}`);
    expect(waiting.body).toContain('Waiting for approval');
    expect(waiting.body).not.toContain('value="approve"');
    const refused = await post(`/exceptions/${ex.id}`, { _csrf: csrfOf(waiting.body), action: 'approve' });
    expect(refused.statusCode).toBe(403);
    // A controller approves: booked now, in both names.
    await signIn('carla');
    const toApprove = await get(`/exceptions/${ex.id}`);
    expect(toApprove.body).toContain('value="approve"');
    const approved = await post(`/exceptions/${ex.id}`, { _csrf: csrfOf(toApprove.body), action: 'approve' });
    expect(approved.statusCode).toBe(303);
    cookie = financeCookie;
    const after = await row0();
    expect([after.state, after.resolved_by]).toEqual(['resolved', 'carla']);
    expect(after.decision).toMatchObject({ decision: 'accept-provider', by: 'carla', proposedBy: 'finance' });
    const resolved = await get('/exceptions?state=resolved');
    expect(rowOf(resolved.body, ex.id)).toContain('chargeback reopened it');
    // Deciding again is refused.
    const again = await post(`/exceptions/${ex.id}`, {
      _csrf: csrfOf(resolved.body),
      action: 'keep-ledger',
      note: 'x',
    });
    expect(again.statusCode).toBe(409);
  });

  it("writes the facts' amounts as the Amount column does (grouped), both sides of a mismatch", async () => {
    await withLedgerTransaction(t.db, (trx) => recordIntents(trx, [intent('deposit', 'w3', 157_954n)]));
    await apply([obs('deposit', 'w3', 'PENDING', 0, { amount: 150_000n })]);
    const ex = await t.db
      .selectFrom('exceptions')
      .select('id')
      .where('entity_id', '=', 'w3')
      .where('type', '=', 'AMOUNT_MISMATCH')
      .executeTakeFirstOrThrow();
    const row = rowOf((await get('/exceptions')).body, ex.id);
    expect(row).toContain('<dt>Intent</dt><dd>1,579.54 BRL</dd>');
    expect(row).toContain('<dt>Provider</dt><dd>1,500.00 BRL</dd>');
  });

  it('shows what changed when a new fact reopened an exception, the earlier note and resolver still visible', async () => {
    await withLedgerTransaction(t.db, (trx) => recordIntents(trx, [intent('deposit', 'w2', 10_000n)]));
    await apply([obs('deposit', 'w2', 'PENDING', 0, { amount: 9_000n })]);
    const ex = await t.db
      .selectFrom('exceptions')
      .select('id')
      .where('entity_id', '=', 'w2')
      .where('type', '=', 'AMOUNT_MISMATCH')
      .executeTakeFirstOrThrow();
    expect(
      await changeQueueItem(
        t.db,
        ex.id,
        { kind: 'state', state: 'resolved', note: 'partial payment confirmed' },
        'bea',
        new Date(),
      ),
    ).toBe('changed');
    await apply([obs('deposit', 'w2', 'PENDING', 1, { amount: 9_000n })]);
    expect(rowOf((await get('/exceptions')).body, ex.id)).toBe('');
    await apply([obs('deposit', 'w2', 'PENDING', 2, { amount: 8_000n })]);
    const row = rowOf((await get('/exceptions')).body, ex.id);
    expect(row).toContain('Reopened');
    expect(row).toContain('was: intent 10000 provider 9000; now: intent 10000 provider 8000');
    expect(row).toContain('Resolved before by bea');
    expect(row).toContain('partial payment confirmed');
    expect(row).toContain('80.00 BRL');
    expect(row).toContain('100.00 BRL');
  });
});
