/**
 * The sandbox's state as durable keys (`--data-dir`): which key holds what, how the journal reads the
 * current value of a key, and how a restart puts everything back. The journal itself (`journal.ts`)
 * knows nothing of the sandbox.
 *
 * | key | holds |
 * |---|---|
 * | `deposit:<id>`, `cashout:<id>`, `refund:<id>` | the record with its history (and planned late moves) |
 * | `ids` | the next id of each kind: ids never repeat across restarts |
 * | `idem:<scope>\u0000<key>` | an idempotency key: body hash and the answer given |
 * | `delivery:<id>` | a planned notification attempt (first or retry) with its sandbox time |
 * | `webhooks` | notification counters and the notification base URL |
 * | `faults`, `auto`, `traffic` | the settings (traffic: rate, running, sequence) |
| `pending:<key>` | a creation the traffic generator sent and has no answer for yet (no card data) |
 * | `settlement:<id>`, `bankentry:<ref>` | a settlement; an entry of a settlement bank account |
 * | `settlements` | per account: last cut-off and totals swept; bank accounts, anomalies, carry-overs, bank settings |
 * | `rng` | the position of each random stream |
 * | `clock` | sandbox time, so it never goes back |
 * | `meta` | format version and the number of starts |
 *
 * Moves the automatic mode has planned but not made are not stored (nobody has seen them): after a
 * restart it plans every entity's next move again.
 */

import type { SandboxDeps } from './app.ts';
import { type AutoSettings, autoSettingsSchema } from './automatic.ts';
import type { AnyRecord } from './entities.ts';
import type { Journal, JournalSource } from './journal.ts';
import type { StoredIdempotency } from './protocol.ts';
import type { BankEntry, SettlementRecord, SettlementsMeta } from './settlements.ts';
import type { PendingCreation, TrafficGenerator } from './traffic.ts';
import type { StoredDelivery } from './webhooks.ts';

export const STORE_VERSION = 1;

/** Real milliseconds between two writes of the clock when nothing else changes. */
const CLOCK_CHECKPOINT_MS = 5_000;

type RecordKind = AnyRecord['kind'];

const RECORD_KEY = /^(deposit|cashout|refund):/;

function recordKey(kind: RecordKind, id: number): string {
  return `${kind}:${id}`;
}

export interface RestoreSummary {
  deposits: number;
  cashouts: number;
  refunds: number;
  deliveries: number;
  idempotencyKeys: number;
  boots: number;
}

/** Sandbox time stored in `values`, if any. */
export function storedClock(values: Map<string, unknown>): number | undefined {
  const c = values.get('clock') as { now?: number } | undefined;
  return typeof c?.now === 'number' ? c.now : undefined;
}

/**
 * Puts the stored state back into freshly built `deps` (before any hook is attached, so nothing is
 * written again). Settings found in the store replace those given at start-up.
 */
export function restoreSandbox(deps: SandboxDeps, values: Map<string, unknown>): RestoreSummary {
  const { engine } = deps;
  const summary: RestoreSummary = {
    deposits: 0,
    cashouts: 0,
    refunds: 0,
    deliveries: 0,
    idempotencyKeys: 0,
    boots: 0,
  };
  const deliveries: StoredDelivery[] = [];
  const settlements: SettlementRecord[] = [];
  const bankEntries: BankEntry[] = [];
  for (const [key, value] of values) {
    const colon = key.indexOf(':');
    const prefix = colon < 0 ? key : key.slice(0, colon);
    switch (prefix) {
      case 'deposit':
      case 'cashout':
      case 'refund':
        engine.restore(value as AnyRecord);
        summary[`${prefix}s`]++;
        break;
      case 'idem':
        deps.idempotency.restore(key.slice(colon + 1), value as StoredIdempotency);
        summary.idempotencyKeys++;
        break;
      case 'delivery':
        deliveries.push(value as StoredDelivery);
        break;
      case 'settlement':
        settlements.push(value as SettlementRecord);
        break;
      case 'bankentry':
        bankEntries.push(value as BankEntry);
        break;
      default:
        break;
    }
  }
  engine.restoreIds((values.get('ids') as Parameters<typeof engine.restoreIds>[0]) ?? {});
  const faults = values.get('faults');
  if (faults !== undefined) deps.faults.set(faults);
  const auto = values.get('auto');
  // Assigned, not `set`: switching on here would plan moves twice (rearm plans them).
  if (auto !== undefined) deps.auto.settings = autoSettingsSchema.parse(auto) as AutoSettings;
  const meta = values.get('meta') as { boots?: number } | undefined;
  summary.boots = (meta?.boots ?? 0) + 1;
  const rngs = values.get('rng') as Record<string, number> | undefined;
  for (const [name, rng] of Object.entries(deps.rngs)) {
    const state = rngs?.[name];
    // Mixed with the start count: draws made after the last write (never seen) are not replayed.
    if (typeof state === 'number') rng.setState((state + Math.imul(summary.boots, 0x9e3779b9)) >>> 0);
  }
  deliveries.sort((a, b) => a.id - b.id);
  summary.deliveries = deliveries.length;
  deps.webhooks.restore(
    values.get('webhooks') as Parameters<typeof deps.webhooks.restore>[0],
    deliveries,
    (kind, id) => engine.get(kind, id),
  );
  deps.settlements.restore(
    values.get('settlements') as SettlementsMeta | undefined,
    settlements,
    bankEntries,
  );
  engine.rearm();
  deps.auto.rearm();
  return summary;
}

export interface AttachedStore {
  journal: Journal;
  /** Stops the clock checkpoints and the settings hooks (before a clean close). */
  detach(): void;
}

/** Connects the sandbox's change hooks to the journal and gives it the current values. */
export function attachSandbox(
  deps: SandboxDeps,
  journal: Journal,
  traffic: TrafficGenerator,
  boots: number,
): AttachedStore {
  const { engine } = deps;
  const meta = { version: STORE_VERSION, boots };
  const source: JournalSource = {
    get(key) {
      const colon = key.indexOf(':');
      const prefix = colon < 0 ? key : key.slice(0, colon);
      switch (prefix) {
        case 'deposit':
        case 'cashout':
        case 'refund':
          return engine.get(prefix, Number(key.slice(colon + 1)));
        case 'idem':
          return deps.idempotency.stored(key.slice(colon + 1));
        case 'delivery':
          return deps.webhooks.pending.get(Number(key.slice(colon + 1)));
        case 'ids':
          return engine.ids();
        case 'webhooks':
          return deps.webhooks.state();
        case 'faults':
          return deps.faults.settings;
        case 'auto':
          return deps.auto.settings;
        case 'traffic':
          return traffic.settings();
        case 'rng':
          return Object.fromEntries(Object.entries(deps.rngs).map(([n, r]) => [n, r.getState()]));
        case 'clock':
          return { now: deps.clock.now() };
        case 'meta':
          return meta;
        case 'pending':
          return traffic.pendingCreation(key.slice(colon + 1));
        case 'settlement':
          return deps.settlements.settlements.get(key.slice(colon + 1));
        case 'bankentry':
          return deps.settlements.entries.get(key.slice(colon + 1));
        case 'settlements':
          return deps.settlements.meta;
        default:
          return undefined;
      }
    },
    *entries() {
      for (const k of [
        'meta',
        'ids',
        'webhooks',
        'faults',
        'auto',
        'traffic',
        'settlements',
        'rng',
        'clock',
      ]) {
        yield [k, source.get(k)];
      }
      for (const d of engine.deposits.values()) yield [recordKey('deposit', d.id), d];
      for (const c of engine.cashouts.values()) yield [recordKey('cashout', c.id), c];
      for (const r of engine.refunds.values()) yield [recordKey('refund', r.id), r];
      for (const [id, v] of deps.idempotency.storedEntries()) yield [`idem:${id}`, v];
      for (const [id, v] of deps.webhooks.pending) yield [`delivery:${id}`, v];
      for (const [id, v] of traffic.pendingEntries()) yield [`pending:${id}`, v];
      for (const [id, v] of deps.settlements.settlements) yield [`settlement:${id}`, v];
      for (const [ref, v] of deps.settlements.entries) yield [`bankentry:${ref}`, v];
    },
  };
  journal.attach(source);
  // Every change also writes the random streams' positions and the time (a few bytes).
  const mark = (key: string) => {
    // An entity created or moved by an idempotent request is held until the key's answer is stored:
    // the two reach the disk together (a retry after a crash then gets the first answer, never a
    // "duplicate invoice_id" for an entity whose answer was lost).
    const hold = deps.idempotency.activeHold;
    journal.mark(key, hold !== undefined && RECORD_KEY.test(key) ? hold : undefined);
    journal.mark('rng');
    journal.mark('clock');
  };
  engine.onDirty = mark;
  deps.idempotency.onDirty = mark;
  deps.idempotency.holds = { hold: () => journal.hold(), release: (t) => journal.release(t) };
  deps.webhooks.setHooks({ onDirty: mark, beforeSend: () => journal.sync() });
  deps.settlements.onDirty = mark;
  deps.faults.onSettings = () => mark('faults');
  deps.auto.onSettings = () => mark('auto');
  traffic.onSettings = () => mark('traffic');
  traffic.onPending = (key) => journal.mark(key);
  deps.durable = journal;
  // The start count and the settings as they are now (start-up options on a fresh directory).
  for (const k of ['meta', 'ids', 'webhooks', 'faults', 'auto', 'traffic', 'settlements']) mark(k);
  const checkpoint = setInterval(() => journal.mark('clock'), CLOCK_CHECKPOINT_MS);
  checkpoint.unref();
  return {
    journal,
    detach() {
      clearInterval(checkpoint);
      // A clean stop keeps the settings as they were (traffic.stop() would store "not running").
      traffic.onSettings = () => {};
      // Answers still arriving leave their creation stored: the next start asks again (same answer).
      traffic.onPending = () => {};
      deps.faults.onSettings = () => {};
      deps.auto.onSettings = () => {};
      journal.mark('clock');
    },
  };
}

/** The traffic generator's creations stored in `values` without an answer (`pending:<key>`). */
export function storedPending(values: Map<string, unknown>): [string, PendingCreation][] {
  const out: [string, PendingCreation][] = [];
  for (const [key, value] of values) {
    if (key.startsWith('pending:')) out.push([key.slice('pending:'.length), value as PendingCreation]);
  }
  return out;
}
