/**
 * Operations in the box, against a real Prometheus (Debian's `prometheus` package, which brings
 * `promtool`):
 *
 * - `promtool check rules` and `promtool test rules` pass on ops/prometheus/.
 * - A real Prometheus scrapes a running pipeline (`payrecon up` with the sandbox and its traffic, a
 *   real PostgreSQL database, the embedded broker and registry over TCP and HTTP) and a separate
 *   `payrecon reconcile` process (its own /metrics on PAYRECON_METRICS_PORT), loading the rules. Every
 *   series the rules and the dashboard's queries use exists there, every rule evaluates without error,
 *   and every dashboard query is valid PromQL.
 *
 * Without prometheus/promtool the tests skip with an install hint (they fail under
 * PAYRECON_REQUIRE_TOOLS=1, as in .ci/run).
 */

import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JOBS_OFF, loadConfig } from '../../src/config.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { DEFAULT_EXCEPTION_RULES } from '../../src/domain/exception-rules.ts';
import type { Intent } from '../../src/domain/observation.ts';
import { startSandboxForUp } from '../../src/sandbox-part.ts';
import { hashPassword } from '../../src/web/auth.ts';
import { type RunningPipeline, startPipeline } from '../../src/wiring.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { waitFor } from '../helpers/wait.ts';
import { observation, TEST_EMBEDDED } from '../pipeline/helpers.ts';

const ROOT = join(import.meta.dirname, '../..');
const RULES = join(ROOT, 'ops/prometheus/rules.yml');
const RULE_TESTS = join(ROOT, 'ops/prometheus/tests/rules.test.yml');
const DASHBOARD = join(ROOT, 'ops/grafana/payrecon.json');
const PROMETHEUS = process.env.PROMETHEUS ?? '/usr/bin/prometheus';
const PROMTOOL = process.env.PROMTOOL ?? '/usr/bin/promtool';
const HINT = 'install them with: sudo apt-get install prometheus';
const present = existsSync(PROMETHEUS) && existsSync(PROMTOOL);
const required = process.env.PAYRECON_REQUIRE_TOOLS === '1';
if (!present && !required)
  console.warn(`Prometheus tests skipped: ${PROMETHEUS} or ${PROMTOOL} missing (${HINT})`);

/** Metric names (not recording rules: those hold a colon) in a PromQL text. */
function metricNames(promql: string): string[] {
  return [...promql.matchAll(/\bpayrecon_[a-z0-9_]+/g)].map((m) => m[0]);
}

/** Every PromQL expression of the rules file (`expr:` lines, folded ones included). */
function ruleExpressions(): string[] {
  const text = readFileSync(RULES, 'utf8');
  const out: string[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const m = /^(\s*)expr:\s*(.*)$/.exec(lines[i]!);
    if (!m) continue;
    if (m[2] !== '>' && m[2] !== '|') {
      out.push(m[2]!);
      continue;
    }
    const body: string[] = [];
    while (
      i + 1 < lines.length &&
      (lines[i + 1]!.trim() === '' || /^\s*/.exec(lines[i + 1]!)![0].length > m[1]!.length)
    ) {
      body.push(lines[++i]!.trim());
    }
    out.push(body.join(' '));
  }
  return out;
}

/** Every query of the dashboard's panels. */
function dashboardExpressions(): string[] {
  const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as {
    panels: { targets?: { expr: string }[] }[];
  };
  return dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const address = s.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      s.close(() => resolve(port));
    });
  });
}

describe.skipIf(!present && !required)('Prometheus rules and dashboard', () => {
  it('promtool checks the rules and passes their unit tests', () => {
    if (!present) throw new Error(`PAYRECON_REQUIRE_TOOLS=1 but prometheus or promtool is missing (${HINT})`);
    const check = spawnSync(PROMTOOL, ['check', 'rules', RULES], { encoding: 'utf8' });
    expect(check.status, check.stdout + check.stderr).toBe(0);
    expect(check.stdout).toMatch(/SUCCESS: \d+ rules found/);
    const test = spawnSync(PROMTOOL, ['test', 'rules', RULE_TESTS], { encoding: 'utf8' });
    expect(test.status, test.stdout + test.stderr).toBe(0);
    expect(test.stdout).toContain('SUCCESS');
  });

  it("checks docker-compose's Prometheus configuration, and the dashboard's data source is the provisioned one", () => {
    if (!present) throw new Error(`PAYRECON_REQUIRE_TOOLS=1 but prometheus or promtool is missing (${HINT})`);
    const dir = mkdtempSync(join(tmpdir(), 'payrecon-promconfig-'));
    try {
      // The compose file mounts the rules at /etc/prometheus/rules.yml; point the copy at the repository's.
      const config = readFileSync(join(ROOT, 'ops/prometheus/prometheus.yml'), 'utf8');
      expect(config).toContain('/etc/prometheus/rules.yml');
      writeFileSync(join(dir, 'prometheus.yml'), config.replace('/etc/prometheus/rules.yml', RULES));
      const check = spawnSync(PROMTOOL, ['check', 'config', join(dir, 'prometheus.yml')], {
        encoding: 'utf8',
      });
      expect(check.status, check.stdout + check.stderr).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const datasource = readFileSync(
      join(ROOT, 'ops/grafana/provisioning/datasources/prometheus.yml'),
      'utf8',
    );
    const uid = /uid:\s*(\S+)/.exec(datasource)?.[1];
    const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as {
      uid: string;
      panels: { type: string; datasource?: { uid: string }; targets?: { datasource?: { uid: string } }[] }[];
    };
    const graphs = dashboard.panels.filter((p) => p.type !== 'row');
    expect(graphs.length).toBeGreaterThan(10);
    for (const p of graphs) {
      expect(p.datasource?.uid).toBe(uid);
      for (const t of p.targets ?? []) expect(t.datasource?.uid).toBe(uid);
    }
    const compose = readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8');
    expect(compose).toContain('./ops/prometheus/rules.yml:/etc/prometheus/rules.yml');
    expect(compose).toContain('./ops/grafana/provisioning:/etc/grafana/provisioning');
  });

  it('finds every metric the rules and the dashboard use among the names payrecon defines', () => {
    const source = readFileSync(join(ROOT, 'src/metrics.ts'), 'utf8');
    const defined = new Set([...source.matchAll(/name: '(payrecon_[a-z0-9_]+)'/g)].map((m) => m[1]!));
    const histogram = (n: string) => n.replace(/_(bucket|count|sum)$/, '');
    const used = new Set([...ruleExpressions(), ...dashboardExpressions()].flatMap(metricNames));
    expect(used.size).toBeGreaterThan(15);
    const defaults = (n: string) => /^payrecon_(process|nodejs)_/.test(n);
    const unknown = [...used].filter((n) => !defined.has(n) && !defined.has(histogram(n)) && !defaults(n));
    expect(unknown).toEqual([]);
  });
});

describe.skipIf(!present && !required)('a real Prometheus scraping a running pipeline', () => {
  let tdb: TestDatabase;
  let dataDir: string;
  let pipeline: RunningPipeline;
  let prometheus: ChildProcess | null = null;
  let part: ChildProcess | null = null;
  let promUrl = '';
  let promLog = '';
  let partLog = '';
  let partUrl = '';

  beforeAll(async () => {
    if (!present) throw new Error(`PAYRECON_REQUIRE_TOOLS=1 but prometheus or promtool is missing (${HINT})`);
    tdb = await createTestDatabase();
    dataDir = mkdtempSync(join(tmpdir(), 'payrecon-prometheus-'));
    // The verification job fires at the start of the next minute (and catches up its runs of the last
    // three days at start): its result gauge is then there to scrape.
    const minute = (new Date().getUTCMinutes() + 1) % 60;
    const config = loadConfig({
      DATABASE_URL: tdb.url,
      PAYRECON_DATA_DIR: join(dataDir, 'up'),
      PAYRECON_WEB_PORT: '0',
      LOG_LEVEL: 'error',
      PAYRECON_SANDBOX_TRAFFIC: 'true',
      PAYRECON_POLL_MIN_INTERVAL_SECONDS: '1',
      ...JOBS_OFF,
      PAYRECON_CRON_LEDGER_VERIFY: `${minute} * * * *`,
    });
    pipeline = await startPipeline(config, {
      embedded: TEST_EMBEDDED,
      sandbox: ({ webBaseUrl, logger }) =>
        startSandboxForUp({ webBaseUrl, logger, trafficRate: 5, clientRetries: 3 }),
      rules: {
        polling: { ...DEFAULT_EXCEPTION_RULES.polling, firstDelayMs: 500, maxDelayMs: 2_000 },
      },
      pollerOverrides: { idleMs: 250 },
      print: () => undefined,
    });

    // `payrecon reconcile` on its own: no web server, so /metrics on PAYRECON_METRICS_PORT.
    part = spawn(process.execPath, ['bin/payrecon.mjs', 'reconcile'], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH,
        DATABASE_URL: tdb.url,
        KAFKA_BROKERS: pipeline.infra.brokers.join(','),
        SCHEMA_REGISTRY_URL: pipeline.infra.registryUrl,
        PAYRECON_DATA_DIR: join(dataDir, 'reconcile'),
        PAYRECON_METRICS_PORT: '0',
        LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const collect = (chunk: Buffer) => {
      partLog = (partLog + chunk.toString('utf8')).slice(-20_000);
    };
    part.stdout?.on('data', collect);
    part.stderr?.on('data', collect);
    partUrl = await waitFor(
      'payrecon reconcile to serve its metrics',
      async () => /"url":"(http:\/\/[^"]+)".*health and metrics listening/.exec(partLog)?.[1],
      60_000,
    ).catch((err: Error) => {
      throw new Error(`${err.message}\n${partLog}`);
    });

    // Prometheus: scrapes both every 2 s, evaluates the rules every second.
    const port = await freePort();
    promUrl = `http://127.0.0.1:${port}`;
    const targets = [new URL(pipeline.url).host, new URL(partUrl).host];
    writeFileSync(
      join(dataDir, 'prometheus.yml'),
      [
        'global:',
        // A scrape that fails (a slow one on a loaded machine) marks the target's series stale, so the
        // checks below read each series' last value over a window rather than at one instant.
        '  scrape_interval: 2s',
        '  scrape_timeout: 2s',
        '  evaluation_interval: 1s',
        'rule_files:',
        `  - ${JSON.stringify(RULES)}`,
        'scrape_configs:',
        '  - job_name: payrecon',
        '    static_configs:',
        `      - targets: ${JSON.stringify(targets)}`,
        '',
      ].join('\n'),
    );
    prometheus = spawn(
      PROMETHEUS,
      [
        `--config.file=${join(dataDir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${join(dataDir, 'tsdb')}`,
        `--web.listen-address=127.0.0.1:${port}`,
        '--log.level=warn',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    prometheus.stderr?.on('data', (c: Buffer) => {
      promLog = (promLog + c.toString('utf8')).slice(-20_000);
    });
    await waitFor('Prometheus to be ready', async () => {
      const res = await fetch(`${promUrl}/-/ready`);
      return res.ok ? true : undefined;
    }).catch((err: Error) => {
      throw new Error(`${err.message}\n${promLog}`);
    });
  }, 180_000);

  afterAll(async () => {
    for (const child of [prometheus, part]) {
      if (child && child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
        if (child.exitCode === null) child.kill('SIGKILL');
      }
    }
    await pipeline?.stop();
    await tdb?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }, 60_000);

  async function query(
    promql: string,
  ): Promise<{ metric: Record<string, string>; value: [number, string] }[]> {
    const res = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(promql)}`);
    const body = (await res.json()) as { status: string; error?: string; data?: { result: unknown } };
    if (body.status !== 'success') throw new Error(`${promql}: ${body.error}`);
    return body.data!.result as { metric: Record<string, string>; value: [number, string] }[];
  }

  it('has every series the rules and the dashboard use, and the rules evaluate without error', async () => {
    // Events that make the rarer series: a rejected webhook, and an intent whose provider amount differs
    // (AMOUNT_MISMATCH: an exception and its alert).
    const rejected = await fetch(`${pipeline.url}/webhooks/sandbox/deposits`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"not":"a notification"',
    });
    expect(rejected.status).toBeGreaterThanOrEqual(400);
    const entityId = String(900_000_000 + Math.floor(Math.random() * 1_000_000));
    const intent: Intent = {
      intentId: randomUUID(),
      operation: 'cashout',
      account: 'sandbox',
      externalRef: `ops-${entityId}`,
      entityId,
      currency: 'BRL',
      amount: 10_000n,
      expectedFee: null,
      test: false,
      crypto: false,
      feeOnPayer: false,
      parentDepositId: null,
      outcome: 'created',
      createdAt: new Date(),
      request: {},
      response: null,
    };
    await pipeline.infra.publisher.publish('merchant.intent.recorded.v1', [{ value: intent }]);
    await pipeline.infra.publisher.publish('provider.status.observed.v1', [
      {
        value: observation({
          kind: 'cashout',
          account: 'sandbox',
          entityId,
          externalRef: `ops-${entityId}`,
          status: 'PENDING',
          currency: 'BRL',
          amount: 9_000n,
          source: 'poll',
        }),
      },
    ]);

    const names = [...new Set([...ruleExpressions(), ...dashboardExpressions()].flatMap(metricNames))];
    expect(names.length).toBeGreaterThan(15);
    const missing = await waitFor(
      'every series the rules and the dashboard use',
      async () => {
        const absent: string[] = [];
        for (const name of names) {
          if ((await query(`count(last_over_time({__name__="${name}"}[10m]))`)).length === 0)
            absent.push(name);
        }
        return absent.length === 0 ? absent : undefined;
      },
      150_000,
    ).catch(async (err: Error) => {
      const absent: string[] = [];
      for (const name of names)
        if ((await query(`count(last_over_time({__name__="${name}"}[10m]))`)).length === 0) absent.push(name);
      throw new Error(`${err.message}: still absent: ${absent.join(', ')}`);
    });
    expect(missing).toEqual([]);

    // The topics the issue found missing carry their labels now.
    const published = await query('sum by (topic) (last_over_time(payrecon_events_published_total[10m]))');
    const consumed = await query(
      'sum by (topic, group) (last_over_time(payrecon_events_consumed_total[10m]))',
    );
    expect(published.map((r) => r.metric.topic)).toEqual(
      expect.arrayContaining([
        'provider.notification.received.v1',
        'provider.status.observed.v1',
        'merchant.intent.recorded.v1',
        'recon.alert.raised.v1',
      ]),
    );
    expect(consumed.map((r) => r.metric.topic)).toEqual(
      expect.arrayContaining([
        'provider.notification.received.v1',
        'provider.status.observed.v1',
        'merchant.intent.recorded.v1',
        'recon.alert.raised.v1',
      ]),
    );
    // Each process reports the lag of its own groups, per partition: the separate reconciler too.
    const partInstance = new URL(partUrl).host;
    const lag = await waitFor('the separate reconciler to report its lag', async () => {
      const rows = await query(`last_over_time(payrecon_consumer_lag{instance="${partInstance}"}[10m])`);
      return rows.length > 0 ? rows : undefined;
    }).catch(async (err: Error) => {
      const text = await (await fetch(`${partUrl}/metrics`)).text();
      throw new Error(
        `${err.message}\n${text
          .split('\n')
          .filter((l) => /lag|source_errors/.test(l))
          .join('\n')}\n${partLog}`,
      );
    });
    expect(new Set(lag.map((r) => r.metric.group))).toEqual(
      new Set(['payrecon-reconciler-observations', 'payrecon-reconciler-intents']),
    );
    expect(lag.every((r) => /^\d+$/.test(r.metric.partition ?? ''))).toBe(true);
    const upLag = await query(
      `last_over_time(payrecon_consumer_lag{instance="${new URL(pipeline.url).host}"}[10m])`,
    );
    expect(new Set(upLag.map((r) => r.metric.group))).toEqual(
      new Set([
        'payrecon-reconciler-observations',
        'payrecon-reconciler-intents',
        'payrecon-status-fetcher',
        'payrecon-alert-dispatcher',
        'payrecon-match-bank-lines',
        'payrecon-match-provider-transactions',
        'payrecon-match-provider-settlements',
      ]),
    );
    // No doubled prefix, and the exception that was made is counted.
    expect(
      await query('last_over_time({__name__=~"payrecon_process_process_.*|payrecon_payrecon_.*"}[10m])'),
    ).toEqual([]);
    expect(
      await query('last_over_time(payrecon_exceptions{type="AMOUNT_MISMATCH",state="open"}[10m])'),
    ).not.toEqual([]);
    expect(
      await query(
        'last_over_time(payrecon_alerts_raised_total{type="AMOUNT_MISMATCH",severity="high"}[10m])',
      ),
    ).not.toEqual([]);
    const sound = await query('last_over_time(payrecon_ledger_verification_ok[10m]) == 1');
    expect(sound, JSON.stringify((await verifyLedger(tdb.db)).failures)).not.toEqual([]);

    // Every rule evaluated, healthy.
    type Rule = { name: string; health: string; lastError?: string; lastEvaluation: string };
    const rules = await waitFor('every rule to be evaluated', async () => {
      const res = await fetch(`${promUrl}/api/v1/rules`);
      const body = (await res.json()) as { data: { groups: { rules: Rule[] }[] } };
      const all = body.data.groups.flatMap((g) => g.rules);
      return all.length > 0 && all.every((r) => r.health !== 'unknown') ? all : undefined;
    });
    expect(rules.length).toBe(12);
    expect(rules.filter((r) => r.health !== 'ok').map((r) => `${r.name}: ${r.lastError}`)).toEqual([]);

    // Every dashboard query is valid and evaluates.
    for (const expr of dashboardExpressions()) await query(expr);
  }, 240_000);

  it('serves health and the ledger metrics from `payrecon web` on its own', async () => {
    const users = JSON.stringify([{ username: 'ops', passwordHash: await hashPassword('ops-password') }]);
    const web = spawn(process.execPath, ['bin/payrecon.mjs', 'web', '--port', '0'], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH,
        DATABASE_URL: tdb.url,
        PAYRECON_DATA_DIR: join(dataDir, 'web'),
        PAYRECON_WEB_USERS: users,
        LOG_LEVEL: 'info',
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
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
      const ready = await fetch(`${url}/readyz`);
      expect(ready.status).toBe(200);
      expect(await ready.json()).toEqual({ status: 'ready', checks: { database: 'ok' } });
      const metrics = await (await fetch(`${url}/metrics`)).text();
      expect(metrics).toMatch(/^payrecon_ledger_balance\{merchant_account="sandbox"/m);
      expect(metrics).toMatch(/^payrecon_exceptions_overdue\{type="STUCK"\} \d+$/m);
    } finally {
      const exited = new Promise((r) => web.once('exit', r));
      web.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
      if (web.exitCode === null) web.kill('SIGKILL');
    }
  }, 90_000);
});
