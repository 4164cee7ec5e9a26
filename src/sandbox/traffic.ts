/**
 * Traffic: creates deposits, card deposits, cashouts and refunds over HTTP at a steady rate with a
 * realistic mix (about 5% test deposits, some crypto, early releases, card rejections and 3DS, cashouts
 * created on hold, partial refunds) and lets the automatic mode move them. Requests go through the
 * project's provider client (`traffic-client.ts`).
 *
 * The generator is a merchant, and keeps its creations as a merchant should: each request is stored
 * (`pending:<key>` in the durable store, on disk before the request is sent) until the provider's answer
 * is known, and a restart sends the ones left again with the same idempotency key (a cashout with the
 * same external_id), so an answer lost to a crash is asked for again rather than forgotten. Card data is
 * never stored: a card deposit keeps the card's row in the sandbox's public test-card table and rebuilds
 * the card from it.
 */

import { randomUUID } from 'node:crypto';
import { ProviderError } from '../provider/errors.ts';
import type {
  CardDepositRequestInput,
  DepositCreateRequestInput,
  RefundCreateRequestInput,
} from '../provider/schemas.ts';
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
 * The bank_code forms a merchant sends for a Brazilian cashout (docs/provider.md): the code with its
 * leading zeros, without them, and as a number, for the bank listed as 1 and others.
 */
const CASHOUT_BANK_CODES: readonly (string | number)[] = ['001', '1', 1, '341', '033', '33', 237];
/** The plain valid card of card deposits (not a row of the test-card table). */
const PLAIN_CARD = '4111111111111111';

/** A creation sent whose answer is not known yet (kept across restarts with a data directory). */
export interface PendingCreation {
  kind: 'deposit' | 'card' | 'cashout' | 'refund';
  /** The X-Idempotency-Key (deposits, card deposits, refunds); null for a cashout (its external_id). */
  key: string | null;
  /** The request as sent, without card data. */
  request: Record<string, unknown>;
  /** A card deposit's card: its row in the test-card table (-1: the plain valid card) and expiry year. */
  card?: { row: number; year: string };
}

/** A refusal (a 4xx other than 429): the provider answered, nothing to ask again. */
function refused(err: unknown): boolean {
  return (
    err instanceof ProviderError &&
    err.status !== null &&
    err.status >= 400 &&
    err.status < 500 &&
    err.status !== 429
  );
}

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
  /** Creations sent whose answer is not known yet, by idempotency key (cashouts: external_id). */
  private readonly pending = new Map<string, PendingCreation>();
  /** Told `pending:<id>` when a creation is stored or forgotten (the durable store keeps them). */
  onPending: (key: string) => void = () => {};
  /** Pending creations restored at start, sent again once a client is set. */
  private restoredPending: string[] = [];
  /** Creations sent again after a restart, and how many of them got the provider's answer. */
  readonly replays = { sent: 0, answered: 0 };

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
    this.replayRestored();
  }

  /** A stored pending creation (undefined once its answer is known). */
  pendingCreation(id: string): PendingCreation | undefined {
    return this.pending.get(id);
  }

  pendingEntries(): IterableIterator<[string, PendingCreation]> {
    return this.pending.entries();
  }

  /** Puts back a creation left pending by the last run; it is sent again once a client is set. */
  restorePending(id: string, creation: PendingCreation): void {
    this.pending.set(id, creation);
    this.restoredPending.push(id);
  }

  /** Sends again, one at a time, the creations the last run left without an answer. */
  private replayRestored(): void {
    const ids = this.restoredPending;
    if (ids.length === 0 || this.client === null) return;
    this.restoredPending = [];
    void (async () => {
      for (const id of ids) {
        const creation = this.pending.get(id);
        if (!creation) continue;
        this.replays.sent++;
        try {
          await this.send(id, creation, true);
          this.replays.answered++;
        } catch (err) {
          if (!this.pending.has(id)) this.replays.answered++;
          this.counts.errors++;
          this.lastError = err instanceof Error ? err.message : String(err);
        }
      }
    })();
  }

  /**
   * Stores a creation (on disk before anything is sent, with a data directory), sends it, and forgets it
   * once the provider answered (an entity or a refusal). An unknown outcome stays stored: the next start
   * sends it again.
   */
  private async create(id: string, creation: PendingCreation): Promise<void> {
    this.pending.set(id, creation);
    this.onPending(`pending:${id}`);
    await this.deps.durable?.sync();
    await this.send(id, creation);
  }

  /** Sends a creation; `resend`: it may have been sent before (a cashout's 511 is then looked up). */
  private async send(id: string, creation: PendingCreation, resend = false): Promise<void> {
    const client = this.client!;
    const opts = creation.key === null ? {} : { idempotencyKey: creation.key };
    try {
      switch (creation.kind) {
        case 'deposit':
          await client.createDeposit(creation.request as unknown as DepositCreateRequestInput, opts);
          break;
        case 'card':
          await client.createCardDeposit(this.withCard(creation), opts);
          break;
        case 'cashout':
          await client.createCashout(
            creation.request as unknown as Parameters<TrafficClient['createCashout']>[0],
            resend ? { resend: true } : {},
          );
          break;
        case 'refund':
          await client.createRefund(creation.request as unknown as RefundCreateRequestInput, opts);
          break;
      }
    } catch (err) {
      // Kept only when the outcome is unknown (no answer, a 5xx, a 429 after every retry).
      if (!(err instanceof ProviderError) || refused(err)) this.forget(id);
      throw err;
    }
    this.forget(id);
  }

  private forget(id: string): void {
    if (this.pending.delete(id)) this.onPending(`pending:${id}`);
  }

  /** The card deposit request with its card, rebuilt from the test-card table (never stored). */
  private withCard(creation: PendingCreation): CardDepositRequestInput {
    const req = creation.request as unknown as CardDepositRequestInput & {
      payer: { first_name: string; last_name: string };
    };
    const row = creation.card?.row ?? -1;
    const number = row < 0 ? PLAIN_CARD : this.deps.engine.catalogue.testCards[row]!.number;
    return {
      ...req,
      credit_card: {
        card_number: number,
        cvv: '123',
        expiration_month: '12',
        expiration_year: creation.card?.year ?? '00',
        holder_name: `${req.payer.first_name} ${req.payer.last_name}`,
      },
    };
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
    this.replayRestored();
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
      pending: this.pending.size,
      replayed: this.replays.sent,
      replayAnswered: this.replays.answered,
      lastError: this.lastError,
    };
  }

  private async one(): Promise<void> {
    const rng = this.deps.engine.rng;
    const kind = rng.weighted(MIX);
    const n = ++this.seq;
    this.onSettings();
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
        const key = randomUUID();
        await this.create(key, { kind: 'deposit', key, request: body as unknown as Record<string, unknown> });
        this.counts.deposit++;
        return;
      }
      case 'card': {
        const cards = this.deps.engine.catalogue.testCards;
        // 15% rejection cards, 10% 3DS, the rest a plain valid card.
        const roll = rng.next();
        const pick = (result: string) => {
          const rows = cards.flatMap((c, i) => (c.result === result ? [i] : []));
          return rng.pick(rows);
        };
        const row = roll < 0.15 ? pick('REJECTED') : roll < 0.25 ? pick('PENDING_AUTHENTICATION') : -1;
        const key = randomUUID();
        await this.create(key, {
          kind: 'card',
          key,
          request: {
            invoice_id: `trc-${rng.hex(10)}-${n}`,
            country: 'BR',
            currency: 'BRL',
            amount,
            client_ip: '203.0.113.7',
            payer,
          },
          card: { row, year: String((new Date().getUTCFullYear() + 3) % 100).padStart(2, '0') },
        });
        this.counts.card++;
        return;
      }
      case 'cashout': {
        const externalId = `trp-${rng.hex(10)}-${n}`;
        await this.create(externalId, {
          kind: 'cashout',
          key: null,
          request: {
            external_id: externalId,
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
          },
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
          const key = randomUUID();
          await this.create(key, {
            kind: 'refund',
            key,
            request: body as unknown as Record<string, unknown>,
          });
        } finally {
          this.refunding.delete(d.id);
        }
        this.counts.refund++;
        return;
      }
    }
  }
}
