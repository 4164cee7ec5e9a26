/**
 * `payrecon up` on one data directory, stopped once with SIGTERM and once with SIGKILL while the
 * sandbox's traffic runs (creations in flight), started again each time. The sandbox keeps its state under `<data dir>/sandbox`,
 * so nothing restarts from an empty provider: ids continue, and at the end the ledger equals the
 * sandbox's ground truth per account, currency and book account, `payrecon db verify` exits 0, and no
 * exception is one that a restart alone would cause (a re-used id or a forgotten entity shows as
 * ILLEGAL_TRANSITION, AMOUNT_MISMATCH, CURRENCY_MISMATCH, MISSING_AT_PROVIDER, OVER_REFUNDED, FACTS_CHANGED
 * or UNKNOWN_TRANSACTION).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { balances } from '../../src/db/read-models/balances.ts';
import { parseAmount } from '../../src/domain/money.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';
import { waitFor } from '../helpers/wait.ts';

const repo = join(import.meta.dirname, '../..');
const dataDir = mkdtempSync(join(tmpdir(), 'payrecon-up-restart-'));
let tdb: TestDatabase;
const children = new Set<ChildProcess>();

beforeAll(async () => {
  tdb = await createTestDatabase();
});

afterAll(async () => {
  for (const c of children) {
    if (c.exitCode === null && c.signalCode === null) {
      const exited = new Promise((r) => c.once('exit', r));
      c.kill('SIGKILL');
      await exited;
    }
  }
  await tdb?.drop();
  rmSync(dataDir, { recursive: true, force: true });
});

function env(): NodeJS.ProcessEnv {
  return {
    ...process.env,
    DATABASE_URL: tdb.url,
    PAYRECON_DATA_DIR: dataDir,
    PAYRECON_WEB_PORT: '0',
    PAYRECON_METRICS_PORT: '0',
    LOG_LEVEL: 'error',
  };
}

interface Up {
  child: ChildProcess;
  control: string;
  out: () => string;
}

async function up(): Promise<Up> {
  const child = spawn(process.execPath, ['bin/payrecon.mjs', 'up', '--traffic', '8'], {
    cwd: repo,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: env(),
  });
  children.add(child);
  let out = '';
  child.stdout!.on('data', (c) => {
    out += c;
  });
  child.stderr!.on('data', (c) => {
    out += c;
  });
  const started = () => /sandbox\s+control (\S+)/.test(out) && /endpoints /.test(out);
  await waitFor(
    () => `payrecon up to start: ${out}`,
    () => started() || child.exitCode !== null,
    {
      ms: 120_000,
      every: 100,
    },
  );
  if (!started()) throw new Error(`payrecon up did not start: ${out}`);
  return { child, control: /sandbox\s+control (\S+)/.exec(out)![1]!.replace(/\/$/, ''), out: () => out };
}

async function stop(u: Up, signal: NodeJS.Signals): Promise<void> {
  const exited = new Promise((r) => u.child.once('exit', r));
  u.child.kill(signal);
  await exited;
}

async function controlJson(u: Up, path: string, method = 'GET', body?: unknown) {
  const res = await fetch(`${u.control}${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  expect(res.ok).toBe(true);
  // biome-ignore lint/suspicious/noExplicitAny: control API answers read loosely
  return (await res.json()) as any;
}

interface Exported {
  deposits: { id: number; status: string }[];
  cashouts: { id: number; status: string }[];
  refunds: { id: number; status: string }[];
}

const maxIds = (e: Exported) => ({
  deposit: Math.max(0, ...e.deposits.map((d) => d.id)),
  cashout: Math.max(0, ...e.cashouts.map((c) => c.id)),
});

describe('payrecon up on one data directory across SIGTERM and SIGKILL', () => {
  it('keeps the sandbox, continues ids, and the ledger ends equal to the ground truth', async () => {
    const first = await up();
    const before1 = await waitFor(
      'the first run to create more than 10 deposits',
      async () => {
        const e = (await controlJson(first, '/export')) as Exported;
        return e.deposits.length > 10 ? e : undefined;
      },
      { ms: 120_000, every: 500 },
    );
    expect(before1.deposits.length).toBeGreaterThan(10);
    await stop(first, 'SIGTERM');
    expect(first.child.exitCode).toBe(0);

    const second = await up();
    const after1 = (await controlJson(second, '/export')) as Exported;
    // Everything the first run had is still there, with the same status or further along.
    const ids1 = new Set(after1.deposits.map((d) => d.id));
    expect(before1.deposits.every((d) => ids1.has(d.id))).toBe(true);
    // Creations held 0.3-1.5 s before the provider handles them: at 8 a second, about seven are in flight.
    const slow = { latencyMs: [300, 1_500] };
    await controlJson(second, '/faults', 'PUT', {
      endpoints: {
        'deposit.create': slow,
        'card.create': slow,
        'cashout.create': slow,
        'refund.create': slow,
      },
    });
    // The kill lands while the traffic runs. What the provider answered is on its disk; the traffic
    // generator (a merchant) kept every creation it sent without an answer, and sends them again after the
    // restart with the same idempotency key (a cashout with the same external_id): the provider answers
    // with what it created, or creates it now, and the merchant's intents complete. Without that, a card
    // deposit whose answer the kill took would never reach the ledger (it sends no notification).
    const before2 = await waitFor(
      'the second run to create deposits',
      async () => {
        const e = (await controlJson(second, '/export')) as Exported;
        return e.deposits.length > after1.deposits.length ? e : undefined;
      },
      { ms: 120_000, every: 500 },
    );
    expect(before2.deposits.length).toBeGreaterThan(after1.deposits.length);
    // Everything the export shows is on disk: the sandbox sends an answer only after the journal's fsync
    // of every change made before it. So are the creations `/traffic` counts as pending (stored before they
    // are sent), and each of those waits at least 0.3 s for its answer: the kill lands with three or more
    // of them unanswered.
    const inFlight = await waitFor(
      'three creations sent and not yet answered',
      async () => {
        const t = (await controlJson(second, '/traffic')) as {
          inFlight: number;
          pending: number;
          running: boolean;
        };
        return t.pending >= 3 && t.inFlight >= 3 ? t : undefined;
      },
      { ms: 60_000, every: 20 },
    );
    expect(inFlight.running).toBe(true);
    await stop(second, 'SIGKILL');

    const third = await up();
    await controlJson(third, '/faults', 'PUT', {});
    const after2 = (await controlJson(third, '/export')) as Exported;
    const ids2 = new Set(after2.deposits.map((d) => d.id));
    expect(before2.deposits.every((d) => ids2.has(d.id))).toBe(true);
    // Ids continue past everything seen before the kill.
    const later = await waitFor(
      'the third run to create deposits',
      async () => {
        const e = (await controlJson(third, '/export')) as Exported;
        return e.deposits.some((d) => !ids2.has(d.id)) ? e : undefined;
      },
      { ms: 120_000, every: 500 },
    );
    const fresh = later.deposits.filter((d) => !ids2.has(d.id));
    expect(fresh.length).toBeGreaterThan(0);
    expect(Math.min(...fresh.map((d) => d.id))).toBeGreaterThan(maxIds(before2).deposit);

    // The creations left without an answer by the kill were sent again, and each got one.
    let replayed = { replayed: 0, replayAnswered: -1, pending: 0 };
    await waitFor(
      () => `an answer to every creation sent again (${replayed.replayAnswered} of ${replayed.replayed})`,
      async () => {
        replayed = (await controlJson(third, '/traffic')) as typeof replayed;
        return replayed.replayed > 0 && replayed.replayAnswered === replayed.replayed;
      },
      { ms: 60_000, every: 500 },
    );
    console.info(
      `up-restart: ${replayed.replayed} creations sent again after the kill, ${replayed.replayAnswered} answered`,
    );
    expect(replayed.replayed).toBeGreaterThan(0);
    expect(replayed.replayAnswered).toBe(replayed.replayed);

    // Quiet: no more traffic, no more automatic moves; then the ledger catches up with the sandbox.
    await controlJson(third, '/traffic', 'DELETE');
    await waitFor(
      'the stopped traffic to have no creation in flight',
      async () => {
        const t = (await controlJson(third, '/traffic')) as { inFlight: number; running: boolean };
        return !t.running && t.inFlight === 0;
      },
      { ms: 60_000, every: 200 },
    );
    await controlJson(third, '/auto', 'PUT', { ...(await controlJson(third, '/auto')), enabled: false });
    let differ: string[] = [];
    await waitFor(
      () => `the ledger's mirrors to equal the sandbox: ${differ.slice(0, 10).join('; ')}`,
      async () => {
        const final = (await controlJson(third, '/export')) as Exported;
        const mirrors = await tdb.db
          .selectFrom('mirrors')
          .select(['entity_kind', 'entity_id', 'status'])
          .execute();
        const seen = new Map(mirrors.map((m) => [`${m.entity_kind}:${m.entity_id}`, m.status]));
        differ = [
          ...final.deposits.map((d) => ['deposit', d] as const),
          ...final.cashouts.map((c) => ['cashout', c] as const),
          ...final.refunds.map((r) => ['refund', r] as const),
        ]
          .filter(([kind, e]) => seen.get(`${kind}:${e.id}`) !== e.status)
          .map(([kind, e]) => `${kind}:${e.id} sandbox ${e.status} ledger ${seen.get(`${kind}:${e.id}`)}`);
        return differ.length === 0;
      },
      { ms: 180_000, every: 1_000 },
    );
    expect(differ.slice(0, 10)).toEqual([]);

    // The ledger equals the ground truth per account, currency and book account.
    const truth = (await controlJson(third, '/balances')) as Record<string, string>[];
    const ledger = new Map<string, bigint>();
    for (const r of await balances(tdb.db)) {
      const k = `${r.merchantAccount}|${r.currency}|${r.account}`;
      ledger.set(k, (ledger.get(k) ?? 0n) + r.balance);
    }
    const cells: [string, string, bigint][] = [
      ['available', 'available', 1n],
      ['reserved', 'reserved', 1n],
      ['deposits', 'deposits', -1n],
      ['fees', 'fees', 1n],
      ['payouts', 'payouts', 1n],
      ['refunds', 'refunds', 1n],
      ['test_available', 'test_available', 1n],
      ['crypto_in_transit', 'crypto_in_transit', 1n],
      ['crypto_customer_wallets', 'crypto_wallets', 1n],
    ];
    const diffs: string[] = [];
    for (const row of truth) {
      for (const [name, field, sign] of cells) {
        const k = `${row.account}|${row.currency}|${name}`;
        const want = parseAmount(row[field]!, { field, allowNegative: true }) * sign;
        const got = ledger.get(k) ?? 0n;
        if (got !== want) diffs.push(`${k}: ledger ${got}, ground truth ${want}`);
      }
    }
    expect(diffs).toEqual([]);

    // No exception a restart alone would cause.
    const exceptions = await tdb.db
      .selectFrom('exceptions')
      .select(['type', 'entity_kind', 'entity_id'])
      .execute();
    const restartKinds = [
      'ILLEGAL_TRANSITION',
      'AMOUNT_MISMATCH',
      'CURRENCY_MISMATCH',
      'MISSING_AT_PROVIDER',
      'OVER_REFUNDED',
      'FACTS_CHANGED',
      'UNKNOWN_TRANSACTION',
      'DUPLICATE_INVOICE',
      'OUTCOME_UNKNOWN',
    ];
    expect(exceptions.filter((x) => restartKinds.includes(x.type))).toEqual([]);
    // No creation is left with an unknown outcome the ledger cannot place: every intent still unknown
    // names an entity the ledger observed (by its reference, or for a refund by its deposit and amount).
    const unplaced = await tdb.db
      .selectFrom('intents as i')
      .select(['i.operation', 'i.external_ref'])
      .where('i.outcome', '=', 'unknown')
      .where('i.entity_id', 'is', null)
      .where((eb) =>
        eb.not(
          eb.exists(
            eb
              .selectFrom('mirrors as m')
              .select('m.entity_id')
              .where((w) =>
                w.or([
                  w('m.intent_id', '=', w.ref('i.intent_id')),
                  w.and([
                    w('m.external_ref', '=', w.ref('i.external_ref')),
                    w('m.entity_kind', '=', w.ref('i.entity_kind')),
                  ]),
                ]),
              ),
          ),
        ),
      )
      .execute();
    expect(unplaced).toEqual([]);
    await stop(third, 'SIGTERM');

    const verify = spawnSync(process.execPath, ['bin/payrecon.mjs', 'db', 'verify'], {
      cwd: repo,
      env: env(),
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(verify.stdout + verify.stderr).toMatch(/all invariants hold/);
    expect(verify.status).toBe(0);
  }, 600_000);
});
