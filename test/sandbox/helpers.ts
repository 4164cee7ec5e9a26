/**
 * Test helpers: an in-process sandbox on 127.0.0.1 port 0 and raw signed requests, built by hand from
 * docs/provider.md (so the suite checks the sandbox against the contract, not against itself).
 */
import { createHmac } from 'node:crypto';
import { request } from 'undici';
import { DEFAULT_ACCOUNT } from '../../src/sandbox/accounts.ts';
import { ManualClock } from '../../src/sandbox/clock.ts';
import { type RunningSandbox, type StartSandboxOptions, startSandbox } from '../../src/sandbox/main.ts';

export const ACCOUNT = DEFAULT_ACCOUNT;

export interface Res {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  // biome-ignore lint/suspicious/noExplicitAny: test bodies are read loosely
  json: any;
}

export async function startTestSandbox(
  options: StartSandboxOptions = {},
): Promise<RunningSandbox & { clock: ManualClock }> {
  const clock = options.clock instanceof ManualClock ? options.clock : new ManualClock(Date.now());
  const sb = await startSandbox({ seed: 7, ...options, clock });
  return Object.assign(sb, { clock });
}

function hmac(key: string, message: string): string {
  return createHmac('sha256', key).update(message).digest('hex');
}

export function xDateNow(offsetMs = 0): string {
  return `${new Date(Date.now() + offsetMs).toISOString().slice(0, 19)}Z`;
}

async function toRes(res: Awaited<ReturnType<typeof request>>): Promise<Res> {
  const text = await res.body.text();
  let json: unknown;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.statusCode, headers: res.headers, text, json };
}

export interface SignedOptions {
  method?: 'GET' | 'POST';
  body?: string | object;
  login?: string;
  secret?: string;
  xDate?: string;
  headers?: Record<string, string | undefined>;
  omit?: string[];
  idempotencyKey?: string;
}

/** A deposit-style request signed as docs/provider.md says: D24 hex HMAC(X-Date + X-Login + body). */
export async function signed(base: string, path: string, options: SignedOptions = {}): Promise<Res> {
  const body =
    options.body === undefined
      ? ''
      : typeof options.body === 'string'
        ? options.body
        : JSON.stringify(options.body);
  const login = options.login ?? ACCOUNT.login;
  const xDate = options.xDate ?? xDateNow();
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'x-date': xDate,
    'x-login': login,
    authorization: `D24 ${hmac(options.secret ?? ACCOUNT.depositSecret, xDate + login + body)}`,
  };
  if (options.idempotencyKey) headers['x-idempotency-key'] = options.idempotencyKey;
  for (const [k, v] of Object.entries(options.headers ?? {})) {
    if (v === undefined) delete headers[k];
    else headers[k] = v;
  }
  for (const k of options.omit ?? []) delete headers[k];
  const method = options.method ?? (options.body === undefined ? 'GET' : 'POST');
  return toRes(await request(base + path, { method, headers, ...(method === 'GET' ? {} : { body }) }));
}

export interface CashoutOptions {
  method?: 'POST' | 'PUT' | 'DELETE';
  secret?: string;
  signature?: string | null;
  idempotencyKey?: string;
  raw?: string;
}

/** A cashout request: credentials in the body, Payload-Signature = hex HMAC(body) with the cashout secret. */
export async function cashoutCall(
  base: string,
  path: string,
  body: Record<string, unknown>,
  options: CashoutOptions = {},
): Promise<Res> {
  const text =
    options.raw ?? JSON.stringify({ login: ACCOUNT.cashoutLogin, pass: ACCOUNT.cashoutPass, ...body });
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  const sig =
    options.signature === undefined ? hmac(options.secret ?? ACCOUNT.cashoutSecret, text) : options.signature;
  if (sig !== null) headers['payload-signature'] = sig;
  if (options.idempotencyKey) headers['x-idempotency-key'] = options.idempotencyKey;
  return toRes(await request(base + path, { method: options.method ?? 'POST', headers, body: text }));
}

export async function control(base: string, path: string, body?: object, method?: string): Promise<Res> {
  return toRes(
    await request(`${base}/_sandbox${path}`, {
      method: (method ?? (body === undefined ? 'GET' : 'POST')) as 'GET',
      headers: { 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    }),
  );
}

export async function get(url: string): Promise<Res> {
  return toRes(await request(url));
}

export const PAYER = {
  document: '12345678909',
  document_type: 'CPF',
  email: 'ana@example.com',
  first_name: 'Ana',
  last_name: 'Silva',
};

/** A BR PIX deposit with every field ONE_SHOT needs. */
export function oneShotBody(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    country: 'BR',
    currency: 'BRL',
    amount: 100.5,
    payment_method: 'IX',
    payer: { ...PAYER },
    ...extra,
  };
}

export function cardBody(
  number = '4111111111111111',
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    country: 'BR',
    currency: 'BRL',
    amount: 50,
    client_ip: '203.0.113.7',
    payer: { ...PAYER },
    credit_card: {
      card_number: number,
      cvv: '123',
      expiration_month: '12',
      expiration_year: String((new Date().getUTCFullYear() + 2) % 100).padStart(2, '0'),
      holder_name: 'Ana Silva',
    },
    ...extra,
  };
}

let seq = 0;
export function cashoutBody(extra: Record<string, unknown> = {}): Record<string, unknown> {
  seq++;
  return {
    external_id: `ext-${Date.now()}-${seq}`,
    country: 'BR',
    currency: 'BRL',
    amount: 25.5,
    document_id: '12345678909',
    beneficiary_name: 'Ana',
    beneficiary_lastname: 'Silva',
    bank_code: '341',
    bank_account: '123456-7',
    bank_branch: '0001',
    account_type: 'C',
    notification_url: 'https://merchant.example/hooks/cashout',
    ...extra,
  };
}

/** A local webhook receiver that records every request; `status` decides the answer. */
export async function startReceiver(statusFor: (n: number) => number = () => 200) {
  const { createServer } = await import('node:http');
  const received: { path: string; headers: Record<string, unknown>; body: string; at: number }[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => {
      received.push({ path: req.url ?? '', headers: req.headers, body, at: Date.now() });
      res.statusCode = statusFor(received.length);
      res.end('ok');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** A raw JSON number: `toJson` writes its text as is (more digits than a JavaScript number keeps). */
export const raw = (text: string) => ({ __raw: text });

/** JSON.stringify that writes `raw(...)` values as bare numbers. */
export function toJson(value: unknown): string {
  return JSON.stringify(value, (_k, v) =>
    v && typeof v === 'object' && '__raw' in v ? `__RAW:${(v as { __raw: string }).__raw}` : v,
  ).replace(/"__RAW:([^"]*)"/g, '$1');
}

/** A copy of `base` with the dotted `path` set to `value` (deleted when undefined). */
export function withPath(
  base: Record<string, unknown>,
  path: string,
  value: unknown,
): Record<string, unknown> {
  const copy = structuredClone(base);
  const parts = path.split('.');
  let cur = copy as Record<string, unknown>;
  for (const p of parts.slice(0, -1)) {
    cur[p] = typeof cur[p] === 'object' && cur[p] !== null ? cur[p] : {};
    cur = cur[p] as Record<string, unknown>;
  }
  if (value === undefined) delete cur[parts[parts.length - 1]!];
  else cur[parts[parts.length - 1]!] = value;
  return copy;
}

/** `n` times the character `c`. */
export const long = (n: number, c = 'a') => c.repeat(n);
