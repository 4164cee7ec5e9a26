import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, JOBS_OFF, loadConfig } from './config.ts';

const ACCOUNT = {
  name: 'main',
  baseUrl: 'https://api-stg.provider.example/',
  cardBaseUrl: 'https://cc-api-stg.provider.example/',
  depositLogin: 'merchantLogin',
  depositSecret: 'depositSecret',
  cashoutLogin: 'cashLogin',
  cashoutPass: 'cashPass',
  cashoutSecret: 'cashoutSecret',
  readOnlyKey: 'readOnly',
};
const accounts = (over: Record<string, unknown> = {}) => JSON.stringify([{ ...ACCOUNT, ...over }]);

function errorOf(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('expected a ConfigError');
}

describe('loadConfig', () => {
  it('gives the embedded defaults for an empty environment', () => {
    const config = loadConfig({});
    expect(config.accounts).toEqual([]);
    expect(config.database.url).toBeNull();
    expect(config.kafka.brokers).toBeNull();
    expect(config.schemaRegistry.url).toBeNull();
    expect(config.dataDir).toBe('.payrecon');
    expect(config.web).toMatchObject({ host: '127.0.0.1', port: 8080, users: [] });
    expect(config.jobs.timeZone).toBe('UTC');
    expect(config.exceptions.severities.LATE_REJECTION).toBe('critical');
    // Deadline defaults are the domain's exception rules, in hours.
    expect(config.exceptions.deadlines).toMatchObject({
      cashoutOnHoldHours: 72,
      refundIncorrectDetailsHours: 168,
    });
  });

  it('reads accounts with their defaults and freezes everything', () => {
    const config = loadConfig({
      PAYRECON_ACCOUNTS: accounts(),
      KAFKA_BROKERS: '127.0.0.1:9092, kafka:29092',
    });
    expect(config.accounts[0]).toMatchObject({
      name: 'main',
      webhookSignatureMode: 'warn',
      xDateWindowSeconds: 300,
    });
    expect(config.kafka.brokers).toEqual(['127.0.0.1:9092', 'kafka:29092']);
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.accounts[0])).toBe(true);
    expect(() => {
      (config.web as { port: number }).port = 1;
    }).toThrow(TypeError);
  });

  it('reads accounts from a file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'payrecon-config-'));
    const file = join(dir, 'accounts.json');
    writeFileSync(file, accounts({ name: 'file-acct' }));
    expect(loadConfig({ PAYRECON_ACCOUNTS_FILE: file }).accounts[0]?.name).toBe('file-acct');
    writeFileSync(file, accounts({ baseUrl: 'nope' }));
    expect(errorOf({ PAYRECON_ACCOUNTS_FILE: file })).toBe(
      'PAYRECON_ACCOUNTS_FILE[0].baseUrl: must be an http(s) URL',
    );
    expect(errorOf({ PAYRECON_ACCOUNTS_FILE: join(dir, 'missing.json') })).toMatch(
      /^PAYRECON_ACCOUNTS_FILE: must name a readable file/,
    );
  });

  // One accepted and one rejected value per setting rule; the message names the variable and the rule.
  it.each([
    ['PAYRECON_WEB_PORT', '0', '70000', 'PAYRECON_WEB_PORT: must be an integer from 0 to 65535'],
    ['PAYRECON_WEB_PORT', '8081', 'http', 'PAYRECON_WEB_PORT: must be an integer from 0 to 65535'],
    [
      'DATABASE_URL',
      'postgres://postgres@127.0.0.1:5432/test',
      'mysql://x',
      'DATABASE_URL: must be a postgres:// or postgresql:// URL',
    ],
    [
      'KAFKA_BROKERS',
      'localhost:9092',
      'localhost',
      'KAFKA_BROKERS: must be a comma-separated list of host:port',
    ],
    [
      'SCHEMA_REGISTRY_URL',
      'http://127.0.0.1:8081',
      'registry',
      'SCHEMA_REGISTRY_URL: must be an http(s) URL',
    ],
    [
      'LOG_LEVEL',
      'debug',
      'loud',
      'LOG_LEVEL: must be one of fatal, error, warn, info, debug, trace, silent',
    ],
    [
      'PAYRECON_TIMEZONE',
      'America/Sao_Paulo',
      'Mars/Base',
      'PAYRECON_TIMEZONE: must be an IANA time zone such as UTC or America/Sao_Paulo',
    ],
    [
      'PAYRECON_SETTLEMENT_CUTOFF',
      '23:59',
      '24:00',
      'PAYRECON_SETTLEMENT_CUTOFF: must be a time HH:mm from 00:00 to 23:59',
    ],
    [
      'PAYRECON_CRON_SETTLEMENT',
      '15 1 * * *',
      '61 * * * *',
      'PAYRECON_CRON_SETTLEMENT: must be a cron expression',
    ],
    ['PAYRECON_SESSION_SECRET', 'x'.repeat(32), 'short', 'PAYRECON_SESSION_SECRET: at least 32 characters'],
    [
      'PAYRECON_WEB_USERS',
      '[{"username":"fin","passwordHash":"scrypt$16384$8$1$c2FsdA==$a2V5"}]',
      '[{"username":"fin","passwordHash":"plain"}]',
      'PAYRECON_WEB_USERS[0].passwordHash: must be a scrypt hash scrypt$N$r$p$salt$key (base64)',
    ],
    ['PAYRECON_WEB_USERS', '[]', '{not json', 'PAYRECON_WEB_USERS: must be valid JSON'],
    [
      'PAYRECON_ALERT_MIN_SEVERITY',
      'critical',
      'warning',
      'PAYRECON_ALERT_MIN_SEVERITY: must be one of info, low, medium, high, critical',
    ],
    [
      'PAYRECON_EXCEPTION_DEADLINES',
      '{"cashoutOnHoldHours":24}',
      '{"cashoutOnHoldHours":0}',
      'PAYRECON_EXCEPTION_DEADLINES.cashoutOnHoldHours: must be an integer from 1 to 8760',
    ],
    [
      'PAYRECON_EXCEPTION_SEVERITIES',
      '{"STUCK":"critical"}',
      '{"STUCK":"urgent"}',
      'PAYRECON_EXCEPTION_SEVERITIES.STUCK: must be one of info, low, medium, high, critical',
    ],
    ['PAYRECON_POLL_CONCURRENCY', '8', '0', 'PAYRECON_POLL_CONCURRENCY: must be an integer from 1 to 64'],
    ['PAYRECON_FETCH_CONCURRENCY', '32', '0', 'PAYRECON_FETCH_CONCURRENCY: must be an integer from 1 to 256'],
    ['PAYRECON_SANDBOX_TRAFFIC', 'false', 'maybe', 'PAYRECON_SANDBOX_TRAFFIC: must be true or false'],
    ['PAYRECON_ACCOUNTS', accounts(), '{"name":"x"}', 'PAYRECON_ACCOUNTS: must be a JSON array of accounts'],
    [
      'PAYRECON_ACCOUNTS',
      accounts({ name: 'br-1' }),
      accounts({ name: 'Main Account' }),
      'PAYRECON_ACCOUNTS[0].name: must be 1-63 characters a-z 0-9 _ - starting with a letter or digit',
    ],
    [
      'PAYRECON_ACCOUNTS',
      accounts(),
      accounts({ depositSecret: undefined }),
      'PAYRECON_ACCOUNTS[0].depositSecret: is required',
    ],
    [
      'PAYRECON_ACCOUNTS',
      accounts(),
      accounts({ cashoutPass: 'p'.repeat(33) }),
      'PAYRECON_ACCOUNTS[0].cashoutPass: at most 32 characters',
    ],
    [
      'PAYRECON_ACCOUNTS',
      accounts({ webhookSignatureMode: 'enforce' }),
      accounts({ webhookSignatureMode: 'strict' }),
      'PAYRECON_ACCOUNTS[0].webhookSignatureMode: must be one of off, warn, enforce',
    ],
    [
      'PAYRECON_ACCOUNTS',
      accounts({ xDateWindowSeconds: 60 }),
      accounts({ xDateWindowSeconds: 0 }),
      'PAYRECON_ACCOUNTS[0].xDateWindowSeconds: must be an integer from 1 to 86400',
    ],
    [
      'PAYRECON_ACCOUNTS',
      accounts({ notificationUrl: 'https://m.example.com/hooks' }),
      accounts({ notificationUrl: 'hooks' }),
      'PAYRECON_ACCOUNTS[0].notificationUrl: must be an http(s) URL',
    ],
  ])('%s: accepts %s, rejects %s', (variable, good, bad, message) => {
    expect(() => loadConfig({ [variable]: good })).not.toThrow();
    expect(errorOf({ [variable]: bad })).toBe(message);
  });

  it('overrides one severity and keeps the domain defaults for the rest', () => {
    const config = loadConfig({ PAYRECON_EXCEPTION_SEVERITIES: '{"STUCK":"critical"}' });
    expect(config.exceptions.severities.STUCK).toBe('critical');
    expect(config.exceptions.severities.FEE_MISMATCH).toBe('low');
    expect(errorOf({ PAYRECON_EXCEPTION_SEVERITIES: '{"NOPE":"low"}' })).toBe(
      'PAYRECON_EXCEPTION_SEVERITIES.NOPE: is not a known key',
    );
    expect(errorOf({ PAYRECON_EXCEPTION_DEADLINES: '[1]' })).toBe(
      'PAYRECON_EXCEPTION_DEADLINES: must be a JSON object',
    );
    expect(errorOf({ PAYRECON_ACCOUNTS: '[7]' })).toBe('PAYRECON_ACCOUNTS[0]: must be a JSON object');
    expect(errorOf({ PAYRECON_EXCEPTION_DEADLINES: '{"cashoutOnHold":1}' })).toBe(
      'PAYRECON_EXCEPTION_DEADLINES.cashoutOnHold: is not a known key',
    );
  });

  it('rejects duplicate account names and both account sources at once', () => {
    const two = JSON.stringify([ACCOUNT, ACCOUNT]);
    expect(errorOf({ PAYRECON_ACCOUNTS: two })).toBe('PAYRECON_ACCOUNTS[1].name: must be unique');
    expect(errorOf({ PAYRECON_ACCOUNTS: accounts(), PAYRECON_ACCOUNTS_FILE: '/x' })).toBe(
      'PAYRECON_ACCOUNTS_FILE: must not be set together with PAYRECON_ACCOUNTS',
    );
  });

  it('never echoes a secret in its message', () => {
    const message = errorOf({ PAYRECON_ACCOUNTS: accounts({ cashoutPass: 'topsecret-'.repeat(4) }) });
    expect(message).not.toContain('topsecret');
    expect(message.split('\n')).toHaveLength(1);
  });
});

describe('JOBS_OFF', () => {
  it('sets every scheduled job of the configuration to once a year', () => {
    const cron = loadConfig({ ...JOBS_OFF }).jobs.cron;
    expect(Object.keys(cron).length).toBe(Object.keys(JOBS_OFF).length);
    for (const schedule of Object.values(cron)) expect(schedule).toBe('0 0 1 1 *');
  });
});
