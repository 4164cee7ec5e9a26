/**
 * The webhook routes under attack, against the whole pipeline (`payrecon up`'s parts over the real
 * embedded broker and registry, the machine's PostgreSQL) and the sandbox provider over HTTP, behind a
 * proxy that counts every provider call. Two accounts share the sandbox's keys: `main` with the default
 * mode (enforce) and `open` with signatures off, as an account whose keys are not checked.
 *
 * - forged and replayed notifications of each kind to `main`: refused, nothing on the topic, no provider
 *   call, nothing in the ledger;
 * - the same to `open`: accepted as a hint, yet nothing they say (external id, bank reference) reaches
 *   a reference or a link, and nothing is booked;
 * - a captured cashout notification replayed (its `control` signs only the external id): one provider
 *   read per dedupe window;
 * - 10,000 forged unknown ids from one sender: the rate limit answers most with 429, and the provider
 *   calls the rest cause are bounded (each unknown id is read at most `notFoundAttempts` times, then no
 *   longer polled).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JOBS_OFF, loadConfig } from '../../src/config.ts';
import { FOLD_SETTLE_MS } from '../../src/producers/webhook-ingress.ts';
import { createProviderClient, type ProviderClient } from '../../src/provider/client.ts';
import { cashoutControl, depositAuthorization, formatXDate } from '../../src/provider/signing.ts';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/main.ts';
import { type RunningPipeline, startPipeline } from '../../src/wiring.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { waitFor } from '../helpers/wait.ts';
import { TEST_EMBEDDED } from '../pipeline/helpers.ts';
import { PAYER, quiet, sandboxAccount, uniqueRef } from '../producers/helpers.ts';

const NOT_FOUND_ATTEMPTS = 2;
const PER_SENDER = 100;
const TOTAL = 200;
const FLOOD = 10_000;
const NOTIFICATION_TOPIC = 'provider.notification.received.v1';

interface ProviderCall {
  method: string;
  path: string;
  body: string;
}

let tdb: TestDatabase;
let dir: string;
let sandbox: RunningSandbox;
let proxy: Server;
let pipeline: RunningPipeline;
let client: ProviderClient;
let http: Pool;
const calls: ProviderCall[] = [];

/** A proxy in front of the sandbox that records every call payrecon makes to the provider. */
async function startCountingProxy(target: string): Promise<Server> {
  const to = new URL(target);
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      calls.push({ method: req.method ?? '', path: req.url ?? '', body: body.toString('utf8') });
      const out = httpRequest(
        { host: to.hostname, port: to.port, method: req.method, path: req.url, headers: req.headers },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      out.on('error', () => res.writeHead(502).end());
      out.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

/** Status reads of one entity the proxy saw. */
function statusReads(kind: 'deposit' | 'refund' | 'cashout', id: string): number {
  return calls.filter((c) =>
    kind === 'cashout'
      ? c.path.startsWith('/v3/cashout/status') && new RegExp(`"cashout_id":"?${id}"?[,}]`).test(c.body)
      : c.method === 'GET' && c.path === `/v3/${kind}s/${id}`,
  ).length;
}

async function topicEnd(): Promise<number> {
  const admin = pipeline.infra.kafka.admin();
  await admin.connect();
  try {
    const offsets = await admin.fetchTopicOffsets(NOTIFICATION_TOPIC);
    return offsets.reduce((n, p) => n + Number(p.high), 0);
  } finally {
    await admin.disconnect();
  }
}

async function ledgerRows(ids: readonly string[]): Promise<{ entries: number; exceptions: number }> {
  const { rows } = await sql<{ entries: string; exceptions: string }>`
    SELECT (SELECT count(*) FROM journal_entries WHERE entity_id = ANY(${ids}::text[])) AS entries,
      (SELECT count(*) FROM exceptions WHERE entity_id = ANY(${ids}::text[])) AS exceptions`.execute(tdb.db);
  return { entries: Number(rows[0]!.entries), exceptions: Number(rows[0]!.exceptions) };
}

async function mirrorOf(account: string, kind: string, id: string) {
  const { rows } = await sql<{
    status: string | null;
    external_ref: string | null;
    bank_reference: string | null;
    intent_id: string | null;
  }>`SELECT status, external_ref, bank_reference, intent_id FROM mirrors
     WHERE merchant_account = ${account} AND entity_kind = ${kind} AND entity_id = ${id}`.execute(tdb.db);
  return rows[0];
}

const secrets = () => sandboxAccount({ url: '', ccUrl: '' });

function depositRequest(
  account: string,
  kind: 'deposit' | 'refund',
  id: string,
  signing: 'none' | 'forged' | 'stale' | 'valid',
) {
  const body = JSON.stringify({ [`${kind}_id`]: Number(id) });
  const at = signing === 'stale' ? new Date(Date.now() - 3_600_000) : new Date();
  const xDate = formatXDate(at);
  const s = secrets();
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (signing !== 'none') {
    headers['x-date'] = xDate;
    headers['x-login'] = s.depositLogin;
    headers.authorization = depositAuthorization({
      xDate,
      xLogin: s.depositLogin,
      body,
      secret: signing === 'forged' ? 'not-the-secret' : s.depositSecret,
    });
  }
  return { path: `/webhooks/${account}/${kind}s`, method: 'POST' as const, headers, body };
}

function cashoutRequest(
  account: string,
  fields: { cashoutId: string; externalId: string; bankReference?: string; date?: string },
  signing: 'none' | 'forged' | 'valid',
) {
  const s = secrets();
  const form = new URLSearchParams({
    cashout_id: fields.cashoutId,
    external_id: fields.externalId,
    date: fields.date ?? new Date().toISOString().slice(0, 19).replace('T', ' '),
    bank_reference_id: fields.bankReference ?? '',
    comments: '',
    status_reason: '',
    ...(signing === 'none'
      ? {}
      : {
          control:
            signing === 'valid'
              ? cashoutControl(fields.externalId, s.cashoutSecret)
              : cashoutControl(fields.externalId, 'not-the-secret'),
        }),
  });
  return {
    path: `/webhooks/${account}/cashouts`,
    method: 'POST' as const,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: form.toString(),
  };
}

async function send(r: {
  path: string;
  method: 'POST';
  headers: Record<string, string>;
  body: string;
}): Promise<number> {
  const res = await http.request(r);
  await res.body.dump();
  return res.statusCode;
}

/** A real cashout at the provider, made by the merchant directly (no intent recorded). */
async function realCashout(): Promise<{ id: string; externalId: string }> {
  const externalId = uniqueRef('ext');
  const res = await client.createCashout({
    external_id: externalId,
    country: 'BR',
    currency: 'BRL',
    amount: 25_00n,
    document_id: PAYER.document,
    beneficiary_name: 'Ana',
    beneficiary_lastname: 'Silva',
    bank_code: '341',
    bank_account: '123456-7',
    bank_branch: '0001',
    account_type: 'C',
    notification_url: 'http://127.0.0.1:1/nowhere',
  });
  return { id: String(res.cashout_id), externalId };
}

let unknownId = 7_100_000_000;
const nextUnknown = () => String(unknownId++);

beforeAll(async () => {
  tdb = await createTestDatabase();
  dir = mkdtempSync(join(tmpdir(), 'payrecon-webhook-attacks-'));
  // The provider notifies nobody on its own: every notification in this file is the attacker's.
  sandbox = await startSandbox({ seed: 37, auto: { enabled: false } });
  proxy = await startCountingProxy(sandbox.url);
  const proxied = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  const { webhookSignatureMode: _mode, ...keys } = sandboxAccount({ url: proxied, ccUrl: sandbox.ccUrl });
  const config = loadConfig({
    DATABASE_URL: tdb.url,
    PAYRECON_DATA_DIR: join(dir, 'data'),
    PAYRECON_WEB_PORT: '0',
    LOG_LEVEL: 'error',
    // `main` names no mode: enforce is the default where the keys are configured.
    PAYRECON_ACCOUNTS: JSON.stringify([
      { ...keys, name: 'main' },
      { ...keys, name: 'open', webhookSignatureMode: 'off' },
    ]),
    KAFKA_TOPIC_PARTITIONS: '2',
    PAYRECON_WEBHOOK_RATE_PER_SENDER: String(PER_SENDER),
    PAYRECON_WEBHOOK_RATE_TOTAL: String(TOTAL),
    PAYRECON_POLL_NOT_FOUND_ATTEMPTS: String(NOT_FOUND_ATTEMPTS),
    PAYRECON_POLL_FIRST_DELAY_SECONDS: '1',
    // A reading is one call (no client retry), and a poll round's lease outlasts any round of the flood.
    PAYRECON_POLL_MIN_INTERVAL_SECONDS: '30',
    PAYRECON_PROVIDER_RETRIES: '0',
    ...JOBS_OFF,
  });
  expect(config.accounts.map((a) => a.webhookSignatureMode)).toEqual(['enforce', 'off']);
  pipeline = await startPipeline(config, {
    embedded: TEST_EMBEDDED,
    print: () => undefined,
    pollerOverrides: { idleMs: 200 },
  });
  client = createProviderClient(sandboxAccount(sandbox), { retries: 0, logger: quiet });
  http = new Pool(pipeline.url, { connections: 32 });
}, 180_000);

afterAll(async () => {
  await http?.close();
  await pipeline?.stop();
  await new Promise<void>((resolve) => (proxy ? proxy.close(() => resolve()) : resolve()));
  await sandbox?.close();
  await tdb?.drop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('webhooks with the keys configured (enforce, the default)', () => {
  it('refuses forged and replayed notifications of each kind: nothing published, read or booked', async () => {
    const real = await realCashout();
    const ids = [nextUnknown(), nextUnknown(), nextUnknown()];
    const before = { topic: await topicEnd(), calls: calls.length };
    const attacks = [
      depositRequest('main', 'deposit', ids[0]!, 'none'),
      depositRequest('main', 'deposit', ids[0]!, 'forged'),
      depositRequest('main', 'deposit', ids[0]!, 'stale'),
      depositRequest('main', 'refund', ids[1]!, 'none'),
      depositRequest('main', 'refund', ids[1]!, 'forged'),
      depositRequest('main', 'refund', ids[1]!, 'stale'),
      cashoutRequest('main', { cashoutId: ids[2]!, externalId: 'ext-chosen-by-attacker' }, 'none'),
      cashoutRequest('main', { cashoutId: ids[2]!, externalId: 'ext-chosen-by-attacker' }, 'forged'),
      cashoutRequest(
        'main',
        { cashoutId: real.id, externalId: real.externalId, bankReference: 'FORGED-BANK-REF' },
        'forged',
      ),
    ];
    for (const a of attacks) expect(await send(a), `${a.path} ${a.body}`).toBe(401);
    // A good notification after them is published: the topic is read, not empty by accident.
    const good = depositRequest('main', 'deposit', nextUnknown(), 'valid');
    expect(await send(good)).toBe(200);
    expect((await topicEnd()) - before.topic).toBe(1);
    await waitFor('the good one read', () => calls.length > before.calls);
    expect(statusReads('deposit', ids[0]!)).toBe(0);
    expect(statusReads('refund', ids[1]!)).toBe(0);
    expect(statusReads('cashout', ids[2]!)).toBe(0);
    expect(statusReads('cashout', real.id)).toBe(0);
    expect(await ledgerRows([...ids, real.id])).toEqual({ entries: 0, exceptions: 0 });
    expect(await mirrorOf('main', 'cashout', real.id)).toBeUndefined();
    for (const id of ids) expect(await mirrorOf('main', 'deposit', id)).toBeUndefined();
  }, 60_000);

  it('a replayed cashout notification (its control signs only the external id) costs one read per window', async () => {
    const real = await realCashout();
    const before = await topicEnd();
    const captured = cashoutRequest('main', { cashoutId: real.id, externalId: real.externalId }, 'valid');
    expect(await send(captured)).toBe(200);
    const firstAt = Date.now();
    const mirror = await waitFor('the cashout mirrored', async () => {
      const m = await mirrorOf('main', 'cashout', real.id);
      return m?.status ? m : undefined;
    });
    // The status fetcher's one read (the poller reads it too from a second on: its schedule, not the hint's).
    expect(statusReads('cashout', real.id)).toBe(1);
    // A replay: the same bytes once the time in which they could still be a second change has passed.
    await waitFor('the settle time passed', () => Date.now() - firstAt > FOLD_SETTLE_MS);
    const answers: number[] = [];
    for (let i = 0; i < 20; i++) answers.push(await send(captured));
    expect(answers.every((s) => s === 200)).toBe(true);
    // One event for the 21 notifications: the replays reach neither the topic nor, through it, the provider.
    expect((await topicEnd()) - before).toBe(1);
    expect(mirror.external_ref).toBe(real.externalId);
    expect(mirror.bank_reference).toBeNull();
  }, 60_000);
});

describe('webhooks without their keys checked (signatures off)', () => {
  it('accepts forged notifications as hints only: no reference, bank reference, link or booking from them', async () => {
    const real = await realCashout();
    const ids = [nextUnknown(), nextUnknown(), nextUnknown()];
    const before = await topicEnd();
    const hints = [
      depositRequest('open', 'deposit', ids[0]!, 'none'),
      depositRequest('open', 'refund', ids[1]!, 'forged'),
      cashoutRequest(
        'open',
        { cashoutId: ids[2]!, externalId: 'ext-chosen-by-attacker', bankReference: 'FORGED-1' },
        'forged',
      ),
      cashoutRequest(
        'open',
        { cashoutId: real.id, externalId: 'ext-chosen-by-attacker-2', bankReference: 'FORGED-2' },
        'none',
      ),
    ];
    for (const h of hints) expect(await send(h)).toBe(200);
    expect((await topicEnd()) - before).toBe(hints.length);
    const mirrors = await waitFor('every hint read and applied', async () => {
      const m = await Promise.all([
        mirrorOf('open', 'deposit', ids[0]!),
        mirrorOf('open', 'refund', ids[1]!),
        mirrorOf('open', 'cashout', ids[2]!),
        mirrorOf('open', 'cashout', real.id),
      ]);
      return m.every((x) => x !== undefined) && m[3]!.status !== null ? m : undefined;
    });
    // Unknown ids: not found, no reference of the sender's.
    for (const m of mirrors.slice(0, 3))
      expect(m).toMatchObject({ status: null, external_ref: null, intent_id: null });
    // The real cashout: the provider's external id, no bank reference the provider did not give.
    expect(mirrors[3]).toMatchObject({
      external_ref: real.externalId,
      bank_reference: null,
      intent_id: null,
    });
    expect(await ledgerRows(ids)).toEqual({ entries: 0, exceptions: 0 });
    expect((await ledgerRows([real.id])).entries).toBe(0);
  }, 60_000);

  it('10,000 forged unknown ids from one sender: most refused with 429, and the provider calls are bounded', async () => {
    const before = { topic: await topicEnd(), calls: calls.length };
    const ids = Array.from({ length: FLOOD }, () => nextUnknown());
    const statuses = new Map<number, number>();
    let retryAfter: string | null = null;
    let next = 0;
    const started = Date.now();
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next < ids.length) {
          const id = ids[next++]!;
          const res = await http.request(depositRequest('open', 'deposit', id, 'none'));
          await res.body.dump();
          if (res.statusCode === 429) retryAfter ??= String(res.headers['retry-after']);
          statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
        }
      }),
    );
    const seconds = (Date.now() - started) / 1000;
    const accepted = statuses.get(200) ?? 0;
    expect(accepted + (statuses.get(429) ?? 0)).toBe(FLOOD);
    expect(retryAfter).toMatch(/^\d+$/);
    // The bucket: its burst (twice the rate) plus the rate for the time the flood took.
    expect(accepted).toBeLessThanOrEqual(2 * PER_SENDER + Math.ceil(PER_SENDER * seconds) + 1);
    expect((await topicEnd()) - before.topic).toBe(accepted);
    // Every accepted id is read, found unknown, polled until `notFoundAttempts` readings, then dropped.
    await waitFor(
      'the accepted ids read and dropped from polling',
      async () => {
        const { rows } = await sql<{ mirrors: string; scheduled: string }>`
          SELECT (SELECT count(*) FROM mirrors WHERE merchant_account = 'open' AND entity_id = ANY(${ids}::text[])) AS mirrors,
            (SELECT count(*) FROM poll_schedule WHERE merchant_account = 'open' AND entity_id = ANY(${ids}::text[])) AS scheduled`.execute(
          tdb.db,
        );
        return Number(rows[0]!.mirrors) === accepted && Number(rows[0]!.scheduled) === 0 ? true : undefined;
      },
      120_000,
    );
    const paths = new Set(ids.map((id) => `/v3/deposits/${id}`));
    const provider = calls.slice(before.calls).filter((c) => paths.has(c.path)).length;
    const per = new Map<string, number>();
    for (const c of calls.slice(before.calls))
      if (paths.has(c.path)) per.set(c.path, (per.get(c.path) ?? 0) + 1);
    const hist = new Map<number, number>();
    for (const n of per.values()) hist.set(n, (hist.get(n) ?? 0) + 1);
    expect(provider).toBeGreaterThanOrEqual(accepted);
    expect(provider).toBeLessThanOrEqual(accepted * NOT_FOUND_ATTEMPTS);
    expect(await ledgerRows(ids)).toEqual({ entries: 0, exceptions: 0 });
    console.info(
      `webhook flood: ${FLOOD} forged unknown ids in ${seconds.toFixed(1)} s, ${accepted} accepted, ${statuses.get(429) ?? 0} answered 429, ${provider} provider calls (at most ${NOT_FOUND_ATTEMPTS} per accepted id; reads per id: ${JSON.stringify(Object.fromEntries(hist))})`,
    );
  }, 300_000);
});
