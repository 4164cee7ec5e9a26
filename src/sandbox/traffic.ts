/**
 * Traffic: creates deposits, card deposits, cashouts and refunds over HTTP at a steady rate with a
 * realistic mix (about 5% test deposits, some crypto, early releases, card rejections and 3DS, cashouts
 * created on hold, partial refunds) and lets the automatic mode move them. Requests go through the
 * project's provider client (`traffic-client.ts`).
 */

import type { DepositCreateRequestInput, RefundCreateRequestInput } from '../provider/schemas.ts';
import type { SandboxAccount } from './accounts.ts';
import type { SandboxDeps } from './app.ts';
import type { TrafficControl } from './control.ts';
import type { DepositRecord } from './entities.ts';
import { type TrafficClient, trafficClientFor } from './traffic-client.ts';

const METHODS_BY_COUNTRY: Record<
  string,
  { method: string; beneficiary?: boolean; reported?: Record<string, string> }[]
> = {
  BR: [
    { method: 'IX' },
    { method: 'BL' },
    { method: 'SJ', beneficiary: true },
    { method: 'BB', reported: { bank_account_number: '12345-6', bank_branch: '1234-5' } },
  ],
  MX: [{ method: 'SE' }, { method: 'OX' }],
  CL: [{ method: 'IA', beneficiary: true }],
  PE: [{ method: 'BC', beneficiary: true }],
  CO: [{ method: 'EF' }, { method: 'PC' }],
};

const MIX = { deposit: 50, card: 25, cashout: 15, refund: 10 } as const;
/** How many of the newest deposits a refund looks through for one it can refund. */
const REFUND_LOOKBACK = 20_000;
/**
 * The bank_code forms a merchant sends for a Brazilian cashout (provider-facts.md): the code with its
 * leading zeros, without them, and as a number, for the bank listed as 1 and others.
 */
const CASHOUT_BANK_CODES: readonly (string | number)[] = ['001', '1', 1, '341', '033', '33', 237];

export class TrafficGenerator implements TrafficControl {
  private readonly deps: SandboxDeps;
  private readonly urls: { url: string; ccUrl: string };
  private timer: NodeJS.Timeout | null = null;
  private rate = 0;
  private owed = 0;
  private inFlight = 0;
  private seq = 0;
  private client: TrafficClient | null = null;
  private lastError: string | null = null;
  /** Deposits with a refund request in flight (two at once could ask for more than is left). */
  private readonly refunding = new Set<number>();
  readonly counts = { deposit: 0, card: 0, cashout: 0, refund: 0, errors: 0, skipped: 0 };
  private readonly maxInFlight: number;
  /** Told when the rate or the running state changes (the durable store keeps them). */
  onSettings: () => void = () => {};

  constructor(deps: SandboxDeps, urls: { url: string; ccUrl: string }, maxInFlight = 64) {
    this.deps = deps;
    this.urls = urls;
    this.maxInFlight = maxInFlight;
  }

  /**
   * Sends the traffic through `client` instead of a plain provider client for the first account (the
   * pipeline wraps it to record the merchant's intent of every creation).
   */
  useClient(client: TrafficClient): void {
    this.client = client;
  }

  /** Rate, running state and the sequence in generated ids (kept across restarts). */
  settings(): { rate: number; running: boolean; seq: number } {
    return { rate: this.rate, running: this.timer !== null, seq: this.seq };
  }

  /** Puts back stored settings; a generator that was running starts again. */
  restore(stored: { rate?: number; running?: boolean; seq?: number }): void {
    this.seq = Math.max(this.seq, stored.seq ?? 0);
    if (stored.running && stored.rate && stored.rate > 0) this.start(stored.rate);
    else if (stored.rate !== undefined) this.rate = stored.rate;
  }

  start(rate: number): void {
    this.stop();
    this.rate = rate;
    this.onSettings();
    const account = this.deps.accounts.all()[0] as SandboxAccount;
    this.client ??= trafficClientFor(account, this.urls);
    const tickMs = 50;
    let last = Date.now();
    this.timer = setInterval(() => {
      // Elapsed time, not the nominal tick: a busy event loop does not lower the rate.
      const now = Date.now();
      this.owed += (this.rate * (now - last)) / 1000;
      last = now;
      while (this.owed >= 1) {
        this.owed -= 1;
        if (this.inFlight >= this.maxInFlight) {
          this.counts.skipped++;
          continue;
        }
        this.inFlight++;
        void this.one()
          .catch((err: unknown) => {
            this.counts.errors++;
            this.lastError = err instanceof Error ? err.message : String(err);
          })
          .finally(() => {
            this.inFlight--;
          });
      }
    }, tickMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.onSettings();
  }

  status(): Record<string, unknown> {
    return {
      running: this.timer !== null,
      rate: this.rate,
      inFlight: this.inFlight,
      ...this.counts,
      lastError: this.lastError,
    };
  }

  private async one(): Promise<void> {
    const rng = this.deps.engine.rng;
    const kind = rng.weighted(MIX);
    const n = ++this.seq;
    this.onSettings();
    const client = this.client!;
    const amount = BigInt(rng.int(1000, 200_000));
    const payer = {
      document: String(rng.int(10_000_000_000, 99_999_999_999)),
      email: `payer${n}@example.com`,
      first_name: rng.pick(['Ana', 'Joao', 'Maria', 'Pedro', 'Lucia']),
      last_name: rng.pick(['Silva', 'Souza', 'Lima', 'Costa']),
    };
    switch (kind) {
      case 'deposit': {
        const country = rng.pick(Object.keys(METHODS_BY_COUNTRY));
        const m = rng.pick(METHODS_BY_COUNTRY[country]!);
        const body: DepositCreateRequestInput = {
          invoice_id: `trf-${rng.hex(10)}-${n}`,
          country,
          currency: this.deps.engine.catalogue.countries[country]!.currency,
          amount,
          payment_method: m.method,
          test: rng.chance(0.05),
          early_release: rng.chance(0.03),
        };
        // About one deposit in five leaves the payer out: a HOSTED checkout.
        if (!rng.chance(0.2)) body.payer = payer;
        if (m.beneficiary)
          body.reported_info = { bank_beneficiary: `${payer.first_name} ${payer.last_name}` };
        if (m.reported) body.reported_info = m.reported;
        if (rng.chance(0.04))
          body.crypto = { currency: 'USDT', wallet: `0x${rng.hex(40)}`, network: 'ERC20' };
        await client.createDeposit(body);
        this.counts.deposit++;
        return;
      }
      case 'card': {
        const cards = this.deps.engine.catalogue.testCards;
        // 15% rejection cards, 10% 3DS, the rest a plain valid card.
        const roll = rng.next();
        const number =
          roll < 0.15
            ? rng.pick(cards.filter((c) => c.result === 'REJECTED')).number
            : roll < 0.25
              ? rng.pick(cards.filter((c) => c.result === 'PENDING_AUTHENTICATION')).number
              : '4111111111111111';
        await client.createCardDeposit({
          invoice_id: `trc-${rng.hex(10)}-${n}`,
          country: 'BR',
          currency: 'BRL',
          amount,
          client_ip: '203.0.113.7',
          payer,
          credit_card: {
            card_number: number,
            cvv: '123',
            expiration_month: '12',
            expiration_year: String((new Date().getUTCFullYear() + 3) % 100).padStart(2, '0'),
            holder_name: `${payer.first_name} ${payer.last_name}`,
          },
        });
        this.counts.card++;
        return;
      }
      case 'cashout': {
        await client.createCashout({
          external_id: `trp-${rng.hex(10)}-${n}`,
          country: 'BR',
          currency: 'BRL',
          amount,
          document_id: payer.document,
          beneficiary_name: payer.first_name,
          beneficiary_lastname: payer.last_name,
          bank_code: rng.pick(CASHOUT_BANK_CODES),
          bank_account: '123456-7',
          bank_branch: '0001',
          account_type: 'C',
          notification_url: 'https://merchant.example/webhooks/cashouts',
          on_hold: rng.chance(0.2),
        });
        this.counts.cashout++;
        return;
      }
      case 'refund': {
        // One of the 200 newest refundable deposits, half the time a card deposit and half the time a bank
        // one (card deposits complete at once, so the newest refundable ones would nearly all be cards, all
        // in BRL and never test), looking back over at most REFUND_LOOKBACK deposits (a scan of every
        // deposit per refund made creation quadratic: 20% of a 5,000-entity run's CPU).
        const card = rng.chance(0.5);
        const recent: DepositRecord[] = [];
        const other: DepositRecord[] = [];
        let looked = 0;
        for (const d of this.deps.engine.depositsNewestFirst()) {
          if (++looked > REFUND_LOOKBACK || recent.length === 200) break;
          if (
            d.status === 'COMPLETED' &&
            !d.crypto &&
            d.amount - d.refundedAmount > 100n &&
            !this.refunding.has(d.id)
          ) {
            if ((d.card !== null) === card) recent.push(d);
            else if (other.length < 200) other.push(d);
          }
        }
        const pool = recent.length > 0 ? recent : other;
        if (pool.length === 0) return;
        const d = rng.pick(pool.reverse());
        const remaining = d.amount - d.refundedAmount;
        const partial = rng.chance(0.5);
        const body: RefundCreateRequestInput = { deposit_id: d.id };
        if (partial) body.amount = remaining / 2n;
        else body.amount = remaining;
        if (!d.card) {
          body.bank_account = {
            beneficiary: 'Ana Silva',
            bank_code: '341',
            branch: '0001',
            account_number: '123456-7',
            account_type: 'C',
          };
        }
        this.refunding.add(d.id);
        try {
          await client.createRefund(body);
        } finally {
          this.refunding.delete(d.id);
        }
        this.counts.refund++;
        return;
      }
    }
  }
}
