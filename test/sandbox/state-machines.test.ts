import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cardBody,
  cashoutBody,
  cashoutCall,
  control,
  oneShotBody,
  signed,
  startTestSandbox,
} from './helpers.ts';

let sb: Awaited<ReturnType<typeof startTestSandbox>>;
beforeAll(async () => {
  sb = await startTestSandbox();
});
afterAll(async () => {
  await sb.close();
});

/**
 * The moves the sandbox must allow, written out from the spec's section 3 (and, for deposits, the
 * lifecycle of statuses.ts, since the spec shows only the 3DS, crypto and expiry rows). Every other
 * (from, to) pair must be refused.
 */
const DEPOSIT_ALLOWED: Record<string, string[]> = {
  CREATED: [
    'PENDING',
    'FOR_REVIEW',
    'APPROVED',
    'EARLY_RELEASED',
    'COMPLETED',
    'DECLINED',
    'CANCELLED',
    'EXPIRED',
  ],
  PENDING: ['FOR_REVIEW', 'APPROVED', 'EARLY_RELEASED', 'COMPLETED', 'DECLINED', 'CANCELLED', 'EXPIRED'],
  PENDING_AUTHENTICATION: ['PENDING', 'COMPLETED', 'DECLINED', 'CANCELLED', 'EXPIRED'],
  FOR_REVIEW: ['EARLY_RELEASED', 'COMPLETED', 'DECLINED', 'CANCELLED'],
  APPROVED: ['COMPLETED'],
  EARLY_RELEASED: ['COMPLETED', 'DECLINED', 'CANCELLED', 'EXPIRED'],
  COMPLETED: [],
  DECLINED: [],
  // The provider's manual completion of a late payment (docs/provider.md).
  CANCELLED: ['COMPLETED'],
  EXPIRED: ['CANCELLED', 'COMPLETED'],
};
const CASHOUT_ALLOWED: Record<string, string[]> = {
  PENDING: ['ON_HOLD', 'CANCELLED', 'DELIVERED'],
  ON_HOLD: ['PENDING', 'CANCELLED'],
  DELIVERED: ['COMPLETED', 'REJECTED'],
  COMPLETED: ['REJECTED'],
  CANCELLED: [],
  REJECTED: [],
};
const REFUND_ALLOWED: Record<string, string[]> = {
  PENDING: ['INCORRECT_DETAILS', 'CANCELLED', 'DELIVERED'],
  INCORRECT_DETAILS: ['PENDING', 'CANCELLED'],
  DELIVERED: ['COMPLETED', 'REJECTED'],
  COMPLETED: ['REJECTED'],
  CANCELLED: [],
  REJECTED: [],
};
const DEPOSIT_STATUSES = Object.keys(DEPOSIT_ALLOWED);
const CASHOUT_STATUSES = [...Object.keys(CASHOUT_ALLOWED), 'DECLINED'];
const REFUND_STATUSES = [...Object.keys(REFUND_ALLOWED), 'DECLINED'];

/** How each status is reached through the API and the control API. */
async function depositIn(status: string): Promise<number> {
  switch (status) {
    case 'CREATED':
      return (await signed(sb.url, '/v3/deposits', { body: { country: 'BR', currency: 'BRL', amount: 10 } }))
        .json.deposit_id;
    case 'PENDING_AUTHENTICATION':
      return (await signed(sb.ccUrl, '/v3/deposits', { body: cardBody('4000000000000069') })).json.deposit_id;
    case 'COMPLETED':
      return (await signed(sb.ccUrl, '/v3/deposits', { body: cardBody() })).json.deposit_id;
    case 'DECLINED':
      return (await signed(sb.ccUrl, '/v3/deposits', { body: cardBody('4000000000000010') })).json.deposit_id;
    default: {
      const id = (await signed(sb.url, '/v3/deposits', { body: oneShotBody() })).json.deposit_id;
      if (status !== 'PENDING')
        expect((await control(sb.url, `/deposits/${id}/transition`, { to: status })).status).toBe(200);
      return id;
    }
  }
}

const CASHOUT_PATHS: Record<string, string[]> = {
  PENDING: [],
  ON_HOLD: ['ON_HOLD'],
  DELIVERED: ['DELIVERED'],
  COMPLETED: ['DELIVERED', 'COMPLETED'],
  CANCELLED: ['CANCELLED'],
  REJECTED: ['DELIVERED', 'REJECTED'],
};

async function cashoutIn(status: string): Promise<number> {
  const id = Number((await cashoutCall(sb.url, '/v3/cashout', cashoutBody())).json.cashout_id);
  for (const to of CASHOUT_PATHS[status]!) {
    expect((await control(sb.url, `/cashouts/${id}/transition`, { to })).status).toBe(200);
  }
  return id;
}

const REFUND_PATHS: Record<string, string[]> = {
  PENDING: [],
  INCORRECT_DETAILS: ['INCORRECT_DETAILS'],
  DELIVERED: ['DELIVERED'],
  COMPLETED: ['DELIVERED', 'COMPLETED'],
  CANCELLED: ['CANCELLED'],
  REJECTED: ['DELIVERED', 'REJECTED'],
};

async function refundIn(status: string): Promise<number> {
  const depositId = (await signed(sb.ccUrl, '/v3/deposits', { body: cardBody() })).json.deposit_id;
  const id = (await signed(sb.url, '/v3/refunds', { body: { deposit_id: depositId, amount: 5 } })).json
    .refund_id;
  for (const to of REFUND_PATHS[status]!) {
    expect((await control(sb.url, `/refunds/${id}/transition`, { to })).status).toBe(200);
  }
  return id;
}

function pairs(froms: string[], tos: string[]): [string, string][] {
  return froms.flatMap((f) => tos.map((t) => [f, t] as [string, string]));
}

async function checkPair(kind: string, id: number, from: string, to: string, allowed: boolean) {
  const before = await control(sb.url, `/${kind}/${id}`);
  expect(before.json.status).toBe(from);
  const res = await control(sb.url, `/${kind}/${id}/transition`, { to });
  const after = await control(sb.url, `/${kind}/${id}`);
  if (allowed) {
    expect(res.status).toBe(200);
    expect(after.json.status).toBe(to);
    expect(after.json.history.at(-1)).toMatchObject({ from, to, trigger: 'control' });
  } else {
    expect(res.status).toBe(409);
    expect(res.json).toMatchObject({ code: 'ILLEGAL_TRANSITION', from, to });
    expect(after.json.status).toBe(from);
    expect(after.json.history.length).toBe(before.json.history.length);
  }
}

describe('deposit state machine (3.1): every (from, to) pair', () => {
  it.each(pairs(DEPOSIT_STATUSES, DEPOSIT_STATUSES))('%s -> %s', async (from, to) => {
    await checkPair('deposits', await depositIn(from), from, to, DEPOSIT_ALLOWED[from]!.includes(to));
  });
});

describe('cashout state machine (3.2): every (from, to) pair through the control API', () => {
  it.each(pairs(Object.keys(CASHOUT_ALLOWED), CASHOUT_STATUSES))('%s -> %s', async (from, to) => {
    await checkPair('cashouts', await cashoutIn(from), from, to, CASHOUT_ALLOWED[from]!.includes(to));
  });
});

describe('refund state machine (3.3): every (from, to) pair through the control API', () => {
  it.each(pairs(Object.keys(REFUND_ALLOWED), REFUND_STATUSES))('%s -> %s', async (from, to) => {
    await checkPair('refunds', await refundIn(from), from, to, REFUND_ALLOWED[from]!.includes(to));
  });
});

const CODES: Record<string, number> = {
  PENDING: 0,
  COMPLETED: 1,
  CANCELLED: 2,
  REJECTED: 3,
  DELIVERED: 4,
  ON_HOLD: 5,
};

describe('cashout moves through the merchant API (4.5, 4.6): allowed ones move, all others answer 510', () => {
  const calls = [
    ['PUT status ON_HOLD', 'PUT', '/v3/cashout/status', 'ON_HOLD', ['PENDING']],
    ['PUT status PENDING', 'PUT', '/v3/cashout/status', 'PENDING', ['ON_HOLD']],
    ['DELETE cancel', 'DELETE', '/v3/cashout/cancel', 'CANCELLED', ['PENDING', 'ON_HOLD']],
  ] as const;
  const cases = Object.keys(CASHOUT_ALLOWED).flatMap((from) => calls.map((c) => [from, ...c] as const));
  it.each(cases)('from %s: %s', async (from, _name, method, path, target, allowedFrom) => {
    const id = await cashoutIn(from);
    const ext = (await control(sb.url, `/cashouts/${id}`)).json.externalId;
    const body = method === 'PUT' ? { cashout_id: id, status: target } : { cashout_id: id, external_id: ext };
    const res = await cashoutCall(sb.url, path, body, { method });
    const after = await cashoutCall(sb.url, '/v3/cashout/status', { cashout_id: id });
    if ((allowedFrom as readonly string[]).includes(from)) {
      expect(res.status).toBe(200);
      expect(res.json.cashout_status).toBe(CODES[target]);
      expect(after.json.cashout_status).toBe(CODES[target]);
    } else {
      expect(res.status).toBe(412);
      expect(res.json).toEqual({ code: 510, message: 'Invalid status transition' });
      expect(after.json.cashout_status).toBe(CODES[from]);
    }
  });

  it('PUT with a status other than PENDING or ON_HOLD is a validation error, not a move', async () => {
    const id = await cashoutIn('PENDING');
    const res = await cashoutCall(
      sb.url,
      '/v3/cashout/status',
      { cashout_id: id, status: 'CANCELLED' },
      { method: 'PUT' },
    );
    expect(res.json.code).toBe(300);
    expect((await control(sb.url, `/cashouts/${id}`)).json.status).toBe('PENDING');
  });

  it('DECLINED is never stored: a failed creation creates nothing', async () => {
    const before = sb.control.deps.engine.cashouts.size;
    const res = await cashoutCall(sb.url, '/v3/cashout', cashoutBody({ document_id: undefined }));
    expect(res.status).toBe(412);
    expect(res.json.code).toBe(300);
    expect(sb.control.deps.engine.cashouts.size).toBe(before);
    const refunds = sb.control.deps.engine.refunds.size;
    expect((await signed(sb.url, '/v3/refunds', { body: { deposit_id: 1 } })).status).toBe(404);
    expect(sb.control.deps.engine.refunds.size).toBe(refunds);
  });
});

describe('named provider-side moves', () => {
  it('customer pays: in full, another amount, from a third party; crypto and early release paths', async () => {
    const pay = async (body: object, extra: Record<string, unknown> = {}) => {
      const id = (await signed(sb.url, '/v3/deposits', { body: oneShotBody(extra) })).json.deposit_id;
      await control(sb.url, `/deposits/${id}/pay`, body);
      return (await signed(sb.url, `/v3/deposits/${id}`)).json;
    };
    expect((await pay({})).status).toBe('COMPLETED');
    expect((await pay({ amount: '100.50' })).status).toBe('COMPLETED');
    expect(await pay({ amount: '90.00' })).toMatchObject({
      status: 'CANCELLED',
      status_reason: 'AMOUNT_MISMATCH',
      paid_amount: 90,
    });
    expect(await pay({ third_party: true })).toMatchObject({
      status: 'CANCELLED',
      status_reason: 'THIRD_PARTY_PAYER',
    });
    const crypto = await pay({}, { crypto: { currency: 'USDT', wallet: 'w', network: 'TRC20' } });
    expect(crypto.status).toBe('APPROVED');
    await control(sb.url, `/deposits/${crypto.deposit_id}/complete`, {});
    expect((await signed(sb.url, `/v3/deposits/${crypto.deposit_id}`)).json.status).toBe('COMPLETED');
    const early = await pay({}, { early_release: true });
    expect(early.status).toBe('EARLY_RELEASED');
    const feeOnPayer = await pay({ amount: '102.01' }, { fee_on_payer: true });
    expect(feeOnPayer.status).toBe('COMPLETED');
  });

  it('bank delivers, confirms, rejects with a code, and returns a completed payout', async () => {
    const id = await cashoutIn('PENDING');
    await control(sb.url, `/cashouts/${id}/deliver`, {});
    const delivered = await cashoutCall(sb.url, '/v3/cashout/status', { cashout_id: id });
    expect(delivered.json.cashout_status).toBe(4);
    expect(delivered.json.provider_external_reference).toBeTruthy();
    await control(sb.url, `/cashouts/${id}/confirm`, {});
    await control(sb.url, `/cashouts/${id}/return`, { code: 803, reason: 'ERROR_ACCOUNT_CLOSED' });
    const returned = await cashoutCall(sb.url, '/v3/cashout/status', { cashout_id: id });
    expect(returned.json).toMatchObject({
      cashout_status: 3,
      rejection_code: 803,
      rejection_reason: 'ERROR_ACCOUNT_CLOSED',
    });
    const history = (await control(sb.url, `/cashouts/${id}`)).json.history.map((h: { to: string }) => h.to);
    expect(history).toEqual(['PENDING', 'DELIVERED', 'COMPLETED', 'REJECTED']);

    const other = await cashoutIn('DELIVERED');
    await control(sb.url, `/cashouts/${other}/reject`, { code: 800, reason: 'ERROR_ACCOUNT_INCORRECT' });
    expect((await cashoutCall(sb.url, '/v3/cashout/status', { cashout_id: other })).json.rejection_code).toBe(
      800,
    );
  });

  it('refund actions: incorrect details, corrected, delivered, confirmed, returned', async () => {
    const id = await refundIn('PENDING');
    for (const action of ['incorrect-details', 'correct', 'deliver', 'confirm', 'return']) {
      expect((await control(sb.url, `/refunds/${id}/${action}`, {})).status).toBe(200);
    }
    const st = await signed(sb.url, `/v3/refunds/${id}`);
    expect(st.json.status).toBe('REJECTED');
    expect((await control(sb.url, `/refunds/${id}/deliver`, {})).status).toBe(409);
  });

  it('unknown entities and actions answer 404; unknown statuses 400', async () => {
    expect((await control(sb.url, '/deposits/1/pay', {})).status).toBe(404);
    const id = await depositIn('PENDING');
    expect((await control(sb.url, `/deposits/${id}/teleport`, {})).status).toBe(404);
    expect((await control(sb.url, `/deposits/${id}/transition`, { to: 'FLYING' })).status).toBe(400);
  });
});
