/**
 * The traffic generator's client: the project's own provider client (`src/provider/client.ts`),
 * configured for a sandbox account, so generated traffic exercises the same code a merchant runs.
 */
import {
  createProviderClient,
  type ProviderClient,
  type ProviderClientOptions,
  type ProviderConnection,
} from '../provider/client.ts';
import { DEFAULT_ACCOUNT, type SandboxAccount } from './accounts.ts';

/**
 * The provider account that talks to a running sandbox as `account`: the connection, and the webhook
 * checks payrecon applies to it (signatures in warn mode, X-Date within 300 s: the config's defaults).
 * It is a `ProviderAccount` of src/config.ts as it stands.
 */
export function providerAccountFor(
  account: SandboxAccount,
  urls: { url: string; ccUrl: string },
  notificationUrl?: string,
): ProviderConnection & { webhookSignatureMode: 'warn'; xDateWindowSeconds: number } {
  return {
    name: account.name,
    baseUrl: urls.url,
    cardBaseUrl: urls.ccUrl,
    depositLogin: account.login,
    depositSecret: account.depositSecret,
    cashoutLogin: account.cashoutLogin,
    cashoutPass: account.cashoutPass,
    cashoutSecret: account.cashoutSecret,
    readOnlyKey: account.readOnlyKey,
    ...(notificationUrl ? { notificationUrl } : {}),
    webhookSignatureMode: 'warn',
    xDateWindowSeconds: 300,
  };
}

/**
 * The account `payrecon up` gives the sandbox it runs (DEFAULT_ACCOUNT), found through the running
 * instance's endpoints (`api` and `card api` of `endpoints.json`), so a command on the same data directory
 * (`payrecon backfill poll`) reaches that sandbox as `up` does; none when there is no such sandbox.
 */
export function runningSandboxAccounts(
  urls: Readonly<Record<string, string>> | null | undefined,
): ReturnType<typeof providerAccountFor>[] {
  const url = urls?.api;
  const ccUrl = urls?.['card api'];
  return url && ccUrl ? [providerAccountFor(DEFAULT_ACCOUNT, { url, ccUrl })] : [];
}

export type TrafficClient = Pick<
  ProviderClient,
  'createDeposit' | 'createCardDeposit' | 'createCashout' | 'createRefund'
>;

export function trafficClientFor(
  account: SandboxAccount,
  urls: { url: string; ccUrl: string },
  options: ProviderClientOptions = {},
): TrafficClient {
  // Traffic must not retry into the sandbox's own faults forever: one retry at most.
  return createProviderClient(providerAccountFor(account, urls), { retries: 1, ...options });
}
