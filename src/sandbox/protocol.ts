/**
 * The provider's authentication and error answers, as the sandbox gives them: header checks of deposit
 * and refund calls (codes 100-105), cashout credentials and Payload-Signature, the read-only Bearer key,
 * error bodies per family (7.1 deposit creation, 7.2 card/refund, 7.4 cashouts), and idempotency keys.
 */
import { createHash } from 'node:crypto';
import { parseXDate, verifyDepositAuthorization, verifyPayloadSignature } from '../provider/signing.ts';
import type { AccountRegistry, SandboxAccount } from './accounts.ts';

/** An answer to send: HTTP status and JSON body. */
export interface Answer {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

export const HEADER_ERRORS = {
  100: { http: 401, type: 'INVALID_CREDENTIALS', description: 'Invalid credentials' },
  101: { http: 400, type: 'MISSING_HEADER', description: 'Missing required header' },
  102: { http: 400, type: 'INVALID_SIGNATURE', description: 'Invalid signature' },
  103: { http: 400, type: 'INVALID_DATE_RANGE', description: 'Invalid date range' },
  104: {
    http: 400,
    type: 'IDEMPOTENCY_KEY_ALREADY_USED',
    description: 'Idempotency key already used with another request',
  },
  105: { http: 400, type: 'EMPTY_HEADER_VALUE', description: 'Empty header value' },
} as const;

export function headerError(code: keyof typeof HEADER_ERRORS, detail?: string): Answer {
  const e = HEADER_ERRORS[code];
  return {
    status: e.http,
    body: {
      code,
      type: e.type,
      description: detail ? `${e.description}: ${detail}` : e.description,
    },
  };
}

/** 7.1 body: a field validation failure of deposit creation (details name each field and rule). */
export function validationError(details: string[], description = 'Invalid request'): Answer {
  return { status: 400, body: { code: 300, type: 'INVALID_PARAMETERS', description, details } };
}

/** 7.2 body. */
export function providerError(
  status: number,
  code: number,
  type: string,
  description: string,
  details?: string[],
): Answer {
  return { status, body: details ? { code, description, details, type } : { code, description, type } };
}

export const resourceNotFound = (what = 'Resource not found'): Answer =>
  providerError(404, 208, 'RESOURCE_NOT_FOUND', what);

/** 7.4 body. */
export function cashoutError(status: number, code: number, message: string, details?: string[]): Answer {
  return { status, body: details ? { code, message, details } : { code, message } };
}

export const CASHOUT_ERRORS = {
  invalidParameters: (details: string[]) =>
    cashoutError(412, 300, `Invalid parameters: ${details.join('; ')}`, details),
  invalidSignature: () => cashoutError(412, 302, 'Invalid control string'),
  invalidBankCode: () => cashoutError(412, 303, 'Invalid bank code'),
  invalidCredentials: () => cashoutError(401, 401, 'Invalid credentials.'),
  invalidJson: () => cashoutError(400, 502, 'Invalid JSON'),
  notFound: () => cashoutError(412, 509, 'Cashout not found with this ID'),
  invalidTransition: () => cashoutError(412, 510, 'Invalid status transition'),
  externalIdUsed: () => cashoutError(412, 511, 'External ID already used'),
  invalidCurrency: () => cashoutError(412, 526, 'Invalid currency'),
  amountUnderMinimum: () => cashoutError(412, 533, 'Amount under the minimum'),
  idempotency: () => cashoutError(400, 104, 'Idempotency key already used with another request'),
};

type Headers = Record<string, string | string[] | undefined>;

function header(headers: Headers, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

export interface AuthOptions {
  /** Allowed distance between X-Date and real time, either side. */
  xDateWindowMs: number;
  /** Time X-Date is compared with (real wall-clock time by default: clients sign with their clock). */
  now: () => number;
}

/**
 * Checks the headers of a deposit or refund call; returns the account or the error answer. Order:
 * missing header (101), empty value (105), unknown login (100), date format or window (103),
 * signature (102).
 */
export function checkDepositHeaders(
  headers: Headers,
  rawBody: string,
  accounts: AccountRegistry,
  options: AuthOptions,
): SandboxAccount | Answer {
  const xDate = header(headers, 'x-date');
  const xLogin = header(headers, 'x-login');
  const authorization = header(headers, 'authorization');
  for (const [name, value] of [
    ['X-Date', xDate],
    ['X-Login', xLogin],
    ['Authorization', authorization],
  ] as const) {
    if (value === undefined) return headerError(101, name);
  }
  for (const [name, value] of [
    ['X-Date', xDate],
    ['X-Login', xLogin],
    ['Authorization', authorization],
  ] as const) {
    if (value !== undefined && value.trim() === '') return headerError(105, name);
  }
  const account = accounts.byDepositLogin(xLogin!);
  if (!account) return headerError(100);
  const date = parseXDate(xDate!);
  if (!date) return headerError(103, "X-Date must be yyyy-MM-dd'T'HH:mm:ssZ");
  if (Math.abs(date.getTime() - options.now()) > options.xDateWindowMs) {
    return headerError(103, 'X-Date outside the allowed window');
  }
  if (
    !verifyDepositAuthorization({
      xDate: xDate!,
      xLogin: xLogin!,
      body: rawBody,
      secret: account.depositSecret,
      authorization,
    })
  ) {
    return headerError(102);
  }
  return account;
}

/** Cashout credentials (body login/pass) and Payload-Signature. */
export function checkCashoutAuth(
  headers: Headers,
  rawBody: string,
  body: Record<string, unknown>,
  accounts: AccountRegistry,
): SandboxAccount | Answer {
  const login = body.login;
  const pass = body.pass;
  if (typeof login !== 'string' || typeof pass !== 'string') return CASHOUT_ERRORS.invalidCredentials();
  const account = accounts.byCashout(login);
  if (!account || account.cashoutPass !== pass) return CASHOUT_ERRORS.invalidCredentials();
  if (!verifyPayloadSignature(rawBody, account.cashoutSecret, header(headers, 'payload-signature'))) {
    return CASHOUT_ERRORS.invalidSignature();
  }
  return account;
}

/** Read-only calls: `Authorization: Bearer <key>`. */
export function checkBearer(headers: Headers, accounts: AccountRegistry): SandboxAccount | Answer {
  const auth = header(headers, 'authorization');
  const m = auth ? /^Bearer\s+(\S+)$/.exec(auth.trim()) : null;
  const account = m ? accounts.byReadOnly(m[1]!) : undefined;
  if (!account) return providerError(401, 401, 'UNAUTHORIZED', 'Invalid read-only key');
  return account;
}

export function isAnswer(value: unknown): value is Answer {
  return typeof value === 'object' && value !== null && 'status' in value && 'body' in value;
}

interface IdempotencyEntry {
  bodyHash: string;
  answer: Promise<Answer>;
  /** The answer once known (what the durable store keeps). */
  settled?: Answer;
}

/** An idempotency key as the durable store keeps it. */
export interface StoredIdempotency {
  h: string;
  a: Answer;
}

/**
 * Idempotency keys of POST calls (docs/provider.md): the same key with the same body gives the first
 * answer again; the same key with another body answers code 104.
 */
export class IdempotencyStore {
  private readonly entries = new Map<string, IdempotencyEntry>();
  /** Keys kept (oldest forgotten first), so long traffic runs stay bounded in memory. */
  private readonly limit: number;

  /** Told `idem:<scope>\u0000<key>` when a key's answer is known or the key is forgotten. */
  onDirty: (key: string) => void = () => {};
  /**
   * The durable store's holds: what a computation under a key changes is held until its answer is
   * stored with it (see Journal.hold). `activeHold` is set while a computation's synchronous part runs.
   */
  holds: { hold(): number; release(token: number): void } | null = null;
  activeHold: number | undefined = undefined;

  constructor(limit = 200_000) {
    this.limit = limit;
  }

  /** The stored form of one key (undefined: unknown, or its answer is not known yet). */
  stored(id: string): StoredIdempotency | undefined {
    const e = this.entries.get(id);
    return e?.settled ? { h: e.bodyHash, a: e.settled } : undefined;
  }

  *storedEntries(): Generator<[string, StoredIdempotency]> {
    for (const [id, e] of this.entries) if (e.settled) yield [id, { h: e.bodyHash, a: e.settled }];
  }

  restore(id: string, stored: StoredIdempotency): void {
    this.entries.set(id, { bodyHash: stored.h, answer: Promise.resolve(stored.a), settled: stored.a });
  }

  async run(
    scope: string,
    key: string | undefined,
    rawBody: string,
    conflict: () => Answer,
    compute: () => Promise<Answer>,
  ): Promise<Answer> {
    if (key === undefined || key === '') return compute();
    const id = `${scope}\u0000${key}`;
    const bodyHash = createHash('sha256').update(rawBody).digest('hex');
    const existing = this.entries.get(id);
    if (existing) return existing.bodyHash === bodyHash ? existing.answer : conflict();
    const hold = this.holds?.hold();
    let answer: Promise<Answer>;
    this.activeHold = hold;
    try {
      answer = compute();
    } finally {
      this.activeHold = undefined;
    }
    const entry: IdempotencyEntry = { bodyHash, answer };
    this.entries.set(id, entry);
    const release = () => {
      if (hold !== undefined) this.holds?.release(hold);
    };
    answer.then(
      (a) => {
        entry.settled = a;
        if (this.entries.get(id) === entry) this.onDirty(`idem:${id}`);
        release();
      },
      () => {
        // A failed computation answers an error now; the key is not kept (a retry computes again).
        if (this.entries.get(id) === entry) this.entries.delete(id);
        release();
      },
    );
    if (this.entries.size > this.limit) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) {
        this.entries.delete(oldest);
        this.onDirty(`idem:${oldest}`);
      }
    }
    return answer;
  }

  get size(): number {
    return this.entries.size;
  }
}
