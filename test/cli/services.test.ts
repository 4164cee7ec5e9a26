/**
 * The one composition: what `createServices` builds from a command's infrastructure and configuration.
 * No query runs here (the pool is created and destroyed without a connection): every figure below is
 * read from what the services were built with.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Admin } from 'kafkajs';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { exceptionRulesFrom } from '../../src/config-rules.ts';
import { createDb } from '../../src/db/connection.ts';
import { type DatabaseInfrastructure, Lifecycle } from '../../src/infrastructure.ts';
import { logger } from '../../src/logger.ts';
import { createMetrics } from '../../src/metrics.ts';
import { createServices } from '../../src/services.ts';

const ENV = {
  PAYRECON_DATA_DIR: '/nonexistent/payrecon',
  PAYRECON_PROVIDER_TIMEOUT_MS: '1500',
  PAYRECON_PROVIDER_RETRIES: '5',
  LOG_LEVEL: 'silent',
};

const opened: DatabaseInfrastructure[] = [];

/** A database-only infrastructure whose pool never connects. */
function databaseOnly(env: Record<string, string> = {}): DatabaseInfrastructure {
  const infra: DatabaseInfrastructure = {
    config: loadConfig({ ...ENV, ...env }),
    logger,
    dataDir: '/nonexistent/payrecon',
    db: createDb('postgres://127.0.0.1:1/never'),
    lifecycle: new Lifecycle(logger),
    metrics: createMetrics(),
  };
  opened.push(infra);
  return infra;
}

afterEach(async () => {
  for (const infra of opened.splice(0)) await infra.db.destroy();
});

/** The job names the scheduler made known to the metrics (each starts at zero). */
async function knownJobs(infra: DatabaseInfrastructure): Promise<string[]> {
  const metric = await infra.metrics.registry.getSingleMetric('payrecon_job_runs_total')?.get();
  return [...new Set((metric?.values ?? []).map((v) => String(v.labels.job_name)))].sort();
}

describe('createServices', () => {
  it('checks for readiness exactly the dependencies the command runs on', () => {
    const web = createServices(databaseOnly());
    expect(web.readiness.map((c) => c.name)).toEqual(['database']);
    const admin = { describeCluster: async () => ({}) } as unknown as Admin;
    const part = createServices({ ...databaseOnly(), admin, registryUrl: 'http://127.0.0.1:1' });
    expect(part.readiness.map((c) => c.name)).toEqual(['database', 'kafka', 'schema_registry']);
  });

  it('takes the rules from the configuration, and the overrides on top of them', () => {
    const infra = databaseOnly({ PAYRECON_POLL_FIRST_DELAY_SECONDS: '7' });
    const fromConfig = exceptionRulesFrom(infra.config);
    expect(fromConfig.polling.firstDelayMs).toBe(7000);
    expect(createServices(infra).rules).toEqual(fromConfig);
    const rules = createServices(infra, { rules: { outcomeUnknownGraceMs: 5 } }).rules;
    expect(rules.outcomeUnknownGraceMs).toBe(5);
    expect(rules.polling).toEqual(fromConfig.polling);
    expect(rules.stuck).toEqual(fromConfig.stuck);
  });

  it("gives the provider client the configuration's timeout and retries, and counts its calls", async () => {
    const infra = databaseOnly();
    const { providerOptions } = createServices(infra);
    expect(providerOptions).toMatchObject({ timeoutMs: 1500, retries: 5 });
    providerOptions.onCall?.({ operation: 'status', outcome: 'ok', seconds: 0.1 } as never);
    const text = await infra.metrics.registry.metrics();
    expect(text).toContain(
      'payrecon_provider_request_duration_seconds_count{endpoint="status",outcome="ok"} 1',
    );
  });

  it('schedules the poll job only in a process that polls on its own', async () => {
    const alone = databaseOnly();
    createServices(alone).jobScheduler({ poll: async () => undefined, retentionDays: 30 });
    expect(await knownJobs(alone)).toEqual([
      'exception-report',
      'late-rejection-sweep',
      'ledger-verify',
      'poll',
      'report-retention',
      'settlement',
      'stuck-sweep',
    ]);
    const together = databaseOnly();
    createServices(together).jobScheduler();
    expect(await knownJobs(together)).not.toContain('poll');
    expect(await knownJobs(together)).toContain('settlement');
    expect(await knownJobs(together)).not.toContain('settlement-fetch');
  });

  it('schedules the settlement fetch with a control API: configured, or the embedded sandbox', async () => {
    const configured = databaseOnly({ PAYRECON_SETTLEMENT_FETCH_URL: 'http://127.0.0.1:1/_sandbox' });
    createServices(configured).jobScheduler();
    expect(await knownJobs(configured)).toContain('settlement-fetch');
    const embedded = databaseOnly();
    const services = createServices(embedded);
    // Nothing listens there: the bank accounts are read again at every fetch.
    await services.imports.useEmbeddedSandbox('http://127.0.0.1:1/_sandbox/');
    expect(services.imports.bankAccounts()).toEqual([]);
    services.jobScheduler();
    expect(await knownJobs(embedded)).toContain('settlement-fetch');
  });

  it('takes the profiles of PAYRECON_IMPORT_PROFILES_DIR by name, and names a bad one at start', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'payrecon-profiles-dir-'));
    try {
      const profile = {
        kind: 'bank-statement',
        name: 'bank-de',
        dateFormat: 'DD.MM.YYYY',
        number: { decimal: ',', thousands: '.' },
        sign: { convention: 'direction', column: 'S/H', credit: ['H'], debit: ['S'] },
        csv: { delimiter: ';', quote: '"' },
        currency: 'EUR',
        columns: { account: 'Konto', bookingDate: 'Buchungstag', amount: 'Betrag', reference: 'Referenz' },
        identity: ['reference'],
      };
      writeFileSync(join(dir, 'bank-de.json'), JSON.stringify(profile));
      const iban = 'DE89370400440532013000';
      const services = createServices(
        databaseOnly({
          PAYRECON_IMPORT_PROFILES_DIR: dir,
          PAYRECON_BANK_ACCOUNTS: JSON.stringify([
            { id: iban, currency: 'EUR', account: 'acme', name: 'Main' },
          ]),
        }),
      );
      expect(services.imports.profiles).toEqual([{ name: 'bank-de', kind: 'bank-statement' }]);
      const file = `Konto;Buchungstag;Betrag;S/H;Referenz\n${iban};27.11.2026;1.234,56;H;R1\n`;
      const outcome = await services.imports.run({
        kind: 'bank-statement',
        fileName: 'umsatz.csv',
        bytes: new TextEncoder().encode(file),
        profile: 'bank-de',
        user: 'ana',
        dryRun: true,
      });
      expect(outcome.summary).toEqual({
        statements: [
          expect.objectContaining({
            account: iban,
            currency: 'EUR',
            credits: '1234.56',
            booked: 1,
            new: null,
          }),
        ],
      });
      writeFileSync(join(dir, 'broken.json'), '{"kind":"bank-statement"}');
      expect(() => createServices(databaseOnly({ PAYRECON_IMPORT_PROFILES_DIR: dir }))).toThrow(
        /^PAYRECON_IMPORT_PROFILES_DIR: .*broken\.json/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('sends alerts to the log, and to the configured webhook', () => {
    expect(createServices(databaseOnly()).alertSinks.map((s) => s.type)).toEqual(['log']);
    const slack = createServices(
      databaseOnly({ PAYRECON_ALERT_WEBHOOK_URL: 'https://hooks.slack.com/services/T/B/x' }),
    );
    expect(slack.alertSinks.map((s) => s.type)).toEqual(['log', 'slack']);
  });
});
