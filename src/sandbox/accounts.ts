/**
 * Merchant accounts known to the sandbox. The default account is always present; more come from a
 * JSON file (`--accounts FILE`): an array of objects with the fields of `SandboxAccount` (only `name`,
 * `login`, `depositSecret`, `cashoutLogin`, `cashoutPass`, `cashoutSecret` and `readOnlyKey` required;
 * `timeZone` and `settlement` shape the account's settlements).
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { isTimeZone } from '../domain/zoned-time.ts';
import { type SettlementConfig, settlementConfigSchema } from './settlement-config.ts';

export interface SandboxAccount {
  name: string;
  /** X-Login of deposit and refund calls. */
  login: string;
  depositSecret: string;
  cashoutLogin: string;
  cashoutPass: string;
  cashoutSecret: string;
  readOnlyKey: string;
  /** Default notification URL (the Merchant Panel setting); http is allowed here for local runs. */
  notificationUrl: string | null;
  /** May use the card-data endpoint (PCI attestation given). */
  pci: boolean;
  /** IANA time zone of the settlement cut-offs and bank booking days (default UTC). */
  timeZone?: string;
  /** How the account's balance is paid out (defaults: see settlement-config.ts). */
  settlement?: Partial<SettlementConfig>;
}

export const DEFAULT_ACCOUNT: Readonly<SandboxAccount> = Object.freeze({
  name: 'sandbox',
  login: 'sandbox-login',
  depositSecret: 'sandbox-deposit-secret',
  cashoutLogin: 'sandbox-cashout-login',
  cashoutPass: 'sandbox-cashout-pass',
  cashoutSecret: 'sandbox-cashout-secret',
  readOnlyKey: 'sandbox-read-only-key',
  notificationUrl: null,
  pci: true,
});

const max32 = z.string().min(1).max(32);

export const accountSchema = z.object({
  name: z.string().min(1).max(64),
  login: z.string().min(1).max(128),
  depositSecret: z.string().min(1),
  cashoutLogin: max32,
  cashoutPass: max32,
  cashoutSecret: z.string().min(1),
  readOnlyKey: z.string().min(1),
  notificationUrl: z.url().nullable().default(null),
  pci: z.boolean().default(true),
  timeZone: z.string().refine(isTimeZone, 'must be an IANA time zone').default('UTC'),
  settlement: settlementConfigSchema.default(settlementConfigSchema.parse({})),
});

export function parseAccounts(json: unknown): SandboxAccount[] {
  return z.array(accountSchema).parse(json);
}

export function loadAccountsFile(path: string): SandboxAccount[] {
  return parseAccounts(JSON.parse(readFileSync(path, 'utf8')));
}

/** Indexes for the auth paths (one map lookup per request). */
export class AccountRegistry {
  private readonly byLogin = new Map<string, SandboxAccount>();
  private readonly byCashoutLogin = new Map<string, SandboxAccount>();
  private readonly byReadOnlyKey = new Map<string, SandboxAccount>();
  private readonly byName = new Map<string, SandboxAccount>();

  constructor(accounts: readonly SandboxAccount[]) {
    for (const a of accounts) this.add(a);
  }

  add(account: SandboxAccount): void {
    for (const [map, key] of [
      [this.byName, account.name],
      [this.byLogin, account.login],
      [this.byCashoutLogin, account.cashoutLogin],
      [this.byReadOnlyKey, account.readOnlyKey],
    ] as const) {
      if (map.has(key)) throw new Error(`sandbox account ${account.name}: duplicate ${key}`);
    }
    this.byName.set(account.name, account);
    this.byLogin.set(account.login, account);
    this.byCashoutLogin.set(account.cashoutLogin, account);
    this.byReadOnlyKey.set(account.readOnlyKey, account);
  }

  all(): SandboxAccount[] {
    return [...this.byName.values()];
  }
  named(name: string): SandboxAccount | undefined {
    return this.byName.get(name);
  }
  byDepositLogin(login: string): SandboxAccount | undefined {
    return this.byLogin.get(login);
  }
  byCashout(login: string): SandboxAccount | undefined {
    return this.byCashoutLogin.get(login);
  }
  byReadOnly(key: string): SandboxAccount | undefined {
    return this.byReadOnlyKey.get(key);
  }
}
