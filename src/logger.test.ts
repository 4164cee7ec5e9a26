import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { SECRET_KEYS } from './domain/secrets.ts';
import { createLogger, logger, setLogLevel } from './logger.ts';

function capture() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      lines.push(String(chunk));
      done();
    },
  });
  return { log: createLogger({ level: 'info' }, stream), lines };
}

/** `{ a: { b: { [key]: value } } }` with `depth` wrapping levels. */
function nest(depth: number, key: string, value: string): Record<string, unknown> {
  let obj: Record<string, unknown> = { [key]: value };
  for (let i = 0; i < depth; i++) obj = { [`level${i}`]: obj };
  return obj;
}

// Every kind of secret the brief names, under the key names the code uses for them.
const SECRETS: [what: string, key: string][] = [
  ['cashout pass', 'pass'],
  ['cashout pass (config)', 'cashoutPass'],
  ['password', 'password'],
  ['password hash', 'passwordHash'],
  ['deposit secret', 'depositSecret'],
  ['cashout secret', 'cashoutSecret'],
  ['secret key', 'secret_key'],
  ['read-only key', 'readOnlyKey'],
  ['session secret', 'sessionSecret'],
  ['signature', 'signature'],
  ['notification control', 'control'],
  ['Authorization header', 'Authorization'],
  ['authorization header', 'authorization'],
  ['Payload-Signature header', 'Payload-Signature'],
  ['payload-signature header', 'payload-signature'],
  ['card number', 'card_number'],
  ['card number (camel)', 'cardNumber'],
  ['CVV', 'cvv'],
  ['card token', 'card_token'],
  ['checkout token', 'checkout_token'],
  ['cookie', 'cookie'],
];

describe('logger redaction', () => {
  it.each(SECRETS.flatMap(([what, key]) => [0, 1, 2, 3].map((depth) => ({ what, key, depth }))))(
    '$what ($key) at depth $depth never reaches the log',
    ({ key, depth }) => {
      const { log, lines } = capture();
      const value = `SECRET-${key}-${depth}-value`;
      log.info({ ...nest(depth, key, value), marker: 'visible-marker' }, 'something happened');
      const out = lines.join('');
      expect(out).toContain('visible-marker');
      expect(out).toContain('[redacted]');
      expect(out).not.toContain(value);
    },
  );

  it.each(['authorization', 'Authorization', 'payload-signature', 'Payload-Signature', 'x-login', 'X-Login'])(
    'redacts the %s header of a logged request and response',
    (header) => {
      const { log, lines } = capture();
      log.info({ req: { method: 'POST', headers: { [header]: 'D24 abcdef0123' } } }, 'request');
      log.info({ headers: { [header]: 'D24 abcdef0123' } }, 'response');
      log.info({ call: { headers: { [header]: 'D24 abcdef0123' } } }, 'nested');
      expect(lines).toHaveLength(3);
      expect(lines.join('')).not.toContain('abcdef0123');
    },
  );

  it('redacts a whole credit_card object and card fields inside a request body', () => {
    const { log, lines } = capture();
    log.info(
      {
        body: {
          credit_card: { card_number: '4111111111111111', cvv: '123', holder_name: 'Ana' },
          payer: { email: 'a@b.co' },
        },
        cashout: { login: 'cashLogin', pass: 'cashPass-zz' },
      },
      'sending',
    );
    const out = lines.join('');
    expect(out).not.toContain('4111111111111111');
    expect(out).not.toContain('"123"');
    expect(out).not.toContain('cashPass-zz');
    expect(out).toContain('a@b.co');
  });

  it('covers every listed key', () => {
    for (const key of SECRET_KEYS) {
      const { log, lines } = capture();
      log.info({ deep: { [key]: 'leak-check-value' } });
      expect(lines.join(''), key).not.toContain('leak-check-value');
    }
  });

  it('takes its level from the caller, not the environment', () => {
    const before = logger.level;
    setLogLevel('warn');
    expect(logger.level).toBe('warn');
    expect(logger.child({ module: 'x' }).level).toBe('warn');
    setLogLevel(before);
  });
});

describe('readable logs (payrecon up on a terminal)', () => {
  it('writes the root logger through pino-pretty, secrets still redacted, and back to JSON', async () => {
    const { useJsonLogs, useReadableLogs } = await import('./logger.ts');
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    });
    await useReadableLogs(sink);
    try {
      logger.child({ module: 'up' }).info({ password: 'hunter2-secret', topic: 't1' }, 'readable line');
    } finally {
      useJsonLogs();
    }
    const text = lines.join('');
    expect(text).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: readable line/);
    expect(text).toContain('"topic":"t1"');
    expect(text).not.toContain('hunter2-secret');
    expect(() => JSON.parse(text)).toThrow();
  });
});
