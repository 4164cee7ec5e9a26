/**
 * The traffic generator's client: the project's own provider client (`src/provider/client.ts`),
 * configured for a sandbox account, so generated traffic exercises the same code a merchant runs.
 */
import { type ProviderAccount, providerAccountSchema } from '../config.ts';
import { createProviderClient, type ProviderClient, type ProviderClientOptions } from '../provider/client.ts';
import type { SandboxAccount } from './accounts.ts';

/** The `ProviderAccount` (src/config.ts) that talks to a running sandbox as `account`. */
export function providerAccountFor(
  account: SandboxAccount,
  urls: { url: string; ccUrl: string },
  notificationUrl?: string,
): ProviderAccount {
  return providerAccountSchema.parse({
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
  });
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
