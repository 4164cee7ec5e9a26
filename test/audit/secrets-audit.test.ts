/**
 * The secrets audit: the whole pipeline as `payrecon up` runs it, against the sandbox, with traffic
 * that includes card deposits (card data forwarded to the sandbox's card API), cashouts and refunds,
 * signed webhooks, web sign-ins and workbooks made from the page. Then every place payrecon writes to
 * is scanned (`scanForSecrets`): the pino lines of every part, every column of every table, every
 * message of every topic (DLQs included, raw and Avro-decoded), and the workbooks and CSVs. The known
 * secrets are the account's keys and passwords, the web password and its hash, the session secret, the
 * intents token, the card numbers and CVV used, and every Authorization / Payload-Signature value and
 * cashout `control` actually sent on the wire (captured from undici's diagnostics channel, which both
 * the sandbox's webhook sender and payrecon's provider client go through). Zero findings are allowed.
 * A control then plants one secret in each kind of place and the scanner must find each one.
 */

import diagnostics from 'node:diagnostics_channel';
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ExcelJS from 'exceljs';
import { sql } from 'kysely';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JOBS_OFF, loadConfig } from '../../src/config.ts';
import { createApiToken } from '../../src/domain/api-tokens.ts';
import { logger as rootLogger } from '../../src/logger.ts';
import { cashoutControl } from '../../src/provider/signing.ts';
import { DEFAULT_ACCOUNT } from '../../src/sandbox/accounts.ts';
import { loadCatalogue } from '../../src/sandbox/catalogue.ts';
import { ManualClock } from '../../src/sandbox/clock.ts';
import { type SandboxRun, startSandboxForUp } from '../../src/sandbox-part.ts';
import { hashPassword } from '../../src/web/auth.ts';
import { type RunningPipeline, startPipeline } from '../../src/wiring.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { waitFor } from '../helpers/wait.ts';
import { TEST_EMBEDDED } from '../pipeline/helpers.ts';
import { emptyStats, type Hit, type KnownSecret, type ScanStats, scanForSecrets } from './secrets-scan.ts';

const ENTITIES = Number(process.env.AUDIT_ENTITIES ?? 150);
const HOUR = 3_600_000;
const WEB_USER = 'auditor';
const WEB_PASSWORD = 'audit-web-password-7Qx2';
const SESSION_SECRET = 'audit-session-secret-0123456789-abcdefghijkl';

/** Captured pino output: every line any part wrote through the root logger (children share its stream). */
const captured: string[] = [];
const stream = (rootLogger as unknown as Record<symbol, { write(s: string): boolean }>)[
  pino.symbols.streamSym
]!;
const originalWrite = stream.write;
stream.write = (line: string) => {
  captured.push(line);
  return true;
};

/** Authorization and Payload-Signature values sent by any undici client in this process. */
const wire = new Set<string>();
/** The page's session tokens (the cookie's, without its signature): only their SHA-256 may be stored. */
const sessionTokens = new Set<string>();
let wireRequests = 0;
const onHeaders = (message: unknown) => {
  const { headers } = message as { headers: string | string[] };
  const text = Array.isArray(headers) ? headers.join('\r\n') : String(headers);
  wireRequests++;
  for (const line of text.split(/\r?\n/)) {
    const m = /^(authorization|payload-signature):\s*(.+)$/i.exec(line.trim());
    if (!m) continue;
    const value = m[2]!.trim();
    wire.add(value);
    const credential = value.split(' ').pop()!;
    if (credential !== value) wire.add(credential);
  }
};
diagnostics.subscribe('undici:client:sendHeaders', onHeaders);

describe('the secrets audit', () => {
  let tdb: TestDatabase;
  let dataDir: string;
  let pipeline: RunningPipeline;
  let sandboxRun: SandboxRun;
  let passwordHash: string;
  let apiToken: Awaited<ReturnType<typeof createApiToken>>;
  const clock = new ManualClock(Date.now());
  let sandboxApi = '';
  const stats: ScanStats = emptyStats();
  const logStats: ScanStats = emptyStats();
  let runSecrets: KnownSecret[] = [];
  const logModules: string[] = [];

  beforeAll(async () => {
    tdb = await createTestDatabase();
    dataDir = mkdtempSync(join(tmpdir(), 'payrecon-audit-'));
    passwordHash = await hashPassword(WEB_PASSWORD);
    apiToken = await createApiToken('audit', ['read', 'exceptions:write', 'intents:write']);
    const config = loadConfig({
      DATABASE_URL: tdb.url,
      PAYRECON_DATA_DIR: dataDir,
      PAYRECON_WEB_PORT: '0',
      // Everything a part logs, debug lines included.
      LOG_LEVEL: 'debug',
      PAYRECON_WEB_USERS: JSON.stringify([{ username: WEB_USER, passwordHash }]),
      PAYRECON_SESSION_SECRET: SESSION_SECRET,
      PAYRECON_API_TOKENS: JSON.stringify([apiToken.entry]),
      PAYRECON_POLL_CONCURRENCY: '8',
      PAYRECON_POLL_MIN_INTERVAL_SECONDS: '2',
      PAYRECON_SANDBOX_TRAFFIC: 'true',
      ...JOBS_OFF,
    });
    pipeline = await startPipeline(config, {
      embedded: TEST_EMBEDDED,
      sandbox: async ({ webBaseUrl, logger }) => {
        sandboxRun = await startSandboxForUp({
          webBaseUrl,
          logger,
          clock,
          trafficRate: 0,
          clientRetries: 3,
          auto: { minDelayMs: 1 * HOUR, maxDelayMs: 4 * HOUR },
          faults: { lateRejection: { cashoutRate: 0.2, refundRate: 0.2, delayMs: 6 * HOUR } },
        });
        return sandboxRun;
      },
      pollerOverrides: { idleMs: 250 },
      print: () => undefined,
    });
    sandboxApi = sandboxRun.urls.api!;
  }, 180_000);

  afterAll(async () => {
    diagnostics.unsubscribe('undici:client:sendHeaders', onHeaders);
    await pipeline?.stop();
    stream.write = originalWrite;
    await tdb?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    process.stdout.write(
      `secrets audit figures: ${JSON.stringify({ wireRequests, wireSecrets: wire.size, logModules, stats, logStats })}\n`,
    );
  });

  interface SbExport {
    deposits: { id: number; status: string; card?: unknown }[];
    cashouts: { id: number; status: string; externalId: string }[];
    refunds: { id: number; status: string }[];
  }
  const sandboxExport = async () => (await (await fetch(`${sandboxApi}/_sandbox/export`)).json()) as SbExport;

  /** The known secrets of this run. */
  async function knownSecrets(): Promise<KnownSecret[]> {
    const account = DEFAULT_ACCOUNT;
    const catalogue = loadCatalogue();
    const exported = await sandboxExport();
    return [
      { label: 'deposit secret', value: account.depositSecret },
      { label: 'cashout pass', value: account.cashoutPass },
      { label: 'cashout secret', value: account.cashoutSecret },
      { label: 'read-only key', value: account.readOnlyKey },
      { label: 'web password', value: WEB_PASSWORD },
      { label: 'web password hash', value: passwordHash },
      { label: 'session secret', value: SESSION_SECRET },
      { label: 'API token', value: apiToken.token },
      { label: 'API token hash', value: apiToken.entry.hash },
      { label: 'card 4111111111111111', value: '4111111111111111' },
      ...catalogue.testCards.map((c) => ({ label: `test card ${c.number}`, value: c.number })),
      { label: 'cvv 123', value: '123', kind: 'cvv' as const },
      ...[...wire].map((value, i) => ({ label: `wire signature #${i}`, value })),
      ...[...sessionTokens].map((value, i) => ({ label: `session token #${i}`, value })),
      ...exported.cashouts.map((c) => ({
        label: `cashout ${c.id} control`,
        value: cashoutControl(c.externalId, account.cashoutSecret),
      })),
    ];
  }

  async function signInAndRunReports(): Promise<void> {
    const base = pipeline.url;
    const jar = new Map<string, string>();
    const cookieHeader = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
    const take = (res: Response) => {
      for (const c of res.headers.getSetCookie()) {
        const [pair] = c.split(';');
        const [k, v] = pair!.split('=');
        if (v) jar.set(k!, v);
        else jar.delete(k!);
      }
    };
    const csrfOf = (body: string) => /name="_csrf" value="([^"]+)"/.exec(body)?.[1] ?? '';
    const form = async (path: string, fields: Record<string, string>) => {
      const res = await fetch(`${base}${path}`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: cookieHeader() },
        body: new URLSearchParams(fields).toString(),
      });
      take(res);
      return res;
    };
    // A wrong password first (logged as a refused sign-in), then the right one.
    let login = await fetch(`${base}/login`, { headers: { accept: 'text/html' } });
    take(login);
    let page = await login.text();
    const wrong = await form('/login', {
      _csrf: csrfOf(page),
      username: WEB_USER,
      password: `${WEB_PASSWORD}!`,
    });
    expect(wrong.status).toBe(401);
    page = await wrong.text();
    const ok = await form('/login', { _csrf: csrfOf(page), username: WEB_USER, password: WEB_PASSWORD });
    expect(ok.status).toBe(303);
    const session = decodeURIComponent(jar.get('payrecon_session') ?? '');
    sessionTokens.add(session.slice(0, session.lastIndexOf('.')));
    const reports = await fetch(`${base}/reports`, {
      headers: { cookie: cookieHeader(), accept: 'text/html' },
    });
    const token = csrfOf(await reports.text());
    const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
    for (const kind of ['settlement', 'exceptions']) {
      const res = await form('/reports', { _csrf: token, kind, from: day(-1), to: day(3), account: '' });
      expect(res.status).toBe(303);
    }
    await waitFor(
      'the report runs',
      async () => {
        const { rows } = await sql<{ status: string }>`SELECT status FROM report_runs`.execute(tdb.db);
        return rows.length === 2 && rows.every((r) => r.status === 'succeeded') ? true : undefined;
      },
      120_000,
    );
    const out = await form('/logout', { _csrf: token });
    expect(out.status).toBe(303);
    login = await fetch(`${base}/login`);
    expect(login.status).toBe(200);
  }

  /** The API with its token: reads, and a comment written to an exception's audit trail. */
  async function useTheApi(): Promise<void> {
    const api = `${pipeline.url}/api/v1`;
    const auth = { authorization: `Bearer ${apiToken.token}` };
    expect((await fetch(`${api}/balances`, { headers: auth })).status).toBe(200);
    const list = (await (await fetch(`${api}/exceptions?limit=5`, { headers: auth })).json()) as {
      items: { id: string; entityId: string }[];
    };
    const first = list.items[0];
    if (first) {
      const res = await fetch(`${api}/exceptions/${first.id}/comments`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ note: 'looked at it during the audit' }),
      });
      expect(res.status).toBe(200);
    }
    expect((await fetch(`${api}/payments?limit=20`, { headers: auth })).status).toBe(200);
    expect(
      (await fetch(`${api}/balances`, { headers: { authorization: `Bearer ${apiToken.token}x` } })).status,
    ).toBe(401);
  }

  it('finds no secret in logs, tables, topics or workbooks after a run with card traffic', async () => {
    // 1. Traffic: deposits, card deposits, cashouts, refunds through payrecon's own provider client.
    const res = await fetch(`${sandboxApi}/_sandbox/traffic`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ rate: 40 }),
    });
    expect(res.status).toBeLessThan(300);
    const count = async () => {
      const e = await sandboxExport();
      return e.deposits.length + e.cashouts.length + e.refunds.length;
    };
    await waitFor('the entities', async () => ((await count()) >= ENTITIES ? true : undefined), 120_000);
    // 2. A provider day in one-hour steps: payments, card results, bank answers, webhooks, refunds.
    // Refunds need deposits the moves completed, so the traffic runs on, but only up to a bound: every
    // advance fires the pending moves of every entity, so with the traffic on throughout, each step took
    // longer than the last (a run had created 11,000 entities after five minutes, still inside its day).
    const stopTraffic = () => fetch(`${sandboxApi}/_sandbox/traffic`, { method: 'DELETE' });
    let trafficOn = true;
    for (let h = 1; h <= 24; h++) {
      const before = await count();
      await clock.advance(HOUR);
      // Each hour with the traffic on sees new payments: some are refunded by the hours after.
      if (trafficOn) await waitFor(`new payments in hour ${h}`, async () => (await count()) > before, 60_000);
      if (trafficOn && (await count()) >= 4 * ENTITIES) {
        await stopTraffic();
        trafficOn = false;
      }
    }
    if (trafficOn) await stopTraffic();
    await clock.advance(12 * HOUR);
    const truth = await sandboxExport();
    await waitFor(
      'the ledger to show every sandbox status',
      async () => {
        const rows = await tdb.db
          .selectFrom('mirrors')
          .select(['entity_kind', 'entity_id', 'status'])
          .execute();
        const seen = new Map(rows.map((r) => [`${r.entity_kind}:${r.entity_id}`, r.status]));
        const all = [
          ...truth.deposits.map((e) => ['deposit', e] as const),
          ...truth.cashouts.map((e) => ['cashout', e] as const),
          ...truth.refunds.map((e) => ['refund', e] as const),
        ];
        return all.every(([k, e]) => seen.has(`${k}:${e.id}`)) ? true : undefined;
      },
      180_000,
    );
    const cards = truth.deposits.filter((d) => d.card).length;
    expect(cards).toBeGreaterThan(0);
    expect(truth.cashouts.length).toBeGreaterThan(0);
    expect(truth.refunds.length).toBeGreaterThan(0);
    // 3. Web sign-ins and workbooks made from the page.
    await signInAndRunReports();
    await useTheApi();
    expect(wire.size).toBeGreaterThan(truth.deposits.length);

    // 4. Scan everything.
    const secrets = await knownSecrets();
    runSecrets = secrets;
    const hits = await scanForSecrets({
      secrets,
      logs: [{ name: 'pipeline', text: captured.join('') }],
      database: { url: tdb.url },
      kafka: { brokers: pipeline.infra.brokers, registryUrl: pipeline.infra.registryUrl },
      files: [join(dataDir, 'reports')],
      stats,
    });
    const sample = (h: Hit[]) =>
      h.slice(0, 20).map((x) => `${x.detector} ${x.label} @ ${x.location}: ${x.excerpt}`);
    expect(sample(hits)).toEqual([]);
    // The logs hold the parts' lines, the sign-ins included.
    const modules = new Set<string>();
    const messages = new Set<string>();
    for (const line of captured) {
      const entry = JSON.parse(line) as { module?: string; msg?: string };
      if (entry.module) modules.add(entry.module);
      if (entry.msg) messages.add(entry.msg);
    }
    logModules.push(...[...modules].sort());
    expect(logModules).toEqual(
      expect.arrayContaining(['up', 'webhook-ingress', 'provider-client', 'status-fetcher']),
    );
    expect(logModules.length).toBeGreaterThanOrEqual(5);
    expect(messages).toContain('web sign-in');
    expect(messages).toContain('web sign-in refused');
    // The scan saw every kind of place.
    expect(stats.logLines).toBeGreaterThan(100);
    expect(stats.tables).toBeGreaterThan(5);
    expect(stats.rows).toBeGreaterThan(ENTITIES);
    expect(stats.topics).toBeGreaterThanOrEqual(8);
    expect(stats.messages).toBeGreaterThan(ENTITIES);
    expect(stats.decoded).toBe(stats.messages);
    expect(stats.workbooks).toBe(2);
    expect(stats.cells).toBeGreaterThan(0);
    expect(stats.skippedSecrets).toEqual([]);
  }, 600_000);

  it('finds a secret planted in a table, a topic and a workbook (control)', async () => {
    const { depositSecret, cashoutPass, readOnlyKey } = DEFAULT_ACCOUNT;
    const secrets: KnownSecret[] = [
      { label: 'deposit secret', value: depositSecret },
      { label: 'cashout pass', value: cashoutPass },
      { label: 'read-only key', value: readOnlyKey },
    ];
    // A row of a scratch table (its own schema, so the control scan reads only it).
    await sql`CREATE SCHEMA audit_scratch`.execute(tdb.db);
    await sql`CREATE TABLE audit_scratch.notes (id int, note text, meta jsonb, cvv2 text)`.execute(tdb.db);
    await sql`INSERT INTO audit_scratch.notes VALUES
      (1, 'ok', '{}', NULL),
      (2, ${`the pass is ${cashoutPass}`}, '{}', NULL),
      (3, 'ok', ${JSON.stringify({ card: '5555 5555 5555 4444' })}::jsonb, NULL),
      (4, 'ok', '{}', '987')`.execute(tdb.db);
    // A message of a scratch topic.
    const kafka = pipeline.infra.kafka;
    await pipeline.infra.admin.createTopics({ topics: [{ topic: 'audit.scratch', numPartitions: 1 }] });
    const producer = kafka.producer();
    await producer.connect();
    await producer.send({
      topic: 'audit.scratch',
      messages: [
        { key: 'a', value: 'nothing here' },
        { key: 'b', value: JSON.stringify({ detail: depositSecret }) },
        { key: 'c', value: '-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----' },
      ],
    });
    await producer.disconnect();
    // A cell of a scratch workbook.
    const dir = join(dataDir, 'scratch');
    mkdirSync(dir);
    const wb = new ExcelJS.Workbook();
    const sheet = wb.addWorksheet('Scratch');
    sheet.addRow(['Name', 'Key', 'CVV']);
    sheet.addRow(['a', 'nothing', '']);
    sheet.addRow(['b', `key ${readOnlyKey}`, '']);
    sheet.addRow(['c', 'nothing', '456']);
    await wb.xlsx.writeFile(join(dir, 'scratch.xlsx'));

    const hits = await scanForSecrets({
      secrets,
      database: { url: tdb.url, schemas: ['audit_scratch'] },
      kafka: {
        brokers: pipeline.infra.brokers,
        registryUrl: pipeline.infra.registryUrl,
        topics: ['audit.scratch'],
      },
      files: [dir],
    });
    const found = (place: string, detector: string, label: RegExp, location: RegExp) =>
      hits.some(
        (h) =>
          h.place === place && h.detector === detector && label.test(h.label) && location.test(h.location),
      );
    expect(found('database', 'known', /cashout pass/, /audit_scratch\.notes\.note/)).toBe(true);
    expect(found('database', 'luhn', /16-digit/, /audit_scratch\.notes\.meta/)).toBe(true);
    expect(found('database', 'cvv', /cvv2/, /audit_scratch\.notes\.cvv2/)).toBe(true);
    expect(found('topic', 'known', /deposit secret/, /^audit\.scratch\[0\]@1 /)).toBe(true);
    expect(found('topic', 'pem', /PRIVATE KEY/, /^audit\.scratch\[0\]@2 /)).toBe(true);
    expect(found('file', 'known', /read-only key/, /scratch\.xlsx!Scratch!B3$/)).toBe(true);
    expect(found('file', 'known', /read-only key/, /scratch\.xlsx!xl\/sharedStrings\.xml$/)).toBe(true);
    expect(found('file', 'cvv', /CVV/, /scratch\.xlsx!Scratch!C4$/)).toBe(true);
    // Nothing else: the clean rows, message and cells gave nothing.
    expect(hits.every((h) => !/notes\.\w+ ctid \(0,1\)|@0 |!A|!B2|!B4/.test(h.location))).toBe(true);
    expect(readdirSync(dir)).toEqual(['scratch.xlsx']);
  }, 120_000);

  it('finds no secret in the logs of the whole run and its stop, and finds one planted in a log line (control)', async () => {
    await pipeline.stop();
    expect(runSecrets.length).toBeGreaterThan(20);
    // The wire values of the whole run (the stop included), on top of those of the first scan.
    const known: KnownSecret[] = [
      ...runSecrets,
      ...[...wire].map((value, i) => ({ label: `wire signature (end) #${i}`, value })),
    ];
    const clean = await scanForSecrets({
      secrets: known,
      logs: [{ name: 'pipeline', text: captured.join('') }],
      stats: logStats,
    });
    expect(clean.map((h) => `${h.detector} ${h.label} @ ${h.location}: ${h.excerpt}`)).toEqual([]);

    const lines = captured.length;
    const log = rootLogger.child({ module: 'audit-control' });
    log.info({ detail: `notification signed with ${[...wire][0]}` }, 'planted');
    log.warn({ payer: { card: '5555555555554444' } }, 'planted card');
    log.info({ request: { cvc: '321' } }, 'planted cvc');
    // Redacted by key: these must not be found.
    log.info(
      { cashoutPass: DEFAULT_ACCOUNT.cashoutPass, cvv: '123', card_number: '4111111111111111' },
      'redacted',
    );
    const planted = await scanForSecrets({
      secrets: known,
      logs: [{ name: 'pipeline', text: captured.join('') }],
    });
    const at = (n: number) => `log pipeline:${lines + n}`;
    const found = planted.map((h) => `${h.detector} ${h.location}`);
    expect(found).toContain(`known ${at(1)}`);
    expect(found).toContain(`luhn ${at(2)}`);
    expect(found).toContain(`cvv ${at(3)}`);
    // Only the planted lines: not the redacted one, nor any line before.
    expect(new Set(planted.map((h) => h.location))).toEqual(new Set([at(1), at(2), at(3)]));
  }, 120_000);
});
