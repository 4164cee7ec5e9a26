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
  it('reads the match rules as JSON or from a file, and names a bad one in one line', () => {
    expect(loadConfig({}).matching).toMatchObject({ settlementGraceDays: 2 });
    expect(loadConfig({}).matching.rules.map((r) => r.name)).toContain('bank-reference');
    const rules = [
      {
        name: 'ref',
        pair: 'bank-settlement',
        keys: [{ left: 'endToEndId', right: 'bankReference' }],
        tolerance: { absoluteMinor: 250, percent: '0.5' },
        windowDays: 4,
        cardinality: 'one-to-many',
      },
      { name: 'amount', pair: 'bank-settlement' },
    ];
    const fromJson = loadConfig({ PAYRECON_MATCH_RULES: JSON.stringify(rules) }).matching.rules;
    expect(fromJson[0]).toEqual({
      name: 'ref',
      pair: 'bank-settlement',
      keys: [{ left: 'endToEndId', right: 'bankReference' }],
      tolerance: { absoluteMinor: 250n, percentBps: 50 },
      windowDays: 4,
      cardinality: 'one-to-many',
      maxCandidates: 12,
      maxGroup: 4,
    });
    expect(fromJson[1]).toMatchObject({
      keys: [],
      tolerance: null,
      windowDays: null,
      cardinality: 'one-to-one',
    });
    const file = join(mkdtempSync(join(tmpdir(), 'payrecon-rules-')), 'rules.json');
    writeFileSync(file, JSON.stringify(rules));
    expect(loadConfig({ PAYRECON_MATCH_RULES: file }).matching.rules).toEqual(fromJson);
    expect(errorOf({ PAYRECON_MATCH_RULES: '/nowhere/rules.json' })).toMatch(
      /^PAYRECON_MATCH_RULES: must be a JSON list or a readable file \(ENOENT\)$/,
    );
    expect(errorOf({ PAYRECON_MATCH_RULES: JSON.stringify([rules[0], rules[0]]) })).toMatch(
      /^PAYRECON_MATCH_RULES: names rule "ref" twice$/,
    );
    expect(
      errorOf({ PAYRECON_MATCH_RULES: JSON.stringify([{ ...rules[0], tolerance: { percent: '0.125' } }]) }),
    ).toMatch(/^PAYRECON_MATCH_RULES\[0\]\.tolerance\.percent: must be a percent/);
    expect(
      errorOf({
        PAYRECON_MATCH_RULES: JSON.stringify([{ ...rules[0], keys: [{ left: 'iban', right: 'x' }] }]),
      }),
    ).toMatch(/^PAYRECON_MATCH_RULES: rule ref: left key must be one of/);
    expect(errorOf({ PAYRECON_SETTLEMENT_GRACE_DAYS: '61' })).toMatch(/^PAYRECON_SETTLEMENT_GRACE_DAYS: /);
  });

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
      // The keys are configured (an account cannot lack them): signatures are enforced by default.
      webhookSignatureMode: 'enforce',
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

describe('Kafka, registry and PostgreSQL security, and the topic plan', () => {
  const dir = mkdtempSync(join(tmpdir(), 'payrecon-config-security-'));
  const ca = join(dir, 'ca.pem');
  writeFileSync(ca, '-----BEGIN CERTIFICATE-----\n');
  const secret = join(dir, 'password');
  writeFileSync(secret, 'from-a-file\n');

  it('is plaintext, unauthenticated and follows the catalog by default', () => {
    const config = loadConfig({});
    expect(config.kafka.security).toEqual({
      ssl: false,
      caFile: null,
      certFile: null,
      keyFile: null,
      sasl: null,
    });
    expect(config.kafka.topics).toEqual({
      partitions: null,
      replicationFactor: null,
      minInsyncReplicas: null,
      retentionMs: null,
      overrides: {},
      autoCreate: true,
    });
    expect(config.schemaRegistry).toEqual({ url: null, username: null, password: null, caFile: null });
    expect(config.database.caFile).toBeNull();
  });

  it('reads TLS, SASL (password from a _FILE), registry auth and the topic plan', () => {
    const config = loadConfig({
      KAFKA_BROKERS: 'b1.example:9093',
      KAFKA_SSL: 'true',
      KAFKA_SSL_CA_FILE: ca,
      KAFKA_SASL_MECHANISM: 'scram-sha-512',
      KAFKA_SASL_USERNAME: 'payrecon',
      KAFKA_SASL_PASSWORD_FILE: secret,
      SCHEMA_REGISTRY_URL: 'https://registry.example',
      SCHEMA_REGISTRY_USERNAME: 'key',
      SCHEMA_REGISTRY_PASSWORD: 'registry-secret',
      SCHEMA_REGISTRY_CA_FILE: ca,
      KAFKA_TOPIC_PARTITIONS: '12',
      KAFKA_REPLICATION_FACTOR: '3',
      KAFKA_MIN_INSYNC_REPLICAS: '2',
      KAFKA_RETENTION_MS: '-1',
      KAFKA_TOPIC_OVERRIDES: '{"provider.status.observed.v1": {"partitions": 24}}',
      KAFKA_AUTO_CREATE_TOPICS: 'false',
    });
    expect(config.kafka.security).toEqual({
      ssl: true,
      caFile: ca,
      certFile: null,
      keyFile: null,
      sasl: { mechanism: 'scram-sha-512', username: 'payrecon', password: 'from-a-file' },
    });
    expect(config.schemaRegistry).toEqual({
      url: 'https://registry.example',
      username: 'key',
      password: 'registry-secret',
      caFile: ca,
    });
    expect(config.kafka.topics).toEqual({
      partitions: 12,
      replicationFactor: 3,
      minInsyncReplicas: 2,
      retentionMs: -1,
      overrides: { 'provider.status.observed.v1': { partitions: 24 } },
      autoCreate: false,
    });
  });

  it('passes the PostgreSQL CA to node-postgres as sslrootcert and keeps sslmode', () => {
    const url = 'postgres://u:p@db.example:5432/payrecon?sslmode=verify-full';
    const config = loadConfig({ DATABASE_URL: url, DATABASE_SSL_CA_FILE: ca });
    expect(config.database.url).toBe(`${url}&sslrootcert=${encodeURIComponent(ca)}`);
    expect(loadConfig({ DATABASE_URL: 'postgres://db/x', DATABASE_SSL_CA_FILE: ca }).database.url).toBe(
      `postgres://db/x?sslrootcert=${encodeURIComponent(ca)}`,
    );
    expect(loadConfig({ DATABASE_URL: url }).database.url).toBe(url);
  });

  it('names the variable for each inconsistent or unreadable setting, never a secret', () => {
    const sasl = { KAFKA_BROKERS: 'b:9092', KAFKA_SASL_MECHANISM: 'plain', KAFKA_SASL_USERNAME: 'u' };
    expect(errorOf({ ...sasl })).toBe('KAFKA_SASL_PASSWORD: is required with KAFKA_SASL_MECHANISM');
    expect(errorOf({ KAFKA_SASL_USERNAME: 'u', KAFKA_SASL_PASSWORD: 'hunter2-secret' })).toMatch(
      /^KAFKA_SASL_MECHANISM: is required with KAFKA_SASL_USERNAME/,
    );
    expect(errorOf({ ...sasl, KAFKA_SASL_MECHANISM: 'gssapi', KAFKA_SASL_PASSWORD: 'x' })).toBe(
      'KAFKA_SASL_MECHANISM: must be one of plain, scram-sha-256, scram-sha-512',
    );
    expect(errorOf({ KAFKA_SSL_CA_FILE: ca })).toBe('KAFKA_SSL_CA_FILE: needs KAFKA_SSL=true');
    expect(errorOf({ KAFKA_SSL: 'true', KAFKA_SSL_CA_FILE: join(dir, 'missing.pem') })).toBe(
      'KAFKA_SSL_CA_FILE: must name a readable file (ENOENT)',
    );
    expect(errorOf({ KAFKA_SSL: 'true', KAFKA_SSL_CERT_FILE: ca })).toBe(
      'KAFKA_SSL_KEY_FILE: is required with the other of KAFKA_SSL_CERT_FILE and KAFKA_SSL_KEY_FILE',
    );
    expect(errorOf({ KAFKA_SASL_PASSWORD: 'a', KAFKA_SASL_PASSWORD_FILE: secret })).toBe(
      'KAFKA_SASL_PASSWORD_FILE: must not be set together with KAFKA_SASL_PASSWORD',
    );
    expect(errorOf({ KAFKA_SASL_PASSWORD_FILE: join(dir, 'nope') })).toBe(
      'KAFKA_SASL_PASSWORD_FILE: must name a readable file (ENOENT)',
    );
    expect(errorOf({ SCHEMA_REGISTRY_URL: 'http://r', SCHEMA_REGISTRY_USERNAME: 'k' })).toBe(
      'SCHEMA_REGISTRY_PASSWORD: is required with the other of SCHEMA_REGISTRY_USERNAME and SCHEMA_REGISTRY_PASSWORD',
    );
    expect(errorOf({ SCHEMA_REGISTRY_URL: 'http://r', SCHEMA_REGISTRY_CA_FILE: ca })).toBe(
      'SCHEMA_REGISTRY_CA_FILE: needs an https SCHEMA_REGISTRY_URL',
    );
    expect(errorOf({ DATABASE_SSL_CA_FILE: ca })).toBe(
      'DATABASE_SSL_CA_FILE: needs DATABASE_URL (the embedded PostgreSQL has no TLS)',
    );
    expect(errorOf({ KAFKA_TOPIC_PARTITIONS: '0' })).toBe(
      'KAFKA_TOPIC_PARTITIONS: must be an integer from 1 to 10000',
    );
    expect(errorOf({ KAFKA_TOPIC_OVERRIDES: '{"t": {"partitions": 2, "replicas": 3}}' })).toBe(
      'KAFKA_TOPIC_OVERRIDES.t.replicas: is not a known key',
    );
    expect(errorOf({ KAFKA_AUTO_CREATE_TOPICS: 'maybe' })).toBe(
      'KAFKA_AUTO_CREATE_TOPICS: must be true or false',
    );
  });
});
