/**
 * The traffic generator's HTTP client. Signed requests exactly as a merchant sends them.
 */
import { request } from 'undici';
import { stringifyProviderJson } from '../provider/json.ts';
import { depositAuthorization, formatXDate, payloadSignature } from '../provider/signing.ts';
import type { SandboxAccount } from './accounts.ts';

export interface TrafficClient {
  createDeposit(body: Record<string, unknown>): Promise<unknown>;
  createCardDeposit(body: Record<string, unknown>): Promise<unknown>;
  createCashout(body: Record<string, unknown>): Promise<unknown>;
  createRefund(body: Record<string, unknown>): Promise<unknown>;
}

async function post(url: string, body: string, headers: Record<string, string>): Promise<unknown> {
  const res = await request(url, {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/json', ...headers },
  });
  const text = await res.body.text();
  if (res.statusCode >= 300) throw new Error(`${url}: HTTP ${res.statusCode} ${text.slice(0, 200)}`);
  return text;
}

export function trafficClientFor(
  account: SandboxAccount,
  urls: { url: string; ccUrl: string },
): TrafficClient {
  const depositHeaders = (body: string) => {
    const xDate = formatXDate(new Date());
    return {
      'x-date': xDate,
      'x-login': account.login,
      authorization: depositAuthorization({
        xDate,
        xLogin: account.login,
        body,
        secret: account.depositSecret,
      }),
    };
  };
  const signedPost = (url: string, value: Record<string, unknown>) => {
    const body = stringifyProviderJson(value);
    return post(url, body, depositHeaders(body));
  };
  return {
    createDeposit: (b) => signedPost(`${urls.url}/v3/deposits`, b),
    createCardDeposit: (b) => signedPost(`${urls.ccUrl}/v3/deposits`, b),
    createRefund: (b) => signedPost(`${urls.url}/v3/refunds`, b),
    createCashout: (b) => {
      const body = stringifyProviderJson({ login: account.cashoutLogin, pass: account.cashoutPass, ...b });
      return post(`${urls.url}/v3/cashout`, body, {
        'payload-signature': payloadSignature(body, account.cashoutSecret),
      });
    },
  };
}
